//! The tournament engine: one task, N independent candidates, evidence, a decision.
//!
//! Prepare (clean tree, base commit, leftovers pruned) → the baseline in a scratch worktree,
//! concurrently with a sliding pool of at most `parallel` candidates (worktree, include
//! copy, setup, agent, patch capture, apply check, verify commands) → evaluation against the
//! baseline → the decision (pure, in `arbiter-core`) → materialization → the run directory's
//! artifacts and reports. Cancellation (Ctrl-C, SIGTERM) kills every process group, records
//! what was gathered with status `interrupted`, and removes the worktrees.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arbiter_core::Clock;
use arbiter_core::artifact::{
    AgentOutcome, AgreementArtifact, Baseline, CandidateState, Evidence, Materialization, PatchEvidence,
    RankingArtifact, RunState, RunnerSummary, SCHEMA_VERSION, SelectionArtifact, SettingsSnapshot, paths,
};
use arbiter_core::cost::{self, CallRecord, CostSummary};
use arbiter_core::event::{Event, EventKind};
use arbiter_core::gate::{self, CommandOutcome};
use arbiter_core::ids::{CandidateId, RunId};
use arbiter_core::patch;
use arbiter_core::redact::Redactor;
use arbiter_core::report::{ReportInput, render_markdown};
use arbiter_core::selection::{self, CandidateFacts, Decision, PatchFacts};
use arbiter_core::settings::{ApplyMode, RunSettings};
use arbiter_core::status::{CandidateStatus, RunStatus};
use arbiter_core::task::Task;
use arbiter_core::time::Timestamp;
use arbiter_core::viewer::render_html;
use arbiter_store::{CandidateRecord, RunRecord, Store, StoreError};
use serde_json::json;
use tokio::sync::Semaphore;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use crate::agent::{AgentContext, AgentRunner};
use crate::capture;
use crate::events::EventLog;
use crate::gates::run_verify;
use crate::git::{Git, GitError};
use crate::include::{IncludeError, copy_includes};
use crate::materialize::{self, describe_paths};
use crate::process::{self, ShellCommand};
use crate::rundir::{JsonLines, RunDir};
use crate::runners;
use crate::workspace::Workspace;

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
}

/// Shared by the baseline and candidate tasks of one run.
struct RunCtx {
    run_id: RunId,
    repo: Git,
    workspace: Workspace,
    run_dir: RunDir,
    worktrees: PathBuf,
    base_commit: String,
    task: Task,
    settings: RunSettings,
    events: EventLog,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    cancel: CancellationToken,
    state: Mutex<RunState>,
    redactor: Redactor,
    process_env: Vec<(String, String)>,
    allow_dirty: bool,
    models: Option<Arc<runners::ModelAccess>>,
}

/// Everything one candidate produced, before evaluation against the baseline.
struct CandidateRun {
    id: CandidateId,
    index: usize,
    runner: String,
    status: CandidateStatus,
    setup_error: Option<String>,
    agent: AgentOutcome,
    patch: Option<PatchEvidence>,
    patch_text: String,
    gate_outcomes: Vec<CommandOutcome>,
    gates_skipped: Option<String>,
    calls: Vec<CallRecord>,
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
        let settings = &ctx.settings;

        let baseline_task = {
            let ctx = ctx.clone();
            tokio::spawn(async move { run_baseline(&ctx).await })
        };

        let n = settings.candidates.value as usize;
        let pool = Arc::new(Semaphore::new(settings.parallel.value.clamp(1, settings.candidates.value) as usize));
        let mut tasks = tokio::task::JoinSet::new();
        for index in 0..n {
            // A sliding pool: candidates start in order, each as soon as a slot frees up.
            let slot = tokio::select! {
                slot = pool.clone().acquire_owned() => slot.ok(),
                _ = ctx.cancel.cancelled() => None,
            };
            let ctx = ctx.clone();
            tasks.spawn(async move {
                let _slot = slot;
                run_candidate(&ctx, index).await
            });
        }
        let mut runs = Vec::with_capacity(n);
        while let Some(joined) = tasks.join_next().await {
            runs.push(joined.map_err(|e| EngineError::Join(e.to_string()))?);
        }
        runs.sort_by_key(|r| r.index);
        let baseline = baseline_task.await.map_err(|e| EngineError::Join(e.to_string()))?;

