//! The end of a run: evidence against the baseline, cross-tests, the judge where the
//! evidence cannot decide, the decision, materialization of the winner, every artifact and
//! report, and the workspaces given back to the pool (or kept for the user).

use std::sync::Arc;

use arbiter_core::artifact::{
    AgreementArtifact, Baseline, BudgetOutcome, Evidence, Materialization, RankingArtifact, SCHEMA_VERSION,
    SelectionArtifact, SpendingLine, SpendingReport, paths,
};
use arbiter_core::cost::{self, CostSummary};
use arbiter_core::crosstest::CrossTestMatrix;
use arbiter_core::event::Warning;
use arbiter_core::gate::{self};
use arbiter_core::ids::CandidateId;
use arbiter_core::report::{ReportInput, render_markdown};
use arbiter_core::selection::{self, CandidateFacts, Decision, PatchFacts, Policy};
use arbiter_core::settings::ApplyMode;
use arbiter_core::status::{CandidateStatus, RunStatus};
use arbiter_core::strategy::{RanCost, cost_of_all};
use arbiter_core::viewer::render_html;
use arbiter_store::CandidateRecord;
use serde_json::json;

use crate::materialize::{self, describe_paths};

use super::baseline::BaselineRun;
use super::crosstests::cross_test;
use super::{CandidateRun, EngineError, RunCtx, RunOutcome};
use crate::judge;

/// What arbiter observed about one candidate, against the baseline: its evidence (the
/// artifact) and the facts selection decides on.
pub(super) fn assess(ctx: &RunCtx, r: &CandidateRun, baseline: &Baseline) -> (Evidence, CandidateFacts) {
    let has_gates = ctx.gate_count() > 0;
    let (gates, summary) = if r.gate_outcomes.is_empty() && r.gates_skipped.is_some() || !has_gates {
        (Vec::new(), None)
    } else {
        let (g, s) = gate::compare(&r.gate_outcomes, &baseline.commands);
        (g, Some(s))
    };
    // A candidate whose gates stopped midway has no complete verdict.
    let summary = summary.filter(|_| r.gate_outcomes.len() == ctx.gate_count());
    let cost = if r.calls.iter().all(|c| c.cost.is_some()) && !r.calls.is_empty() {
        Some(r.calls.iter().filter_map(|c| c.cost).sum())
    } else {
        None
    };
    let evidence = Evidence {
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
        protected_changes: r.protected_changes.clone(),
        not_run: r.not_run.clone(),
        violations: r.violations.clone(),
        sandbox: Some(ctx.confinement.enforcement.clone()),
    };
    let facts = CandidateFacts {
        id: r.id.clone(),
        index: r.index,
        runner: r.runner.clone(),
        status: r.status,
        // An agent that failed by its own account did not succeed, whatever its exit code.
        agent_exit_code: r.agent.exit_code.filter(|_| r.agent.failure.is_none()),
        setup_error: r.setup_error.clone(),
        patch: r.patch.as_ref().map(|p| PatchFacts {
            stats: p.stats.clone(),
            normalized_hash: p.normalized_hash.clone(),
            applies_cleanly: p.applies_cleanly,
            apply_check_error: p.apply_check_error.clone(),
        }),
        gates: summary,
        cost,
        protected_changes: r.protected_changes.clone(),
        judge: None,
        cross_tests: None,
        not_run: r.not_run.clone(),
        violations: r.violations.clone(),
    };
    (evidence, facts)
}

fn policy(ctx: &RunCtx) -> Policy {
    Policy { has_verify: ctx.gate_count() > 0, allow_test_changes: ctx.settings.allow_test_changes.value }
}

/// Whether a finished candidate is eligible on its own evidence (an escalation stops there).
pub(super) fn passes(ctx: &RunCtx, run: &CandidateRun, baseline: &Baseline) -> bool {
    let (_, facts) = assess(ctx, run, baseline);
    selection::rejection(&facts, policy(ctx)).is_none()
}

