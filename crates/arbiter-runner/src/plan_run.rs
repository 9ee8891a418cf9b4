//! Running a plan with a pool of local workers: each worker slot claims the best ready task
//! from the plan queue, runs it as a tournament from the integration branch as it stands,
//! commits the winner onto the branch, and reports — under a lease it renews with
//! heartbeats, so a worker that dies or hangs gives its task back.
//!
//! The pool stops when nothing more can run: no task is ready (or the budget is spent or the
//! plan cancelled) and none is running anywhere. Ctrl-C stops every tournament and gives
//! the tasks back without counting the attempt. A task whose winner was committed just
//! before its worker died is recognized on the branch and reported done, never run twice;
//! leases of local workers whose process is gone are taken back when a pool starts.
//!
//! Before it commits, a worker renews its lease (so no other attempt can be claimed while
//! the commit is made) and looks for the task's recorded commit on the branch; a worker
//! whose lease was taken away commits nothing. Every cost is charged to the plan the moment
//! the tournament incurs it, so a worker that dies loses none of its spending.
//!
//! The pool only runs on a branch the plan owns ([`plan_branch::ensure_for_run`]): it
//! creates it when it does not exist, and refuses a branch it did not create or adopt and a
//! checked-out one. A branch checked out while the pool runs stops the pool before its next
//! tournament or commit (the task is given back, its attempt not counted).

use std::sync::Arc;
use std::time::Duration;

use arbiter_core::Clock;
use arbiter_core::artifact::paths;
use arbiter_core::money::Usd;
use arbiter_core::plan::{PlanSpec, TaskSpec};
use arbiter_core::settings::RunSettings;
use arbiter_core::status::RunStatus;
use arbiter_core::task::Task;
use arbiter_core::time::Timestamp;
use arbiter_store::plans::{AttemptResult, ClaimOutcome, Claimed, Lease, PlanStore, PlanView, Retry};
use arbiter_store::{Store, StoreError};
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use crate::budget::SpendingSink;
use crate::engine::{Engine, RunRequest};
use crate::git::{Git, GitError};
use crate::integration::{self, IntegrationError};
use crate::plan_branch::{self, BranchError};
use crate::process::process_start;
use crate::runners::ModelAccess;
use crate::workspace::Workspace;

/// Builds the run settings of one task (plan defaults, the task's own values, the
/// repository's configuration); an error names what is wrong.
pub type SettingsFor = dyn Fn(&PlanSpec, &TaskSpec) -> Result<RunSettings, String> + Send + Sync;

/// Everything a plan run uses; effects are passed in, as for the [`Engine`].
pub struct PlanRunner {
    pub plans: Arc<dyn PlanStore>,
    /// Where the tournaments' runs are indexed.
    pub runs: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
    pub cancel: CancellationToken,
    /// The repository the plan's tasks run in (its `.arbiter/` holds their runs).
    pub workspace: Workspace,
    pub settings_for: Arc<SettingsFor>,
    pub process_env: Vec<(String, String)>,
    pub models: Option<Arc<ModelAccess>>,
    pub secrets: Vec<String>,
    /// The sandbox the tasks' candidates run in, and the workspace pools (shared by every
    /// worker slot: each keeps the workspaces of its tasks warm).
    pub sandboxing: Arc<crate::confinement::Sandboxing>,
    /// `local:<host>:<pid>`; slot `n` claims as `<prefix>:<n>`.
    pub worker_prefix: String,
    pub lease: Duration,
    /// The longest a waiting worker sleeps before looking again (the safety net under
    /// wake-ups).
    pub poll: Duration,
    pub progress: Option<UnboundedSender<Progress>>,
}

