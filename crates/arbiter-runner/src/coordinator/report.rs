//! Reports: what a remote worker's lease holds, how a unit of work ended, and committing a
//! winner onto the integration branch.

use std::path::Path;

use arbiter_core::money::Usd;
use arbiter_core::plan::PlanSpec;
use arbiter_core::time::Timestamp;
use arbiter_store::StoreError;
use arbiter_store::plans::{AttemptResult, Lease, Retry};
use arbiter_store::units::{UnitKind, UnitLease, UnitOutcome, UnitResult, worker_of};

use super::{CoordinatorError, Held, LeaseRef, LocalCoordinator, Reported, Verdict};
use crate::integration::{self, IntegrationError};
use crate::plan_branch::{self, BranchError};

impl LocalCoordinator {
    /// What a remote worker's lease holds, from the store: the task and plan as they are,
    /// the leases as the worker names them (a stale one is refused when it is used).
    pub async fn held_of(&self, r: &LeaseRef) -> Result<Held, CoordinatorError> {
        let unknown = |what: String| CoordinatorError::Refused(what);
        let header = match self.header(&r.plan_id).await {
            Err(CoordinatorError::Store(StoreError::NoPlan { .. })) => {
                return Err(unknown(format!("no plan named '{}'", r.plan_id)));
            }
            other => other?,
        };
        if r.unit.is_none() {
            let key = (r.plan_id.clone(), r.task_id.clone(), r.fence);
            if let Some((_, lease, task)) = self.handed_out.lock().unwrap_or_else(|p| p.into_inner()).get(&key)
                && lease.worker == r.worker
            {
                return Ok(Held { lease: lease.clone(), unit: None, task: task.clone(), plan: header });
            }
        }
        let record = self
            .plans
            .task_record(&r.plan_id, &r.task_id)
            .await?
            .ok_or_else(|| unknown(format!("plan {} has no task '{}'", r.plan_id, r.task_id)))?;
        let lease = Lease {
            plan_id: r.plan_id.clone(),
            task_id: r.task_id.clone(),
            attempt: record.attempts,
            max_attempts: record.max_attempts,
            fence: r.fence,
            worker: r.worker.clone(),
            expires: record.lease_expires.unwrap_or_else(|| self.now()),
            reserved: record.reserved,
            retry_backoff_seconds: header.defaults.retry_backoff(),
        };
        let unit = match &r.unit {
            None => None,
            Some(u) => {
                let units = self.plans.units_of(&r.plan_id, &r.task_id, r.fence).await?;
                let found = units.into_iter().find(|x| x.name == u.name).ok_or_else(|| {
                    unknown(format!("attempt {} of task {} has no unit '{}'", r.fence, r.task_id, u.name))
                })?;
                Some(UnitLease {
                    attempt: lease.clone(),
                    name: found.name,
                    kind: found.kind,
                    fence: u.fence,
                    expires: found.lease_expires.unwrap_or_else(|| self.now()),
                    run_id: found.run_id,
                    base: found.base,
                })
            }
        };
        Ok(Held { lease, unit, task: record.spec, plan: header })
    }

