//! The worker loop: claim a task from a [`Coordinator`], run it as a tournament while its
//! lease is renewed, charge what it spends as it spends it, report how it ended; in as
//! many slots as the worker has, until nothing more can run (a `plan run`), until stopped
//! (a worker service), or after one task (`--once`).
//!
//! The same loop runs a local `plan run` (with [`crate::coordinator::LocalCoordinator`])
//! and a remote `arbiter worker run` (with the control plane's HTTP coordinator). A
//! cancellation (Ctrl-C, SIGTERM) stops every tournament and gives its task back at once,
//! without counting the attempt; an idle slot stops waiting at once.

use std::sync::Arc;
use std::time::Duration;

use arbiter_core::Clock;
use arbiter_core::artifact::paths;
use arbiter_core::money::Usd;
use arbiter_core::status::RunStatus;
use arbiter_core::task::Task;
use arbiter_core::time::Timestamp;
use arbiter_store::plans::{Lease, Retry};
use arbiter_store::{Store, StoreError};
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use crate::budget::SpendingSink;
use crate::coordinator::{Assignment, Claim, Coordinator, CoordinatorError, Reported, Verdict};
use crate::engine::{Engine, RunRequest};
use crate::runners::ModelAccess;
use crate::workspace::Workspace;

/// What a worker reports as it goes.
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

/// Where the runs of a workspace are indexed.
#[async_trait::async_trait]
pub trait RunIndex: Send + Sync {
    async fn for_workspace(&self, workspace: &Workspace) -> Result<Arc<dyn Store>, StoreError>;
}

/// Every run is indexed in one store.
pub struct OneRunIndex(pub Arc<dyn Store>);

#[async_trait::async_trait]
impl RunIndex for OneRunIndex {
    async fn for_workspace(&self, _workspace: &Workspace) -> Result<Arc<dyn Store>, StoreError> {
        Ok(self.0.clone())
    }
}

/// What the tournaments of a worker run with: the same for every task.
pub struct Tournaments {
    pub runs: Arc<dyn RunIndex>,
    pub clock: Arc<dyn Clock>,
    pub process_env: Vec<(String, String)>,
    pub models: Option<Arc<ModelAccess>>,
    pub secrets: Vec<String>,
    /// The sandbox candidates run in, and the workspace pools (shared by every slot).
    pub sandboxing: Arc<crate::confinement::Sandboxing>,
}

/// When a worker stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Until {
    /// When nothing more can run in its plan (a `plan run`).
    PlanFinished,
    /// When cancelled (a service).
    Stopped,
    /// After one task (or when cancelled, or when its plan is finished).
    OneTask,
}

/// A worker: `slots` loops claiming as `<id>:<n>`.
pub struct Worker {
    pub coordinator: Arc<dyn Coordinator>,
    pub tournaments: Arc<Tournaments>,
    pub id: String,
    /// The plan it works on (`None`: any).
    pub plan: Option<String>,
    pub slots: usize,
    pub until: Until,
    /// Stops every slot; a running tournament is interrupted and its task given back.
    pub cancel: CancellationToken,
    /// How long one claim waits for work before asking again.
    pub claim_wait: Duration,
    pub progress: Option<UnboundedSender<Progress>>,
}

/// Renews one attempt's lease until dropped; `lost` is cancelled when the lease is taken
/// away. Dropping it (on any way out of the attempt) stops the heartbeat.
struct Heartbeat {
    lost: CancellationToken,
    beat: tokio::task::JoinHandle<()>,
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.beat.abort();
    }
}

/// Passes the tournament's costs on to the plan as they are charged, and remembers how
/// much reached it (the rest is reported with the attempt).
struct PlanSpending {
    coordinator: Arc<dyn Coordinator>,
    lease: Lease,
    forwarded: std::sync::Mutex<Usd>,
}

