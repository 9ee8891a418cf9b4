//! The event vocabulary: every observable step of a run is one append-only event, written
//! to `runtime_events.jsonl` and to the store.

use serde::{Deserialize, Serialize};

use crate::ids::{CandidateId, RunId};
use crate::time::Timestamp;

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
pub struct Event {
    /// Monotonic within the run, from 1.
    pub seq: u64,
    pub run_id: RunId,
    pub at: Timestamp,
    pub kind: EventKind,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub candidate: Option<CandidateId>,
    #[serde(default)]
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
pub struct CandidateQueued {
    /// Its runner's label (`codex/gpt`, `command`).
    pub runner: String,
}

impl EventData for CandidateQueued {
    const KIND: EventKind = EventKind::CandidateQueued;
}

/// `agent_finished`: how the candidate's agent process ended.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
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
pub struct BaselineResult {
    pub command: String,
    pub passed: bool,
    #[serde(default)]
    pub exit_code: Option<i32>,
}

/// `baseline_finished`: the verify commands on the base commit.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
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
pub struct CandidateFinished {
    pub status: crate::status::CandidateStatus,
    /// Why it never started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
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
        assert_eq!(ev.data_as::<CandidateFinished>().unwrap().reason.as_deref(), Some("c01 already passed"));
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
        ] {
            assert_eq!(serde_json::to_value(k).unwrap(), serde_json::Value::String(k.as_str().into()));
        }
    }
}
