//! The plan queue's transaction steps: locking a plan, charging and releasing budget,
//! writing events, claiming, ending and reclaiming attempts — each a function of an open
//! transaction, shared by both halves of the queue.

use crate::StoreError;
use crate::db::{Tx, sql};
use crate::plan_rows as decode;
use crate::plan_sql as q;
use crate::plans::*;
use crate::store::{Backend, SqlStore};
use arbiter_core::budget::{Budget, Charge};
use arbiter_core::money::Usd;
use arbiter_core::plan::event::{PlanEntry, PlanLogEntry, TaskEntry};
use arbiter_core::plan::state::{AttemptStatus, TaskStatus};
use arbiter_core::plan::{PlanSpec, TaskSpec};
use arbiter_core::queue::rules::{self, expiry};
use arbiter_core::time::Timestamp;
use std::time::Duration;

use super::{Ending, PlanLock, Stale};

impl<B: Backend> SqlStore<B> {
    /// After the fast path declined a claim: when it could have claimed for the
    /// plan (no budget, no key files, not cancelled), nothing it was asked for is
    /// ready, and the plan's counts say so without the general path's lock on
    /// the plan (which every idle claimer would otherwise queue on). `None`: the
    /// general path decides.
    pub(crate) async fn idle_where_fast(&self, plan_id: &str) -> Result<Option<Idle>, StoreError> {
        if !self.fast_paths() {
            return Ok(None);
        }
        let fast = sql(q::FAST_CLAIMS).bind(plan_id).fetch_optional(&self.pool).await?;
        if !fast.is_some_and(|r| r.try_get::<bool, _>("fast").unwrap_or(false)) {
            return Ok(None);
        }
        let idle = sql(q::IDLE).bind(plan_id).fetch_one(&self.pool).await?;
        Ok(Some(Idle {
            running: idle.try_get::<Option<i64>, _>("running")?.unwrap_or(0) as usize,
            ready: idle.try_get::<Option<i64>, _>("ready")?.unwrap_or(0) as usize,
            next_ready_at: idle.try_get::<Option<i64>, _>("next_ready")?.map(Timestamp),
            budget_exhausted: false,
            cancelled: false,
        }))
    }

    pub(crate) async fn event_tx(
        tx: &mut Tx<'_, B::Db>,
        plan: &str,
        task: Option<&str>,
        attempt: Option<u32>,
        entry: impl Into<PlanLogEntry> + Send,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let (kind, data) = entry.into().to_parts();
        sql(q::INSERT_EVENT)
            .bind(plan)
            .bind(task)
            .bind(attempt.map(i64::from))
            .bind(kind)
            .bind(now.0)
            .bind(data.to_string())
            .execute(&mut *tx)
            .await?;
        Ok(())
    }

    /// Locks the plan row (where the store has row locks) and reads its budget
    /// and flags.
    pub(crate) async fn lock_plan_tx(tx: &mut Tx<'_, B::Db>, plan: &str) -> Result<PlanLock, StoreError> {
        let row = sql(B::LOCK_PLAN)
            .bind(plan)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or_else(|| StoreError::NoPlan { id: plan.to_string() })?;
        Ok(PlanLock {
            budget: decode::budget(&row)?,
            guard_files: row.try_get("guard_files")?,
            cancelled: row.try_get("cancelled")?,
            backoff_base: row.try_get::<i64, _>("retry_backoff_seconds")?.max(0) as u64,
        })
    }

    pub(crate) async fn save_budget_tx(
        tx: &mut Tx<'_, B::Db>,
        plan: &str,
        b: &Budget,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        sql(q::SAVE_BUDGET)
            .bind(plan)
            .bind(b.limit.map(|l| l.pico()))
            .bind(b.spent.pico())
            .bind(b.reserved.pico())
            .bind(b.crossed)
            .bind(now.0)
            .execute(&mut *tx)
            .await?;
        Ok(())
    }

