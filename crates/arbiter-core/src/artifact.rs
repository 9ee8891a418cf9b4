//! The JSON artifacts of a run directory (`.arbiter/runs/<run-id>/`), each carrying a
//! `schema_version`. The directory alone is enough to audit a run, re-render its report
//! and apply its result; the database only indexes it.
//!
//! ```text
//! state.json                       RunState
//! settings.json                    settings::RunSettings (resolved, with origins)
//! runtime_events.jsonl             one event::Event per line
//! cost_summary.json                cost::CostSummary
//! baseline.json                    Baseline
//! candidates/<id>/patch.diff       the captured patch
//! candidates/<id>/evidence.json    Evidence
//! candidates/<id>/runner_summary.json  RunnerSummary
//! candidates/<id>/transcript.jsonl agent events, secrets redacted
//! candidates/<id>/result.json      the finished candidate, for `arbiter runs resume`
//! candidates/<id>/stdout.log, stderr.log, prompt.md
//! reviews/<id>.json                (judges)
//! comparisons/pairwise.json        (judges) a JSON array
//! comparisons/cross_tests.json     crosstest::CrossTestMatrix
//! comparisons/ranking.json         RankingArtifact
//! comparisons/agreement.json       AgreementArtifact
//! selection.json                   SelectionArtifact
//! final_report.md, viewer/index.html
//! apply.json                       ApplyRecord (written by `arbiter apply`)
//! manifest.json                    manifest::Manifest: every other file's SHA-256 and size
//! ```

use serde::{Deserialize, Serialize};

use crate::gate::{CommandOutcome, GateResult, GateSummary};
use crate::ids::{CandidateId, RunId};
use crate::money::Usd;
use crate::patch::PatchStats;
use crate::selection::{AgreementGroup, Decision, RankedCandidate};
use crate::settings::{ApplyMode, RunSettings, RunnerSpec};
use crate::status::{CandidateStatus, RunStatus};
use crate::task::Task;
use crate::time::Timestamp;

pub use crate::SCHEMA_VERSION;

/// File names inside a run directory.
pub mod paths {
    pub const STATE: &str = "state.json";
    /// The run's resolved settings (what a resume continues with).
    pub const SETTINGS: &str = "settings.json";
    /// A finished candidate's results, kept for a resume: `candidates/<id>/result.json`.
    pub const RESULT: &str = "result.json";
    pub const EVENTS: &str = "runtime_events.jsonl";
    /// A candidate unit's own events (`candidates/<id>/`), merged into the run's log by
    /// its evaluation.
    pub const UNIT_EVENTS: &str = "unit_events.jsonl";
    pub const COST: &str = "cost_summary.json";
    pub const BASELINE: &str = "baseline.json";
    pub const CANDIDATES: &str = "candidates";
    pub const PATCH: &str = "patch.diff";
    pub const EVIDENCE: &str = "evidence.json";
    pub const RUNNER_SUMMARY: &str = "runner_summary.json";
    pub const TRANSCRIPT: &str = "transcript.jsonl";
    pub const PROMPT: &str = "prompt.md";
    pub const STDOUT: &str = "stdout.log";
    pub const STDERR: &str = "stderr.log";
    pub const REVIEWS: &str = "reviews";
    pub const COMPARISONS: &str = "comparisons";
    pub const PAIRWISE: &str = "comparisons/pairwise.json";
    pub const RANKING: &str = "comparisons/ranking.json";
    pub const AGREEMENT: &str = "comparisons/agreement.json";
    pub const CROSS_TESTS: &str = "comparisons/cross_tests.json";
    pub const SELECTION: &str = "selection.json";
    pub const REPORT: &str = "final_report.md";
    pub const VIEWER: &str = "viewer/index.html";
    pub const APPLY: &str = "apply.json";
    /// The seal of the finished run directory (see [`crate::manifest`]).
    pub const MANIFEST: &str = crate::manifest::MANIFEST;
}

/// The settings a run used, as recorded in `state.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct SettingsSnapshot {
    pub candidates: u32,
    pub parallel: u32,
    pub timeout_seconds: u64,
    pub verify_timeout_seconds: u64,
    pub include: Vec<String>,
    pub setup: Option<String>,
    pub apply: ApplyMode,
    pub keep_worktrees: bool,
    pub runners: Vec<RunnerSpec>,
    /// How the candidates were checked, in words (`Verified by ...`, `Unverified: ...`);
    /// empty for runs recorded before it was.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub verification: String,
}

