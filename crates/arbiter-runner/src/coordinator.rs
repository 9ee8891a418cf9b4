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

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arbiter_core::Clock;
use arbiter_core::ids::{CandidateId, RunId};
use arbiter_core::money::Usd;
use arbiter_core::plan::{PlanSpec, TaskSpec};
use arbiter_core::settings::{ApplyMode, RunSettings};
use arbiter_core::status::CandidateStatus;
use arbiter_core::time::Timestamp;
use arbiter_store::StoreError;
use arbiter_store::plans::{AttemptResult, ClaimOutcome, Claimed, Lease, Retry};
pub use arbiter_store::units::Capabilities;
use arbiter_store::units::{UnitClaim, UnitKind, UnitLease, UnitOutcome, UnitQueue, UnitResult, UnitSpec, worker_of};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc::UnboundedSender;

use crate::git::{Git, GitError};
use crate::integration::{self, IntegrationError};
use crate::plan_branch::{self, BranchError};
use crate::task_settings::TaskSettings;
use crate::worker::Progress;
use crate::workspace::Workspace;

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

/// A worker that cannot run every runner looks at the ready tasks a page at a time, up to a
/// few pages, before it claims one it can run.
const READY_PAGE: u32 = 16;
const READY_PAGES: u32 = 4;
/// How many times a worker that cannot run every runner looks at the ready tasks in one
/// claim, when the ones it saw were taken before it claimed.
const LOOKS: u32 = 3;

/// The plan queue in a store on this machine, and the repositories whose integration
/// branches the plans commit onto. The control plane serves remote workers with it too.
pub struct LocalCoordinator {
    pub plans: Arc<dyn UnitQueue>,
    pub clock: Arc<dyn Clock>,
    pub repositories: Arc<dyn PlanRepositories>,
    pub settings: Arc<TaskSettings>,
    pub lease: Duration,
    /// The longest a claim waits before looking again (the safety net under wake-ups).
    pub poll: Duration,
    pub progress: Option<UnboundedSender<Progress>>,
    /// Where each plan's own commits begin on its integration branch, once its branch is
    /// known to be the plan's.
    bases: Mutex<HashMap<String, String>>,
    /// Integration branches being pushed after their winners (plans with `push = true`).
    pushes: crate::plan_push::BranchPushes,
    /// Plans' headers as last read, and when (see [`LocalCoordinator::header`]).
    headers: Mutex<HashMap<String, (std::time::Instant, PlanSpec)>>,
    /// Whether each plan's tasks name their own runners, as last read, and when.
    choosers: Mutex<HashMap<String, (std::time::Instant, bool)>>,
    /// The leases of whole tournaments this coordinator handed out, with their task, until
    /// they are reported: a remote worker's report names its lease, which is found here
    /// instead of in the store (the store still guards the report by its fencing token).
    handed_out: Mutex<HashMap<LeaseKey, (std::time::Instant, Lease, TaskSpec)>>,
    /// When a claim last found no ready unit in each plan (see [`UNITS_RECHECK`]).
    no_ready_units: Mutex<HashMap<String, std::time::Instant>>,
    /// Each plan's repository's own test command at the plan's base, once looked for.
    detected: Mutex<HashMap<String, Option<arbiter_core::test_command::Detected>>>,
    /// The failure analysis of failed attempts, when an `analysis` backend is configured
    /// (see [`LocalCoordinator::with_analyst`]).
    analyst: Option<Arc<crate::failure_analysis::Analyst>>,
}

/// A lease by its plan, task and fencing token.
type LeaseKey = (String, String, i64);

/// How long a claim trusts that a plan has no ready unit before it asks the store again,
/// unless this coordinator changed the plan's units meanwhile (it forgets then): units made
/// ready elsewhere (another process on the same store, the sweeper) wait at most this long.
const UNITS_RECHECK: Duration = Duration::from_millis(100);

/// How long a plan's header is used before it is read again.
const HEADER_TTL: Duration = Duration::from_secs(1);