    /// Charges `amount` and releases `release` of the reservations of the plan
    /// whose locked budget is `b`; the charge that reaches the limit writes the
    /// one `budget_exceeded` event.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn charge_tx(
        tx: &mut Tx<'_, B::Db>,
        plan: &str,
        mut b: Budget,
        task: Option<&str>,
        amount: Usd,
        release: Usd,
        now: Timestamp,
    ) -> Result<Charged, StoreError> {
        if amount == Usd::ZERO && release == Usd::ZERO {
            return Ok(Charged { spent: Usd::ZERO, limit: None, crossed: false });
        }
        b.release(release);
        let charge = b.charge(amount);
        Self::save_budget_tx(tx, plan, &b, now).await?;
        if amount > Usd::ZERO {
            Self::event_tx(tx, plan, task, None, PlanEntry::CostCharged { amount, spent: b.spent }, now).await?;
        }
        let crossed = charge == Charge::Crossed;
        if crossed {
            Self::event_tx(
                tx,
                plan,
                task,
                None,
                PlanEntry::BudgetExceeded {
                    limit: b.limit,
                    spent: b.spent,
                    crossing_task: task.map(str::to_string),
                    lowered: false,
                },
                now,
            )
            .await?;
        }
        Ok(Charged { spent: b.spent, limit: b.limit, crossed })
    }

    /// Charges a cost an attempt (`task`, `fence`) incurred outside its report,
    /// and records it on the task and the attempt.
    pub(crate) async fn charge_attempt_tx(
        tx: &mut Tx<'_, B::Db>,
        plan: &str,
        attempt: Option<(&str, i64)>,
        amount: Usd,
        now: Timestamp,
    ) -> Result<Charged, StoreError> {
        let locked = Self::lock_plan_tx(tx, plan).await?;
        let task = attempt.map(|(t, _)| t);
        let charged = Self::charge_tx(tx, plan, locked.budget, task, amount, Usd::ZERO, now).await?;
        if let Some((task, fence)) = attempt.filter(|_| amount > Usd::ZERO) {
            Self::record_cost_tx(tx, plan, task, fence, amount).await?;
        }
        Ok(charged)
    }

    /// Records a cost an attempt incurred on its task and its attempt row.
    pub(crate) async fn record_cost_tx(
        tx: &mut Tx<'_, B::Db>,
        plan: &str,
        task: &str,
        fence: i64,
        amount: Usd,
    ) -> Result<(), StoreError> {
        sql(q::CHARGE_TASK).bind(plan).bind(task).bind(amount.pico()).execute(&mut *tx).await?;
        sql(q::CHARGE_ATTEMPT).bind(plan).bind(task).bind(fence).bind(amount.pico()).execute(&mut *tx).await?;
        Ok(())
    }

    /// A new limit (`None`: none) for the plan whose locked budget is `b`.
    /// Lowering it to or below what was spent is a crossing: it is reported once.
    pub(crate) async fn set_limit_tx(
        tx: &mut Tx<'_, B::Db>,
        plan: &str,
        mut b: Budget,
        limit: Option<Usd>,
        by: Option<&str>,
        now: Timestamp,
    ) -> Result<Budget, StoreError> {
        let (before, was_crossed) = (b.limit, b.crossed);
        b.set_limit(limit);
        Self::save_budget_tx(tx, plan, &b, now).await?;
        Self::event_tx(
            tx,
            plan,
            None,
            None,
            PlanEntry::BudgetChanged { from: before, to: limit, spent: b.spent, by: by.map(str::to_string) },
            now,
        )
        .await?;
        if b.crossed && !was_crossed {
            Self::event_tx(
                tx,
                plan,
                None,
                None,
                PlanEntry::BudgetExceeded { limit: b.limit, spent: b.spent, crossing_task: None, lowered: true },
                now,
            )
            .await?;
        }
        Ok(b)
    }

    /// Inserts a plan row and its `plan_created` event.
    pub(crate) async fn insert_plan_tx(
        tx: &mut Tx<'_, B::Db>,
        header: &PlanSpec,
        tasks: usize,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        sql(q::INSERT_PLAN)
            .bind(&header.id)
            .bind(&header.name)
            .bind(serde_json::to_string(header).unwrap_or_default())
            .bind(header.budget_usd.map(|b| b.pico()))
            .bind(header.defaults.retry_backoff() as i64)
            .bind(false)
            .bind(now.0)
            .bind(header.source.as_deref())
            .execute(&mut *tx)
            .await?;
        Self::event_tx(
            tx,
            &header.id,
            None,
            None,
            PlanEntry::PlanCreated { name: header.name.clone(), budget: header.budget_usd, tasks },
            now,
        )
        .await
    }

    /// Records who owns the plan's integration branch, with its event.
    pub(crate) async fn set_branch_tx(
        tx: &mut Tx<'_, B::Db>,
        plan: &str,
        branch: &BranchRecord,
        previous: Option<&BranchRecord>,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        sql(q::SET_BRANCH)
            .bind(plan)
            .bind(&branch.name)
            .bind(branch.origin.as_str())
            .bind(&branch.base)
            .bind(now.0)
            .execute(&mut *tx)
            .await?;
        Self::event_tx(tx, plan, None, None, rules::branch_event(branch, previous), now).await
    }

    /// Runs a dialect's optional locking statement on `plan` (and `task`).
    pub(crate) async fn lock_tx(
        tx: &mut Tx<'_, B::Db>,
        statement: Option<&'static str>,
        plan: &str,
        task: Option<&str>,
    ) -> Result<(), StoreError> {
        if let Some(statement) = statement {
            let query = sql(statement).bind(plan);
            let query = match task {
                Some(t) => query.bind(t),
                None => query,
            };
            query.fetch_all(&mut *tx).await?;
        }
        Ok(())
    }

    pub(crate) async fn tasks_tx(tx: &mut Tx<'_, B::Db>, plan: &str) -> Result<Vec<TaskRecord>, StoreError> {
        let rows = sql(q::SELECT_TASKS).bind(plan).fetch_all(&mut *tx).await?;
        rows.iter().map(decode::task).collect()
    }

    /// Replaces a task's dependencies and key files with its spec's.
    pub(crate) async fn set_deps_and_files_tx(
        tx: &mut Tx<'_, B::Db>,
        plan: &str,
        t: &TaskSpec,
    ) -> Result<(), StoreError> {
        sql(q::DELETE_DEPS).bind(plan).bind(&t.id).execute(&mut *tx).await?;
        sql(q::DELETE_FILES).bind(plan).bind(&t.id).execute(&mut *tx).await?;
        let (deps, files) = rules::deps_and_files(t);
        for d in deps {
            sql(q::INSERT_DEP).bind(plan).bind(&t.id).bind(d).execute(&mut *tx).await?;
        }
        for f in files {
            sql(q::INSERT_FILE).bind(plan).bind(&t.id).bind(f).execute(&mut *tx).await?;
        }
        Ok(())
    }

    /// Ends an attempt and moves its task on; `Err(Stale)` when the fence is no
    /// longer the task's, or (for an expiry) the lease was renewed meanwhile —
    /// nothing is changed then. Locks: the plan's ending guard, the plan, then
    /// the task with its dependents in id order.
    pub(crate) async fn end_attempt_tx(
        tx: &mut Tx<'_, B::Db>,
        e: &Ending<'_>,
        now: Timestamp,
    ) -> Result<Result<Finished, Stale>, StoreError> {
        let (plan, task, fence) = (e.plan, e.task, e.fence);
        Self::lock_tx(tx, B::ENDING_GUARD, plan, None).await?;
        let locked = Self::lock_plan_tx(tx, plan).await?;
        Self::lock_tx(tx, B::LOCK_ENDING, plan, Some(task)).await?;
        let Some(row) = sql(B::LOCK_TASK).bind(plan).bind(task).fetch_optional(&mut *tx).await? else {
            return Err(StoreError::NoTask { plan: plan.to_string(), task: task.to_string() });
        };
        let status: String = row.try_get("status")?;
        let current: i64 = row.try_get("fence")?;
        if status != TaskStatus::Running.as_str() || current != fence {
            return Ok(Err(Stale));
        }
        let lease_expires = row.try_get::<Option<i64>, _>("lease_expires")?;
        if e.expired_by.is_some_and(|by| lease_expires.is_some_and(|x| x >= by.0)) {
            return Ok(Err(Stale));
        }
        let attempts = row.try_get::<i64, _>("attempts")?.max(0) as u32;
        let max_attempts = row.try_get::<i64, _>("max_attempts")?.max(1) as u32;
        let reserved = Usd::from_pico(row.try_get("reserved_pico")?);
        let uncounted = matches!(e.result, AttemptResult::Released { .. });
        let d = rules::decide(e.result, attempts, max_attempts, locked.backoff_base, now);
        let moved = sql(q::END_TASK)
            .bind(plan)
            .bind(task)
            .bind(d.status.as_str())
            .bind(d.not_before.0)
            .bind(e.cost.pico())
            .bind(d.run_id.as_deref())
            .bind(d.commit.as_deref())
            .bind(d.reason.as_deref())
            .bind(now.0)
            .bind(fence)
            .bind(i64::from(uncounted))
            .execute(&mut *tx)
            .await?;
        if moved.rows_affected() != 1 {
            return Ok(Err(Stale));
        }
        sql(q::END_ATTEMPT)
            .bind(plan)
            .bind(task)
            .bind(fence)
            .bind(e.status.as_str())
            .bind(now.0)
            .bind(e.cost.pico())
            .bind(d.run_id.as_deref())
            .bind(d.commit.as_deref())
            .bind(d.reason.as_deref())
            .execute(&mut *tx)
            .await?;
        let mut newly_ready = Vec::new();
        if d.status == TaskStatus::Done {
            let rows = sql(q::UNBLOCK_DEPENDENTS).bind(plan).bind(task).bind(now.0).fetch_all(&mut *tx).await?;
            for r in rows {
                let s: String = r.try_get("status")?;
                if s == TaskStatus::Ready.as_str() {
                    newly_ready.push(r.try_get::<String, _>("id")?);
                }
            }
            newly_ready.sort();
        }
        Self::event_tx(tx, plan, Some(task), Some(attempts), rules::outcome_event(e.status, fence, &d, e.cost), now)
            .await?;
        for r in &newly_ready {
            Self::event_tx(tx, plan, Some(r), None, TaskEntry::TaskReady { after: task.to_string() }, now).await?;
        }
        let charged = Self::charge_tx(tx, plan, locked.budget, Some(task), e.cost, reserved, now).await?;
        Ok(Ok(d.finished(newly_ready, charged.crossed)))
    }

    /// Ends the leases of `rows` (task, fence, owner) in one plan: as expired
    /// attempts that count (`expired_by`: only leases still expired then), or as
    /// releases that do not.
    pub(crate) async fn reclaim_tx(
        tx: &mut Tx<'_, B::Db>,
        plan: &str,
        rows: Vec<(String, i64, String)>,
        why: &str,
        expired_by: Option<Timestamp>,
        now: Timestamp,
    ) -> Result<Vec<Reclaimed>, StoreError> {
        let mut out = Vec::new();
        for (task, fence, worker) in rows {
            let reason = format!("{why} (worker {worker})");
            let (result, status) = if expired_by.is_some() {
                (AttemptResult::Failed { reason, retry: Retry::AfterBackoff, run_id: None }, AttemptStatus::Expired)
            } else {
                (AttemptResult::Released { reason }, AttemptStatus::Cancelled)
            };
            let ending = Ending { plan, task: &task, fence, result: &result, status, cost: Usd::ZERO, expired_by };
            if let Ok(f) = Self::end_attempt_tx(tx, &ending, now).await? {
                out.push(Reclaimed { plan_id: plan.to_string(), task_id: task, fence, worker, status: f.status });
            }
        }
        Ok(out)
    }

    /// The general claim (of the best ready task, or of the best `among` a JSON
    /// array of task ids): within a write
    /// transaction, under the store's locks.
    pub(crate) async fn claim_tx(
        tx: &mut Tx<'_, B::Db>,
        plan: &str,
        worker: &str,
        ttl: Duration,
        now: Timestamp,
        among: Option<&str>,
    ) -> Result<ClaimOutcome, StoreError> {
        let PlanLock { budget, guard_files, cancelled, backoff_base } = Self::lock_plan_tx(tx, plan).await?;
        let available = budget.available();
        // Nothing is left to spend or reserve (`available` is 0 once the limit is reached).
        let exhausted = available == Some(Usd::ZERO);
        let picked = if cancelled || exhausted {
            None
        } else {
            let pick = match among {
                Some(ids) => sql(B::PICK_AMONG).bind(plan).bind(now.0).bind(guard_files).bind(ids),
                None => sql(B::PICK).bind(plan).bind(now.0).bind(guard_files),
            };
            pick.fetch_optional(&mut *tx).await?
        };
        let Some(row) = picked else {
            let idle = sql(q::IDLE).bind(plan).fetch_one(&mut *tx).await?;
            return Ok(ClaimOutcome::Idle(Idle {
                running: idle.try_get::<Option<i64>, _>("running")?.unwrap_or(0) as usize,
                ready: idle.try_get::<Option<i64>, _>("ready")?.unwrap_or(0) as usize,
                next_ready_at: idle.try_get::<Option<i64>, _>("next_ready")?.map(Timestamp),
                budget_exhausted: exhausted,
                cancelled,
            }));
        };
        let id: String = row.try_get("id")?;
        let version: i64 = row.try_get("version")?;
        let wanted = Usd::from_pico(row.try_get("attempt_budget_pico")?);
        let reserved = match available {
            Some(a) => wanted.min(a),
            None => Usd::ZERO,
        };
        let expires = expiry(now, ttl);
        let claimed = sql(q::CLAIM_TASK)
            .bind(plan)
            .bind(&id)
            .bind(worker)
            .bind(expires.0)
            .bind(reserved.pico())
            .bind(now.0)
            .bind(version)
            .fetch_one(&mut *tx)
            .await?;
        let claimed = decode::claimed(&claimed, &decode::Claimant { plan, worker, expires, reserved }, backoff_base)?;
        let (attempt, fence) = (claimed.lease.attempt, claimed.lease.fence);
        if budget.limit.is_some() {
            sql(q::RESERVE).bind(plan).bind(reserved.pico()).execute(&mut *tx).await?;
        }
        sql(q::INSERT_ATTEMPT)
            .bind(plan)
            .bind(&id)
            .bind(i64::from(attempt))
            .bind(fence)
            .bind(worker)
            .bind(now.0)
            .bind(reserved.pico())
            .execute(&mut *tx)
            .await?;
        Self::event_tx(
            tx,
            plan,
            Some(&id),
            Some(attempt),
            TaskEntry::TaskClaimed { worker: worker.to_string(), fence, lease_expires: expires.0, reserved },
            now,
        )
        .await?;
        Ok(ClaimOutcome::Claimed(Box::new(claimed)))
    }
}
