//! One candidate's pipeline (worktree, include copy, setup, agent, patch, apply check,
//! verify commands) and the baseline's (the same tree preparation and verify commands on
//! the base commit). When cross-tests are on, the trees of candidates with an applicable
//! patch, and the base tree, are kept for them.

use std::path::Path;
use std::time::Duration;

use arbiter_core::artifact::{AgentOutcome, PatchEvidence, RunnerSummary, SCHEMA_VERSION, paths};
use arbiter_core::crosstest::{AuthoredTest, rule_for};
use arbiter_core::event::{
    AgentFinished, CandidateFinished, CandidatePreparing, PatchCaptured, SetupFinished, Warning,
};
use arbiter_core::ids::CandidateId;
use arbiter_core::patch;
use arbiter_core::protect::Touch;
use arbiter_core::selection::Violation;
use arbiter_core::status::CandidateStatus;
use arbiter_core::time::Timestamp;

use crate::agent::{AgentContext, AgentRunner};
use crate::capture;
use crate::include::copy_includes;
use crate::materialize::{self, Refusal, describe_paths};
use crate::pool::{Owner, Slot};
use crate::process::{self, ShellCommand};
use crate::runners;

use super::gating::gate_candidate;
use super::resume::{self, Restart};
use super::{CandidateRun, RunCtx};

/// Takes a workspace at the base from the pool (for candidate `who`, or the base tree),
/// copies the include-list into it and runs the setup command in its sandbox. Returns a
/// description of what failed, with the log to read.
pub(super) async fn prepare_workspace(ctx: &RunCtx, who: Option<&CandidateId>, log_dir: &Path) -> Result<Slot, String> {
    let owner = Owner::new(ctx.run_id.as_str(), who.map_or("base", |c| c.as_str()));
    let slot =
        ctx.pool.acquire(&ctx.base_commit, &owner).await.map_err(|e| format!("cannot prepare the workspace: {e}"))?;
    let tree = slot.tree();
    ctx.events.emit(who, &arbiter_core::event::WorktreeCreated { path: tree.display().to_string() }).await;
    if !ctx.settings.include.value.is_empty() {
        let report =
            copy_includes(ctx.workspace.repo_root(), &tree, &ctx.settings.include.value).map_err(|e| e.to_string())?;
        ctx.events
            .emit(who, &arbiter_core::event::IncludeCopied { copied: report.copied, missing: report.missing })
            .await;
    }
    if let Some(setup) = &ctx.settings.setup.value {
        let log = log_dir.join("setup.log");
        let exit = process::run_shell(
            &ShellCommand {
                command: setup.clone(),
                cwd: tree.clone(),
                env: ctx.command_env(),
                stdout: log.clone(),
                stderr: log.clone(),
                timeout: Duration::from_secs(ctx.settings.setup_timeout_seconds.value),
                jail: ctx.confinement.jail(&slot),
            },
            &ctx.cancel,
        )
        .await
        .map_err(|e| format!("cannot start the setup command: {e}"))?;
        let _ = process::redact_file(&log, &ctx.redactor);
        ctx.events
            .emit(
                who,
                &SetupFinished {
                    exit_code: exit.code,
                    timed_out: exit.timed_out,
                    duration_ms: exit.duration.as_millis() as u64,
                },
            )
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
        // Whatever setup leaves outside ignored files would be captured as part of the
        // candidate's own patch: say so, once per tree, with the fix.
        if let Ok(changed) = slot.git().dirty_paths().await
            && !changed.is_empty()
        {
            let message = format!(
                "the setup command changed files git does not ignore ({}); they become part of the patch; make setup write only ignored files (add them to .gitignore)",
                describe_paths(&changed)
            );
            ctx.events.emit(who, &Warning::new(message)).await;
        }
    }
    Ok(slot)
}

/// Gives a workspace back to the pool, or to the user with `--keep-worktrees`.
pub(super) fn release_workspace(ctx: &RunCtx, slot: Slot) {
    if ctx.settings.keep_worktrees.value {
        slot.keep();
    } else {
        slot.release();
    }
}

