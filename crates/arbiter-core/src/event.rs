//! The event vocabulary: every observable step of a run is one append-only event, written
//! to `runtime_events.jsonl` and to the store.

use serde::{Deserialize, Serialize};

use crate::ids::{CandidateId, RunId};
use crate::time::Timestamp;

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    RunStarted,
    /// An interrupted run continues (`arbiter runs resume`).
    RunResumed,
    LeftoversPruned,
    BaselineStarted,
    BaselineFinished,
    CandidateQueued,
    CandidatePreparing,
    WorktreeCreated,
    IncludeCopied,
    SetupFinished,
    AgentStarted,
    AgentFinished,
    /// A model backend failed and the next one of the chain was tried.
    ModelFallback,
    PatchCaptured,
    GateFinished,
    /// What was taken out of a candidate's tree for its gates (the tests it added).
    GatesSealed,
    /// A repair round ran a candidate's gates in its tree and fed the failures back.
    RepairRound,
    CandidateFinished,
    /// Whether the pairwise judge ran, and why (or why not).
    JudgeDecision,
    /// Whether the surviving candidates got their risk reviews, and why (or why not).
    ReviewDecision,
    /// The cross-test matrix was built (or why not).
    CrossTests,
    /// An escalation stopped at a candidate that passed its gates.
    EscalationStopped,
    /// The run's budget was reached (once per run).
    BudgetExceeded,
    SelectionMade,
    Materialized,
    MaterializeFailed,
    WorktreesRemoved,
    Warning,
    RunInterrupted,
    RunFinished,
    Applied,
}

impl EventKind {
    pub fn as_str(self) -> &'static str {
        // Stable names, identical to the serde names (checked by a test).
        match self {
            Self::RunStarted => "run_started",
            Self::RunResumed => "run_resumed",
            Self::LeftoversPruned => "leftovers_pruned",
            Self::BaselineStarted => "baseline_started",
            Self::BaselineFinished => "baseline_finished",
            Self::CandidateQueued => "candidate_queued",
            Self::CandidatePreparing => "candidate_preparing",
            Self::WorktreeCreated => "worktree_created",
            Self::IncludeCopied => "include_copied",
            Self::SetupFinished => "setup_finished",
            Self::AgentStarted => "agent_started",
            Self::AgentFinished => "agent_finished",
            Self::ModelFallback => "model_fallback",
            Self::PatchCaptured => "patch_captured",
            Self::GateFinished => "gate_finished",
            Self::GatesSealed => "gates_sealed",
            Self::RepairRound => "repair_round",
            Self::CandidateFinished => "candidate_finished",
            Self::JudgeDecision => "judge_decision",
            Self::ReviewDecision => "review_decision",
            Self::CrossTests => "cross_tests",
            Self::EscalationStopped => "escalation_stopped",
            Self::BudgetExceeded => "budget_exceeded",
            Self::SelectionMade => "selection_made",
            Self::Materialized => "materialized",
            Self::MaterializeFailed => "materialize_failed",
            Self::WorktreesRemoved => "worktrees_removed",
            Self::Warning => "warning",
            Self::RunInterrupted => "run_interrupted",
            Self::RunFinished => "run_finished",
            Self::Applied => "applied",
        }
    }
}

/// One event of one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct Event {
    /// Monotonic within the run, from 1.
    pub seq: u64,
    pub run_id: RunId,
    pub at: Timestamp,
    pub kind: EventKind,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub candidate: Option<CandidateId>,
    #[serde(default)]
    #[cfg_attr(feature = "arbitrary", proptest(strategy = "crate::arbitrary::json()"))]
    pub data: serde_json::Value,
}

impl Event {
    /// The payload as the type its kind has, when it is that kind and reads as one: the
    /// progress display and the reports read events through these types, so a renamed
    /// field is a compile error, not a silently empty display.
    pub fn data_as<T: EventData>(&self) -> Option<T> {
        (self.kind == T::KIND).then(|| serde_json::from_value(self.data.clone()).ok()).flatten()
    }
}

/// A typed event payload: the one shape of the events of its kind.
pub trait EventData: Serialize + serde::de::DeserializeOwned {
    const KIND: EventKind;
}

/// `candidate_queued`: a candidate waits for a place in the pool.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct CandidateQueued {
    /// Its runner's label (`codex/gpt`, `command`).
    pub runner: String,
}

impl EventData for CandidateQueued {
    const KIND: EventKind = EventKind::CandidateQueued;
}

