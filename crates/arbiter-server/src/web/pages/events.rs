//! `/events?plan=&task=&kind=`: the event log, newest first, filtered by plan, task and
//! kind, live from the stream of the plan shown (or of every plan).

use std::collections::BTreeSet;

use arbiter_core::plan::worker_names::WorkerNames;
use arbiter_core::time::Timestamp;
use arbiter_store::plans::{EventFilter, PlanEvent};
use axum::extract::{Query, State};
use axum::response::Response;
use maud::{Markup, html};
use serde::Deserialize;

use crate::state::AppState;
use crate::web::layout::{Page, Section, empty, plan_href, printable, task_href, time_cell};
use crate::web::session::Viewer;
use crate::web::{PageError, admin};

/// How many events the page shows, and how far back it looks for the kinds to filter by.
const SHOWN: usize = 500;
const KINDS_LOOK_BACK: u32 = 1000;

#[derive(Debug, Default, Deserialize)]
pub struct EventQuery {
    pub plan: Option<String>,
    pub task: Option<String>,
    pub kind: Option<String>,
}

fn given(v: &Option<String>) -> Option<&str> {
    v.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

pub async fn page(
    viewer: Viewer,
    State(state): State<AppState>,
    Query(f): Query<EventQuery>,
) -> Result<Response, PageError> {
    let plans = admin(&state)?.list().await?;
    let plan = given(&f.plan).filter(|p| plans.iter().any(|x| x.id == *p));
    let task = given(&f.task);
    let kind = given(&f.kind);
    // A task id no plan can hold, or a kind no event has the shape of, matches nothing: it is
    // not looked up (and reaches no store).
    let could_match = task.is_none_or(arbiter_core::plan::check::task_id_ok)
        && kind.is_none_or(|k| k.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'));
    let shown = match could_match {
        true => state.plans.recent_events(&EventFilter { plan, task, kind }, None, SHOWN as u32).await?,
        false => Vec::new(),
    };
    // The kinds to choose from: those of the latest events of the plan (or of all).
    let recent = state.plans.recent_events(&EventFilter::plan(plan), None, KINDS_LOOK_BACK).await?;
    let kinds: BTreeSet<&str> = recent.iter().map(|e| e.kind.as_str()).collect();
    let body = html! {
        h1 { "Events" }
        section.card {
            form.filters method="get" action="/events" {
                div {
                    label for="plan" { "Plan" }
                    select #plan name="plan" {
                        option value="" selected[plan.is_none()] { "every plan" }
                        @for p in &plans { option value=(p.id) selected[plan == Some(p.id.as_str())] { (p.id) } }
                    }
                }
                div {
                    label for="task" { "Task" }
                    input #task type="text" name="task" value=(task.unwrap_or_default()) size="14";
                }
                div {
                    label for="kind" { "Kind" }
                    select #kind name="kind" {
                        option value="" selected[kind.is_none()] { "any" }
                        @for k in &kinds { option value=(k) selected[kind == Some(*k)] { (k) } }
                        @if let Some(k) = kind.filter(|k| !kinds.contains(k)) { option value=(k) selected { (k) } }
                    }
                }
                div { button type="submit" { "Filter" } }
            }
            div #events data-live {
                p.muted { (shown.len()) " event(s), newest first" @if shown.len() == SHOWN { " (the latest " (SHOWN) ")" } "." }
                (event_table(&shown, state.now(), plan.is_none(), &crate::web::worker_names(&state).await))
            }
        }
    };
    let stream = match plan {
        Some(p) => crate::web::stream_url(&state, Some(p)).await,
        None => crate::web::stream_url(&state, None).await,
    };
    Ok(Page::new("Events", Section::Events, &viewer, &state, body).live(Some(stream)).render())
}

/// Events as a table, newest first; `with_plan` adds the plan's column. Workers are named
/// as `names` knows them.
pub fn event_table(events: &[PlanEvent], now: Timestamp, with_plan: bool, names: &WorkerNames) -> Markup {
    if events.is_empty() {
        return empty("No event.");
    }
    html! {
        div.scroll { table {
            thead { tr {
                th scope="col" class="num" { "#" } th scope="col" { "When" }
                @if with_plan { th scope="col" { "Plan" } }
                th scope="col" { "Task" } th scope="col" { "Kind" } th scope="col" { "What happened" }
            } }
            tbody {
                @for e in events {
                    tr id={ "event-" (e.id) } {
                        td.num { (e.id) }
                        td { (time_cell(e.at, now)) }
                        @if with_plan { td { a.mono href=(plan_href(&e.plan_id)) { (e.plan_id) } } }
                        td { @if let Some(t) = &e.task_id { a.mono href=(task_href(&e.plan_id, t)) { (printable(t)) } } }
                        td.mono { (e.kind) }
                        td { (printable(&describe(e, names))) }
                    }
                }
            }
        } }
    }
}

/// An event in words, its worker by name (its data as JSON when this build does not know
/// its kind).
pub fn describe(e: &PlanEvent, names: &WorkerNames) -> String {
    e.entry().map(|x| x.describe_naming(names)).unwrap_or_else(|| e.data.to_string())
}
