//! The baseline: the base commit's tree prepared like a candidate's, its verify commands
//! run with their canaries planted, and what the base's runs calibrate for the candidates.

use std::time::Duration;

use arbiter_core::artifact::{Baseline, SCHEMA_VERSION, paths};
use arbiter_core::canary::{self, CanaryCheck, Planned};
use arbiter_core::event::{BaselineFinished, BaselineResult};
use arbiter_core::gate::CommandOutcome;

use crate::gates::{Gate, GateRun, run_gate, run_verify};
use crate::pool::Slot;

use super::RunCtx;
use super::candidate::{prepare_workspace, release_workspace};

/// The baseline, and the base tree when it is kept for cross-tests.
pub(super) struct BaselineRun {
    pub(super) baseline: Baseline,
    pub(super) tree: Option<Slot>,
}

/// Runs the verify commands once on the base commit, in a workspace of its own.
pub(super) async fn run_baseline(ctx: &RunCtx) -> BaselineRun {
    let verify = &ctx.settings.verify.value;
    let mut baseline = Baseline {
        schema_version: SCHEMA_VERSION,
        base_commit: ctx.base_commit.clone(),
        error: None,
        commands: Vec::new(),
        cannot_run: Vec::new(),
    };
    if verify.is_empty() {
        baseline.commands.extend(rules_on_base(ctx));
        ctx.publish_baseline(&baseline);
        return BaselineRun { baseline, tree: None };
    }
    ctx.events.emit(None, &arbiter_core::event::BaselineStarted { commands: verify.to_vec() }).await;
    let log_dir = ctx.run_dir.path().join("baseline");
    let _ = std::fs::create_dir_all(&log_dir);
    let mut kept = None;
    match prepare_workspace(ctx, None, &log_dir).await {
        Err(e) => baseline.error = Some(e),
        Ok(slot) => {
            let jail = ctx.confinement.jail(&slot);
            let tree = slot.tree();
            let run = GateRun {
                cwd: &tree,
                jail: jail.as_ref(),
                env: &ctx.command_env(),
                timeout: Duration::from_secs(ctx.settings.verify_timeout_seconds.value),
                log_dir: &log_dir,
                cancel: &ctx.cancel,
                redactor: &ctx.redactor,
                test_reports: &ctx.settings.test_reports.value,
            };
            let gates: Vec<Gate> = verify
                .iter()
                .enumerate()
                .map(|(i, c)| Gate { command: c, canary: ctx.canary_plan(i), framework: ctx.framework_of(i) })
                .collect();
            match calibrate(run_verify(&gates, &run).await, &run).await {
                Ok(outcomes) => baseline.commands = with_unplanted(ctx, outcomes),
                Err(e) => baseline.error = Some(format!("cannot run the verify commands: {e}")),
            }
            if ctx.settings.cross_tests.value && !ctx.cancel.is_cancelled() {
                kept = Some(slot);
            } else {
                release_workspace(ctx, slot);
            }
        }
    }
    baseline.cannot_run = baseline.commands.iter().filter_map(arbiter_core::cannot_run::cannot_run).collect();
    if baseline.error.is_none() {
        baseline.commands.extend(rules_on_base(ctx));
    }
    ctx.publish_baseline(&baseline);
    if !ctx.cancel.is_cancelled()
        && let Err(e) = ctx.run_dir.write_json(paths::BASELINE, &baseline)
    {
        tracing::warn!("cannot write baseline.json: {e}");
    }
    let finished = BaselineFinished {
        error: baseline.error.clone(),
        results: baseline
            .commands
            .iter()
            .map(|c| BaselineResult { command: c.command.clone(), passed: c.passed(), exit_code: c.exit_code })
            .collect(),
    };
    ctx.events.emit(None, &finished).await;
    BaselineRun { baseline, tree: kept }
}

/// The rules gate's baseline: it passes on the base by definition, since it judges what a
/// candidate changes (project checks failing on the base are not counted against anyone).
fn rules_on_base(ctx: &RunCtx) -> Option<CommandOutcome> {
    ctx.rules.as_ref()?;
    Some(CommandOutcome {
        command: arbiter_core::repair::RULES_GATE.into(),
        exit_code: Some(0),
        timed_out: false,
        duration_ms: 0,
        output_tail: "judged on the files each candidate changes".into(),
        canary: None,
        failed_tests: None,
        test_reports: Vec::new(),
    })
}

/// The base's gate runs, each canary calibrated: a command whose run did not show its canary
/// failing (it does not collect it, or its output cannot be read) runs again without it, and
/// that plain run is its baseline.
async fn calibrate(
    outcomes: std::io::Result<Vec<CommandOutcome>>,
    run: &GateRun<'_>,
) -> std::io::Result<Vec<CommandOutcome>> {
    let mut outcomes = outcomes?;
    for (i, outcome) in outcomes.iter_mut().enumerate() {
        let Some(check) = outcome.canary.clone() else { continue };
        if check.reading.as_ref().is_some_and(canary::calibrated) || run.cancel.is_cancelled() {
            continue;
        }
        let number = i + 1;
        let log = run.log_dir.join(format!("verify-{number}.log"));
        let _ = std::fs::rename(&log, run.log_dir.join(format!("verify-{number}.canary.log")));
        let framework = check.framework;
        let mut plain = run_gate(&Gate { command: &outcome.command, canary: None, framework }, number, run).await?;
        plain.canary = Some(CanaryCheck {
            not_planted: Some(
                "the base's run did not show the canary failing (the command does not collect it, or its output does not say); the command's exit code decides (log: verify-N.canary.log)"
                    .replace('N', &number.to_string()),
            ),
            verdict: canary::Verdict::NotApplicable,
            ..check
        });
        *outcome = plain;
    }
    Ok(outcomes)
}

/// The base's outcomes, each command without a canary saying why none was planted (so
/// `baseline.json` names, for every command, its canary or the reason there is none).
fn with_unplanted(ctx: &RunCtx, mut outcomes: Vec<CommandOutcome>) -> Vec<CommandOutcome> {
    for (i, outcome) in outcomes.iter_mut().enumerate() {
        if let (None, Some(Planned::NotApplicable { framework, reason })) = (&outcome.canary, ctx.canaries.get(i)) {
            outcome.canary = Some(CanaryCheck {
                framework: *framework,
                files: Vec::new(),
                not_planted: Some(reason.clone()),
                reading: None,
                verdict: canary::Verdict::NotApplicable,
            });
        }
    }
    outcomes
}

/// Which verify commands' canaries a baseline calibrated.
pub(super) fn calibration_of(baseline: &Baseline) -> Vec<bool> {
    baseline
        .commands
        .iter()
        .map(|o| {
            o.canary.as_ref().is_some_and(|c| {
                c.verdict != canary::Verdict::NotApplicable && c.reading.as_ref().is_some_and(canary::calibrated)
            })
        })
        .collect()
}
