//! A run's tournament: `/plans/{plan}/runs/{run}` (a plan task's run, in the plan's
//! repository) and `/runs/{run}` (a run of the local repository, `arbiter ui`).
//!
//! Its candidates (runner, model, state, time, cost), the gates per command and per test,
//! the cross-test and pairwise matrices, the votes, the ranking with every reason, the diffs
//! side by side (highlighted), the transcripts (collapsed), the final report and a failure
//! analysis when one ran. A run still going shows what it has so far and stays live.

use std::collections::BTreeMap;

use arbiter_core::artifact::RunState;
use arbiter_core::crosstest::CellOutcome;
use arbiter_core::ids::RunId;
use arbiter_core::pairwise::PairOutcome;
use arbiter_core::status::{CandidateStatus, RunStatus};
use arbiter_core::time::{Timestamp, human_duration};
use arbiter_runner::run_record::{RunRecord, RunRecordError};
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use maud::{Markup, html};

use super::diff::highlighted_diff;
use crate::state::AppState;
use crate::web::layout::{Page, Section, Tone, empty, money, plan_href, printable, short, task_href, when, word_badge};
use crate::web::session::Viewer;
use crate::web::{PageError, admin, check_plan_id, workspace_of};

/// Whether the request is a live page's look again: it swaps only the live parts, so the
/// diffs, transcripts and report are left out of its answer.
fn live_look(headers: &HeaderMap) -> bool {
    headers.contains_key("x-arbiter-live")
}

pub async fn plan_run(
    viewer: Viewer,
    State(state): State<AppState>,
    headers: HeaderMap,
    Path((plan, run)): Path<(String, String)>,
) -> Result<Response, PageError> {
    check_plan_id(&plan)?;
    let id = RunId::parse(&run).map_err(|_| PageError::not_found(format!("'{}' is not a run id", printable(&run))))?;
    let details = admin(&state)?.view(&plan).await?;
    // Only a run of one of the plan's tasks is shown under the plan.
    let Some(task) = details.task_of_run(id.as_str()).map(str::to_string) else {
        return Err(PageError::not_found(format!("no task of plan {plan} made a run {run}")));
    };
    let Some(ws) = workspace_of(&state, &details.view.plan.header).await else {
        return Err(PageError::not_found(format!("the repository of plan {plan} is not on this server")));
    };
    let run_record = read(ws.run_dir(&id)).await?;
    let crumbs = html! {
        a href=(plan_href(&plan)) { "Plan " (plan) } " › "
        a href=(task_href(&plan, &task)) { "task " (printable(&task)) } " › run"
    };
    let body = render(&run_record, crumbs, state.now(), live_look(&headers));
    let live = !is_over(&run_record.state);
    Ok(Page::new(format!("Run {run}"), Section::Plans, &viewer, &state, body)
        .live(if live { Some(crate::web::stream_url(&state, Some(&plan)).await) } else { None })
        .every(live.then_some(3))
        .render())
}

pub async fn local_run(
    viewer: Viewer,
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(run): Path<String>,
) -> Result<Response, PageError> {
    let Some(runs) = state.local_runs.clone() else {
        return Err(PageError::not_found(
            "this server has no local runs: a plan task's run is at /plans/PLAN/runs/RUN",
        ));
    };
    let id = RunId::parse(&run).map_err(|_| PageError::not_found(format!("'{}' is not a run id", printable(&run))))?;
    let run_record = read(runs.join(id.as_str())).await?;
    let crumbs = html! { a href="/runs" { "Runs" } " › run" };
    let live = !is_over(&run_record.state);
    let body = render(&run_record, crumbs, state.now(), live_look(&headers));
    Ok(Page::new(format!("Run {run}"), Section::Runs, &viewer, &state, body).every(live.then_some(2)).render())
}

async fn read(dir: std::path::PathBuf) -> Result<RunRecord, PageError> {
    match tokio::task::spawn_blocking(move || RunRecord::read(&dir)).await {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(RunRecordError::NotARun(_))) => {
            Err(PageError::not_found("no such run (its directory holds no state.json)"))
        }
        Ok(Err(e)) => Err(PageError::internal("reading the run", e)),
        Err(e) => Err(PageError::internal("reading the run", e)),
    }
}

fn is_over(s: &RunState) -> bool {
    !matches!(s.status, RunStatus::Running)
}

