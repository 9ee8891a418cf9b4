//! The admin's actions from the dashboard, each in two steps: `GET` shows what will happen
//! and asks (a page, so it works without JavaScript), `POST` does it — only for an admin
//! session, only with the session's CSRF token, only from this site — and the change is
//! written as an event naming who did it (`plan_cancelled`, `task_retried` and
//! `budget_changed` carry `by`; a revoked worker records `revoked_by`).
//!
//! - `/plans/{plan}/cancel`
//! - `/plans/{plan}/retry?task=ID` (the task in the form when posting)
//! - `/plans/{plan}/budget?limit=USD|none`
//! - `/workers/{name}/revoke`

use arbiter_core::money::Usd;
use axum::Router;
use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use maud::{Markup, html};
use serde::Deserialize;

use super::layout::{Page, Section, plan_href, printable, task_href};
use super::session::{Viewer, check_action};
use super::{PageError, admin, check_plan_id};
use crate::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/plans/{plan}/cancel", get(confirm_cancel).post(cancel))
        .route("/plans/{plan}/retry", get(confirm_retry).post(retry))
        .route("/plans/{plan}/budget", get(confirm_budget).post(budget))
        .route("/workers/{name}/revoke", get(confirm_revoke).post(revoke))
}

/// 403 for a read-only session (before a confirmation is even shown).
fn must_act(viewer: &Viewer) -> Result<(), PageError> {
    if viewer.may_act() {
        Ok(())
    } else {
        Err(PageError::new(
            StatusCode::FORBIDDEN,
            "this session is read-only: log in with the admin token or an admin access token to change anything",
        ))
    }
}

fn checked(viewer: &Viewer, headers: &HeaderMap, csrf: Option<&str>) -> Result<(), PageError> {
    check_action(viewer, headers, csrf).map_err(|(status, why)| PageError::new(status, why))
}

/// A confirmation: the question, what it does, the form that does it, and the way back.
struct Confirmation<'a> {
    title: String,
    what: Markup,
    /// Where the form posts.
    action: String,
    /// Hidden fields besides the CSRF token.
    fields: Vec<(&'a str, String)>,
    button: &'a str,
    back: String,
}

impl Confirmation<'_> {
    fn page(self, state: &AppState, viewer: &Viewer) -> Response {
        let body = html! {
            section.card {
                h1 { (self.title) }
                (self.what)
                form method="post" action=(self.action) {
                    input type="hidden" name="csrf" value=(viewer.csrf);
                    @for (name, value) in &self.fields { input type="hidden" name=(name) value=(value); }
                    div.actions {
                        button.danger type="submit" { (self.button) }
                        a.button.secondary href=(self.back) { "No, go back" }
                    }
                }
            }
        };
        Page::new(self.title.clone(), Section::None, viewer, state, body).render()
    }
}

#[derive(Deserialize)]
struct CsrfForm {
    csrf: Option<String>,
}

async fn confirm_cancel(
    viewer: Viewer,
    State(state): State<AppState>,
    Path(plan): Path<String>,
) -> Result<Response, PageError> {
    check_plan_id(&plan)?;
    must_act(&viewer)?;
    let view = admin(&state)?.view(&plan).await?;
    let unfinished = view.view.tasks.iter().filter(|t| !t.status.is_terminal()).count();
    Ok(Confirmation {
        title: format!("Cancel plan {plan}?"),
        what: html! { p { "Its " (unfinished) " unfinished task(s) are cancelled; running work is stopped at its next heartbeat and nothing more is claimed. A task can be retried afterwards." } },
        action: format!("{}/cancel", plan_href(&plan)),
        fields: vec![],
        button: "Yes, cancel the plan",
        back: plan_href(&plan),
    }
    .page(&state, &viewer))
}

async fn cancel(
    viewer: Viewer,
    State(state): State<AppState>,
    Path(plan): Path<String>,
    headers: HeaderMap,
    Form(f): Form<CsrfForm>,
) -> Result<Response, PageError> {
    check_plan_id(&plan)?;
    checked(&viewer, &headers, f.csrf.as_deref())?;
    let n = admin(&state)?.cancel(&plan, &viewer.by).await?;
    state.plan_events.notify_waiters();
    tracing::info!(plan = %plan, cancelled = n, by = %viewer.by, "plan cancelled from the dashboard");
    Ok(Redirect::to(&plan_href(&plan)).into_response())
}

#[derive(Deserialize)]
struct RetryQuery {
    task: Option<String>,
}

#[derive(Deserialize)]
struct RetryForm {
    csrf: Option<String>,
    task: Option<String>,
}

async fn confirm_retry(
    viewer: Viewer,
    State(state): State<AppState>,
    Path(plan): Path<String>,
    Query(q): Query<RetryQuery>,
) -> Result<Response, PageError> {
    check_plan_id(&plan)?;
    must_act(&viewer)?;
    let task = q
        .task
        .filter(|t| !t.is_empty())
        .ok_or_else(|| PageError::new(StatusCode::BAD_REQUEST, "name the task: ?task=ID"))?;
    super::check_task_id(&plan, &task)?;
    Ok(Confirmation {
        title: format!("Retry task {} of plan {plan}?", printable(&task)),
        what: html! { p { "The task gets new attempts and is claimed again once its dependencies are done." } },
        action: format!("{}/retry", plan_href(&plan)),
        fields: vec![("task", task.clone())],
        button: "Yes, retry it",
        back: task_href(&plan, &task),
    }
    .page(&state, &viewer))
}

