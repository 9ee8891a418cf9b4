//! The failure analysis of a plan task's attempt (the optional `analysis` role): when an
//! attempt fails after its tournament ran, a model reads the run's evidence — why the
//! attempt failed, each candidate's reason, its gate output and failing tests — and names
//! the contradiction the candidates ran into, the likely cause and a suggestion.
//!
//! It never holds anything up: the attempt's failure is reported first, and the analysis runs
//! in the background ([`Analyst::start`]), one call, bounded in time ([`AnalysisLimits`])
//! and in cost (a call whose worst case — the prompt's size and the answer's token limit at
//! the backend's prices — is over the limit is not made; nor is any once the plan's budget is
//! spent). Every failure of its own is recorded (`analysis_skipped`) and ignored.
//!
//! What it writes: `analysis.md` and `analysis.json` in the failed run's directory, its call
//! in the run's `cost_summary.json` (role `analysis`, resealed), the cost charged to the plan,
//! and a `failure_analyzed` event. While it runs, the task's next attempt is held back (the
//! coordinator claims other work; see [`Analyst::held_back`]); that attempt's prompt carries
//! the analysis ([`feedback_of`]) unless the plan says `analysis_feedback = false`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arbiter_core::Clock;
use arbiter_core::artifact::{Evidence as CandidateEvidence, RunState, SelectionArtifact, paths};
use arbiter_core::cost::{CallRecord, CostSummary, summarize};
use arbiter_core::intake::analysis::{self, Analysis, CandidateFacts, Evidence};
use arbiter_core::money::Usd;
use arbiter_core::plan::event::PlanEntry;
use arbiter_llm::{ChatRequest, Endpoint, LlmClient, Message, ToolSpec, call_record, chat_with_fallback};
use arbiter_store::plans::PlanStore;
use serde::{Deserialize, Serialize};

use crate::rundir::RunDir;

/// The file the analysis writes in the failed run's directory.
pub const ANALYSIS_MD: &str = crate::run_record::ANALYSIS;
/// Its record: the call, what it cost, the answer.
pub const ANALYSIS_JSON: &str = "analysis.json";

/// The longest answer asked for.
const MAX_ANSWER_TOKENS: u32 = 800;

/// How much one analysis may take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AnalysisLimits {
    pub timeout: Duration,
    pub max_cost: Usd,
    /// Whether the next attempt's prompt carries the analysis (a plan's own
    /// `analysis_feedback` wins).
    pub feedback: bool,
}

/// `analysis.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AnalysisRecord {
    pub schema_version: u32,
    pub run_id: String,
    pub task: String,
    pub analysis: Analysis,
    pub call: CallRecord,
}

/// Analyses of failed attempts, running in the background.
pub struct Analyst {
    client: Arc<LlmClient>,
    chain: Vec<Endpoint>,
    pub limits: AnalysisLimits,
    /// `(plan, task)` of the analyses running now.
    in_flight: Arc<Mutex<BTreeSet<(String, String)>>>,
    going: Mutex<tokio::task::JoinSet<()>>,
}

/// One analysis to make.
pub struct Request {
    pub store: Arc<dyn PlanStore>,
    pub clock: Arc<dyn Clock>,
    pub run_dir: PathBuf,
    pub plan: String,
    pub task: String,
    pub run_id: String,
    /// Why the attempt failed, as it was reported.
    pub failure: String,
}

impl Analyst {
    /// An analyst over the `analysis` role's chain; `None` when the chain is empty.
    pub fn new(client: Arc<LlmClient>, chain: Vec<Endpoint>, limits: AnalysisLimits) -> Option<Arc<Self>> {
        (!chain.is_empty()).then(|| {
            Arc::new(Analyst {
                client,
                chain,
                limits,
                in_flight: Default::default(),
                going: Mutex::new(tokio::task::JoinSet::new()),
            })
        })
    }

