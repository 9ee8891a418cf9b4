//! The unit queue's behaviour ([`UnitQueue`](crate::units::UnitQueue)), written once for
//! both stores like the plan queue's: decoding unit rows, the statements both run as
//! written, and a macro expanded for each store. Each store says how it locks a unit and an
//! attempt ([`UnitDialect`]).

use arbiter_core::money::Usd;
use arbiter_core::time::Timestamp;
use sqlx::{ColumnIndex, Row};

use crate::StoreError;
use crate::rows::{Column, get};
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
macro_rules! pick_units {
    () => {
        "SELECT u.plan_id, u.task_id, u.task_fence, u.name, u.kind, u.needs, u.fence, u.run_id, u.base,
                u.avoid_worker, u.avoid_until, t.attempts, t.max_attempts, t.reserved_pico, t.spec, p.retry_backoff_seconds
         FROM plan_units u
         JOIN plan_tasks t ON t.plan_id = u.plan_id AND t.id = u.task_id AND t.status = 'running' AND t.fence = u.task_fence
         JOIN plans p ON p.id = u.plan_id
         WHERE u.status = 'ready' AND NOT p.cancelled AND (CAST($1 AS TEXT) IS NULL OR u.plan_id = $1)
         ORDER BY CASE u.kind WHEN 'evaluation' THEN 0 ELSE 1 END, t.priority, t.ord, u.ord
         LIMIT 64"
    };
}
pub(crate) use pick_units;

/// Whether any unit of a running attempt is ready (`$1` a plan or NULL): a claim that finds
/// none takes no write lock.
pub const ANY_READY_UNIT: &str = "SELECT 1 AS found FROM plan_units u
     JOIN plan_tasks t ON t.plan_id = u.plan_id AND t.id = u.task_id AND t.status = 'running' AND t.fence = u.task_fence
     WHERE u.status = 'ready' AND (CAST($1 AS TEXT) IS NULL OR u.plan_id = $1) LIMIT 1";

/// The start of [`UnitDialect::LOCK_UNIT`].
macro_rules! unit_state {
    () => {
        "SELECT u.status, u.fence, u.kind, u.tries, t.status AS task_status, t.fence AS task_fence_now
         FROM plan_units u JOIN plan_tasks t ON t.plan_id = u.plan_id AND t.id = u.task_id
         WHERE u.plan_id = $1 AND u.task_id = $2 AND u.task_fence = $3 AND u.name = $4"
    };
}
pub(crate) use unit_state;

/// The start of [`UnitDialect::LOCK_ATTEMPT`].
macro_rules! attempt_state {
    () => {
        "SELECT status, fence FROM plan_tasks WHERE plan_id = $1 AND id = $2"
    };
}
pub(crate) use attempt_state;

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

macro_rules! unit_columns {
    () => {
        "u.plan_id, u.task_id, u.task_fence, u.name, u.kind, u.ord, u.needs, u.status, u.fence, u.worker,
         u.lease_expires, u.tries, u.run_id, u.base, u.result, u.cost_pico"
    };
}

pub const UNITS_OF: &str = concat!(
    "SELECT ",
    unit_columns!(),
    " FROM plan_units u WHERE u.plan_id = $1 AND u.task_id = $2 AND u.task_fence = $3 ORDER BY u.ord"
);