impl From<&RunSettings> for SettingsSnapshot {
    fn from(s: &RunSettings) -> Self {
        SettingsSnapshot {
            candidates: s.candidates.value,
            parallel: s.parallel.value.min(s.candidates.value),
            timeout_seconds: s.timeout_seconds.value,
            verify_timeout_seconds: s.verify_timeout_seconds.value,
            include: s.include.value.clone(),
            setup: s.setup.value.clone(),
            apply: s.apply.value.clone(),
            keep_worktrees: s.keep_worktrees.value,
            runners: s.runners.clone(),
            verification: s.verification(),
        }
    }
}

/// `settings.json`: every resolved setting of the run, with its origin.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct SettingsArtifact {
    pub schema_version: u32,
    pub settings: RunSettings,
}

/// A candidate's line in `state.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct CandidateState {
    pub id: CandidateId,
    pub index: usize,
    pub runner: String,
    pub status: CandidateStatus,
    pub started_at: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
    pub exit_code: Option<i32>,
    pub gates: Option<String>,
}

/// What was done with the winner.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct Materialization {
    pub mode: ApplyMode,
    pub applied: bool,
    pub commit: Option<String>,
    pub error: Option<String>,
}

impl Materialization {
    /// `applied (branch:fix), commit 1a2b…`, `not applied (worktree): why`, `not applied (none)`.
    pub fn describe(&self) -> String {
        match (self.applied, &self.error) {
            (true, _) => format!(
                "applied ({}){}",
                self.mode,
                self.commit.as_ref().map(|c| format!(", commit {c}")).unwrap_or_default()
            ),
            (false, Some(e)) => format!("not applied ({}): {e}", self.mode),
            (false, None) => format!("not applied ({})", self.mode),
        }
    }
}

/// `state.json`: the canonical state of a run, rewritten atomically at every step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct RunState {
    pub schema_version: u32,
    pub run_id: RunId,
    pub status: RunStatus,
    pub phase: String,
    pub repo: String,
    pub base_ref: String,
    pub base_commit: String,
    pub task: Task,
    pub settings: SettingsSnapshot,
    pub candidates: Vec<CandidateState>,
    pub started_at: Timestamp,
    pub finished_at: Option<Timestamp>,
    pub winner: Option<CandidateId>,
    pub materialization: Option<Materialization>,
    pub message: Option<String>,
    /// The process that owns the run while it is `running`.
    pub pid: u32,
    /// What every process a candidate started ran under (recorded by runs since the sandbox
    /// exists; `None` for older runs).
    #[serde(default)]
    pub sandbox: Option<crate::sandbox::Enforcement>,
}

/// `baseline.json`: the verify commands on the base commit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct Baseline {
    pub schema_version: u32,
    pub base_commit: String,
    /// Why the baseline could not run, when it could not.
    pub error: Option<String>,
    pub commands: Vec<CommandOutcome>,
    /// The verify commands whose run shows they cannot run on this machine (no candidate
    /// starts its agent then; see [`crate::cannot_run`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cannot_run: Vec<crate::cannot_run::CannotRun>,
}

/// How the agent process ended.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct AgentOutcome {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub cancelled: bool,
    pub duration_ms: u64,
    /// The limit that ended the agent's loop (steps, tokens, an agent CLI's max turns), when
    /// one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_reached: Option<String>,
    /// Why the agent failed by its own account although its process exited 0 (an agent CLI
    /// whose terminal event reports an error, or whose stream never reached one): such a
    /// candidate is `agent_failed`, whatever the exit code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

/// The patch part of `evidence.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct PatchEvidence {
    /// Relative to the candidate's directory.
    pub path: String,
    pub bytes: u64,
    pub empty: bool,
    pub stats: PatchStats,
    pub normalized_hash: Option<String>,
    pub applies_cleanly: bool,
    pub apply_check_error: Option<String>,
}

/// `candidates/<id>/evidence.json`: everything arbiter itself observed about a candidate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct Evidence {
    pub schema_version: u32,
    pub candidate_id: CandidateId,
    pub index: usize,
    pub runner: String,
    pub status: CandidateStatus,
    pub setup_error: Option<String>,
    pub agent: AgentOutcome,
    pub patch: Option<PatchEvidence>,
    pub gates: Vec<GateResult>,
    pub gate_summary: Option<GateSummary>,
    pub cost: Option<Usd>,
    /// Protected files (tests, CI, test configuration) the patch modified or deleted, and
    /// configuration of how the tests run it added; unless test changes were allowed, the
    /// gates ran with the base versions restored and the added configuration removed.
    #[serde(default)]
    pub protected_changes: Vec<String>,
    /// Why it never started, when it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_run: Option<String>,
    /// What disqualifies it whatever else it achieved (a secret in its patch, tampered
    /// checks, a limit broken).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub violations: Vec<crate::selection::Violation>,
    /// The sandbox its processes ran under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<crate::sandbox::Enforcement>,
}

