//! What the coordinator keeps of each plan between claims and reports: where its own commits
//! begin on its integration branch, its header, and whether its tasks name their runners.

use std::time::Duration;

use arbiter_core::plan::PlanSpec;
use arbiter_store::StoreError;

use super::{CoordinatorError, LocalCoordinator};
use crate::plan_branch;

/// How long a plan's header is used before it is read again.
const HEADER_TTL: Duration = Duration::from_secs(1);

impl LocalCoordinator {
    /// Makes sure the plan's integration branch is the plan's to move (creating it when it
    /// does not exist) and returns where the plan's own commits on it begin.
    pub async fn open_plan(&self, plan_id: &str) -> Result<String, CoordinatorError> {
        if let Some(base) = self.bases.lock().unwrap_or_else(|p| p.into_inner()).get(plan_id) {
            return Ok(base.clone());
        }
        let record =
            self.plans.plan_record(plan_id).await?.ok_or_else(|| StoreError::NoPlan { id: plan_id.to_string() })?;
        let repo = self.repo(&record.header).await?;
        let owned = plan_branch::ensure_for_run(&repo, &*self.plans, &record, self.now()).await?;
        self.bases.lock().unwrap_or_else(|p| p.into_inner()).insert(plan_id.to_string(), owned.base.clone());
        Ok(owned.base)
    }

    /// The plan's header, read from the store at most once per [`HEADER_TTL`]: a claim and a
    /// report each need it several times, and it changes only when the plan is re-imported
    /// (what the store guards — budgets, cancellation, leases — is never read from here).
    pub(super) async fn header(&self, plan_id: &str) -> Result<PlanSpec, CoordinatorError> {
        if let Some((read, header)) = self.headers.lock().unwrap_or_else(|p| p.into_inner()).get(plan_id)
            && read.elapsed() < HEADER_TTL
        {
            return Ok(header.clone());
        }
        let record =
            self.plans.plan_record(plan_id).await?.ok_or_else(|| StoreError::NoPlan { id: plan_id.to_string() })?;
        let mut headers = self.headers.lock().unwrap_or_else(|p| p.into_inner());
        headers.retain(|_, (read, _)| read.elapsed() < HEADER_TTL);
        headers.insert(plan_id.to_string(), (std::time::Instant::now(), record.header.clone()));
        Ok(record.header)
    }

    /// Whether the plan's tasks name their own runners (read at most once per
    /// [`HEADER_TTL`]; a task claimed on an answer that went stale is given back, see
    /// [`LocalCoordinator::start_attempt`]).
    pub(super) async fn tasks_choose_runners(&self, plan_id: &str) -> Result<bool, CoordinatorError> {
        if let Some((read, chooses)) = self.choosers.lock().unwrap_or_else(|p| p.into_inner()).get(plan_id)
            && read.elapsed() < HEADER_TTL
        {
            return Ok(*chooses);
        }
        let chooses = self.plans.tasks_choose_runners(plan_id).await?;
        let mut choosers = self.choosers.lock().unwrap_or_else(|p| p.into_inner());
        choosers.retain(|_, (read, _)| read.elapsed() < HEADER_TTL);
        choosers.insert(plan_id.to_string(), (std::time::Instant::now(), chooses));
        Ok(chooses)
    }
}
