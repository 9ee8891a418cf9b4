//! `/plans/{plan}/task?id=ID`: one task — its state, lease and retry time, its attempts
//! (worker, outcome, cost, run), the units of its current attempt (which worker holds which
//! candidate, the evaluation), a failure analysis when one ran, its events — and the admin's
//! retry.

use arbiter_core::ids::RunId;
use arbiter_core::plan::state::{AttemptStatus, TaskEvent, TaskStatus};
use arbiter_core::plan::worker_names::WorkerNames;
use arbiter_runner::run_record::{ANALYSIS, read_capped};
use arbiter_store::plans::{AttemptRecord, EventFilter};
use arbiter_store::units::{UnitRecord, UnitStatus};
use axum::extract::{Path, Query, State};
use axum::response::Response;
use maud::{Markup, html};
use serde::Deserialize;

use super::events::event_table;
use crate::state::AppState;
use crate::web::layout::{
    Page, Section, Tone, empty, money, plan_href, printable, run_href, short, status_badge, task_href, time_cell,
    url_encode, when, word_badge,
};
use crate::web::session::Viewer;
use crate::web::{PageError, admin, check_plan_id, workspace_of};

/// The most events of the task shown.
const EVENTS: u32 = 100;

#[derive(Deserialize)]
pub struct TaskQuery {
    id: Option<String>,
}

pub async fn page(
    viewer: Viewer,
    State(state): State<AppState>,
    Path(plan): Path<String>,
    Query(q): Query<TaskQuery>,
) -> Result<Response, PageError> {
    check_plan_id(&plan)?;
    let Some(task_id) = q.id.filter(|t| !t.is_empty()) else {
        return Err(PageError::new(axum::http::StatusCode::BAD_REQUEST, "name the task: /plans/PLAN/task?id=TASK"));
    };
    let details = admin(&state)?.view(&plan).await?;
    let Some(task) = details.view.tasks.iter().find(|t| t.spec.id == task_id) else {
        return Err(crate::web::no_task(&plan, &task_id));
    };
    let attempts: Vec<&AttemptRecord> = details.attempts.iter().filter(|a| a.task_id == task_id).collect();
    let units = if task.status == TaskStatus::Running && task.fence > 0 {
        state.units.units_of(&plan, &task_id, task.fence).await?
    } else {
        Vec::new()
    };
    let of_task = EventFilter { plan: Some(&plan), task: Some(&task_id), kind: None };
    let events = state.plans.recent_events(&of_task, None, EVENTS).await?;
    // The latest failed attempt's analysis, when one was written in its run directory.
    let analysis = match (
        attempts.iter().rev().find(|a| a.status != AttemptStatus::Succeeded).and_then(|a| a.run_id.clone()),
        workspace_of(&state, &details.view.plan.header).await,
    ) {
        (Some(run), Some(ws)) => match RunId::parse(&run) {
            Ok(id) => {
                let path = ws.run_dir(&id).join(ANALYSIS);
                tokio::task::spawn_blocking(move || read_capped(&path)).await.ok().flatten().map(|c| (run, c.text))
            }
            Err(_) => None,
        },
        _ => None,
    };
    let now = state.now();
    let names = crate::web::worker_names(&state).await;
    let can_retry = TaskEvent::Retry.allowed(task.status);
    let body = html! {
        p.muted { a href=(plan_href(&plan)) { "Plan " (plan) } " › task" }
        h1 { "Task " span.mono { (printable(&task.spec.id)) } " — " (printable(&task.spec.title)) }
        section.card #task-state data-live {
            h2 { "State " (status_badge(task.status)) }
            table {
                tr { th scope="row" { "Attempts" } td { (task.attempts) " of " (task.max_attempts) } }
                @if task.status == TaskStatus::Running {
                    tr { th scope="row" { "Lease" } td {
                        "held by " span.mono { (task.lease_owner.as_deref().map(|w| printable(&names.label(w))).unwrap_or_default()) }
                        " (fence " (task.fence) ")"
                        @if let Some(until) = task.lease_expires { ", expires " (time_cell(until, now)) }
                    } }
                    tr { th scope="row" { "Reserved" } td { (money(task.reserved)) } }
                }
                @if task.status == TaskStatus::Ready && task.not_before > now {
                    tr { th scope="row" { "Retry" } td { "not before " (when(task.not_before)) " (" (time_cell(task.not_before, now)) ")" } }
                }
                tr { th scope="row" { "Spent" } td { (details.spent_by(task)) } }
                @if let Some(run) = &task.run_id { tr { th scope="row" { "Run" } td { a.mono href=(run_href(&plan, run)) { (run) } } } }
                @if let Some(c) = &task.commit { tr { th scope="row" { "Commit" } td.mono { (short(c)) } } }
                @if let Some(r) = &task.reason { tr { th scope="row" { "Note" } td { (printable(r)) } } }
                tr { th scope="row" { "Depends on" } td {
                    @if task.spec.dependencies.is_empty() { span.muted { "nothing" } }
                    @for (i, d) in task.spec.dependencies.iter().enumerate() {
                        @if i > 0 { ", " }
                        a.mono href=(task_href(&plan, d)) { (printable(d)) }
                    }
                } }
            }
        }
        div #task-actions data-live {
            @if viewer.may_act() && can_retry {
                section.card {
                    h2 { "Actions" }
                    a.button href={ (plan_href(&plan)) "/retry?task=" (url_encode(&task.spec.id)) } { "Retry task…" }
                }
            }
        }
        section.card #attempts data-live aria-labelledby="attempts-h" {
            h2 #attempts-h { "Attempts" }
            @if attempts.is_empty() { (empty("No attempt yet.")) } @else {
                div.scroll { table {
                    thead { tr {
                        th scope="col" class="num" { "#" } th scope="col" { "Worker" } th scope="col" { "Outcome" }
                        th scope="col" { "Started" } th scope="col" { "Finished" } th scope="col" class="num" { "Cost" }
                        th scope="col" { "Run" } th scope="col" { "Why" }
                    } }
                    tbody { @for a in attempts.iter().rev() { (attempt_row(&plan, a, now, &names, details.spending_unknown(task))) } }
                } }
            }
        }
        section.card #units data-live aria-labelledby="units-h" {
            h2 #units-h { "Units of the running attempt" }
            @if task.status != TaskStatus::Running {
                (empty("No attempt is running."))
            } @else if units.is_empty() {
                (empty("None: the attempt runs whole on one worker."))
            } @else {
                div.scroll { table {
                    thead { tr {
                        th scope="col" { "Unit" } th scope="col" { "State" } th scope="col" { "Worker" }
                        th scope="col" class="num" { "Tries" } th scope="col" { "Lease until" } th scope="col" class="num" { "Cost" }
                    } }
                    tbody { @for u in &units { (unit_row(u, now, &names)) } }
                } }
            }
        }
        @if let Some((run, text)) = &analysis {
            section.card aria-labelledby="analysis-h" {
                h2 #analysis-h { "Failure analysis" }
                p.muted { "Of run " a.mono href=(run_href(&plan, run)) { (run) } " (" code { "analysis.md" } ")." }
                pre { (printable(text)) }
            }
        }
        @if !task.spec.description.is_empty() || !task.spec.acceptance_criteria.is_empty() {
            section.card {
                h2 { "The task" }
                @if !task.spec.description.is_empty() { pre { (printable(&task.spec.description)) } }
                @if !task.spec.acceptance_criteria.is_empty() {
                    h3 { "Acceptance criteria" }
                    ul { @for c in &task.spec.acceptance_criteria { li { (printable(c)) } } }
                }
            }
        }
        section.card #task-events data-live aria-labelledby="events-h" {
            h2 #events-h { "Events" }
            (event_table(&events, now, false, &names))
        }
    };
    Ok(Page::new(format!("Task {} of {plan}", task.spec.id), Section::Plans, &viewer, &state, body)
        .live(Some(crate::web::stream_url(&state, Some(&plan)).await))
        .render())
}