/// What a claim on one plan found.
enum Found {
    Work(Box<Assignment>),
    /// Nothing now: whether more may come, and when the next retry is ready.
    Nothing {
        more: bool,
        next: Option<Timestamp>,
    },
}

impl LocalCoordinator {
    pub fn new(
        plans: Arc<dyn UnitQueue>,
        clock: Arc<dyn Clock>,
        repositories: Arc<dyn PlanRepositories>,
        settings: Arc<TaskSettings>,
        lease: Duration,
        poll: Duration,
        progress: Option<UnboundedSender<Progress>>,
    ) -> Self {
        let bases = Mutex::new(HashMap::new());
        LocalCoordinator {
            plans,
            clock,
            repositories,
            settings,
            lease,
            poll,
            progress,
            bases,
            pushes: Default::default(),
            headers: Default::default(),
            choosers: Default::default(),
            handed_out: Default::default(),
            no_ready_units: Default::default(),
            detected: Default::default(),
            analyst: None,
        }
    }

    /// Analyses every failed attempt with `analyst`, in the background; the task's next
    /// attempt waits for the analysis (other work goes on) and its prompt carries it.
    pub fn with_analyst(mut self, analyst: Option<Arc<crate::failure_analysis::Analyst>>) -> Self {
        self.analyst = analyst;
        self
    }

    /// Waits for the failure analyses still running (before the process exits).
    pub async fn flush_analyses(&self) {
        if let Some(analyst) = &self.analyst {
            analyst.flush().await;
        }
    }

    /// Starts analysing a failed attempt whose tournament left run `run_id` (fails open: an
    /// analysis that cannot start is simply not made).
    async fn analyse_failure(&self, held: &Held, run_id: &str, reason: &str) {
        let Some(analyst) = &self.analyst else { return };
        let Ok(workspace) = self.repositories.workspace_for(&held.plan).await else { return };
        let run_dir = workspace.runs_dir().join(run_id);
        if !run_dir.is_dir() {
            return;
        }
        analyst.start(crate::failure_analysis::Request {
            store: self.plans.clone(),
            clock: self.clock.clone(),
            run_dir,
            plan: held.plan.id.clone(),
            task: held.task.id.clone(),
            run_id: run_id.to_string(),
            failure: reason.to_string(),
        });
    }

    /// The task as its attempt sees it: for a retry, with the analysis of the previous
    /// failed attempt appended to its description (unless the plan turns that off) — the
    /// one piece of feedback that crosses attempts. Also the run it came from.
    async fn with_feedback(
        &self,
        header: &PlanSpec,
        mut task: TaskSpec,
        attempt: u32,
    ) -> Result<(TaskSpec, Option<String>), CoordinatorError> {
        let wanted = header
            .defaults
            .analysis_feedback
            .unwrap_or_else(|| self.analyst.as_ref().is_none_or(|a| a.limits.feedback));
        if attempt <= 1 || !wanted {
            return Ok((task, None));
        }
        let previous = self
            .plans
            .attempts(&header.id)
            .await?
            .into_iter()
            .filter(|a| {
                a.task_id == task.id
                    && a.attempt < attempt
                    && a.status == arbiter_core::plan::state::AttemptStatus::Failed
            })
            .filter_map(|a| a.run_id.map(|r| (a.attempt, r)))
            .max();
        let Some((_, run_id)) = previous else { return Ok((task, None)) };
        let workspace = self.repositories.workspace_for(header).await?;
        let Some(found) = crate::failure_analysis::feedback_of(&workspace.runs_dir().join(&run_id)) else {
            return Ok((task, None));
        };
        task.description.push_str(&arbiter_core::intake::analysis::feedback_section(&found, &run_id));
        Ok((task, Some(run_id)))
    }

    /// Starts pushing the plan's integration branch after `task`'s winner, when the plan
    /// says `push = true`.
    fn push_after(&self, header: &PlanSpec, repo: Git, task: &str) {
        if header.push {
            let (plans, clock) = (self.plans.clone(), self.clock.clone());
            self.pushes.start(plans, clock, repo, &header.id, &header.integration_branch, task);
        }
    }