        finish(&ctx, runs, baseline).await
    }

    async fn prepare(&self, req: RunRequest) -> Result<RunCtx, EngineError> {
        let ws = req.workspace;
        let repo = Git::new(ws.repo_root().to_path_buf());
        if !req.allow_dirty {
            let dirty = repo.dirty_paths().await?;
            if !dirty.is_empty() {
                return Err(EngineError::Dirty(describe_paths(&dirty)));
            }
        }
        let base_commit = repo.resolve_commit(&req.base_ref).await?;
        ws.init(&repo).await?;
        let pruned = ws.prune_leftovers(&repo).await?;
        for id in &pruned {
            let _ = self.store.finish_run(id, RunStatus::Interrupted, None, None).await;
        }

        let started = self.clock.now();
        let run_id = RunId::new(started, self.run_suffix);
        let run_dir = RunDir::create(ws.run_dir(&run_id))?;
        let worktrees = ws.claim_run_worktrees(&run_id)?;
        let events = EventLog::new(
            run_id.clone(),
            JsonLines::open(&run_dir.path().join(paths::EVENTS))?,
            self.store.clone(),
            self.clock.clone(),
            self.observer.clone(),
        );
        let settings = req.settings;
        let state = RunState {
            schema_version: SCHEMA_VERSION,
            run_id: run_id.clone(),
            status: RunStatus::Running,
            phase: "candidates".into(),
            repo: ws.repo_root().display().to_string(),
            base_ref: req.base_ref.clone(),
            base_commit: base_commit.clone(),
            task: req.task.clone(),
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
        };
        run_dir.write_json(paths::STATE, &state)?;
        self.store
            .put_run(&RunRecord {
                id: run_id.clone(),
                repo: state.repo.clone(),
                task_title: req.task.title(),
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
        let redactor = Redactor::new(
            self.process_env
                .iter()
                .filter(|(k, _)| looks_secret(k))
                .map(|(_, v)| v.clone())
                .chain(self.secrets.iter().cloned()),
        );
        events
            .emit(
                EventKind::RunStarted,
                None,
                json!({
                    "task": req.task.title(),
                    "base_ref": req.base_ref,
                    "base_commit": base_commit,
                    "candidates": settings.candidates.value,
                    "parallel": state.settings.parallel,
                    "runners": settings.runners.iter().map(|r| r.name.clone()).collect::<Vec<_>>(),
                    "verify": settings.verify.value,
                    "allow_dirty": req.allow_dirty,
                }),
            )
            .await;
        if !pruned.is_empty() {
            events
                .emit(
                    EventKind::LeftoversPruned,
                    None,
                    json!({"runs": pruned.iter().map(|r| r.to_string()).collect::<Vec<_>>()}),
                )
                .await;
        }
        for i in 0..settings.candidates.value as usize {
            let id = CandidateId::from_index(i);
            events.emit(EventKind::CandidateQueued, Some(&id), json!({"runner": settings.label_for(i)})).await;
        }
        Ok(RunCtx {
            run_id,
            repo,
            workspace: ws,
            run_dir,
            worktrees,
            base_commit,
            task: req.task,
            settings,
            events,
            store: self.store.clone(),
            clock: self.clock.clone(),
            cancel: self.cancel.clone(),
            state: Mutex::new(state),
            redactor,
            process_env: self.process_env.clone(),
            allow_dirty: req.allow_dirty,
            models: self.models.clone(),
        })
    }
}

impl RunCtx {
    /// Changes the run state and rewrites `state.json`.
    fn update_state(&self, change: impl FnOnce(&mut RunState)) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        change(&mut state);
        if let Err(e) = self.run_dir.write_json(paths::STATE, &*state) {
            eprintln!("arbiter: warning: cannot write state.json: {e}");
        }
    }

    async fn set_candidate_status(&self, id: &CandidateId, status: CandidateStatus, exit_code: Option<i32>) {
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
        if let Some(r) = record {
            let _ = self.store.put_candidate(&r).await;
        }
    }

    /// The environment of verify and setup commands: the allowlist plus `env_passthrough`.
    fn command_env(&self) -> Vec<(String, String)> {
        crate::agent_env::build(self.process_env.clone(), &self.settings.env_passthrough.value, Vec::new())
    }

    fn scratch_index(&self, name: &str) -> PathBuf {
        self.workspace.scratch_dir().join(format!("index-{}-{name}", self.run_id))
    }
}

