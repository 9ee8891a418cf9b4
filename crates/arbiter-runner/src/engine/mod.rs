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
use arbiter_core::artifact::{
    AgentOutcome, Baseline, CandidateState, Evidence, Materialization, PatchEvidence, RunState, SCHEMA_VERSION,
    SettingsSnapshot, paths,
};
use arbiter_core::canary::{CanaryPlan, Planned};
use arbiter_core::cost::{CallRecord, CostSummary};
use arbiter_core::crosstest::AuthoredTest;
use arbiter_core::event::{Event, Warning};
use arbiter_core::gate::CommandOutcome;
use arbiter_core::ids::{CandidateId, RunId};
use arbiter_core::redact::{KnownSecrets, Redactor};
use arbiter_core::selection::Decision;
use arbiter_core::settings::RunSettings;
use arbiter_core::status::{CandidateStatus, RunStatus};
use arbiter_core::task::Task;
use arbiter_store::{CandidateRecord, RunRecord, Store, StoreError};
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::{Semaphore, watch};
use tokio_util::sync::CancellationToken;

use crate::budget::RunBudget;
use crate::confinement::{Confinement, Sandboxing};
use crate::events::EventLog;
use crate::git::{Git, GitError};
use crate::include::IncludeError;
use crate::materialize::describe_paths;
use crate::pool::{Owner, Pool, PoolError};
use crate::rundir::{JsonLines, RunDir};
use crate::runners;
use crate::workspace::Workspace;

mod candidate;
mod crosstests;
mod finish;
mod repair;
mod resume;
mod units;