/// What a plan run reports as it goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Progress {
    Claimed {
        task: String,
        attempt: u32,
        max_attempts: u32,
        worker: String,
        base: String,
    },
    Done {
        task: String,
        run: Option<String>,
        commit: String,
    },
    /// Its winner was already on the branch (a worker died after committing it).
    Recovered {
        task: String,
        commit: String,
    },
    Failed {
        task: String,
        reason: String,
        retry_at: Option<Timestamp>,
    },
    Released {
        task: String,
        reason: String,
    },
    LeaseLost {
        task: String,
    },
    Reclaimed {
        task: String,
        worker: String,
    },
}

/// How a plan run ended.
pub struct PlanRunOutcome {
    pub view: PlanView,
    pub interrupted: bool,
}

/// A plan run that could not go on.
#[derive(Debug, thiserror::Error)]
pub enum PlanRunError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Git(#[from] GitError),
    /// The plan's integration branch may not be used (or no longer): the user can fix it.
    #[error(transparent)]
    Branch(#[from] BranchError),
    #[error("a worker task failed: {0}")]
    Join(String),
}

/// `local:<host>:<pid>.<start>` for this process: `<start>` is when the process started
/// (in clock ticks since boot), so a later process that reuses the pid is not mistaken for it.
pub fn local_worker_prefix() -> String {
    let host =
        nix::unistd::gethostname().map(|h| h.to_string_lossy().into_owned()).unwrap_or_else(|_| "localhost".into());
    let pid = std::process::id();
    match process_start(pid as i32) {
        Some(start) => format!("local:{host}:{pid}.{start}"),
        None => format!("local:{host}:{pid}"),
    }
}

/// The process a local worker id on `host` names: its pid and, when recorded, its start.
fn local_process(worker: &str, host_prefix: &str) -> Option<(i32, Option<u64>)> {
    let process = worker.strip_prefix(host_prefix)?.split(':').next()?;
    match process.split_once('.') {
        Some((pid, start)) => Some((pid.parse().ok()?, Some(start.parse().ok()?))),
        None => Some((process.parse().ok()?, None)),
    }
}

/// Whether the process a local worker id names is still the one running.
fn local_process_alive(pid: i32, start: Option<u64>) -> bool {
    match (process_start(pid), start) {
        (None, _) => false,
        (Some(now), Some(recorded)) => now == recorded,
        (Some(_), None) => true,
    }
}

/// The plan a worker slot runs tasks of, and the commit its integration branch started from.
struct Target {
    header: PlanSpec,
    base: String,
}

/// Renews one attempt's lease until dropped; `lost` is cancelled when the lease is taken
/// away. Dropping it (on any way out of the attempt) stops the heartbeat.
struct Heartbeat {
    stop: CancellationToken,
    lost: CancellationToken,
    beat: tokio::task::JoinHandle<()>,
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.stop.cancel();
        self.beat.abort();
    }
}

/// Passes the tournament's costs on to the plan as they are charged, and remembers how
/// much reached it (the rest is reported with the attempt).
struct PlanSpending {
    plans: Arc<dyn PlanStore>,
    clock: Arc<dyn Clock>,
    lease: Lease,
    forwarded: std::sync::Mutex<Usd>,
}

#[async_trait::async_trait]
impl SpendingSink for PlanSpending {
    async fn spent(&self, amount: Usd) {
        let attempt = Some((self.lease.task_id.as_str(), self.lease.fence));
        if self.plans.charge(&self.lease.plan_id, attempt, amount, self.clock.now()).await.is_ok() {
            let mut forwarded = self.forwarded.lock().unwrap_or_else(|p| p.into_inner());
            *forwarded = *forwarded + amount;
        }
    }
}

impl PlanSpending {
    /// What of `total` has not reached the plan yet.
    fn remainder(&self, total: Usd) -> Usd {
        let forwarded = *self.forwarded.lock().unwrap_or_else(|p| p.into_inner());
        total.saturating_sub(forwarded)
    }
}

impl PlanRunner {
    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    fn tell(&self, p: Progress) {
        if let Some(tx) = &self.progress {
            let _ = tx.send(p);
        }
    }