async fn retry(
    viewer: Viewer,
    State(state): State<AppState>,
    Path(plan): Path<String>,
    headers: HeaderMap,
    Form(f): Form<RetryForm>,
) -> Result<Response, PageError> {
    check_plan_id(&plan)?;
    checked(&viewer, &headers, f.csrf.as_deref())?;
    let task = f
        .task
        .filter(|t| !t.is_empty())
        .ok_or_else(|| PageError::new(StatusCode::BAD_REQUEST, "the form names no task"))?;
    super::check_task_id(&plan, &task)?;
    admin(&state)?.retry(&plan, &task, &viewer.by).await?;
    state.plan_events.notify_waiters();
    tracing::info!(plan = %plan, task = %task.escape_default(), by = %viewer.by, "task retried from the dashboard");
    Ok(Redirect::to(&task_href(&plan, &task)).into_response())
}

#[derive(Deserialize)]
struct BudgetQuery {
    limit: Option<String>,
}

#[derive(Deserialize)]
struct BudgetForm {
    csrf: Option<String>,
    limit: Option<String>,
}

/// A limit as typed: `none` (or nothing) for no limit, else a non-negative amount in USD.
fn parse_limit(text: Option<&str>) -> Result<Option<Usd>, PageError> {
    let t = text.map(str::trim).unwrap_or_default().trim_start_matches('$');
    if t.is_empty() || t.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    match Usd::parse(t) {
        Some(u) if u >= Usd::ZERO => Ok(Some(u)),
        _ => Err(PageError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("'{}' is not a budget: give an amount in USD such as 5 or 2.50, or none", printable(t)),
        )),
    }
}

async fn confirm_budget(
    viewer: Viewer,
    State(state): State<AppState>,
    Path(plan): Path<String>,
    Query(q): Query<BudgetQuery>,
) -> Result<Response, PageError> {
    check_plan_id(&plan)?;
    must_act(&viewer)?;
    let limit = parse_limit(q.limit.as_deref())?;
    let now = admin(&state)?.view(&plan).await?.view.plan.budget;
    let to = limit.map_or_else(|| "no limit".to_string(), |l| l.to_string());
    Ok(Confirmation {
        title: format!("Set the budget of plan {plan} to {to}?"),
        what: html! { p { "Now: " (now.limit.map_or_else(|| "no limit".to_string(), |l| l.to_string())) ", " (now.spent) " spent. A limit at or below what was spent stops new claims." } },
        action: format!("{}/budget", plan_href(&plan)),
        fields: vec![("limit", limit.map_or_else(|| "none".to_string(), |l| l.decimal()))],
        button: "Yes, set the budget",
        back: plan_href(&plan),
    }
    .page(&state, &viewer))
}

async fn budget(
    viewer: Viewer,
    State(state): State<AppState>,
    Path(plan): Path<String>,
    headers: HeaderMap,
    Form(f): Form<BudgetForm>,
) -> Result<Response, PageError> {
    check_plan_id(&plan)?;
    checked(&viewer, &headers, f.csrf.as_deref())?;
    let limit = parse_limit(f.limit.as_deref())?;
    admin(&state)?.set_budget(&plan, limit, &viewer.by).await?;
    state.plan_events.notify_waiters();
    tracing::info!(plan = %plan, limit = ?limit.map(|l| l.decimal()), by = %viewer.by, "plan budget set from the dashboard");
    Ok(Redirect::to(&plan_href(&plan)).into_response())
}

async fn confirm_revoke(
    viewer: Viewer,
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Response, PageError> {
    must_act(&viewer)?;
    let worker = state
        .registry
        .worker(&name)
        .await?
        .ok_or_else(|| PageError::not_found(format!("no worker named '{}'", printable(&name))))?;
    Ok(Confirmation {
        title: format!("Revoke worker {}?", worker.name),
        what: html! { p { "Its token stops working at once: its next request is refused, and the work it holds goes back to the queue when its lease expires. It can join again only with a new registration (" code { "arbiter worker register --replace" } ")." } },
        action: format!("/workers/{}/revoke", super::layout::segment(&worker.name)),
        fields: vec![],
        button: "Yes, revoke it",
        back: "/workers".to_string(),
    }
    .page(&state, &viewer))
}

async fn revoke(
    viewer: Viewer,
    State(state): State<AppState>,
    Path(name): Path<String>,
    headers: HeaderMap,
    Form(f): Form<CsrfForm>,
) -> Result<Response, PageError> {
    checked(&viewer, &headers, f.csrf.as_deref())?;
    let worker = state.registry.revoke(&name, &viewer.by, state.now()).await?;
    state.worker_tokens.forget(&worker.id);
    tracing::info!(worker = %worker.name, id = %worker.id, by = %viewer.by, "worker revoked from the dashboard");
    Ok(Redirect::to("/workers").into_response())
}
