//! The units of a tournament spread over several workers (a plan's task): one candidate
//! ([`Engine::run_candidate_unit`]) and the evaluation ([`Engine::evaluate`]).
//!
//! Every unit of a run writes into the same run directory (on the worker that runs it; a
//! control plane gathers the directories of remote units into its own). A candidate unit
//! runs its candidate as a tournament does — workspace, include copy, setup, agent, patch
//! capture, secrets, limits — and saves its results (`candidates/<id>/result.json`), with
//! its own event log (`candidates/<id>/unit_events.jsonl`); it leaves the gates to the
//! evaluation, which alone knows the baseline and its canaries. The evaluation records the
//! run (state, settings, the store), replays the candidates' events into the run's log,
//! runs the baseline and each candidate's gates — in the workspace the candidate left when
//! it ran on this machine and the pool still has it, otherwise in a fresh workspace with
//! its patch applied — then cross-tests, judges, the selection and the reports, as any run.
//! A candidate whose unit was lost counts as one that never ran, with the reason.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use arbiter_core::artifact::{RunState, SCHEMA_VERSION, SettingsSnapshot, paths};
use arbiter_core::event::{CandidateQueued, Event};
use arbiter_core::ids::{CandidateId, RunId};
use arbiter_core::money::Usd;
use arbiter_core::settings::RunSettings;
use arbiter_core::status::{CandidateStatus, RunStatus};
use arbiter_core::task::Task;

use super::candidate::{run_candidate, skip_candidate};
use super::{CandidateRun, Engine, EngineError, NewRun, RunOutcome, RunParts, drive, resume};
use crate::events::EventLog;
use crate::git::Git;
use crate::rundir::{JsonLines, RunDir};
use crate::workspace::Workspace;

/// One unit of a spread run.
pub struct UnitRequest {
    pub workspace: Workspace,
    /// The run every unit records into.
    pub run_id: RunId,
    pub task: Task,
    pub settings: RunSettings,
    /// The commit the candidates start from (it must be in the workspace's repository).
    pub base_commit: String,
}

/// How a candidate unit ended.
pub struct CandidateUnitOutcome {
    pub id: CandidateId,
    pub status: CandidateStatus,
    /// `candidates/<id>/` in the run directory: everything the unit produced.
    pub dir: PathBuf,
    /// What its calls cost (each was passed on as it was charged).
    pub cost: Usd,
    /// It was stopped (Ctrl-C, SIGTERM, a lost lease) before it finished.
    pub interrupted: bool,
}

impl Engine {
    /// Runs candidate `index` of a spread run; its gates are left to the evaluation.
    pub async fn run_candidate_unit(
        &self,
        req: UnitRequest,
        index: usize,
    ) -> Result<CandidateUnitOutcome, EngineError> {
        let ws = req.workspace;
        let repo = Git::new(ws.repo_root().to_path_buf());
        let base_commit = repo.resolve_commit(&req.base_commit).await?;
        self.sandboxing.enforcement(req.settings.sandbox.value)?;
        ws.init(&repo).await?;
        let (pool, confinement) = self.open_workspaces(&ws, &repo, &req.settings).await?;
        self.recover(&ws, &repo, &pool).await;
        let run_dir = RunDir::create(ws.run_dir(&req.run_id))?;
        let id = CandidateId::from_index(index);
        let cdir = run_dir.candidate_dir(&id)?;
        // What an earlier try of this unit left (its worker died) is replaced.
        for stale in [paths::RESULT, paths::UNIT_EVENTS] {
            let _ = std::fs::remove_file(cdir.join(stale));
        }
        let events = EventLog::file_only(
            req.run_id.clone(),
            JsonLines::open(&cdir.join(paths::UNIT_EVENTS))?,
            self.clock.clone(),
            self.observer.clone(),
        );
        let mut settings = req.settings;
        // The run's budget is shared: each candidate unit may spend its part of it.
        let candidates = i64::from(settings.candidates.value.max(1));
        settings.budget_usd.value = settings.budget_usd.value.map(|b| Usd::from_pico(b.pico() / candidates));
        let state = unit_state(&req.run_id, &ws, &base_commit, &req.task, &settings, self.clock.now(), &confinement);
        let rules = super::load_rules(&settings, &ws).await?;
        let ctx = Arc::new(self.assemble(RunParts {
            run_id: req.run_id,
            repo,
            workspace: ws,
            run_dir,
            pool,
            confinement,
            canaries: Vec::new(),
            base_commit,
            task: req.task,
            settings,
            events,
            state,
            allow_dirty: true,
            unit: Some(id.clone()),
            rules,
        }));
        ctx.events.emit(Some(&id), &CandidateQueued { runner: ctx.settings.label_for(index) }).await;
        let run = run_candidate(&ctx, index, None).await;
        let cost = run.calls.iter().filter_map(|c| c.cost).sum();
        Ok(CandidateUnitOutcome { id, status: run.status, dir: cdir, cost, interrupted: ctx.cancel.is_cancelled() })
    }

