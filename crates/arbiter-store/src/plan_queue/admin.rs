//! The admin half of the plan queue ([`PlanAdmin`]): plans and their reads, budgets,
//! cancel, retry, reset and the integration branch record.

use crate::StoreError;
use crate::db::{OrStore, sql};
use crate::plan_rows as decode;
use crate::plan_sql as q;
use crate::plans::*;
use crate::store::{Backend, SqlStore};
use arbiter_core::budget::Budget;
use arbiter_core::money::Usd;
use arbiter_core::plan::PlanSpec;
use arbiter_core::plan::event::{PlanEntry, TaskEntry};
use arbiter_core::plan::state::{TaskEvent, TaskStatus};
use arbiter_core::time::Timestamp;
use std::collections::BTreeMap;

#[async_trait::async_trait]
impl<B: Backend> PlanAdmin for SqlStore<B> {
    async fn import_plan(&self, import: Import<'_>) -> Result<ImportReport, StoreError> {
        self.import(import).await
    }

    async fn create_plan(&self, header: &PlanSpec, now: Timestamp) -> Result<bool, StoreError> {
        let mut tx = self.write_tx().await?;
        if sql(q::SELECT_PLAN).bind(&header.id).fetch_optional(&mut tx).await?.is_some() {
            return Ok(false);
        }
        Self::insert_plan_tx(&mut tx, &header.header(), 0, now).await?;
        tx.commit().await.or_store()?;
        Ok(true)
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

    async fn plan_by_source(&self, source: &str) -> Result<Option<String>, StoreError> {
        let row = sql(q::PLAN_BY_SOURCE).bind(source).fetch_optional(&self.pool).await?;
        row.map(|r| r.try_get("id")).transpose()
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
        tx.commit().await.or_store()?;
        self.notify_work(plan_id).await;
        Ok(b)
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
        tx.commit().await.or_store()?;
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
        tx.commit().await.or_store()?;
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
        tx.commit().await.or_store()?;
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
        tx.commit().await.or_store()?;
        Ok(previous)
    }
}
