//! Continuing a run that was interrupted (a crash, SIGKILL, Ctrl-C): `arbiter runs resume`.
//!
//! A run keeps what a resume needs as it goes: its resolved settings (`settings.json`), the
//! baseline as soon as it is known (`baseline.json`), and each candidate's results the moment
//! it finishes (`candidates/<id>/result.json`). A resume reopens the run directory under the
//! same id, keeps every candidate that finished, and starts the others again: in the
//! workspace they left, when the pool still has it, with the agent CLI's own resume flag and
//! the session id its transcript recorded; otherwise from a fresh workspace. What the kept
//! candidates spent is charged to the run's budget again ([`charge_kept`]). Evaluation,
//! judging and the reports then run as for any run.

use std::path::Path;

use arbiter_core::artifact::{AgentOutcome, PatchEvidence, SCHEMA_VERSION, paths};
use arbiter_core::cost::CallRecord;
use arbiter_core::crosstest::AuthoredTest;
use arbiter_core::gate::CommandOutcome;
use arbiter_core::ids::CandidateId;
use arbiter_core::status::CandidateStatus;
use serde::{Deserialize, Serialize};

use super::{CandidateRun, RunCtx};
use crate::pool::Slot;
use std::collections::BTreeMap;

use arbiter_core::artifact::{Baseline, RunState};
use arbiter_core::ids::RunId;
use arbiter_core::settings::RunSettings;
use arbiter_core::status::RunStatus;
use arbiter_store::RunRecord;

use crate::events::EventLog;
use crate::git::Git;
use crate::pool::Owner;
use crate::rundir::{JsonLines, RunDir};
use crate::workspace::Workspace;

use super::{Engine, EngineError, RunParts, load_rules};

/// A test file a candidate wrote, as text.
#[derive(Serialize, Deserialize)]
struct SavedTest {
    path: String,
    text: String,
}

/// `candidates/<id>/result.json`: a finished candidate, everything but its patch text
/// (which is `patch.diff`) and its worktree.
#[derive(Serialize, Deserialize)]
pub(super) struct SavedCandidate {
    schema_version: u32,
    id: CandidateId,
    index: usize,
    runner: String,
    pub(super) status: CandidateStatus,
    setup_error: Option<String>,
    agent: AgentOutcome,
    patch: Option<PatchEvidence>,
    gate_outcomes: Vec<CommandOutcome>,
    gates_skipped: Option<String>,
    protected_changes: Vec<String>,
    calls: Vec<CallRecord>,
    not_run: Option<String>,
    authored_tests: Vec<SavedTest>,
    /// Left out when there is none: a record that is JSON `null` reads back as one.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "arbiter_core::artifact::present")]
    agent_details: Option<serde_json::Value>,
    #[serde(default)]
    violations: Vec<arbiter_core::selection::Violation>,
    /// Its gates are the evaluation's to run (a candidate unit's result).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    gates_pending: bool,
}

/// Writes a candidate's results for a later resume (failing to is only a warning: the run
/// itself goes on).
pub(super) fn save(ctx: &RunCtx, run: &CandidateRun) {
    let saved = SavedCandidate {
        schema_version: SCHEMA_VERSION,
        id: run.id.clone(),
        index: run.index,
        runner: run.runner.clone(),
        status: run.status,
        setup_error: run.setup_error.clone(),
        agent: run.agent.clone(),
        patch: run.patch.clone(),
        gate_outcomes: run.gate_outcomes.clone(),
        gates_skipped: run.gates_skipped.clone(),
        protected_changes: run.protected_changes.clone(),
        calls: run.calls.clone(),
        not_run: run.not_run.clone(),
        authored_tests: run
            .authored_tests
            .iter()
            .map(|t| SavedTest { path: t.path.clone(), text: String::from_utf8_lossy(&t.content).into_owned() })
            .collect(),
        agent_details: run.agent_details.clone(),
        violations: run.violations.clone(),
        gates_pending: run.gates_pending,
    };
    let rel = format!("{}/{}/{}", paths::CANDIDATES, run.id, paths::RESULT);
    if let Err(e) = ctx.run_dir.write_json(&rel, &saved) {
        tracing::warn!("cannot write {rel}: {e} (a resume would run this candidate again)");
    }
}

/// The saved results of candidate `id`, when it finished (a cancelled candidate did not).
pub(super) fn load(run_dir: &Path, id: &CandidateId) -> Option<SavedCandidate> {
    let path = run_dir.join(paths::CANDIDATES).join(id.as_str()).join(paths::RESULT);
    let saved: SavedCandidate = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    (saved.status.is_terminal() && saved.status != CandidateStatus::Cancelled).then_some(saved)
}

impl SavedCandidate {
    /// The candidate as the run had it, with its patch and (when still there) its workspace.
    pub(super) fn into_run(self, run_dir: &Path, tree: Option<Slot>) -> CandidateRun {
        let patch_text =
            std::fs::read_to_string(run_dir.join(paths::CANDIDATES).join(self.id.as_str()).join(paths::PATCH))
                .unwrap_or_default();
        CandidateRun {
            id: self.id,
            index: self.index,
            runner: self.runner,
            status: self.status,
            setup_error: self.setup_error,
            agent: self.agent,
            patch: self.patch,
            patch_text,
            gate_outcomes: self.gate_outcomes,
            gates_skipped: self.gates_skipped,
            protected_changes: self.protected_changes,
            calls: self.calls,
            not_run: self.not_run,
            authored_tests: self
                .authored_tests
                .into_iter()
                .map(|t| AuthoredTest { path: t.path, content: t.text.into_bytes() })
                .collect(),
            tree,
            agent_details: self.agent_details,
            violations: self.violations,
            gates_pending: self.gates_pending,
            agent_secrets: Default::default(),
        }
    }
}

