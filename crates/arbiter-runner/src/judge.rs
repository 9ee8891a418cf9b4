//! The pairwise judge: a model (role `selection`) compares two candidates' patches for the
//! task, in both orders, at temperature 0. The verdicts are combined in the core
//! (`arbiter_core::pairwise`): a win only when both orders agree. A malformed answer gets one
//! repair request; after that, or when every backend fails, the order counts as a tie and
//! the fallback is recorded. Every call is a cost record under the `selection` role, charged
//! to the run's budget as it is made; once the budget is spent no further call is made and
//! the orders left count as ties, with the reason recorded. An interrupted run (Ctrl-C,
//! SIGTERM) makes no further call either: every request is preceded by a check of the run's
//! cancel token, and a request in flight is abandoned when the token is cancelled.

use arbiter_core::cost::CallRecord;
use arbiter_core::ids::CandidateId;
use arbiter_core::pairwise::{OrderVerdict, PairRecord, SlotVerdict, combine};
use arbiter_core::task::Task;
use arbiter_llm::{ChatRequest, Endpoint, LlmClient, Message, ToolSpec, call_record, chat_with_fallback};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::budget::RunBudget;

/// Why a judge or reviewer request got no answer.
enum NotAnswered {
    /// The run was interrupted before it was sent.
    Interrupted,
    /// The run's budget was spent before it was sent.
    BudgetSpent,
    /// The run was interrupted while it was in flight (it was dropped).
    InterruptedInFlight,
    /// Every backend of the chain failed.
    Failed(String),
}

/// What judging needs: the model client, the task, the run's budget, and its cancel token.
pub struct Judges<'a> {
    pub client: &'a LlmClient,
    pub task: &'a Task,
    pub budget: &'a RunBudget,
    /// Cancelled when the run is interrupted: no request is made after that.
    pub cancel: &'a CancellationToken,
}

/// Why a judge or reviewer was not asked, or not heard out, after an interruption.
const INTERRUPTED: &str = "the run was interrupted";

/// One candidate as the judge sees it.
pub struct JudgeInput {
    pub id: CandidateId,
    pub diff: String,
    /// The gate and evidence results, in words.
    pub evidence: String,
}

/// Everything the judge did.
#[derive(Default)]
pub struct JudgeRun {
    pub pairs: Vec<PairRecord>,
    pub calls: Vec<CallRecord>,
}

/// Longest diff shown to the judge, per candidate.
const DIFF_LIMIT: usize = 12_000;

const SYSTEM: &str = "You are a strict code reviewer choosing between two candidate patches for the same task. \
Judge which patch is more likely to be correct and complete for the task and its success criteria, using the \
diffs and the test evidence. Ignore the order in which they are shown. Answer by calling the verdict tool once: \
preferred is \"first\", \"second\" or \"tie\", with a short rationale.";

fn verdict_tool() -> ToolSpec {
    ToolSpec {
        name: "verdict".into(),
        description: "Give the verdict on the two patches.".into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "preferred": {"type": "string", "enum": ["first", "second", "tie"]},
                "rationale": {"type": "string"}
            },
            "required": ["preferred", "rationale"],
            "additionalProperties": false
        }),
    }
}

fn shown(diff: &str) -> String {
    if diff.len() <= DIFF_LIMIT {
        return diff.to_string();
    }
    let mut cut = DIFF_LIMIT;
    while !diff.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}\n[diff truncated: {} more bytes]", &diff[..cut], diff.len() - cut)
}

fn prompt(task: &Task, first: &JudgeInput, second: &JudgeInput) -> String {
    format!(
        "# Task\n\n{}\n\n# Success criteria\n\n{}\n\n# First patch (candidate {})\n\nEvidence: {}\n\n```diff\n{}\n```\n\n# Second patch (candidate {})\n\nEvidence: {}\n\n```diff\n{}\n```\n",
        task.prompt.trim(),
        task.success_criteria.as_deref().unwrap_or("Complete the task with a minimal, correct change."),
        first.id,
        first.evidence,
        shown(&first.diff),
        second.id,
        second.evidence,
        shown(&second.diff)
    )
}

/// Reads a verdict from the tool call, or from JSON in the text.
fn parse_verdict(text: &str, calls: &[arbiter_llm::ToolCall]) -> Option<(SlotVerdict, String)> {
    let from_value = |v: &Value| {
        let preferred = match v.get("preferred")?.as_str()? {
            "first" => SlotVerdict::First,
            "second" => SlotVerdict::Second,
            "tie" => SlotVerdict::Tie,
            _ => return None,
        };
        Some((preferred, v.get("rationale").and_then(Value::as_str).unwrap_or("").to_string()))
    };
    if let Some(v) = calls.iter().find(|c| c.name == "verdict").and_then(|c| from_value(&c.arguments)) {
        return Some(v);
    }
    let start = text.find('{')?;
    let end = text.rfind('}')?;
    serde_json::from_str::<Value>(text.get(start..=end)?).ok().and_then(|v| from_value(&v))
}