/// Creates a worktree at the base, copies the include-list and runs the setup command.
/// Returns a description of what failed, with the log to read.
async fn prepare_tree(ctx: &RunCtx, path: &Path, log_dir: &Path, who: Option<&CandidateId>) -> Result<(), String> {
    ctx.repo.worktree_add(path, &ctx.base_commit).await.map_err(|e| format!("cannot create the worktree: {e}"))?;
    ctx.events.emit(EventKind::WorktreeCreated, who, json!({"path": path.display().to_string()})).await;
    if !ctx.settings.include.value.is_empty() {
        let report =
            copy_includes(ctx.workspace.repo_root(), path, &ctx.settings.include.value).map_err(|e| e.to_string())?;
        ctx.events
            .emit(EventKind::IncludeCopied, who, json!({"copied": report.copied, "missing": report.missing}))
            .await;
    }
    if let Some(setup) = &ctx.settings.setup.value {
        let log = log_dir.join("setup.log");
        let exit = process::run_shell(
            &ShellCommand {
                command: setup.clone(),
                cwd: path.to_path_buf(),
                env: ctx.command_env(),
                stdout: log.clone(),
                stderr: log.clone(),
                timeout: Duration::from_secs(ctx.settings.setup_timeout_seconds.value),
            },
            &ctx.cancel,
        )
        .await
        .map_err(|e| format!("cannot start the setup command: {e}"))?;
        let _ = process::redact_file(&log, &ctx.redactor);
        ctx.events
            .emit(EventKind::SetupFinished, who, json!({"exit_code": exit.code, "timed_out": exit.timed_out, "duration_ms": exit.duration.as_millis() as u64}))
            .await;
        if !exit.success() {
            let rel = log.strip_prefix(ctx.run_dir.path()).unwrap_or(&log).display().to_string();
            let how = if exit.timed_out {
                format!("timed out after {}s", ctx.settings.setup_timeout_seconds.value)
            } else if exit.cancelled {
                "was interrupted".to_string()
            } else {
                format!("exited with code {}", exit.code.map_or("none".into(), |c| c.to_string()))
            };
            return Err(format!("the setup command `{setup}` {how} (see {rel})"));
        }
    }
    Ok(())
}

async fn remove_tree(ctx: &RunCtx, path: &Path) {
    if ctx.settings.keep_worktrees.value || !path.exists() {
        return;
    }
    if let Err(e) = ctx.repo.worktree_remove(path).await {
        ctx.events
            .emit(
                EventKind::Warning,
                None,
                json!({"message": format!("cannot remove worktree {}: {e}", path.display())}),
            )
            .await;
    }
}

/// Runs the verify commands once on the base commit, in a scratch worktree.
async fn run_baseline(ctx: &RunCtx) -> Baseline {
    let verify = &ctx.settings.verify.value;
    let mut baseline = Baseline {
        schema_version: SCHEMA_VERSION,
        base_commit: ctx.base_commit.clone(),
        error: None,
        commands: Vec::new(),
    };
    if verify.is_empty() {
        return baseline;
    }
    ctx.events.emit(EventKind::BaselineStarted, None, json!({"commands": verify})).await;
    let tree = ctx.worktrees.join("base");
    let log_dir = ctx.run_dir.path().join("baseline");
    let _ = std::fs::create_dir_all(&log_dir);
    match prepare_tree(ctx, &tree, &log_dir, None).await {
        Err(e) => baseline.error = Some(e),
        Ok(()) => {
            let timeout = Duration::from_secs(ctx.settings.verify_timeout_seconds.value);
            match run_verify(verify, &tree, &ctx.command_env(), timeout, &log_dir, &ctx.cancel, &ctx.redactor).await {
                Ok(outcomes) => baseline.commands = outcomes,
                Err(e) => baseline.error = Some(format!("cannot run the verify commands: {e}")),
            }
        }
    }
    remove_tree(ctx, &tree).await;
    ctx.events
        .emit(
            EventKind::BaselineFinished,
            None,
            json!({
                "error": baseline.error,
                "results": baseline.commands.iter().map(|c| json!({"command": c.command, "passed": c.passed(), "exit_code": c.exit_code})).collect::<Vec<_>>(),
            }),
        )
        .await;
    baseline
}