/// `agent_finished`: how the candidate's agent process ended.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct AgentFinished {
    pub exit_code: Option<i32>,
    /// The signal that killed it (`exit_code` is then `None`).
    #[serde(default)]
    pub signal: Option<i32>,
    #[serde(default)]
    pub timed_out: bool,
    #[serde(default)]
    pub cancelled: bool,
    #[serde(default)]
    pub duration_ms: u64,
    /// A limit it stopped at (turns, the budget).
    #[serde(default)]
    pub limit_reached: Option<String>,
    /// Why a CLI that exited 0 failed anyway.
    #[serde(default)]
    pub failure: Option<String>,
}

impl EventData for AgentFinished {
    const KIND: EventKind = EventKind::AgentFinished;
}

/// `gate_finished`: one verify command on a candidate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct GateFinished {
    pub command: String,
    pub passed: bool,
    #[serde(default)]
    pub exit_code: Option<i32>,
    #[serde(default)]
    pub timed_out: bool,
    #[serde(default)]
    pub duration_ms: u64,
    /// The canary's verdict, when one checked the command.
    #[serde(default)]
    pub canary: Option<crate::canary::Verdict>,
}

impl EventData for GateFinished {
    const KIND: EventKind = EventKind::GateFinished;
}

/// One verify command on the base, in `baseline_finished`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct BaselineResult {
    pub command: String,
    pub passed: bool,
    #[serde(default)]
    pub exit_code: Option<i32>,
}

/// `baseline_finished`: the verify commands on the base commit.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct BaselineFinished {
    /// Why it could not run at all.
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub results: Vec<BaselineResult>,
}

impl EventData for BaselineFinished {
    const KIND: EventKind = EventKind::BaselineFinished;
}

/// `candidate_finished`: how a candidate ended, whichever way it did — skipped before it
/// started (`reason`), never reached its agent (`error`), or evaluated (its patch and
/// gates). One shape for every way; what does not apply is absent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct CandidateFinished {
    pub status: crate::status::CandidateStatus,
    /// Why it never started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<crate::text::Untrusted>,
    /// Why it could not be prepared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch_empty: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applies_cleanly: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gates_passed: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gates_total: Option<usize>,
    /// Why its gates did not run (or not all of them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gates_skipped: Option<String>,
}

impl CandidateFinished {
    /// A candidate that ended with `status`, nothing else said yet.
    pub fn with_status(status: crate::status::CandidateStatus) -> Self {
        CandidateFinished {
            status,
            reason: None,
            error: None,
            patch_empty: None,
            applies_cleanly: None,
            gates_passed: None,
            gates_total: None,
            gates_skipped: None,
        }
    }
}

impl EventData for CandidateFinished {
    const KIND: EventKind = EventKind::CandidateFinished;
}

/// `run_started`: what the run is, as it starts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct RunStarted {
    pub task: String,
    pub base_ref: String,
    pub base_commit: String,
    pub candidates: u32,
    pub parallel: u32,
    #[serde(default)]
    pub runners: Vec<String>,
    #[serde(default)]
    pub verify: Vec<String>,
    #[serde(default)]
    pub allow_dirty: bool,
    #[serde(default)]
    pub strategy: crate::strategy::Strategy,
    #[serde(default)]
    pub budget_usd: Option<crate::money::Usd>,
    #[serde(default)]
    pub sandbox: Option<crate::sandbox::Enforcement>,
}

impl EventData for RunStarted {
    const KIND: EventKind = EventKind::RunStarted;
}

/// `leftovers_pruned`: the workspaces of crashed runs taken back.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct LeftoversPruned {
    pub runs: Vec<String>,
}

impl EventData for LeftoversPruned {
    const KIND: EventKind = EventKind::LeftoversPruned;
}

/// `candidate_preparing`: a candidate's workspace is being made ready; for a resumed
/// candidate, whether it continues in its own workspace and session.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct CandidatePreparing {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub restart: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reuses_worktree: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

impl EventData for CandidatePreparing {
    const KIND: EventKind = EventKind::CandidatePreparing;
}

/// `setup_finished`: the setup command in a fresh workspace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct SetupFinished {
    pub exit_code: Option<i32>,
    #[serde(default)]
    pub timed_out: bool,
    #[serde(default)]
    pub duration_ms: u64,
}

impl EventData for SetupFinished {
    const KIND: EventKind = EventKind::SetupFinished;
}

/// `model_fallback`: a backend failed and the next of the chain was tried (`to`: none left).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct ModelFallback {
    pub from: String,
    pub to: Option<String>,
    pub reason: String,
}

impl EventData for ModelFallback {
    const KIND: EventKind = EventKind::ModelFallback;
}

