//! [`LocalCoordinator`]: the plan queue in a store on this machine, how it is made, and the
//! [`Coordinator`] it is (claims, heartbeats, charges, checkouts and reports).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arbiter_core::Clock;
use arbiter_core::money::Usd;
use arbiter_core::plan::{PlanSpec, TaskSpec};
use arbiter_core::time::Timestamp;
use arbiter_store::plans::Lease;
use arbiter_store::units::{Capabilities, UnitLease, UnitQueue};
use tokio::sync::mpsc::UnboundedSender;

use super::claim::Found;
use super::{Assignment, Claim, Coordinator, CoordinatorError, PlanRepositories, Reported, Verdict};
use crate::git::Git;
use crate::task_settings::TaskSettings;
use crate::worker::Progress;
use crate::workspace::Workspace;

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
    pub(super) bases: Mutex<HashMap<String, String>>,
    /// Integration branches being pushed after their winners (plans with `push = true`).
    pub(super) pushes: crate::plan_push::BranchPushes,
    /// Plans' headers as last read, and when (see [`LocalCoordinator::header`]).
    pub(super) headers: Mutex<HashMap<String, (std::time::Instant, PlanSpec)>>,
    /// Whether each plan's tasks name their own runners, as last read, and when.
    pub(super) choosers: Mutex<HashMap<String, (std::time::Instant, bool)>>,
    /// The leases of whole tournaments this coordinator handed out, with their task, until
    /// they are reported: a remote worker's report names its lease, which is found here
    /// instead of in the store (the store still guards the report by its fencing token).
    pub(super) handed_out: Mutex<HashMap<LeaseKey, (std::time::Instant, Lease, TaskSpec)>>,
    /// When a claim last found no ready unit in each plan (see [`UNITS_RECHECK`]).
    pub(super) no_ready_units: Mutex<HashMap<String, std::time::Instant>>,
    /// Each plan's repository's own test command at the plan's base, once looked for.
    pub(super) detected: Mutex<HashMap<String, Option<arbiter_core::test_command::Detected>>>,
    /// The failure analysis of failed attempts, when an `analysis` backend is configured
    /// (see [`LocalCoordinator::with_analyst`]).
    pub(super) analyst: Option<Arc<crate::failure_analysis::Analyst>>,
}

/// A lease by its plan, task and fencing token.
type LeaseKey = (String, String, i64);

/// How long a claim trusts that a plan has no ready unit before it asks the store again,
/// unless this coordinator changed the plan's units meanwhile (it forgets then): units made
/// ready elsewhere (another process on the same store, the sweeper) wait at most this long.
pub(super) const UNITS_RECHECK: Duration = Duration::from_millis(100);

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

    pub(super) fn now(&self) -> Timestamp {
        self.clock.now()
    }

    pub(super) fn tell(&self, p: Progress) {
        if let Some(tx) = &self.progress {
            let _ = tx.send(p);
        }
    }

    pub(super) async fn repo(&self, plan: &PlanSpec) -> Result<Git, CoordinatorError> {
        Ok(Git::new(self.repositories.workspace_for(plan).await?.repo_root().to_path_buf()))
    }
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
}