/// One candidate from worktree to captured, gated patch.
async fn run_candidate(ctx: &RunCtx, index: usize) -> CandidateRun {
    let id = CandidateId::from_index(index);
    let spec = ctx.settings.runner_for(index).clone();
    let label = ctx.settings.label_for(index);
    let chain = ctx.settings.backend_chain_for(index);
    let runner: Box<dyn AgentRunner> = match runners::from_spec(&spec, &chain, ctx.models.as_deref()) {
        Ok(r) => r,
        Err(why) => {
            let run = CandidateRun {
                id: id.clone(),
                index,
                runner: label.clone(),
                status: CandidateStatus::SetupFailed,
                setup_error: Some(why),
                agent: AgentOutcome::default(),
                patch: None,
                patch_text: String::new(),
                gate_outcomes: Vec::new(),
                gates_skipped: None,
                calls: Vec::new(),
            };
            ctx.set_candidate_status(&id, run.status, None).await;
            ctx.events
                .emit(EventKind::CandidateFinished, Some(&id), json!({"status": run.status, "error": run.setup_error}))
                .await;
            return run;
        }
    };
    let mut run = CandidateRun {
        id: id.clone(),
        index,
        runner: label.clone(),
        status: CandidateStatus::Cancelled,
        setup_error: None,
        agent: AgentOutcome::default(),
        patch: None,
        patch_text: String::new(),
        gate_outcomes: Vec::new(),
        gates_skipped: None,
        calls: Vec::new(),
    };
    if ctx.cancel.is_cancelled() {
        run.agent.cancelled = true;
        ctx.set_candidate_status(&id, CandidateStatus::Cancelled, None).await;
        return run;
    }
    ctx.set_candidate_status(&id, CandidateStatus::Preparing, None).await;
    ctx.events.emit(EventKind::CandidatePreparing, Some(&id), json!({"runner": label})).await;

    let cdir = match ctx.run_dir.candidate_dir(&id) {
        Ok(d) => d,
        Err(e) => {
            run.setup_error = Some(format!("cannot create the candidate directory: {e}"));
            run.status = CandidateStatus::SetupFailed;
            ctx.set_candidate_status(&id, run.status, None).await;
            return run;
        }
    };
    let prompt_file = cdir.join(paths::PROMPT);
    let tree = ctx.worktrees.join(id.as_str());
    let started_at = ctx.clock.now();
    let prepared = match std::fs::write(&prompt_file, ctx.task.candidate_prompt()) {
        Err(e) => Err(format!("cannot write the prompt file: {e}")),
        Ok(()) => prepare_tree(ctx, &tree, &cdir, Some(&id)).await,
    };
    if let Err(e) = prepared {
        run.status = if ctx.cancel.is_cancelled() { CandidateStatus::Cancelled } else { CandidateStatus::SetupFailed };
        run.setup_error = Some(e);
        write_runner_summary(ctx, &run, runner.as_ref(), &cdir, Some(started_at), &[]);
        remove_tree(ctx, &tree).await;
        ctx.set_candidate_status(&id, run.status, None).await;
        ctx.events
            .emit(EventKind::CandidateFinished, Some(&id), json!({"status": run.status, "error": run.setup_error}))
            .await;
        return run;
    }

    let mut passthrough = ctx.settings.env_passthrough.value.clone();
    passthrough.extend(spec.env_passthrough.iter().cloned());
    let env = crate::agent_env::build(
        ctx.process_env.clone(),
        &passthrough,
        vec![
            ("ARBITER_PROMPT_FILE".into(), prompt_file.display().to_string()),
            ("ARBITER_CANDIDATE_ID".into(), id.to_string()),
            ("ARBITER_CANDIDATE_INDEX".into(), index.to_string()),
            ("ARBITER_WORKTREE".into(), tree.display().to_string()),
            ("ARBITER_RUN_ID".into(), ctx.run_id.to_string()),
        ],
    );
    let agent_ctx = AgentContext {
        candidate: id.clone(),
        worktree: tree.clone(),
        candidate_dir: cdir.clone(),
        prompt_file,
        env: env.clone(),
        timeout: Duration::from_secs(ctx.settings.timeout_seconds.value),
        cancel: ctx.cancel.clone(),
        redactor: ctx.redactor.clone(),
        events: ctx.events.clone(),
    };
    ctx.set_candidate_status(&id, CandidateStatus::Running, None).await;
    ctx.events.emit(EventKind::AgentStarted, Some(&id), json!({"runner": label, "kind": runner.kind()})).await;
    match runner.run(&agent_ctx).await {
        Ok(report) => {
            run.agent = report.outcome;
            run.calls = report.calls;
        }
        Err(e) => {
            run.setup_error = Some(e.to_string());
        }
    }
    ctx.events
        .emit(
            EventKind::AgentFinished,
            Some(&id),
            json!({"exit_code": run.agent.exit_code, "signal": run.agent.signal, "timed_out": run.agent.timed_out, "cancelled": run.agent.cancelled, "duration_ms": run.agent.duration_ms}),
        )
        .await;
    run.status = if run.setup_error.is_some() {
        CandidateStatus::SetupFailed
    } else if run.agent.cancelled {
        CandidateStatus::Cancelled
    } else if run.agent.timed_out {
        CandidateStatus::TimedOut
    } else if run.agent.limit_reached.is_some() {
        CandidateStatus::LimitReached
    } else if run.agent.exit_code == Some(0) {
        CandidateStatus::Finished
    } else {
        CandidateStatus::AgentFailed
    };
    let final_status = run.status;
    write_runner_summary(ctx, &run, runner.as_ref(), &cdir, Some(started_at), &env);

    if run.setup_error.is_none() {
        ctx.set_candidate_status(&id, CandidateStatus::Evaluating, None).await;
        evaluate_candidate(ctx, &mut run, &tree, &cdir).await;
    }
    run.status = final_status;
    remove_tree(ctx, &tree).await;
    ctx.set_candidate_status(&id, run.status, run.agent.exit_code).await;
    let gates_passed = run.gate_outcomes.iter().filter(|o| o.passed()).count();
    ctx.events
        .emit(
            EventKind::CandidateFinished,
            Some(&id),
            json!({
                "status": run.status,
                "patch_empty": run.patch.as_ref().map(|p| p.empty),
                "applies_cleanly": run.patch.as_ref().map(|p| p.applies_cleanly),
                "gates_passed": gates_passed,
                "gates_total": run.gate_outcomes.len(),
                "gates_skipped": run.gates_skipped,
            }),
        )
        .await;
    run
}

