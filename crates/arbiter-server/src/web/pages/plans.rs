//! `/`: every plan — its progress, its budget (spent and reserved), its status counts —
//! live from every plan's events.

use arbiter_core::plan::state::TaskStatus;
use arbiter_store::plans::PlanSummary;
use axum::extract::State;
use axum::response::Response;
use maud::{Markup, html};

use crate::state::AppState;
use crate::web::layout::{Page, Section, budget_cells, plan_href, printable, status_badge};
use crate::web::session::Viewer;
use crate::web::{PageError, admin};

/// Statuses in the order the counts show them.
pub const STATUS_ORDER: [TaskStatus; 7] = [
    TaskStatus::Running,
    TaskStatus::Ready,
    TaskStatus::Blocked,
    TaskStatus::Done,
    TaskStatus::Failed,
    TaskStatus::Skipped,
    TaskStatus::Cancelled,
];

pub async fn page(viewer: Viewer, State(state): State<AppState>) -> Result<Response, PageError> {
    let plans = admin(&state)?.list().await?;
    let body = html! {
        h1 { "Plans" }
        section.card #plans data-live {
            @if plans.is_empty() {
                p.empty { "No plan yet. Import one with " code { "arbiter plan import FILE" } " (add " code { "--server URL" } " for a control plane)." }
            } @else {
                div.scroll {
                    table {
                        caption.muted { (plans.len()) " plan(s)" }
                        thead { tr {
                            th scope="col" { "Plan" } th scope="col" { "Progress" } th scope="col" { "Tasks" }
                            th scope="col" class="num" { "Spent" } th scope="col" class="num" { "Reserved" } th scope="col" class="num" { "Budget" }
                        } }
                        tbody {
                            @for p in &plans { (plan_row(p)) }
                        }
                    }
                }
            }
        }
    };
    Ok(Page::new("Plans", Section::Plans, &viewer, &state, body)
        .live(Some(crate::web::stream_url(&state, None).await))
        .render())
}

fn plan_row(p: &PlanSummary) -> Markup {
    let total: usize = p.counts.values().sum();
    let finished: usize = [TaskStatus::Done, TaskStatus::Skipped].iter().filter_map(|s| p.counts.get(s)).sum();
    let percent = (finished * 100).checked_div(total).unwrap_or(0);
    html! {
        tr id={ "plan-" (p.id) } {
            td {
                a href=(plan_href(&p.id)) { (printable(&p.name)) }
                br;
                span.muted.mono { (p.id) }
                @if p.cancelled { " " span.badge.s-cancelled { "cancelled" } }
            }
            td {
                progress max=(total.max(1)) value=(finished) aria-label={ (finished) " of " (total) " tasks finished" } { (percent) "%" }
                " "
                span.muted { (finished) "/" (total) " finished" }
            }
            td { (counts(p)) }
            (budget_cells(&p.budget))
        }
    }
}

/// The non-zero status counts of a plan, as badges.
pub fn counts(p: &PlanSummary) -> Markup {
    html! {
        ul.counts aria-label="Tasks by status" {
            @for s in STATUS_ORDER {
                @if let Some(n) = p.counts.get(&s).filter(|n| **n > 0) {
                    li { (status_badge(s)) " " (n) }
                }
            }
        }
    }
}
