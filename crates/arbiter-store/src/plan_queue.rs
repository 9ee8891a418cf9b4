//! The plan queue ([`PlanStore`]) over any backend: one implementation for SQLite and Postgres.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use arbiter_core::budget::{Budget, Charge};
use arbiter_core::money::Usd;
use arbiter_core::plan::check::check;
use arbiter_core::plan::event::{ImportCounts, PlanEntry, PlanLogEntry, TaskEntry};
use arbiter_core::plan::spec::ImportedStatus;
use arbiter_core::plan::state::{AttemptStatus, TaskEvent, TaskStatus, waiting_status};
use arbiter_core::plan::{PlanSpec, TaskSpec};
use arbiter_core::time::Timestamp;

use crate::StoreError;
use crate::db::{Tx, sql, values};
use crate::plan_impl::{self as decode, expiry};
use crate::plan_sql as q;
use crate::plans::*;
use crate::store::{Backend, SqlStore};

/// A report that arrived under a lease that is no longer held.
pub(crate) struct Stale;

/// A locked plan's budget and flags.
pub(crate) struct PlanLock {
    budget: Budget,
    guard_files: bool,
    cancelled: bool,
    backoff_base: u64,
}

/// How an attempt ends.
pub(crate) struct Ending<'a> {
    plan: &'a str,
    task: &'a str,
    fence: i64,
    result: &'a AttemptResult,
    status: AttemptStatus,
    cost: Usd,
    /// An expiry: only if the lease is still expired at this moment.
    expired_by: Option<Timestamp>,
}

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
        Self::event_tx(tx, plan, None, None, decode::branch_event(branch, previous), now).await
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
        let (deps, files) = decode::deps_and_files(t);
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
        let d = decode::decide(e.result, attempts, max_attempts, locked.backoff_base, now);
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
        Self::event_tx(tx, plan, Some(task), Some(attempts), decode::outcome_event(e.status, fence, &d, e.cost), now)
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

/// A task row to insert.
struct NewTask<'a> {
    id: &'a str,
    ord: i64,
    priority: i64,
    spec: String,
    status: &'static str,
    /// The status an import gave it, which a reset keeps.
    initial: Option<&'static str>,
    deps_left: i64,
    max_attempts: i64,
    attempt_budget: i64,
    has_files: bool,
    reason: Option<String>,
}

/// What an imported task starts as.
fn initial_status(t: &TaskSpec, deps_left: i64) -> TaskStatus {
    match t.imported_status {
        Some(ImportedStatus::Done) => TaskStatus::Done,
        Some(ImportedStatus::Skipped) => TaskStatus::Skipped,
        None => waiting_status(deps_left),
    }
}

