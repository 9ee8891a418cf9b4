//! The worker's side of the plan queue: the [`Coordinator`] port, and its implementation
//! over a store and repositories on this machine ([`LocalCoordinator`]).
//!
//! A worker claims an [`Assignment`] — a unit of work ([`Work`]): a task's whole tournament,
//! or, for a tournament that spreads over workers, one of its candidates or its evaluation —
//! with its lease and the commit it starts from, renews the lease while it works, charges
//! what it spends as it spends it, and reports how it ended ([`Verdict`]). A worker claims
//! only what its [`Capabilities`] can run. The coordinator owns everything else: starting a
//! task's attempt (and spreading it over units), the integration branch (it commits a
//! winner onto it, with the compare-and-swap of [`crate::integration`]), the recognition of
//! a winner committed just before its worker died, and who may move the branch. So one
//! worker loop ([`crate::worker`]) serves a local `plan run` (this module) and a remote
//! `arbiter worker run` (an HTTP coordinator speaking to a control plane that runs this
//! very code).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use arbiter_core::ids::{CandidateId, RunId};
use arbiter_core::money::Usd;
use arbiter_core::plan::{PlanSpec, TaskSpec};
use arbiter_core::settings::RunSettings;
use arbiter_core::status::CandidateStatus;
use arbiter_core::time::Timestamp;
use arbiter_store::StoreError;
use arbiter_store::plans::{Lease, Retry};
pub use arbiter_store::units::Capabilities;
use arbiter_store::units::UnitLease;
use serde::{Deserialize, Serialize};

use crate::git::GitError;
use crate::plan_branch::BranchError;
use crate::workspace::Workspace;

mod analysis;
mod claim;
mod local;
mod plans;
mod push;
mod report;

pub use local::LocalCoordinator;

/// What an assignment asks of its worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Work {
    /// The task's whole tournament (one that does not spread: one candidate, or an
    /// escalating strategy).
    Tournament,
    /// One candidate of a spread tournament, recorded into run `run_id`.
    Candidate { index: usize, run_id: RunId },
    /// The evaluation of a spread tournament whose candidates are done; `lost` names the
    /// candidates whose unit left no result, and why.
    Evaluation { run_id: RunId, lost: BTreeMap<usize, String> },
}

impl Work {
    /// `tournament`, `c02`, `evaluation`.
    pub fn name(&self) -> String {
        match self {
            Work::Tournament => "tournament".into(),
            Work::Candidate { index, .. } => CandidateId::from_index(*index).to_string(),
            Work::Evaluation { .. } => "evaluation".into(),
        }
    }
}

/// One unit of work, under a lease.
#[derive(Clone, Debug, PartialEq)]
pub struct Assignment {
    /// The lease of the task's attempt (with which its end is reported).
    pub lease: Lease,
    /// The unit's own lease, for a candidate or an evaluation.
    pub unit: Option<UnitLease>,
    pub work: Work,
    pub task: TaskSpec,
    /// The plan's header (its defaults, repository and integration branch).
    pub plan: PlanSpec,
    /// The commit the work starts from: the integration branch's tip when the attempt began.
    pub base: String,
    /// The task's run settings (the plan's defaults, the task's own values, the
    /// repository's configuration; the winner is not applied anywhere; the spending capped
    /// at what the attempt reserved).
    pub settings: RunSettings,
}

impl Assignment {
    /// What the assignment holds, for a heartbeat, a charge or its report.
    pub fn held(&self) -> Held {
        Held { lease: self.lease.clone(), unit: self.unit.clone(), task: self.task.clone(), plan: self.plan.clone() }
    }

    /// How a remote worker names what it holds.
    pub fn lease_ref(&self) -> LeaseRef {
        LeaseRef {
            plan_id: self.lease.plan_id.clone(),
            task_id: self.lease.task_id.clone(),
            fence: self.lease.fence,
            worker: self.lease.worker.clone(),
            unit: self.unit.as_ref().map(|u| UnitRef { name: u.name.clone(), fence: u.fence }),
        }
    }
}

/// The leases a unit of work holds, and the task and plan they are of: what a heartbeat, a
/// charge or a report concerns.
#[derive(Clone, Debug, PartialEq)]
pub struct Held {
    pub lease: Lease,
    pub unit: Option<UnitLease>,
    pub task: TaskSpec,
    pub plan: PlanSpec,
}

/// A lease as a remote worker names it (the control plane finds the rest in its store).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(deny_unknown_fields)]
pub struct LeaseRef {
    pub plan_id: String,
    pub task_id: String,
    /// The attempt's fencing token.
    pub fence: i64,
    /// Who claimed it (`<worker id>:<slot>`).
    pub worker: String,
    pub unit: Option<UnitRef>,
}

/// A unit's lease as a remote worker names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(deny_unknown_fields)]
pub struct UnitRef {
    pub name: String,
    pub fence: i64,
}

