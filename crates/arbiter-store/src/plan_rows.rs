//! The plan queue's rows read back as records (generic over the database, so SQLite and
//! Postgres rows map through the same code), the claims both stores' fast paths return,
//! and the parameters of a one-round-trip report.

use arbiter_core::budget::Budget;
use arbiter_core::money::Usd;
use arbiter_core::plan::state::{AttemptStatus, TaskStatus};
use arbiter_core::plan::{PlanSpec, TaskSpec};
use arbiter_core::time::Timestamp;

use crate::StoreError;
use crate::db::{Db, Rec, Sql};
use crate::plans::{AttemptRecord, BranchOrigin, BranchRecord, Claimed, Lease, PlanEvent, PlanRecord, TaskRecord};
use arbiter_core::queue::rules::FastOutcome;

fn usd(pico: i64) -> Usd {
    Usd::from_pico(pico)
}

fn json<T: for<'de> serde::Deserialize<'de>>(column: &'static str, text: String) -> Result<T, StoreError> {
    serde_json::from_str(&text).map_err(|_| StoreError::Corrupt { column, value: text })
}

pub(crate) fn plan<D: Db>(row: &Rec<D>) -> Result<PlanRecord, StoreError> {
    let header: PlanSpec = json("plans.header", row.try_get("header")?)?;
    Ok(PlanRecord {
        header,
        budget: budget(row)?,
        cancelled: row.try_get("cancelled")?,
        created_at: Timestamp(row.try_get("created_at")?),
        updated_at: Timestamp(row.try_get("updated_at")?),
        branch: branch(row)?,
    })
}

/// A plan row's integration branch record (all four columns, or none).
fn branch<D: Db>(row: &Rec<D>) -> Result<Option<BranchRecord>, StoreError> {
    let name: Option<String> = row.try_get("branch_name")?;
    let origin: Option<String> = row.try_get("branch_origin")?;
    let base: Option<String> = row.try_get("branch_base")?;
    let at: Option<i64> = row.try_get("branch_recorded_at")?;
    let (Some(name), Some(origin), Some(base)) = (name, origin, base) else {
        return Ok(None);
    };
    let origin =
        BranchOrigin::parse(&origin).ok_or(StoreError::Corrupt { column: "plans.branch_origin", value: origin })?;
    Ok(Some(BranchRecord { name, origin, base, recorded_at: Timestamp(at.unwrap_or(0)) }))
}

/// A plan row's budget columns.
pub(crate) fn budget<D: Db>(row: &Rec<D>) -> Result<Budget, StoreError> {
    Ok(Budget {
        limit: row.try_get::<Option<i64>, _>("budget_pico")?.map(usd),
        spent: usd(row.try_get("spent_pico")?),
        reserved: usd(row.try_get("reserved_pico")?),
        crossed: row.try_get("budget_crossed")?,
    })
}

pub(crate) fn task<D: Db>(row: &Rec<D>) -> Result<TaskRecord, StoreError> {
    let status: String = row.try_get("status")?;
    let spec: TaskSpec = json("plan_tasks.spec", row.try_get("spec")?)?;
    Ok(TaskRecord {
        spec,
        ord: row.try_get("ord")?,
        status: TaskStatus::parse(&status).ok_or(StoreError::Corrupt { column: "plan_tasks.status", value: status })?,
        deps_left: row.try_get("deps_left")?,
        attempts: row.try_get::<i64, _>("attempts")? as u32,
        max_attempts: row.try_get::<i64, _>("max_attempts")? as u32,
        not_before: Timestamp(row.try_get("not_before")?),
        fence: row.try_get("fence")?,
        lease_owner: row.try_get("lease_owner")?,
        lease_expires: row.try_get::<Option<i64>, _>("lease_expires")?.map(Timestamp),
        reserved: usd(row.try_get("reserved_pico")?),
        cost: usd(row.try_get("cost_pico")?),
        run_id: row.try_get("run_id")?,
        commit: row.try_get("commit_sha")?,
        reason: row.try_get("reason")?,
        version: row.try_get("version")?,
    })
}

pub(crate) fn attempt<D: Db>(row: &Rec<D>) -> Result<AttemptRecord, StoreError> {
    let status: String = row.try_get("status")?;
    Ok(AttemptRecord {
        task_id: row.try_get("task_id")?,
        attempt: row.try_get::<i64, _>("attempt")? as u32,
        fence: row.try_get("fence")?,
        worker: row.try_get("worker")?,
        status: AttemptStatus::parse(&status)
            .ok_or(StoreError::Corrupt { column: "plan_attempts.status", value: status })?,
        started_at: Timestamp(row.try_get("started_at")?),
        finished_at: row.try_get::<Option<i64>, _>("finished_at")?.map(Timestamp),
        reserved: usd(row.try_get("reserved_pico")?),
        cost: usd(row.try_get("cost_pico")?),
        run_id: row.try_get("run_id")?,
        commit: row.try_get("commit_sha")?,
        reason: row.try_get("reason")?,
    })
}

pub(crate) fn event<D: Db>(row: &Rec<D>) -> Result<PlanEvent, StoreError> {
    Ok(PlanEvent {
        id: row.try_get("id")?,
        plan_id: row.try_get("plan_id")?,
        task_id: row.try_get("task_id")?,
        attempt: row.try_get::<Option<i64>, _>("attempt")?.map(|a| a as u32),
        kind: row.try_get("kind")?,
        at: Timestamp(row.try_get("at")?),
        data: json("plan_events.data", row.try_get("data")?)?,
    })
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
    let task: TaskSpec = json("plan_tasks.spec", row.try_get("spec")?)?;
    Ok(Claimed {
        lease: Lease {
            plan_id: who.plan.to_string(),
            task_id: row.try_get("id")?,
            attempt: row.try_get::<i64, _>("attempts")? as u32,
            max_attempts: row.try_get::<i64, _>("max_attempts")? as u32,
            fence: row.try_get("fence")?,
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
    let backoff = row.try_get::<i64, _>("retry_backoff_seconds")?.max(0) as u64;
    claimed(row, &Claimant { plan, worker, expires, reserved: Usd::ZERO }, backoff)
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