    /// Reports how the work of `held` ended.
    pub async fn report_held(&self, held: &Held, verdict: Verdict, cost: Usd) -> Result<Reported, CoordinatorError> {
        let lease = &held.lease;
        if held.unit.is_none() {
            let key = (lease.plan_id.clone(), lease.task_id.clone(), lease.fence);
            self.handed_out.lock().unwrap_or_else(|p| p.into_inner()).remove(&key);
        }
        match (verdict, &held.unit) {
            (Verdict::Released { reason }, Some(unit)) => {
                self.finish_unit(unit, UnitOutcome::Released { reason }, cost).await
            }
            (Verdict::Released { reason }, None) => {
                Ok(match self.finish(lease, AttemptResult::Released { reason }, cost).await? {
                    Finish::Recorded(_) => Reported::Released,
                    Finish::Stale => Reported::Stale,
                })
            }
            (Verdict::CandidateDone { status }, Some(unit)) => {
                self.finish_unit(unit, UnitOutcome::Done { result: UnitResult::Status(status) }, cost).await
            }
            // A candidate unit that could not run its candidate at all: the evaluation says
            // why it has no result.
            (Verdict::Failed { reason, .. }, Some(unit)) if unit.kind == UnitKind::Candidate => {
                self.finish_unit(unit, UnitOutcome::Done { result: UnitResult::Error(reason) }, cost).await
            }
            (Verdict::Refused { reason }, Some(unit)) => {
                self.finish_unit(unit, UnitOutcome::Refused { reason }, cost).await
            }
            (Verdict::Refused { reason }, None) => {
                let reason = format!("worker {} could not run it: {reason}", worker_of(&lease.worker));
                let result = AttemptResult::Failed { reason: reason.clone(), retry: Retry::AfterBackoff, run_id: None };
                Ok(match self.finish(lease, result, cost).await? {
                    Finish::Recorded(retry_at) => Reported::Failed { reason, retry_at },
                    Finish::Stale => Reported::Stale,
                })
            }
            (Verdict::CandidateDone { .. }, None) => {
                Err(CoordinatorError::Refused("a candidate's result was reported for a whole tournament".into()))
            }
            (Verdict::Failed { reason, retry, run_id }, _) => {
                if held.unit.is_some() && !self.renew(lease, held.unit.as_ref()).await? {
                    // The evaluation was taken over: its report would end the newer one's
                    // attempt.
                    return self.refuse_stale(held, cost).await;
                }
                let result = AttemptResult::Failed { reason: reason.clone(), retry, run_id: run_id.clone() };
                Ok(match self.finish(lease, result, cost).await? {
                    Finish::Recorded(retry_at) => {
                        if let Some(run_id) = &run_id {
                            self.analyse_failure(held, run_id, &reason).await;
                        }
                        if retry_at.is_none() {
                            self.complete_if_settled(&held.plan).await;
                        }
                        Reported::Failed { reason, retry_at }
                    }
                    Finish::Stale => Reported::Stale,
                })
            }
            (Verdict::Won { run_id, winner, patch }, _) => {
                self.commit_winner(held, &run_id, &winner, &patch, cost).await
            }
        }
    }
}

impl LocalCoordinator {
    /// A report under a lease that was lost: the store refuses it (and records the
    /// refusal), charging only its cost.
    async fn refuse_stale(&self, held: &Held, cost: Usd) -> Result<Reported, CoordinatorError> {
        let lost = "its lease was lost".to_string();
        match &held.unit {
            Some(unit) => self.finish_unit(unit, UnitOutcome::Done { result: UnitResult::Error(lost) }, cost).await,
            None => {
                let result = AttemptResult::Failed { reason: lost, retry: Retry::AfterBackoff, run_id: None };
                self.finish(&held.lease, result, cost).await?;
                Ok(Reported::Stale)
            }
        }
    }