/// The run of a candidate that never started.
fn unstarted(ctx: &RunCtx, index: usize) -> CandidateRun {
    CandidateRun {
        id: CandidateId::from_index(index),
        index,
        runner: ctx.settings.label_for(index),
        status: CandidateStatus::Cancelled,
        setup_error: None,
        agent: AgentOutcome::default(),
        patch: None,
        patch_text: String::new(),
        gate_outcomes: Vec::new(),
        gates_skipped: None,
        protected_changes: Vec::new(),
        calls: Vec::new(),
        not_run: None,
        authored_tests: Vec::new(),
        tree: None,
        agent_details: None,
        violations: Vec::new(),
        gates_pending: false,
        agent_secrets: Default::default(),
    }
}

/// Records a candidate that will not run, and why.
pub(super) async fn skip_candidate(ctx: &RunCtx, index: usize, why: String) -> CandidateRun {
    let mut run = unstarted(ctx, index);
    run.status = CandidateStatus::Skipped;
    run.not_run = Some(why);
    ctx.set_candidate_status(&run.id, run.status, None).await;
    let finished =
        CandidateFinished { reason: run.not_run.clone().map(Into::into), ..CandidateFinished::with_status(run.status) };
    ctx.events.emit(Some(&run.id), &finished).await;
    resume::save(ctx, &run);
    run
}

/// One candidate from worktree to captured, gated patch; its results are saved for a
/// resume. `restart` is how a resumed run starts an unfinished candidate again.
/// An agent CLI on a backend calls it itself, past arbiter's model client: while it runs it
/// holds one of the backend's `max_parallel` places, so no more of them run at once than
/// the backend allows (arbiter's own calls to it wait their turn too).
pub(super) async fn backend_place(
    ctx: &RunCtx,
    spec: &arbiter_core::settings::RunnerSpec,
    chain: &[String],
) -> Option<tokio::sync::OwnedSemaphorePermit> {
    let arbiter_core::settings::RunnerKind::Agent(_) = &spec.kind else { return None };
    let models = ctx.models.as_deref()?;
    let endpoint = models.endpoints.get(chain.first()?)?;
    // An interrupted run does not wait for a place.
    tokio::select! {
        place = models.client.hold(endpoint) => place.ok(),
        _ = ctx.cancel.cancelled() => None,
    }
}

pub(super) async fn run_candidate(ctx: &RunCtx, index: usize, restart: Option<Restart>) -> CandidateRun {
    let run = run_candidate_steps(ctx, index, restart).await;
    resume::save(ctx, &run);
    run
}