fn candidate_tone(s: CandidateStatus) -> Tone {
    match s {
        CandidateStatus::Finished => Tone::Good,
        CandidateStatus::Queued | CandidateStatus::Skipped | CandidateStatus::Cancelled => Tone::Quiet,
        CandidateStatus::Preparing | CandidateStatus::Running | CandidateStatus::Evaluating => Tone::Busy,
        CandidateStatus::AgentFailed
        | CandidateStatus::TimedOut
        | CandidateStatus::LimitReached
        | CandidateStatus::SetupFailed => Tone::Bad,
    }
}

/// The page's body (`live_only`: only what a live page swaps).
pub fn render(r: &RunRecord, crumbs: Markup, now: Timestamp, live_only: bool) -> Markup {
    let s = &r.state;
    let winner = r.selection.as_ref().and_then(|sel| sel.winner.clone()).or_else(|| s.winner.clone());
    // Each candidate's models, from its calls.
    let mut models: BTreeMap<String, Vec<String>> = BTreeMap::new();
    if let Some(cost) = &r.cost {
        for call in &cost.calls {
            if let (Some(c), Some(m)) = (&call.candidate, &call.model) {
                let list = models.entry(c.to_string()).or_default();
                if !list.contains(m) {
                    list.push(m.clone());
                }
            }
        }
    }
    let elapsed = |from: Option<Timestamp>, to: Option<Timestamp>| -> String {
        match from {
            Some(f) => human_duration(to.unwrap_or(now).millis_since(f)),
            None => "—".into(),
        }
    };
    html! {
        p.muted { (crumbs) }
        h1 { "Run " span.mono { (s.run_id.as_str()) } " " (run_badge(s.status)) }
        p { (printable(&s.task.title())) }
        section.card #run-summary data-live {
            h2 { "Decision" }
            @match &r.selection {
                Some(sel) => p { (sel.summary) },
                None => p.muted { "Not decided yet: the run is " (s.phase) "." },
            }
            table {
                tr { th scope="row" { "Base" } td { code { (short(&s.base_commit)) } " (" (printable(&s.base_ref)) ")" } }
                tr { th scope="row" { "Started" } td { (when(s.started_at)) " · " (elapsed(Some(s.started_at), s.finished_at)) } }
                @if let Some(w) = &winner { tr { th scope="row" { "Winner" } td.mono { (w.as_str()) } } }
                @if let Some(m) = &s.materialization { tr { th scope="row" { "Materialized" } td { (printable(&m.describe())) } } }
                @if let Some(c) = &r.cost { tr { th scope="row" { "Cost" } td { (c.total.describe_cost()) } } }
                @if let Some(sb) = &s.sandbox { tr { th scope="row" { "Sandbox" } td { (printable(&sb.describe())) } } }
            }
        }
        section.card #candidates data-live aria-labelledby="cand-h" {
            h2 #cand-h { "Candidates" }
            div.scroll { table {
                thead { tr {
                    th scope="col" { "Candidate" } th scope="col" { "Runner" } th scope="col" { "Model" } th scope="col" { "State" }
                    th scope="col" { "Elapsed" } th scope="col" class="num" { "Cost" } th scope="col" { "Gates" }
                    th scope="col" class="num" { "Votes" } th scope="col" class="num" { "Rank" }
                } }
                tbody {
                    @for c in &s.candidates {
                        @let files = r.candidate(&c.id);
                        @let evidence = files.and_then(|f| f.evidence.as_ref());
                        @let ranked = r.ranking.as_ref().and_then(|k| k.candidates.iter().find(|x| x.candidate_id == c.id));
                        @let status = evidence.map_or(c.status, |e| e.status);
                        tr id={ "cand-" (c.id.as_str()) } class=[(winner.as_ref() == Some(&c.id)).then_some("win")] {
                            td.mono { a href={ "#diff-" (c.id.as_str()) } { (c.id.as_str()) } @if winner.as_ref() == Some(&c.id) { " ★" } }
                            td { (printable(&c.runner)) }
                            td.mono { (models.get(c.id.as_str()).map(|m| m.join(", ")).unwrap_or_else(|| "—".into())) }
                            td { (word_badge(status.as_str(), candidate_tone(status))) }
                            td { @match (c.started_at, files.and_then(|f| f.summary.as_ref()), evidence) {
                                (Some(from), _, _) => (elapsed(Some(from), c.finished_at)),
                                (None, Some(s), _) if s.started_at.is_some() => (elapsed(s.started_at, s.finished_at)),
                                (None, _, Some(e)) => (human_duration(e.agent.duration_ms)),
                                _ => "—",
                            } }
                            td.num {
                                @match (evidence.and_then(|e| e.cost), r.cost.as_ref().and_then(|k| k.by_candidate.get(c.id.as_str()))) {
                                    (Some(cost), _) => (money(cost)),
                                    (None, Some(b)) => (b.describe_cost()),
                                    (None, None) => "—",
                                }
                            }
                            td { @if let Some(g) = &c.gates { (printable(g)) } @else if let Some(k) = ranked { (k.gates_passed) "/" (k.gates_total) } }
                            td.num { @if let Some(k) = ranked { (k.votes) } }
                            td.num { @if let Some(k) = ranked { (k.rank) } }
                        }
                    }
                }
            } }
        }
        @if let Some(ranking) = &r.ranking {
            section.card aria-labelledby="rank-h" {
                h2 #rank-h { "Ranking" }
                p.muted { "Criteria in order: " (ranking.criteria.join(" → ")) }
                div.scroll { table {
                    thead { tr { th scope="col" class="num" { "Rank" } th scope="col" { "Candidate" } th scope="col" { "Eligible" } th scope="col" { "Reason" } } }
                    tbody {
                        @for c in &ranking.candidates {
                            tr class=[(winner.as_ref() == Some(&c.candidate_id)).then_some("win")] {
                                td.num { (c.rank) }
                                td.mono { (c.candidate_id.as_str()) }
                                td { @if c.eligible { (word_badge("yes", Tone::Good)) } @else { (word_badge("no", Tone::Bad)) } }
                                td { (c.reason) }
                            }
                        }
                    }
                } }
            }
        }
        (gates(r))
        @if let Some(m) = &r.cross_tests {
            section.card aria-labelledby="cross-h" {
                h2 #cross-h { "Cross-tests" }
                @if !m.ran {
                    p { "Not run: " (printable(m.skip_reason.as_deref().unwrap_or("no reason recorded"))) "." }
                } @else {
                    p.muted { "Tests the candidates wrote, run against the base and every surviving candidate; a test failing on the base and passing somewhere discriminates." }
                    div.scroll { table.matrix {
                        thead { tr {
                            th scope="col" { "Test" } th scope="col" { "Written by" }
                            @for t in &m.targets { th scope="col" { (t) } }
                        } }
                        tbody {
                            @for row in &m.tests {
                                tr {
                                    th scope="row" { span.mono { (printable(&row.test.id)) } @if row.discriminating { " " (word_badge("discriminates", Tone::Good)) } }
                                    td.mono { (row.test.authors.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(", ")) }
                                    @for t in &m.targets {
                                        @match row.outcome(t) {
                                            CellOutcome::Pass => td.pass { "pass" },
                                            CellOutcome::Fail => td.fail { "fail" },
                                            CellOutcome::Timeout => td.fail { "timeout" },
                                            CellOutcome::Missing => td { "—" },
                                        }
                                    }
                                }
                            }
                        }
                    } }
                }
            }
        }
        @if !r.pairs.is_empty() {
            section.card aria-labelledby="pair-h" {
                h2 #pair-h { "Pairwise judge" }
                p.muted { "Each pair judged in both orders; a win counts only when both orders agree." }
                div.scroll { table {
                    thead { tr { th scope="col" { "Pair" } th scope="col" { "A shown first" } th scope="col" { "B shown first" } th scope="col" { "Outcome" } } }
                    tbody {
                        @for p in &r.pairs {
                            tr {
                                td.mono { (p.a) " vs " (p.b) }
                                td { (printable(&p.a_first.describe())) }
                                td { (printable(&p.b_first.describe())) }
                                td { @match &p.outcome {
                                    PairOutcome::Win { winner, .. } => (word_badge(&format!("{winner} wins"), Tone::Good)),
                                    PairOutcome::Tie { .. } => (word_badge("tie", Tone::Quiet)),
                                } }
                            }
                        }
                    }
                } }
            }
        }
        @if let Some(agreement) = &r.agreement {
            section.card aria-labelledby="votes-h" {
                h2 #votes-h { "Votes" }
                p { "Consensus: " strong { (agreement.consensus) } }
                // A group of one candidate agreed with nobody.
                @let shared: Vec<_> = agreement.groups.iter().filter(|g| g.candidates.len() > 1).collect();
                @if shared.is_empty() { (empty("No two candidates produced the same patch.")) }
                @else { ul { @for g in &shared {
                    li { (g.candidates.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(", ")) " produced the same patch " code { (short(&g.normalized_hash)) } }
                } } }
            }
        }
        @if !live_only {
        section.card aria-labelledby="diffs-h" {
            h2 #diffs-h { "Diffs side by side" }
            div.side {
                @for (id, files) in &r.candidates {
                    div id={ "diff-" (id.as_str()) } {
                        h3 { span.mono { (id.as_str()) } @if winner.as_ref() == Some(id) { " " (word_badge("winner", Tone::Good)) } }
                        @match &files.patch {
                            Some(p) if !p.text.trim().is_empty() => {
                                pre.diff { (highlighted_diff(&p.text)) }
                                @if p.truncated { p.muted { "Shown: the first " (p.text.len()) " of " (p.bytes) " bytes." } }
                            }
                            _ => (empty("No changes.")),
                        }
                    }
                }
            }
        }
        section.card aria-labelledby="tr-h" {
            h2 #tr-h { "Transcripts" }
            @for (id, files) in &r.candidates {
                details {
                    summary { span.mono { (id.as_str()) } " — " (files.transcript.len()) " event(s)" @if files.transcript_truncated { " (cut)" } }
                    @if files.transcript.is_empty() { (empty("No transcript.")) }
                    @else { pre { @for line in &files.transcript { (printable(line)) "\n" } } }
                    @if let Some(sum) = &files.summary {
                        p.muted { "Command: " code { (printable(&sum.command)) } }
                    }
                }
            }
        }
        @if let Some(a) = &r.analysis {
            section.card aria-labelledby="an-h" { h2 #an-h { "Failure analysis" } pre { (printable(&a.text)) } }
        }
        @if let Some(rep) = &r.report {
            section.card aria-labelledby="rep-h" {
                h2 #rep-h { "Final report" }
                pre.wrap { (printable(&rep.text)) }
            }
        }
        }
        @if !r.unreadable.is_empty() {
            p.notice { "Could not read: " (r.unreadable.join(", ")) }
        }
    }
}

