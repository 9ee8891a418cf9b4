//! The unit queue ([`UnitQueue`]) over any backend: one implementation for SQLite and Postgres.

use std::time::Duration;

use arbiter_core::money::Usd;
use arbiter_core::plan::TaskSpec;
use arbiter_core::plan::event::{UnitEntry, UnitLost};
use arbiter_core::time::Timestamp;
use serde_json::json;

use crate::StoreError;
use crate::db::{Db, OrStore, Rec, Tx, sql};
use crate::plans::*;
use crate::store::{Backend, SqlStore};
use crate::unit_sql as u;
use crate::units::*;
use arbiter_core::queue::rules::expiry;

/// An expired or released unit lease: (plan, task, attempt fence, name, kind,
/// unit fence, worker, tries).
type Held = (String, String, i64, String, UnitKind, i64, String, u32);

fn held<D: Db>(r: &Rec<D>) -> Result<Held, StoreError> {
    Ok((
        r.try_get("plan_id")?,
        r.try_get("task_id")?,
        r.try_get("task_fence")?,
        r.try_get("name")?,
        u::kind(r.try_get("kind")?)?,
        r.try_get("fence")?,
        r.try_get::<Option<String>, _>("worker")?.unwrap_or_default(),
        r.try_get::<i64, _>("tries")?.max(0) as u32,
    ))
}

impl<B: Backend> SqlStore<B> {
    /// After a candidate unit is done: the evaluation becomes ready when no
    /// candidate is left.
    pub(crate) async fn evaluation_after_tx(
        tx: &mut Tx<'_, B::Db>,
        plan: &str,
        task: &str,
        fence: i64,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let left: i64 =
            sql(u::CANDIDATES_LEFT).bind(plan).bind(task).bind(fence).fetch_one(&mut *tx).await?.try_get("n")?;
        if left > 0 {
            return Ok(false);
        }
        let moved = sql(u::EVALUATION_READY).bind(plan).bind(task).bind(fence).bind(now.0).execute(&mut *tx).await?;
        if moved.rows_affected() == 1 {
            Self::event_tx(tx, plan, Some(task), None, UnitEntry::EvaluationReady { fence }, now).await?;
        }
        Ok(moved.rows_affected() == 1)
    }