async fn run_candidate_steps(ctx: &RunCtx, index: usize, restart: Option<Restart>) -> CandidateRun {
    let id = CandidateId::from_index(index);
    let spec = ctx.settings.runner_for(index).clone();
    let label = ctx.settings.label_for(index);
    if ctx.budget.exhausted() && !ctx.cancel.is_cancelled() {
        return skip_candidate(ctx, index, format!("{} before it started", ctx.budget.reached_reason())).await;
    }
    let mut run = unstarted(ctx, index);
    let chain = ctx.settings.backend_chain_for(index);
    let runner: Box<dyn AgentRunner> = match runners::from_spec(&spec, &chain, ctx.models.as_deref()) {
        Ok(r) => r,
        Err(why) => return ended_before_agent(ctx, run, CandidateStatus::SetupFailed, why).await,
    };
    if ctx.cancel.is_cancelled() {
        run.agent.cancelled = true;
        ctx.set_candidate_status(&id, CandidateStatus::Cancelled, None).await;
        return run;
    }
    ctx.set_candidate_status(&id, CandidateStatus::Preparing, None).await;
    ctx.events.emit(Some(&id), &CandidatePreparing { runner: Some(label.clone()), ..Default::default() }).await;

    let cdir = match ctx.run_dir.candidate_dir(&id) {
        Ok(d) => d,
        Err(e) => {
            let why = format!("cannot create the candidate directory: {e}");
            return ended_before_agent(ctx, run, CandidateStatus::SetupFailed, why).await;
        }
    };
    let started_at = ctx.clock.now();
    let mut restart = restart;
    let reused = restart.as_mut().and_then(|r| r.slot.take());
    if let Some(r) = &restart {
        resume::set_aside_output(&cdir);
        ctx.events
            .emit(
                Some(&id),
                &CandidatePreparing {
                    runner: None,
                    restart: true,
                    reuses_worktree: Some(reused.is_some()),
                    session: r.session.clone(),
                },
            )
            .await;
    }
    // The agent continues in the workspace it left (with its include copy and setup), or
    // starts in a fresh one.
    let prepared = match reused {
        Some(slot) => Ok(slot),
        None => prepare_workspace(ctx, Some(&id), &cdir).await,
    };
    // The prompt: in the run directory for the audit, and in the workspace's input for the
    // agent (whose sandbox cannot reach the run directory).
    let prepared = prepared.and_then(|slot| {
        let prompt = ctx.task.candidate_prompt();
        std::fs::write(cdir.join(paths::PROMPT), &prompt)
            .and_then(|()| std::fs::write(slot.prompt_file(), &prompt))
            .map(|()| slot)
            .map_err(|e| format!("cannot write the prompt file: {e}"))
    });
    let slot = match prepared {
        Ok(slot) => slot,
        Err(e) => {
            let status =
                if ctx.cancel.is_cancelled() { CandidateStatus::Cancelled } else { CandidateStatus::SetupFailed };
            run.setup_error = Some(e.clone());
            write_runner_summary(ctx, &run, runner.as_ref(), &cdir, Some(started_at), &[]);
            return ended_before_agent(ctx, run, status, e).await;
        }
    };
    // The workspace is ready beside the baseline; the agent, which spends, waits for it.
    if let Some(why) = ctx.checks_cannot_run().await {
        release_workspace(ctx, slot);
        return skip_candidate(ctx, index, why).await;
    }
    let tree = slot.tree();
    let prompt_file = slot.prompt_file();

    let mut passthrough = ctx.settings.env_passthrough.value.clone();
    passthrough.extend(spec.env_passthrough.iter().cloned());
    passthrough.extend(runners::agent_passthrough(&spec));
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
    let mut agent_ctx = AgentContext {
        candidate: id.clone(),
        worktree: tree.clone(),
        candidate_dir: cdir.clone(),
        prompt_file,
        home: slot.home(),
        jail: ctx.confinement.jail(&slot),
        env: env.clone(),
        timeout: Duration::from_secs(ctx.settings.timeout_seconds.value),
        cancel: ctx.budget.stop_token(),
        redactor: ctx.redactor.clone(),
        events: ctx.events.clone(),
        budget: ctx.budget.clone(),
        resume_session: restart.and_then(|r| r.session),
    };
    let backend_place = backend_place(ctx, &spec, &chain).await;
    ctx.set_candidate_status(&id, CandidateStatus::Running, None).await;
    let started = arbiter_core::event::AgentStarted { runner: label.clone(), kind: runner.kind().to_string() };
    ctx.events.emit(Some(&id), &started).await;
    let ran = runner.run(&agent_ctx).await;
    drop(backend_place);
    match ran {
        Ok(report) => {
            run.agent = report.outcome;
            run.calls = report.calls;
            run.agent_details = report.details;
            for (source, value) in &report.secrets {
                run.agent_secrets.add(source.clone(), value);
            }
        }
        Err(e) => {
            run.setup_error = Some(e.to_string());
        }
    }
    ctx.events.emit(Some(&id), &agent_finished(&run.agent)).await;
    if ctx.settings.repair_rounds.value > 0 {
        super::repair::repair(ctx, &mut run, runner.as_ref(), &mut agent_ctx, &slot, &cdir).await;
    }
    if run.agent.cancelled && !ctx.cancel.is_cancelled() && ctx.budget.exhausted() {
        // Stopped by the budget, not by the user: evaluated on its patch so far.
        run.agent.cancelled = false;
        run.agent.limit_reached = Some(ctx.budget.reached_reason());
    }
    run.status = if run.setup_error.is_some() {
        CandidateStatus::SetupFailed
    } else if run.agent.cancelled {
        CandidateStatus::Cancelled
    } else if run.agent.timed_out {
        CandidateStatus::TimedOut
    } else if run.agent.limit_reached.is_some() {
        CandidateStatus::LimitReached
    } else if run.agent.exit_code == Some(0) && run.agent.failure.is_none() {
        CandidateStatus::Finished
    } else {
        CandidateStatus::AgentFailed
    };
    let final_status = run.status;
    write_runner_summary(ctx, &run, runner.as_ref(), &cdir, Some(started_at), &env);

    if run.setup_error.is_none() {
        ctx.set_candidate_status(&id, CandidateStatus::Evaluating, None).await;
        evaluate_candidate(ctx, &mut run, &slot, &cdir).await;
    }
    run.status = final_status;
    let applicable = run.patch.as_ref().is_some_and(|p| !p.empty && p.applies_cleanly) && run.violations.is_empty();
    // A candidate unit gives its workspace back as it is: the evaluation takes it again when
    // it runs on this machine before another candidate takes it.
    if ctx.unit.is_none() && ctx.settings.cross_tests.value && applicable && !ctx.cancel.is_cancelled() {
        run.tree = Some(slot);
    } else {
        release_workspace(ctx, slot);
    }
    ctx.set_candidate_status(&id, run.status, run.agent.exit_code).await;
    let gates_passed = run.gate_outcomes.iter().filter(|o| o.passed()).count();
    let finished = CandidateFinished {
        patch_empty: run.patch.as_ref().map(|p| p.empty),
        applies_cleanly: run.patch.as_ref().map(|p| p.applies_cleanly),
        gates_passed: Some(gates_passed),
        gates_total: Some(run.gate_outcomes.len()),
        gates_skipped: run.gates_skipped.clone(),
        ..CandidateFinished::with_status(run.status)
    };
    ctx.events.emit(Some(&id), &finished).await;
    run
}