pub const RUNNING_UNITS: &str = concat!(
    "SELECT ",
    unit_columns!(),
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
pub(crate) fn unit<R>(row: &R) -> Result<UnitRecord, StoreError>
where
    R: Row,
    for<'a> &'a str: ColumnIndex<R>,
    String: Column<R::Database>,
    i64: Column<R::Database>,
{
    let status: String = get(row, "status")?;
    let result: Option<String> = get(row, "result")?;
    Ok(UnitRecord {
        plan_id: get(row, "plan_id")?,
        task_id: get(row, "task_id")?,
        task_fence: get(row, "task_fence")?,
        name: get(row, "name")?,
        kind: kind(get(row, "kind")?)?,
        ord: get(row, "ord")?,
        needs: needs(get(row, "needs")?)?,
        status: UnitStatus::parse(&status).ok_or_else(|| corrupt("plan_units.status", status))?,
        fence: get(row, "fence")?,
        worker: get(row, "worker")?,
        lease_expires: get::<_, Option<i64>>(row, "lease_expires")?.map(Timestamp),
        tries: get::<_, i64>(row, "tries")?.max(0) as u32,
        run_id: get(row, "run_id")?,
        base: get(row, "base")?,
        result: match result {
            Some(text) => Some(serde_json::from_str(&text).map_err(|_| corrupt("plan_units.result", text))?),
            None => None,
        },
        cost: Usd::from_pico(get(row, "cost_pico")?),
    })
}

/// Implements [`UnitQueue`](crate::units::UnitQueue) for a store that implements the plan
/// queue (with `plan_store_impl!`) and [`UnitDialect`].
#[macro_export]
#[doc(hidden)]
macro_rules! unit_queue_impl {
    ($store:ty, $db:ty) => {
        const _: () = {
            use std::time::Duration;

            use arbiter_core::money::Usd;
            use arbiter_core::plan::TaskSpec;
            use arbiter_core::plan::event::{UnitEntry, UnitLost};
            use arbiter_core::time::Timestamp;
            use serde_json::json;
            use sqlx::Row;

            use $crate::StoreError;
            use $crate::plan_impl::expiry;
            use $crate::plans::*;
            use $crate::unit_impl::{self as u, UnitDialect};
            use $crate::units::*;

            /// An expired or released unit lease: (plan, task, attempt fence, name, kind,
            /// unit fence, worker, tries).
            type Held = (String, String, i64, String, UnitKind, i64, String, u32);

            fn held<R: Row>(r: &R) -> Result<Held, StoreError>
            where
                for<'a> &'a str: sqlx::ColumnIndex<R>,
                String: $crate::rows::Column<R::Database>,
                i64: $crate::rows::Column<R::Database>,
            {
                use $crate::rows::get;
                Ok((
                    get(r, "plan_id")?,
                    get(r, "task_id")?,
                    get(r, "task_fence")?,
                    get(r, "name")?,
                    u::kind(get(r, "kind")?)?,
                    get(r, "fence")?,
                    get::<_, Option<String>>(r, "worker")?.unwrap_or_default(),
                    get::<_, i64>(r, "tries")?.max(0) as u32,
                ))
            }

            impl $store {
                /// After a candidate unit is done: the evaluation becomes ready when no
                /// candidate is left.
                async fn evaluation_after_tx(
                    tx: &mut sqlx::Transaction<'_, $db>,
                    plan: &str,
                    task: &str,
                    fence: i64,
                    now: Timestamp,
                ) -> Result<bool, StoreError> {
                    let left: i64 = sqlx::query(u::CANDIDATES_LEFT)
                        .bind(plan)
                        .bind(task)
                        .bind(fence)
                        .fetch_one(&mut **tx)
                        .await?
                        .try_get("n")?;
                    if left > 0 {
                        return Ok(false);
                    }
                    let moved = sqlx::query(u::EVALUATION_READY)
                        .bind(plan)
                        .bind(task)
                        .bind(fence)
                        .bind(now.0)
                        .execute(&mut **tx)
                        .await?;
                    if moved.rows_affected() == 1 {
                        Self::event_tx(tx, plan, Some(task), None, UnitEntry::EvaluationReady { fence }, now).await?;
                    }
                    Ok(moved.rows_affected() == 1)
                }

                /// Takes back unit leases: into the queue again, or (a try that counts and
                /// was the last) given up. Returns what it took, and the attempts whose
                /// evaluation was given up (their lease and why, for the caller to fail them).
                async fn take_back_tx(
                    tx: &mut sqlx::Transaction<'_, $db>,
                    units: Vec<Held>,
                    why: &u::TakeBack<'_>,
                    now: Timestamp,
                ) -> Result<(Vec<ReclaimedUnit>, Vec<(Lease, String)>), StoreError> {
                    let counts = why.counts();
                    let mut out = Vec::new();
                    let mut failed = Vec::new();
                    for (plan, task, task_fence, name, kind, fence, worker, tries) in units {
                        let still: Option<(String, i64)> = sqlx::query(<$store as UnitDialect>::LOCK_UNIT)
                            .bind(&plan)
                            .bind(&task)
                            .bind(task_fence)
                            .bind(&name)
                            .fetch_optional(&mut **tx)
                            .await?
                            .map(|r| Ok::<_, sqlx::Error>((r.try_get("status")?, r.try_get("fence")?)))
                            .transpose()?;
                        if still != Some(("running".to_string(), fence)) {
                            continue;
                        }
                        let given_up = counts && tries + 1 >= MAX_UNIT_TRIES;
                        let lost_reason = why.given_up(tries + 1, &worker);
                        if given_up {
                            sqlx::query(u::UNIT_DONE)
                                .bind(&plan)
                                .bind(&task)
                                .bind(task_fence)
                                .bind(&name)
                                .bind(json!(UnitResult::Lost(lost_reason.clone())).to_string())
                                .bind(0i64)
                                .bind(now.0)
                                .execute(&mut **tx)
                                .await?;
                        } else {
                            sqlx::query(u::UNIT_AGAIN)
                                .bind(&plan)
                                .bind(&task)
                                .bind(task_fence)
                                .bind(&name)
                                .bind(0i64)
                                .bind(i64::from(counts))
                                .bind(now.0)
                                .execute(&mut **tx)
                                .await?;
                        }
                        let lost = UnitLost {
                            unit: name.clone(),
                            fence,
                            worker: worker.clone(),
                            reason: why.reason(&worker),
                            tries: Some(tries + u32::from(counts)),
                        };
                        let entry = if given_up {
                            UnitEntry::UnitGivenUp(lost)
                        } else if counts {
                            UnitEntry::UnitExpired(lost)
                        } else {
                            UnitEntry::UnitReleased(lost)
                        };
                        Self::event_tx(tx, &plan, Some(&task), None, entry, now).await?;
                        let mut evaluation_ready = false;
                        if given_up {
                            match kind {
                                UnitKind::Candidate => {
                                    evaluation_ready =
                                        Self::evaluation_after_tx(tx, &plan, &task, task_fence, now).await?;
                                }
                                UnitKind::Evaluation => failed.push((
                                    Self::attempt_lease_tx(tx, &plan, &task, &worker, now).await?,
                                    format!("its evaluation was lost: {lost_reason}"),
                                )),
                            }
                        }
                        out.push(ReclaimedUnit {
                            plan_id: plan,
                            task_id: task,
                            name,
                            worker,
                            given_up,
                            evaluation_ready,
                        });
                    }
                    Ok((out, failed))
                }

                /// The lease of a task's running attempt, as a unit of it carries it.
                async fn attempt_lease_tx(
                    tx: &mut sqlx::Transaction<'_, $db>,
                    plan: &str,
                    task: &str,
                    worker: &str,
                    now: Timestamp,
                ) -> Result<Lease, StoreError> {
                    let r = sqlx::query(u::ATTEMPT_LEASE).bind(plan).bind(task).fetch_one(&mut **tx).await?;
                    Ok(Lease {
                        plan_id: plan.to_string(),
                        task_id: task.to_string(),
                        attempt: r.try_get::<i64, _>("attempts")?.max(0) as u32,
                        max_attempts: r.try_get::<i64, _>("max_attempts")?.max(1) as u32,
                        fence: r.try_get("fence")?,
                        worker: worker.to_string(),
                        expires: now,
                        reserved: Usd::from_pico(r.try_get("reserved_pico")?),
                        retry_backoff_seconds: r.try_get::<i64, _>("retry_backoff_seconds")?.max(0) as u64,
                    })
                }

                /// Fails the attempts whose evaluation was given up.
                async fn fail_given_up(&self, leases: Vec<(Lease, String)>, now: Timestamp) -> Result<(), StoreError> {
                    for (lease, reason) in leases {
                        let result = AttemptResult::Failed { reason, retry: Retry::AfterBackoff, run_id: None };
                        match self.finish(&lease, result, Usd::ZERO, now).await {
                            Ok(_) | Err(StoreError::StaleLease { .. }) => {}
                            Err(e) => return Err(e),
                        }
                    }
                    Ok(())
                }
            }

            #[async_trait::async_trait]
            impl UnitQueue for $store {
                async fn tasks_choose_runners(&self, plan_id: &str) -> Result<bool, StoreError> {
                    let row = sqlx::query(u::TASKS_CHOOSE_RUNNERS).bind(plan_id).fetch_one(&self.pool).await?;
                    Ok(row.try_get::<bool, _>("chooses")?)
                }

                async fn ready_tasks(
                    &self,
                    plan_id: &str,
                    now: Timestamp,
                    skip: u32,
                    limit: u32,
                ) -> Result<Vec<TaskSpec>, StoreError> {
                    let rows = sqlx::query(u::READY_TASKS)
                        .bind(plan_id)
                        .bind(now.0)
                        .bind(i64::from(limit))
                        .bind(i64::from(skip))
                        .fetch_all(&self.pool)
                        .await?;
                    rows.iter()
                        .map(|r| {
                            let text: String = r.try_get("spec")?;
                            serde_json::from_str(&text)
                                .map_err(|_| StoreError::Corrupt { column: "plan_tasks.spec", value: text })
                        })
                        .collect()
                }

                async fn claim_among(
                    &self,
                    plan_id: &str,
                    task_ids: &[String],
                    worker: &str,
                    ttl: Duration,
                    now: Timestamp,
                ) -> Result<ClaimOutcome, StoreError> {
                    let among = serde_json::to_string(task_ids).unwrap_or_else(|_| "[]".into());
                    if let Some(claimed) = self.claim_fast(plan_id, worker, ttl, now, Some(&among)).await? {
                        return Ok(ClaimOutcome::Claimed(Box::new(claimed)));
                    }
                    // Declined where the fast path could claim: every one of them was taken
                    // meanwhile, or none is ready.
                    if let Some(idle) = self.idle_where_fast(plan_id).await? {
                        return Ok(ClaimOutcome::Idle(idle));
                    }
                    let mut tx = self.write_tx().await?;
                    let outcome = Self::claim_tx(&mut tx, plan_id, worker, ttl, now, Some(&among)).await?;
                    tx.commit().await?;
                    Ok(outcome)
                }

                async fn start_units(
                    &self,
                    lease: &Lease,
                    run_id: &str,
                    base: &str,
                    settings: &arbiter_core::settings::RunSettings,
                    units: &[UnitSpec],
                    now: Timestamp,
                ) -> Result<(), StoreError> {
                    let frozen = serde_json::to_string(settings)
                        .map_err(|e| StoreError::Corrupt { column: "plan_attempts.settings", value: e.to_string() })?;
                    let stale = || StoreError::StaleLease {
                        plan: lease.plan_id.clone(),
                        task: lease.task_id.clone(),
                        fence: lease.fence,
                    };
                    let mut tx = self.write_tx().await?;
                    let row = sqlx::query(<$store as UnitDialect>::LOCK_ATTEMPT)
                        .bind(&lease.plan_id)
                        .bind(&lease.task_id)
                        .fetch_optional(&mut *tx)
                        .await?
                        .ok_or_else(stale)?;
                    let (status, fence): (String, i64) = (row.try_get("status")?, row.try_get("fence")?);
                    if status != "running" || fence != lease.fence {
                        return Err(stale());
                    }
                    sqlx::query(u::SPREAD_ATTEMPT)
                        .bind(&lease.plan_id)
                        .bind(&lease.task_id)
                        .bind(run_id)
                        .bind(now.0)
                        .bind(lease.fence)
                        .execute(&mut *tx)
                        .await?;
                    sqlx::query(u::ATTEMPT_RUN)
                        .bind(&lease.plan_id)
                        .bind(&lease.task_id)
                        .bind(lease.fence)
                        .bind(run_id)
                        .bind(&frozen)
                        .execute(&mut *tx)
                        .await?;
                    let candidates = units.iter().filter(|x| x.kind == UnitKind::Candidate).count();
                    for (ord, unit) in units.iter().enumerate() {
                        let status = match unit.kind {
                            UnitKind::Evaluation if candidates > 0 => UnitStatus::Waiting,
                            _ => UnitStatus::Ready,
                        };
                        sqlx::query(u::INSERT_UNIT)
                            .bind(&lease.plan_id)
                            .bind(&lease.task_id)
                            .bind(lease.fence)
                            .bind(&unit.name)
                            .bind(unit.kind.as_str())
                            .bind(ord as i64)
                            .bind(serde_json::to_string(&unit.needs).unwrap_or_else(|_| "[]".into()))
                            .bind(status.as_str())
                            .bind(run_id)
                            .bind(base)
                            .bind(now.0)
                            .execute(&mut *tx)
                            .await?;
                    }
                    let names: Vec<&str> = units.iter().map(|x| x.name.as_str()).collect();
                    Self::event_tx(
                        &mut tx,
                        &lease.plan_id,
                        Some(&lease.task_id),
                        Some(lease.attempt),
                        UnitEntry::UnitsStarted {
                            fence: lease.fence,
                            run_id: run_id.to_string(),
                            base: base.to_string(),
                            units: names.iter().map(|n| n.to_string()).collect(),
                        },
                        now,
                    )
                    .await?;
                    tx.commit().await?;
                    self.notify_work(&lease.plan_id).await;
                    Ok(())
                }

                async fn claim_unit(
                    &self,
                    plan_id: Option<&str>,
                    worker: &str,
                    caps: &Capabilities,
                    ttl: Duration,
                    now: Timestamp,
                ) -> Result<Option<UnitClaim>, StoreError> {
                    if sqlx::query(u::ANY_READY_UNIT).bind(plan_id).fetch_optional(&self.pool).await?.is_none() {
                        return Ok(None);
                    }
                    let mut tx = self.write_tx().await?;
                    let rows =
                        sqlx::query(<$store as UnitDialect>::PICK_UNITS).bind(plan_id).fetch_all(&mut *tx).await?;
                    let expires = expiry(now, ttl);
                    for r in rows {
                        if !caps.can(&u::needs(r.try_get("needs")?)?) {
                            continue;
                        }
                        // A unit this worker refused goes to another one first.
                        let avoided: Option<String> = r.try_get("avoid_worker")?;
                        if avoided.as_deref() == Some(worker_of(worker))
                            && now.0 < r.try_get::<i64, _>("avoid_until")?
                        {
                            continue;
                        }
                        let (plan, task): (String, String) = (r.try_get("plan_id")?, r.try_get("task_id")?);
                        let (task_fence, name): (i64, String) = (r.try_get("task_fence")?, r.try_get("name")?);
                        let fence: i64 = r.try_get("fence")?;
                        let leased = sqlx::query(u::LEASE_UNIT)
                            .bind(&plan)
                            .bind(&task)
                            .bind(task_fence)
                            .bind(&name)
                            .bind(fence)
                            .bind(worker)
                            .bind(expires.0)
                            .bind(now.0)
                            .execute(&mut *tx)
                            .await?;
                        if leased.rows_affected() != 1 {
                            continue;
                        }
                        if avoided.is_some() {
                            // The refusal the task's note told of is over: the unit runs again.
                            sqlx::query(u::TASK_WAITING_REASON)
                                .bind(&plan)
                                .bind(&task)
                                .bind(None::<String>)
                                .execute(&mut *tx)
                                .await?;
                        }
                        let spec: String = r.try_get("spec")?;
                        let task_spec: TaskSpec = serde_json::from_str(&spec)
                            .map_err(|_| StoreError::Corrupt { column: "plan_tasks.spec", value: spec })?;
                        let attempt = Lease {
                            plan_id: plan.clone(),
                            task_id: task.clone(),
                            attempt: r.try_get::<i64, _>("attempts")?.max(0) as u32,
                            max_attempts: r.try_get::<i64, _>("max_attempts")?.max(1) as u32,
                            fence: task_fence,
                            worker: worker.to_string(),
                            expires,
                            reserved: Usd::from_pico(r.try_get("reserved_pico")?),
                            retry_backoff_seconds: r.try_get::<i64, _>("retry_backoff_seconds")?.max(0) as u64,
                        };
                        let kind = u::kind(r.try_get("kind")?)?;
                        Self::event_tx(
                            &mut tx,
                            &plan,
                            Some(&task),
                            Some(attempt.attempt),
                            UnitEntry::UnitClaimed {
                                unit: name.clone(),
                                kind,
                                fence: fence + 1,
                                worker: worker.to_string(),
                                lease_expires: expires.0,
                            },
                            now,
                        )
                        .await?;
                        tx.commit().await?;
                        let lease = UnitLease {
                            attempt,
                            name,
                            kind,
                            fence: fence + 1,
                            expires,
                            run_id: r.try_get("run_id")?,
                            base: r.try_get("base")?,
                        };
                        return Ok(Some(UnitClaim { lease, task: task_spec }));
                    }
                    tx.commit().await?;
                    Ok(None)
                }

                async fn heartbeat_unit(
                    &self,
                    lease: &UnitLease,
                    ttl: Duration,
                    now: Timestamp,
                ) -> Result<Option<Timestamp>, StoreError> {
                    let expires = expiry(now, ttl);
                    let a = &lease.attempt;
                    let done = sqlx::query(u::HEARTBEAT_UNIT)
                        .bind(&a.plan_id)
                        .bind(&a.task_id)
                        .bind(a.fence)
                        .bind(&lease.name)
                        .bind(lease.fence)
                        .bind(expires.0)
                        .bind(now.0)
                        .execute(&self.pool)
                        .await?;
                    Ok((done.rows_affected() == 1).then_some(expires))
                }

                async fn finish_unit(
                    &self,
                    lease: &UnitLease,
                    outcome: UnitOutcome,
                    cost: Usd,
                    now: Timestamp,
                ) -> Result<UnitFinished, StoreError> {
                    let a = &lease.attempt;
                    let (plan, task) = (a.plan_id.as_str(), a.task_id.as_str());
                    let mut tx = self.write_tx().await?;
                    let row = sqlx::query(<$store as UnitDialect>::LOCK_UNIT)
                        .bind(plan)
                        .bind(task)
                        .bind(a.fence)
                        .bind(&lease.name)
                        .fetch_optional(&mut *tx)
                        .await?;
                    let current = match &row {
                        Some(r) => Some((
                            r.try_get::<String, _>("status")?,
                            r.try_get::<i64, _>("fence")?,
                            r.try_get::<String, _>("task_status")?,
                            r.try_get::<i64, _>("task_fence_now")?,
                        )),
                        None => None,
                    };
                    let tries = match &row {
                        Some(r) => r.try_get::<i64, _>("tries")?.max(0) as u32,
                        None => 0,
                    };
                    let held = current.as_ref().is_some_and(|(status, fence, task_status, task_fence)| {
                        status == "running"
                            && *fence == lease.fence
                            && task_status == "running"
                            && *task_fence == a.fence
                    });
                    if cost > Usd::ZERO {
                        // Spent all the same, whoever holds the unit now.
                        Self::charge_attempt_tx(&mut tx, plan, Some((task, a.fence)), cost, now).await?;
                    }
                    if !held {
                        Self::event_tx(
                            &mut tx,
                            plan,
                            Some(task),
                            Some(a.attempt),
                            UnitEntry::StaleUnitReportRefused {
                                unit: lease.name.clone(),
                                fence: lease.fence,
                                worker: a.worker.clone(),
                                cost,
                            },
                            now,
                        )
                        .await?;
                        tx.commit().await?;
                        return Err(StoreError::StaleUnit {
                            plan: plan.to_string(),
                            task: task.to_string(),
                            unit: lease.name.clone(),
                            fence: lease.fence,
                        });
                    }
                    let mut evaluation_ready = false;
                    let mut given_up = false;
                    let mut failed = Vec::new();
                    match outcome {
                        UnitOutcome::Done { result } => {
                            sqlx::query(u::UNIT_DONE)
                                .bind(plan)
                                .bind(task)
                                .bind(a.fence)
                                .bind(&lease.name)
                                .bind(json!(result).to_string())
                                .bind(cost.pico())
                                .bind(now.0)
                                .execute(&mut *tx)
                                .await?;
                            Self::event_tx(
                                &mut tx,
                                plan,
                                Some(task),
                                Some(a.attempt),
                                UnitEntry::UnitDone {
                                    unit: lease.name.clone(),
                                    fence: lease.fence,
                                    worker: a.worker.clone(),
                                    cost,
                                },
                                now,
                            )
                            .await?;
                            if lease.kind == UnitKind::Candidate {
                                evaluation_ready = Self::evaluation_after_tx(&mut tx, plan, task, a.fence, now).await?;
                            }
                        }
                        UnitOutcome::Released { reason } => {
                            sqlx::query(u::UNIT_AGAIN)
                                .bind(plan)
                                .bind(task)
                                .bind(a.fence)
                                .bind(&lease.name)
                                .bind(cost.pico())
                                .bind(0i64)
                                .bind(now.0)
                                .execute(&mut *tx)
                                .await?;
                            Self::event_tx(
                                &mut tx,
                                plan,
                                Some(task),
                                Some(a.attempt),
                                UnitEntry::UnitReleased(UnitLost {
                                    unit: lease.name.clone(),
                                    fence: lease.fence,
                                    worker: a.worker.clone(),
                                    reason: reason.to_string(),
                                    tries: None,
                                }),
                                now,
                            )
                            .await?;
                        }
                        UnitOutcome::Refused { reason } => {
                            let unit = (
                                plan.to_string(),
                                task.to_string(),
                                a.fence,
                                lease.name.clone(),
                                lease.kind,
                                lease.fence,
                                a.worker.clone(),
                                tries,
                            );
                            let why = u::TakeBack::Refused(&reason);
                            let (taken, lost) = Self::take_back_tx(&mut tx, vec![unit], &why, now).await?;
                            given_up = taken.iter().any(|t| t.given_up);
                            evaluation_ready = taken.iter().any(|t| t.evaluation_ready);
                            failed = lost;
                            let until = Timestamp(now.0.saturating_add(REFUSAL_COOLDOWN.as_micros() as i64));
                            sqlx::query(u::AVOID_WORKER)
                                .bind(plan)
                                .bind(task)
                                .bind(a.fence)
                                .bind(&lease.name)
                                .bind(worker_of(&a.worker))
                                .bind(until.0)
                                .execute(&mut *tx)
                                .await?;
                            let note = if given_up {
                                format!("{} was given up: {}", lease.name, why.given_up(tries + 1, &a.worker))
                            } else {
                                format!(
                                    "{} is waiting for another worker (try {} of {MAX_UNIT_TRIES}): {}",
                                    lease.name,
                                    tries + 1,
                                    why.reason(&a.worker)
                                )
                            };
                            sqlx::query(u::TASK_WAITING_REASON)
                                .bind(plan)
                                .bind(task)
                                .bind(note)
                                .execute(&mut *tx)
                                .await?;
                        }
                    }
                    tx.commit().await?;
                    self.fail_given_up(failed, now).await?;
                    self.notify_work(plan).await;
                    Ok(UnitFinished { evaluation_ready, given_up })
                }

                async fn units_of(
                    &self,
                    plan_id: &str,
                    task_id: &str,
                    task_fence: i64,
                ) -> Result<Vec<UnitRecord>, StoreError> {
                    let rows = sqlx::query(u::UNITS_OF)
                        .bind(plan_id)
                        .bind(task_id)
                        .bind(task_fence)
                        .fetch_all(&self.pool)
                        .await?;
                    rows.iter().map(u::unit).collect()
                }

                async fn attempt_settings(
                    &self,
                    plan_id: &str,
                    task_id: &str,
                    task_fence: i64,
                ) -> Result<Option<arbiter_core::settings::RunSettings>, StoreError> {
                    let frozen: Option<Option<String>> = sqlx::query_scalar(u::ATTEMPT_SETTINGS)
                        .bind(plan_id)
                        .bind(task_id)
                        .bind(task_fence)
                        .fetch_optional(&self.pool)
                        .await?;
                    frozen
                        .flatten()
                        .map(|text| {
                            serde_json::from_str(&text)
                                .map_err(|_| StoreError::Corrupt { column: "plan_attempts.settings", value: text })
                        })
                        .transpose()
                }

                async fn running_units(&self, plan_id: &str) -> Result<Vec<UnitRecord>, StoreError> {
                    let rows = sqlx::query(u::RUNNING_UNITS).bind(plan_id).fetch_all(&self.pool).await?;
                    rows.iter().map(u::unit).collect()
                }

                async fn sweep_expired_units(&self, now: Timestamp) -> Result<Vec<ReclaimedUnit>, StoreError> {
                    let rows = sqlx::query(u::EXPIRED_UNITS).bind(now.0).fetch_all(&self.pool).await?;
                    if rows.is_empty() {
                        return Ok(Vec::new());
                    }
                    let units = rows.iter().map(held).collect::<Result<Vec<_>, _>>()?;
                    let mut tx = self.write_tx().await?;
                    let (taken, failed) = Self::take_back_tx(&mut tx, units, &u::TakeBack::Expired, now).await?;
                    tx.commit().await?;
                    self.fail_given_up(failed, now).await?;
                    for plan in taken.iter().map(|t| t.plan_id.clone()).collect::<std::collections::BTreeSet<_>>() {
                        self.notify_work(&plan).await;
                    }
                    Ok(taken)
                }

                async fn release_unit_workers(
                    &self,
                    plan_id: &str,
                    workers: &[String],
                    now: Timestamp,
                ) -> Result<Vec<ReclaimedUnit>, StoreError> {
                    let mut units = Vec::new();
                    for w in workers {
                        let rows = sqlx::query(u::UNITS_HELD_BY).bind(plan_id).bind(w).fetch_all(&self.pool).await?;
                        for r in &rows {
                            units.push(held(r)?);
                        }
                    }
                    if units.is_empty() {
                        return Ok(Vec::new());
                    }
                    let mut tx = self.write_tx().await?;
                    let (taken, _) = Self::take_back_tx(&mut tx, units, &u::TakeBack::Released, now).await?;
                    tx.commit().await?;
                    self.notify_work(plan_id).await;
                    Ok(taken)
                }
            }
        };
    };
}
