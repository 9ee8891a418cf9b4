//! The `spec` role's model calls: writing a spec, amending one, and spec QA's rounds. Each
//! call walks the role's backend chain (the next backend after an error or an empty
//! answer); every QA round is recorded as JSON beside the slice's other records.

use std::path::Path;
use std::sync::Arc;

use arbiter_llm::{ChatRequest, Endpoint, LlmClient, Message, chat_with_fallback};
use serde::Serialize;

use crate::spec::{self, QaVerdict};

/// The `spec` role's backends.
pub struct SpecModel {
    pub client: Arc<LlmClient>,
    pub chain: Vec<Endpoint>,
}

/// One answer, and who gave it.
pub struct Answer {
    pub text: String,
    pub backend: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl SpecModel {
    /// One call: `system` and `user`, the chain tried in order.
    pub async fn ask(&self, system: &str, user: &str) -> Result<Answer, String> {
        let request =
            ChatRequest { system: Some(system.to_string()), messages: vec![Message::user(user)], ..Default::default() };
        let (index, response) =
            chat_with_fallback(&self.client, &self.chain, &request, |_| {}).await.map_err(|e| e.to_string())?;
        if response.text.trim().is_empty() {
            return Err("the model answered with no text".into());
        }
        Ok(Answer {
            text: response.text,
            backend: self.chain.get(index).map(|e| e.name.clone()).unwrap_or_default(),
            input_tokens: response.usage.as_ref().map_or(0, |u| u.input_tokens),
            output_tokens: response.usage.as_ref().map_or(0, |u| u.output_tokens),
        })
    }
}

/// `spec-qa-<label>-<n>.json`: one QA round.
#[derive(Clone, Debug, Serialize)]
pub struct QaRound {
    pub schema_version: u32,
    pub round: u32,
    pub of: u32,
    pub backend: Option<String>,
    /// The verdict, when the reply was one.
    pub verdict: Option<QaVerdict>,
    /// Why the round has no verdict (the call failed, the reply was not a verdict).
    pub problem: Option<String>,
    /// Whether the round's corrected spec replaced the spec.
    pub corrected: bool,
}

/// How spec QA ended.
#[derive(Clone, Debug, Serialize)]
pub struct QaOutcome {
    /// The spec after QA (with the corrections it accepted).
    #[serde(skip)]
    pub spec: String,
    pub rounds: Vec<QaRound>,
    /// `valid`, `issues: ...`, or why QA did not conclude.
    pub verdict: String,
    pub passed: bool,
}

/// Spec QA: at most `rounds` rounds; a round with issues and a corrected spec replaces the
/// spec and the next round checks the correction; a valid verdict ends it. Every round is
/// written to `records` as `spec-qa-<label>-<n>.json`.
pub async fn qa(
    model: &SpecModel,
    rounds: u32,
    original: &str,
    amendments: &[String],
    spec_body: &str,
    records: &Path,
    label: &str,
) -> QaOutcome {
    let mut spec = spec_body.to_string();
    let mut done = Vec::new();
    let mut verdict_text = "not concluded".to_string();
    let mut passed = false;
    for round in 1..=rounds {
        let mut record = QaRound {
            schema_version: 1,
            round,
            of: rounds,
            backend: None,
            verdict: None,
            problem: None,
            corrected: false,
        };
        match model.ask(spec::QA_SYSTEM, &spec::qa_request(original, amendments, &spec)).await {
            Err(e) => record.problem = Some(format!("the QA call failed: {e}")),
            Ok(answer) => {
                record.backend = Some(answer.backend);
                match spec::parse_verdict(&answer.text) {
                    Err(e) => record.problem = Some(e),
                    Ok(v) => {
                        verdict_text = v.describe();
                        if let QaVerdict::Issues { corrected_spec: Some(c), .. } = &v
                            && let Ok(c) = spec::accept_written_spec(c)
                        {
                            spec = c;
                            record.corrected = true;
                        }
                        passed = v == QaVerdict::Valid;
                        record.verdict = Some(v);
                    }
                }
            }
        }
        if let Some(p) = &record.problem {
            verdict_text = format!("not concluded: {p}");
        }
        let _ = std::fs::create_dir_all(records);
        let _ = std::fs::write(
            records.join(format!("spec-qa-{label}-{round}.json")),
            serde_json::to_string_pretty(&record).unwrap_or_default() + "\n",
        );
        let stop = passed || (record.verdict.is_some() && !record.corrected);
        done.push(record);
        if stop {
            break;
        }
    }
    if !passed && done.len() as u32 == rounds && done.last().is_some_and(|r| r.corrected) {
        verdict_text = format!("{verdict_text} (QA rounds exhausted: the last correction is unchecked)");
    }
    QaOutcome { spec, rounds: done, verdict: verdict_text, passed }
}