    /// The tasks of `plan` whose failed attempt is being analysed now: their next attempt
    /// waits for it (other work does not).
    pub fn held_back(&self, plan: &str) -> Vec<String> {
        self.in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|(p, _)| p == plan)
            .map(|(_, t)| t.clone())
            .collect()
    }

    /// Starts analysing a failed attempt in the background.
    pub fn start(self: &Arc<Self>, request: Request) {
        let key = (request.plan.clone(), request.task.clone());
        self.in_flight.lock().unwrap_or_else(|p| p.into_inner()).insert(key.clone());
        let me = self.clone();
        let mut going = self.going.lock().unwrap_or_else(|p| p.into_inner());
        while going.try_join_next().is_some() {}
        going.spawn(async move {
            let entry = match tokio::time::timeout(me.limits.timeout, me.analyse(&request)).await {
                Ok(Ok(entry)) => entry,
                Ok(Err(reason)) => skipped(&request, reason),
                Err(_) => {
                    skipped(&request, format!("it took longer than {} s and was stopped", me.limits.timeout.as_secs()))
                }
            };
            if let Err(e) = request.store.note_event(&request.plan, entry, request.clock.now()).await {
                tracing::warn!(plan = %request.plan, error = %e, "the failure analysis could not be recorded");
            }
            me.in_flight.lock().unwrap_or_else(|p| p.into_inner()).remove(&key);
            // A held-back task is claimable again.
            request.store.work_signal().await.notify_waiters();
        });
    }

    /// Waits for the analyses still running (before the process exits).
    pub async fn flush(&self) {
        let mut going = std::mem::take(&mut *self.going.lock().unwrap_or_else(|p| p.into_inner()));
        while going.join_next().await.is_some() {}
    }

    /// One analysis: the evidence, the cost check, the call, and what it writes.
    async fn analyse(&self, r: &Request) -> Result<PlanEntry, String> {
        let evidence = read_evidence(&r.run_dir, &r.failure)
            .ok_or_else(|| format!("its run directory {} has no evidence to read", r.run_dir.display()))?;
        let budget = r.store.plan_record(&r.plan).await.map_err(|e| e.to_string())?.map(|p| p.budget);
        if budget.is_some_and(|b| b.exhausted()) {
            return Err("the plan's budget is spent".into());
        }
        let prompt = analysis::prompt(&evidence);
        // The worst case of the first backend asked: the whole prompt (a token is at least
        // two bytes of it, on the safe side) and the longest answer, at its prices.
        let first = &self.chain[0];
        if let (Some(input), Some(output)) = (first.input_price, first.output_price) {
            let worst = Usd::per_million_tokens(input, (prompt.len() / 2) as u64)
                + Usd::per_million_tokens(output, u64::from(MAX_ANSWER_TOKENS));
            if worst > self.limits.max_cost {
                return Err(format!(
                    "it could cost up to {worst} on {}, over the limit of {} ([analysis] max_cost_usd)",
                    first.name, self.limits.max_cost
                ));
            }
        }
        let request = ChatRequest {
            system: Some(analysis::SYSTEM.into()),
            messages: vec![Message::User(prompt)],
            tools: vec![ToolSpec {
                name: "analysis".into(),
                description: "Give the analysis.".into(),
                parameters: analysis::tool_parameters(),
            }],
            temperature: Some(0.0),
            max_tokens: Some(MAX_ANSWER_TOKENS),
        };
        let (i, response) =
            chat_with_fallback(&self.client, &self.chain, &request, |_| {}).await.map_err(|e| e.to_string())?;
        let endpoint = &self.chain[i];
        let call = call_record("analysis", endpoint, None, response.usage.as_ref());
        if let Some(cost) = call.cost.filter(|c| *c > Usd::ZERO) {
            r.store.charge(&r.plan, None, cost, r.clock.now()).await.map_err(|e| e.to_string())?;
        }
        let arguments = response.tool_calls.iter().find(|c| c.name == "analysis").map(|c| &c.arguments);
        let found = analysis::read(arguments, &response.text)
            .ok_or_else(|| format!("{} gave no analysis (no cause and no suggestion)", endpoint.name))?;
        write(&r.run_dir, &r.task, &r.run_id, &found, &call).map_err(|e| format!("cannot write it: {e}"))?;
        Ok(PlanEntry::FailureAnalyzed {
            task: r.task.clone(),
            run_id: r.run_id.clone(),
            backend: endpoint.name.clone(),
            cost: call.cost,
            contradiction: arbiter_core::intake::text::one_line(&found.contradiction, 200),
        })
    }
}

fn skipped(r: &Request, reason: String) -> PlanEntry {
    PlanEntry::AnalysisSkipped { task: r.task.clone(), run_id: r.run_id.clone(), reason }
}

