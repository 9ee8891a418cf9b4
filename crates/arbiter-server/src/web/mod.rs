//! The web dashboard: server-rendered pages over the same state as the API (plans, tasks,
//! runs, workers, events, costs), kept live by the plan event stream, with the admin's
//! actions (cancel a plan, retry a task, set a budget, revoke a worker) behind a
//! confirmation, a CSRF token and the admin role.
//!
//! - [`session`]: logins, session cookies, CSRF, the [`session::Viewer`] of a request.
//! - [`layout`]: the page shell and the shared pieces of pages; [`assets`]: CSS and JS,
//!   embedded.
//! - [`pages`]: one module per page; [`actions`]: the confirmations and the changes;
//!   [`live`]: the event stream pages follow; [`login`]: login, one-time login, logout.
//!
//! Every route here answers HTML (or the stream); the JSON API stays under `/api/v1`, with
//! bearer tokens only: a browser session opens no API route, so no API route is reachable
//! by a cross-site form.

pub mod actions;
pub mod assets;
pub mod dag;
pub mod layout;
pub mod live;
pub mod login;
pub mod pages;
pub mod session;

use std::sync::Arc;

use axum::Router;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::html;

use arbiter_core::plan::PlanSpec;
use arbiter_core::plan::worker_names::WorkerNames;
use arbiter_runner::plan_admin::{AdminError, PlanAdmin};
use arbiter_runner::workspace::Workspace;
use arbiter_store::plans::EventFilter;

use crate::state::AppState;
use layout::Page;

pub fn routes() -> Router<AppState> {
    Router::new()
        .merge(assets::routes())
        .merge(login::routes())
        .merge(live::routes())
        .merge(pages::routes())
        .merge(actions::routes())
}

/// A page that could not be shown: its status and what to do, in the page shell.
#[derive(Debug)]
pub struct PageError {
    pub status: StatusCode,
    pub message: String,
}

impl PageError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        PageError { status, message: message.into() }
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    /// A failure of the server's (logged in full, shown without details).
    pub fn internal(what: &str, error: impl std::fmt::Display) -> Self {
        tracing::error!(error = %error, "{what}");
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, format!("{what} failed on the server; its log says why"))
    }
}

impl From<AdminError> for PageError {
    fn from(e: AdminError) -> Self {
        match e {
            AdminError::NotFound(m) => PageError::not_found(m),
            AdminError::Conflict(m) => PageError::new(StatusCode::CONFLICT, m),
            AdminError::Invalid(m) => PageError::new(StatusCode::UNPROCESSABLE_ENTITY, m),
            AdminError::Environment(m) => PageError::internal("reading the plans", m),
        }
    }
}

impl From<arbiter_store::StoreError> for PageError {
    fn from(e: arbiter_store::StoreError) -> Self {
        let api = crate::error::ApiError::from(e);
        PageError::new(api.status, api.message)
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let title = self.status.canonical_reason().unwrap_or("Error").to_string();
        let body = html! {
            h1 { (title) }
            p.error role="alert" { (layout::printable(&self.message)) }
            p { a href="/" { "Back to the plans" } }
        };
        let page = Page::bare(title, body);
        let mut response = page.render();
        *response.status_mut() = self.status;
        response
    }
}

/// The server's plan administrator (what reads and changes plans).
pub fn admin(state: &AppState) -> Result<Arc<dyn PlanAdmin>, PageError> {
    state.admin.clone().ok_or_else(|| {
        PageError::new(StatusCode::SERVICE_UNAVAILABLE, "this server does not administer plans: it has no plan store")
    })
}

/// The repository of a plan as this server has it (`None`: it is not here, or not yet: a
/// page never starts a clone).
pub async fn workspace_of(state: &AppState, header: &PlanSpec) -> Option<Workspace> {
    state.plan_repos.as_ref()?.existing_workspace_for(header).await
}

/// The event stream that keeps a page live: one plan's (or every plan's), from the newest
/// event there is as the page is rendered, so nothing that happens meanwhile is missed.
pub async fn stream_url(state: &AppState, plan: Option<&str>) -> String {
    let newest = state
        .plans
        .recent_events(&EventFilter::plan(plan), None, 1)
        .await
        .ok()
        .and_then(|e| e.first().map(|e| e.id))
        .unwrap_or(0);
    match plan {
        Some(p) => format!("/ui/stream?plan={}&after={newest}", layout::url_encode(p)),
        None => format!("/ui/stream?after={newest}"),
    }
}

/// The registry's workers by name (none when it cannot be read: ids are shown then).
pub async fn worker_names(state: &AppState) -> WorkerNames {
    let workers = state.registry.workers().await.unwrap_or_default();
    WorkerNames::new(workers.into_iter().map(|w| (w.id, w.name)))
}

/// A plan id from a path: 404 unless it is one (as for a plan that does not exist).
pub fn check_plan_id(id: &str) -> Result<(), PageError> {
    if arbiter_core::plan::check::plan_id_ok(id) {
        Ok(())
    } else {
        Err(PageError::not_found(format!(
            "no plan named '{}'",
            layout::printable(&id.chars().take(100).collect::<String>())
        )))
    }
}

/// 404 for a task id no plan can hold (nothing is looked up for it).
pub fn check_task_id(plan: &str, task: &str) -> Result<(), PageError> {
    if arbiter_core::plan::check::task_id_ok(task) { Ok(()) } else { Err(no_task(plan, task)) }
}

/// 404 naming the task `plan` does not have.
pub fn no_task(plan: &str, task: &str) -> PageError {
    PageError::not_found(format!(
        "plan {plan} has no task '{}'",
        layout::printable(&task.chars().take(100).collect::<String>())
    ))
}