const REVIEW_SYSTEM: &str = "You are a skeptical senior reviewer. Assess one candidate patch for the task: is it likely \
correct and complete, what could go wrong (error paths, edge cases, cleanup, concurrency), and what evidence is \
missing. Scores are between 0 and 1. Answer by calling the review tool once.";

impl Judges<'_> {
    async fn ask(
        &self,
        chain: &[Endpoint],
        first: &JudgeInput,
        second: &JudgeInput,
        calls: &mut Vec<CallRecord>,
    ) -> OrderVerdict {
        let mut messages = vec![Message::User(prompt(self.task, first, second))];
        let verdict = |preferred, rationale, backend, fallback| OrderVerdict {
            first: first.id.clone(),
            second: second.id.clone(),
            preferred,
            rationale,
            backend,
            fallback,
        };
        let mut last_problem = String::new();
        for attempt in 0..2 {
            let request = ChatRequest {
                system: Some(SYSTEM.into()),
                messages: messages.clone(),
                tools: vec![verdict_tool()],
                temperature: Some(0.0),
                max_tokens: Some(512),
            };
            match self.request(chain, &request, "selection", None, calls).await {
                Ok((i, response)) => {
                    if let Some((preferred, rationale)) = parse_verdict(&response.text, &response.tool_calls) {
                        return verdict(preferred, rationale, Some(chain[i].name.clone()), None);
                    }
                    last_problem = format!("malformed verdict from {}", chain[i].name);
                    if attempt == 0 {
                        messages.push(Message::Assistant { text: response.text.clone(), tool_calls: Vec::new() });
                        messages.push(Message::User(
                        "That was not a valid verdict. Call the verdict tool with preferred = \"first\", \"second\" or \"tie\" and a rationale.".into(),
                    ));
                    }
                }
                Err(not) => {
                    let why = match not {
                        NotAnswered::Interrupted => format!("{INTERRUPTED}; not asked"),
                        NotAnswered::BudgetSpent => {
                            format!("{}; not asked; counted as a tie", self.budget.reached_reason())
                        }
                        NotAnswered::InterruptedInFlight => format!("{INTERRUPTED} while the judge was asked"),
                        NotAnswered::Failed(e) => format!("no judge answered: {e}"),
                    };
                    return verdict(SlotVerdict::Tie, String::new(), None, Some(why));
                }
            }
        }
        verdict(
            SlotVerdict::Tie,
            String::new(),
            None,
            Some(format!("{last_problem} after one repair request; counted as a tie")),
        )
    }

    /// One request down `chain`, unless the run is interrupted or its budget spent; the
    /// answer's call is charged under `role` and recorded in `calls`.
    async fn request(
        &self,
        chain: &[Endpoint],
        request: &ChatRequest,
        role: &str,
        candidate: Option<CandidateId>,
        calls: &mut Vec<CallRecord>,
    ) -> Result<(usize, arbiter_llm::ChatResponse), NotAnswered> {
        if self.cancel.is_cancelled() {
            return Err(NotAnswered::Interrupted);
        }
        if self.budget.exhausted() {
            return Err(NotAnswered::BudgetSpent);
        }
        let Some(answer) = self.unless_cancelled(chat_with_fallback(self.client, chain, request, |_| {})).await else {
            return Err(NotAnswered::InterruptedInFlight);
        };
        let (i, response) = answer.map_err(|e| NotAnswered::Failed(e.to_string()))?;
        let call = call_record(role, &chain[i], candidate, response.usage.as_ref());
        self.budget.charge(&call).await;
        calls.push(call);
        Ok((i, response))
    }

    /// `work`, unless the run is interrupted first (`None`: the work is dropped).
    async fn unless_cancelled<T>(&self, work: impl std::future::Future<Output = T>) -> Option<T> {
        tokio::select! {
            biased;
            _ = self.cancel.cancelled() => None,
            done = work => Some(done),
        }
    }

    /// Judges every pair of `shortlist` in both orders; an interruption ends it after the
    /// pairs already judged.
    pub async fn compare_all(&self, chain: &[Endpoint], shortlist: &[JudgeInput]) -> JudgeRun {
        let mut run = JudgeRun::default();
        for i in 0..shortlist.len() {
            for j in (i + 1)..shortlist.len() {
                if self.cancel.is_cancelled() {
                    return run;
                }
                let (a, b) = (&shortlist[i], &shortlist[j]);
                let a_first = self.ask(chain, a, b, &mut run.calls).await;
                let b_first = self.ask(chain, b, a, &mut run.calls).await;
                let outcome = combine(&a.id, &b.id, a_first.preferred, b_first.preferred);
                run.pairs.push(PairRecord { a: a.id.clone(), b: b.id.clone(), a_first, b_first, outcome });
            }
        }
        run
    }

    /// Reviews each candidate (role `review`): structured output validated against the review
    /// schema, one repair request on a malformed answer, then a recorded fallback. An
    /// interruption ends it after the reviews already made.
    pub async fn review_all(
        &self,
        chain: &[Endpoint],
        candidates: &[JudgeInput],
    ) -> (Vec<arbiter_core::review::ReviewArtifact>, Vec<CallRecord>) {
        let task = self.task;
        use arbiter_core::review::{ReviewArtifact, schema, validate};
        let mut calls = Vec::new();
        let mut out = Vec::new();
        for c in candidates {
            if self.cancel.is_cancelled() {
                break;
            }
            let mut messages = vec![Message::User(format!(
                "# Task\n\n{}\n\n# Success criteria\n\n{}\n\n# Candidate {}\n\nEvidence: {}\n\n```diff\n{}\n```\n",
                task.prompt.trim(),
                task.success_criteria.as_deref().unwrap_or("Complete the task with a minimal, correct change."),
                c.id,
                c.evidence,
                shown(&c.diff)
            ))];
            let mut artifact = ReviewArtifact {
                schema_version: arbiter_core::artifact::SCHEMA_VERSION,
                candidate_id: c.id.clone(),
                backend: None,
                review: None,
                fallback: None,
                repaired: false,
            };
            for attempt in 0..2 {
                let request = ChatRequest {
                    system: Some(REVIEW_SYSTEM.into()),
                    messages: messages.clone(),
                    tools: vec![ToolSpec {
                        name: "review".into(),
                        description: "Give the review.".into(),
                        parameters: schema(),
                    }],
                    temperature: Some(0.0),
                    max_tokens: Some(1024),
                };
                match self.request(chain, &request, "review", Some(c.id.clone()), &mut calls).await {
                    Ok((i, response)) => {
                        artifact.backend = Some(chain[i].name.clone());
                        let value = response
                            .tool_calls
                            .iter()
                            .find(|t| t.name == "review")
                            .map(|t| t.arguments.clone())
                            .or_else(|| {
                                let (s, e) = (response.text.find('{')?, response.text.rfind('}')?);
                                serde_json::from_str::<Value>(response.text.get(s..=e)?).ok()
                            });
                        match value.as_ref().map(validate) {
                            Some(Ok(review)) => {
                                artifact.review = Some(review);
                                artifact.repaired = attempt == 1;
                                artifact.fallback = None;
                                break;
                            }
                            problem => {
                                let why = match problem {
                                    Some(Err(e)) => e,
                                    _ => "no review tool call and no JSON object".to_string(),
                                };
                                artifact.fallback = Some(format!("malformed review ({why}) after one repair request"));
                                messages
                                    .push(Message::Assistant { text: response.text.clone(), tool_calls: Vec::new() });
                                messages.push(Message::User(format!(
                                "That review is invalid: {why}. Call the review tool again with every field, scores between 0 and 1."
                            )));
                            }
                        }
                    }
                    Err(not) => {
                        artifact.fallback = Some(match not {
                            NotAnswered::Interrupted => format!("{INTERRUPTED}; no review was asked"),
                            NotAnswered::BudgetSpent => {
                                format!("{}; no review was asked", self.budget.reached_reason())
                            }
                            NotAnswered::InterruptedInFlight => format!("{INTERRUPTED} while the reviewer was asked"),
                            NotAnswered::Failed(e) => format!("no reviewer answered: {e}"),
                        });
                        break;
                    }
                }
            }
            out.push(artifact);
        }
        (out, calls)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_parse_from_tools_or_text() {
        let call = arbiter_llm::ToolCall {
            id: "1".into(),
            name: "verdict".into(),
            arguments: json!({"preferred": "second", "rationale": "handles negatives"}),
        };
        assert_eq!(parse_verdict("", &[call]), Some((SlotVerdict::Second, "handles negatives".into())));
        assert_eq!(
            parse_verdict("I pick {\"preferred\": \"tie\", \"rationale\": \"same\"} ok", &[]).map(|v| v.0),
            Some(SlotVerdict::Tie)
        );
        assert_eq!(parse_verdict("the first one", &[]), None);
        assert_eq!(parse_verdict("{\"preferred\": \"both\"}", &[]), None);
    }
}