/// Charges the budget of the reopened run with what the kept candidates spent: their calls,
/// as they were charged when they ran, so the limit holds for the whole run and not only for
/// what runs after the resume. Nothing is reported unless these charges reach the limit
/// (then `budget_exceeded` is recorded once, and nothing new starts). Their costs reach the
/// cost summary and the spending report once, through their calls, like any candidate's.
pub(super) async fn charge_kept(ctx: &RunCtx, kept: impl IntoIterator<Item = &CandidateRun>) {
    for run in kept {
        for call in &run.calls {
            ctx.budget.recount(call).await;
        }
    }
}

/// How an unfinished candidate starts again.
#[derive(Debug, Default)]
pub(super) struct Restart {
    /// Its workspace, when the pool still has it: the agent continues in it.
    pub(super) slot: Option<Slot>,
    /// The agent CLI's session to continue (from the transcript).
    pub(super) session: Option<String>,
}

/// The last session id an agent CLI reported in the candidate's transcript.
pub(super) fn session_of(candidate_dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(candidate_dir.join(paths::TRANSCRIPT)).ok()?;
    text.lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["type"] == "session")
        .find_map(|v| v["id"].as_str().map(str::to_string))
}

/// Keeps the output of the interrupted attempt beside the new one.
pub(super) fn set_aside_output(candidate_dir: &Path) {
    for name in [paths::STDOUT, paths::STDERR] {
        let from = candidate_dir.join(name);
        if from.exists() {
            let to = candidate_dir.join(name.replace(".log", ".interrupted.log"));
            let _ = std::fs::rename(from, to);
        }
    }
}

/// The highest event number in the run's event log (a resume continues after it).
pub(super) fn last_event_seq(events_file: &Path) -> u64 {
    std::fs::read_to_string(events_file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["seq"].as_u64())
        .max()
        .unwrap_or(0)
}

/// Whether the run was started with `--allow-dirty` (its `run_started` event says): only
/// then may its winner go onto a working tree with uncommitted changes when it is resumed.
pub(super) fn started_allowing_dirty(events_file: &Path) -> bool {
    std::fs::read_to_string(events_file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["kind"] == "run_started")
        .is_some_and(|v| v["data"]["allow_dirty"] == true)
}

impl Engine {
    /// Reopens an interrupted run: its state, settings, event log and worktrees; what it
    /// kept of each candidate and how the others restart.
    #[allow(clippy::type_complexity)]
    pub(super) async fn reopen(
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
        .continuing_after(last_event_seq(&run_dir.path().join(paths::EVENTS)));

        let mut kept = BTreeMap::new();
        let mut restarts = BTreeMap::new();
        for i in 0..settings.candidates.value as usize {
            let id = CandidateId::from_index(i);
            let slot = own_slots.remove(&i);
            match load(run_dir.path(), &id) {
                Some(saved) => {
                    kept.insert(i, saved.into_run(run_dir.path(), slot));
                }
                None => {
                    let cdir = run_dir.path().join(paths::CANDIDATES).join(id.as_str());
                    restarts.insert(i, Restart { slot, session: session_of(&cdir) });
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
            allow_dirty: started_allowing_dirty(&events_path),
            unit: None,
            rules,
        });
        charge_kept(&ctx, kept.values()).await;
        Ok((ctx, kept, restarts, saved_baseline))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A candidate unit's result travels to the worker that evaluates it: the runner's record
    /// comes back as it was, absent, JSON `null` or an object.
    #[test]
    fn the_agent_record_reads_back_as_it_was_written() {
        for details in [None, Some(serde_json::Value::Null), Some(serde_json::json!({"session": "s1"}))] {
            let saved = SavedCandidate {
                schema_version: SCHEMA_VERSION,
                id: CandidateId::from_index(0),
                index: 0,
                runner: "command".into(),
                status: CandidateStatus::Finished,
                setup_error: None,
                agent: AgentOutcome::default(),
                patch: None,
                gate_outcomes: Vec::new(),
                gates_skipped: None,
                protected_changes: Vec::new(),
                calls: Vec::new(),
                not_run: None,
                authored_tests: Vec::new(),
                agent_details: details.clone(),
                violations: Vec::new(),
                gates_pending: true,
            };
            let text = serde_json::to_string(&saved).unwrap();
            let back: SavedCandidate = serde_json::from_str(&text).unwrap();
            assert_eq!(back.agent_details, details, "{text}");
        }
    }

    #[test]
    fn the_last_session_of_a_transcript_is_found() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(paths::TRANSCRIPT),
            "{\"type\":\"process_started\"}\n{\"type\":\"session\",\"id\":\"s1\"}\nnot json\n{\"type\":\"session\",\"id\":\"s2\"}\n",
        )
        .unwrap();
        assert_eq!(session_of(dir.path()), Some("s2".into()));
        assert_eq!(session_of(&dir.path().join("missing")), None);
        std::fs::write(dir.path().join("events.jsonl"), "{\"seq\":3}\n{\"seq\":7}\n").unwrap();
        assert_eq!(last_event_seq(&dir.path().join("events.jsonl")), 7);
    }
}