/// `candidates/<id>/runner_summary.json`: how the runner was invoked and how it ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct RunnerSummary {
    pub schema_version: u32,
    pub candidate_id: CandidateId,
    pub runner: String,
    pub kind: String,
    /// The command line, secrets redacted.
    pub command: String,
    pub status: CandidateStatus,
    pub agent: AgentOutcome,
    pub started_at: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
    pub stdout: String,
    pub stderr: String,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    /// Environment variable names given to the agent (values are never recorded).
    pub env_names: Vec<String>,
    /// What an agent CLI reported, secrets redacted: its invocation, session id, usage, cost
    /// (its own and tokens × the backend's price), commands with exit codes, files touched
    /// and final status (see docs/runners.md).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    #[cfg_attr(feature = "arbitrary", proptest(strategy = "crate::arbitrary::json_option()"))]
    pub agent_cli: Option<serde_json::Value>,
}

/// Reads an optional JSON value that is left out when absent (with `#[serde(default,
/// skip_serializing_if = "Option::is_none", deserialize_with = "present")]`): a value
/// that is there is `Some`, `null` included (`Some(Value::Null)`, which serde's own `Option`
/// reads as `None`).
pub fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<serde_json::Value>, D::Error> {
    serde_json::Value::deserialize(d).map(Some)
}

/// `comparisons/ranking.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct RankingArtifact {
    pub schema_version: u32,
    /// The criteria, in the order they decide.
    pub criteria: Vec<String>,
    pub candidates: Vec<RankedCandidate>,
}

/// `comparisons/agreement.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct AgreementArtifact {
    pub schema_version: u32,
    /// `same_patch` (every non-empty patch identical), `partial` (some agree), `none`.
    pub consensus: String,
    pub groups: Vec<AgreementGroup>,
}

/// One candidate's line in `selection.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct SelectionEntry {
    pub candidate_id: CandidateId,
    pub rank: usize,
    pub runner: String,
    pub eligible: bool,
    pub won: bool,
    pub reason: crate::text::Untrusted,
}

/// How a candidate of the run was produced and what it cost, in the order it was tried.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct SpendingLine {
    pub candidate_id: CandidateId,
    pub runner: String,
    /// Input plus output USD per million tokens of its backend, when priced.
    pub price_per_mtok: Option<Usd>,
    pub status: CandidateStatus,
    /// `None` when unknown (or it did not run).
    pub cost: Option<Usd>,
}

/// What the budget did to the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct BudgetOutcome {
    pub limit: Usd,
    pub spent: Usd,
    pub reached: bool,
    /// Candidates whose agent the budget stopped (their patch so far was evaluated).
    pub stopped: Vec<CandidateId>,
    /// Candidates that never started because the budget was spent.
    pub not_started: Vec<CandidateId>,
    /// Judge or review calls were left out because the budget was spent.
    pub judging_stopped: bool,
    /// Calls without a known cost, which could not be charged.
    pub uncharged_calls: u64,
}

/// How the run spent its candidates and its money (`selection.json` → `spending`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct SpendingReport {
    pub strategy: crate::strategy::Strategy,
    pub candidates: Vec<SpendingLine>,
    /// Candidates whose agent started.
    pub ran: usize,
    /// An escalation stopped at this candidate, which passed its gates.
    pub stopped_at: Option<CandidateId>,
    /// The known cost of the whole run (candidates and judges).
    pub spent: Usd,
    /// Every call had a known cost (otherwise `spent` leaves some out).
    #[serde(default)]
    pub cost_complete: bool,
    /// For an escalation: what running every candidate would have cost (the ones that did
    /// not run estimated from the tokens of those that did), when that can be known.
    pub cost_of_all: Option<Usd>,
    pub budget: Option<BudgetOutcome>,
}

impl SpendingReport {
    /// Worth telling: an escalation, or a budget.
    pub fn noteworthy(&self) -> bool {
        self.strategy.escalates() || self.budget.is_some()
    }

    fn spent_text(&self) -> String {
        if self.cost_complete {
            self.spent.to_string()
        } else {
            format!("{} (calls without a known cost not included)", self.spent)
        }
    }

