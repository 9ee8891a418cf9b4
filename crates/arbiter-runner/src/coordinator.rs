//! The worker's side of the plan queue: the [`Coordinator`] port, and its implementation
//! over a store and repositories on this machine ([`LocalCoordinator`]).
//!
//! A worker claims an [`Assignment`] (a task of a plan, with its lease and the commit its
//! tournament starts from), renews the lease while the tournament runs, charges what it
//! spends as it spends it, and reports how it ended ([`Verdict`]). The coordinator owns
//! everything else: the integration branch (it commits a winner onto it, with the
//! compare-and-swap of [`crate::integration`]), the recognition of a winner committed just
//! before its worker died, and who may move the branch. So one worker loop
//! ([`crate::worker`]) serves a local `plan run` (this module) and a remote
//! `arbiter worker run` (an HTTP coordinator speaking to a control plane that runs this
//! very code).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arbiter_core::Clock;
use arbiter_core::money::Usd;
use arbiter_core::plan::{PlanSpec, TaskSpec};
use arbiter_core::settings::{ApplyMode, RunSettings};
use arbiter_core::time::Timestamp;
use arbiter_store::StoreError;
use arbiter_store::plans::{AttemptResult, ClaimOutcome, Lease, PlanStore, Retry};
use tokio::sync::mpsc::UnboundedSender;

use crate::git::{Git, GitError};
use crate::integration::{self, IntegrationError};
use crate::plan_branch::{self, BranchError};
use crate::worker::Progress;
use crate::workspace::Workspace;

/// One task to run as a tournament, under a lease.
#[derive(Clone, Debug, PartialEq)]
pub struct Assignment {
    pub lease: Lease,
    pub task: TaskSpec,
    /// The plan's header (its defaults, repository and integration branch).
    pub plan: PlanSpec,
    /// The commit the tournament starts from: the integration branch's tip when claimed.
    pub base: String,
    /// The task's run settings (the plan's defaults, the task's own values, the
    /// repository's configuration; the winner is not applied anywhere; the spending capped
    /// at what the claim reserved).
    pub settings: RunSettings,
}

/// Builds the run settings of one task (plan defaults, the task's own values, the
/// repository's configuration); an error names what is wrong.
pub type SettingsFor = dyn Fn(&PlanSpec, &TaskSpec) -> Result<RunSettings, String> + Send + Sync;

/// What a claim got.
#[derive(Clone, Debug, PartialEq)]
pub enum Claim {
    Assigned(Box<Assignment>),
    /// Nothing is ready now; ask again.
    Idle,
    /// Nothing will become ready by waiting: every task is finished (or the plan is
    /// cancelled, or its budget is spent).
    Finished,
}

/// How an attempt ended, as the worker reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The tournament of run `run_id` selected `winner`, whose patch is the file `patch`:
    /// the coordinator commits it onto the integration branch.
    Won {
        run_id: String,
        winner: String,
        patch: PathBuf,
    },
    Failed {
        reason: String,
        retry: Retry,
        run_id: Option<String>,
    },
    /// Given back without a verdict (interrupted, shutting down): the attempt does not count.
    Released {
        reason: String,
    },
}

/// What a report did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reported {
    /// The task is done; its winner is `commit` on the integration branch (`recovered`: a
    /// worker had committed it already).
    Done {
        commit: String,
        recovered: bool,
    },
    /// The attempt failed (or its winner could not be committed): retried from `retry_at`
    /// when attempts are left.
    Failed {
        reason: String,
        retry_at: Option<Timestamp>,
    },
    Released,
    /// The lease had been taken away: nothing was recorded but the cost.
    Stale,
}

