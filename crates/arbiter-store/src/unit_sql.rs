//! The unit queue's statements that both stores run as written, the unit rows read back as
//! records, and what each store says in its own dialect to lock a unit and an attempt
//! ([`UnitDialect`]). The queue itself is [`crate::unit_queue`].

use const_format::concatcp;

use arbiter_core::money::Usd;
use arbiter_core::time::Timestamp;

use crate::StoreError;
use crate::db::{Db, Rec};
use crate::units::{UnitKind, UnitRecord, UnitStatus};

/// What each store says in its own dialect.
pub trait UnitDialect {
    /// The ready units a claim looks at, best first (`$1` a plan or NULL for every plan).
    const PICK_UNITS: &'static str;
    /// A unit's state and its attempt's (`$1` plan, `$2` task, `$3` the attempt's fence,
    /// `$4` the unit), the unit locked where the store has row locks.
    const LOCK_UNIT: &'static str;
    /// A task's status and fence (`$1` plan, `$2` task), locked likewise.
    const LOCK_ATTEMPT: &'static str;
}

/// The start of [`UnitDialect::PICK_UNITS`]: ready units of running attempts of plans that
/// are not cancelled, evaluations first, then in task and unit order, with what a claim
/// needs of their task.
pub(crate) const PICK_UNITS: &str =
    "SELECT u.plan_id, u.task_id, u.task_fence, u.name, u.kind, u.needs, u.fence, u.run_id, u.base,
        u.avoid_worker, u.avoid_until, t.attempts, t.max_attempts, t.reserved_pico, t.spec, p.retry_backoff_seconds
 FROM plan_units u
 JOIN plan_tasks t ON t.plan_id = u.plan_id AND t.id = u.task_id AND t.status = 'running' AND t.fence = u.task_fence
 JOIN plans p ON p.id = u.plan_id
 WHERE u.status = 'ready' AND NOT p.cancelled AND (CAST($1 AS TEXT) IS NULL OR u.plan_id = $1)
 ORDER BY CASE u.kind WHEN 'evaluation' THEN 0 ELSE 1 END, t.priority, t.ord, u.ord
 LIMIT 64";

/// Whether any unit of a running attempt is ready (`$1` a plan or NULL): a claim that finds
/// none takes no write lock.
pub const ANY_READY_UNIT: &str = "SELECT 1 AS found FROM plan_units u
     JOIN plan_tasks t ON t.plan_id = u.plan_id AND t.id = u.task_id AND t.status = 'running' AND t.fence = u.task_fence
     WHERE u.status = 'ready' AND (CAST($1 AS TEXT) IS NULL OR u.plan_id = $1) LIMIT 1";

/// The start of [`UnitDialect::LOCK_UNIT`].
pub(crate) const UNIT_STATE: &str =
    "SELECT u.status, u.fence, u.kind, u.tries, t.status AS task_status, t.fence AS task_fence_now
 FROM plan_units u JOIN plan_tasks t ON t.plan_id = u.plan_id AND t.id = u.task_id
 WHERE u.plan_id = $1 AND u.task_id = $2 AND u.task_fence = $3 AND u.name = $4";

/// The start of [`UnitDialect::LOCK_ATTEMPT`].
pub(crate) const ATTEMPT_STATE: &str = "SELECT status, fence FROM plan_tasks WHERE plan_id = $1 AND id = $2";

/// See [`UnitQueue::tasks_choose_runners`](crate::units::UnitQueue::tasks_choose_runners).
/// A task's spec is compact JSON whose keys are present only when set, and a `"` inside a
/// value is escaped: `"runners":` appears in it exactly when the task names its runners.
pub const TASKS_CHOOSE_RUNNERS: &str = "SELECT EXISTS (SELECT 1 FROM plan_tasks
     WHERE plan_id = $1 AND status IN ('ready', 'blocked')
       AND (spec LIKE '%\"runners\":%' OR spec LIKE '%\"candidates\":%')) AS chooses";

pub const READY_TASKS: &str = "SELECT spec FROM plan_tasks
     WHERE plan_id = $1 AND status = 'ready' AND not_before <= $2 ORDER BY priority, ord LIMIT $3 OFFSET $4";

/// The attempt spreads over units: its lease stops expiring and is no longer its claimer's
/// (and what an earlier attempt left as the task's reason no longer applies).
pub const SPREAD_ATTEMPT: &str = "UPDATE plan_tasks SET lease_owner = NULL, lease_expires = NULL, run_id = $3,
         reason = NULL, version = version + 1, updated_at = $4
     WHERE plan_id = $1 AND id = $2 AND status = 'running' AND fence = $5";

