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

#[cfg(test)]
mod tests {
    use super::*;

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
