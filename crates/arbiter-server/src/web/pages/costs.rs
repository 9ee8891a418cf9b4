//! `/costs?plan=ID`: what the plans spent — by plan; for one plan by task, by backend, by
//! role and by model with their tokens (every call of the plan's runs, from their
//! `cost_summary.json`), and the money spent over time (its `cost_charged` events). Calls
//! of unknown cost are counted as such, never as $0.

use std::fmt::Write;

use arbiter_core::artifact::paths;
use arbiter_core::cost::{CostBucket, CostSummary, summarize};
use arbiter_core::ids::RunId;
use arbiter_core::money::Usd;
use arbiter_core::plan::event::{PlanEntry, PlanLogEntry};
use arbiter_core::time::Timestamp;
use arbiter_runner::plan_admin::PlanDetails;
use arbiter_runner::run_record::{JSON_CAP, read_regular};
use arbiter_store::plans::EventFilter;
use axum::extract::{Query, State};
use axum::response::Response;
use maud::{Markup, html};
use serde::Deserialize;

use crate::state::AppState;
use crate::web::layout::{Page, Section, budget_cells, empty, plan_href, printable, raw, task_href, url_encode, when};
use crate::web::session::Viewer;
use crate::web::{PageError, admin, workspace_of};

/// How many of a plan's latest events the spending curve is drawn from.
const CURVE_EVENTS: u32 = 20_000;

#[derive(Deserialize)]
pub struct CostQuery {
    plan: Option<String>,
}

pub async fn page(
    viewer: Viewer,
    State(state): State<AppState>,
    Query(q): Query<CostQuery>,
) -> Result<Response, PageError> {
    let admin = admin(&state)?;
    let plans = admin.list().await?;
    let chosen = q
        .plan
        .as_deref()
        .filter(|p| plans.iter().any(|x| x.id == *p))
        .or_else(|| plans.iter().max_by_key(|p| p.budget.spent).map(|p| p.id.as_str()))
        .map(str::to_string);
    let detail = match &chosen {
        Some(plan) => {
            let details = admin.view(plan).await?;
            let calls = plan_calls(&state, &details).await;
            // The newest charges, oldest first (a long plan's curve keeps its latest part).
            let mut events = state
                .plans
                .recent_events(
                    &EventFilter { plan: Some(plan), task: None, kind: Some("cost_charged") },
                    None,
                    CURVE_EVENTS,
                )
                .await?;
            events.reverse();
            let mut curve: Vec<(Timestamp, Usd)> = events
                .iter()
                .filter_map(|e| match e.entry() {
                    Some(PlanLogEntry::Plan(PlanEntry::CostCharged { spent, .. })) => Some((e.at, spent)),
                    _ => None,
                })
                .collect();
            // The curve rises from $0 at the plan's creation: a single charge is a line, not
            // a lone point nothing is drawn for.
            if !curve.is_empty() {
                curve.insert(0, (details.view.plan.created_at, Usd::ZERO));
            }
            Some(plan_costs(&details, &calls, &curve))
        }
        None => None,
    };
    let body = html! {
        h1 { "Costs" }
        section.card #by-plan data-live aria-labelledby="bp-h" {
            h2 #bp-h { "By plan" }
            @if plans.is_empty() { (empty("No plan.")) } @else {
                div.scroll { table {
                    thead { tr { th scope="col" { "Plan" } th scope="col" class="num" { "Spent" } th scope="col" class="num" { "Reserved" } th scope="col" class="num" { "Budget" } } }
                    tbody { @for p in &plans {
                        tr {
                            td { a href={ "/costs?plan=" (url_encode(&p.id)) } { (printable(&p.name)) } " " span.muted.mono { (p.id) } }
                            (budget_cells(&p.budget))
                        }
                    } }
                } }
            }
        }
        @if let Some(d) = detail { (d) }
    };
    let stream = match &chosen {
        Some(p) => Some(crate::web::stream_url(&state, Some(p)).await),
        None => None,
    };
    Ok(Page::new("Costs", Section::Costs, &viewer, &state, body).live(stream).render())
}

/// Every call of the plan's runs (those whose run directory is on this server).
async fn plan_calls(state: &AppState, details: &PlanDetails) -> CostSummary {
    let Some(ws) = workspace_of(state, &details.view.plan.header).await else {
        return summarize(Vec::new());
    };
    let dirs: Vec<std::path::PathBuf> = details
        .attempts
        .iter()
        .filter_map(|a| a.run_id.as_deref())
        .filter_map(|r| RunId::parse(r).ok())
        .map(|id| ws.run_dir(&id).join(paths::COST))
        .collect();
    let calls = tokio::task::spawn_blocking(move || {
        let mut calls = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for path in dirs {
            if !seen.insert(path.clone()) {
                continue;
            }
            let summary = read_regular(&path, JSON_CAP)
                .ok()
                .filter(|(_, more)| !more)
                .and_then(|(b, _)| serde_json::from_slice::<CostSummary>(&b).ok());
            if let Some(s) = summary {
                calls.extend(s.calls);
            }
        }
        calls
    })
    .await
    .unwrap_or_default();
    summarize(calls)
}