/// `patch_captured`: the candidate's patch (absent when none could be captured).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct PatchCaptured {
    pub empty: Option<bool>,
    pub applies_cleanly: Option<bool>,
    pub files_changed: Option<usize>,
    pub changed_lines: Option<usize>,
}

impl EventData for PatchCaptured {
    const KIND: EventKind = EventKind::PatchCaptured;
}

/// `selection_made`: the decision.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct SelectionMade {
    pub winner: Option<CandidateId>,
    pub summary: crate::text::Untrusted,
    #[serde(default)]
    pub eligible: usize,
}

impl EventData for SelectionMade {
    const KIND: EventKind = EventKind::SelectionMade;
}

/// `materialized`: what was done with the winner.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct Materialized {
    pub mode: String,
    pub applied: bool,
    #[serde(default)]
    pub commit: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
}

impl EventData for Materialized {
    const KIND: EventKind = EventKind::Materialized;
}

/// `materialize_failed`: the winner could not be applied (the same fields, `error` set).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(transparent)]
pub struct MaterializeFailed(pub Materialized);

impl EventData for MaterializeFailed {
    const KIND: EventKind = EventKind::MaterializeFailed;
}

/// `warning`: something the user should know that stopped nothing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct Warning {
    /// It may quote what a candidate or a repository chose (a file name).
    pub message: crate::text::Untrusted,
    /// The violation it reports, when it reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub violation: Option<crate::selection::Violation>,
    /// For protected files a candidate changed: which, and what the gates ran on instead
    /// (each list there, empty or not, for such a warning; absent for any other).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protected_changes: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed: Option<Vec<String>>,
}

impl Warning {
    pub fn new(message: impl Into<String>) -> Self {
        Warning {
            message: crate::text::Untrusted::new(message),
            violation: None,
            protected_changes: None,
            restored: None,
            removed: None,
        }
    }
}

impl EventData for Warning {
    const KIND: EventKind = EventKind::Warning;
}

/// `worktree_created`: a workspace is ready at `path`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct WorktreeCreated {
    pub path: String,
}

impl EventData for WorktreeCreated {
    const KIND: EventKind = EventKind::WorktreeCreated;
}

/// `include_copied`: the ignored files copied into a workspace, and the entries that matched
/// nothing.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct IncludeCopied {
    pub copied: Vec<String>,
    #[serde(default)]
    pub missing: Vec<String>,
}

impl EventData for IncludeCopied {
    const KIND: EventKind = EventKind::IncludeCopied;
}

/// `baseline_started`: the verify commands about to run on the base.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct BaselineStarted {
    pub commands: Vec<String>,
}

impl EventData for BaselineStarted {
    const KIND: EventKind = EventKind::BaselineStarted;
}

/// `agent_started`: the candidate's agent is running.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct AgentStarted {
    pub runner: String,
    pub kind: String,
}

impl EventData for AgentStarted {
    const KIND: EventKind = EventKind::AgentStarted;
}

/// `gates_sealed`: the tests a candidate added, taken out of its tree for its gates.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct GatesSealed {
    pub own_tests_taken_out: Vec<String>,
}

impl EventData for GatesSealed {
    const KIND: EventKind = EventKind::GatesSealed;
}

/// `repair_round`: a candidate's gates ran in its tree after its agent; the failing ones
/// went back to the agent (none failing ends the loop).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct RepairRound {
    pub round: u32,
    pub of: u32,
    /// The gates that failed (empty: every gate passed).
    pub failing: Vec<String>,
}

impl EventData for RepairRound {
    const KIND: EventKind = EventKind::RepairRound;
}

/// `cross_tests`: whether the pooled tests ran, how many, and the scores.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct CrossTests {
    pub ran: bool,
    /// Why they did not run.
    pub reason: Option<String>,
    #[serde(default)]
    pub tests: usize,
    #[serde(default)]
    pub discriminating: usize,
    #[serde(default)]
    pub scores: std::collections::BTreeMap<CandidateId, crate::crosstest::CrossScore>,
}

impl EventData for CrossTests {
    const KIND: EventKind = EventKind::CrossTests;
}

/// `judge_decision`: whether the pairwise judge ran, and why (or why not); what it did when
/// it ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct JudgeDecision {
    pub ran: bool,
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shortlist: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pairs: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallbacks: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_stopped: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<bool>,
}

impl JudgeDecision {
    /// The judge was not asked, for `reason`.
    pub fn skipped(reason: Option<String>) -> Self {
        JudgeDecision {
            ran: false,
            reason,
            shortlist: None,
            pairs: None,
            fallbacks: None,
            budget_stopped: None,
            interrupted: None,
        }
    }
}