    /// One sentence: what ran, what it cost, against what (for reports and the terminal).
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.strategy.escalates() {
            let order: Vec<String> = self
                .candidates
                .iter()
                .map(|c| {
                    format!(
                        "{} {} ({})",
                        c.candidate_id,
                        c.runner,
                        c.price_per_mtok.map_or_else(|| "unpriced".into(), |p| format!("{p}/Mtok"))
                    )
                })
                .collect();
            parts.push(format!(
                "strategy {}: ran {} of {} candidate(s), cheapest first ({})",
                self.strategy,
                self.ran,
                self.candidates.len(),
                order.join(", ")
            ));
            match &self.stopped_at {
                Some(c) => parts.push(format!("stopped at {c}, which passed its gates")),
                None => parts.push("no candidate passed its gates".into()),
            }
            match self.cost_of_all {
                Some(all) => {
                    parts.push(format!("spent {}; running all of them would have cost about {all}", self.spent_text()))
                }
                None => parts.push(format!(
                    "spent {}; the cost of running all of them cannot be estimated (unpriced backends or calls without usage)",
                    self.spent_text()
                )),
            }
        } else {
            parts.push(format!(
                "strategy {}: {} candidate(s) ran; spent {}",
                self.strategy,
                self.ran,
                self.spent_text()
            ));
        }
        if let Some(b) = &self.budget {
            if b.reached {
                let mut reached = format!("the budget of {} was reached ({} spent)", b.limit, b.spent);
                if !b.stopped.is_empty() {
                    reached.push_str(&format!("; stopped: {}", ids(&b.stopped)));
                }
                if !b.not_started.is_empty() {
                    reached.push_str(&format!("; not started: {}", ids(&b.not_started)));
                }
                if b.judging_stopped {
                    reached.push_str("; judging stopped");
                }
                reached.push_str("; the run ended with what it had");
                parts.push(reached);
            } else {
                parts.push(format!("within the budget of {}", b.limit));
            }
            if b.uncharged_calls > 0 {
                parts.push(format!("{} call(s) had no known cost and could not be charged", b.uncharged_calls));
            }
        }
        parts.join("; ")
    }
}

fn ids(list: &[CandidateId]) -> String {
    list.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(", ")
}

/// `selection.json`: the decision and a reason for every candidate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct SelectionArtifact {
    pub schema_version: u32,
    pub run_id: RunId,
    /// `selected`, `none_acceptable` or `interrupted`.
    pub outcome: String,
    pub winner: Option<CandidateId>,
    /// The winner's patch, relative to the run directory.
    pub winner_patch: Option<String>,
    pub summary: crate::text::Untrusted,
    pub candidates: Vec<SelectionEntry>,
    /// How candidates and money were spent (absent in runs recorded before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spending: Option<SpendingReport>,
}

/// `apply.json`: the last `arbiter apply` of this run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct ApplyRecord {
    pub schema_version: u32,
    pub run_id: RunId,
    pub candidate_id: CandidateId,
    pub at: Timestamp,
    pub branch: Option<String>,
    pub created_branch: bool,
    pub commit: Option<String>,
    pub applied: bool,
    /// The working tree held the patch already: nothing was changed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub already_applied: bool,
    pub rolled_back: bool,
    pub error: Option<String>,
}

impl RankingArtifact {
    pub fn from_decision(d: &Decision) -> Self {
        RankingArtifact {
            schema_version: SCHEMA_VERSION,
            criteria: [
                "eligibility",
                "gates passed",
                "cross-tests passed",
                "votes",
                "judge wins (Copeland)",
                "judge strength (Bradley–Terry)",
                "smaller patch",
                "lower cost",
                "candidate order",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            candidates: d.ranking.clone(),
        }
    }
}

impl AgreementArtifact {
    pub fn from_decision(d: &Decision) -> Self {
        let consensus = match d.groups.as_slice() {
            [] => "none",
            [_] => "same_patch",
            groups if groups.iter().any(|g| g.candidates.len() > 1) => "partial",
            _ => "none",
        };
        AgreementArtifact { schema_version: SCHEMA_VERSION, consensus: consensus.into(), groups: d.groups.clone() }
    }
}

impl SelectionArtifact {
    pub fn from_decision(run_id: &RunId, d: &Decision, interrupted: bool) -> Self {
        let outcome = if interrupted {
            "interrupted"
        } else if d.winner.is_some() {
            "selected"
        } else {
            "none_acceptable"
        };
        SelectionArtifact {
            schema_version: SCHEMA_VERSION,
            run_id: run_id.clone(),
            outcome: outcome.into(),
            winner: if interrupted { None } else { d.winner.clone() },
            winner_patch: d
                .winner
                .as_ref()
                .filter(|_| !interrupted)
                .map(|w| format!("{}/{w}/{}", paths::CANDIDATES, paths::PATCH)),
            summary: d.summary.clone(),
            candidates: d
                .ranking
                .iter()
                .map(|r| SelectionEntry {
                    candidate_id: r.candidate_id.clone(),
                    rank: r.rank,
                    runner: r.runner.clone(),
                    eligible: r.eligible,
                    won: !interrupted && d.winner.as_ref() == Some(&r.candidate_id),
                    reason: r.reason.clone(),
                })
                .collect(),
            spending: None,
        }
    }
}