/// Captures the patch, checks it applies to the base, and runs the verify commands.
async fn evaluate_candidate(ctx: &RunCtx, run: &mut CandidateRun, tree: &Path, cdir: &Path) {
    let wt = Git::new(tree.to_path_buf());
    let text = match capture::capture_patch(&wt, &ctx.base_commit).await {
        Ok(t) => t,
        Err(e) => {
            ctx.events
                .emit(EventKind::Warning, Some(&run.id), json!({"message": format!("cannot capture the patch: {e}")}))
                .await;
            run.gates_skipped = Some("no patch could be captured".into());
            return;
        }
    };
    let patch_path = cdir.join(paths::PATCH);
    if let Err(e) = std::fs::write(&patch_path, &text) {
        ctx.events
            .emit(EventKind::Warning, Some(&run.id), json!({"message": format!("cannot write patch.diff: {e}")}))
            .await;
        return;
    }
    let stats = patch::stats(&text);
    let hash = patch::normalized_hash(&text);
    let (applies_cleanly, apply_check_error) = if hash.is_none() {
        (false, None)
    } else {
        match capture::apply_check(&ctx.repo, &ctx.base_commit, &patch_path, &ctx.scratch_index(run.id.as_str())).await
        {
            Ok(Ok(())) => (true, None),
            Ok(Err(why)) => (false, Some(why)),
            Err(e) => (false, Some(e.to_string())),
        }
    };
    run.patch = Some(PatchEvidence {
        path: paths::PATCH.into(),
        bytes: text.len() as u64,
        empty: hash.is_none(),
        stats,
        normalized_hash: hash,
        applies_cleanly,
        apply_check_error,
    });
    run.patch_text = text;
    let p = run.patch.as_ref().map(|p| (p.empty, p.applies_cleanly, p.stats.files_changed, p.stats.weight()));
    ctx.events
        .emit(
            EventKind::PatchCaptured,
            Some(&run.id),
            json!({"empty": p.map(|p| p.0), "applies_cleanly": p.map(|p| p.1), "files_changed": p.map(|p| p.2), "changed_lines": p.map(|p| p.3)}),
        )
        .await;

    let verify = &ctx.settings.verify.value;
    if verify.is_empty() {
        return;
    }
    run.gates_skipped = if ctx.cancel.is_cancelled() {
        Some("the run was interrupted".into())
    } else if run.patch.as_ref().is_some_and(|p| p.empty) {
        Some("the patch is empty".into())
    } else if run.patch.as_ref().is_some_and(|p| !p.applies_cleanly) {
        Some("the patch does not apply to the base".into())
    } else {
        None
    };
    if run.gates_skipped.is_some() {
        return;
    }
    let timeout = Duration::from_secs(ctx.settings.verify_timeout_seconds.value);
    match run_verify(verify, tree, &ctx.command_env(), timeout, &cdir.join("gates"), &ctx.cancel, &ctx.redactor).await {
        Ok(outcomes) => {
            for o in &outcomes {
                ctx.events
                    .emit(
                        EventKind::GateFinished,
                        Some(&run.id),
                        json!({"command": o.command, "passed": o.passed(), "exit_code": o.exit_code, "timed_out": o.timed_out, "duration_ms": o.duration_ms}),
                    )
                    .await;
            }
            if outcomes.len() < verify.len() {
                run.gates_skipped = Some("the run was interrupted".into());
            }
            run.gate_outcomes = outcomes;
        }
        Err(e) => run.gates_skipped = Some(format!("cannot run the verify commands: {e}")),
    }
}