fn attempt_row(
    plan: &str,
    a: &AttemptRecord,
    now: arbiter_core::time::Timestamp,
    names: &WorkerNames,
    spending_unknown: bool,
) -> Markup {
    let tone = match a.status {
        AttemptStatus::Succeeded => Tone::Good,
        AttemptStatus::Running => Tone::Busy,
        AttemptStatus::Cancelled => Tone::Quiet,
        AttemptStatus::Failed | AttemptStatus::Expired => Tone::Bad,
    };
    html! {
        tr {
            td.num { (a.attempt) }
            td.mono { (printable(&names.label(&a.worker))) }
            td { (word_badge(a.status.as_str(), tone)) }
            td { (time_cell(a.started_at, now)) }
            td { @if let Some(f) = a.finished_at { (time_cell(f, now)) } }
            td.num { @if spending_unknown && a.cost == arbiter_core::money::Usd::ZERO { "unknown" } @else { (money(a.cost)) } }
            td { @if let Some(r) = &a.run_id { a.mono href=(run_href(plan, r)) { (r) } } }
            td { @if let Some(r) = &a.reason { (printable(r)) } @if let Some(c) = &a.commit { " commit " span.mono { (short(c)) } } }
        }
    }
}

fn unit_row(u: &UnitRecord, now: arbiter_core::time::Timestamp, names: &WorkerNames) -> Markup {
    let tone = match u.status {
        UnitStatus::Done => Tone::Good,
        UnitStatus::Running => Tone::Busy,
        UnitStatus::Ready | UnitStatus::Waiting => Tone::Quiet,
    };
    html! {
        tr {
            td { span.mono { (u.name) } " " span.muted { (u.kind.as_str()) } }
            td { (word_badge(u.status.as_str(), tone)) }
            td.mono { (u.worker.as_deref().map(|w| printable(&names.label(w))).unwrap_or_default()) }
            td.num { (u.tries) }
            td { @if let Some(t) = u.lease_expires { (time_cell(t, now)) } }
            td.num { (money(u.cost)) }
        }
    }
}
