//! The tournament engine: one task, N independent candidates, evidence, a decision.
//!
//! Prepare (clean tree, base commit, the sandbox the run enforces, what crashed runs left
//! recovered) → the baseline in a workspace of its own, concurrently with the candidates
//! (a workspace from the repository's pool, include copy, setup, agent — every process in
//! the candidate's sandbox — patch capture, limits and secrets, apply check, verify
//! commands; an agent starts once the baseline is known, and none does when it shows the
//! checks cannot run on this machine, so such a run spends nothing): a sliding pool of at most `parallel` of them for a
//! tournament, or one at a time, cheapest first, until one passes its gates for an
//! escalation → evaluation against the baseline → cross-tests → the judge where the evidence
//! cannot decide → the decision (pure, in `arbiter-core`) → materialization → the run
//! directory's artifacts and reports. Cancellation (Ctrl-C, SIGTERM) kills every process
//! group, records what was gathered with status `interrupted`, and removes the worktrees. A
//! run budget stops agents and judges once it is spent; the run ends with what it has.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use arbiter_core::Clock;
use arbiter_core::artifact::{AgentOutcome, Baseline, Evidence, Materialization, PatchEvidence, RunState, paths};
use arbiter_core::canary::{CanaryPlan, Planned};
use arbiter_core::cost::{CallRecord, CostSummary};
use arbiter_core::crosstest::AuthoredTest;
use arbiter_core::event::Event;
use arbiter_core::gate::CommandOutcome;
use arbiter_core::ids::{CandidateId, RunId};
use arbiter_core::redact::{KnownSecrets, Redactor};
use arbiter_core::selection::Decision;
use arbiter_core::settings::RunSettings;
use arbiter_core::status::{CandidateStatus, RunStatus};
use arbiter_core::task::Task;
use arbiter_store::{CandidateRecord, Store, StoreError};
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::{Semaphore, watch};
use tokio_util::sync::CancellationToken;

use crate::budget::RunBudget;
use crate::confinement::{Confinement, Sandboxing};
use crate::events::EventLog;
use crate::git::{Git, GitError};
use crate::include::IncludeError;
use crate::pool::{Pool, PoolError};
use crate::rundir::RunDir;
use crate::runners;
use crate::workspace::Workspace;

mod baseline;
mod candidate;
mod crosstests;
mod finish;
mod gating;
mod repair;
mod resume;
mod start;
mod units;

use baseline::{BaselineRun, run_baseline};
use candidate::{run_candidate, skip_candidate};
use finish::finish;
use resume::Restart;

/// How long the agents wait for the baseline to tell whether the checks can run at all:
/// a command that cannot (a module or a program missing) fails within a second or two.
const CANNOT_RUN_GRACE: std::time::Duration = std::time::Duration::from_secs(5);
pub use units::{CandidateUnitOutcome, UnitRequest};

/// What to run.
pub struct RunRequest {
    pub workspace: Workspace,
    pub task: Task,
    pub settings: RunSettings,
    /// The base revision (`HEAD` unless `--base`).
    pub base_ref: String,
    /// Run even though the working tree has uncommitted changes (candidates start from the
    /// base commit; the changes are not part of it).
    pub allow_dirty: bool,
}

/// The services a run uses; everything with an effect on time, randomness or the world
/// outside the repository is passed in.
pub struct Engine {
    pub store: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
    /// Receives every event as it is recorded (progress display).
    pub observer: Option<UnboundedSender<Event>>,
    pub cancel: CancellationToken,
    /// The random part of the run id.
    pub run_suffix: u32,
    /// The environment agents' allowlisted environments are taken from.
    pub process_env: Vec<(String, String)>,
    /// Model access for the built-in agent (`None` when no backend is configured).
    pub models: Option<Arc<runners::ModelAccess>>,
    /// Secret values known to the caller (backend keys from the secrets file), redacted
    /// from everything the run writes, like secret-looking environment variables.
    pub secrets: Vec<String>,
    /// Receives each cost as it is charged (a plan's budget); `None` for a plain run.
    pub spending: Option<Arc<dyn crate::budget::SpendingSink>>,
    /// The sandbox candidates run in, and arbiter's own directories (the workspace pools).
    pub sandboxing: Arc<Sandboxing>,
}

