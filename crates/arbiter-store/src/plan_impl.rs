//! The plan queue's behaviour, written once for both stores: decoding rows (generic over
//! the database) and the [`PlanStore`](crate::plans::PlanStore) methods (a macro expanded
//! for each store over its own pool). Each store supplies its dialect
//! ([`PlanDialect`](crate::plan_sql::PlanDialect)), how a write transaction begins, how
//! waiting claimers are woken, and optional one-statement fast paths for claims and reports.

use std::collections::BTreeSet;

use arbiter_core::budget::Budget;
use arbiter_core::money::Usd;
use arbiter_core::plan::event::{AttemptEnded, BranchPrevious, BranchRecorded, PlanEntry, PlanLogEntry, TaskEntry};
use arbiter_core::plan::state::{AttemptStatus, TaskStatus};
use arbiter_core::plan::{PlanSpec, TaskSpec};
use arbiter_core::time::Timestamp;

use crate::StoreError;
use crate::db::{Db, Rec, Sql};
use crate::plans::{
    AttemptRecord, AttemptResult, BranchOrigin, BranchRecord, Claimed, Finished, Lease, PlanEvent, PlanRecord, Retry,
    TaskRecord,
};
use crate::rows::get;

fn usd(pico: i64) -> Usd {
    Usd::from_pico(pico)
}

fn json<T: for<'de> serde::Deserialize<'de>>(column: &'static str, text: String) -> Result<T, StoreError> {
    serde_json::from_str(&text).map_err(|_| StoreError::Corrupt { column, value: text })
}

pub(crate) fn plan<D: Db>(row: &Rec<D>) -> Result<PlanRecord, StoreError> {
    let header: PlanSpec = json("plans.header", get(row, "header")?)?;
    Ok(PlanRecord {
        header,
        budget: budget(row)?,
        cancelled: get(row, "cancelled")?,
        created_at: Timestamp(get(row, "created_at")?),
        updated_at: Timestamp(get(row, "updated_at")?),
        branch: branch(row)?,
    })
}

/// A plan row's integration branch record (all four columns, or none).
fn branch<D: Db>(row: &Rec<D>) -> Result<Option<BranchRecord>, StoreError> {
    let name: Option<String> = get(row, "branch_name")?;
    let origin: Option<String> = get(row, "branch_origin")?;
    let base: Option<String> = get(row, "branch_base")?;
    let at: Option<i64> = get(row, "branch_recorded_at")?;
    let (Some(name), Some(origin), Some(base)) = (name, origin, base) else {
        return Ok(None);
    };
    let origin =
        BranchOrigin::parse(&origin).ok_or(StoreError::Corrupt { column: "plans.branch_origin", value: origin })?;
    Ok(Some(BranchRecord { name, origin, base, recorded_at: Timestamp(at.unwrap_or(0)) }))
}