pub const ATTEMPT_RUN: &str =
    "UPDATE plan_attempts SET run_id = $4, settings = $5 WHERE plan_id = $1 AND task_id = $2 AND fence = $3";

pub const ATTEMPT_SETTINGS: &str =
    "SELECT settings FROM plan_attempts WHERE plan_id = $1 AND task_id = $2 AND fence = $3";

pub const INSERT_UNIT: &str = "INSERT INTO plan_units
     (plan_id, task_id, task_fence, name, kind, ord, needs, status, run_id, base, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)";

/// Leases a ready unit (`$5` its fence when picked, `$6` the worker, `$7` the expiry).
pub const LEASE_UNIT: &str = "UPDATE plan_units SET status = 'running', fence = fence + 1, worker = $6,
         lease_expires = $7, updated_at = $8
     WHERE plan_id = $1 AND task_id = $2 AND task_fence = $3 AND name = $4 AND status = 'ready' AND fence = $5";

pub const HEARTBEAT_UNIT: &str = "UPDATE plan_units SET lease_expires = $6, updated_at = $7
     WHERE plan_id = $1 AND task_id = $2 AND task_fence = $3 AND name = $4 AND fence = $5 AND status = 'running'
       AND EXISTS (SELECT 1 FROM plan_tasks t WHERE t.plan_id = $1 AND t.id = $2 AND t.status = 'running' AND t.fence = $3)";

/// A unit done (`$5` its result, `$6` its cost).
pub const UNIT_DONE: &str = "UPDATE plan_units SET status = 'done', lease_expires = NULL, result = $5,
         cost_pico = cost_pico + $6, updated_at = $7
     WHERE plan_id = $1 AND task_id = $2 AND task_fence = $3 AND name = $4";

/// A unit back in the queue (`$5` its cost so far, `$6` 1 when the try counts).
pub const UNIT_AGAIN: &str = "UPDATE plan_units SET status = 'ready', worker = NULL, lease_expires = NULL,
         cost_pico = cost_pico + $5, tries = tries + $6, updated_at = $7
     WHERE plan_id = $1 AND task_id = $2 AND task_fence = $3 AND name = $4";

/// The worker that refused a unit is not given it before `$6` (`$5` the worker).
pub const AVOID_WORKER: &str = "UPDATE plan_units SET avoid_worker = $5, avoid_until = $6
     WHERE plan_id = $1 AND task_id = $2 AND task_fence = $3 AND name = $4";

/// Why a running task is not moving (a unit of it was refused): shown by `plan status`.
pub const TASK_WAITING_REASON: &str =
    "UPDATE plan_tasks SET reason = $3 WHERE plan_id = $1 AND id = $2 AND status = 'running'";

/// Why unit leases are taken back, and what a given-up unit says.
pub enum TakeBack<'a> {
    /// Their leases ran out (the try counts).
    Expired,
    /// Their workers were stopped or are known dead (the try does not count).
    Released,
    /// Their worker could not run them (the try counts).
    Refused(&'a str),
}

impl TakeBack<'_> {
    pub fn counts(&self) -> bool {
        !matches!(self, TakeBack::Released)
    }

    /// The reason an event gives.
    pub fn reason(&self, worker: &str) -> String {
        match self {
            TakeBack::Expired => "its lease ran out".into(),
            TakeBack::Released => "its worker process is gone".into(),
            TakeBack::Refused(why) => format!("worker {} could not run it: {why}", crate::units::worker_of(worker)),
        }
    }

    /// Why a unit given up after `tries` tries has no result.
    pub fn given_up(&self, tries: u32, worker: &str) -> String {
        match self {
            TakeBack::Refused(why) => {
                format!("no worker could run it ({tries} tries; the last, {}: {why})", crate::units::worker_of(worker))
            }
            _ => format!("its lease ran out {tries} times (worker {worker} last)"),
        }
    }
}

pub const CANDIDATES_LEFT: &str = "SELECT COUNT(*) AS n FROM plan_units
     WHERE plan_id = $1 AND task_id = $2 AND task_fence = $3 AND kind = 'candidate' AND status <> 'done'";

pub const EVALUATION_READY: &str = "UPDATE plan_units SET status = 'ready', updated_at = $4
     WHERE plan_id = $1 AND task_id = $2 AND task_fence = $3 AND kind = 'evaluation' AND status = 'waiting'";