/// A run that could not start, or stopped for a reason outside the candidates.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(
        "the working tree has uncommitted changes ({0}); commit or stash them first, or pass --allow-dirty to base the candidates on HEAD without them"
    )]
    Dirty(String),
    #[error(transparent)]
    Git(#[from] GitError),
    #[error(transparent)]
    Include(#[from] IncludeError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    #[error("an internal task failed: {0}")]
    Join(String),
    #[error("run {run} cannot be resumed: {why}")]
    NotResumable { run: String, why: String },
    #[error(transparent)]
    Sandbox(#[from] arbiter_core::sandbox::SandboxUnavailable),
    #[error(transparent)]
    Pool(#[from] PoolError),
    #[error(transparent)]
    Rules(#[from] crate::rules::RulesError),
}

/// How a run ended.
pub struct RunOutcome {
    pub run_id: RunId,
    pub run_dir: PathBuf,
    pub status: RunStatus,
    pub decision: Decision,
    pub materialization: Option<Materialization>,
    pub cost: CostSummary,
    pub baseline: Baseline,
    pub evidence: Vec<Evidence>,
    /// How candidates and money were spent (strategy, escalation, budget).
    pub spending: arbiter_core::artifact::SpendingReport,
    /// How the candidates were checked, in words (see `RunSettings::verification`).
    pub verification: String,
}

/// Shared by the baseline and candidate tasks of one run.
pub(super) struct RunCtx {
    pub(super) run_id: RunId,
    pub(super) repo: Git,
    pub(super) workspace: Workspace,
    pub(super) run_dir: RunDir,
    /// The repository's pool of workspaces.
    pub(super) pool: Pool,
    /// What every process a candidate starts runs under.
    pub(super) confinement: Confinement,
    /// The canary of each verify command, planned from the base commit.
    pub(super) canaries: Vec<Planned>,
    /// The baseline, once it is known (published once): which verify commands' canaries the
    /// base's run showed failing (a candidate's gates plant only those), and whether the
    /// checks can run at all (a candidate starts its agent only when they can).
    pub(super) known_baseline: watch::Receiver<Option<Arc<Baseline>>>,
    baseline_sender: Mutex<Option<watch::Sender<Option<Arc<Baseline>>>>>,
    pub(super) base_commit: String,
    pub(super) task: Task,
    pub(super) settings: RunSettings,
    pub(super) events: EventLog,
    pub(super) store: Arc<dyn Store>,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) cancel: CancellationToken,
    pub(super) state: Mutex<RunState>,
    /// Every secret value arbiter knows, searched for in patches.
    pub(super) secrets: KnownSecrets,
    pub(super) redactor: Redactor,
    pub(super) process_env: Vec<(String, String)>,
    pub(super) allow_dirty: bool,
    pub(super) models: Option<Arc<runners::ModelAccess>>,
    pub(super) budget: Arc<RunBudget>,
    /// The one candidate a candidate unit runs: the run's state, its records in the store
    /// and the gates are the evaluation's.
    pub(super) unit: Option<CandidateId>,
    /// The rule book of the rules gate, when the settings turn it on.
    pub(super) rules: Option<Arc<arbiter_core::rules::RuleBook>>,
    /// The base as the gates' test machinery is derived from, learnt once (see [`Self::base_facts`]).
    base_facts: tokio::sync::OnceCell<Result<crate::gates::BaseFacts, String>>,
}

/// Everything one candidate produced, before evaluation against the baseline.
pub(super) struct CandidateRun {
    pub(super) id: CandidateId,
    pub(super) index: usize,
    pub(super) runner: String,
    pub(super) status: CandidateStatus,
    pub(super) setup_error: Option<String>,
    pub(super) agent: AgentOutcome,
    pub(super) patch: Option<PatchEvidence>,
    pub(super) patch_text: String,
    pub(super) gate_outcomes: Vec<CommandOutcome>,
    pub(super) gates_skipped: Option<String>,
    pub(super) protected_changes: Vec<String>,
    pub(super) calls: Vec<CallRecord>,
    /// Why it never started.
    pub(super) not_run: Option<String>,
    /// Test files it added or changed, as it left them (for cross-tests).
    pub(super) authored_tests: Vec<AuthoredTest>,
    /// Its workspace, kept until the cross-tests are done.
    pub(super) tree: Option<crate::pool::Slot>,
    /// The runner's own record of the agent run (`agent_cli` in `runner_summary.json`).
    pub(super) agent_details: Option<serde_json::Value>,
    /// What disqualifies it (a secret in its patch, tampered checks, a limit broken).
    pub(super) violations: Vec<arbiter_core::selection::Violation>,
    /// Its patch is captured but its gates are not run yet (a candidate unit leaves them to
    /// the evaluation).
    pub(super) gates_pending: bool,
    /// Secrets its runner gave its agent beyond the run's own (see `AgentReport::secrets`).
    pub(super) agent_secrets: KnownSecrets,
}

/// The rule book of a run whose settings turn the rules gate on, read from the user's
/// repository (never from a candidate's tree: a patch cannot change the rules it is judged
/// by); the Python parser is tried once when a check needs it, so a missing one stops the run
/// before anything is spent.
pub(super) async fn load_rules(
    settings: &RunSettings,
    ws: &Workspace,
) -> Result<Option<Arc<arbiter_core::rules::RuleBook>>, EngineError> {
    if !settings.rules.value {
        return Ok(None);
    }
    let options = &settings.rule_options;
    let book = crate::rules::load_book(ws.repo_root(), options)?;
    if book.needs_syntax_tree(arbiter_core::rules::Language::Python, options.groups.as_deref()) {
        crate::rules::parse_python(&options.python, &[("probe.py".into(), String::new())]).await?;
    }
    Ok(Some(Arc::new(book)))
}

/// Names whose values are secrets, wherever they appear.
fn looks_secret(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    ["KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "DATABASE_URL"].iter().any(|s| n.contains(s))
}

impl Engine {
    /// Runs the tournament to its end (or to its interruption).
    pub async fn run(&self, req: RunRequest) -> Result<RunOutcome, EngineError> {
        let ctx = Arc::new(self.prepare(req).await?);
        drive(ctx, None, BTreeMap::new(), BTreeMap::new()).await
    }

    /// Continues an interrupted run under its own id: finished candidates are kept, the
    /// others start again (see [`resume`]), then evaluation runs as usual.
    pub async fn resume(&self, workspace: Workspace, run_id: &RunId) -> Result<RunOutcome, EngineError> {
        let (ctx, kept, restarts, saved_baseline) = self.reopen(workspace, run_id).await?;
        drive(Arc::new(ctx), saved_baseline, kept, restarts).await
    }
}

/// What a new or reopened run is made of.
struct RunParts {
    run_id: RunId,
    repo: Git,
    workspace: Workspace,
    run_dir: RunDir,
    pool: Pool,
    confinement: Confinement,
    canaries: Vec<Planned>,
    base_commit: String,
    task: Task,
    settings: RunSettings,
    events: EventLog,
    state: RunState,
    allow_dirty: bool,
    unit: Option<CandidateId>,
    rules: Option<Arc<arbiter_core::rules::RuleBook>>,
}

/// What [`Engine::start_run`] records.
struct NewRun {
    run_id: RunId,
    workspace: Workspace,
    repo: Git,
    base_ref: String,
    base_commit: String,
    task: Task,
    settings: RunSettings,
    allow_dirty: bool,
    /// Runs found dead holding workspaces (said in the first events).
    pruned: Vec<RunId>,
    pool: Pool,
    confinement: Confinement,
    /// When the run began, when that was before this process took it on (its units').
    started: Option<arbiter_core::time::Timestamp>,
}

/// Every candidate in a sliding pool of at most `parallel`, started in order.
/// The candidates (all at once, or one at a time for an escalating strategy) beside the
/// baseline (`saved` when a resumed run kept it), then evaluation.
async fn drive(
    ctx: Arc<RunCtx>,
    saved: Option<Baseline>,
    kept: BTreeMap<usize, CandidateRun>,
    restarts: BTreeMap<usize, Restart>,
) -> Result<RunOutcome, EngineError> {
    let baseline_task = {
        let ctx = ctx.clone();
        tokio::spawn(async move {
            match saved {
                Some(baseline) => {
                    ctx.publish_baseline(&baseline);
                    BaselineRun { baseline, tree: None }
                }
                None => run_baseline(&ctx).await,
            }
        })
    };
    let (runs, baseline) = if ctx.settings.strategy.value.escalates() {
        escalate(&ctx, baseline_task, kept, restarts).await?
    } else {
        tournament(&ctx, baseline_task, kept, restarts).await?
    };
    finish(&ctx, runs, baseline).await
}

async fn tournament(
    ctx: &Arc<RunCtx>,
    baseline_task: tokio::task::JoinHandle<BaselineRun>,
    mut kept: BTreeMap<usize, CandidateRun>,
    mut restarts: BTreeMap<usize, Restart>,
) -> Result<(Vec<CandidateRun>, BaselineRun), EngineError> {
    let settings = &ctx.settings;
    let n = settings.candidates.value as usize;
    let pool = Arc::new(Semaphore::new(settings.parallel.value.clamp(1, settings.candidates.value) as usize));
    let mut tasks = tokio::task::JoinSet::new();
    let mut runs = Vec::with_capacity(n);
    for index in 0..n {
        if let Some(done) = kept.remove(&index) {
            if done.gates_pending {
                // A candidate unit's result: its gates run here, beside the others', in the
                // same sliding pool.
                let slot = tokio::select! {
                    slot = pool.clone().acquire_owned() => slot.ok(),
                    _ = ctx.cancel.cancelled() => None,
                };
                let ctx = ctx.clone();
                tasks.spawn(async move {
                    let _slot = slot;
                    gating::gate_kept(&ctx, done).await
                });
            } else {
                runs.push(done);
            }
            continue;
        }
        let restart = restarts.remove(&index);
        // A sliding pool: candidates start in order, each as soon as a slot frees up.
        let slot = tokio::select! {
            slot = pool.clone().acquire_owned() => slot.ok(),
            _ = ctx.cancel.cancelled() => None,
        };
        let ctx = ctx.clone();
        tasks.spawn(async move {
            let _slot = slot;
            run_candidate(&ctx, index, restart).await
        });
    }
    while let Some(joined) = tasks.join_next().await {
        runs.push(joined.map_err(|e| EngineError::Join(e.to_string()))?);
    }
    runs.sort_by_key(|r| r.index);
    let baseline = baseline_task.await.map_err(|e| EngineError::Join(e.to_string()))?;
    Ok((runs, baseline))
}

/// One candidate at a time, in the order the strategy chose (cheapest first), until one
/// passes its gates; the rest are skipped. The baseline runs alongside the first candidate
/// and is awaited before the first verdict.
async fn escalate(
    ctx: &Arc<RunCtx>,
    baseline_task: tokio::task::JoinHandle<BaselineRun>,
    mut kept: BTreeMap<usize, CandidateRun>,
    mut restarts: BTreeMap<usize, Restart>,
) -> Result<(Vec<CandidateRun>, BaselineRun), EngineError> {
    let n = ctx.settings.candidates.value as usize;
    let mut pending = Some(baseline_task);
    let mut baseline: Option<BaselineRun> = None;
    let mut runs = Vec::with_capacity(n);
    let mut passed: Option<CandidateId> = None;
    for index in 0..n {
        if let Some(winner) = &passed {
            let why = format!("{winner} already passed its gates (escalate stops at the first that passes)");
            runs.push(skip_candidate(ctx, index, why).await);
            continue;
        }
        let run = match kept.remove(&index) {
            Some(done) => done,
            None => run_candidate(ctx, index, restarts.remove(&index)).await,
        };
        if let Some(task) = pending.take() {
            baseline = Some(task.await.map_err(|e| EngineError::Join(e.to_string()))?);
        }
        let base = baseline.as_ref().map(|b| &b.baseline);
        if let Some(base) = base
            && run.not_run.is_none()
            && finish::passes(ctx, &run, base)
        {
            ctx.events
                .emit(
                    Some(&run.id),
                    &arbiter_core::event::EscalationStopped {
                        candidate: run.id.clone(),
                        runner: run.runner.clone(),
                        remaining: n - index - 1,
                    },
                )
                .await;
            passed = Some(run.id.clone());
        }
        runs.push(run);
    }
    let baseline = match (baseline, pending) {
        (Some(b), _) => b,
        (None, Some(task)) => task.await.map_err(|e| EngineError::Join(e.to_string()))?,
        (None, None) => return Err(EngineError::Join("the baseline was lost".into())),
    };
    Ok((runs, baseline))
}

impl RunCtx {
    /// Changes the run state and rewrites `state.json`.
    pub(super) fn update_state(&self, change: impl FnOnce(&mut RunState)) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        change(&mut state);
        if self.unit.is_some() {
            return;
        }
        if let Err(e) = self.run_dir.write_json(paths::STATE, &*state) {
            tracing::warn!("cannot write state.json: {e}");
        }
    }

    pub(super) async fn set_candidate_status(&self, id: &CandidateId, status: CandidateStatus, exit_code: Option<i32>) {
        let now = self.clock.now();
        let mut record = None;
        self.update_state(|s| {
            if let Some(c) = s.candidates.iter_mut().find(|c| &c.id == id) {
                c.status = status;
                if status == CandidateStatus::Preparing {
                    c.started_at = Some(now);
                }
                if status.is_terminal() {
                    c.finished_at = Some(now);
                    c.exit_code = exit_code;
                }
                record = Some(CandidateRecord {
                    run_id: self.run_id.clone(),
                    id: id.clone(),
                    index: c.index,
                    runner: c.runner.clone(),
                    status,
                    exit_code,
                    normalized_hash: None,
                    eligible: None,
                    rank: None,
                });
            }
        });
        if let Some(r) = record.filter(|_| self.unit.is_none()) {
            let _ = self.store.put_candidate(&r).await;
        }
    }

    /// The environment of verify and setup commands: the allowlist plus `env_passthrough`.
    /// How many gates a candidate has: its verify commands, then the rules gate when on.
    pub(super) fn gate_count(&self) -> usize {
        self.settings.verify.value.len() + usize::from(self.rules.is_some())
    }

    pub(super) fn command_env(&self) -> Vec<(String, String)> {
        crate::agent_env::build(self.process_env.clone(), &self.settings.env_passthrough.value, Vec::new())
    }

    /// The base's files and the gates' interpreter, learnt on first use and kept for the run.
    pub(super) async fn base_facts(&self) -> &Result<crate::gates::BaseFacts, String> {
        self.base_facts
            .get_or_init(|| async {
                let env = self.command_env();
                crate::gates::BaseFacts::learn(&self.repo, &self.base_commit, &self.settings.verify.value, &env).await
            })
            .await
    }

    /// The canary planned for verify command `index`, if any.
    pub(super) fn canary_plan(&self, index: usize) -> Option<&CanaryPlan> {
        match self.canaries.get(index) {
            Some(Planned::Plant(plan)) => Some(plan),
            _ => None,
        }
    }

    /// The test runner the `index`-th verify command is, when arbiter recognised one.
    pub(super) fn framework_of(&self, index: usize) -> Option<arbiter_core::canary::Framework> {
        match self.canaries.get(index) {
            Some(Planned::Plant(plan)) => Some(plan.framework),
            Some(Planned::NotApplicable { framework, .. }) => *framework,
            None => None,
        }
    }

    /// The baseline, once it is known (`None` when it never is: the run is interrupted
    /// first).
    async fn baseline_known(&self) -> Option<Arc<Baseline>> {
        let mut rx = self.known_baseline.clone();
        tokio::select! {
            known = rx.wait_for(Option::is_some) => known.ok().and_then(|b| b.clone()),
            _ = self.cancel.cancelled() => None,
        }
    }

    /// Which verify commands' canaries the base calibrated, once the baseline knows (all
    /// uncalibrated when it never says, or the run is interrupted first).
    pub(super) async fn calibration(&self) -> Vec<bool> {
        self.baseline_known().await.map(|b| baseline::calibration_of(&b)).unwrap_or_default()
    }

    /// Says why no agent may start when the checks cannot run on this machine: a run that
    /// can judge no candidate spends nothing on them. A command that cannot run says so at
    /// once (a missing module, a missing program), so the agents wait for the baseline at
    /// most [`CANNOT_RUN_GRACE`]: a baseline still running by then is running tests, and a
    /// slow suite does not hold every agent back (the run's end still reports a command
    /// that turned out not to run).
    pub(super) async fn checks_cannot_run(&self) -> Option<String> {
        // A candidate unit runs no baseline: the evaluation does, and says so.
        if self.unit.is_some() {
            return None;
        }
        let baseline = tokio::time::timeout(CANNOT_RUN_GRACE, self.baseline_known()).await.ok()??;
        let first = baseline.cannot_run.first()?;
        Some(format!("the verify command `{}` cannot run on this machine", first.command))
    }

    /// Makes the baseline known to the candidates (the first call counts).
    pub(super) fn publish_baseline(&self, baseline: &Baseline) {
        let sender = self.baseline_sender.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(tx) = sender {
            let _ = tx.send(Some(Arc::new(baseline.clone())));
        }
    }
}