fn run_badge(s: RunStatus) -> Markup {
    let tone = match s {
        RunStatus::Running => Tone::Busy,
        RunStatus::Succeeded => Tone::Good,
        _ => Tone::Bad,
    };
    word_badge(s.as_str(), tone)
}

/// Every candidate's gates: per verify command, and per test where the runner named them.
fn gates(r: &RunRecord) -> Markup {
    let any = r.candidates.iter().any(|(_, f)| f.evidence.as_ref().is_some_and(|e| !e.gates.is_empty()));
    html! {
        section.card #gates data-live aria-labelledby="gates-h" {
            h2 #gates-h { "Gates" }
            @if let Some(b) = r.baseline.as_ref().filter(|b| !b.commands.is_empty()) {
                p.muted { "On the base: "
                    @for (i, c) in b.commands.iter().enumerate() {
                        @if i > 0 { "; " }
                        code { (printable(&c.command)) } " " @if c.passed() { "passes" } @else { "fails" }
                    }
                }
            }
            @if !any { (empty("No gate has run yet.")) }
            @for (id, files) in &r.candidates {
                @if let Some(e) = files.evidence.as_ref().filter(|e| !e.gates.is_empty()) {
                    h3.mono { (id.as_str()) }
                    div.scroll { table {
                        thead { tr { th scope="col" { "Command" } th scope="col" { "Verdict" } th scope="col" { "Tests" } th scope="col" { "Output" } } }
                        tbody {
                            @for g in &e.gates {
                                tr {
                                    td { code { (printable(&g.outcome.command)) } }
                                    td { (word_badge(g.verdict.describe(), if g.verdict.is_good() { Tone::Good } else { Tone::Bad })) }
                                    td {
                                        @if let Some(t) = &g.tests {
                                            @if !t.fixed.is_empty() { div { "fixed: " span.mono { (printable(&t.fixed.join(", "))) } } }
                                            @if !t.broke.is_empty() { div { "broke: " span.mono { (printable(&t.broke.join(", "))) } } }
                                            @if !t.still_failing.is_empty() { div { "still failing: " span.mono { (printable(&t.still_failing.join(", "))) } } }
                                        } @else if let Some(failed) = &g.outcome.failed_tests {
                                            @if failed.is_empty() { span.muted { "none failing" } } @else { "failing: " span.mono { (printable(&failed.join(", "))) } }
                                        }
                                    }
                                    td { details { summary { "tail" } pre { (printable(&g.outcome.output_tail)) } } }
                                }
                            }
                        }
                    } }
                }
            }
        }
    }
}