fn write_runner_summary(
    ctx: &RunCtx,
    run: &CandidateRun,
    runner: &dyn AgentRunner,
    cdir: &Path,
    started: Option<Timestamp>,
    env: &[(String, String)],
) {
    let size = |name: &str| std::fs::metadata(cdir.join(name)).map(|m| m.len()).unwrap_or(0);
    let summary = RunnerSummary {
        schema_version: SCHEMA_VERSION,
        candidate_id: run.id.clone(),
        runner: run.runner.clone(),
        kind: runner.kind().into(),
        command: ctx.redactor.redact(&runner.invocation()),
        status: run.status,
        agent: run.agent.clone(),
        started_at: started,
        finished_at: Some(ctx.clock.now()),
        stdout: paths::STDOUT.into(),
        stderr: paths::STDERR.into(),
        stdout_bytes: size(paths::STDOUT),
        stderr_bytes: size(paths::STDERR),
        env_names: env.iter().map(|(k, _)| k.clone()).collect(),
    };
    let _ = crate::rundir::write_atomic(
        &cdir.join(paths::RUNNER_SUMMARY),
        (serde_json::to_string_pretty(&summary).unwrap_or_default() + "\n").as_bytes(),
    );
}

/// Evaluation against the baseline, the decision, materialization and every artifact.
async fn finish(ctx: &RunCtx, runs: Vec<CandidateRun>, baseline: Baseline) -> Result<RunOutcome, EngineError> {
    let interrupted = ctx.cancel.is_cancelled();
    ctx.update_state(|s| s.phase = "evaluation".into());
    let has_verify = !ctx.settings.verify.value.is_empty();

    let mut evidence = Vec::with_capacity(runs.len());
    let mut facts = Vec::with_capacity(runs.len());
    for r in &runs {
        let (gates, summary) = if r.gate_outcomes.is_empty() && r.gates_skipped.is_some() || !has_verify {
            (Vec::new(), None)
        } else {
            let (g, s) = gate::compare(&r.gate_outcomes, &baseline.commands);
            (g, Some(s))
        };
        // A candidate whose gates stopped midway has no complete verdict.
        let summary = summary.filter(|_| r.gate_outcomes.len() == ctx.settings.verify.value.len());
        let cost = if r.calls.iter().all(|c| c.cost.is_some()) && !r.calls.is_empty() {
            Some(r.calls.iter().filter_map(|c| c.cost).sum())
        } else {
            None
        };
        let e = Evidence {
            schema_version: SCHEMA_VERSION,
            candidate_id: r.id.clone(),
            index: r.index,
            runner: r.runner.clone(),
            status: r.status,
            setup_error: r.setup_error.clone(),
            agent: r.agent.clone(),
            patch: r.patch.clone(),
            gates,
            gate_summary: summary.clone(),
            cost,
        };
        if let Ok(dir) = ctx.run_dir.candidate_dir(&r.id) {
            let _ = crate::rundir::write_atomic(
                &dir.join(paths::EVIDENCE),
                (serde_json::to_string_pretty(&e).unwrap_or_default() + "\n").as_bytes(),
            );
        }
        facts.push(CandidateFacts {
            id: r.id.clone(),
            index: r.index,
            runner: r.runner.clone(),
            status: r.status,
            agent_exit_code: r.agent.exit_code,
            setup_error: r.setup_error.clone(),
            patch: r.patch.as_ref().map(|p| PatchFacts {
                stats: p.stats.clone(),
                normalized_hash: p.normalized_hash.clone(),
                applies_cleanly: p.applies_cleanly,
                apply_check_error: p.apply_check_error.clone(),
            }),
            gates: summary,
            cost,
        });
        evidence.push(e);
    }
    if let Some(err) = &baseline.error {
        ctx.events.emit(EventKind::Warning, None, json!({"message": format!("the baseline could not run: {err}; every verify command must pass on each candidate")})).await;
    }

    let mut decision = selection::decide(&facts, has_verify);
    if interrupted {
        decision.winner = None;
        decision.summary =
            "the run was interrupted (Ctrl-C or SIGTERM) before it finished; nothing was selected or applied".into();
    }
    for rc in &decision.ranking {
        let r = runs.iter().find(|r| r.id == rc.candidate_id);
        let _ = ctx
            .store
            .put_candidate(&CandidateRecord {
                run_id: ctx.run_id.clone(),
                id: rc.candidate_id.clone(),
                index: rc.index,
                runner: rc.runner.clone(),
                status: rc.status,
                exit_code: r.and_then(|r| r.agent.exit_code),
                normalized_hash: rc.normalized_hash.clone(),
                eligible: Some(rc.eligible),
                rank: Some(rc.rank),
            })
            .await;
    }
    ctx.events
        .emit(
            EventKind::SelectionMade,
            None,
            json!({"winner": decision.winner, "summary": decision.summary, "eligible": decision.ranking.iter().filter(|r| r.eligible).count()}),
        )
        .await;

    let materialization = match (&decision.winner, interrupted) {
        (Some(w), false) => Some(materialize_winner(ctx, w).await),
        _ => None,
    };

    let cost = cost::summarize(runs.iter().flat_map(|r| r.calls.clone()).collect());
    let status = if interrupted {
        RunStatus::Interrupted
    } else if decision.winner.is_some() {
        RunStatus::Succeeded
    } else {
        RunStatus::Failed
    };
    let ranking = RankingArtifact::from_decision(&decision);
    let selection_artifact = SelectionArtifact::from_decision(&ctx.run_id, &decision, interrupted);
    let finished = ctx.clock.now();
    ctx.update_state(|s| {
        s.status = status;
        s.phase = "done".into();
        s.finished_at = Some(finished);
        s.winner = decision.winner.clone();
        s.materialization = materialization.clone();
        s.message = Some(decision.summary.clone());
        for c in s.candidates.iter_mut() {
            if let Some(e) = evidence.iter().find(|e| e.candidate_id == c.id) {
                c.gates = e.gate_summary.as_ref().map(|g| g.describe());
            }
        }
    });
    let write = |rel: &str, v: serde_json::Value| ctx.run_dir.write_json(rel, &v);
    ctx.run_dir.write_json(paths::BASELINE, &baseline)?;
    ctx.run_dir.write_json(paths::COST, &cost)?;
    ctx.run_dir.write_json(paths::RANKING, &ranking)?;
    ctx.run_dir.write_json(paths::AGREEMENT, &AgreementArtifact::from_decision(&decision))?;
    write(paths::PAIRWISE, json!([]))?;
    ctx.run_dir.write_json(paths::SELECTION, &selection_artifact)?;
    let state = ctx.state.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let report_input = ReportInput {
        state: &state,
        baseline: Some(&baseline),
        evidence: &evidence,
        ranking: &ranking,
        selection: &selection_artifact,
        cost: &cost,
    };
    ctx.run_dir.write_text(paths::REPORT, &render_markdown(&report_input))?;
    let patches: Vec<(CandidateId, String)> = runs.iter().map(|r| (r.id.clone(), r.patch_text.clone())).collect();
    ctx.run_dir.write_text(paths::VIEWER, &render_html(&report_input, &patches))?;

    // Worktrees go last: a crash before this point leaves them for the next run to prune.
    if ctx.settings.keep_worktrees.value {
        let _ = std::fs::remove_file(ctx.worktrees.join("owner.pid"));
        let _ = std::fs::write(ctx.worktrees.join("keep"), "kept by --keep-worktrees\n");
    } else {
        let _ = std::fs::remove_dir_all(&ctx.worktrees);
        let _ = ctx.repo.worktree_prune().await;
        ctx.events.emit(EventKind::WorktreesRemoved, None, json!({})).await;
    }
    ctx.store.finish_run(&ctx.run_id, status, decision.winner.as_ref(), Some(finished)).await?;
    ctx.events
        .emit(
            if interrupted { EventKind::RunInterrupted } else { EventKind::RunFinished },
            None,
            json!({"status": status, "winner": decision.winner, "run_dir": ctx.run_dir.path().display().to_string()}),
        )
        .await;
    Ok(RunOutcome {
        run_id: ctx.run_id.clone(),
        run_dir: ctx.run_dir.path().to_path_buf(),
        status,
        decision,
        materialization,
        cost,
        baseline,
        evidence,
    })
}

