//! The worker half of the plan queue ([`PlanWork`]): claims, heartbeats, reports, charges,
//! sweeps and wake-ups.

use crate::StoreError;
use crate::db::{OrStore, sql};
use crate::plan_rows as decode;
use crate::plan_sql as q;
use crate::plans::*;
use crate::store::{Backend, SqlStore};
use arbiter_core::money::Usd;
use arbiter_core::plan::event::{PlanEntry, TaskEntry};
use arbiter_core::plan::state::TaskStatus;
use arbiter_core::queue::rules::expiry;
use arbiter_core::time::Timestamp;
use std::collections::BTreeMap;
use std::time::Duration;

use super::{Ending, Stale};

#[async_trait::async_trait]
impl<B: Backend> PlanWork for SqlStore<B> {
    async fn plan_record(&self, id: &str) -> Result<Option<PlanRecord>, StoreError> {
        let row = sql(q::SELECT_PLAN).bind(id).fetch_optional(&self.pool).await?;
        row.as_ref().map(decode::plan).transpose()
    }

    async fn task_record(&self, plan_id: &str, task_id: &str) -> Result<Option<TaskRecord>, StoreError> {
        let row = sql(q::SELECT_TASK).bind(plan_id).bind(task_id).fetch_optional(&self.pool).await?;
        row.as_ref().map(decode::task).transpose()
    }

    async fn claimable_plans(&self) -> Result<Vec<String>, StoreError> {
        let rows = sql(q::CLAIMABLE_PLANS).fetch_all(&self.pool).await?;
        rows.iter().map(|r| r.try_get("id")).collect()
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
        tx.commit().await.or_store()?;
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
                tx.commit().await.or_store()?;
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
                tx.commit().await.or_store()?;
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
        tx.commit().await.or_store()?;
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
            tx.commit().await.or_store()?;
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
        tx.commit().await.or_store()?;
        if !reclaimed.is_empty() {
            self.notify_work(plan_id).await;
        }
        Ok(reclaimed)
    }

    async fn note_event(&self, plan_id: &str, entry: PlanEntry, now: Timestamp) -> Result<(), StoreError> {
        let mut tx = self.write_tx().await?;
        Self::event_tx(&mut tx, plan_id, None, None, entry, now).await?;
        tx.commit().await.or_store()?;
        Ok(())
    }

    async fn wait_for_work(&self, _plan_id: &str, timeout: Duration) -> Wake {
        self.wait_notified(timeout).await
    }

    async fn work_signal(&self) -> std::sync::Arc<tokio::sync::Notify> {
        self.work_handle().await
    }
}