    /// Takes back unit leases: into the queue again, or (a try that counts and
    /// was the last) given up. Returns what it took, and the attempts whose
    /// evaluation was given up (their lease and why, for the caller to fail them).
    pub(crate) async fn take_back_tx(
        tx: &mut Tx<'_, B::Db>,
        units: Vec<Held>,
        why: &u::TakeBack<'_>,
        now: Timestamp,
    ) -> Result<(Vec<ReclaimedUnit>, Vec<(Lease, String)>), StoreError> {
        let counts = why.counts();
        let mut out = Vec::new();
        let mut failed = Vec::new();
        for (plan, task, task_fence, name, kind, fence, worker, tries) in units {
            let still: Option<(String, i64)> = sql(B::LOCK_UNIT)
                .bind(&plan)
                .bind(&task)
                .bind(task_fence)
                .bind(&name)
                .fetch_optional(&mut *tx)
                .await?
                .map(|r| Ok::<_, StoreError>((r.try_get("status")?, r.try_get("fence")?)))
                .transpose()?;
            if still != Some(("running".to_string(), fence)) {
                continue;
            }
            let given_up = counts && tries + 1 >= MAX_UNIT_TRIES;
            let lost_reason = why.given_up(tries + 1, &worker);
            if given_up {
                sql(u::UNIT_DONE)
                    .bind(&plan)
                    .bind(&task)
                    .bind(task_fence)
                    .bind(&name)
                    .bind(json!(UnitResult::Lost(lost_reason.clone())).to_string())
                    .bind(0i64)
                    .bind(now.0)
                    .execute(&mut *tx)
                    .await?;
            } else {
                sql(u::UNIT_AGAIN)
                    .bind(&plan)
                    .bind(&task)
                    .bind(task_fence)
                    .bind(&name)
                    .bind(0i64)
                    .bind(i64::from(counts))
                    .bind(now.0)
                    .execute(&mut *tx)
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
                        evaluation_ready = Self::evaluation_after_tx(tx, &plan, &task, task_fence, now).await?;
                    }
                    UnitKind::Evaluation => failed.push((
                        Self::attempt_lease_tx(tx, &plan, &task, &worker, now).await?,
                        format!("its evaluation was lost: {lost_reason}"),
                    )),
                }
            }
            out.push(ReclaimedUnit { plan_id: plan, task_id: task, name, worker, given_up, evaluation_ready });
        }
        Ok((out, failed))
    }

    /// The lease of a task's running attempt, as a unit of it carries it.
    pub(crate) async fn attempt_lease_tx(
        tx: &mut Tx<'_, B::Db>,
        plan: &str,
        task: &str,
        worker: &str,
        now: Timestamp,
    ) -> Result<Lease, StoreError> {
        let r = sql(u::ATTEMPT_LEASE).bind(plan).bind(task).fetch_one(&mut *tx).await?;
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
impl<B: Backend> UnitQueue for SqlStore<B> {
    async fn tasks_choose_runners(&self, plan_id: &str) -> Result<bool, StoreError> {
        let row = sql(u::TASKS_CHOOSE_RUNNERS).bind(plan_id).fetch_one(&self.pool).await?;
        Ok(row.try_get::<bool, _>("chooses")?)
    }

    async fn ready_tasks(
        &self,
        plan_id: &str,
        now: Timestamp,
        skip: u32,
        limit: u32,
    ) -> Result<Vec<TaskSpec>, StoreError> {
        let rows = sql(u::READY_TASKS)
            .bind(plan_id)
            .bind(now.0)
            .bind(i64::from(limit))
            .bind(i64::from(skip))
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                let text: String = r.try_get("spec")?;
                serde_json::from_str(&text).map_err(|_| StoreError::Corrupt { column: "plan_tasks.spec", value: text })
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
        tx.commit().await.or_store()?;
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
        let stale =
            || StoreError::StaleLease { plan: lease.plan_id.clone(), task: lease.task_id.clone(), fence: lease.fence };
        let mut tx = self.write_tx().await?;
        let row = sql(B::LOCK_ATTEMPT)
            .bind(&lease.plan_id)
            .bind(&lease.task_id)
            .fetch_optional(&mut tx)
            .await?
            .ok_or_else(stale)?;
        let (status, fence): (String, i64) = (row.try_get("status")?, row.try_get("fence")?);
        if status != "running" || fence != lease.fence {
            return Err(stale());
        }
        sql(u::SPREAD_ATTEMPT)
            .bind(&lease.plan_id)
            .bind(&lease.task_id)
            .bind(run_id)
            .bind(now.0)
            .bind(lease.fence)
            .execute(&mut tx)
            .await?;
        sql(u::ATTEMPT_RUN)
            .bind(&lease.plan_id)
            .bind(&lease.task_id)
            .bind(lease.fence)
            .bind(run_id)
            .bind(&frozen)
            .execute(&mut tx)
            .await?;
        let candidates = units.iter().filter(|x| x.kind == UnitKind::Candidate).count();
        for (ord, unit) in units.iter().enumerate() {
            let status = match unit.kind {
                UnitKind::Evaluation if candidates > 0 => UnitStatus::Waiting,
                _ => UnitStatus::Ready,
            };
            sql(u::INSERT_UNIT)
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
                .execute(&mut tx)
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
        tx.commit().await.or_store()?;
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
        if sql(u::ANY_READY_UNIT).bind(plan_id).fetch_optional(&self.pool).await?.is_none() {
            return Ok(None);
        }
        let mut tx = self.write_tx().await?;
        let rows = sql(B::PICK_UNITS).bind(plan_id).fetch_all(&mut tx).await?;
        let expires = expiry(now, ttl);
        for r in rows {
            if !caps.can(&u::needs(r.try_get("needs")?)?) {
                continue;
            }
            // A unit this worker refused goes to another one first.
            let avoided: Option<String> = r.try_get("avoid_worker")?;
            if avoided.as_deref() == Some(worker_of(worker)) && now.0 < r.try_get::<i64, _>("avoid_until")? {
                continue;
            }
            let (plan, task): (String, String) = (r.try_get("plan_id")?, r.try_get("task_id")?);
            let (task_fence, name): (i64, String) = (r.try_get("task_fence")?, r.try_get("name")?);
            let fence: i64 = r.try_get("fence")?;
            let leased = sql(u::LEASE_UNIT)
                .bind(&plan)
                .bind(&task)
                .bind(task_fence)
                .bind(&name)
                .bind(fence)
                .bind(worker)
                .bind(expires.0)
                .bind(now.0)
                .execute(&mut tx)
                .await?;
            if leased.rows_affected() != 1 {
                continue;
            }
            if avoided.is_some() {
                // The refusal the task's note told of is over: the unit runs again.
                sql(u::TASK_WAITING_REASON).bind(&plan).bind(&task).bind(None::<String>).execute(&mut tx).await?;
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
            tx.commit().await.or_store()?;
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
        tx.commit().await.or_store()?;
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
        let done = sql(u::HEARTBEAT_UNIT)
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
        let row =
            sql(B::LOCK_UNIT).bind(plan).bind(task).bind(a.fence).bind(&lease.name).fetch_optional(&mut tx).await?;
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
            status == "running" && *fence == lease.fence && task_status == "running" && *task_fence == a.fence
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
            tx.commit().await.or_store()?;
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
                sql(u::UNIT_DONE)
                    .bind(plan)
                    .bind(task)
                    .bind(a.fence)
                    .bind(&lease.name)
                    .bind(json!(result).to_string())
                    .bind(cost.pico())
                    .bind(now.0)
                    .execute(&mut tx)
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
                sql(u::UNIT_AGAIN)
                    .bind(plan)
                    .bind(task)
                    .bind(a.fence)
                    .bind(&lease.name)
                    .bind(cost.pico())
                    .bind(0i64)
                    .bind(now.0)
                    .execute(&mut tx)
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
                sql(u::AVOID_WORKER)
                    .bind(plan)
                    .bind(task)
                    .bind(a.fence)
                    .bind(&lease.name)
                    .bind(worker_of(&a.worker))
                    .bind(until.0)
                    .execute(&mut tx)
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
                sql(u::TASK_WAITING_REASON).bind(plan).bind(task).bind(note).execute(&mut tx).await?;
            }
        }
        tx.commit().await.or_store()?;
        self.fail_given_up(failed, now).await?;
        self.notify_work(plan).await;
        Ok(UnitFinished { evaluation_ready, given_up })
    }

    async fn units_of(&self, plan_id: &str, task_id: &str, task_fence: i64) -> Result<Vec<UnitRecord>, StoreError> {
        let rows = sql(u::UNITS_OF).bind(plan_id).bind(task_id).bind(task_fence).fetch_all(&self.pool).await?;
        rows.iter().map(u::unit).collect()
    }

    async fn attempt_settings(
        &self,
        plan_id: &str,
        task_id: &str,
        task_fence: i64,
    ) -> Result<Option<arbiter_core::settings::RunSettings>, StoreError> {
        let frozen = sql(u::ATTEMPT_SETTINGS)
            .bind(plan_id)
            .bind(task_id)
            .bind(task_fence)
            .fetch_optional(&self.pool)
            .await?
            .map(|row| row.try_get::<Option<String>, _>("settings"))
            .transpose()?;
        frozen
            .flatten()
            .map(|text| {
                serde_json::from_str(&text)
                    .map_err(|_| StoreError::Corrupt { column: "plan_attempts.settings", value: text })
            })
            .transpose()
    }

    async fn running_units(&self, plan_id: &str) -> Result<Vec<UnitRecord>, StoreError> {
        let rows = sql(u::RUNNING_UNITS).bind(plan_id).fetch_all(&self.pool).await?;
        rows.iter().map(u::unit).collect()
    }

    async fn sweep_expired_units(&self, now: Timestamp) -> Result<Vec<ReclaimedUnit>, StoreError> {
        let rows = sql(u::EXPIRED_UNITS).bind(now.0).fetch_all(&self.pool).await?;
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let units = rows.iter().map(held).collect::<Result<Vec<_>, _>>()?;
        let mut tx = self.write_tx().await?;
        let (taken, failed) = Self::take_back_tx(&mut tx, units, &u::TakeBack::Expired, now).await?;
        tx.commit().await.or_store()?;
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
            let rows = sql(u::UNITS_HELD_BY).bind(plan_id).bind(w).fetch_all(&self.pool).await?;
            for r in &rows {
                units.push(held(r)?);
            }
        }
        if units.is_empty() {
            return Ok(Vec::new());
        }
        let mut tx = self.write_tx().await?;
        let (taken, _) = Self::take_back_tx(&mut tx, units, &u::TakeBack::Released, now).await?;
        tx.commit().await.or_store()?;
        self.notify_work(plan_id).await;
        Ok(taken)
    }
}
