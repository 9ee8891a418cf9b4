//! The repair loop inside a candidate (DESIGN §3 step 2): after its agent ends, the gates
//! run in its tree as the agent left it, and the failures go back to the same agent — its
//! CLI's session continued where the CLI can, the same backend chain for the built-in
//! agent — up to `repair_rounds` times, stopping at the first round where every gate passes.
//!
//! Each round is evidence in the candidate's directory: `repair/round-<n>.json` (the gates
//! and the feedback, see `arbiter_core::repair`), `repair/round-<n>/` (the gate logs),
//! `repair/prompt-<n>.md` (what the agent was told) and `repair/attempt-<n>.stdout.log`
//! (the output of the agent run that round <n> judged). The rounds only advise: the gates
//! that decide eligibility run afterwards, with the base's tests, as for any candidate.

use std::path::Path;
use std::time::Duration;

use arbiter_core::artifact::paths;
use arbiter_core::event::{AgentStarted, RepairRound as RepairRoundEvent};
use arbiter_core::gate::CommandOutcome;
use arbiter_core::repair::{RepairRound, repair_prompt};

use crate::agent::{AgentContext, AgentRunner};
use crate::gates::{Gate, GateRun, run_verify};
use crate::pool::Slot;

use super::{CandidateRun, RunCtx, candidate, resume};

/// Runs the repair rounds of a candidate whose agent has ended, updating its agent outcome
/// and calls with every run of the agent.
pub(super) async fn repair(
    ctx: &RunCtx,
    run: &mut CandidateRun,
    runner: &dyn AgentRunner,
    agent: &mut AgentContext,
    slot: &Slot,
    cdir: &Path,
) {
    let rounds = ctx.settings.repair_rounds.value;
    let task_prompt = ctx.task.candidate_prompt();
    let dir = cdir.join("repair");
    for round in 1..=rounds {
        if !may_repair(ctx, run) {
            return;
        }
        if let Err(e) = std::fs::create_dir_all(&dir) {
            tracing::warn!("cannot create {}: {e}; no repair round", dir.display());
            return;
        }
        let outcomes = round_gates(ctx, slot, &dir.join(format!("round-{round}"))).await;
        if ctx.cancel.is_cancelled() {
            return;
        }
        let record = RepairRound::from_outcomes(round, rounds, &outcomes);
        let _ = crate::rundir::write_atomic(
            &dir.join(format!("round-{round}.json")),
            (serde_json::to_string_pretty(&record).unwrap_or_default() + "\n").as_bytes(),
        );
        ctx.events.emit(Some(&run.id), &RepairRoundEvent { round, of: rounds, failing: record.failing() }).await;
        let Some(feedback) = record.feedback else { return };
        let prompt = ctx.redactor.redact(&repair_prompt(&task_prompt, &feedback, round, rounds));
        let written = std::fs::write(dir.join(format!("prompt-{round}.md")), &prompt)
            .and_then(|()| std::fs::write(&agent.prompt_file, &prompt));
        if let Err(e) = written {
            tracing::warn!("cannot write the repair prompt: {e}; the repair loop stops");
            return;
        }
        // The output of the run this round judged is kept beside the next one's.
        for name in [paths::STDOUT, paths::STDERR] {
            let from = cdir.join(name);
            if from.exists() {
                let _ = std::fs::rename(&from, dir.join(format!("attempt-{round}.{name}")));
            }
        }
        agent.resume_session = resume::session_of(cdir);
        let started = AgentStarted { runner: run.runner.clone(), kind: runner.kind().to_string() };
        ctx.events.emit(Some(&run.id), &started).await;
        let took_before = run.agent.duration_ms;
        let spec = ctx.settings.runner_for(run.index).clone();
        let place = candidate::backend_place(ctx, &spec, &ctx.settings.backend_chain_for(run.index)).await;
        let ran = runner.run(agent).await;
        drop(place);
        match ran {
            Ok(report) => {
                run.agent = report.outcome;
                run.agent.duration_ms += took_before;
                run.calls.extend(report.calls);
                if report.details.is_some() {
                    run.agent_details = report.details;
                }
                for (source, value) in &report.secrets {
                    run.agent_secrets.add(source.clone(), value);
                }
            }
            Err(e) => {
                run.setup_error = Some(format!("repair round {round}: {e}"));
            }
        }
        ctx.events.emit(Some(&run.id), &candidate::agent_finished(&run.agent)).await;
    }
}

/// Whether the agent ended in a way another round can build on: it ran to its end (with or
/// without success), and the run is neither interrupted nor out of budget.
fn may_repair(ctx: &RunCtx, run: &CandidateRun) -> bool {
    let a = &run.agent;
    run.setup_error.is_none()
        && !a.cancelled
        && !a.timed_out
        && a.limit_reached.is_none()
        && !ctx.cancel.is_cancelled()
        && !ctx.budget.exhausted()
}

/// The gates in the candidate's tree as the agent left it: the verify commands (their
/// failing tests read where arbiter knows the runner), then the rules gate on the files it
/// changed. Logs go to `log_dir`.
async fn round_gates(ctx: &RunCtx, slot: &Slot, log_dir: &Path) -> Vec<CommandOutcome> {
    let tree = slot.tree();
    let verify = &ctx.settings.verify.value;
    let gates: Vec<Gate> = verify
        .iter()
        .enumerate()
        .map(|(i, c)| Gate { command: c, canary: None, framework: ctx.framework_of(i) })
        .collect();
    let jail = ctx.confinement.jail(slot);
    let run = GateRun {
        cwd: &tree,
        jail: jail.as_ref(),
        env: &ctx.command_env(),
        timeout: Duration::from_secs(ctx.settings.verify_timeout_seconds.value),
        log_dir,
        cancel: &ctx.cancel,
        redactor: &ctx.redactor,
        test_reports: &ctx.settings.test_reports.value,
    };
    let mut outcomes = match run_verify(&gates, &run).await {
        Ok(outcomes) => outcomes,
        Err(e) => {
            tracing::warn!("a repair round could not run the verify commands: {e}");
            return Vec::new();
        }
    };
    if ctx.rules.is_some() {
        let wt = slot.git();
        let touched = match crate::capture::stage(&wt, &ctx.base_commit, &ctx.settings.left_out_of_patches()).await {
            Ok(()) => crate::capture::touched_paths(&wt, &ctx.base_commit).await.unwrap_or_default(),
            Err(e) => {
                tracing::warn!("a repair round could not list the changed files: {e}");
                Vec::new()
            }
        };
        outcomes.extend(super::gating::rules_gate(ctx, &tree, &touched).await);
    }
    outcomes
}