    /// Commits a winner onto the integration branch and reports the task done, under a
    /// lease renewed just before: no other attempt of the task can start meanwhile.
    async fn commit_winner(
        &self,
        held: &Held,
        run_id: &str,
        winner: &str,
        patch: &Path,
        cost: Usd,
    ) -> Result<Reported, CoordinatorError> {
        let lease = &held.lease;
        let header = &held.plan;
        let task = &held.task;
        if !self.renew(lease, held.unit.as_ref()).await? {
            return self.refuse_stale(held, cost).await;
        }
        let repo = self.repo(header).await?;
        let plan_base = self.open_plan(&header.id).await?;
        let branch = &header.integration_branch;
        if let Some(commit) = integration::find_task_commit(&repo, branch, &plan_base, &header.id, &task.id).await? {
            let result = AttemptResult::Succeeded { run_id: Some(run_id.to_string()), commit: Some(commit.clone()) };
            return Ok(match self.finish(lease, result, cost).await? {
                Finish::Recorded(_) => {
                    self.push_after(header, repo, &task.id);
                    self.complete_if_settled(header).await;
                    Reported::Done { commit, recovered: true }
                }
                Finish::Stale => Reported::Stale,
            });
        }
        if let Some(worktree) = plan_branch::checked_out_in(&repo, branch).await? {
            let reason = format!("its integration branch {branch} was checked out in {worktree}");
            self.finish(lease, AttemptResult::Released { reason }, cost).await?;
            return Err(checked_out(header, worktree));
        }
        let workspace = self.repositories.workspace_for(header).await?;
        // A task whose settings cannot be read any more is held to the default limits.
        let limits = self.settings.of(&workspace, header, task).map(|s| s.limits.value).unwrap_or_default();
        let message = integration::message(&task.title, &header.id, &task.id, run_id, winner);
        let to = integration::Destination { plan: &header.id, task: &task.id, branch };
        // The patch came from a worker's upload: checked here, on the tip it goes on.
        let committed = match integration::check_at_tip(&repo, branch, patch, &limits).await {
            Ok(checked) => integration::commit_onto(&repo, &to, &checked, &message).await,
            Err(e) => Err(e),
        };
        let (result, reported) = match committed {
            Ok(c) => (
                AttemptResult::Succeeded { run_id: Some(run_id.to_string()), commit: Some(c.commit.clone()) },
                Reported::Done { commit: c.commit, recovered: false },
            ),
            Err(
                e @ (IntegrationError::Conflict { .. }
                | IntegrationError::Refused { .. }
                | IntegrationError::Contended { .. }),
            ) => {
                let next = if lease.attempt < lease.max_attempts {
                    "; retrying from the new tip"
                } else {
                    "; no attempt is left"
                };
                let reason = format!("{winner} of run {run_id} won, but {e}{next}");
                let result =
                    AttemptResult::Failed { reason: reason.clone(), retry: Retry::Now, run_id: Some(run_id.into()) };
                (result, Reported::Failed { reason, retry_at: None })
            }
            Err(IntegrationError::Git(e)) => {
                let reason = format!("{winner} of run {run_id} won, but committing it failed: {e}");
                let result = AttemptResult::Failed {
                    reason: reason.clone(),
                    retry: Retry::AfterBackoff,
                    run_id: Some(run_id.into()),
                };
                (result, Reported::Failed { reason, retry_at: None })
            }
        };
        Ok(match self.finish(lease, result, cost).await? {
            Finish::Recorded(retry_at) => match reported {
                Reported::Failed { reason, .. } => Reported::Failed { reason, retry_at },
                done => {
                    self.push_after(header, repo, &task.id);
                    self.complete_if_settled(header).await;
                    done
                }
            },
            Finish::Stale => Reported::Stale,
        })
    }

    /// Records how an attempt ended; a stale lease records only the cost.
    pub(super) async fn finish(
        &self,
        lease: &Lease,
        result: AttemptResult,
        cost: Usd,
    ) -> Result<Finish, CoordinatorError> {
        match self.plans.finish(lease, result, cost, self.now()).await {
            Ok(finished) => Ok(Finish::Recorded(finished.not_before)),
            Err(StoreError::StaleLease { .. }) => Ok(Finish::Stale),
            Err(e) => Err(e.into()),
        }
    }

    /// Records how a unit ended; a stale lease records only the cost.
    async fn finish_unit(
        &self,
        unit: &UnitLease,
        outcome: UnitOutcome,
        cost: Usd,
    ) -> Result<Reported, CoordinatorError> {
        let (released, refused) =
            (matches!(outcome, UnitOutcome::Released { .. }), matches!(outcome, UnitOutcome::Refused { .. }));
        let finished = self.plans.finish_unit(unit, outcome, cost, self.now()).await;
        self.units_changed(&unit.attempt.plan_id);
        match finished {
            Ok(_) if released => Ok(Reported::Released),
            Ok(f) if refused => Ok(Reported::Refused { given_up: f.given_up }),
            Ok(f) => Ok(Reported::UnitDone { evaluation_ready: f.evaluation_ready }),
            Err(StoreError::StaleUnit { .. }) => Ok(Reported::Stale),
            Err(e) => Err(e.into()),
        }
    }
}

/// The plan cannot go on: its integration branch was checked out in `worktree`.
pub(super) fn checked_out(header: &PlanSpec, worktree: String) -> CoordinatorError {
    BranchError::CheckedOut {
        plan: header.id.clone(),
        branch: header.integration_branch.clone(),
        remedy: format!(
            "the plan run stopped. Switch that worktree to another branch (`git -C {worktree} switch OTHER`) and run the plan again"
        ),
        worktree,
        doing: "commits each task's winner onto it",
    }
    .into()
}

/// What the store did with a report.
pub(super) enum Finish {
    Recorded(Option<Timestamp>),
    Stale,
}