/// What a claim got.
#[derive(Clone, Debug, PartialEq)]
pub enum Claim {
    Assigned(Box<Assignment>),
    /// Work was granted that this worker cannot read: the coordinator refused it (another
    /// worker will take it) and says which it was (`unit`: a candidate, `evaluation` or
    /// `tournament`) and why.
    Refused {
        task: String,
        unit: String,
        reason: String,
    },
    /// Nothing is ready now; ask again.
    Idle,
    /// Nothing will become ready by waiting: every task is finished (or the plan is
    /// cancelled, or its budget is spent).
    Finished,
}

/// How a unit of work ended, as the worker reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The tournament (or evaluation) of run `run_id` selected `winner`, whose patch is the
    /// file `patch`: the coordinator commits it onto the integration branch.
    Won {
        run_id: String,
        winner: String,
        patch: PathBuf,
    },
    /// A candidate unit ran its candidate to `status` (its results are in the run directory).
    CandidateDone {
        status: CandidateStatus,
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
    /// This worker could not run the work for a reason outside it (its repository could not
    /// be fetched, its sandbox not set up, its assignment not read): a unit goes to another
    /// worker (the try counted, not as its candidate's failure); a whole tournament's attempt
    /// fails and is retried after its backoff.
    Refused {
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
    /// A candidate unit's results are recorded (`evaluation_ready`: it was the last).
    UnitDone {
        evaluation_ready: bool,
    },
    /// A refused unit is back in the queue for other workers, or (`given_up`) was given up
    /// after its last try.
    Refused {
        given_up: bool,
    },
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

    /// Claims the best unit of work of `plan` (or of any plan) that a worker with `caps`
    /// can run; when there is none, waits up to `wait` for one before answering
    /// [`Claim::Idle`].
    async fn claim(
        &self,
        worker: &str,
        caps: &Capabilities,
        plan: Option<&str>,
        wait: Duration,
    ) -> Result<Claim, CoordinatorError>;

    /// Renews the assignment's lease; `false` when it was taken away (the work must stop).
    async fn heartbeat(&self, assignment: &Assignment) -> Result<bool, CoordinatorError>;

    /// Charges what the work just spent to the plan.
    async fn charge(&self, assignment: &Assignment, amount: Usd) -> Result<(), CoordinatorError>;

    /// The repository the work runs in, holding the assignment's base commit (and, for an
    /// evaluation, its candidates' results in the run directory).
    async fn checkout(&self, assignment: &Assignment) -> Result<Workspace, CoordinatorError>;

    /// Reports how the work ended, with what it spent that could not be charged as it was
    /// spent, and its directory in the run (which the coordinator keeps: a candidate's, or
    /// the run's).
    async fn report(
        &self,
        assignment: &Assignment,
        verdict: Verdict,
        cost: Usd,
        run_dir: Option<&Path>,
    ) -> Result<Reported, CoordinatorError>;

    /// Reports, then claims the slot's next unit as [`Coordinator::claim`] does: a busy
    /// worker's one round trip per unit to a control plane. `told` hears what the report did
    /// before the claim is made. No claim is made after a stale report, nor after a report
    /// that could not get through (`None`).
    async fn report_then_claim(
        &self,
        assignment: &Assignment,
        report: (Verdict, Usd, Option<&Path>),
        next: NextClaim<'_>,
        told: &(dyn for<'r> Fn(&'r Reported) + Send + Sync),
    ) -> Result<(Reported, Option<Claim>), CoordinatorError> {
        let (verdict, cost, run_dir) = report;
        let reported = self.report(assignment, verdict, cost, run_dir).await?;
        told(&reported);
        if reported == Reported::Stale {
            return Ok((reported, None));
        }
        let claim = self.claim(next.worker, next.caps, next.plan, next.wait).await?;
        Ok((reported, Some(claim)))
    }
}

/// The claim a report is followed by.
#[derive(Clone, Copy, Debug)]
pub struct NextClaim<'a> {
    pub worker: &'a str,
    pub caps: &'a Capabilities,
    pub plan: Option<&'a str>,
    pub wait: Duration,
}

/// Where the tasks of a plan run: its repository on this machine.
#[async_trait::async_trait]
pub trait PlanRepositories: Send + Sync {
    async fn workspace_for(&self, plan: &PlanSpec) -> Result<Workspace, CoordinatorError>;

    /// The plan's workspace when it is on this machine already, without fetching anything
    /// (what a page that shows the plan may look at: reading must not start a clone).
    async fn existing_workspace_for(&self, plan: &PlanSpec) -> Option<Workspace> {
        self.workspace_for(plan).await.ok()
    }
}

/// Every plan runs in one repository (a local `plan run`).
pub struct OneRepository(pub Workspace);

#[async_trait::async_trait]
impl PlanRepositories for OneRepository {
    async fn workspace_for(&self, _plan: &PlanSpec) -> Result<Workspace, CoordinatorError> {
        Ok(self.0.clone())
    }
}
