//! `/plans/{plan}`: one plan — its status counts and budget, the admin's actions, its DAG by
//! depth with the critical path, its integration branch and the commits on it, and its tasks
//! (filtered by status and text) — live from the plan's events.

use arbiter_core::plan::dag::Shape;
use arbiter_core::plan::state::TaskStatus;
use arbiter_core::plan::worker_names::WorkerNames;
use arbiter_runner::git::Git;
use arbiter_runner::integration::{self, BranchCommit};
use arbiter_runner::plan_admin::PlanDetails;
use arbiter_store::plans::{PlanSummary, TaskRecord};
use axum::extract::{Path, Query, State};
use axum::response::Response;
use maud::{Markup, html};
use serde::Deserialize;

use super::plans::{STATUS_ORDER, counts};
use crate::state::AppState;
use crate::web::dag::{self, Node};
use crate::web::layout::{
    Page, Section, budget_gauge, empty, plan_href, printable, run_href, short, status_badge, task_href, time_cell, when,
};
use crate::web::session::Viewer;
use crate::web::{PageError, admin, check_plan_id, workspace_of};

/// The most commits of the integration branch listed.
const COMMITS: usize = 50;

#[derive(Debug, Default, Deserialize)]
pub struct TaskFilter {
    /// A status (`running`, `failed`, …); empty: any.
    pub status: Option<String>,
    /// Text found in the id or the title (any case).
    pub q: Option<String>,
}

impl TaskFilter {
    fn status(&self) -> Option<TaskStatus> {
        self.status.as_deref().and_then(TaskStatus::parse)
    }

    fn text(&self) -> Option<String> {
        self.q.as_deref().map(str::trim).filter(|q| !q.is_empty()).map(str::to_lowercase)
    }

    fn keeps(&self, t: &TaskRecord) -> bool {
        self.status().is_none_or(|s| t.status == s)
            && self
                .text()
                .is_none_or(|q| t.spec.id.to_lowercase().contains(&q) || t.spec.title.to_lowercase().contains(&q))
    }
}

pub async fn page(
    viewer: Viewer,
    State(state): State<AppState>,
    Path(plan): Path<String>,
    Query(filter): Query<TaskFilter>,
) -> Result<Response, PageError> {
    check_plan_id(&plan)?;
    let details = admin(&state)?.view(&plan).await?;
    let header = details.view.plan.header.clone();
    let commits = match (workspace_of(&state, &header).await, details.view.plan.branch_record()) {
        (Some(ws), Some(branch)) => {
            let git = Git::new(ws.repo_root());
            integration::commits_since(&git, &header.integration_branch, &branch.base, COMMITS).await.ok()
        }
        _ => None,
    };
    let names = crate::web::worker_names(&state).await;
    let body = render(&state, &viewer, &details, &filter, commits.as_deref(), &names);
    Ok(Page::new(format!("Plan {}", header.id), Section::Plans, &viewer, &state, body)
        .live(Some(crate::web::stream_url(&state, Some(&plan)).await))
        .render())
}