fn bucket_table(title: &str, id: &str, rows: &std::collections::BTreeMap<String, CostBucket>) -> Markup {
    html! {
        section.card aria-labelledby=(id) {
            h2 id=(id) { (title) }
            @if rows.is_empty() { (empty("No call recorded.")) } @else {
                div.scroll { table {
                    thead { tr {
                        th scope="col" { "Name" } th scope="col" class="num" { "Calls" } th scope="col" class="num" { "Input tokens" }
                        th scope="col" class="num" { "Output tokens" } th scope="col" class="num" { "Cached" } th scope="col" class="num" { "Cost" }
                    } }
                    tbody { @for (name, b) in rows {
                        tr {
                            td.mono { (printable(name)) }
                            td.num { (b.calls) }
                            td.num { (b.input_tokens) }
                            td.num { (b.output_tokens) }
                            td.num { (b.cached_tokens) }
                            td.num { (b.describe_cost()) }
                        }
                    } }
                } }
            }
        }
    }
}

fn plan_costs(details: &PlanDetails, calls: &CostSummary, curve: &[(Timestamp, Usd)]) -> Markup {
    let plan = &details.view.plan.header.id;
    let mut tasks: Vec<_> = details.view.tasks.iter().filter(|t| t.cost > Usd::ZERO || t.attempts > 0).collect();
    tasks.sort_by_key(|t| std::cmp::Reverse(t.cost));
    html! {
        h2 { "Plan " a href=(plan_href(plan)) { (printable(&details.view.plan.header.name)) } }
        section.card #chart data-live aria-labelledby="ch-h" {
            h2 #ch-h { "Spent over time" }
            (chart(curve))
        }
        section.card #by-task data-live aria-labelledby="bt-h" {
            h2 #bt-h { "By task" }
            @if tasks.is_empty() { (empty("No task has run.")) } @else {
                div.scroll { table {
                    thead { tr { th scope="col" { "Task" } th scope="col" class="num" { "Attempts" } th scope="col" class="num" { "Spent" } th scope="col" class="num" { "Calls of unknown cost" } } }
                    tbody { @for t in &tasks {
                        tr {
                            td { a.mono href=(task_href(plan, &t.spec.id)) { (printable(&t.spec.id)) } " " (printable(&t.spec.title)) }
                            td.num { (t.attempts) }
                            td.num { (details.spent_by(t)) }
                            td.num { (details.call_costs.get(&t.spec.id).map_or(0, |c| c.uncosted)) }
                        }
                    } }
                } }
            }
        }
        p.muted { "Every call of the plan's runs: " (calls.total.calls) " call(s), " (calls.total.describe_cost()) "." }
        (bucket_table("By backend", "bb-h", &calls.by_backend))
        (bucket_table("By role", "br-h", &calls.by_role))
        (bucket_table("By model", "bm-h", &calls.by_model))
    }
}

/// The cumulative spending as an SVG line chart.
fn chart(points: &[(Timestamp, Usd)]) -> Markup {
    if points.is_empty() {
        return empty("Nothing spent yet.");
    }
    let (w, h, pad) = (720.0_f64, 220.0_f64, 40.0_f64);
    let t0 = points[0].0.0 as f64;
    let t1 = points.last().map_or(t0, |p| p.0.0 as f64).max(t0 + 1.0);
    let top = points.iter().map(|p| p.1.pico()).max().unwrap_or(0).max(1) as f64;
    let x = |t: Timestamp| pad + (t.0 as f64 - t0) / (t1 - t0) * (w - 2.0 * pad);
    let y = |u: Usd| h - pad - (u.pico() as f64 / top) * (h - 2.0 * pad);
    let mut line = String::new();
    for (i, (t, u)) in points.iter().enumerate() {
        let _ = write!(line, "{}{:.1},{:.1}", if i == 0 { "" } else { " " }, x(*t), y(*u));
    }
    let last = points.last().map_or(Usd::ZERO, |p| p.1);
    let mut svg = String::new();
    let _ = write!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"Spent over time: from $0 to {last} between {from} and {to}\"><line class=\"axis\" x1=\"{pad}\" y1=\"{b}\" x2=\"{r}\" y2=\"{b}\"/><line class=\"axis\" x1=\"{pad}\" y1=\"{pad}\" x2=\"{pad}\" y2=\"{b}\"/><polyline class=\"line\" points=\"{line}\"/><text x=\"{pad}\" y=\"{t}\">{last}</text><text x=\"{pad}\" y=\"{lb}\">{from}</text><text x=\"{r}\" y=\"{lb}\" text-anchor=\"end\">{to}</text></svg>",
        b = h - pad,
        r = w - pad,
        t = pad - 8.0,
        lb = h - pad + 16.0,
        from = when(points[0].0),
        to = when(points.last().map_or(points[0].0, |p| p.0)),
    );
    html! { div.chart { (raw(svg)) } }
}