/// The event recording a branch record.
pub(crate) fn branch_event(record: &BranchRecord, previous: Option<&BranchRecord>) -> PlanEntry {
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

/// A plan row's budget columns.
pub(crate) fn budget<D: Db>(row: &Rec<D>) -> Result<Budget, StoreError> {
    Ok(Budget {
        limit: get::<_, Option<i64>>(row, "budget_pico")?.map(usd),
        spent: usd(get(row, "spent_pico")?),
        reserved: usd(get(row, "reserved_pico")?),
        crossed: get(row, "budget_crossed")?,
    })
}

pub(crate) fn task<D: Db>(row: &Rec<D>) -> Result<TaskRecord, StoreError> {
    let status: String = get(row, "status")?;
    let spec: TaskSpec = json("plan_tasks.spec", get(row, "spec")?)?;
    Ok(TaskRecord {
        spec,
        ord: get(row, "ord")?,
        status: TaskStatus::parse(&status).ok_or(StoreError::Corrupt { column: "plan_tasks.status", value: status })?,
        deps_left: get(row, "deps_left")?,
        attempts: get::<_, i64>(row, "attempts")? as u32,
        max_attempts: get::<_, i64>(row, "max_attempts")? as u32,
        not_before: Timestamp(get(row, "not_before")?),
        fence: get(row, "fence")?,
        lease_owner: get(row, "lease_owner")?,
        lease_expires: get::<_, Option<i64>>(row, "lease_expires")?.map(Timestamp),
        reserved: usd(get(row, "reserved_pico")?),
        cost: usd(get(row, "cost_pico")?),
        run_id: get(row, "run_id")?,
        commit: get(row, "commit_sha")?,
        reason: get(row, "reason")?,
        version: get(row, "version")?,
    })
}

pub(crate) fn attempt<D: Db>(row: &Rec<D>) -> Result<AttemptRecord, StoreError> {
    let status: String = get(row, "status")?;
    Ok(AttemptRecord {
        task_id: get(row, "task_id")?,
        attempt: get::<_, i64>(row, "attempt")? as u32,
        fence: get(row, "fence")?,
        worker: get(row, "worker")?,
        status: AttemptStatus::parse(&status)
            .ok_or(StoreError::Corrupt { column: "plan_attempts.status", value: status })?,
        started_at: Timestamp(get(row, "started_at")?),
        finished_at: get::<_, Option<i64>>(row, "finished_at")?.map(Timestamp),
        reserved: usd(get(row, "reserved_pico")?),
        cost: usd(get(row, "cost_pico")?),
        run_id: get(row, "run_id")?,
        commit: get(row, "commit_sha")?,
        reason: get(row, "reason")?,
    })
}

pub(crate) fn event<D: Db>(row: &Rec<D>) -> Result<PlanEvent, StoreError> {
    Ok(PlanEvent {
        id: get(row, "id")?,
        plan_id: get(row, "plan_id")?,
        task_id: get(row, "task_id")?,
        attempt: get::<_, Option<i64>>(row, "attempt")?.map(|a| a as u32),
        kind: get(row, "kind")?,
        at: Timestamp(get(row, "at")?),
        data: json("plan_events.data", get(row, "data")?)?,
    })
}

/// A key file as stored: `./src//a.rs/` → `src/a.rs`, so overlap is a plain prefix test.
pub(crate) fn normal_path(p: &str) -> String {
    let parts: Vec<&str> = p.split('/').filter(|s| !s.is_empty() && *s != ".").collect();
    parts.join("/")
}

/// `$micros` for a lease of `ttl` from `now`.
pub(crate) fn expiry(now: Timestamp, ttl: std::time::Duration) -> Timestamp {
    Timestamp(now.0.saturating_add(ttl.as_micros().min(i64::MAX as u128) as i64))
}

/// What a report makes of its task, decided from the task's attempts alone: the general
/// path and the one-round-trip paths of both stores decide with it.
pub(crate) struct Decision {
    pub status: TaskStatus,
    pub not_before: Timestamp,
    pub reason: Option<String>,
    pub run_id: Option<String>,
    pub commit: Option<String>,
}

pub(crate) fn decide(
    result: &AttemptResult,
    attempts: u32,
    max_attempts: u32,
    backoff_base: u64,
    now: Timestamp,
) -> Decision {
    use arbiter_core::plan::spec::backoff_seconds;
    use arbiter_core::text::storable;
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
pub(crate) fn outcome_event(attempt: AttemptStatus, fence: i64, d: &Decision, cost: Usd) -> TaskEntry {
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
pub(crate) struct FastOutcome {
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

/// The parameters `$1`–`$12` of a one-round-trip report (both stores' fast paths).
pub(crate) fn bind_fast_report<'q, D: Db>(
    query: Sql<'q, D>,
    lease: &Lease,
    o: &FastOutcome,
    now: Timestamp,
) -> Sql<'q, D> {
    let d = &o.decision;
    query
        .bind(lease.plan_id.as_str())
        .bind(lease.task_id.as_str())
        .bind(d.status.as_str())
        .bind(d.not_before.0)
        .bind(d.run_id.as_deref())
        .bind(d.commit.as_deref())
        .bind(d.reason.as_deref())
        .bind(now.0)
        .bind(lease.fence)
        .bind(o.attempt_status.as_str())
        .bind(o.kind.as_str())
        .bind(o.data.to_string())
}

pub(crate) fn fast_outcome(lease: &Lease, result: &AttemptResult, now: Timestamp) -> Option<FastOutcome> {
    if matches!(result, AttemptResult::Released { .. }) {
        return None;
    }
    let attempt_status = result.attempt_status();
    let decision = decide(result, lease.attempt, lease.max_attempts, lease.retry_backoff_seconds, now);
    let entry = PlanLogEntry::from(outcome_event(attempt_status, lease.fence, &decision, Usd::ZERO));
    let (kind, data) = entry.to_parts();
    Some(FastOutcome { decision, attempt_status, kind, data })
}

/// Who claims, until when, with how much reserved.
pub(crate) struct Claimant<'a> {
    pub plan: &'a str,
    pub worker: &'a str,
    pub expires: Timestamp,
    pub reserved: Usd,
}

/// The claim a claimed row describes (`id`, `attempts`, `max_attempts`, `fence`, `spec`),
/// under the plan's retry backoff base.
pub(crate) fn claimed<D: Db>(row: &Rec<D>, who: &Claimant<'_>, backoff: u64) -> Result<Claimed, StoreError> {
    let task: TaskSpec = json("plan_tasks.spec", get(row, "spec")?)?;
    Ok(Claimed {
        lease: Lease {
            plan_id: who.plan.to_string(),
            task_id: get(row, "id")?,
            attempt: get::<_, i64>(row, "attempts")? as u32,
            max_attempts: get::<_, i64>(row, "max_attempts")? as u32,
            fence: get(row, "fence")?,
            worker: who.worker.to_string(),
            expires: who.expires,
            reserved: who.reserved,
            retry_backoff_seconds: backoff,
        },
        task,
    })
}

/// The claim a one-round-trip claim returned (the claimed row and the plan's
/// `retry_backoff_seconds`): those paths reserve nothing.
pub(crate) fn fast_claim<D: Db>(
    row: &Rec<D>,
    plan: &str,
    worker: &str,
    expires: Timestamp,
) -> Result<Claimed, StoreError> {
    let backoff = get::<_, i64>(row, "retry_backoff_seconds")?.max(0) as u64;
    claimed(row, &Claimant { plan, worker, expires, reserved: Usd::ZERO }, backoff)
}

/// A task's dependencies (each once) and its key files as stored.
pub(crate) fn deps_and_files(t: &TaskSpec) -> (BTreeSet<&str>, BTreeSet<String>) {
    let deps = t.dependencies.iter().map(String::as_str).collect();
    let files = t.key_files.iter().map(|f| normal_path(f)).filter(|f| !f.is_empty()).collect();
    (deps, files)
}

/// A token naming the rows one claim or report changes (cleared before its transaction
/// commits), unique across processes: the pid with the moment this process first made one.
pub(crate) fn token(kind: &str) -> String {
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    static ORIGIN: OnceLock<u128> = OnceLock::new();
    let origin = ORIGIN
        .get_or_init(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    format!("{kind}:{}:{origin}:{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}