    /// When nothing of `header`'s plan can run any more (no task ready or running), what a
    /// finished plan does, after its pushes: a plan with `push = true` proposes its branch, a
    /// plan from an issue tells the issue ([`crate::publish::complete_plan`]).
    async fn complete_if_settled(&self, header: &PlanSpec) {
        if !header.push && header.source.is_none() {
            return;
        }
        match self.plans.claimable_plans().await {
            Ok(open) if !open.contains(&header.id) => {}
            _ => return,
        }
        let Ok(workspace) = self.repositories.workspace_for(header).await else { return };
        let (plans, id) = (self.plans.clone(), header.id.clone());
        self.pushes.after_pushes(async move {
            let config = std::fs::read_to_string(workspace.config_path())
                .ok()
                .and_then(|text| arbiter_core::settings::ConfigFile::parse(&text, "config.toml").ok())
                .unwrap_or_default();
            let repo = Git::new(workspace.repo_root().to_path_buf());
            let (runs_dir, offline_dir) = (workspace.runs_dir(), workspace.dir().join("pr").join(format!("plan-{id}")));
            let store: &dyn arbiter_store::plans::PlanStore = &*plans;
            let place =
                crate::publish::PlanPlace { store, repo: &repo, runs_dir: &runs_dir, offline_dir: &offline_dir };
            crate::publish::complete_plan(&place, &config, &id).await;
        });
    }