#[async_trait::async_trait]
impl SpendingSink for PlanSpending {
    async fn spent(&self, amount: Usd) {
        if self.coordinator.charge(&self.lease, amount).await.is_ok() {
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

impl Worker {
    fn tell(&self, p: Progress) {
        if let Some(tx) = &self.progress {
            let _ = tx.send(p);
        }
    }

    /// Runs every slot until the worker stops; the first error a slot meets stops the
    /// others (their tasks are given back).
    pub async fn run(self: &Arc<Self>) -> Result<(), CoordinatorError> {
        let mut slots = tokio::task::JoinSet::new();
        for n in 1..=self.slots.max(1) {
            let me = self.clone();
            slots.spawn(async move { me.slot(&format!("{}:{n}", me.id)).await });
        }
        let mut first_error = None;
        while let Some(joined) = slots.join_next().await {
            let failed = match joined {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e),
                Err(e) => Some(CoordinatorError::Refused(format!("a worker slot failed: {e}"))),
            };
            if let Some(e) = failed {
                self.cancel.cancel();
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// One slot: claim, run, report, until the worker stops.
    async fn slot(&self, worker: &str) -> Result<(), CoordinatorError> {
        loop {
            if self.cancel.is_cancelled() {
                return Ok(());
            }
            let claim = tokio::select! {
                _ = self.cancel.cancelled() => return Ok(()),
                claim = self.coordinator.claim(worker, self.plan.as_deref(), self.claim_wait) => claim?,
            };
            match claim {
                Claim::Assigned(assignment) => {
                    self.attempt(*assignment).await?;
                    if self.until == Until::OneTask {
                        return Ok(());
                    }
                }
                Claim::Finished if self.until != Until::Stopped => return Ok(()),
                Claim::Finished | Claim::Idle => {}
            }
        }
    }

    /// Starts renewing `lease`; `cancel` (the attempt's) is cancelled when it is lost.
    fn heartbeat(&self, lease: &Lease, cancel: CancellationToken) -> Heartbeat {
        let lost = CancellationToken::new();
        let coordinator = self.coordinator.clone();
        let every = (coordinator.lease_ttl() / 3).max(Duration::from_millis(50));
        let beat = {
            let (lease, lost) = (lease.clone(), lost.clone());
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    match coordinator.heartbeat(&lease).await {
                        Ok(true) => {}
                        Ok(false) => {
                            lost.cancel();
                            cancel.cancel();
                            return;
                        }
                        // Unreachable for now: keep trying until the lease runs out (the
                        // coordinator says so when it answers again).
                        Err(_) => {}
                    }
                }
            })
        };
        Heartbeat { lost, beat }
    }

    /// One claimed task: its tournament, then the report.
    async fn attempt(&self, assignment: Assignment) -> Result<(), CoordinatorError> {
        let lease = assignment.lease.clone();
        let task_id = assignment.task.id.clone();
        self.tell(Progress::Claimed {
            task: task_id.clone(),
            attempt: lease.attempt,
            max_attempts: lease.max_attempts,
            worker: lease.worker.clone(),
            base: assignment.base.clone(),
        });
        let attempt_cancel = self.cancel.child_token();
        let heartbeat = self.heartbeat(&lease, attempt_cancel.clone());
        let spending = Arc::new(PlanSpending {
            coordinator: self.coordinator.clone(),
            lease: lease.clone(),
            forwarded: Default::default(),
        });
        let (verdict, cost, run_dir) = self.tournament(&assignment, attempt_cancel, spending.clone()).await;
        let lost = heartbeat.lost.is_cancelled();
        drop(heartbeat);
        let cost = spending.remainder(cost);
        let verdict = match verdict {
            // Whatever the tournament made of it, an attempt whose lease was taken away
            // commits nothing; its report only records the cost.
            _ if lost => Verdict::Failed {
                reason: "its lease was lost".into(),
                retry: Retry::AfterBackoff,
                run_id: run_dir.as_ref().map(|(id, _)| id.clone()),
            },
            v => v,
        };
        let run_id = match &verdict {
            Verdict::Won { run_id, .. } => Some(run_id.clone()),
            Verdict::Failed { run_id, .. } => run_id.clone(),
            Verdict::Released { .. } => None,
        };
        let released_reason = match &verdict {
            Verdict::Released { reason } => Some(reason.clone()),
            _ => None,
        };
        let dir = run_dir.as_ref().map(|(_, d)| d.as_path());
        let reported = self.coordinator.report(&assignment, verdict, cost, dir).await?;
        self.tell(match reported {
            Reported::Done { commit, recovered: true } => Progress::Recovered { task: task_id, commit },
            Reported::Done { commit, recovered: false } => Progress::Done { task: task_id, run: run_id, commit },
            Reported::Failed { reason, retry_at } => Progress::Failed { task: task_id, reason, retry_at },
            Reported::Released => Progress::Released { task: task_id, reason: released_reason.unwrap_or_default() },
            Reported::Stale => Progress::LeaseLost { task: task_id },
        });
        Ok(())
    }

    /// Runs the assignment's tournament: the verdict, what it cost, and its run (id and
    /// directory) when one was made.
    async fn tournament(
        &self,
        assignment: &Assignment,
        cancel: CancellationToken,
        spending: Arc<PlanSpending>,
    ) -> (Verdict, Usd, Option<(String, std::path::PathBuf)>) {
        let never = |reason: String| (Verdict::Failed { reason, retry: Retry::Never, run_id: None }, Usd::ZERO, None);
        let again =
            |reason: String| (Verdict::Failed { reason, retry: Retry::AfterBackoff, run_id: None }, Usd::ZERO, None);
        let (header, task) = (&assignment.plan, &assignment.task);
        let settings = assignment.settings.clone();
        let prompt = match Task::new(task.prompt(header), task.success_criteria(), settings.verify.value.clone()) {
            Ok(t) => t,
            Err(e) => return never(e.to_string()),
        };
        let workspace = match self.coordinator.checkout(assignment).await {
            Ok(w) => w,
            Err(e) => return again(format!("its repository could not be prepared: {e}")),
        };
        let store = match self.tournaments.runs.for_workspace(&workspace).await {
            Ok(s) => s,
            Err(e) => return again(format!("its runs cannot be recorded: {e}")),
        };
        let t = &self.tournaments;
        let engine = Engine {
            store,
            clock: t.clock.clone(),
            observer: None,
            cancel: cancel.clone(),
            run_suffix: crate::random_suffix(),
            process_env: t.process_env.clone(),
            models: t.models.clone(),
            secrets: t.secrets.clone(),
            spending: Some(spending),
            sandboxing: t.sandboxing.clone(),
        };
        let request =
            RunRequest { workspace, task: prompt, settings, base_ref: assignment.base.clone(), allow_dirty: true };
        let run = match engine.run(request).await {
            Ok(run) => run,
            Err(_) if self.cancel.is_cancelled() => {
                return (Verdict::Released { reason: "the worker was stopped".into() }, Usd::ZERO, None);
            }
            Err(e) => return again(format!("the tournament could not run: {e}")),
        };
        let run_id = run.run_id.to_string();
        let cost = run.cost.total.known_cost;
        let verdict = match (run.status, &run.decision.winner) {
            (RunStatus::Interrupted, _) => Verdict::Released { reason: "the worker was stopped".into() },
            (RunStatus::Succeeded, Some(winner)) => Verdict::Won {
                run_id: run_id.clone(),
                winner: winner.to_string(),
                patch: run.run_dir.join(paths::CANDIDATES).join(winner.as_str()).join(paths::PATCH),
            },
            _ => Verdict::Failed {
                reason: format!("run {run_id}: {}", run.decision.summary),
                retry: Retry::AfterBackoff,
                run_id: Some(run_id.clone()),
            },
        };
        (verdict, cost, Some((run_id, run.run_dir)))
    }
}