use candidate::{BaselineRun, run_baseline, run_candidate, skip_candidate};
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

    /// Reopens an interrupted run: its state, settings, event log and worktrees; what it
    /// kept of each candidate and how the others restart.
    #[allow(clippy::type_complexity)]
    async fn reopen(
        &self,
        ws: Workspace,
        run_id: &RunId,
    ) -> Result<(RunCtx, BTreeMap<usize, CandidateRun>, BTreeMap<usize, Restart>, Option<Baseline>), EngineError> {
        let not = |why: String| EngineError::NotResumable { run: run_id.to_string(), why };
        let run_dir = RunDir::open(ws.run_dir(run_id));
        let mut state: RunState = run_dir
            .read_text(paths::STATE)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .ok_or_else(|| not("its state.json is missing or unreadable".into()))?;
        match state.status {
            RunStatus::Running
                if crate::process::process_alive(state.pid as i32) && state.pid != std::process::id() =>
            {
                return Err(not(format!("it is still running (process {})", state.pid)));
            }
            RunStatus::Running | RunStatus::Interrupted => {}
            done => {
                return Err(not(format!(
                    "it already finished ({done}); `arbiter runs show {run_id}` shows its result"
                )));
            }
        }
        let settings: RunSettings = run_dir
            .read_text(paths::SETTINGS)
            .ok()
            .and_then(|t| serde_json::from_str::<arbiter_core::artifact::SettingsArtifact>(&t).ok())
            .map(|a| a.settings)
            .ok_or_else(|| {
                not("it has no settings.json (it was recorded by an older arbiter); start it again with `arbiter run`"
                    .into())
            })?;
        // Written again from here on: unsealed until it finishes and is sealed anew.
        run_dir.unseal()?;
        let repo = Git::new(ws.repo_root().to_path_buf());
        ws.init(&repo).await?;
        let (pool, confinement) = self.open_workspaces(&ws, &repo, &settings).await?;
        // Its own workspaces first, before the recovery of crashed runs takes them: they are
        // what the agents continue in (and the kept candidates' trees, for cross-tests).
        let mut own_slots = BTreeMap::new();
        for i in 0..settings.candidates.value as usize {
            let id = CandidateId::from_index(i);
            if let Some(slot) = pool.reacquire(&Owner::new(run_id.as_str(), id.as_str())) {
                own_slots.insert(i, slot);
            }
        }
        let pruned = self.recover(&ws, &repo, &pool).await;
        for id in pruned.iter().filter(|id| *id != run_id) {
            let _ = self.store.finish_run(id, RunStatus::Interrupted, None, None).await;
        }
        let events_path = run_dir.path().join(paths::EVENTS);
        let events = EventLog::new(
            run_id.clone(),
            JsonLines::open(&events_path)?,
            self.store.clone(),
            self.clock.clone(),
            self.observer.clone(),
        )
        .continuing_after(resume::last_event_seq(&run_dir.path().join(paths::EVENTS)));

        let mut kept = BTreeMap::new();
        let mut restarts = BTreeMap::new();
        for i in 0..settings.candidates.value as usize {
            let id = CandidateId::from_index(i);
            let slot = own_slots.remove(&i);
            match resume::load(run_dir.path(), &id) {
                Some(saved) => {
                    kept.insert(i, saved.into_run(run_dir.path(), slot));
                }
                None => {
                    let cdir = run_dir.path().join(paths::CANDIDATES).join(id.as_str());
                    restarts.insert(i, Restart { slot, session: resume::session_of(&cdir) });
                }
            }
        }
        let saved_baseline: Option<Baseline> =
            run_dir.read_text(paths::BASELINE).ok().and_then(|t| serde_json::from_str(&t).ok());

        state.status = RunStatus::Running;
        state.phase = "candidates".into();
        state.pid = std::process::id();
        state.message = None;
        state.finished_at = None;
        state.winner = None;
        for c in state.candidates.iter_mut() {
            if restarts.contains_key(&c.index) {
                c.status = CandidateStatus::Queued;
                c.finished_at = None;
                c.exit_code = None;
                c.gates = None;
            }
        }
        run_dir.write_json(paths::STATE, &state)?;
        self.store
            .put_run(&RunRecord {
                id: run_id.clone(),
                repo: state.repo.clone(),
                task_title: state.task.title(),
                status: RunStatus::Running,
                base_commit: state.base_commit.clone(),
                run_dir: run_dir.path().display().to_string(),
                candidates: settings.candidates.value,
                winner: None,
                started_at: state.started_at,
                finished_at: None,
            })
            .await?;
        events
            .emit(
                None,
                &arbiter_core::event::RunResumed {
                    kept: kept.values().map(|r: &CandidateRun| r.id.to_string()).collect(),
                    restarting: restarts
                        .iter()
                        .map(|(i, r)| arbiter_core::event::Restarting {
                            candidate: CandidateId::from_index(*i).to_string(),
                            reuses_worktree: r.slot.is_some(),
                            session: r.session.clone(),
                        })
                        .collect(),
                    baseline_kept: saved_baseline.is_some(),
                },
            )
            .await;
        let canaries = crate::canary::plan_for(&repo, &state.base_commit, &settings.verify.value).await;
        let rules = load_rules(&settings, &ws).await?;
        let ctx = self.assemble(RunParts {
            run_id: run_id.clone(),
            repo,
            workspace: ws,
            run_dir,
            pool,
            confinement,
            canaries,
            base_commit: state.base_commit.clone(),
            task: state.task.clone(),
            settings,
            events,
            state,
            allow_dirty: resume::started_allowing_dirty(&events_path),
            unit: None,
            rules,
        });
        resume::charge_kept(&ctx, kept.values()).await;
        Ok((ctx, kept, restarts, saved_baseline))
    }

    async fn prepare(&self, req: RunRequest) -> Result<RunCtx, EngineError> {
        let ws = req.workspace;
        let repo = Git::new(ws.repo_root().to_path_buf());
        if !req.allow_dirty {
            let dirty = req.settings.uncommitted_work(repo.dirty_paths().await?);
            if !dirty.is_empty() {
                return Err(EngineError::Dirty(describe_paths(&dirty)));
            }
        }
        let base_commit = repo.resolve_commit(&req.base_ref).await?;
        // A sandbox the settings require but the kernel lacks stops the run here, before
        // anything is written or spent.
        self.sandboxing.enforcement(req.settings.sandbox.value)?;
        ws.init(&repo).await?;
        let (pool, confinement) = self.open_workspaces(&ws, &repo, &req.settings).await?;
        let pruned = self.recover(&ws, &repo, &pool).await;
        for id in &pruned {
            let _ = self.store.finish_run(id, RunStatus::Interrupted, None, None).await;
        }

        let started = self.clock.now();
        let run_id = RunId::new(started, self.run_suffix);
        self.start_run(NewRun {
            run_id,
            workspace: ws,
            repo,
            base_ref: req.base_ref,
            base_commit,
            task: req.task,
            settings: req.settings,
            allow_dirty: req.allow_dirty,
            pruned,
            pool,
            confinement,
            started: None,
        })
        .await
    }

    /// Records a new run (its directory, state, settings, records in the store, first
    /// events) and assembles its context.
    async fn start_run(&self, new: NewRun) -> Result<RunCtx, EngineError> {
        let NewRun {
            run_id,
            workspace: ws,
            repo,
            base_ref,
            base_commit,
            task,
            settings,
            allow_dirty,
            pruned,
            pool,
            confinement,
            started,
        } = new;
        let rules = load_rules(&settings, &ws).await?;
        let canaries = crate::canary::plan_for(&repo, &base_commit, &settings.verify.value).await;
        let started = started.unwrap_or_else(|| self.clock.now());
        let run_dir = RunDir::create(ws.run_dir(&run_id))?;
        let events_path = run_dir.path().join(paths::EVENTS);
        let events = EventLog::new(
            run_id.clone(),
            JsonLines::open(&events_path)?,
            self.store.clone(),
            self.clock.clone(),
            self.observer.clone(),
        );
        let state = RunState {
            schema_version: SCHEMA_VERSION,
            run_id: run_id.clone(),
            status: RunStatus::Running,
            phase: "candidates".into(),
            repo: ws.repo_root().display().to_string(),
            base_ref: base_ref.clone(),
            base_commit: base_commit.clone(),
            task: task.clone(),
            settings: SettingsSnapshot::from(&settings),
            candidates: (0..settings.candidates.value as usize)
                .map(|i| CandidateState {
                    id: CandidateId::from_index(i),
                    index: i,
                    runner: settings.label_for(i),
                    status: CandidateStatus::Queued,
                    started_at: None,
                    finished_at: None,
                    exit_code: None,
                    gates: None,
                })
                .collect(),
            started_at: started,
            finished_at: None,
            winner: None,
            materialization: None,
            message: None,
            pid: std::process::id(),
            sandbox: Some(confinement.enforcement.clone()),
        };
        run_dir.write_json(paths::STATE, &state)?;
        run_dir.write_json(
            paths::SETTINGS,
            &arbiter_core::artifact::SettingsArtifact { schema_version: SCHEMA_VERSION, settings: settings.clone() },
        )?;
        self.store
            .put_run(&RunRecord {
                id: run_id.clone(),
                repo: state.repo.clone(),
                task_title: task.title(),
                status: RunStatus::Running,
                base_commit: base_commit.clone(),
                run_dir: run_dir.path().display().to_string(),
                candidates: settings.candidates.value,
                winner: None,
                started_at: started,
                finished_at: None,
            })
            .await?;
        for c in &state.candidates {
            self.store
                .put_candidate(&CandidateRecord {
                    run_id: run_id.clone(),
                    id: c.id.clone(),
                    index: c.index,
                    runner: c.runner.clone(),
                    status: CandidateStatus::Queued,
                    exit_code: None,
                    normalized_hash: None,
                    eligible: None,
                    rank: None,
                })
                .await?;
        }
        events
            .emit(
                None,
                &arbiter_core::event::RunStarted {
                    task: task.title().to_string(),
                    base_ref: base_ref.to_string(),
                    base_commit: base_commit.to_string(),
                    candidates: settings.candidates.value,
                    parallel: state.settings.parallel,
                    runners: settings.runners.iter().map(|r| r.name.clone()).collect(),
                    verify: settings.verify.value.clone(),
                    allow_dirty,
                    strategy: settings.strategy.value,
                    budget_usd: settings.budget_usd.value,
                    sandbox: Some(confinement.enforcement.clone()),
                },
            )
            .await;
        if !confinement.enforcement.filesystem {
            events.emit(None, &Warning::new(confinement.enforcement.describe())).await;
        }
        if !pruned.is_empty() {
            events
                .emit(
                    None,
                    &arbiter_core::event::LeftoversPruned { runs: pruned.iter().map(|r| r.to_string()).collect() },
                )
                .await;
        }
        for i in 0..settings.candidates.value as usize {
            let id = CandidateId::from_index(i);
            events.emit(Some(&id), &arbiter_core::event::CandidateQueued { runner: settings.label_for(i) }).await;
        }
        Ok(self.assemble(RunParts {
            run_id,
            repo,
            workspace: ws,
            run_dir,
            pool,
            confinement,
            canaries,
            base_commit,
            task,
            settings,
            events,
            state,
            allow_dirty,
            unit: None,
            rules,
        }))
    }

    /// The repository's workspace pool, and what the run's candidates run under (an error
    /// when the settings require a sandbox this kernel lacks).
    async fn open_workspaces(
        &self,
        ws: &Workspace,
        repo: &Git,
        settings: &RunSettings,
    ) -> Result<(Pool, Confinement), EngineError> {
        let pool = Pool::open(&self.sandboxing.dirs().cache, repo).await?;
        let facts = repo.facts().await?;
        let mut hidden: Vec<PathBuf> = vec![facts.git_dir, facts.common_dir];
        hidden.push(ws.dir());
        let home = self.process_env.iter().find(|(k, _)| k == "HOME").map(|(_, v)| PathBuf::from(v));
        // The whole repository: a candidate has its own checkout, and the user's working tree
        // holds what no candidate should read (ignored `.env` files, uncommitted work). Not
        // when the repository holds the home directory (a repository of dotfiles): that would
        // hide every toolchain installed there.
        let root = ws.repo_root().canonicalize().unwrap_or_else(|_| ws.repo_root().to_path_buf());
        if home.as_deref().and_then(|h| h.canonicalize().ok()).is_none_or(|h| !h.starts_with(&root)) {
            hidden.push(root);
        }
        let confinement = self.sandboxing.confine(
            settings.sandbox.value,
            home.as_deref(),
            hidden,
            vec![pool.objects().to_path_buf(), self.sandboxing.dirs().program_copies()],
            &settings.sandbox_paths.value,
        )?;
        Ok((pool, confinement))
    }

    /// Ends what crashed runs left behind — sandboxes whose arbiter died, worktrees of an
    /// older arbiter — and returns the runs that died holding workspaces, recorded as
    /// interrupted.
    async fn recover(&self, ws: &Workspace, repo: &Git, pool: &Pool) -> Vec<RunId> {
        self.sandboxing.end_orphans();
        ws.remove_legacy_worktrees(repo).await;
        let mut runs = Vec::new();
        for owner in pool.abandoned() {
            let Ok(id) = RunId::parse(&owner.run) else { continue };
            if !runs.contains(&id) && crate::workspace::mark_interrupted(&ws.run_dir(&id)) {
                runs.push(id);
            }
        }
        runs
    }

    /// The shared context of a run's tasks, from its parts and the engine's services.
    fn assemble(&self, p: RunParts) -> RunCtx {
        let mut secrets = KnownSecrets::default();
        for (name, value) in self.process_env.iter().filter(|(k, _)| looks_secret(k)) {
            secrets.add(format!("the value of ${name}"), value);
        }
        for value in &self.secrets {
            secrets.add("a backend key from the secrets file", value);
        }
        let redactor = secrets.redactor();
        let (baseline_sender, known_baseline) = watch::channel(None);
        let budget = Arc::new(RunBudget::new(
            p.settings.budget_usd.value,
            &self.cancel,
            p.events.clone(),
            self.spending.clone(),
        ));
        RunCtx {
            run_id: p.run_id,
            repo: p.repo,
            workspace: p.workspace,
            run_dir: p.run_dir,
            pool: p.pool,
            confinement: p.confinement,
            canaries: p.canaries,
            known_baseline,
            baseline_sender: Mutex::new(Some(baseline_sender)),
            base_commit: p.base_commit,
            task: p.task,
            settings: p.settings,
            events: p.events,
            store: self.store.clone(),
            clock: self.clock.clone(),
            cancel: self.cancel.clone(),
            state: Mutex::new(p.state),
            secrets,
            redactor,
            process_env: self.process_env.clone(),
            allow_dirty: p.allow_dirty,
            models: self.models.clone(),
            budget,
            base_facts: tokio::sync::OnceCell::new(),
            unit: p.unit,
            rules: p.rules,
        }
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
                    candidate::gate_kept(&ctx, done).await
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
        self.baseline_known().await.map(|b| candidate::calibration_of(&b)).unwrap_or_default()
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
