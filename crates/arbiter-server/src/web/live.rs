//! `GET /ui/stream?plan=ID` (a dashboard session): the event stream a page follows to stay
//! live — one plan's events, or every plan's without `plan` — as unnamed server-sent events
//! (`onmessage` in a browser), each `{id, plan, task, kind}`. The browser's `EventSource`
//! resumes with `Last-Event-ID` after a drop; a new page starts at the newest event.

use axum::Router;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;

use arbiter_store::plans::PlanEvent;

use super::session::Viewer;
use crate::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new().route("/ui/stream", get(stream))
}

#[derive(Deserialize)]
struct StreamQuery {
    plan: Option<String>,
}

async fn stream(
    _: Viewer,
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<StreamQuery>,
) -> Response {
    let plan = q.plan.filter(|p| !p.is_empty());
    if let Some(p) = &plan
        && let Err(e) = super::check_plan_id(p)
    {
        return e.into_response();
    }
    let resumed = headers.get("last-event-id").and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<i64>().ok());
    let after = match resumed {
        Some(id) => id.max(0),
        None => match state.plans.recent_events(plan.as_deref(), None, 1).await {
            Ok(latest) => latest.first().map_or(0, |e| e.id),
            Err(e) => return super::PageError::from(e).into_response(),
        },
    };
    crate::routes::events::stream(state, plan, after, page_frame).into_response()
}

/// An event as a page needs it: that something of this plan and task changed.
fn page_frame(e: &PlanEvent) -> Event {
    let body = serde_json::json!({"id": e.id, "plan": e.plan_id, "task": e.task_id, "kind": e.kind});
    Event::default().id(e.id.to_string()).data(body.to_string())
}
