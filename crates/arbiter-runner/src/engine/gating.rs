//! A candidate's gates: its verify commands and the rules gate run in its tree (the
//! protected files restored), and a kept candidate's gates run again on resume.

use std::path::Path;
use std::time::Duration;

use arbiter_core::artifact::paths;
use arbiter_core::event::{CandidateFinished, GateFinished, Warning};
use arbiter_core::gate::CommandOutcome;
use arbiter_core::protect;
use arbiter_core::protect::Touch;
use arbiter_core::selection::Violation;
use arbiter_core::status::CandidateStatus;
use arbiter_core::test_machinery::Restore;

use crate::capture;
use crate::gates::{Gate, GateRun, Seal, run_verify};
use crate::materialize::{self};
use crate::pool::{Owner, Slot};

use super::candidate::{disqualify, prepare_workspace, release_workspace};
use super::resume::{self};
use super::{CandidateRun, RunCtx};

/// Runs the verify commands in the candidate's tree (its own, or one rebuilt from its
/// patch): the base's own tests, protected files as the base has them, the candidate's own
/// tests taken out, the calibrated canaries planted.
pub(super) async fn gate_candidate(
    ctx: &RunCtx,
    run: &mut CandidateRun,
    slot: &Slot,
    cdir: &Path,
    touched: Option<Vec<(String, Touch)>>,
) {
    run.gates_pending = false;
    let wt = slot.git();
    let tree = &slot.tree();
    let verify = &ctx.settings.verify.value;
    // Nothing to gate: the capture said why.
    if ctx.gate_count() == 0 || run.gates_skipped.is_some() {
        return;
    }
    run.gates_skipped = if ctx.cancel.is_cancelled() {
        Some("the run was interrupted".into())
    } else if let Some(v) = run.violations.first() {
        Some(format!("it is disqualified: {}", v.describe()))
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
    // A candidate must not pass by weakening the checks: the gates run the base's own tests,
    // on the base's versions of the protected files it modified or deleted and of the test
    // machinery it changed (derived per framework: `arbiter_core::test_machinery`), without
    // the test files it added (its own tests are evidence, run as cross-tests; they do not
    // vouch for it).
    let touched = touched.as_deref().unwrap_or(&[]);
    let base = match ctx.base_facts().await {
        Ok(b) => b,
        Err(e) => {
            run.gates_skipped = Some(format!("cannot read the base's test machinery: {e}"));
            return;
        }
    };
    let machinery = crate::gates::machinery_changes(tree, base, touched, verify);
    let is_machinery = |path: &str| machinery.iter().any(|c| c.path == path);
    let patterns = &ctx.settings.protected_paths.value;
    let weakened: Vec<(String, Touch)> =
        protect::weakened(patterns, touched).into_iter().filter(|(p, _)| !is_machinery(p)).collect();
    let own_tests: Vec<String> =
        protect::added_tests(patterns, touched).into_iter().filter(|p| !is_machinery(p)).collect();
    run.protected_changes =
        weakened.iter().map(|(path, _)| path.clone()).chain(machinery.iter().map(|c| c.describe())).collect();
    let allowed = ctx.settings.allow_test_changes.value;
    if !allowed
        && let Some((path, why)) = machinery.iter().find_map(|c| match &c.restore {
            Restore::Reject { why } => Some((c.path.clone(), why.clone())),
            _ => None,
        })
    {
        disqualify(ctx, run, Violation::UnrestorableMachinery { path: path.into(), why: why.into() }).await;
        run.gates_skipped =
            Some(format!("it is disqualified: {}", run.violations.last().map(|v| v.describe()).unwrap_or_default()));
        return;
    }
    if !allowed && (!run.protected_changes.is_empty() || !own_tests.is_empty()) {
        let mut seal = Seal::default();
        for (path, how) in &weakened {
            if *how == Touch::Added { seal.remove.push(path.clone()) } else { seal.restore.push(path.clone()) }
        }
        seal.add_machinery(&base.view, &machinery);
        let removed = seal.remove.clone();
        seal.remove.extend(own_tests.iter().cloned());
        if let Err(e) = crate::gates::seal(&wt, &ctx.base_commit, &seal).await {
            run.gates_skipped = Some(e);
            return;
        }
        let restored: Vec<String> = seal
            .restore
            .iter()
            .cloned()
            .chain(machinery.iter().filter(|c| matches!(c.restore, Restore::Settings { .. })).map(|c| c.describe()))
            .collect();
        let mut done = Vec::new();
        if !restored.is_empty() {
            done.push(format!("the base versions of {} are restored", restored.join(", ")));
        }
        if !removed.is_empty() {
            done.push(format!("what it added ({}) is removed", removed.join(", ")));
        }
        if !run.protected_changes.is_empty() {
            let warning = Warning {
                protected_changes: Some(run.protected_changes.clone()),
                restored: Some(restored),
                removed: Some(removed),
                ..Warning::new(format!(
                    "{} changed protected files or the test machinery ({}); for the gates, {}",
                    run.id,
                    machinery
                        .iter()
                        .map(|c| format!("{}: {}", c.describe(), c.what))
                        .chain(weakened.iter().map(|(p, _)| p.clone()))
                        .collect::<Vec<_>>()
                        .join("; "),
                    done.join(" and ")
                ))
            };
            ctx.events.emit(Some(&run.id), &warning).await;
        }
        if !own_tests.is_empty() {
            ctx.events
                .emit(Some(&run.id), &arbiter_core::event::GatesSealed { own_tests_taken_out: own_tests.clone() })
                .await;
        }
    }
    // The canaries the base calibrated go in. Every gate run has them, so a candidate's code
    // cannot behave for a run without them; code written to recognise the canary itself (a
    // test file the base lacks) can spare it — a limit docs/security.md states.
    let calibration = ctx.calibration().await;
    let gates: Vec<Gate> = verify
        .iter()
        .enumerate()
        .map(|(i, c)| Gate {
            command: c,
            canary: calibration.get(i).copied().unwrap_or(false).then(|| ctx.canary_plan(i)).flatten(),
            framework: ctx.framework_of(i),
        })
        .collect();
    let jail = ctx.confinement.jail(slot);
    let gate_logs = cdir.join("gates");
    let gate_run = GateRun {
        cwd: tree,
        jail: jail.as_ref(),
        env: &ctx.command_env(),
        timeout: Duration::from_secs(ctx.settings.verify_timeout_seconds.value),
        log_dir: &gate_logs,
        cancel: &ctx.cancel,
        redactor: &ctx.redactor,
        test_reports: &ctx.settings.test_reports.value,
    };
    match run_verify(&gates, &gate_run).await {
        Ok(outcomes) => {
            for o in &outcomes {
                let finished = GateFinished {
                    command: o.command.clone(),
                    passed: o.passed(),
                    exit_code: o.exit_code,
                    timed_out: o.timed_out,
                    duration_ms: o.duration_ms,
                    canary: o.canary.as_ref().map(|c| c.verdict),
                };
                ctx.events.emit(Some(&run.id), &finished).await;
            }
            let mut outcomes = outcomes;
            if outcomes.len() < verify.len() {
                run.gates_skipped = Some("the run was interrupted".into());
            } else if let Some(gate) = rules_gate(ctx, tree, touched).await {
                let finished = GateFinished {
                    command: gate.command.clone(),
                    passed: gate.passed(),
                    exit_code: gate.exit_code,
                    timed_out: false,
                    duration_ms: gate.duration_ms,
                    canary: None,
                };
                ctx.events.emit(Some(&run.id), &finished).await;
                outcomes.push(gate);
            }
            let tampered: Vec<String> = outcomes.iter().filter(|o| o.tampered()).map(|o| o.command.clone()).collect();
            if !tampered.is_empty() {
                disqualify(ctx, run, Violation::TamperedChecks { commands: tampered }).await;
            }
            run.gate_outcomes = outcomes;
        }
        Err(e) => run.gates_skipped = Some(format!("cannot run the verify commands: {e}")),
    }
}

/// The rules gate on the files `touched` that are still in `tree` (not deleted by the
/// candidate, not taken out for the gates), when the run has one.
pub(super) async fn rules_gate(ctx: &RunCtx, tree: &Path, touched: &[(String, Touch)]) -> Option<CommandOutcome> {
    let book = ctx.rules.as_ref()?;
    let changed: Vec<String> = touched
        .iter()
        .filter(|(path, how)| *how != Touch::Deleted && std::fs::symlink_metadata(tree.join(path)).is_ok())
        .map(|(path, _)| path.clone())
        .collect();
    let base = (&ctx.repo, ctx.base_commit.as_str());
    Some(crate::gates::run_rules(book, &ctx.settings.rule_options, tree, &changed, base, &ctx.redactor).await)
}

/// Runs the gates a candidate unit left: in the workspace the candidate left, when this
/// machine's pool still has it as it was, or in a fresh one with its patch applied. The tree
/// is kept for cross-tests like a candidate's own.
pub(super) async fn gate_kept(ctx: &RunCtx, mut run: CandidateRun) -> CandidateRun {
    let gateable = run.gates_skipped.is_none()
        && run.violations.is_empty()
        && run.patch.as_ref().is_some_and(|p| !p.empty && p.applies_cleanly);
    let cdir = match ctx.run_dir.candidate_dir(&run.id) {
        Ok(d) => d,
        Err(e) => {
            run.gates_pending = false;
            run.gates_skipped = Some(format!("cannot open its candidate directory: {e}"));
            return run;
        }
    };
    if !gateable || ctx.cancel.is_cancelled() {
        // The reason (an empty or disqualified patch, an interruption) is the gates' own.
        if let Some(slot) = ctx.pool.reacquire(&Owner::new(ctx.run_id.as_str(), run.id.as_str())) {
            release_workspace(ctx, slot);
        }
        if ctx.cancel.is_cancelled() && run.gates_skipped.is_none() {
            run.gates_skipped = Some("the run was interrupted".into());
        }
        run.gates_pending = false;
        resume::save(ctx, &run);
        return run;
    }
    let slot = match ctx.pool.reacquire(&Owner::new(ctx.run_id.as_str(), run.id.as_str())) {
        Some(slot) => Ok(slot),
        None => rebuild_tree(ctx, &run, &cdir).await,
    };
    let slot = match slot {
        Ok(slot) => slot,
        Err(why) => {
            run.gates_pending = false;
            run.gates_skipped = Some(why);
            resume::save(ctx, &run);
            return run;
        }
    };
    let touched = match capture::touched_paths(&slot.git(), &ctx.base_commit).await {
        Ok(t) => Some(t),
        Err(e) => {
            run.gates_skipped = Some(format!("cannot list the changed files: {e}"));
            None
        }
    };
    ctx.set_candidate_status(&run.id, CandidateStatus::Evaluating, None).await;
    gate_candidate(ctx, &mut run, &slot, &cdir, touched).await;
    if ctx.settings.cross_tests.value && !ctx.cancel.is_cancelled() {
        run.tree = Some(slot);
    } else {
        release_workspace(ctx, slot);
    }
    ctx.set_candidate_status(&run.id, run.status, run.agent.exit_code).await;
    let gates_passed = run.gate_outcomes.iter().filter(|o| o.passed()).count();
    let finished = CandidateFinished {
        gates_passed: Some(gates_passed),
        gates_total: Some(run.gate_outcomes.len()),
        gates_skipped: run.gates_skipped.clone(),
        ..CandidateFinished::with_status(run.status)
    };
    ctx.events.emit(Some(&run.id), &finished).await;
    resume::save(ctx, &run);
    run
}

/// A fresh workspace (include copy, setup) with the candidate's patch applied.
async fn rebuild_tree(ctx: &RunCtx, run: &CandidateRun, cdir: &Path) -> Result<Slot, String> {
    let slot = prepare_workspace(ctx, Some(&run.id), cdir).await?;
    let patch = cdir.join(paths::PATCH);
    let applied = match materialize::check_file(&ctx.repo, &ctx.base_commit, &patch, &ctx.settings.limits.value).await {
        Ok(Ok(checked)) => materialize::apply_to_worktree(&slot.git(), &checked).await,
        Ok(Err(refusal)) => Err(refusal.into()),
        Err(e) => Err(e.into()),
    };
    match applied {
        Ok(()) => Ok(slot),
        Err(e) => {
            release_workspace(ctx, slot);
            Err(format!("its patch could not be applied to a fresh workspace for the gates: {e}"))
        }
    }
}
