//! Starting a run: the clean tree and the base commit, the sandbox the run enforces, the
//! workspace pool (and what crashed runs left in it), the run directory, its first records
//! and events, and the context the run's jobs share.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use arbiter_core::artifact::{CandidateState, RunState, SCHEMA_VERSION, SettingsSnapshot, paths};
use arbiter_core::event::Warning;
use arbiter_core::ids::{CandidateId, RunId};
use arbiter_core::redact::KnownSecrets;
use arbiter_core::settings::RunSettings;
use arbiter_core::status::{CandidateStatus, RunStatus};
use arbiter_store::{CandidateRecord, RunRecord};
use tokio::sync::watch;

use crate::budget::RunBudget;
use crate::confinement::Confinement;
use crate::events::EventLog;
use crate::git::Git;
use crate::materialize::describe_paths;

use super::{Engine, EngineError, NewRun, RunCtx, RunParts, RunRequest, load_rules, looks_secret};
use crate::pool::Pool;
use crate::rundir::{JsonLines, RunDir};
use crate::workspace::Workspace;

impl Engine {
    pub(super) async fn prepare(&self, req: RunRequest) -> Result<RunCtx, EngineError> {
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
    pub(super) async fn start_run(&self, new: NewRun) -> Result<RunCtx, EngineError> {
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
    pub(super) async fn open_workspaces(
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
    pub(super) async fn recover(&self, ws: &Workspace, repo: &Git, pool: &Pool) -> Vec<RunId> {
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
    pub(super) fn assemble(&self, p: RunParts) -> RunCtx {
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