/// Evaluation against the baseline, the decision, materialization and every artifact.
pub(super) async fn finish(
    ctx: &Arc<RunCtx>,
    mut runs: Vec<CandidateRun>,
    mut baseline_run: BaselineRun,
) -> Result<RunOutcome, EngineError> {
    // Checked again after each step that takes time: an interruption during the cross-tests
    // or the judging stops the run there, with nothing selected, applied or asked after it.
    let mut interrupted = ctx.cancel.is_cancelled();
    ctx.update_state(|s| s.phase = "evaluation".into());
    let baseline = baseline_run.baseline;

    let mut evidence = Vec::with_capacity(runs.len());
    let mut facts = Vec::with_capacity(runs.len());
    for r in &runs {
        let (e, f) = assess(ctx, r, &baseline);
        if let Ok(dir) = ctx.run_dir.candidate_dir(&r.id) {
            let _ = crate::rundir::write_atomic(
                &dir.join(paths::EVIDENCE),
                (serde_json::to_string_pretty(&e).unwrap_or_default() + "\n").as_bytes(),
            );
        }
        facts.push(f);
        evidence.push(e);
    }
    if let Some(err) = &baseline.error {
        ctx.events
            .emit(
                None,
                &Warning::new(format!(
                    "the baseline could not run: {err}; every verify command must pass on each candidate"
                )),
            )
            .await;
    }

    // The evaluation follows one pure loop (`selection::next`): gather what it asks for,
    // record it in the facts, ask again; the run is decided once, when nothing more can
    // separate the candidates. An interruption skips what is left to gather.
    let policy = policy(ctx);
    let mut gathered = selection::Gathered::default();
    let mut cross = CrossTestMatrix::skipped("the run was interrupted");
    let mut judged = Judged::default();
    // Whether the evaluation reached the judging step uninterrupted (the reviews follow it).
    let mut judging = false;
    let mut decision = loop {
        match selection::next(&facts, policy, gathered) {
            selection::Next::CrossTests { survivors } => {
                if !interrupted {
                    ctx.update_state(|s| s.phase = "cross-tests".into());
                    cross = cross_test(ctx, &runs, &survivors, baseline_run.tree.as_ref()).await;
                }
                if cross.ran {
                    for f in facts.iter_mut() {
                        f.cross_tests = cross.scores.get(&f.id).copied();
                    }
                }
                interrupted |= ctx.cancel.is_cancelled();
                gathered.cross_tests = true;
            }
            selection::Next::Judge { eligible } => {
                if !interrupted {
                    ctx.update_state(|s| s.phase = "judging".into());
                    judging = true;
                    judged = judge(ctx, &runs, &mut facts, &eligible, &cross).await;
                }
                gathered.judges = true;
            }
            selection::Next::Done { decision, judge_skipped } => {
                if !interrupted && let Some(why) = judge_skipped {
                    ctx.update_state(|s| s.phase = "judging".into());
                    judging = true;
                    judged = judge_skipped_because(ctx, why).await;
                }
                break decision;
            }
        }
    };
    if judging && !ctx.cancel.is_cancelled() {
        ctx.update_state(|s| s.phase = "reviewing".into());
        let (reviews, calls) = review_survivors(ctx, &runs, &decision, &cross).await;
        judged.reviews = reviews;
        judged.calls.extend(calls);
    }
    interrupted |= ctx.cancel.is_cancelled();
    if interrupted {
        decision.winner = None;
        decision.summary =
            "the run was interrupted (Ctrl-C or SIGTERM) before it finished; nothing was selected or applied".into();
    } else if let Some(first) = baseline.cannot_run.first() {
        decision.winner = None;
        decision.summary = format!("{}; no candidate can be judged, and nothing was applied", first.describe()).into();
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
            None,
            &arbiter_core::event::SelectionMade {
                winner: decision.winner.clone(),
                summary: decision.summary.clone(),
                eligible: decision.ranking.iter().filter(|r| r.eligible).count(),
            },
        )
        .await;

    let materialization = match (&decision.winner, interrupted) {
        (Some(w), false) => Some(materialize_winner(ctx, w).await),
        _ => None,
    };

    let cost = cost::summarize(runs.iter().flat_map(|r| r.calls.clone()).chain(judged.calls).collect());
    let spending = spending(ctx, &runs, &decision, &cost, judged.budget_stopped);
    let status = if interrupted {
        RunStatus::Interrupted
    } else if decision.winner.is_none() {
        RunStatus::Failed
    } else if materialization.as_ref().is_some_and(|m| m.error.is_some()) {
        RunStatus::NotApplied
    } else {
        RunStatus::Succeeded
    };
    let ranking = RankingArtifact::from_decision(&decision);
    let mut selection_artifact = SelectionArtifact::from_decision(&ctx.run_id, &decision, interrupted);
    selection_artifact.spending = Some(spending.clone());
    let finished = ctx.clock.now();
    ctx.update_state(|s| {
        s.status = status;
        s.phase = "done".into();
        s.finished_at = Some(finished);
        s.winner = decision.winner.clone();
        s.materialization = materialization.clone();
        s.message = Some(decision.summary.to_string());
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
    write(paths::PAIRWISE, serde_json::to_value(&judged.pairs).unwrap_or_else(|_| json!([])))?;
    ctx.run_dir.write_json(paths::CROSS_TESTS, &cross)?;
    ctx.run_dir.write_json(paths::SELECTION, &selection_artifact)?;
    let state = ctx.state.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let report_input = ReportInput {
        state: &state,
        baseline: Some(&baseline),
        evidence: &evidence,
        ranking: &ranking,
        selection: &selection_artifact,
        cost: &cost,
        pairs: &judged.pairs,
        cross_tests: Some(&cross),
        reviews: &judged.reviews,
    };
    ctx.run_dir.write_text(paths::REPORT, &render_markdown(&report_input))?;
    let patches: Vec<(CandidateId, String)> = runs.iter().map(|r| (r.id.clone(), r.patch_text.clone())).collect();
    let viewer = render_html(&report_input, &patches, ctx.settings.limits.value.max_patch_bytes);
    ctx.run_dir.write_text(paths::VIEWER, &viewer)?;

    // Workspaces go last: a crash before this point leaves them marked in use by this run,
    // and the next run records it interrupted.
    let mut kept = Vec::new();
    for slot in runs.iter_mut().filter_map(|r| r.tree.take()).chain(baseline_run.tree.take()) {
        if ctx.settings.keep_worktrees.value {
            kept.push(slot.tree().display().to_string());
            slot.keep();
        } else {
            slot.release();
        }
    }
    ctx.events.emit(None, &arbiter_core::event::WorktreesRemoved { kept }).await;
    ctx.store.finish_run(&ctx.run_id, status, decision.winner.as_ref(), Some(finished)).await?;
    let ended = arbiter_core::event::RunFinished {
        status,
        winner: decision.winner.clone(),
        run_dir: ctx.run_dir.path().display().to_string(),
    };
    if interrupted {
        ctx.events.emit(None, &arbiter_core::event::RunInterrupted(ended)).await;
    } else {
        ctx.events.emit(None, &ended).await;
    }
    // Last: everything of the run is written, the final event included.
    ctx.run_dir.seal_or_warn(&ctx.run_id);
    Ok(RunOutcome {
        run_id: ctx.run_id.clone(),
        run_dir: ctx.run_dir.path().to_path_buf(),
        status,
        decision,
        materialization,
        cost,
        baseline,
        evidence,
        spending,
        verification: ctx.settings.verification(),
    })
}

/// Applies the winner as the settings ask; failures are recorded, never fatal to the run.
async fn materialize_winner(ctx: &RunCtx, winner: &CandidateId) -> Materialization {
    let mode = ctx.settings.apply.value.clone();
    let patch = ctx.run_dir.path().join(paths::CANDIDATES).join(winner.as_str()).join(paths::PATCH);
    let result: Result<Option<String>, String> = match &mode {
        ApplyMode::None => Ok(None),
        _ if !ctx.settings.may_apply_unchecked() => Err(format!(
            "nothing checked the candidates: no verify command was given and none was found in the repository. Look at the winner (`arbiter runs show {run}`) and apply it yourself with `arbiter apply {run}`, or give a verify command (--verify 'CMD', or `verify = [\"CMD\"]` under [run] in .arbiter/config.toml), or pass --no-verify to apply an unverified winner",
            run = ctx.run_id
        )),
        ApplyMode::Worktree => match ctx.repo.dirty_paths().await.map(|d| ctx.settings.uncommitted_work(d)) {
            Ok(dirty) if !dirty.is_empty() && !ctx.allow_dirty => Err(format!(
                "the working tree changed during the run ({}); apply later with `arbiter apply {}`",
                describe_paths(&dirty),
                ctx.run_id
            )),
            Err(e) => Err(e.to_string()),
            // Checked on what the working tree is at now, which may have moved since the base.
            Ok(_) => {
                async {
                    let head = ctx.repo.resolve_commit("HEAD").await.map_err(|e| e.to_string())?;
                    let checked = checked(ctx, &head, &patch).await?;
                    materialize::apply_to_worktree(&ctx.repo, &checked).await.map_err(|e| e.to_string())?;
                    Ok(None)
                }
                .await
            }
        },
        ApplyMode::Branch(name) => {
            let message = format!("{}\n\narbiter run {} (candidate {winner})", ctx.task.title(), ctx.run_id);
            async {
                let checked = checked(ctx, &ctx.base_commit, &patch).await?;
                materialize::commit_to_new_branch(&ctx.repo, &checked, name, &message).await.map_err(|e| e.to_string())
            }
            .await
            .map(Some)
        }
    };
    let m = match result {
        Ok(commit) => Materialization { applied: mode != ApplyMode::None, mode, commit, error: None },
        Err(error) => Materialization { applied: false, mode, commit: None, error: Some(error) },
    };
    let done = arbiter_core::event::Materialized {
        mode: m.mode.to_string(),
        applied: m.applied,
        commit: m.commit.clone(),
        error: m.error.clone(),
    };
    if m.error.is_some() {
        ctx.events.emit(Some(winner), &arbiter_core::event::MaterializeFailed(done)).await;
    } else {
        ctx.events.emit(Some(winner), &done).await;
    }
    m
}

/// The winner's patch (the file `patch`) checked on `onto`, or why it may not go there.
async fn checked(ctx: &RunCtx, onto: &str, patch: &std::path::Path) -> Result<materialize::CheckedPatch, String> {
    match materialize::check_file(&ctx.repo, onto, patch, &ctx.settings.limits.value).await {
        Ok(Ok(p)) => Ok(p),
        Ok(Err(refusal)) => Err(materialize::MaterializeError::from(refusal).to_string()),
        Err(e) => Err(e.to_string()),
    }
}

/// What judging produced: the pairs compared, the calls made, and whether the budget cut
/// it short.
#[derive(Default)]
struct Judged {
    pairs: Vec<arbiter_core::pairwise::PairRecord>,
    reviews: Vec<arbiter_core::review::ReviewArtifact>,
    calls: Vec<arbiter_core::cost::CallRecord>,
    budget_stopped: bool,
}

/// The evidence a judge or reviewer is shown about one candidate, in words.
fn evidence_words(run: &CandidateRun, cross: &CrossTestMatrix) -> String {
    let mut words = format!(
        "{} of {} verify command(s) pass",
        run.gate_outcomes.iter().filter(|o| o.passed()).count(),
        run.gate_outcomes.len()
    );
    if let Some(score) = cross.scores.get(&run.id) {
        words.push_str(&format!(
            "; cross-tests: passes {} (tests the candidates wrote that fail on the base)",
            score.describe()
        ));
    }
    if !run.protected_changes.is_empty() {
        words.push_str(&format!(
            "; it changed protected test/CI files ({}), which the task allows",
            run.protected_changes.join(", ")
        ));
    }
    words
}

/// The judges, asked about the `eligible` candidates the evidence cannot separate (best
/// first): the top four are compared pairwise, and their scores go into `facts`. No judge
/// configured, or a spent budget, skips them, with an event saying why; so does an
/// interruption, before the next request.
async fn judge(
    ctx: &RunCtx,
    runs: &[CandidateRun],
    facts: &mut [CandidateFacts],
    eligible: &[selection::RankedCandidate],
    cross: &CrossTestMatrix,
) -> Judged {
    const SHORTLIST: usize = 4;
    let mut judged = Judged::default();
    let Some(models) = ctx.models.as_ref().filter(|m| !m.judges.is_empty()) else {
        return judge_skipped_because(ctx, String::new()).await;
    };
    if ctx.budget.exhausted() {
        judged.budget_stopped = true;
        let why = format!("{}; no judge was asked", ctx.budget.reached_reason());
        ctx.events.emit(None, &arbiter_core::event::JudgeDecision::skipped(Some(why))).await;
        return judged;
    }
    // Judging runs: the best four by the evidence are compared.
    let eligible: Vec<&selection::RankedCandidate> = eligible.iter().collect();
    let survivors = judge_inputs(runs, &eligible, cross);
    let shortlist = &survivors[..survivors.len().min(SHORTLIST)];
    let judges = judge::Judges { client: &models.client, task: &ctx.task, budget: &ctx.budget, cancel: &ctx.cancel };
    let result = judges.compare_all(&models.judges, shortlist).await;
    let outcomes: Vec<_> = result.pairs.iter().map(|p| p.outcome.clone()).collect();
    let copeland = arbiter_core::pairwise::copeland(&outcomes);
    let strength = arbiter_core::pairwise::bradley_terry(&outcomes, 200);
    // Candidates left off the shortlist were behind it on the evidence: below every judged
    // one (the judge criteria come after gates and votes, so this only orders ties there).
    let floor = copeland.values().min().copied().unwrap_or(0) - 1;
    let eligible_ids: Vec<_> = eligible.iter().map(|r| r.candidate_id.clone()).collect();
    for f in facts.iter_mut() {
        f.judge = match (copeland.get(&f.id), strength.get(&f.id)) {
            (Some(c), Some(s)) => Some(selection::JudgeScore { copeland: *c, strength: *s }),
            _ if eligible_ids.contains(&f.id) && !result.pairs.is_empty() => {
                Some(selection::JudgeScore { copeland: floor, strength: 0.0 })
            }
            _ => None,
        };
    }
    let fallbacks = result.pairs.iter().flat_map(|p| [&p.a_first, &p.b_first]).filter(|v| v.fallback.is_some()).count();
    judged.budget_stopped = ctx.budget.exhausted() && fallbacks > 0;
    let ran = arbiter_core::event::JudgeDecision {
        ran: true,
        reason: Some("the evidence could not separate the top candidates".into()),
        shortlist: Some(shortlist.iter().map(|s| s.id.to_string()).collect()),
        pairs: Some(result.pairs.len()),
        fallbacks: Some(fallbacks),
        budget_stopped: Some(judged.budget_stopped),
        interrupted: Some(ctx.cancel.is_cancelled()),
    };
    ctx.events.emit(None, &ran).await;
    judged.calls.extend(result.calls);
    judged.pairs = result.pairs;
    judged
}

/// Judging skipped for `why` — or, whatever the evidence said, because no judge is
/// configured (`why` empty: that is the reason) — as an event.
async fn judge_skipped_because(ctx: &RunCtx, why: String) -> Judged {
    let no_judge = ctx.models.as_ref().is_none_or(|m| m.judges.is_empty());
    let why = if no_judge || why.is_empty() {
        "no judge is configured (no backend with the selection role, or --no-judge)".to_string()
    } else {
        why
    };
    ctx.events.emit(None, &arbiter_core::event::JudgeDecision::skipped(Some(why))).await;
    Judged::default()
}

/// What a judge or a reviewer is shown of each of `ranked`, in that order.
fn judge_inputs(
    runs: &[CandidateRun],
    ranked: &[&selection::RankedCandidate],
    cross: &CrossTestMatrix,
) -> Vec<judge::JudgeInput> {
    ranked
        .iter()
        .filter_map(|r| runs.iter().find(|run| run.id == r.candidate_id))
        .map(|run| judge::JudgeInput {
            id: run.id.clone(),
            diff: arbiter_core::patch::normalized_for_review(&run.patch_text),
            evidence: evidence_words(run, cross),
        })
        .collect()
}

/// Every surviving (eligible) candidate's risk review, whenever the `review` role has
/// backends, judging or not: what could still be wrong with each, for the report's "Risks
/// that remain". Reviews inform; they do not rank. Each is written to `reviews/<id>.json`;
/// the `review_decision` event says whether they ran, and why not.
async fn review_survivors(
    ctx: &RunCtx,
    runs: &[CandidateRun],
    decision: &Decision,
    cross: &CrossTestMatrix,
) -> (Vec<arbiter_core::review::ReviewArtifact>, Vec<arbiter_core::cost::CallRecord>) {
    let Some(models) = ctx.models.as_ref().filter(|m| !m.reviewers.is_empty()) else {
        return Default::default();
    };
    let eligible: Vec<&selection::RankedCandidate> = decision.ranking.iter().filter(|r| r.eligible).collect();
    let skip = if eligible.is_empty() {
        Some("no candidate survived to be reviewed".to_string())
    } else if ctx.budget.exhausted() {
        Some(format!("{}; no reviewer was asked", ctx.budget.reached_reason()))
    } else {
        None
    };
    if let Some(reason) = skip {
        let skipped =
            arbiter_core::event::ReviewDecision { ran: false, reason: Some(reason), reviewed: None, fallbacks: None };
        ctx.events.emit(None, &skipped).await;
        return Default::default();
    }
    let survivors = judge_inputs(runs, &eligible, cross);
    let judges = judge::Judges { client: &models.client, task: &ctx.task, budget: &ctx.budget, cancel: &ctx.cancel };
    let (reviews, calls) = judges.review_all(&models.reviewers, &survivors).await;
    for r in &reviews {
        let rel = format!("{}/{}.json", paths::REVIEWS, r.candidate_id);
        if let Err(e) = ctx.run_dir.write_json(&rel, r) {
            ctx.events.emit(None, &Warning::new(format!("cannot write {rel}: {e}"))).await;
        }
    }
    let fallbacks = reviews.iter().filter(|r| r.review.is_none()).count();
    let ran = arbiter_core::event::ReviewDecision {
        ran: true,
        reason: None,
        reviewed: Some(survivors.iter().map(|s| s.id.to_string()).collect()),
        fallbacks: Some(fallbacks),
    };
    ctx.events.emit(None, &ran).await;
    (reviews, calls)
}

/// How the run spent its candidates and money: the order they were tried in with their
/// prices, what ran, where an escalation stopped and what running them all would have cost,
/// and what the budget did.
fn spending(
    ctx: &RunCtx,
    runs: &[CandidateRun],
    decision: &Decision,
    cost: &CostSummary,
    judging_stopped: bool,
) -> SpendingReport {
    let settings = &ctx.settings;
    let bucket = |id: &CandidateId| cost.by_candidate.get(id.as_str());
    let candidates: Vec<SpendingLine> = runs
        .iter()
        .map(|r| SpendingLine {
            candidate_id: r.id.clone(),
            runner: r.runner.clone(),
            price_per_mtok: settings.slot(r.index).price(),
            status: r.status,
            cost: bucket(&r.id).filter(|b| b.uncosted_calls == 0 && b.calls > 0).map(|b| b.known_cost),
        })
        .collect();
    let ran_costs: Vec<Option<RanCost>> = runs
        .iter()
        .map(|r| {
            (r.status != CandidateStatus::Skipped).then(|| {
                let b = bucket(&r.id);
                RanCost {
                    input_tokens: b.map_or(0, |b| b.input_tokens),
                    output_tokens: b.map_or(0, |b| b.output_tokens),
                    cost: b.filter(|b| b.uncosted_calls == 0).map(|b| b.known_cost),
                }
            })
        })
        .collect();
    let escalated = settings.strategy.value.escalates();
    let stopped_at = decision.winner.clone().filter(|_| escalated);
    let budget = settings.budget_usd.value.map(|limit| {
        let state = ctx.budget.snapshot();
        let reason = ctx.budget.reached_reason();
        BudgetOutcome {
            limit,
            spent: state.spent,
            reached: state.exhausted(),
            stopped: runs
                .iter()
                .filter(|r| r.agent.limit_reached.as_deref() == Some(reason.as_str()))
                .map(|r| r.id.clone())
                .collect(),
            not_started: runs
                .iter()
                .filter(|r| r.not_run.as_deref().is_some_and(|n| n.starts_with(&reason)))
                .map(|r| r.id.clone())
                .collect(),
            judging_stopped,
            uncharged_calls: ctx.budget.uncharged_calls(),
        }
    });
    SpendingReport {
        strategy: settings.strategy.value,
        ran: runs.iter().filter(|r| r.status != CandidateStatus::Skipped).count(),
        stopped_at,
        spent: cost.total.known_cost,
        cost_complete: cost.complete,
        cost_of_all: if escalated { cost_of_all(&settings.slots, &ran_costs) } else { None },
        candidates,
        budget,
    }
}