#[async_trait::async_trait]
impl<B: Backend> PlanStore for SqlStore<B> {
    async fn create_plan(&self, header: &PlanSpec, now: Timestamp) -> Result<bool, StoreError> {
        let mut tx = self.write_tx().await?;
        if sql(q::SELECT_PLAN).bind(&header.id).fetch_optional(&mut tx).await?.is_some() {
            return Ok(false);
        }
        Self::insert_plan_tx(&mut tx, &header.header(), 0, now).await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn import_plan(&self, import: Import<'_>) -> Result<ImportReport, StoreError> {
        let spec = import.spec;
        let now = import.now;
        let mut tx = self.write_tx().await?;
        // No report ends an attempt of this plan while the import runs: the
        // dependency counts it computes stay true until it commits.
        Self::lock_tx(&mut tx, B::IMPORT_GUARD, &spec.id, None).await?;
        let locked = match Self::lock_plan_tx(&mut tx, &spec.id).await {
            Ok(locked) => Some(locked),
            Err(StoreError::NoPlan { .. }) => None,
            Err(e) => return Err(e),
        };
        let existing = match locked {
            Some(_) => {
                let row = sql(q::SELECT_PLAN).bind(&spec.id).fetch_one(&mut tx).await?;
                Some(decode::plan(&row)?)
            }
            None => None,
        };
        if import.mode == ImportMode::New && existing.is_some() {
            return Err(StoreError::PlanExists { id: spec.id.clone() });
        }
        if let Some(url) = &spec.source {
            let owner: Option<String> =
                sql(q::PLAN_BY_SOURCE).bind(url).fetch_optional(&mut tx).await?.map(|r| r.try_get("id")).transpose()?;
            if let Some(plan) = owner.filter(|p| *p != spec.id) {
                return Err(StoreError::SourceTaken { url: url.clone(), plan });
            }
        }
        let stored = Self::tasks_tx(&mut tx, &spec.id).await?;
        let by_id: BTreeMap<&str, &TaskRecord> = stored.iter().map(|t| (t.spec.id.as_str(), t)).collect();
        let in_file: BTreeSet<&str> = spec.tasks.iter().map(|t| t.id.as_str()).collect();
        let others: Vec<(String, Vec<String>)> = stored
            .iter()
            .filter(|t| !in_file.contains(t.spec.id.as_str()))
            .map(|t| (t.spec.id.clone(), t.spec.dependencies.clone()))
            .collect();
        let mut problems: Vec<String> = check(spec, &others).iter().map(|p| p.to_string()).collect();
        // A re-import without --update keeps the stored definitions: check with them.
        if import.mode == ImportMode::Add && !stored.is_empty() {
            let kept = PlanSpec {
                tasks: spec
                    .tasks
                    .iter()
                    .map(|t| by_id.get(t.id.as_str()).map_or(t.clone(), |s| s.spec.clone()))
                    .collect(),
                ..spec.clone()
            };
            for p in check(&kept, &others) {
                let p = p.to_string();
                if !problems.contains(&p) {
                    problems.push(p);
                }
            }
        }
        // A plan's source is where it came from: it is set when the plan is
        // created and never changes (the store keeps one plan per source).
        if let Some(p) = &existing
            && spec.source.is_some()
            && spec.source != p.header.source
        {
            problems.push(format!(
                "source: the plan comes from {}; a stored plan's source cannot change (leave `source` out, or write it as it is)",
                p.header.source.as_deref().unwrap_or("nowhere (it was written by hand)")
            ));
        }
        if !problems.is_empty() {
            return Err(StoreError::PlanInvalid { problems });
        }
        let mut report = ImportReport { created_plan: existing.is_none(), ..Default::default() };
        let mut refused = Vec::new();
        let mut to_update: Vec<&TaskSpec> = Vec::new();
        let mut to_add: Vec<&TaskSpec> = Vec::new();
        for t in &spec.tasks {
            match by_id.get(t.id.as_str()) {
                None => to_add.push(t),
                Some(s) if s.spec == t.definition() => report.unchanged.push(t.id.clone()),
                Some(s) => match import.mode {
                    // (A new plan has no stored tasks: `New` never gets here.)
                    ImportMode::Add | ImportMode::New => {
                        report.unchanged.push(t.id.clone());
                        report.differing.push(t.id.clone());
                    }
                    ImportMode::Update if s.attempts == 0 && TaskEvent::Update.allowed(s.status) => to_update.push(t),
                    ImportMode::Update => refused.push(format!(
                        "{} is {} after {} attempt(s): its definition cannot change",
                        t.id,
                        s.status.as_str(),
                        s.attempts
                    )),
                },
            }
        }
        if !refused.is_empty() {
            return Err(StoreError::ImportRefused { tasks: refused });
        }
        // The statuses after this import decide how many dependencies are unmet.
        let mut status_of: BTreeMap<String, TaskStatus> =
            stored.iter().map(|t| (t.spec.id.clone(), t.status)).collect();
        for t in &to_add {
            status_of.insert(t.id.clone(), initial_status(t, 0));
        }
        let unmet = |t: &TaskSpec, status_of: &BTreeMap<String, TaskStatus>| -> i64 {
            let deps: BTreeSet<&String> = t.dependencies.iter().collect();
            deps.into_iter().filter(|d| status_of.get(d.as_str()) != Some(&TaskStatus::Done)).count() as i64
        };
        // The budget a plan has stays unless the file states one (and may change it).
        let mut header = match (&existing, import.mode) {
            (Some(p), ImportMode::Add) => p.header.clone(),
            _ => spec.header(),
        };
        let limit = match &existing {
            Some(_) if import.mode == ImportMode::Update && spec.budget_usd.is_some() => spec.budget_usd,
            Some(p) => p.budget.limit,
            None => spec.budget_usd,
        };
        header.budget_usd = limit;
        if let Some(p) = &existing {
            header.source = p.header.source.clone();
        }
        // Tasks are only ever added, in order: the next one's place is the count.
        let mut next_ord = stored.len() as i64;
        let mut files_anywhere = stored.iter().any(|t| !t.spec.key_files.is_empty());
        if existing.is_none() {
            match Self::insert_plan_tx(&mut tx, &header, spec.tasks.len(), now).await {
                Err(StoreError::Query(sqlx::Error::Database(db))) if db.is_unique_violation() => {
                    // A concurrent import created the plan (or one from the same
                    // source) since this one looked: the store lets one win.
                    drop(tx);
                    if let Some(url) = &header.source
                        && let Some(plan) = self.plan_by_source(url).await?
                    {
                        return Err(StoreError::SourceTaken { url: url.clone(), plan });
                    }
                    return Err(StoreError::PlanExists { id: spec.id.clone() });
                }
                other => other?,
            }
        }
        let defaults = &header.defaults;
        // New tasks, their dependencies, files and events go in in batches: a plan
        // of thousands of tasks imports in a handful of statements.
        let mut task_rows = Vec::with_capacity(to_add.len());
        let mut dep_rows: Vec<(&str, &str)> = Vec::new();
        let mut file_rows: Vec<(&str, String)> = Vec::new();
        let mut event_rows: Vec<(&str, String, String)> = Vec::with_capacity(to_add.len());
        for t in &to_add {
            let deps_left = unmet(t, &status_of);
            let status = initial_status(t, deps_left);
            task_rows.push(NewTask {
                id: &t.id,
                ord: next_ord,
                priority: t.priority.rank(),
                spec: serde_json::to_string(&t.definition()).unwrap_or_default(),
                status: status.as_str(),
                initial: t.imported_status.map(|_| status.as_str()),
                deps_left,
                max_attempts: i64::from(t.max_attempts_with(defaults)),
                attempt_budget: t.attempt_budget_with(defaults).pico(),
                has_files: !t.key_files.is_empty(),
                reason: t.imported_status.map(|_| "marked so in the imported file".to_string()),
            });
            next_ord += 1;
            files_anywhere |= !t.key_files.is_empty();
            let (deps, files) = decode::deps_and_files(t);
            dep_rows.extend(deps.into_iter().map(|d| (t.id.as_str(), d)));
            file_rows.extend(files.into_iter().map(|f| (t.id.as_str(), f)));
            let created = PlanLogEntry::from(TaskEntry::TaskCreated {
                status,
                priority: t.priority,
                dependencies: t.dependencies.clone(),
            });
            let (kind, data) = created.to_parts();
            event_rows.push((t.id.as_str(), kind, data.to_string()));
            report.added.push(t.id.clone());
        }
        for chunk in task_rows.chunks(500) {
            let mut b = values(
                "INSERT INTO plan_tasks (plan_id, id, ord, priority, spec, status, initial_status, deps_left, max_attempts, attempt_budget_pico, has_files, reason, updated_at)",
                13,
                chunk.len(),
            );
            for t in chunk {
                b = b
                    .bind(spec.id.as_str())
                    .bind(t.id)
                    .bind(t.ord)
                    .bind(t.priority)
                    .bind(t.spec.as_str())
                    .bind(t.status)
                    .bind(t.initial)
                    .bind(t.deps_left)
                    .bind(t.max_attempts)
                    .bind(t.attempt_budget)
                    .bind(t.has_files)
                    .bind(t.reason.as_deref())
                    .bind(now.0);
            }
            b.execute(&mut tx).await?;
        }
        for chunk in dep_rows.chunks(2000) {
            let mut b = values("INSERT INTO plan_deps (plan_id, task_id, depends_on)", 3, chunk.len());
            for (task, dep) in chunk {
                b = b.bind(spec.id.as_str()).bind(*task).bind(*dep);
            }
            b.execute(&mut tx).await?;
        }
        for chunk in file_rows.chunks(2000) {
            let mut b = values("INSERT INTO plan_files (plan_id, task_id, path)", 3, chunk.len());
            for (task, path) in chunk {
                b = b.bind(spec.id.as_str()).bind(*task).bind(path.as_str());
            }
            b.execute(&mut tx).await?;
        }
        for chunk in event_rows.chunks(1000) {
            let mut b = values("INSERT INTO plan_events (plan_id, task_id, attempt, kind, at, data)", 6, chunk.len());
            for (task, kind, data) in chunk {
                b = b
                    .bind(spec.id.as_str())
                    .bind(*task)
                    .bind(None::<i64>)
                    .bind(kind.as_str())
                    .bind(now.0)
                    .bind(data.as_str());
            }
            b.execute(&mut tx).await?;
        }
        for t in &to_update {
            let Some(s) = by_id.get(t.id.as_str()) else { continue };
            let def = t.definition();
            let deps_left = unmet(t, &status_of);
            let status = waiting_status(deps_left);
            let changed = sql(q::UPDATE_TASK_DEFINITION)
                .bind(&spec.id)
                .bind(&t.id)
                .bind(t.priority.rank())
                .bind(serde_json::to_string(&def).unwrap_or_default())
                .bind(status.as_str())
                .bind(deps_left)
                .bind(i64::from(t.max_attempts_with(defaults)))
                .bind(t.attempt_budget_with(defaults).pico())
                .bind(!t.key_files.is_empty())
                .bind(now.0)
                .bind(s.version)
                .execute(&mut tx)
                .await?;
            if changed.rows_affected() != 1 {
                return Err(StoreError::ImportRefused {
                    tasks: vec![format!("{} changed while the import ran; import again", t.id)],
                });
            }
            Self::set_deps_and_files_tx(&mut tx, &spec.id, t).await?;
            Self::event_tx(
                &mut tx,
                &spec.id,
                Some(&t.id),
                None,
                TaskEntry::TaskUpdated { status, dependencies: t.dependencies.clone() },
                now,
            )
            .await?;
            report.updated.push(t.id.clone());
        }
        files_anywhere |= to_update.iter().any(|t| !t.key_files.is_empty());
        sql(q::UPDATE_PLAN)
            .bind(&spec.id)
            .bind(&header.name)
            .bind(serde_json::to_string(&header).unwrap_or_default())
            .bind(header.defaults.retry_backoff() as i64)
            .bind(files_anywhere)
            .bind(now.0)
            .execute(&mut tx)
            .await?;
        if let Some(branch) = import.branch {
            let previous = existing.as_ref().and_then(|p| p.branch.clone());
            Self::set_branch_tx(&mut tx, &spec.id, branch, previous.as_ref(), now).await?;
        }
        // (The header with the new limit is stored just above.)
        if let Some(locked) = locked.filter(|l| l.budget.limit != limit) {
            Self::set_limit_tx(&mut tx, &spec.id, locked.budget, limit, None, now).await?;
        }
        // A gate judges what this import adds or changes, not what was there.
        let judged: BTreeSet<String> = report.added.iter().chain(&report.updated).cloned().collect();
        for (task, why) in import.skip.iter().filter(|(t, _)| judged.contains(t)) {
            let done = sql(q::SKIP_TASK).bind(&spec.id).bind(task).bind(why).bind(now.0).execute(&mut tx).await?;
            if done.rows_affected() == 1 {
                Self::event_tx(
                    &mut tx,
                    &spec.id,
                    Some(task),
                    None,
                    TaskEntry::TaskSkipped { reason: why.to_string() },
                    now,
                )
                .await?;
                report.skipped.push(task.clone());
            }
        }
        for v in import.verdicts.iter().filter(|v| judged.contains(&v.task)) {
            Self::event_tx(
                &mut tx,
                &spec.id,
                Some(&v.task),
                None,
                TaskEntry::GateVerdict { verdict: v.verdict, missing: v.missing.clone(), reason: v.reason.clone() },
                now,
            )
            .await?;
        }
        let counts = ImportCounts {
            added: report.added.len(),
            updated: report.updated.len(),
            unchanged: report.unchanged.len(),
            skipped: report.skipped.len(),
            strict: import.apply,
        };
        let entry =
            if import.apply.is_some() { PlanEntry::PlanApplied(counts) } else { PlanEntry::PlanImported(counts) };
        Self::event_tx(&mut tx, &spec.id, None, None, entry, now).await?;
        tx.commit().await?;
        self.notify_work(&spec.id).await;
        Ok(report)
    }

    async fn plan(&self, id: &str) -> Result<Option<PlanView>, StoreError> {
        let Some(row) = sql(q::SELECT_PLAN).bind(id).fetch_optional(&self.pool).await? else {
            return Ok(None);
        };
        let plan = decode::plan(&row)?;
        let rows = sql(q::SELECT_TASKS).bind(id).fetch_all(&self.pool).await?;
        let tasks = rows.iter().map(decode::task).collect::<Result<Vec<_>, _>>()?;
        Ok(Some(PlanView::new(plan, tasks)))
    }

    async fn plan_record(&self, id: &str) -> Result<Option<PlanRecord>, StoreError> {
        let row = sql(q::SELECT_PLAN).bind(id).fetch_optional(&self.pool).await?;
        row.as_ref().map(decode::plan).transpose()
    }

    async fn plan_by_source(&self, source: &str) -> Result<Option<String>, StoreError> {
        let row = sql(q::PLAN_BY_SOURCE).bind(source).fetch_optional(&self.pool).await?;
        row.map(|r| r.try_get("id")).transpose().map_err(StoreError::from)
    }

    async fn task_record(&self, plan_id: &str, task_id: &str) -> Result<Option<TaskRecord>, StoreError> {
        let row = sql(q::SELECT_TASK).bind(plan_id).bind(task_id).fetch_optional(&self.pool).await?;
        row.as_ref().map(decode::task).transpose()
    }

    async fn claimable_plans(&self) -> Result<Vec<String>, StoreError> {
        let rows = sql(q::CLAIMABLE_PLANS).fetch_all(&self.pool).await?;
        rows.iter().map(|r| Ok(r.try_get("id")?)).collect()
    }

    async fn plans(&self) -> Result<Vec<PlanSummary>, StoreError> {
        let rows = sql(q::LIST_PLANS).fetch_all(&self.pool).await?;
        let mut out: Vec<PlanSummary> = Vec::new();
        for r in rows {
            let id: String = r.try_get("id")?;
            if out.last().is_none_or(|p| p.id != id) {
                out.push(PlanSummary {
                    name: r.try_get("name")?,
                    budget: decode::budget(&r)?,
                    cancelled: r.try_get("cancelled")?,
                    counts: BTreeMap::new(),
                    id,
                });
            }
            if let (Some(status), Some(p)) = (r.try_get::<Option<String>, _>("status")?, out.last_mut()) {
                let n: i64 = r.try_get("n")?;
                if let Some(s) = TaskStatus::parse(&status) {
                    p.counts.insert(s, n as usize);
                }
            }
        }
        Ok(out)
    }

    async fn attempts(&self, plan_id: &str) -> Result<Vec<AttemptRecord>, StoreError> {
        let rows = sql(q::SELECT_ATTEMPTS).bind(plan_id).fetch_all(&self.pool).await?;
        rows.iter().map(decode::attempt).collect()
    }

    async fn events(&self, plan_id: &str) -> Result<Vec<PlanEvent>, StoreError> {
        let rows = sql(q::SELECT_EVENTS).bind(plan_id).fetch_all(&self.pool).await?;
        rows.iter().map(decode::event).collect()
    }

    async fn events_after(&self, plan_id: &str, after: i64, limit: u32) -> Result<Vec<PlanEvent>, StoreError> {
        let rows =
            sql(q::SELECT_EVENTS_AFTER).bind(plan_id).bind(after).bind(i64::from(limit)).fetch_all(&self.pool).await?;
        rows.iter().map(decode::event).collect()
    }

    async fn all_events_after(&self, after: i64, limit: u32) -> Result<Vec<PlanEvent>, StoreError> {
        let rows = sql(q::SELECT_ALL_EVENTS_AFTER).bind(after).bind(i64::from(limit)).fetch_all(&self.pool).await?;
        rows.iter().map(decode::event).collect()
    }

    async fn recent_events(
        &self,
        filter: &crate::plans::EventFilter<'_>,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Vec<PlanEvent>, StoreError> {
        let before = before.unwrap_or(i64::MAX);
        let rows = match filter.plan {
            Some(plan) => {
                sql(q::SELECT_RECENT_EVENTS)
                    .bind(plan)
                    .bind(filter.task)
                    .bind(filter.kind)
                    .bind(before)
                    .bind(i64::from(limit))
                    .fetch_all(&self.pool)
                    .await?
            }
            None => {
                sql(q::SELECT_ALL_RECENT_EVENTS)
                    .bind(filter.task)
                    .bind(filter.kind)
                    .bind(before)
                    .bind(i64::from(limit))
                    .fetch_all(&self.pool)
                    .await?
            }
        };
        rows.iter().map(decode::event).collect()
    }

    async fn set_budget(
        &self,
        plan_id: &str,
        limit: Option<Usd>,
        by: &str,
        now: Timestamp,
    ) -> Result<Budget, StoreError> {
        let mut tx = self.write_tx().await?;
        let locked = Self::lock_plan_tx(&mut tx, plan_id).await?;
        let b = Self::set_limit_tx(&mut tx, plan_id, locked.budget, limit, Some(by), now).await?;
        // The header states the budget too (`plan export` writes it).
        let row = sql(q::SELECT_PLAN).bind(plan_id).fetch_one(&mut tx).await?;
        let mut header = decode::plan(&row)?.header;
        header.budget_usd = limit;
        sql(q::SET_HEADER)
            .bind(plan_id)
            .bind(serde_json::to_string(&header).unwrap_or_default())
            .bind(now.0)
            .execute(&mut tx)
            .await?;
        tx.commit().await?;
        self.notify_work(plan_id).await;
        Ok(b)
    }

    async fn claim(
        &self,
        plan_id: &str,
        worker: &str,
        lease: Duration,
        now: Timestamp,
    ) -> Result<ClaimOutcome, StoreError> {
        if let Some(claimed) = self.claim_fast(plan_id, worker, lease, now, None).await? {
            return Ok(ClaimOutcome::Claimed(Box::new(claimed)));
        }
        if let Some(idle) = self.idle_where_fast(plan_id).await? {
            return Ok(ClaimOutcome::Idle(idle));
        }
        let mut tx = self.write_tx().await?;
        let outcome = Self::claim_tx(&mut tx, plan_id, worker, lease, now, None).await?;
        tx.commit().await?;
        Ok(outcome)
    }

    async fn heartbeat(&self, lease: &Lease, ttl: Duration, now: Timestamp) -> Result<Option<Timestamp>, StoreError> {
        let expires = expiry(now, ttl);
        let done = sql(q::HEARTBEAT)
            .bind(&lease.plan_id)
            .bind(&lease.task_id)
            .bind(lease.fence)
            .bind(expires.0)
            .bind(now.0)
            .execute(&self.pool)
            .await?;
        Ok((done.rows_affected() == 1).then_some(expires))
    }

    async fn finish(
        &self,
        lease: &Lease,
        result: AttemptResult,
        cost: Usd,
        now: Timestamp,
    ) -> Result<Finished, StoreError> {
        if cost == Usd::ZERO
            && lease.reserved == Usd::ZERO
            && let Some(f) = self.finish_fast(lease, &result, now).await?
        {
            if !f.newly_ready.is_empty() || f.status == TaskStatus::Ready {
                self.notify_work(&lease.plan_id).await;
            }
            return Ok(f);
        }
        let status = result.attempt_status();
        let mut tx = self.write_tx().await?;
        let ending = Ending {
            plan: &lease.plan_id,
            task: &lease.task_id,
            fence: lease.fence,
            result: &result,
            status,
            cost,
            expired_by: None,
        };
        let ended = Self::end_attempt_tx(&mut tx, &ending, now).await?;
        match ended {
            Ok(f) => {
                tx.commit().await?;
                if !f.newly_ready.is_empty() || f.status == TaskStatus::Ready {
                    self.notify_work(&lease.plan_id).await;
                }
                Ok(f)
            }
            Err(Stale) => {
                // The money was spent all the same.
                if cost > Usd::ZERO {
                    let attempt = Some((lease.task_id.as_str(), lease.fence));
                    Self::charge_attempt_tx(&mut tx, &lease.plan_id, attempt, cost, now).await?;
                }
                Self::event_tx(
                    &mut tx,
                    &lease.plan_id,
                    Some(&lease.task_id),
                    Some(lease.attempt),
                    TaskEntry::StaleReportRefused { fence: lease.fence, worker: lease.worker.clone(), cost },
                    now,
                )
                .await?;
                tx.commit().await?;
                Err(StoreError::StaleLease {
                    plan: lease.plan_id.clone(),
                    task: lease.task_id.clone(),
                    fence: lease.fence,
                })
            }
        }
    }

    async fn charge(
        &self,
        plan_id: &str,
        attempt: Option<(&str, i64)>,
        amount: Usd,
        now: Timestamp,
    ) -> Result<Charged, StoreError> {
        let mut tx = self.write_tx().await?;
        let charged = Self::charge_attempt_tx(&mut tx, plan_id, attempt, amount, now).await?;
        tx.commit().await?;
        Ok(charged)
    }

    async fn sweep_expired(&self, now: Timestamp) -> Result<Vec<Reclaimed>, StoreError> {
        let rows = sql(q::EXPIRED_LEASES).bind(now.0).fetch_all(&self.pool).await?;
        let mut by_plan: BTreeMap<String, Vec<(String, i64, String)>> = BTreeMap::new();
        for r in rows {
            by_plan.entry(r.try_get::<String, _>("plan_id")?).or_default().push((
                r.try_get::<String, _>("id")?,
                r.try_get::<i64, _>("fence")?,
                r.try_get::<Option<String>, _>("lease_owner")?.unwrap_or_default(),
            ));
        }
        // One transaction per plan: its locks are taken in the one order.
        let mut reclaimed = Vec::new();
        for (plan, leases) in by_plan {
            let mut tx = self.write_tx().await?;
            let taken = Self::reclaim_tx(&mut tx, &plan, leases, "its lease expired", Some(now), now).await?;
            tx.commit().await?;
            if !taken.is_empty() {
                self.notify_work(&plan).await;
            }
            reclaimed.extend(taken);
        }
        Ok(reclaimed)
    }

    async fn release_workers(
        &self,
        plan_id: &str,
        workers: &[String],
        reason: &str,
        now: Timestamp,
    ) -> Result<Vec<Reclaimed>, StoreError> {
        let mut tx = self.write_tx().await?;
        let mut leases = Vec::new();
        for w in workers {
            let rows = sql(q::LEASES_OF).bind(plan_id).bind(w).fetch_all(&mut tx).await?;
            for r in rows {
                leases.push((r.try_get::<String, _>("id")?, r.try_get::<i64, _>("fence")?, w.clone()));
            }
        }
        let reclaimed = Self::reclaim_tx(&mut tx, plan_id, leases, reason, None, now).await?;
        tx.commit().await?;
        if !reclaimed.is_empty() {
            self.notify_work(plan_id).await;
        }
        Ok(reclaimed)
    }

    async fn cancel_plan(&self, plan_id: &str, by: &str, now: Timestamp) -> Result<usize, StoreError> {
        let mut tx = self.write_tx().await?;
        Self::lock_plan_tx(&mut tx, plan_id).await?;
        Self::lock_tx(&mut tx, B::LOCK_TASKS, plan_id, None).await?;
        let why = "the plan was cancelled";
        sql(q::CANCEL_ATTEMPTS).bind(plan_id).bind(now.0).bind(why).execute(&mut tx).await?;
        let rows = sql(q::CANCEL_TASKS).bind(plan_id).bind(now.0).bind(why).fetch_all(&mut tx).await?;
        let mut ids = Vec::with_capacity(rows.len());
        for r in rows {
            ids.push(r.try_get::<String, _>("id")?);
        }
        ids.sort();
        sql(q::SET_CANCELLED).bind(plan_id).bind(true).bind(now.0).execute(&mut tx).await?;
        for id in &ids {
            Self::event_tx(&mut tx, plan_id, Some(id), None, TaskEntry::TaskCancelled {}, now).await?;
        }
        let cancelled = PlanEntry::PlanCancelled { tasks: ids.clone(), by: Some(by.to_string()) };
        Self::event_tx(&mut tx, plan_id, None, None, cancelled, now).await?;
        tx.commit().await?;
        self.notify_work(plan_id).await;
        Ok(ids.len())
    }

    async fn retry_task(
        &self,
        plan_id: &str,
        task_id: &str,
        by: &str,
        now: Timestamp,
    ) -> Result<TaskStatus, StoreError> {
        let mut tx = self.write_tx().await?;
        Self::lock_plan_tx(&mut tx, plan_id).await?;
        let Some(row) = sql(B::LOCK_TASK).bind(plan_id).bind(task_id).fetch_optional(&mut tx).await? else {
            return Err(StoreError::NoTask { plan: plan_id.to_string(), task: task_id.to_string() });
        };
        let from: String = row.try_get("status")?;
        let from = TaskStatus::parse(&from).ok_or(StoreError::Corrupt { column: "plan_tasks.status", value: from })?;
        if !TaskEvent::Retry.allowed(from) {
            return Err(StoreError::NotAllowed {
                plan: plan_id.to_string(),
                task: task_id.to_string(),
                status: from.as_str().to_string(),
                action: "a retry (only failed, cancelled or skipped tasks are retried)",
            });
        }
        let row = sql(q::RETRY_TASK).bind(plan_id).bind(task_id).bind(now.0).fetch_one(&mut tx).await?;
        let status: String = row.try_get("status")?;
        let status =
            TaskStatus::parse(&status).ok_or(StoreError::Corrupt { column: "plan_tasks.status", value: status })?;
        sql(q::UNCANCEL_PLAN).bind(plan_id).bind(now.0).execute(&mut tx).await?;
        Self::event_tx(
            &mut tx,
            plan_id,
            Some(task_id),
            None,
            TaskEntry::TaskRetried { from, status, by: Some(by.to_string()) },
            now,
        )
        .await?;
        tx.commit().await?;
        self.notify_work(plan_id).await;
        Ok(status)
    }

    async fn reset_plan(
        &self,
        plan_id: &str,
        hard: bool,
        branch: Option<&BranchReset>,
        now: Timestamp,
    ) -> Result<usize, StoreError> {
        let mut tx = self.write_tx().await?;
        Self::lock_plan_tx(&mut tx, plan_id).await?;
        Self::lock_tx(&mut tx, B::LOCK_TASKS, plan_id, None).await?;
        let live = sql(q::LIVE_LEASES).bind(plan_id).bind(now.0).fetch_all(&mut tx).await?;
        if !live.is_empty() {
            let mut running = Vec::with_capacity(live.len());
            for r in live {
                let owner = r.try_get::<Option<String>, _>("lease_owner")?.unwrap_or_default();
                running.push(format!("{} (worker {owner})", r.try_get::<String, _>("id")?));
            }
            return Err(StoreError::LeasesHeld { plan: plan_id.to_string(), tasks: running });
        }
        sql(q::CANCEL_ATTEMPTS).bind(plan_id).bind(now.0).bind("the plan was reset").execute(&mut tx).await?;
        let rows = sql(q::RESET_TASKS).bind(plan_id).bind(hard).bind(now.0).fetch_all(&mut tx).await?;
        let mut ids = Vec::with_capacity(rows.len());
        for r in rows {
            ids.push(r.try_get::<String, _>("id")?);
        }
        ids.sort();
        sql(q::RESET_PLAN).bind(plan_id).bind(hard).bind(now.0).execute(&mut tx).await?;
        if hard {
            sql(q::DELETE_ATTEMPTS).bind(plan_id).execute(&mut tx).await?;
        }
        for id in &ids {
            Self::event_tx(&mut tx, plan_id, Some(id), None, TaskEntry::TaskReset { hard }, now).await?;
        }
        let reset = PlanEntry::PlanReset { hard, tasks: ids.len(), branch: branch.cloned() };
        Self::event_tx(&mut tx, plan_id, None, None, reset, now).await?;
        tx.commit().await?;
        self.notify_work(plan_id).await;
        Ok(ids.len())
    }

    async fn record_branch(
        &self,
        plan_id: &str,
        branch: &BranchRecord,
        now: Timestamp,
    ) -> Result<Option<BranchRecord>, StoreError> {
        let mut tx = self.write_tx().await?;
        Self::lock_plan_tx(&mut tx, plan_id).await?;
        let row = sql(q::SELECT_PLAN).bind(plan_id).fetch_one(&mut tx).await?;
        let previous = decode::plan(&row)?.branch;
        Self::set_branch_tx(&mut tx, plan_id, branch, previous.as_ref(), now).await?;
        tx.commit().await?;
        Ok(previous)
    }

    async fn note_event(&self, plan_id: &str, entry: PlanEntry, now: Timestamp) -> Result<(), StoreError> {
        let mut tx = self.write_tx().await?;
        Self::event_tx(&mut tx, plan_id, None, None, entry, now).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn wait_for_work(&self, _plan_id: &str, timeout: Duration) -> Wake {
        self.wait_notified(timeout).await
    }

    async fn work_signal(&self) -> std::sync::Arc<tokio::sync::Notify> {
        self.work_handle().await
    }
}