/// Applies the winner as the settings ask; failures are recorded, never fatal to the run.
async fn materialize_winner(ctx: &RunCtx, winner: &CandidateId) -> Materialization {
    let mode = ctx.settings.apply.value.clone();
    let patch = ctx.run_dir.path().join(paths::CANDIDATES).join(winner.as_str()).join(paths::PATCH);
    let result: Result<Option<String>, String> = match &mode {
        ApplyMode::None => Ok(None),
        ApplyMode::Worktree => match ctx.repo.dirty_paths().await {
            Ok(dirty) if !dirty.is_empty() && !ctx.allow_dirty => Err(format!(
                "the working tree changed during the run ({}); apply later with `arbiter apply {}`",
                describe_paths(&dirty),
                ctx.run_id
            )),
            Err(e) => Err(e.to_string()),
            Ok(_) => materialize::apply_to_worktree(&ctx.repo, &patch).await.map(|()| None).map_err(|e| e.to_string()),
        },
        ApplyMode::Branch(name) => {
            let message = format!("{}\n\narbiter run {} (candidate {winner})", ctx.task.title(), ctx.run_id);
            materialize::commit_to_new_branch(
                &ctx.repo,
                &ctx.base_commit,
                &patch,
                name,
                &ctx.scratch_index("branch"),
                &message,
            )
            .await
            .map(Some)
            .map_err(|e| e.to_string())
        }
    };
    let m = match result {
        Ok(commit) => Materialization { applied: mode != ApplyMode::None, mode, commit, error: None },
        Err(error) => Materialization { applied: false, mode, commit: None, error: Some(error) },
    };
    ctx.events
        .emit(
            if m.error.is_some() { EventKind::MaterializeFailed } else { EventKind::Materialized },
            Some(winner),
            json!({"mode": m.mode.to_string(), "applied": m.applied, "commit": m.commit, "error": m.error}),
        )
        .await;
    m
}
