//! Task and attempt states, and which transitions are allowed from where. The store guards
//! every update with the expected status (and version or fencing token) and writes the
//! event in the same transaction; the sets of allowed origins come from here.
//!
//! ```text
//! blocked ──deps done──▶ ready ──claim──▶ running ──win committed──▶ done
//!    ▲                     ▲                 │
//!    │                     └──fail, attempts left (after backoff)
//!    │                                       └──fail, none left──▶ failed
//!    └──retry / reset── failed, cancelled, skipped        (skip: gate --strict)
//! ```
//!
//! A reset returns every task to how it was imported: the statuses an import or a gate
//! gave (done, skipped) stay; any other task waits again for its dependencies.

use serde::{Deserialize, Serialize};

/// Where a task stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Some dependency is not done.
    Blocked,
    /// Every dependency is done: a claim may take it (after `not_before`).
    Ready,
    /// Claimed under a lease.
    Running,
    Done,
    /// Its last attempt failed and no attempt is left.
    Failed,
    /// Left out (the decision gate rejected it, or the file said so).
    Skipped,
    Cancelled,
}

impl TaskStatus {
    pub const ALL: &'static [TaskStatus] =
        &[Self::Blocked, Self::Ready, Self::Running, Self::Done, Self::Failed, Self::Skipped, Self::Cancelled];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Blocked => "blocked",
            Self::Ready => "ready",
            Self::Running => "running",
            Self::Done => "done",
            Self::Failed => "failed",
            Self::Skipped => "skipped",
            Self::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|t| t.as_str() == s)
    }

    /// Nothing more happens to it without a retry or reset.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Done | Self::Failed | Self::Skipped | Self::Cancelled)
    }

    /// A plan succeeds when every task is done or skipped.
    pub fn is_success(self) -> bool {
        matches!(self, Self::Done | Self::Skipped)
    }
}

/// What happens to a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskEvent {
    Claim,
    Succeed,
    /// An attempt failed (or its lease expired) and another attempt is allowed.
    FailAndRetry,
    /// An attempt failed and none is left.
    FailFinally,
    Skip,
    Cancel,
    /// `plan retry`: a finished-but-unsuccessful task gets new attempts.
    Retry,
    /// A re-import with `--update` changes a task that has not started.
    Update,
}

impl TaskEvent {
    /// The statuses the event may happen in.
    pub fn allowed_from(self) -> &'static [TaskStatus] {
        use TaskStatus::*;
        match self {
            TaskEvent::Claim => &[Ready],
            TaskEvent::Succeed | TaskEvent::FailAndRetry | TaskEvent::FailFinally => &[Running],
            TaskEvent::Skip => &[Blocked, Ready],
            TaskEvent::Cancel => &[Blocked, Ready, Running],
            TaskEvent::Retry => &[Failed, Cancelled, Skipped],
            TaskEvent::Update => &[Blocked, Ready],
        }
    }

    /// Whether the event may happen to a task in `status`.
    pub fn allowed(self, status: TaskStatus) -> bool {
        self.allowed_from().contains(&status)
    }
}

/// A task that is not blocked waits in `ready`; with unmet dependencies it is `blocked`.
pub fn waiting_status(unmet_dependencies: i64) -> TaskStatus {
    if unmet_dependencies > 0 { TaskStatus::Blocked } else { TaskStatus::Ready }
}

/// How one attempt ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum AttemptStatus {
    Running,
    Succeeded,
    Failed,
    /// Its lease expired before it reported.
    Expired,
    Cancelled,
}

impl AttemptStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Expired => "expired",
            Self::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Self::Running, Self::Succeeded, Self::Failed, Self::Expired, Self::Cancelled]
            .into_iter()
            .find(|a| a.as_str() == s)
    }
}

/// What a unit does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum UnitKind {
    /// One candidate: its workspace, its agent, its patch.
    Candidate,
    /// Everything after the candidates: gates, cross-tests, judges, the selection.
    Evaluation,
}

impl UnitKind {
    pub fn as_str(self) -> &'static str {
        match self {
            UnitKind::Candidate => "candidate",
            UnitKind::Evaluation => "evaluation",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "candidate" => Some(UnitKind::Candidate),
            "evaluation" => Some(UnitKind::Evaluation),
            _ => None,
        }
    }
}

/// What a finished unit left for its attempt's evaluation, as the store keeps it (a
/// candidate's status, or why the candidate has no result). Written as it always was:
/// `{"status": "..."}`, `{"error": "..."}`, `{"lost": "..."}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum UnitResult {
    /// The candidate ran to this status; its results are in the run directory.
    Status(crate::status::CandidateStatus),
    /// The candidate could not run at all (its agent could not start, say).
    Error(String),
    /// The unit was given up (its workers' leases ran out, or no worker could run it).
    Lost(String),
}

impl UnitResult {
    /// Why the candidate has no result (`None`: it has one).
    pub fn missing(&self) -> Option<&str> {
        match self {
            UnitResult::Status(_) => None,
            UnitResult::Error(why) | UnitResult::Lost(why) => Some(why),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transitions_are_guarded() {
        assert!(TaskEvent::Claim.allowed(TaskStatus::Ready));
        assert!(!TaskEvent::Claim.allowed(TaskStatus::Blocked), "a blocked task is never claimed");
        assert!(!TaskEvent::Succeed.allowed(TaskStatus::Done), "nothing is done twice");
        assert!(!TaskEvent::Update.allowed(TaskStatus::Done), "finished tasks are not changed");
        assert!(TaskEvent::Retry.allowed(TaskStatus::Failed) && !TaskEvent::Retry.allowed(TaskStatus::Done));
        for s in TaskStatus::ALL {
            assert_eq!(TaskStatus::parse(s.as_str()), Some(*s));
        }
        assert_eq!(waiting_status(2), TaskStatus::Blocked);
        assert_eq!(waiting_status(0), TaskStatus::Ready);
    }

    /// Stored results read back as they were written, before this type existed too.
    #[test]
    fn unit_results_keep_their_stored_shape() {
        use crate::status::CandidateStatus;
        for (text, result) in [
            (r#"{"status":"finished"}"#, UnitResult::Status(CandidateStatus::Finished)),
            (r#"{"error":"its agent could not start"}"#, UnitResult::Error("its agent could not start".into())),
            (r#"{"lost":"its lease ran out 3 times"}"#, UnitResult::Lost("its lease ran out 3 times".into())),
        ] {
            assert_eq!(serde_json::from_str::<UnitResult>(text).unwrap(), result);
            assert_eq!(serde_json::to_string(&result).unwrap(), text);
        }
        assert_eq!(UnitResult::Lost("x".into()).missing(), Some("x"));
        assert_eq!(UnitResult::Status(CandidateStatus::Finished).missing(), None);
    }
}
