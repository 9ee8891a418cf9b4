//! The states of a run and of a candidate.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Where a run stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Candidates or evaluation in progress.
    Running,
    /// A winner was selected (and materialized as asked).
    Succeeded,
    /// A winner was selected but not applied: applying it failed, or no verify command
    /// checked it (`arbiter apply RUN` applies it).
    NotApplied,
    /// The run finished without an acceptable candidate.
    Failed,
    /// Stopped by Ctrl-C or SIGTERM, or found abandoned after a crash.
    Interrupted,
    /// An environment error stopped the run (git failure, disk, ...).
    Error,
}

/// Where a candidate stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum CandidateStatus {
    Queued,
    Preparing,
    Running,
    Evaluating,
    /// The agent exited 0 and the candidate was evaluated.
    Finished,
    /// The agent exited non-zero; the candidate was still evaluated.
    AgentFailed,
    /// The agent outlived the timeout and its process group was killed.
    TimedOut,
    /// The agent's loop hit a limit (steps, tokens); its patch so far is evaluated.
    LimitReached,
    /// The worktree, include copy or setup command failed: nothing to evaluate.
    SetupFailed,
    /// The run was interrupted before the candidate finished.
    Cancelled,
    /// Never started: an escalation stopped at an earlier candidate, or the run's budget
    /// was spent first.
    Skipped,
}

impl CandidateStatus {
    pub fn is_terminal(self) -> bool {
        !matches!(self, Self::Queued | Self::Preparing | Self::Running | Self::Evaluating)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Preparing => "preparing",
            Self::Running => "running",
            Self::Evaluating => "evaluating",
            Self::Finished => "finished",
            Self::AgentFailed => "agent_failed",
            Self::TimedOut => "timed_out",
            Self::LimitReached => "limit_reached",
            Self::SetupFailed => "setup_failed",
            Self::Cancelled => "cancelled",
            Self::Skipped => "skipped",
        }
    }
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::NotApplied => "not_applied",
            Self::Failed => "failed",
            Self::Interrupted => "interrupted",
            Self::Error => "error",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "running" => Self::Running,
            "succeeded" => Self::Succeeded,
            "not_applied" => Self::NotApplied,
            "failed" => Self::Failed,
            "interrupted" => Self::Interrupted,
            "error" => Self::Error,
            _ => return None,
        })
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for CandidateStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
