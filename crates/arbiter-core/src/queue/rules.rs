//! The plan queue's rules as plain functions: what a report makes of its task (retry now,
//! after a backoff, or fail), the event it writes, the one-round-trip report decided from
//! the lease alone, lease expiries and key-file paths. Every path of every store — the
//! general one and the fast ones — decides with these, so the queue's rules live here once.

use std::collections::BTreeSet;

use crate::money::Usd;
use crate::plan::TaskSpec;
use crate::plan::event::{AttemptEnded, BranchPrevious, BranchRecorded, PlanEntry, PlanLogEntry, TaskEntry};
use crate::plan::spec::backoff_seconds;
use crate::plan::state::{AttemptStatus, TaskStatus};
use crate::queue::plans::{AttemptResult, BranchOrigin, BranchRecord, Finished, Lease, Retry};
use crate::text::storable;
use crate::time::Timestamp;

/// The event recording a branch record.
pub fn branch_event(record: &BranchRecord, previous: Option<&BranchRecord>) -> PlanEntry {
    let recorded = BranchRecorded {
        branch: record.name.clone(),
        origin: record.origin.as_str().to_string(),
        base: record.base.clone(),
        previous: previous.map(|p| BranchPrevious {
            branch: p.name.clone(),
            origin: p.origin.as_str().to_string(),
            base: p.base.clone(),
        }),
    };
    match record.origin {
        BranchOrigin::Created => PlanEntry::IntegrationBranchCreated(recorded),
        BranchOrigin::Adopted => PlanEntry::IntegrationBranchAdopted(recorded),
    }
}

/// A key file as stored: `./src//a.rs/` → `src/a.rs`, so overlap is a plain prefix test.
pub fn normal_path(p: &str) -> String {
    let parts: Vec<&str> = p.split('/').filter(|s| !s.is_empty() && *s != ".").collect();
    parts.join("/")
}

/// `$micros` for a lease of `ttl` from `now`.
pub fn expiry(now: Timestamp, ttl: std::time::Duration) -> Timestamp {
    Timestamp(now.0.saturating_add(ttl.as_micros().min(i64::MAX as u128) as i64))
}

/// What a report makes of its task, decided from the task's attempts alone: the general
/// path and the one-round-trip paths of both stores decide with it.
pub struct Decision {
    pub status: TaskStatus,
    pub not_before: Timestamp,
    pub reason: Option<String>,
    pub run_id: Option<String>,
    pub commit: Option<String>,
}

pub fn decide(result: &AttemptResult, attempts: u32, max_attempts: u32, backoff_base: u64, now: Timestamp) -> Decision {
    let left = attempts < max_attempts;
    let (status, not_before, reason, run_id, commit) = match result {
        AttemptResult::Succeeded { run_id, commit } => (TaskStatus::Done, now, None, run_id.clone(), commit.clone()),
        AttemptResult::Released { reason } => (TaskStatus::Ready, now, Some(storable(reason)), None, None),
        AttemptResult::Failed { reason, retry, run_id } => {
            let (status, at) = match retry {
                Retry::Now if left => (TaskStatus::Ready, now),
                Retry::AfterBackoff if left => {
                    let wait = backoff_seconds(backoff_base, attempts) as i64 * 1_000_000;
                    (TaskStatus::Ready, Timestamp(now.0.saturating_add(wait)))
                }
                _ => (TaskStatus::Failed, now),
            };
            (status, at, Some(storable(reason)), run_id.clone(), None)
        }
    };
    Decision { status, not_before, reason, run_id, commit }
}

/// The event a report writes, named by how the attempt ended and where its task went.
pub fn outcome_event(attempt: AttemptStatus, fence: i64, d: &Decision, cost: Usd) -> TaskEntry {
    let ended = AttemptEnded {
        fence,
        status: d.status,
        reason: d.reason.clone(),
        run_id: d.run_id.clone(),
        commit: d.commit.clone(),
        cost,
        not_before: (d.status == TaskStatus::Ready).then_some(d.not_before.0),
    };
    match (attempt, d.status) {
        (AttemptStatus::Succeeded, _) => TaskEntry::TaskDone(ended),
        (AttemptStatus::Cancelled, _) => TaskEntry::TaskReleased(ended),
        (AttemptStatus::Expired, TaskStatus::Ready) => TaskEntry::LeaseExpiredRetry(ended),
        (AttemptStatus::Expired, _) => TaskEntry::LeaseExpiredFailed(ended),
        (_, TaskStatus::Ready) => TaskEntry::AttemptFailedRetry(ended),
        _ => TaskEntry::TaskFailed(ended),
    }
}

/// What a report with nothing to charge or release does, decided from its lease alone:
/// the one-round-trip report paths of both stores use it (and `None` sends a release down
/// the general path).
pub struct FastOutcome {
    pub decision: Decision,
    pub attempt_status: AttemptStatus,
    pub kind: String,
    pub data: serde_json::Value,
}

impl Decision {
    /// What the report did, once the store ended the attempt.
    pub fn finished(&self, newly_ready: Vec<String>, budget_crossed: bool) -> Finished {
        Finished {
            status: self.status,
            newly_ready,
            not_before: (self.status == TaskStatus::Ready).then_some(self.not_before),
            budget_crossed,
        }
    }
}

impl FastOutcome {
    /// What the report did, once the store says it ended the attempt (it charges nothing).
    pub fn finished(&self, newly_ready: Vec<String>) -> Finished {
        self.decision.finished(newly_ready, false)
    }
}

pub fn fast_outcome(lease: &Lease, result: &AttemptResult, now: Timestamp) -> Option<FastOutcome> {
    if matches!(result, AttemptResult::Released { .. }) {
        return None;
    }
    let attempt_status = result.attempt_status();
    let decision = decide(result, lease.attempt, lease.max_attempts, lease.retry_backoff_seconds, now);
    let entry = PlanLogEntry::from(outcome_event(attempt_status, lease.fence, &decision, Usd::ZERO));
    let (kind, data) = entry.to_parts();
    Some(FastOutcome { decision, attempt_status, kind, data })
}

/// A task's dependencies (each once) and its key files as stored.
pub fn deps_and_files(t: &TaskSpec) -> (BTreeSet<&str>, BTreeSet<String>) {
    let deps = t.dependencies.iter().map(String::as_str).collect();
    let files = t.key_files.iter().map(|f| normal_path(f)).filter(|f| !f.is_empty()).collect();
    (deps, files)
}