    /// Waits for the pushes of integration branches still going (before the process exits).
    pub async fn flush_pushes(&self) {
        self.pushes.flush().await;
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    fn tell(&self, p: Progress) {
        if let Some(tx) = &self.progress {
            let _ = tx.send(p);
        }
    }

    async fn repo(&self, plan: &PlanSpec) -> Result<Git, CoordinatorError> {
        Ok(Git::new(self.repositories.workspace_for(plan).await?.repo_root().to_path_buf()))
    }

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
    async fn header(&self, plan_id: &str) -> Result<PlanSpec, CoordinatorError> {
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
    async fn tasks_choose_runners(&self, plan_id: &str) -> Result<bool, CoordinatorError> {
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

    /// The plans a worker without a plan of its own claims from, in a stable order: those
    /// with a task ready or running (a look at every plan with its counts, at every claim of
    /// every waiting worker, grew with every finished plan the store keeps).
    async fn open_plans(&self) -> Result<Vec<String>, CoordinatorError> {
        Ok(self.plans.claimable_plans().await?)
    }

    /// A claimed unit as an assignment.
    async fn unit_assignment(&self, claim: UnitClaim) -> Result<Assignment, CoordinatorError> {
        let UnitClaim { lease: unit, task } = claim;
        let plan = self.header(&unit.attempt.plan_id).await?;
        let (task, _) = self.with_feedback(&plan, task, unit.attempt.attempt).await?;
        // Every unit runs with the settings its attempt spread with, whatever the
        // configuration says by now.
        let frozen = self.plans.attempt_settings(&unit.attempt.plan_id, &task.id, unit.attempt.fence).await?;
        let settings = match frozen {
            Some(settings) => settings,
            None => {
                // An attempt spread before its settings were kept: resolved again.
                let workspace = self.repositories.workspace_for(&plan).await?;
                match self.settings_of(&workspace, &plan, &task).await? {
                    Ok(s) => capped(s, &unit.attempt),
                    Err(why) => {
                        self.fail_attempt(&unit.attempt, why.clone(), Retry::Never).await?;
                        return Err(CoordinatorError::Refused(format!("task {} of plan {}: {why}", task.id, plan.id)));
                    }
                }
            }
        };
        let run_id = RunId::parse(&unit.run_id).map_err(|_| {
            CoordinatorError::Store(StoreError::Corrupt { column: "plan_units.run_id", value: unit.run_id.clone() })
        })?;
        let work = match unit.kind {
            UnitKind::Candidate => {
                let index = (0..settings.candidates.value as usize)
                    .find(|i| CandidateId::from_index(*i).as_str() == unit.name)
                    .ok_or_else(|| {
                        CoordinatorError::Store(StoreError::Corrupt {
                            column: "plan_units.name",
                            value: unit.name.clone(),
                        })
                    })?;
                Work::Candidate { index, run_id }
            }
            UnitKind::Evaluation => {
                let units = self.plans.units_of(&unit.attempt.plan_id, &task.id, unit.attempt.fence).await?;
                let lost = units
                    .iter()
                    .filter(|u| u.kind == UnitKind::Candidate)
                    .filter_map(|u| {
                        let why = u.result.as_ref()?.missing()?.to_string();
                        let index = (0..settings.candidates.value as usize)
                            .find(|i| CandidateId::from_index(*i).as_str() == u.name)?;
                        Some((index, why))
                    })
                    .collect();
                Work::Evaluation { run_id, lost }
            }
        };
        Ok(Assignment {
            lease: unit.attempt.clone(),
            base: unit.base.clone(),
            unit: Some(unit),
            work,
            task,
            plan,
            settings,
        })
    }

    /// Fails an attempt (its evaluation cannot run, or it cannot start).
    async fn fail_attempt(&self, lease: &Lease, reason: String, retry: Retry) -> Result<(), CoordinatorError> {
        let result = AttemptResult::Failed { reason: reason.clone(), retry, run_id: None };
        if let Finish::Recorded(retry_at) = self.finish(lease, result, Usd::ZERO).await? {
            self.tell(Progress::Failed { task: lease.task_id.clone(), reason, retry_at });
        }
        Ok(())
    }

    /// The best ready tasks of the plan a worker with `caps` can run, looked at a page at a
    /// time, up to a few pages (empty: none of those).
    async fn runnable_ready(
        &self,
        plan: &str,
        header: &PlanSpec,
        workspace: &Workspace,
        caps: &Capabilities,
    ) -> Result<Vec<TaskSpec>, CoordinatorError> {
        let mut ready = Vec::new();
        for page in 0..READY_PAGES {
            let tasks = self.plans.ready_tasks(plan, self.now(), page * READY_PAGE, READY_PAGE).await?;
            let last = tasks.len() < READY_PAGE as usize;
            let held_back = self.analyst.as_ref().map(|a| a.held_back(plan)).unwrap_or_default();
            ready.extend(tasks.into_iter().filter(|task| !held_back.contains(&task.id)).filter(|task| {
                // A task whose settings are invalid is claimed by the first worker to look
                // at it, and fails with the reason (it would otherwise wait for ever).
                match self.settings.of(workspace, header, task) {
                    Ok(settings) => can_run(caps, &settings),
                    Err(_) => true,
                }
            }));
            if !ready.is_empty() || last {
                break;
            }
        }
        Ok(ready)
    }

    /// Claims a new task of the plan this worker can run (some unit of it, when its
    /// tournament spreads; all of it otherwise).
    async fn claim_task(
        &self,
        plan: &str,
        worker: &str,
        caps: &Capabilities,
    ) -> Result<ClaimOutcome, CoordinatorError> {
        let held_back = self.analyst.as_ref().map(|a| a.held_back(plan)).unwrap_or_default();
        if *caps == Capabilities::Any && held_back.is_empty() {
            return Ok(self.plans.claim(plan, worker, self.lease, self.now()).await?);
        }
        if *caps == Capabilities::Any {
            // A task whose failed attempt is being analysed waits for the analysis; the
            // others are claimed as usual.
            let ready = self.plans.ready_tasks(plan, self.now(), 0, READY_PAGE * READY_PAGES).await?;
            let ids: Vec<String> = ready.into_iter().map(|t| t.id).filter(|id| !held_back.contains(id)).collect();
            return Ok(self.plans.claim_among(plan, &ids, worker, self.lease, self.now()).await?);
        }
        let header = self.header(plan).await?;
        let workspace = self.repositories.workspace_for(&header).await?;
        if !self.tasks_choose_runners(plan).await? {
            // Every task needs what the plan's defaults give it: those decide for all (a
            // task whose settings are invalid is claimed, and fails with the reason).
            return match self.settings.of(&workspace, &header, &TaskSpec::default()) {
                Ok(settings) if !can_run(caps, &settings) => {
                    Ok(self.plans.claim_among(plan, &[], worker, self.lease, self.now()).await?)
                }
                _ => Ok(self.plans.claim(plan, worker, self.lease, self.now()).await?),
            };
        }
        let mut ready = self.runnable_ready(plan, &header, &workspace, caps).await?;
        // One round trip claims the best of them still ready (claimers looking at the same
        // tasks at once skip each other's). When every one was taken meanwhile, a new look
        // finds those still ready; tasks that stay ready but cannot be claimed (their key
        // files overlap running work, the budget is spent) end the claim after a few looks.
        // An empty look answers with the plan's counts.
        for _ in 1..LOOKS {
            let ids: Vec<String> = ready.iter().map(|t| t.id.clone()).collect();
            match self.plans.claim_among(plan, &ids, worker, self.lease, self.now()).await? {
                ClaimOutcome::Idle(idle) if !ids.is_empty() && !idle.cancelled && !idle.budget_exhausted => {}
                outcome => return Ok(outcome),
            }
            ready = self.runnable_ready(plan, &header, &workspace, caps).await?;
        }
        let ids: Vec<String> = ready.iter().map(|t| t.id.clone()).collect();
        Ok(self.plans.claim_among(plan, &ids, worker, self.lease, self.now()).await?)
    }

    /// One claim on one plan: a unit of a running attempt, or a new attempt.
    async fn claim_on(&self, plan: &str, worker: &str, caps: &Capabilities) -> Result<Found, CoordinatorError> {
        let none_lately = self
            .no_ready_units
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(plan)
            .is_some_and(|at| at.elapsed() < UNITS_RECHECK);
        if !none_lately {
            match self.plans.claim_unit(Some(plan), worker, caps, self.lease, self.now()).await? {
                Some(u) => return Ok(Found::Work(Box::new(self.unit_assignment(u).await?))),
                None => {
                    let mut seen = self.no_ready_units.lock().unwrap_or_else(|p| p.into_inner());
                    seen.retain(|_, at| at.elapsed() < UNITS_RECHECK);
                    seen.insert(plan.to_string(), std::time::Instant::now());
                }
            }
        }
        loop {
            let c = match self.claim_task(plan, worker, caps).await? {
                ClaimOutcome::Claimed(c) => *c,
                ClaimOutcome::Idle(idle) => {
                    return Ok(Found::Nothing { more: !idle.finished(), next: idle.next_ready_at });
                }
            };
            if let Some(found) = self.start_attempt(plan, worker, caps, c).await? {
                return Ok(found);
            }
        }
    }

    /// Starts a claimed attempt: recognised as done when its winner is on the branch
    /// already, failed when its settings are invalid, spread over units when its tournament
    /// can spread, run whole otherwise. `None`: nothing for this worker (claim again).
    async fn start_attempt(
        &self,
        plan: &str,
        worker: &str,
        caps: &Capabilities,
        c: Claimed,
    ) -> Result<Option<Found>, CoordinatorError> {
        let header = self.header(plan).await?;
        let plan_base = match self.open_plan(plan).await {
            Ok(base) => base,
            Err(e) => {
                self.give_back(&c.lease, format!("its integration branch cannot be used: {e}")).await;
                return Err(e);
            }
        };
        let repo = self.repo(&header).await?;
        if let Some(worktree) = plan_branch::checked_out_in(&repo, &header.integration_branch).await? {
            let branch = header.integration_branch.clone();
            self.give_back(&c.lease, format!("its integration branch {branch} is checked out in {worktree}")).await;
            return Err(checked_out(&header, worktree));
        }
        let base = integration::tip(&repo, &header.integration_branch).await?;
        // A winner committed just before its worker died is recognised and reported done,
        // never run twice.
        if let Some(commit) =
            integration::find_task_commit(&repo, &header.integration_branch, &plan_base, &header.id, &c.task.id).await?
        {
            let result = AttemptResult::Succeeded { run_id: None, commit: Some(commit.clone()) };
            self.finish(&c.lease, result, Usd::ZERO).await?;
            self.tell(Progress::Recovered { task: c.task.id.clone(), commit });
            return Ok(None);
        }
        let workspace = self.repositories.workspace_for(&header).await?;
        let mut c = c;
        let (task, fed) = self.with_feedback(&header, c.task, c.lease.attempt).await?;
        c.task = task;
        if let Some(from_run) = fed {
            let entry = arbiter_core::plan::event::PlanEntry::AnalysisFed {
                task: c.task.id.clone(),
                attempt: c.lease.attempt,
                from_run,
            };
            self.plans.note_event(plan, entry, self.now()).await?;
        }
        let settings = match self.settings_of(&workspace, &header, &c.task).await? {
            Ok(s) => capped(s, &c.lease),
            Err(why) => {
                self.fail_attempt(&c.lease, why, Retry::Never).await?;
                return Ok(None);
            }
        };
        if !can_run(caps, &settings) {
            // Claimed on a stale look at the plan (a task naming its own runners came since):
            // given back without counting, and the plan looked at again.
            self.choosers.lock().unwrap_or_else(|p| p.into_inner()).remove(plan);
            self.give_back(&c.lease, "the worker that claimed it cannot run it".into()).await;
            return Ok(None);
        }
        if !settings.spreads() {
            self.hand_out(&c.lease, &c.task);
            let assignment = Assignment {
                lease: c.lease,
                unit: None,
                work: Work::Tournament,
                task: c.task,
                plan: header,
                base,
                settings,
            };
            return Ok(Some(Found::Work(Box::new(assignment))));
        }
        let run_id = RunId::new(self.now(), crate::random_suffix());
        let units: Vec<UnitSpec> = (0..settings.candidates.value as usize)
            .map(|i| UnitSpec {
                name: CandidateId::from_index(i).to_string(),
                kind: UnitKind::Candidate,
                needs: settings.needs_of(i),
            })
            .chain([UnitSpec { name: "evaluation".into(), kind: UnitKind::Evaluation, needs: Vec::new() }])
            .collect();
        self.plans.start_units(&c.lease, run_id.as_str(), &base, &settings, &units, self.now()).await?;
        self.units_changed(plan);
        self.tell(Progress::Spread { task: c.task.id.clone(), run: run_id.to_string(), units: units.len() });
        match self.plans.claim_unit(Some(plan), worker, caps, self.lease, self.now()).await? {
            Some(u) => Ok(Some(Found::Work(Box::new(self.unit_assignment(u).await?)))),
            None => Ok(None),
        }
    }

    /// A task's settings, with the repository's own test command as its verify command when
    /// it names none (found at the plan's base, once per plan). `Err(why)`: its settings are
    /// invalid, or nothing would check its winner.
    async fn settings_of(
        &self,
        workspace: &Workspace,
        header: &PlanSpec,
        task: &TaskSpec,
    ) -> Result<Result<RunSettings, String>, CoordinatorError> {
        let mut settings = match self.settings.of(workspace, header, task) {
            Ok(s) => s,
            Err(why) => return Ok(Err(format!("its run settings are invalid: {why}"))),
        };
        if settings.wants_detection() {
            let known = self.detected.lock().unwrap_or_else(|p| p.into_inner()).get(&header.id).cloned();
            let detected = match known {
                Some(d) => d,
                None => {
                    let base = self.open_plan(&header.id).await?;
                    let repo = Git::new(workspace.repo_root().to_path_buf());
                    let d = crate::verify_detect::at_commit(&repo, &base).await?;
                    self.detected.lock().unwrap_or_else(|p| p.into_inner()).insert(header.id.clone(), d.clone());
                    d
                }
            };
            crate::verify_detect::apply(&mut settings, detected.as_ref());
        }
        if !settings.may_apply_unchecked() {
            return Ok(Err(crate::verify_detect::unverified_task(&header.id, &task.id)));
        }
        Ok(Ok(settings))
    }

    /// The plan's units changed here: the next claim asks the store for ready ones.
    fn units_changed(&self, plan: &str) {
        self.no_ready_units.lock().unwrap_or_else(|p| p.into_inner()).remove(plan);
    }

    /// Remembers a whole tournament's lease until it is reported.
    fn hand_out(&self, lease: &Lease, task: &TaskSpec) {
        let mut handed = self.handed_out.lock().unwrap_or_else(|p| p.into_inner());
        if handed.len() >= 4096 {
            // Leases whose report never came (their workers died): the store has them.
            let stale = self.lease * 4;
            handed.retain(|_, (at, _, _)| at.elapsed() < stale);
        }
        let key = (lease.plan_id.clone(), lease.task_id.clone(), lease.fence);
        handed.insert(key, (std::time::Instant::now(), lease.clone(), task.clone()));
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

/// Whether a worker with `caps` can run (some of) a task with these settings: one of its
/// candidates when the tournament spreads, all of them otherwise.
fn can_run(caps: &Capabilities, settings: &RunSettings) -> bool {
    let mut needs = (0..settings.candidates.value as usize).map(|i| settings.needs_of(i));
    if settings.spreads() { needs.any(|n| caps.can(&n)) } else { needs.all(|n| caps.can(&n)) }
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

    async fn claim(
        &self,
        worker: &str,
        caps: &Capabilities,
        plan: Option<&str>,
        wait: Duration,
    ) -> Result<Claim, CoordinatorError> {
        // Armed before looking: work that comes after the look wakes the wait below.
        let signal = self.plans.work_signal().await;
        let notified = signal.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let plans = match plan {
            Some(p) => vec![p.to_string()],
            None => self.open_plans().await?,
        };
        let mut more = false;
        let mut next: Option<Timestamp> = None;
        for p in &plans {
            match self.claim_on(p, worker, caps).await? {
                Found::Work(assignment) => return Ok(Claim::Assigned(assignment)),
                Found::Nothing { more: more_here, next: next_here } => {
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
        let _ = tokio::time::timeout(wait, notified).await;
        Ok(Claim::Idle)
    }

    async fn heartbeat(&self, assignment: &Assignment) -> Result<bool, CoordinatorError> {
        self.renew(&assignment.lease, assignment.unit.as_ref()).await
    }

    async fn charge(&self, assignment: &Assignment, amount: Usd) -> Result<(), CoordinatorError> {
        self.charge_to(&assignment.lease, amount).await
    }

    async fn checkout(&self, assignment: &Assignment) -> Result<Workspace, CoordinatorError> {
        // The plan's repository is on this machine: its objects hold every tip, and its
        // run directories every unit's results.
        self.repositories.workspace_for(&assignment.plan).await
    }

    async fn report(
        &self,
        assignment: &Assignment,
        verdict: Verdict,
        cost: Usd,
        _run_dir: Option<&Path>,
    ) -> Result<Reported, CoordinatorError> {
        self.report_held(&assignment.held(), verdict, cost).await
    }
}

impl LocalCoordinator {
    /// Renews a lease (a unit's, or the attempt's); `false` when it is no longer held.
    pub async fn renew(&self, lease: &Lease, unit: Option<&UnitLease>) -> Result<bool, CoordinatorError> {
        let renewed = match unit {
            Some(unit) => self.plans.heartbeat_unit(unit, self.lease, self.now()).await?,
            None => self.plans.heartbeat(lease, self.lease, self.now()).await?,
        };
        Ok(renewed.is_some())
    }

    /// Charges what an attempt just spent to its plan.
    pub async fn charge_to(&self, lease: &Lease, amount: Usd) -> Result<(), CoordinatorError> {
        self.plans.charge(&lease.plan_id, Some((lease.task_id.as_str(), lease.fence)), amount, self.now()).await?;
        Ok(())
    }

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
}
