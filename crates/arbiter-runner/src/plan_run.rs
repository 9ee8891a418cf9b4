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
use arbiter_core::time::Timestamp;
use arbiter_store::plans::PlanView;
use arbiter_store::units::UnitQueue;
use arbiter_store::{Store, StoreError};
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use crate::coordinator::{Capabilities, CoordinatorError, LocalCoordinator, OneRepository};
use crate::process::process_start;
use crate::runners::ModelAccess;
pub use crate::task_settings::TaskSettings;
pub use crate::worker::Progress;
use crate::worker::{OneRunIndex, Tournaments, Until, Worker};
use crate::workspace::Workspace;

/// Everything a plan run uses; effects are passed in, as for the [`crate::engine::Engine`].
pub struct PlanRunner {
    pub plans: Arc<dyn UnitQueue>,
    /// Where the tournaments' runs are indexed.
    pub runs: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
    pub cancel: CancellationToken,
    /// The repository the plan's tasks run in (its `.arbiter/` holds their runs).
    pub workspace: Workspace,
    /// Where each task's run settings come from.
    pub settings: Arc<TaskSettings>,
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
    /// Analyses failed attempts (the `analysis` role), when one is configured.
    pub analyst: Option<Arc<crate::failure_analysis::Analyst>>,
}

/// How a plan run ended.
pub struct PlanRunOutcome {
    pub view: PlanView,
    pub interrupted: bool,
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
    pub async fn run(self: &Arc<Self>, plan_id: &str, workers: usize) -> Result<PlanRunOutcome, CoordinatorError> {
        let view = self.plans.plan(plan_id).await?.ok_or_else(|| StoreError::NoPlan { id: plan_id.to_string() })?;
        let coordinator = Arc::new(
            LocalCoordinator::new(
                self.plans.clone(),
                self.clock.clone(),
                Arc::new(OneRepository(self.workspace.clone())),
                self.settings.clone(),
                self.lease,
                self.poll,
                self.progress.clone(),
            )
            .with_analyst(self.analyst.clone()),
        );
        // The branch is the plan's to move (created when it does not exist), or nothing runs.
        coordinator.open_plan(plan_id).await?;
        self.reclaim_dead_local_workers(&view).await?;

        let sweeper = {
            let me = self.clone();
            tokio::spawn(async move {
                let every = (me.lease / 2).max(Duration::from_millis(200));
                crate::sweeper::sweep_until(
                    &*me.plans,
                    every,
                    &me.cancel,
                    || me.now(),
                    |swept| {
                        for r in swept.tasks {
                            me.tell(Progress::Reclaimed { task: r.task_id, unit: None, worker: r.worker });
                        }
                        for r in swept.units {
                            me.tell(Progress::Reclaimed { task: r.task_id, unit: Some(r.name), worker: r.worker });
                        }
                    },
                )
                .await;
            })
        };
        let worker = Arc::new(Worker {
            coordinator: coordinator.clone(),
            tournaments: Arc::new(Tournaments {
                runs: Arc::new(OneRunIndex(self.runs.clone())),
                clock: self.clock.clone(),
                process_env: self.process_env.clone(),
                models: self.models.clone(),
                secrets: self.secrets.clone(),
                sandboxing: self.sandboxing.clone(),
            }),
            id: self.worker_prefix.clone(),
            plan: Some(plan_id.to_string()),
            // The plan's own machine: it runs whatever the plan's tasks name.
            capabilities: Capabilities::Any,
            slots: workers,
            until: Until::PlanFinished,
            cancel: self.cancel.clone(),
            claim_wait: self.poll,
            progress: self.progress.clone(),
        });
        let worked = worker.run().await;
        coordinator.flush_pushes().await;
        // An interrupted run does not wait for analyses (they are recorded as they end, or
        // not at all).
        if !self.cancel.is_cancelled() {
            coordinator.flush_analyses().await;
        }
        drop(worker);
        sweeper.abort();
        worked?;
        let view = self.plans.plan(plan_id).await?.ok_or_else(|| StoreError::NoPlan { id: plan_id.to_string() })?;
        Ok(PlanRunOutcome { view, interrupted: self.cancel.is_cancelled() })
    }

    /// Leases held by local workers of this host whose process is gone (of tasks, and of
    /// units) are taken back now (without counting their attempt or try) instead of waiting
    /// for them to expire.
    async fn reclaim_dead_local_workers(&self, view: &PlanView) -> Result<(), CoordinatorError> {
        let plan = &view.plan.header.id;
        let host_prefix = self.worker_prefix.rsplit_once(':').map(|(h, _)| format!("{h}:")).unwrap_or_default();
        let unit_workers = self.plans.running_units(plan).await?.into_iter().filter_map(|u| u.worker);
        let mut dead: Vec<String> = view
            .tasks
            .iter()
            .filter_map(|t| t.lease_owner.clone())
            .chain(unit_workers)
            .filter(|w| local_process(w, &host_prefix).is_some_and(|(pid, start)| !local_process_alive(pid, start)))
            .collect();
        dead.sort();
        dead.dedup();
        if dead.is_empty() {
            return Ok(());
        }
        for r in self.plans.release_workers(plan, &dead, "its worker process is gone", self.now()).await? {
            self.tell(Progress::Reclaimed { task: r.task_id, unit: None, worker: r.worker });
        }
        for r in self.plans.release_unit_workers(plan, &dead, self.now()).await? {
            self.tell(Progress::Reclaimed { task: r.task_id, unit: Some(r.name), worker: r.worker });
        }
        Ok(())
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