/// The `agent_finished` event of an agent run.
pub(super) fn agent_finished(a: &AgentOutcome) -> AgentFinished {
    AgentFinished {
        exit_code: a.exit_code,
        signal: a.signal,
        timed_out: a.timed_out,
        cancelled: a.cancelled,
        duration_ms: a.duration_ms,
        limit_reached: a.limit_reached.clone(),
        failure: a.failure.clone(),
    }
}

/// Ends a candidate that never reached its agent: records why, in the state, the store and
/// the events.
async fn ended_before_agent(ctx: &RunCtx, mut run: CandidateRun, status: CandidateStatus, why: String) -> CandidateRun {
    run.status = status;
    run.setup_error = Some(why);
    ctx.set_candidate_status(&run.id, run.status, None).await;
    let finished = CandidateFinished { error: run.setup_error.clone(), ..CandidateFinished::with_status(run.status) };
    ctx.events.emit(Some(&run.id), &finished).await;
    run
}

/// Captures the patch, checks it applies to the base, and (unless they are left to the
/// evaluation: a candidate unit) runs the verify commands.
pub(super) async fn evaluate_candidate(ctx: &RunCtx, run: &mut CandidateRun, slot: &Slot, cdir: &Path) {
    let touched = capture_candidate(ctx, run, slot, cdir).await;
    if ctx.unit.is_some() {
        run.gates_pending = ctx.gate_count() > 0;
        return;
    }
    gate_candidate(ctx, run, slot, cdir, touched).await;
}