impl EventData for JudgeDecision {
    const KIND: EventKind = EventKind::JudgeDecision;
}

/// `review_decision`: whether the survivors got their risk reviews, and why not.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct ReviewDecision {
    pub ran: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reviewed: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallbacks: Option<usize>,
}

impl EventData for ReviewDecision {
    const KIND: EventKind = EventKind::ReviewDecision;
}

/// `escalation_stopped`: an escalating run stopped at a candidate that passed its gates.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct EscalationStopped {
    pub candidate: CandidateId,
    pub runner: String,
    pub remaining: usize,
}

impl EventData for EscalationStopped {
    const KIND: EventKind = EventKind::EscalationStopped;
}

/// One candidate a resumed run starts again, in `run_resumed`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct Restarting {
    pub candidate: String,
    pub reuses_worktree: bool,
    pub session: Option<String>,
}

/// `run_resumed`: what a resumed run kept, and what it starts again.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct RunResumed {
    pub kept: Vec<String>,
    pub restarting: Vec<Restarting>,
    #[serde(default)]
    pub baseline_kept: bool,
}

impl EventData for RunResumed {
    const KIND: EventKind = EventKind::RunResumed;
}

/// `budget_exceeded`: the run's budget is spent (once per run).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct BudgetExceeded {
    pub limit: Option<crate::money::Usd>,
    pub spent: crate::money::Usd,
    pub role: String,
    pub message: String,
}

impl EventData for BudgetExceeded {
    const KIND: EventKind = EventKind::BudgetExceeded;
}

/// `worktrees_removed`: the workspaces went back to the pool, but for those kept.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct WorktreesRemoved {
    pub kept: Vec<String>,
}

impl EventData for WorktreesRemoved {
    const KIND: EventKind = EventKind::WorktreesRemoved;
}

/// `run_finished`: the run's end (`run_interrupted` carries the same).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct RunFinished {
    pub status: crate::status::RunStatus,
    pub winner: Option<CandidateId>,
    pub run_dir: String,
}

impl EventData for RunFinished {
    const KIND: EventKind = EventKind::RunFinished;
}

/// `run_interrupted`: the run ended on Ctrl-C or SIGTERM.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(transparent)]
pub struct RunInterrupted(pub RunFinished);

impl EventData for RunInterrupted {
    const KIND: EventKind = EventKind::RunInterrupted;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Events written before the payloads were typed read the same: the field names are
    /// the ones the logs hold (a line of an older run, as it was written).
    #[test]
    fn older_event_lines_read_as_typed_payloads() {
        let line = r#"{"seq":9,"run_id":"20261101T101010Z-aaaaaa","at":1,"kind":"candidate_finished","candidate":"c01","data":{"status":"finished","patch_empty":false,"applies_cleanly":true,"gates_passed":1,"gates_total":1,"gates_skipped":null}}"#;
        let ev: Event = serde_json::from_str(line).unwrap();
        let done = ev.data_as::<CandidateFinished>().unwrap();
        assert_eq!((done.gates_passed, done.gates_total, done.applies_cleanly), (Some(1), Some(1), Some(true)));
        assert!(ev.data_as::<GateFinished>().is_none(), "another kind");
        let skipped = r#"{"seq":3,"run_id":"20261101T101010Z-aaaaaa","at":1,"kind":"candidate_finished","candidate":"c02","data":{"status":"skipped","reason":"c01 already passed"}}"#;
        let ev: Event = serde_json::from_str(skipped).unwrap();
        assert_eq!(
            ev.data_as::<CandidateFinished>().unwrap().reason.as_ref().map(crate::text::Untrusted::raw),
            Some("c01 already passed")
        );
        let base = r#"{"seq":4,"run_id":"20261101T101010Z-aaaaaa","at":1,"kind":"baseline_finished","data":{"error":null,"results":[{"command":"make test","passed":false,"exit_code":2}]}}"#;
        let ev: Event = serde_json::from_str(base).unwrap();
        assert_eq!(ev.data_as::<BaselineFinished>().unwrap().results[0].exit_code, Some(2));
    }

    #[test]
    fn names_match_serde() {
        for k in [
            EventKind::RunStarted,
            EventKind::GateFinished,
            EventKind::Applied,
            EventKind::RunInterrupted,
            EventKind::ModelFallback,
            EventKind::CrossTests,
            EventKind::EscalationStopped,
            EventKind::BudgetExceeded,
            EventKind::GatesSealed,
            EventKind::RepairRound,
        ] {
            assert_eq!(serde_json::to_value(k).unwrap(), serde_json::Value::String(k.as_str().into()));
        }
    }
}