    /// Runs the plan with `workers` slots until nothing more can run.
    pub async fn run(self: &Arc<Self>, plan_id: &str, workers: usize) -> Result<PlanRunOutcome, PlanRunError> {
        let view = self.plans.plan(plan_id).await?.ok_or_else(|| StoreError::NoPlan { id: plan_id.to_string() })?;
        let header = view.plan.header.clone();
        let repo = Git::new(self.workspace.repo_root().to_path_buf());
        let owned = plan_branch::ensure_for_run(&repo, &*self.plans, &view.plan, self.now()).await?;
        // Where the plan's own commits begin: fixed once the branch exists.
        let plan_base = owned.base;
        self.reclaim_dead_local_workers(&view).await?;

        let sweeper = {
            let me = self.clone();
            tokio::spawn(async move {
                let every = (me.lease / 2).max(Duration::from_millis(200));
                loop {
                    tokio::select! {
                        _ = me.cancel.cancelled() => break,
                        _ = tokio::time::sleep(every) => {}
                    }
                    if let Ok(reclaimed) = me.plans.sweep_expired(me.now()).await {
                        for r in reclaimed {
                            me.tell(Progress::Reclaimed { task: r.task_id, worker: r.worker });
                        }
                    }
                }
            })
        };
        let mut slots = tokio::task::JoinSet::new();
        for n in 1..=workers.max(1) {
            let me = self.clone();
            let plan = plan_id.to_string();
            let target = Target { header: header.clone(), base: plan_base.clone() };
            slots.spawn(async move { me.slot(&plan, &target, &format!("{}:{n}", me.worker_prefix)).await });
        }
        let mut first_error = None;
        while let Some(joined) = slots.join_next().await {
            match joined {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    // The other slots stop too (their tasks are given back): the run
                    // cannot go on as it is.
                    self.cancel.cancel();
                    first_error.get_or_insert(e);
                }
                Err(e) => {
                    first_error.get_or_insert(PlanRunError::Join(e.to_string()));
                }
            }
        }
        sweeper.abort();
        if let Some(e) = first_error {
            return Err(e);
        }
        let view = self.plans.plan(plan_id).await?.ok_or_else(|| StoreError::NoPlan { id: plan_id.to_string() })?;
        Ok(PlanRunOutcome { view, interrupted: self.cancel.is_cancelled() })
    }

    /// Leases held by local workers of this host whose process is gone are taken back now
    /// (without counting their attempt) instead of waiting for them to expire.
    async fn reclaim_dead_local_workers(&self, view: &PlanView) -> Result<(), PlanRunError> {
        let host_prefix = self.worker_prefix.rsplit_once(':').map(|(h, _)| format!("{h}:")).unwrap_or_default();
        let mut dead: Vec<String> = view
            .tasks
            .iter()
            .filter_map(|t| t.lease_owner.clone())
            .filter(|w| local_process(w, &host_prefix).is_some_and(|(pid, start)| !local_process_alive(pid, start)))
            .collect();
        dead.sort();
        dead.dedup();
        if dead.is_empty() {
            return Ok(());
        }
        let reclaimed =
            self.plans.release_workers(&view.plan.header.id, &dead, "its worker process is gone", self.now()).await?;
        for r in reclaimed {
            self.tell(Progress::Reclaimed { task: r.task_id, worker: r.worker });
        }
        Ok(())
    }

    /// One worker slot: claim, run, report, until nothing more can run.
    async fn slot(&self, plan: &str, target: &Target, worker: &str) -> Result<(), PlanRunError> {
        loop {
            if self.cancel.is_cancelled() {
                return Ok(());
            }
            match self.plans.claim(plan, worker, self.lease, self.now()).await? {
                ClaimOutcome::Claimed(c) => self.attempt(target, *c).await?,
                ClaimOutcome::Idle(idle) if idle.finished() => return Ok(()),
                ClaimOutcome::Idle(idle) => {
                    let now = self.now();
                    let wait = idle
                        .next_ready_at
                        .filter(|at| *at > now)
                        .map(|at| Duration::from_micros((at.0 - now.0) as u64))
                        .unwrap_or(self.poll)
                        .min(self.poll)
                        .max(Duration::from_millis(10));
                    tokio::select! {
                        _ = self.cancel.cancelled() => return Ok(()),
                        _ = self.plans.wait_for_work(plan, wait) => {}
                    }
                }
            }
        }
    }

    /// Starts renewing `lease`; `cancel` (the attempt's) is cancelled when it is lost.
    fn heartbeat(&self, lease: &Lease, cancel: CancellationToken) -> Heartbeat {
        let (stop, lost) = (CancellationToken::new(), CancellationToken::new());
        let plans = self.plans.clone();
        let clock = self.clock.clone();
        let ttl = self.lease;
        let beat = {
            let (lease, stop, lost) = (lease.clone(), stop.clone(), lost.clone());
            tokio::spawn(async move {
                let every = (ttl / 3).max(Duration::from_millis(50));
                loop {
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        _ = tokio::time::sleep(every) => {}
                    }
                    match plans.heartbeat(&lease, ttl, clock.now()).await {
                        Ok(Some(_)) => {}
                        Ok(None) => {
                            lost.cancel();
                            cancel.cancel();
                            return;
                        }
                        // A database hiccup: keep trying until the lease runs out.
                        Err(_) => {}
                    }
                }
            })
        };
        Heartbeat { stop, lost, beat }
    }

    /// One claimed task: its tournament, the winner committed onto the integration branch,
    /// the report.
    async fn attempt(&self, target: &Target, claimed: Claimed) -> Result<(), PlanRunError> {
        let Claimed { lease, task } = claimed;
        let header = &target.header;
        let repo = Git::new(self.workspace.repo_root().to_path_buf());
        let branch = &header.integration_branch;
        let base = integration::tip(&repo, branch).await?;
        self.tell(Progress::Claimed {
            task: task.id.clone(),
            attempt: lease.attempt,
            max_attempts: lease.max_attempts,
            worker: lease.worker.clone(),
            base: base.clone(),
        });
        if let Some(commit) = self.committed_already(&repo, target, &task.id).await? {
            let result = AttemptResult::Succeeded { run_id: None, commit: Some(commit.clone()) };
            return self.report(&lease, result, Usd::ZERO, Progress::Recovered { task: task.id, commit }).await;
        }
        self.branch_still_free(&repo, branch, &lease, Usd::ZERO).await?;
        let never = |reason: String| {
            let p = Progress::Failed { task: task.id.clone(), reason: reason.clone(), retry_at: None };
            (AttemptResult::Failed { reason, retry: Retry::Never, run_id: None }, p)
        };
        let mut settings = match (self.settings_for)(header, &task) {
            Ok(s) => s,
            Err(why) => {
                let (result, p) = never(format!("its run settings are invalid: {why}"));
                return self.report(&lease, result, Usd::ZERO, p).await;
            }
        };
        // The winner goes onto the integration branch, not into any working tree.
        settings.apply.value = arbiter_core::settings::ApplyMode::None;
        if lease.reserved > Usd::ZERO {
            // The attempt may spend what the claim reserved from the plan's budget, no more
            // (and no more than its own configuration allows).
            let own = settings.budget_usd.value;
            settings.budget_usd.value = Some(own.map_or(lease.reserved, |b| b.min(lease.reserved)));
        }
        let prompt_task = match Task::new(task.prompt(header), task.success_criteria(), settings.verify.value.clone()) {
            Ok(t) => t,
            Err(e) => {
                let (result, p) = never(e.to_string());
                return self.report(&lease, result, Usd::ZERO, p).await;
            }
        };

        let attempt_cancel = self.cancel.child_token();
        let heartbeat = self.heartbeat(&lease, attempt_cancel.clone());
        let spending = Arc::new(PlanSpending {
            plans: self.plans.clone(),
            clock: self.clock.clone(),
            lease: lease.clone(),
            forwarded: std::sync::Mutex::new(Usd::ZERO),
        });
        let engine = Engine {
            store: self.runs.clone(),
            clock: self.clock.clone(),
            observer: None,
            cancel: attempt_cancel.clone(),
            run_suffix: crate::random_suffix(),
            process_env: self.process_env.clone(),
            models: self.models.clone(),
            secrets: self.secrets.clone(),
            spending: Some(spending.clone()),
            sandboxing: self.sandboxing.clone(),
        };
        let outcome = engine
            .run(RunRequest {
                workspace: self.workspace.clone(),
                task: prompt_task,
                settings,
                base_ref: base.clone(),
                allow_dirty: true,
            })
            .await;
        drop(engine);

        let run = match outcome {
            Ok(run) => run,
            Err(e) => {
                let reason = format!("the tournament could not run: {e}");
                let p = Progress::Failed { task: task.id.clone(), reason: reason.clone(), retry_at: None };
                let result = AttemptResult::Failed { reason, retry: Retry::AfterBackoff, run_id: None };
                drop(heartbeat);
                return self.report(&lease, result, Usd::ZERO, p).await;
            }
        };
        let cost = spending.remainder(run.cost.total.known_cost);
        let run_id = run.run_id.to_string();
        let failed = |reason: String, retry: Retry| {
            let p = Progress::Failed { task: task.id.clone(), reason: reason.clone(), retry_at: None };
            (AttemptResult::Failed { reason, retry, run_id: Some(run_id.clone()) }, p)
        };
        let (result, progress) = match (run.status, &run.decision.winner) {
            _ if heartbeat.lost.is_cancelled() => return self.lease_lost(heartbeat, &lease, &run_id, cost).await,
            (RunStatus::Interrupted, _) => {
                let reason = "the plan run was interrupted".to_string();
                (
                    AttemptResult::Released { reason: reason.clone() },
                    Progress::Released { task: task.id.clone(), reason },
                )
            }
            (RunStatus::Succeeded, Some(winner)) => {
                // Renewed just now, the lease cannot run out while the commit is made: no
                // other attempt of this task can start meanwhile.
                if !matches!(self.plans.heartbeat(&lease, self.lease, self.now()).await, Ok(Some(_))) {
                    return self.lease_lost(heartbeat, &lease, &run_id, cost).await;
                }
                if let Some(commit) = self.committed_already(&repo, target, &task.id).await? {
                    drop(heartbeat);
                    let result = AttemptResult::Succeeded { run_id: Some(run_id), commit: Some(commit.clone()) };
                    return self.report(&lease, result, cost, Progress::Recovered { task: task.id, commit }).await;
                }
                if let Err(e) = self.branch_still_free(&repo, branch, &lease, cost).await {
                    drop(heartbeat);
                    return Err(e);
                }
                let patch = run.run_dir.join(paths::CANDIDATES).join(winner.as_str()).join(paths::PATCH);
                let message = integration::message(&task.title, &header.id, &task.id, &run_id, winner.as_str());
                let index = self.workspace.scratch_dir().join(format!(
                    "index-plan-{}-{}-{}",
                    header.id,
                    task.id.replace('/', "_"),
                    lease.fence
                ));
                let to = integration::Destination { plan: &header.id, task: &task.id, branch };
                match integration::commit_onto(&repo, &to, &patch, &message, &index).await {
                    Ok(c) => (
                        AttemptResult::Succeeded { run_id: Some(run_id.clone()), commit: Some(c.commit.clone()) },
                        Progress::Done { task: task.id.clone(), run: Some(run_id.clone()), commit: c.commit },
                    ),
                    Err(e @ (IntegrationError::Conflict { .. } | IntegrationError::Contended { .. })) => {
                        let next = if lease.attempt < lease.max_attempts {
                            "; retrying from the new tip"
                        } else {
                            "; no attempt is left"
                        };
                        failed(format!("{winner} of run {run_id} won, but {e}{next}"), Retry::Now)
                    }
                    Err(IntegrationError::Git(e)) => failed(
                        format!("{winner} of run {run_id} won, but committing it failed: {e}"),
                        Retry::AfterBackoff,
                    ),
                }
            }
            _ => failed(format!("run {run_id}: {}", run.decision.summary), Retry::AfterBackoff),
        };
        drop(heartbeat);
        self.report(&lease, result, cost, progress).await
    }

    /// Refuses to go on when the integration branch has been checked out since the pool
    /// started (committing would move it under that checkout): the task is given back
    /// without counting the attempt.
    async fn branch_still_free(&self, repo: &Git, branch: &str, lease: &Lease, cost: Usd) -> Result<(), PlanRunError> {
        let Some(worktree) = plan_branch::checked_out_in(repo, branch).await? else {
            return Ok(());
        };
        let reason = format!("its integration branch {branch} was checked out in {worktree}");
        let released = AttemptResult::Released { reason: reason.clone() };
        self.report(lease, released, cost, Progress::Released { task: lease.task_id.clone(), reason }).await?;
        Err(BranchError::CheckedOut {
            plan: lease.plan_id.clone(),
            branch: branch.to_string(),
            worktree: worktree.clone(),
            doing: "commits each task's winner onto it",
            remedy: format!(
                "the plan run stopped. Switch that worktree to another branch (`git -C {worktree} switch OTHER`) and run the plan again"
            ),
        }
        .into())
    }

    /// The task's winner on the integration branch, if a worker committed it already.
    async fn committed_already(&self, repo: &Git, target: &Target, task: &str) -> Result<Option<String>, GitError> {
        let header = &target.header;
        integration::find_task_commit(repo, &header.integration_branch, &target.base, &header.id, task).await
    }

    /// The lease was taken away while the tournament ran: nothing is committed; the report
    /// is refused, but what the run spent is charged.
    async fn lease_lost(
        &self,
        heartbeat: Heartbeat,
        lease: &Lease,
        run_id: &str,
        cost: Usd,
    ) -> Result<(), PlanRunError> {
        drop(heartbeat);
        self.tell(Progress::LeaseLost { task: lease.task_id.clone() });
        let failed = AttemptResult::Failed {
            reason: "its lease was lost".into(),
            retry: Retry::AfterBackoff,
            run_id: Some(run_id.into()),
        };
        match self.plans.finish(lease, failed, cost, self.now()).await {
            Ok(_) | Err(StoreError::StaleLease { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Reports an attempt; a refused (stale) report is not an error of the run.
    async fn report(
        &self,
        lease: &Lease,
        result: AttemptResult,
        cost: Usd,
        progress: Progress,
    ) -> Result<(), PlanRunError> {
        match self.plans.finish(lease, result, cost, self.now()).await {
            Ok(finished) => {
                let progress = match progress {
                    Progress::Failed { task, reason, .. } => {
                        Progress::Failed { task, reason, retry_at: finished.not_before }
                    }
                    other => other,
                };
                self.tell(progress);
                Ok(())
            }
            Err(StoreError::StaleLease { .. }) => {
                self.tell(Progress::LeaseLost { task: lease.task_id.clone() });
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_worker_ids_name_their_process() {
        assert_eq!(local_process("local:box:4242.977:1", "local:box:"), Some((4242, Some(977))));
        assert_eq!(local_process("local:box:4242:1", "local:box:"), Some((4242, None)));
        assert_eq!(local_process("local:other:4242:1", "local:box:"), None);
        assert_eq!(local_process("remote-7", "local:box:"), None);
        let me = local_worker_prefix();
        let host = me.rsplit_once(':').map(|(h, _)| format!("{h}:")).unwrap();
        let (pid, start) = local_process(&format!("{me}:1"), &host).unwrap();
        assert_eq!(pid as u32, std::process::id());
        assert!(start.is_some() && local_process_alive(pid, start));
        // The same pid with another start time is another process.
        assert!(!local_process_alive(pid, start.map(|s| s + 1)));
    }
}