/// A coordinator failure that stops the worker.
#[derive(Debug, thiserror::Error)]
pub enum CoordinatorError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Git(#[from] GitError),
    /// The plan's integration branch may not be used (or no longer): the user can fix it.
    #[error(transparent)]
    Branch(#[from] BranchError),
    /// The control plane refused the worker, or answered other than the protocol says.
    #[error("{0}")]
    Refused(String),
    /// The control plane could not be reached (after retrying).
    #[error("{0}")]
    Unreachable(String),
}

impl CoordinatorError {
    /// Whether the user can fix it (exit 2) rather than the environment.
    pub fn is_usage(&self) -> bool {
        matches!(self, CoordinatorError::Branch(b) if b.is_usage()) || matches!(self, CoordinatorError::Refused(_))
    }
}

/// The worker's side of the plan queue.
#[async_trait::async_trait]
pub trait Coordinator: Send + Sync {
    /// How long a lease lasts without a heartbeat.
    fn lease_ttl(&self) -> Duration;

    /// Claims the best ready task of `plan` (or of any plan) for `worker`; when none is
    /// ready, waits up to `wait` for one before answering [`Claim::Idle`].
    async fn claim(&self, worker: &str, plan: Option<&str>, wait: Duration) -> Result<Claim, CoordinatorError>;

    /// Renews the lease; `false` when it was taken away (the attempt must stop).
    async fn heartbeat(&self, lease: &Lease) -> Result<bool, CoordinatorError>;

    /// Charges what the attempt just spent to the plan.
    async fn charge(&self, lease: &Lease, amount: Usd) -> Result<(), CoordinatorError>;

    /// The repository the tournament runs in, holding the assignment's base commit.
    async fn checkout(&self, assignment: &Assignment) -> Result<Workspace, CoordinatorError>;

    /// Reports how the attempt ended, with what it spent that was not charged yet, and its
    /// run directory (which the coordinator keeps as the attempt's audit trail).
    async fn report(
        &self,
        assignment: &Assignment,
        verdict: Verdict,
        cost: Usd,
        run_dir: Option<&Path>,
    ) -> Result<Reported, CoordinatorError>;
}

/// Where the tasks of a plan run: its repository on this machine.
pub trait PlanRepositories: Send + Sync {
    fn workspace_for(&self, plan: &PlanSpec) -> Result<Workspace, CoordinatorError>;
}

/// Every plan runs in one repository (a local `plan run`).
pub struct OneRepository(pub Workspace);

impl PlanRepositories for OneRepository {
    fn workspace_for(&self, _plan: &PlanSpec) -> Result<Workspace, CoordinatorError> {
        Ok(self.0.clone())
    }
}

/// The plan queue in a store on this machine, and the repositories whose integration
/// branches the plans commit onto. The control plane serves remote workers with it too.
pub struct LocalCoordinator {
    pub plans: Arc<dyn PlanStore>,
    pub clock: Arc<dyn Clock>,
    pub repositories: Arc<dyn PlanRepositories>,
    pub settings_for: Arc<SettingsFor>,
    pub lease: Duration,
    /// The longest a claim waits before looking again (the safety net under wake-ups).
    pub poll: Duration,
    pub progress: Option<UnboundedSender<Progress>>,
    /// Where each plan's own commits begin on its integration branch, once its branch is
    /// known to be the plan's.
    bases: Mutex<HashMap<String, String>>,
}

impl LocalCoordinator {
    pub fn new(
        plans: Arc<dyn PlanStore>,
        clock: Arc<dyn Clock>,
        repositories: Arc<dyn PlanRepositories>,
        settings_for: Arc<SettingsFor>,
        lease: Duration,
        poll: Duration,
        progress: Option<UnboundedSender<Progress>>,
    ) -> Self {
        let bases = Mutex::new(HashMap::new());
        LocalCoordinator { plans, clock, repositories, settings_for, lease, poll, progress, bases }
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    fn tell(&self, p: Progress) {
        if let Some(tx) = &self.progress {
            let _ = tx.send(p);
        }
    }

    fn repo(&self, plan: &PlanSpec) -> Result<Git, CoordinatorError> {
        Ok(Git::new(self.repositories.workspace_for(plan)?.repo_root().to_path_buf()))
    }

    /// Makes sure the plan's integration branch is the plan's to move (creating it when it
    /// does not exist) and returns where the plan's own commits on it begin.
    pub async fn open_plan(&self, plan_id: &str) -> Result<String, CoordinatorError> {
        if let Some(base) = self.bases.lock().unwrap_or_else(|p| p.into_inner()).get(plan_id) {
            return Ok(base.clone());
        }
        let view = self.plans.plan(plan_id).await?.ok_or_else(|| StoreError::NoPlan { id: plan_id.to_string() })?;
        let repo = self.repo(&view.plan.header)?;
        let owned = plan_branch::ensure_for_run(&repo, &*self.plans, &view.plan, self.now()).await?;
        self.bases.lock().unwrap_or_else(|p| p.into_inner()).insert(plan_id.to_string(), owned.base.clone());
        Ok(owned.base)
    }

    /// The plans a worker without a plan of its own claims from, in a stable order.
    async fn open_plans(&self) -> Result<Vec<String>, CoordinatorError> {
        let mut ids: Vec<String> =
            self.plans.plans().await?.into_iter().filter(|p| !p.cancelled).map(|p| p.id).collect();
        ids.sort();
        Ok(ids)
    }

    /// One claim on one plan: an assignment, or (whether more may come, when the next
    /// retry is ready).
    async fn claim_on(
        &self,
        plan: &str,
        worker: &str,
    ) -> Result<Result<Assignment, (bool, Option<Timestamp>)>, CoordinatorError> {
        loop {
            match self.plans.claim(plan, worker, self.lease, self.now()).await? {
                ClaimOutcome::Claimed(c) => {
                    let view =
                        self.plans.plan(plan).await?.ok_or_else(|| StoreError::NoPlan { id: plan.to_string() })?;
                    let header = view.plan.header.clone();
                    let plan_base = match self.open_plan(plan).await {
                        Ok(base) => base,
                        Err(e) => {
                            let reason = format!("its integration branch cannot be used: {e}");
                            self.give_back(&c.lease, reason).await;
                            return Err(e);
                        }
                    };
                    let repo = self.repo(&header)?;
                    if let Some(worktree) = plan_branch::checked_out_in(&repo, &header.integration_branch).await? {
                        let branch = header.integration_branch.clone();
                        self.give_back(
                            &c.lease,
                            format!("its integration branch {branch} is checked out in {worktree}"),
                        )
                        .await;
                        return Err(checked_out(&header, worktree));
                    }
                    let base = integration::tip(&repo, &header.integration_branch).await?;
                    // A winner committed just before its worker died is recognised and
                    // reported done, never run twice.
                    if let Some(commit) = integration::find_task_commit(
                        &repo,
                        &header.integration_branch,
                        &plan_base,
                        &header.id,
                        &c.task.id,
                    )
                    .await?
                    {
                        let result = AttemptResult::Succeeded { run_id: None, commit: Some(commit.clone()) };
                        match self.plans.finish(&c.lease, result, Usd::ZERO, self.now()).await {
                            Ok(_) | Err(StoreError::StaleLease { .. }) => {}
                            Err(e) => return Err(e.into()),
                        }
                        self.tell(Progress::Recovered { task: c.task.id.clone(), commit });
                        continue;
                    }
                    let settings = match (self.settings_for)(&header, &c.task) {
                        Ok(s) => capped(s, &c.lease),
                        Err(why) => {
                            let reason = format!("its run settings are invalid: {why}");
                            let result =
                                AttemptResult::Failed { reason: reason.clone(), retry: Retry::Never, run_id: None };
                            if let Finish::Recorded(retry_at) = self.finish(&c.lease, result, Usd::ZERO).await? {
                                self.tell(Progress::Failed { task: c.task.id.clone(), reason, retry_at });
                            }
                            continue;
                        }
                    };
                    return Ok(Ok(Assignment { lease: c.lease, task: c.task, plan: header, base, settings }));
                }
                ClaimOutcome::Idle(idle) => return Ok(Err((!idle.finished(), idle.next_ready_at))),
            }
        }
    }

    /// Gives a claimed task back without counting the attempt.
    async fn give_back(&self, lease: &Lease, reason: String) {
        let _ = self.plans.finish(lease, AttemptResult::Released { reason }, Usd::ZERO, self.now()).await;
    }

    /// Records how an attempt ended; a stale lease records only the cost.
    async fn finish(&self, lease: &Lease, result: AttemptResult, cost: Usd) -> Result<Finish, CoordinatorError> {
        match self.plans.finish(lease, result, cost, self.now()).await {
            Ok(finished) => Ok(Finish::Recorded(finished.not_before)),
            Err(StoreError::StaleLease { .. }) => Ok(Finish::Stale),
            Err(e) => Err(e.into()),
        }
    }
}

/// A task's settings for a plan attempt: the winner goes onto the integration branch, not
/// into any working tree; the attempt may spend what the claim reserved from the plan's
/// budget, no more (and no more than its own configuration allows).
fn capped(mut settings: RunSettings, lease: &Lease) -> RunSettings {
    settings.apply.value = ApplyMode::None;
    if lease.reserved > Usd::ZERO {
        let own = settings.budget_usd.value;
        settings.budget_usd.value = Some(own.map_or(lease.reserved, |b| b.min(lease.reserved)));
    }
    settings
}

/// The plan cannot go on: its integration branch was checked out in `worktree`.
fn checked_out(header: &PlanSpec, worktree: String) -> CoordinatorError {
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
enum Finish {
    Recorded(Option<Timestamp>),
    Stale,
}

#[async_trait::async_trait]
impl Coordinator for LocalCoordinator {
    fn lease_ttl(&self) -> Duration {
        self.lease
    }

    async fn claim(&self, worker: &str, plan: Option<&str>, wait: Duration) -> Result<Claim, CoordinatorError> {
        let plans = match plan {
            Some(p) => vec![p.to_string()],
            None => self.open_plans().await?,
        };
        let mut more = false;
        let mut next: Option<Timestamp> = None;
        for p in &plans {
            match self.claim_on(p, worker).await? {
                Ok(assignment) => return Ok(Claim::Assigned(Box::new(assignment))),
                Err((more_here, next_here)) => {
                    more |= more_here;
                    next = match (next, next_here) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                }
            }
        }
        if !more && plan.is_some() {
            return Ok(Claim::Finished);
        }
        // Wait for a wake-up (a report, an import) or the next retry, whichever comes
        // first, but no longer than asked.
        let now = self.now();
        let until_ready = next.filter(|at| *at > now).map(|at| Duration::from_micros((at.0 - now.0) as u64));
        let wait = until_ready.unwrap_or(wait).min(wait).min(self.poll).max(Duration::from_millis(10));
        self.plans.wait_for_work(plan.unwrap_or_default(), wait).await;
        Ok(Claim::Idle)
    }

    async fn heartbeat(&self, lease: &Lease) -> Result<bool, CoordinatorError> {
        Ok(self.plans.heartbeat(lease, self.lease, self.now()).await?.is_some())
    }

    async fn charge(&self, lease: &Lease, amount: Usd) -> Result<(), CoordinatorError> {
        self.plans.charge(&lease.plan_id, Some((lease.task_id.as_str(), lease.fence)), amount, self.now()).await?;
        Ok(())
    }

    async fn checkout(&self, assignment: &Assignment) -> Result<Workspace, CoordinatorError> {
        // The plan's repository is on this machine: its objects hold every tip.
        self.repositories.workspace_for(&assignment.plan)
    }

    async fn report(
        &self,
        assignment: &Assignment,
        verdict: Verdict,
        cost: Usd,
        _run_dir: Option<&Path>,
    ) -> Result<Reported, CoordinatorError> {
        let lease = &assignment.lease;
        match verdict {
            Verdict::Released { reason } => {
                Ok(match self.finish(lease, AttemptResult::Released { reason }, cost).await? {
                    Finish::Recorded(_) => Reported::Released,
                    Finish::Stale => Reported::Stale,
                })
            }
            Verdict::Failed { reason, retry, run_id } => {
                let result = AttemptResult::Failed { reason: reason.clone(), retry, run_id };
                Ok(match self.finish(lease, result, cost).await? {
                    Finish::Recorded(retry_at) => Reported::Failed { reason, retry_at },
                    Finish::Stale => Reported::Stale,
                })
            }
            Verdict::Won { run_id, winner, patch } => {
                self.commit_winner(assignment, &run_id, &winner, &patch, cost).await
            }
        }
    }
}

impl LocalCoordinator {
    /// Commits a winner onto the integration branch and reports the task done, under a
    /// lease renewed just before: no other attempt of the task can start meanwhile.
    async fn commit_winner(
        &self,
        assignment: &Assignment,
        run_id: &str,
        winner: &str,
        patch: &Path,
        cost: Usd,
    ) -> Result<Reported, CoordinatorError> {
        let lease = &assignment.lease;
        let header = &assignment.plan;
        let task = &assignment.task;
        if !self.heartbeat(lease).await? {
            let failed = AttemptResult::Failed {
                reason: "its lease was lost".into(),
                retry: Retry::AfterBackoff,
                run_id: Some(run_id.into()),
            };
            self.finish(lease, failed, cost).await?;
            return Ok(Reported::Stale);
        }
        let repo = self.repo(header)?;
        let plan_base = self.open_plan(&header.id).await?;
        let branch = &header.integration_branch;
        if let Some(commit) = integration::find_task_commit(&repo, branch, &plan_base, &header.id, &task.id).await? {
            let result = AttemptResult::Succeeded { run_id: Some(run_id.to_string()), commit: Some(commit.clone()) };
            return Ok(match self.finish(lease, result, cost).await? {
                Finish::Recorded(_) => Reported::Done { commit, recovered: true },
                Finish::Stale => Reported::Stale,
            });
        }
        if let Some(worktree) = plan_branch::checked_out_in(&repo, branch).await? {
            let reason = format!("its integration branch {branch} was checked out in {worktree}");
            self.finish(lease, AttemptResult::Released { reason }, cost).await?;
            return Err(checked_out(header, worktree));
        }
        let workspace = self.repositories.workspace_for(header)?;
        let scratch = workspace.scratch_dir();
        std::fs::create_dir_all(&scratch).map_err(GitError::Io)?;
        let index = scratch.join(format!("index-plan-{}-{}-{}", header.id, task.id.replace('/', "_"), lease.fence));
        let message = integration::message(&task.title, &header.id, &task.id, run_id, winner);
        let to = integration::Destination { plan: &header.id, task: &task.id, branch };
        let (result, reported) = match integration::commit_onto(&repo, &to, patch, &message, &index).await {
            Ok(c) => (
                AttemptResult::Succeeded { run_id: Some(run_id.to_string()), commit: Some(c.commit.clone()) },
                Reported::Done { commit: c.commit, recovered: false },
            ),
            Err(e @ (IntegrationError::Conflict { .. } | IntegrationError::Contended { .. })) => {
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
                other => other,
            },
            Finish::Stale => Reported::Stale,
        })
    }
}
