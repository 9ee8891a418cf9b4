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

use crate::engine::{Engine, RunRequest};
use crate::git::{Git, GitError};
use crate::integration::{self, IntegrationError};
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
    #[error("a worker task failed: {0}")]
    Join(String),
}

/// `local:<host>:<pid>` for this process.
pub fn local_worker_prefix() -> String {
    let host =
        nix::unistd::gethostname().map(|h| h.to_string_lossy().into_owned()).unwrap_or_else(|_| "localhost".into());
    format!("local:{host}:{}", std::process::id())
}

/// The pid in a local worker id on `host`, if it is one.
fn local_pid(worker: &str, host_prefix: &str) -> Option<i32> {
    worker.strip_prefix(host_prefix)?.split(':').next()?.parse().ok()
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
        integration::ensure_branch(&repo, &header.integration_branch, &header.base_ref).await?;
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
            let header = header.clone();
            slots.spawn(async move { me.slot(&plan, &header, &format!("{}:{n}", me.worker_prefix)).await });
        }
        let mut first_error = None;
        while let Some(joined) = slots.join_next().await {
            match joined {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
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
            .filter(|w| {
                local_pid(w, &host_prefix).is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
            })
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
    async fn slot(&self, plan: &str, header: &PlanSpec, worker: &str) -> Result<(), PlanRunError> {
        loop {
            if self.cancel.is_cancelled() {
                return Ok(());
            }
            match self.plans.claim(plan, worker, self.lease, self.now()).await? {
                ClaimOutcome::Claimed(c) => self.attempt(header, *c).await?,
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

    /// Renews the lease until `stop`; cancels `lost` when the lease is taken away.
    fn heartbeat(
        &self,
        lease: &Lease,
        stop: CancellationToken,
        lost: CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let plans = self.plans.clone();
        let clock = self.clock.clone();
        let ttl = self.lease;
        let lease = lease.clone();
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
                        return;
                    }
                    // A database hiccup: keep trying until the lease runs out.
                    Err(_) => {}
                }
            }
        })
    }

    /// One claimed task: its tournament, the winner committed onto the integration branch,
    /// the report.
    async fn attempt(&self, header: &PlanSpec, claimed: Claimed) -> Result<(), PlanRunError> {
        let Claimed { lease, task } = claimed;
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
        let base_commit = repo.resolve_commit(&header.base_ref).await?;
        if let Some(commit) = integration::find_task_commit(&repo, branch, &base_commit, &header.id, &task.id).await? {
            let result = AttemptResult::Succeeded { run_id: None, commit: Some(commit.clone()) };
            return self.report(&lease, result, Usd::ZERO, Progress::Recovered { task: task.id, commit }).await;
        }
        let mut settings = match (self.settings_for)(header, &task) {
            Ok(s) => s,
            Err(why) => {
                let reason = format!("its run settings are invalid: {why}");
                let result = AttemptResult::Failed { reason: reason.clone(), retry: Retry::Never, run_id: None };
                let p = Progress::Failed { task: task.id.clone(), reason, retry_at: None };
                return self.report(&lease, result, Usd::ZERO, p).await;
            }
        };
        // The winner goes onto the integration branch, not into any working tree.
        settings.apply.value = arbiter_core::settings::ApplyMode::None;
        if lease.reserved > Usd::ZERO {
            // The attempt may spend what the claim reserved from the plan's budget, no more.
            settings.budget_usd.value = Some(lease.reserved);
        }
        let prompt_task = match Task::new(task.prompt(header), task.success_criteria(), settings.verify.value.clone()) {
            Ok(t) => t,
            Err(e) => {
                let result = AttemptResult::Failed { reason: e.to_string(), retry: Retry::Never, run_id: None };
                let p = Progress::Failed { task: task.id.clone(), reason: e.to_string(), retry_at: None };
                return self.report(&lease, result, Usd::ZERO, p).await;
            }
        };

        let attempt_cancel = self.cancel.child_token();
        let lease_lost = CancellationToken::new();
        let stop_beating = CancellationToken::new();
        let beat = self.heartbeat(&lease, stop_beating.clone(), lease_lost.clone());
        let watch_lost = {
            let (lost, cancel) = (lease_lost.clone(), attempt_cancel.clone());
            tokio::spawn(async move {
                lost.cancelled().await;
                cancel.cancel();
            })
        };
        let engine = Engine {
            store: self.runs.clone(),
            clock: self.clock.clone(),
            observer: None,
            cancel: attempt_cancel.clone(),
            run_suffix: crate::random_suffix(),
            process_env: self.process_env.clone(),
            models: self.models.clone(),
            secrets: self.secrets.clone(),
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

        let result = match outcome {
            Err(e) => {
                let reason = format!("the tournament could not run: {e}");
                (
                    AttemptResult::Failed { reason: reason.clone(), retry: Retry::AfterBackoff, run_id: None },
                    Usd::ZERO,
                    Progress::Failed { task: task.id.clone(), reason, retry_at: None },
                )
            }
            Ok(run) => {
                let cost = run.cost.total.known_cost;
                let run_id = run.run_id.to_string();
                match (run.status, &run.decision.winner) {
                    _ if lease_lost.is_cancelled() => {
                        stop_beating.cancel();
                        beat.abort();
                        watch_lost.abort();
                        self.tell(Progress::LeaseLost { task: task.id.clone() });
                        // The report is refused, but what the run spent is charged.
                        let failed = AttemptResult::Failed {
                            reason: "its lease was lost".into(),
                            retry: Retry::AfterBackoff,
                            run_id: Some(run_id),
                        };
                        return match self.plans.finish(&lease, failed, cost, self.now()).await {
                            Ok(_) | Err(StoreError::StaleLease { .. }) => Ok(()),
                            Err(e) => Err(e.into()),
                        };
                    }
                    (RunStatus::Interrupted, _) => {
                        let reason = "the plan run was interrupted".to_string();
                        (
                            AttemptResult::Released { reason: reason.clone() },
                            cost,
                            Progress::Released { task: task.id.clone(), reason },
                        )
                    }
                    (RunStatus::Succeeded, Some(winner)) => {
                        let patch = run.run_dir.join(paths::CANDIDATES).join(winner.as_str()).join(paths::PATCH);
                        let message = integration::message(&task.title, &header.id, &task.id, &run_id, winner.as_str());
                        let index = self.workspace.scratch_dir().join(format!(
                            "index-plan-{}-{}-{}",
                            header.id,
                            task.id.replace('/', "_"),
                            lease.fence
                        ));
                        match integration::commit_onto(&repo, branch, &patch, &message, &index).await {
                            Ok(c) => (
                                AttemptResult::Succeeded {
                                    run_id: Some(run_id.clone()),
                                    commit: Some(c.commit.clone()),
                                },
                                cost,
                                Progress::Done { task: task.id.clone(), run: Some(run_id), commit: c.commit },
                            ),
                            Err(e @ (IntegrationError::Conflict { .. } | IntegrationError::Contended { .. })) => {
                                let reason =
                                    format!("{winner} of run {run_id} won, but {e}; retrying from the new tip");
                                (
                                    AttemptResult::Failed {
                                        reason: reason.clone(),
                                        retry: Retry::Now,
                                        run_id: Some(run_id),
                                    },
                                    cost,
                                    Progress::Failed { task: task.id.clone(), reason, retry_at: None },
                                )
                            }
                            Err(IntegrationError::Git(e)) => return Err(e.into()),
                        }
                    }
                    _ => {
                        let reason = format!("run {run_id}: {}", run.decision.summary);
                        (
                            AttemptResult::Failed {
                                reason: reason.clone(),
                                retry: Retry::AfterBackoff,
                                run_id: Some(run_id),
                            },
                            cost,
                            Progress::Failed { task: task.id.clone(), reason, retry_at: None },
                        )
                    }
                }
            }
        };
        stop_beating.cancel();
        beat.abort();
        watch_lost.abort();
        let (result, cost, progress) = result;
        self.report(&lease, result, cost, progress).await
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
        assert_eq!(local_pid("local:box:4242:1", "local:box:"), Some(4242));
        assert_eq!(local_pid("local:other:4242:1", "local:box:"), None);
        assert_eq!(local_pid("remote-7", "local:box:"), None);
        assert!(local_worker_prefix().starts_with("local:"));
    }
}