    /// The evaluation of a spread run whose candidate units are done: their directories are
    /// in the run directory; `lost` names the candidates whose unit was given up, and why.
    pub async fn evaluate(&self, req: UnitRequest, lost: &BTreeMap<usize, String>) -> Result<RunOutcome, EngineError> {
        let ws = req.workspace;
        let repo = Git::new(ws.repo_root().to_path_buf());
        let base_commit = repo.resolve_commit(&req.base_commit).await?;
        self.sandboxing.enforcement(req.settings.sandbox.value)?;
        ws.init(&repo).await?;
        let (pool, confinement) = self.open_workspaces(&ws, &repo, &req.settings).await?;
        let pruned = self.recover(&ws, &repo, &pool).await;
        let run_dir = ws.run_dir(&req.run_id);
        let n = req.settings.candidates.value as usize;
        // The candidates' own logs, merged in the order things happened.
        let mut replayed: Vec<Event> = (0..n)
            .flat_map(|i| {
                let file =
                    run_dir.join(paths::CANDIDATES).join(CandidateId::from_index(i).as_str()).join(paths::UNIT_EVENTS);
                crate::rundir::read_json_lines::<Event>(&file)
            })
            .collect();
        replayed.sort_by_key(|e| e.at);
        let ctx = self
            .start_run(NewRun {
                run_id: req.run_id,
                workspace: ws,
                repo,
                base_ref: base_commit.clone(),
                base_commit,
                task: req.task,
                settings: req.settings,
                allow_dirty: true,
                pruned,
                pool,
                confinement,
                started: replayed.first().map(|e| e.at),
            })
            .await?;
        for event in replayed {
            ctx.events.replay(event).await;
        }
        let ctx = Arc::new(ctx);
        let mut kept: BTreeMap<usize, CandidateRun> = BTreeMap::new();
        for i in 0..n {
            let id = CandidateId::from_index(i);
            let run = match resume::load(ctx.run_dir.path(), &id) {
                Some(saved) => saved.into_run(ctx.run_dir.path(), None),
                None => {
                    let why = lost.get(&i).cloned().unwrap_or_else(|| "its unit left no result".to_string());
                    skip_candidate(&ctx, i, format!("its candidate unit was lost: {why}")).await
                }
            };
            ctx.set_candidate_status(&run.id, run.status, run.agent.exit_code).await;
            kept.insert(i, run);
        }
        resume::charge_kept(&ctx, kept.values()).await;
        drive(ctx, None, kept, BTreeMap::new()).await
    }
}

/// A candidate unit's view of the run (never written: the run's state is the evaluation's).
fn unit_state(
    run_id: &RunId,
    ws: &Workspace,
    base_commit: &str,
    task: &Task,
    settings: &RunSettings,
    now: arbiter_core::time::Timestamp,
    confinement: &crate::confinement::Confinement,
) -> RunState {
    RunState {
        schema_version: SCHEMA_VERSION,
        run_id: run_id.clone(),
        status: RunStatus::Running,
        phase: "candidates".into(),
        repo: ws.repo_root().display().to_string(),
        base_ref: base_commit.to_string(),
        base_commit: base_commit.to_string(),
        task: task.clone(),
        settings: SettingsSnapshot::from(settings),
        candidates: Vec::new(),
        started_at: now,
        finished_at: None,
        winner: None,
        materialization: None,
        message: None,
        pid: std::process::id(),
        sandbox: Some(confinement.enforcement.clone()),
    }
}