pub(crate) const UNIT_COLUMNS: &str =
    "u.plan_id, u.task_id, u.task_fence, u.name, u.kind, u.ord, u.needs, u.status, u.fence, u.worker,
 u.lease_expires, u.tries, u.run_id, u.base, u.result, u.cost_pico";

pub const UNITS_OF: &str = concatcp!(
    "SELECT ",
    UNIT_COLUMNS,
    " FROM plan_units u WHERE u.plan_id = $1 AND u.task_id = $2 AND u.task_fence = $3 ORDER BY u.ord"
);

pub const RUNNING_UNITS: &str = concatcp!(
    "SELECT ",
    UNIT_COLUMNS,
    " FROM plan_units u JOIN plan_tasks t ON t.plan_id = u.plan_id AND t.id = u.task_id AND t.status = 'running' AND t.fence = u.task_fence
     WHERE u.plan_id = $1 ORDER BY t.ord, u.ord"
);

/// Unit leases that ran out (`$1` now), of running attempts, in one fixed order (expiry,
/// then plan, task and unit order): a sweep takes them back, and their locks, in this order.
pub const EXPIRED_UNITS: &str = "SELECT u.plan_id, u.task_id, u.task_fence, u.name, u.kind, u.fence, u.worker, u.tries
     FROM plan_units u JOIN plan_tasks t ON t.plan_id = u.plan_id AND t.id = u.task_id AND t.status = 'running' AND t.fence = u.task_fence
     WHERE u.status = 'running' AND u.lease_expires < $1 ORDER BY u.lease_expires, u.plan_id, t.ord, u.ord";

/// The unit leases a worker holds in a plan (`$2` the worker), of running attempts.
pub const UNITS_HELD_BY: &str = "SELECT u.plan_id, u.task_id, u.task_fence, u.name, u.kind, u.fence, u.worker, u.tries
     FROM plan_units u JOIN plan_tasks t ON t.plan_id = u.plan_id AND t.id = u.task_id AND t.status = 'running' AND t.fence = u.task_fence
     WHERE u.plan_id = $1 AND u.status = 'running' AND u.worker = $2 ORDER BY t.ord, u.ord";

/// An attempt's lease as its units carry it (`$1` plan, `$2` task).
pub const ATTEMPT_LEASE: &str = "SELECT t.attempts, t.max_attempts, t.fence, t.reserved_pico, p.retry_backoff_seconds
     FROM plan_tasks t JOIN plans p ON p.id = t.plan_id WHERE t.plan_id = $1 AND t.id = $2";

fn corrupt(column: &'static str, value: String) -> StoreError {
    StoreError::Corrupt { column, value }
}

/// Decodes `plan_units.needs`.
pub(crate) fn needs(text: String) -> Result<Vec<String>, StoreError> {
    serde_json::from_str(&text).map_err(|_| corrupt("plan_units.needs", text))
}

pub(crate) fn kind(text: String) -> Result<UnitKind, StoreError> {
    UnitKind::parse(&text).ok_or_else(|| corrupt("plan_units.kind", text))
}

/// A unit row (the columns of `unit_columns!`).
pub(crate) fn unit<D: Db>(row: &Rec<D>) -> Result<UnitRecord, StoreError> {
    let status: String = row.try_get("status")?;
    let result: Option<String> = row.try_get("result")?;
    Ok(UnitRecord {
        plan_id: row.try_get("plan_id")?,
        task_id: row.try_get("task_id")?,
        task_fence: row.try_get("task_fence")?,
        name: row.try_get("name")?,
        kind: kind(row.try_get("kind")?)?,
        ord: row.try_get("ord")?,
        needs: needs(row.try_get("needs")?)?,
        status: UnitStatus::parse(&status).ok_or_else(|| corrupt("plan_units.status", status))?,
        fence: row.try_get("fence")?,
        worker: row.try_get("worker")?,
        lease_expires: row.try_get::<Option<i64>, _>("lease_expires")?.map(Timestamp),
        tries: row.try_get::<i64, _>("tries")?.max(0) as u32,
        run_id: row.try_get("run_id")?,
        base: row.try_get("base")?,
        result: match result {
            Some(text) => Some(serde_json::from_str(&text).map_err(|_| corrupt("plan_units.result", text))?),
            None => None,
        },
        cost: Usd::from_pico(row.try_get("cost_pico")?),
    })
}
