//! The worker loop: claim a unit of work from a [`Coordinator`] — a task's tournament, one
//! candidate of a spread tournament, or its evaluation — run it while its lease is renewed,
//! charge what it spends as it spends it, report how it ended; in as many slots as the
//! worker has, until nothing more can run (a `plan run`), until stopped (a worker service),
//! or after one unit (`--once`).
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
use arbiter_store::plans::Retry;
use arbiter_store::{Store, StoreError};
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use crate::budget::SpendingSink;
use crate::coordinator::{
    Assignment, Capabilities, Claim, Coordinator, CoordinatorError, NextClaim, Reported, Verdict, Work,
};
use crate::engine::{Engine, RunOutcome, RunRequest, UnitRequest};
use crate::runners::ModelAccess;
use crate::workspace::Workspace;

/// What a worker reports as it goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Progress {
    Claimed {
        task: String,
        /// `tournament`, a candidate (`c02`) or `evaluation`.
        unit: String,
        attempt: u32,
        max_attempts: u32,
        worker: String,
        base: String,
    },
    /// The task's tournament spreads over `units` units of run `run`.
    Spread {
        task: String,
        run: String,
        units: usize,
    },
    /// A candidate unit's results are in (`evaluation_ready`: it was the last); `failed`
    /// says why its candidate could not run at all, when it could not.
    UnitDone {
        task: String,
        unit: String,
        evaluation_ready: bool,
        failed: Option<String>,
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
    /// This worker could not run (or read) `unit` of the task, for a reason outside the
    /// work: it was given back for another worker (or, after its last try, given up).
    Refused {
        task: String,
        unit: String,
        reason: String,
    },
    /// Its report could not reach the coordinator: the work is left to its lease's expiry.
    Abandoned {
        task: String,
        reason: String,
    },
    /// Taken back from `worker`, which stopped renewing its lease (of the task, or of
    /// one of its units).
    Reclaimed {
        task: String,
        unit: Option<String>,
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

/// Each repository's runs in its own `.arbiter/arbiter.db` (a remote worker's repository
/// copies), opened once.
#[derive(Default)]
pub struct RunIndexPerRepository {
    opened: tokio::sync::Mutex<std::collections::HashMap<std::path::PathBuf, Arc<dyn Store>>>,
}

#[async_trait::async_trait]
impl RunIndex for RunIndexPerRepository {
    async fn for_workspace(&self, workspace: &Workspace) -> Result<Arc<dyn Store>, StoreError> {
        let mut opened = self.opened.lock().await;
        if let Some(store) = opened.get(workspace.repo_root()) {
            return Ok(store.clone());
        }
        // A directory that cannot be made shows up as a database that cannot be opened.
        let _ = std::fs::create_dir_all(workspace.dir());
        let store: Arc<dyn Store> = Arc::new(arbiter_store::sqlite::SqliteStore::open(&workspace.db_path()).await?);
        opened.insert(workspace.repo_root().to_path_buf(), store.clone());
        Ok(store)
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
    /// After one unit of work (or when cancelled, or when its plan is finished).
    OneUnit,
}

/// How long a slot waits before claiming again after it refused work it could not run
/// (doubling with each refusal in a row, up to [`MAX_REFUSAL_PAUSE`]): what stopped it
/// (its git, its sandbox) is likely to stop the next unit too, and other workers should
/// take the work meanwhile.
const FIRST_REFUSAL_PAUSE: Duration = Duration::from_secs(1);
const MAX_REFUSAL_PAUSE: Duration = Duration::from_secs(60);

/// The pause after `refusals` refusals in a row.
fn refusal_pause(refusals: u32) -> Duration {
    FIRST_REFUSAL_PAUSE.saturating_mul(1u32 << refusals.saturating_sub(1).min(6)).min(MAX_REFUSAL_PAUSE)
}

/// A worker: `slots` loops claiming as `<id>:<n>`.
pub struct Worker {
    pub coordinator: Arc<dyn Coordinator>,
    pub tournaments: Arc<Tournaments>,
    pub id: String,
    /// The plan it works on (`None`: any).
    pub plan: Option<String>,
    /// What it can run (the runners and backends it has).
    pub capabilities: Capabilities,
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

/// Passes the work's costs on to the plan as they are charged, and remembers what could not
/// be (it is reported with the work).
struct PlanSpending {
    coordinator: Arc<dyn Coordinator>,
    assignment: Assignment,
    unforwarded: std::sync::Mutex<Usd>,
}

#[async_trait::async_trait]
impl SpendingSink for PlanSpending {
    async fn spent(&self, amount: Usd) {
        if self.coordinator.charge(&self.assignment, amount).await.is_err() {
            let mut unforwarded = self.unforwarded.lock().unwrap_or_else(|p| p.into_inner());
            *unforwarded = *unforwarded + amount;
        }
    }
}

impl PlanSpending {
    /// What did not reach the plan as it was spent.
    fn unforwarded(&self) -> Usd {
        *self.unforwarded.lock().unwrap_or_else(|p| p.into_inner())
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

    /// One slot: claim, run, report, until the worker stops. A busy slot's report brings
    /// its next claim (a look, not a wait: an idle slot waits in a claim of its own, which
    /// stopping interrupts).
    async fn slot(&self, worker: &str) -> Result<(), CoordinatorError> {
        let mut next: Option<Claim> = None;
        let mut refusals = 0u32;
        loop {
            if refusals > 0 && next.is_none() {
                tokio::select! {
                    _ = self.cancel.cancelled() => return Ok(()),
                    _ = tokio::time::sleep(refusal_pause(refusals)) => {}
                }
            }
            let claim = match next.take() {
                Some(claim) => claim,
                None if self.cancel.is_cancelled() => return Ok(()),
                None => tokio::select! {
                    _ = self.cancel.cancelled() => return Ok(()),
                    claim = self.coordinator.claim(worker, &self.capabilities, self.plan.as_deref(), self.claim_wait) => claim?,
                },
            };
            match claim {
                // Claimed as the worker began to stop: given back at once.
                Claim::Assigned(assignment) if self.cancel.is_cancelled() => {
                    let released = Verdict::Released { reason: "the worker is stopping".into() };
                    return match self.coordinator.report(&assignment, released, Usd::ZERO, None).await {
                        Ok(_) | Err(CoordinatorError::Unreachable(_)) => Ok(()),
                        Err(e) => Err(e),
                    };
                }
                Claim::Assigned(assignment) => {
                    let then = (self.until != Until::OneUnit).then_some(NextClaim {
                        worker,
                        caps: &self.capabilities,
                        plan: self.plan.as_deref(),
                        wait: Duration::ZERO,
                    });
                    let attempted = self.attempt(*assignment, then).await?;
                    next = attempted.next;
                    refusals = if attempted.refused { refusals + 1 } else { 0 };
                    if self.until == Until::OneUnit {
                        return Ok(());
                    }
                }
                Claim::Refused { task, unit, reason } => {
                    self.tell(Progress::Refused { task, unit, reason });
                    refusals += 1;
                }
                Claim::Finished if self.until != Until::Stopped => return Ok(()),
                Claim::Finished | Claim::Idle => {}
            }
            // Only work is taken from a report's claim: nothing found, the slot claims
            // (and waits) on its own.
            if !matches!(next, Some(Claim::Assigned(_))) {
                next = None;
            }
        }
    }

    /// Starts renewing the assignment's lease; `cancel` (the work's) is cancelled when it is
    /// lost.
    fn heartbeat(&self, assignment: &Assignment, cancel: CancellationToken) -> Heartbeat {
        let lost = CancellationToken::new();
        let coordinator = self.coordinator.clone();
        let every = (coordinator.lease_ttl() / 3).max(Duration::from_millis(50));
        let beat = {
            let (assignment, lost) = (assignment.clone(), lost.clone());
            tokio::spawn(async move {
                let mut renewed = tokio::time::Instant::now();
                loop {
                    tokio::time::sleep(every).await;
                    match coordinator.heartbeat(&assignment).await {
                        Ok(true) => renewed = tokio::time::Instant::now(),
                        Ok(false) => break,
                        // Unreachable for now: keep trying while the lease may still be
                        // alive; past that, another worker may have the work already.
                        Err(_) if renewed.elapsed() < coordinator.lease_ttl() => {}
                        Err(_) => break,
                    }
                }
                lost.cancel();
                cancel.cancel();
            })
        };
        Heartbeat { lost, beat }
    }

    /// One unit of work, then its report, followed by the claim `then` when the worker
    /// goes on (and is not stopping, and could run the work): what that claim found.
    async fn attempt(
        &self,
        assignment: Assignment,
        then: Option<NextClaim<'_>>,
    ) -> Result<Attempted, CoordinatorError> {
        let lease = assignment.lease.clone();
        let task_id = assignment.task.id.clone();
        let unit = assignment.work.name();
        self.tell(Progress::Claimed {
            task: task_id.clone(),
            unit: unit.clone(),
            attempt: lease.attempt,
            max_attempts: lease.max_attempts,
            worker: lease.worker.clone(),
            base: assignment.base.clone(),
        });
        let work_cancel = self.cancel.child_token();
        let heartbeat = self.heartbeat(&assignment, work_cancel.clone());
        let spending = Arc::new(PlanSpending {
            coordinator: self.coordinator.clone(),
            assignment: assignment.clone(),
            unforwarded: Default::default(),
        });
        let done = self.work(&assignment, work_cancel, spending.clone()).await;
        let lost = heartbeat.lost.is_cancelled();
        drop(heartbeat);
        let verdict = match done.verdict {
            // Whatever the work made of it, work whose lease was taken away changes nothing;
            // its report only records the cost.
            _ if lost => Verdict::Failed {
                reason: "its lease was lost".into(),
                retry: Retry::AfterBackoff,
                run_id: done.run_id.clone(),
            },
            v => v,
        };
        let released_reason = match &verdict {
            Verdict::Released { reason } | Verdict::Refused { reason } => Some(reason.clone()),
            _ => None,
        };
        let refused = matches!(verdict, Verdict::Refused { .. });
        let failed = match &verdict {
            Verdict::Failed { reason, .. } => Some(reason.clone()),
            _ => None,
        };
        // What the report did is told before anything its claim does.
        let tell_reported = |reported: &Reported| {
            self.tell(match reported.clone() {
                Reported::Done { commit, recovered: true } => Progress::Recovered { task: task_id.clone(), commit },
                Reported::Done { commit, recovered: false } => {
                    Progress::Done { task: task_id.clone(), run: done.run_id.clone(), commit }
                }
                Reported::Failed { reason, retry_at } => Progress::Failed { task: task_id.clone(), reason, retry_at },
                Reported::Released => {
                    Progress::Released { task: task_id.clone(), reason: released_reason.clone().unwrap_or_default() }
                }
                Reported::UnitDone { evaluation_ready } => Progress::UnitDone {
                    task: task_id.clone(),
                    unit: unit.clone(),
                    evaluation_ready,
                    failed: failed.clone(),
                },
                Reported::Refused { given_up } => Progress::Refused {
                    task: task_id.clone(),
                    unit: unit.clone(),
                    reason: format!(
                        "{}{}",
                        released_reason.clone().unwrap_or_default(),
                        if given_up { " (its last try: given up)" } else { " (given to another worker)" }
                    ),
                },
                Reported::Stale => Progress::LeaseLost { task: task_id.clone() },
            })
        };
        let report = (verdict, spending.unforwarded(), done.dir.as_deref());
        // A worker that could not run this work takes no more at once: it pauses first.
        let answer = match then.filter(|_| !self.cancel.is_cancelled() && !refused) {
            Some(next) => self.coordinator.report_then_claim(&assignment, report, next, &tell_reported).await,
            None => {
                let (verdict, cost, dir) = report;
                let reported = self.coordinator.report(&assignment, verdict, cost, dir).await;
                if let Ok(r) = &reported {
                    tell_reported(r);
                }
                reported.map(|r| (r, None))
            }
        };
        let next = match answer {
            Ok((_, next)) => next,
            // The control plane stayed away: the lease runs out there and the work is
            // handed out again; this worker goes on with other work.
            Err(CoordinatorError::Unreachable(why)) => {
                self.tell(Progress::Abandoned { task: task_id.clone(), reason: why });
                None
            }
            Err(e) => return Err(e),
        };
        Ok(Attempted { next, refused })
    }

    /// Runs the assignment's work: its verdict, its run and directory when it made one.
    async fn work(&self, assignment: &Assignment, cancel: CancellationToken, spending: Arc<PlanSpending>) -> Done {
        let (header, task) = (&assignment.plan, &assignment.task);
        let settings = assignment.settings.clone();
        let prompt = match Task::new(task.prompt(header), task.success_criteria(), settings.verify.value.clone()) {
            Ok(t) => t,
            Err(e) => return Done::failed(e.to_string(), Retry::Never),
        };
        let workspace = match self.coordinator.checkout(assignment).await {
            Ok(w) => w,
            Err(e) => return Done::refused(format!("its repository could not be prepared: {e}")),
        };
        let store = match self.tournaments.runs.for_workspace(&workspace).await {
            Ok(s) => s,
            Err(e) => return Done::refused(format!("its runs cannot be recorded: {e}")),
        };
        let t = &self.tournaments;
        let engine = Engine {
            store,
            clock: t.clock.clone(),
            observer: None,
            cancel,
            run_suffix: crate::random_suffix(),
            process_env: t.process_env.clone(),
            models: t.models.clone(),
            secrets: t.secrets.clone(),
            spending: Some(spending),
            sandboxing: t.sandboxing.clone(),
        };
        let stopped =
            || Done { verdict: Verdict::Released { reason: "the worker was stopped".into() }, run_id: None, dir: None };
        let base = assignment.base.clone();
        match &assignment.work {
            Work::Tournament => {
                let request = RunRequest { workspace, task: prompt, settings, base_ref: base, allow_dirty: true };
                match engine.run(request).await {
                    Ok(run) => Done::of_run(run),
                    Err(_) if self.cancel.is_cancelled() => stopped(),
                    Err(e) => Done::refused(format!("the tournament could not run: {e}")),
                }
            }
            Work::Candidate { index, run_id } => {
                let request =
                    UnitRequest { workspace, run_id: run_id.clone(), task: prompt, settings, base_commit: base };
                match engine.run_candidate_unit(request, *index).await {
                    Ok(c) if c.interrupted => Done { dir: Some(c.dir), ..stopped() },
                    Ok(c) => Done {
                        verdict: Verdict::CandidateDone { status: c.status },
                        run_id: Some(run_id.to_string()),
                        dir: Some(c.dir),
                    },
                    Err(_) if self.cancel.is_cancelled() => stopped(),
                    Err(e) => Done::refused(format!("candidate {} could not run: {e}", assignment.work.name())),
                }
            }
            Work::Evaluation { run_id, lost } => {
                let request =
                    UnitRequest { workspace, run_id: run_id.clone(), task: prompt, settings, base_commit: base };
                match engine.evaluate(request, lost).await {
                    Ok(run) => Done::of_run(run),
                    Err(_) if self.cancel.is_cancelled() => stopped(),
                    Err(e) => Done::refused(format!("the evaluation could not run: {e}")),
                }
            }
        }
    }
}

/// What a unit of work came to: the claim its report brought, and whether this worker
/// refused the work (it pauses before claiming again).
struct Attempted {
    next: Option<Claim>,
    refused: bool,
}

/// How a unit of work ended, before it is reported.
struct Done {
    verdict: Verdict,
    run_id: Option<String>,
    /// What it produced in the run directory: the run's, or a candidate's.
    dir: Option<std::path::PathBuf>,
}

impl Done {
    fn failed(reason: String, retry: Retry) -> Done {
        Done { verdict: Verdict::Failed { reason, retry, run_id: None }, run_id: None, dir: None }
    }

    /// This worker could not run the work (not the work's own failure).
    fn refused(reason: String) -> Done {
        Done { verdict: Verdict::Refused { reason }, run_id: None, dir: None }
    }

    /// A finished tournament (or evaluation): its winner, or why it has none.
    fn of_run(run: RunOutcome) -> Done {
        let run_id = run.run_id.to_string();
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
        Done { verdict, run_id: Some(run_id), dir: Some(run.run_dir) }
    }
}