/// Writes `analysis.md`, `analysis.json` and the call into `cost_summary.json`, and reseals
/// the run directory with them.
fn write(run_dir: &Path, task: &str, run_id: &str, found: &Analysis, call: &CallRecord) -> std::io::Result<()> {
    let dir = RunDir::open(run_dir.to_path_buf());
    let backend = call.backend.clone().unwrap_or_default();
    dir.write_text(ANALYSIS_MD, &analysis::markdown(found, task, run_id, &backend))?;
    let record = AnalysisRecord {
        schema_version: arbiter_core::SCHEMA_VERSION,
        run_id: run_id.to_string(),
        task: task.to_string(),
        analysis: found.clone(),
        call: call.clone(),
    };
    dir.write_json(ANALYSIS_JSON, &record)?;
    let mut written = vec![ANALYSIS_MD, ANALYSIS_JSON];
    if let Ok(text) = read_text(&run_dir.join(paths::COST))
        && let Ok(summary) = serde_json::from_str::<CostSummary>(&text)
    {
        let mut calls = summary.calls;
        calls.push(call.clone());
        dir.write_json(paths::COST, &summarize(calls))?;
        written.push(paths::COST);
    }
    dir.reseal(&written)?;
    Ok(())
}

/// What a failed run showed: the task, why it failed, and each candidate's reason, gate
/// output and failing tests. `None` when the run left no state.
pub fn read_evidence(run_dir: &Path, failure: &str) -> Option<Evidence> {
    let state: RunState = serde_json::from_str(&read_text(&run_dir.join(paths::STATE)).ok()?).ok()?;
    let selection: Option<SelectionArtifact> =
        read_text(&run_dir.join(paths::SELECTION)).ok().and_then(|t| serde_json::from_str(&t).ok());
    let mut candidates = Vec::new();
    for c in &state.candidates {
        let id = c.id.to_string();
        let dir = run_dir.join(paths::CANDIDATES).join(&id);
        let evidence: Option<CandidateEvidence> =
            read_text(&dir.join(paths::EVIDENCE)).ok().and_then(|t| serde_json::from_str(&t).ok());
        let reason = selection
            .as_ref()
            .and_then(|s| s.candidates.iter().find(|e| e.candidate_id == c.id))
            .map(|e| e.reason.clone())
            .unwrap_or_default();
        let mut details = String::new();
        if let Some(e) = &evidence {
            for g in &e.gates {
                details.push_str(&format!(
                    "Gate `{}`: {} ({:?}){}\n{}\n",
                    g.outcome.command,
                    if g.passed { "passed" } else { "failed" },
                    g.verdict,
                    g.outcome
                        .failed_tests
                        .as_ref()
                        .filter(|t| !t.is_empty())
                        .map(|t| format!("; failing tests: {}", t.join(", ")))
                        .unwrap_or_default(),
                    g.outcome.output_tail.trim()
                ));
            }
            if let Some(why) = e.setup_error.as_ref().or(e.not_run.as_ref()) {
                details.push_str(&format!("It did not run: {why}\n"));
            }
        }
        candidates.push(CandidateFacts {
            outcome: format!(
                "{}: {}",
                evidence.as_ref().map(|e| e.runner.as_str()).unwrap_or("?"),
                evidence.as_ref().map(|e| format!("{:?}", e.status)).unwrap_or_else(|| "no evidence".into())
            ),
            id,
            reason: reason.to_string(),
            details,
        });
    }
    let failure = match &selection {
        Some(s) if !s.summary.is_blank() => format!("{failure} ({})", s.summary.to_string().trim()),
        _ => failure.to_string(),
    };
    Some(Evidence {
        task: state.task.prompt.clone(),
        success_criteria: state.task.success_criteria.clone(),
        verify: state.task.verify.clone(),
        failure,
        candidates,
    })
}

/// The analysis a failed run holds, when one was written.
pub fn feedback_of(run_dir: &Path) -> Option<String> {
    read_text(&run_dir.join(ANALYSIS_MD)).ok().filter(|t| !t.trim().is_empty())
}

/// A file of a run directory a candidate may have written into: read without following a
/// link or waiting on a FIFO, and only when it fits ([`crate::run_record::read_regular`]).
fn read_text(path: &std::path::Path) -> std::io::Result<String> {
    match crate::run_record::read_regular(path, crate::run_record::JSON_CAP)? {
        (bytes, false) => String::from_utf8(bytes).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
        (_, true) => Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "larger than arbiter reads")),
    }
}