/// The patch: captured, scanned for secrets, checked against the limits and the base; the
/// test files it wrote (for cross-tests). Returns the files it touched (`None` when there is
/// nothing to gate, or they could not be listed: `gates_skipped` says why).
async fn capture_candidate(
    ctx: &RunCtx,
    run: &mut CandidateRun,
    slot: &Slot,
    cdir: &Path,
) -> Option<Vec<(String, Touch)>> {
    let wt = slot.git();
    let tree = &slot.tree();
    let limits = &ctx.settings.limits.value;
    let captured =
        match capture::capture_patch(&wt, &ctx.base_commit, &ctx.settings.left_out_of_patches(), limits).await {
            Ok(c) => c,
            Err(e) => {
                ctx.events.emit(Some(&run.id), &Warning::new(format!("cannot capture the patch: {e}"))).await;
                run.gates_skipped = Some("no patch could be captured".into());
                return None;
            }
        };
    for breach in captured.breaches {
        disqualify(ctx, run, Violation::OverLimit { breach }).await;
    }
    let (text, captured_touched) = (captured.text, captured.touched);
    // A patch holding a secret arbiter knows is disqualified, and written (and kept for the
    // viewer and reports) with the value redacted; it is never checked, gated or applied.
    let mut secrets = ctx.secrets.found_in(&text);
    secrets.extend(run.agent_secrets.found_in(&text));
    let text = if secrets.is_empty() {
        text
    } else {
        disqualify(ctx, run, Violation::SecretInPatch { sources: secrets }).await;
        run.agent_secrets.redactor().redact(&ctx.redactor.redact(&text))
    };
    let patch_path = cdir.join(paths::PATCH);
    if let Err(e) = std::fs::write(&patch_path, &text) {
        ctx.events.emit(Some(&run.id), &Warning::new(format!("cannot write patch.diff: {e}"))).await;
        return None;
    }
    let stats = patch::stats(&text);
    let hash = patch::normalized_hash(&text);
    // The same check as every way into the user's repository: it applies to the base, and
    // the tree it makes keeps every link inside the repository.
    let (applies_cleanly, apply_check_error) = if hash.is_none() {
        (false, None)
    } else if !run.violations.is_empty() {
        (false, Some("not checked: the patch is disqualified".to_string()))
    } else {
        match materialize::check(&ctx.repo, &ctx.base_commit, text.clone().into_bytes(), limits).await {
            Ok(Ok(_)) => (true, None),
            Ok(Err(Refusal::DoesNotApply(why))) => (false, Some(why)),
            Ok(Err(Refusal::Breaks(breaches))) => {
                for breach in breaches {
                    disqualify(ctx, run, Violation::OverLimit { breach }).await;
                }
                (false, Some("not applied: the patch is disqualified".to_string()))
            }
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
    let touched =
        (run.patch.as_ref().is_some_and(|p| !p.empty) && run.violations.is_empty()).then_some(captured_touched);
    if let Some(touched) = &touched
        && run.patch.as_ref().is_some_and(|p| p.applies_cleanly)
    {
        run.authored_tests = authored_tests(ctx, tree, touched);
    }
    let p = run.patch.as_ref().map(|p| (p.empty, p.applies_cleanly, p.stats.files_changed, p.stats.weight()));
    let captured = PatchCaptured {
        empty: p.map(|p| p.0),
        applies_cleanly: p.map(|p| p.1),
        files_changed: p.map(|p| p.2),
        changed_lines: p.map(|p| p.3),
    };
    ctx.events.emit(Some(&run.id), &captured).await;
    touched
}

/// Records what disqualifies a candidate, and says so in the events.
pub(super) async fn disqualify(ctx: &RunCtx, run: &mut CandidateRun, violation: Violation) {
    let warning =
        Warning { violation: Some(violation.clone()), ..Warning::new(format!("{}: {}", run.id, violation.describe())) };
    ctx.events.emit(Some(&run.id), &warning).await;
    run.violations.push(violation);
}

/// Largest test file taken into the cross-test pool.
const MAX_TEST_BYTES: u64 = 1 << 20;

/// The test files (by the cross-test rules) a candidate added or modified, as it left them.
fn authored_tests(ctx: &RunCtx, tree: &Path, touched: &[(String, Touch)]) -> Vec<AuthoredTest> {
    if !ctx.settings.cross_tests.value {
        return Vec::new();
    }
    touched
        .iter()
        .filter(|(path, how)| *how != Touch::Deleted && rule_for(&ctx.settings.cross_test_rules.value, path).is_some())
        .filter_map(|(path, _)| {
            let file = tree.join(path);
            if !std::fs::metadata(&file).is_ok_and(|m| m.is_file() && m.len() <= MAX_TEST_BYTES) {
                return None;
            }
            let content = std::fs::read(&file).ok()?;
            Some(AuthoredTest { path: path.clone(), content })
        })
        .collect()
}

pub(super) fn write_runner_summary(
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
        agent_cli: run.agent_details.clone(),
    };
    let _ = crate::rundir::write_atomic(
        &cdir.join(paths::RUNNER_SUMMARY),
        (serde_json::to_string_pretty(&summary).unwrap_or_default() + "\n").as_bytes(),
    );
}