/// The page's body (a function of what was read, for the benchmark of a large plan).
pub fn render(
    state: &AppState,
    viewer: &Viewer,
    details: &PlanDetails,
    filter: &TaskFilter,
    commits: Option<&[BranchCommit]>,
    names: &WorkerNames,
) -> Markup {
    let record = &details.view.plan;
    let header = &record.header;
    let id = &header.id;
    let shape = details.shape();
    let summary = PlanSummary {
        id: id.clone(),
        name: header.name.clone(),
        counts: details.view.tasks.iter().fold(Default::default(), |mut m, t| {
            *m.entry(t.status).or_insert(0) += 1;
            m
        }),
        budget: record.budget,
        cancelled: record.cancelled,
    };
    let nodes: Vec<Node<'_>> = details
        .view
        .tasks
        .iter()
        .map(|t| Node { id: &t.spec.id, title: &t.spec.title, status: t.status, dependencies: &t.spec.dependencies })
        .collect();
    let now = state.now();
    let shown: Vec<&TaskRecord> = details.view.tasks.iter().filter(|t| filter.keeps(t)).collect();
    html! {
        h1 { "Plan " (printable(&header.name)) " " span.muted.mono { (id) } }
        section.card #summary data-live {
            h2 { "Progress" @if record.cancelled { " " span.badge.s-cancelled { "cancelled" } } }
            (counts(&summary))
            (budget_gauge("budget", record.budget.limit, record.budget.spent, record.budget.reserved))
            p.muted {
                "Repository " code { (printable(&arbiter_core::redact::redact_patterns(header.repository.as_deref().unwrap_or("(the server's default)")))) }
                " · created " (when(record.created_at)) " · updated " (time_cell(record.updated_at, now))
            }
        }
        @if viewer.may_act() {
            section.card aria-labelledby="actions-h" {
                h2 #actions-h { "Actions" }
                div.actions {
                    @if !record.cancelled {
                        a.button.danger href={ (plan_href(id)) "/cancel" } { "Cancel plan…" }
                    }
                    form.inline method="get" action={ (plan_href(id)) "/budget" } {
                        label for="limit" { "Budget (USD, or none)" }
                        input #limit type="text" name="limit" size="8" required
                            value=(record.budget.limit.map(|l| l.decimal()).unwrap_or_else(|| "none".into()));
                        button type="submit" { "Set budget…" }
                    }
                }
            }
        }
        section.card #dag-card data-live aria-labelledby="dag-h" {
            h2 #dag-h { "Dependency graph" }
            div.dag { (dag::draw(id, &nodes, &shape)) }
            p {
                "Critical path (the longest chain of work left): "
                @if shape.critical.is_empty() { span.muted { "none — no work left" } }
                @for (i, t) in shape.critical.iter().enumerate() {
                    @if i > 0 { " → " }
                    a.mono href=(task_href(id, t)) { (printable(t)) }
                }
            }
        }
        section.card #branch data-live aria-labelledby="branch-h" {
            h2 #branch-h { "Integration branch " code { (printable(&header.integration_branch)) } }
            @if let Some(b) = record.branch_record() {
                p.muted { (format!("{:?}", b.origin).to_lowercase()) " at " code { (short(&b.base)) } }
            }
            @match commits {
                None => (empty("The branch is not on this machine yet (it is created when the first task is claimed).")),
                Some([]) => (empty("No task's winner is on the branch yet.")),
                Some(list) => {
                    div.scroll { table {
                        thead { tr { th scope="col" { "Commit" } th scope="col" { "Task" } th scope="col" { "Subject" } th scope="col" { "When" } } }
                        tbody {
                            @for c in list {
                                tr {
                                    td.mono { (short(&c.commit)) }
                                    td { @if let Some(t) = &c.task { a.mono href=(task_href(id, t)) { (printable(t)) } } }
                                    td { (printable(&c.subject)) }
                                    td { (time_cell(arbiter_core::time::Timestamp(c.committed_at * 1_000_000), now)) }
                                }
                            }
                        }
                    } }
                }
            }
        }
        section.card aria-labelledby="tasks-h" {
            h2 #tasks-h { "Tasks" }
            form.filters method="get" action=(plan_href(id)) {
                div {
                    label for="status" { "Status" }
                    select #status name="status" {
                        option value="" selected[filter.status().is_none()] { "any" }
                        @for s in STATUS_ORDER {
                            option value=(s.as_str()) selected[filter.status() == Some(s)] { (s.as_str()) }
                        }
                    }
                }
                div {
                    label for="q" { "Id or title contains" }
                    input #q type="search" name="q" value=(filter.q.clone().unwrap_or_default());
                }
                div { button type="submit" { "Filter" } }
            }
            div #tasks data-live {
                p.muted { "Showing " (shown.len()) " of " (details.view.tasks.len()) " task(s)." }
                div.scroll { table {
                    thead { tr {
                        th scope="col" { "Task" } th scope="col" { "Status" } th scope="col" class="num" { "Depth" }
                        th scope="col" class="num" { "Attempts" } th scope="col" { "Worker" } th scope="col" class="num" { "Cost" }
                        th scope="col" { "Commit" } th scope="col" { "Note" }
                    } }
                    tbody {
                        @for t in &shown { (task_row(id, t, &shape, details, names)) }
                    }
                } }
            }
        }
    }
}

fn task_row(plan: &str, t: &TaskRecord, shape: &Shape, details: &PlanDetails, names: &WorkerNames) -> Markup {
    let critical = shape.is_critical(&t.spec.id);
    let depth = shape.depths.get(&t.spec.id).copied().unwrap_or(0);
    html! {
        tr class=[critical.then_some("critical")] {
            td.task {
                a.mono href=(task_href(plan, &t.spec.id)) { (printable(&t.spec.id)) }
                br;
                span.muted { (printable(&t.spec.title)) }
            }
            td { (status_badge(t.status)) }
            td.num { (depth) @if critical { span title="on the critical path" aria-label="on the critical path" { " *" } } }
            td.num { (t.attempts) "/" (t.max_attempts) }
            td.mono { @if t.status == TaskStatus::Running { (t.lease_owner.as_deref().map(|w| printable(&names.label(w))).unwrap_or_default()) } }
            td.num { (details.spent_by(t)) }
            td.mono {
                @if let Some(c) = &t.commit { (short(c)) }
                @else if let Some(run) = &t.run_id { a href=(run_href(plan, run)) { "run" } }
            }
            td { @if let Some(r) = &t.reason { (printable(&r.chars().take(200).collect::<String>())) } }
        }
    }
}
