//! `GET /ui/stream?plan=ID[&after=N]` (a dashboard session): the event stream a page follows
//! to stay live — one plan's events, or every plan's without `plan` — as unnamed server-sent
//! events (`onmessage` in a browser), each `{id, plan, task, kind}`.
//!
//! A page names the newest event it was rendered with (`after`), so nothing between its
//! rendering and its stream is missed; the browser's `EventSource` resumes with
//! `Last-Event-ID` after a drop. A page only needs to know that something changed, so a
//! resume reaches back at most [`REPLAY`] events. A session holds at most
//! [`STREAMS_PER_SESSION`] streams, and its streams end within seconds of its end (logout,
//! expiry, a revoked token).

use std::time::Duration;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use arbiter_store::plans::{EventFilter, PlanEvent};

use super::session::{STREAMS_PER_SESSION, Viewer, still_valid};
use crate::routes::events::Held;
use crate::state::AppState;

/// How far back a page's stream may start.
pub const REPLAY: i64 = 500;
/// How often a stream checks that its session still stands.
const RECHECK: Duration = Duration::from_secs(5);

pub fn routes() -> Router<AppState> {
    Router::new().route("/ui/stream", get(stream))
}

#[derive(Deserialize)]
struct StreamQuery {
    plan: Option<String>,
    after: Option<i64>,
}

async fn stream(
    viewer: Viewer,
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
    let Some(slot) = state.sessions.stream_slot(&viewer.session) else {
        return super::PageError::new(
            StatusCode::TOO_MANY_REQUESTS,
            format!("this session has {STREAMS_PER_SESSION} live pages open already: close some"),
        )
        .into_response();
    };
    let newest = match state.plans.recent_events(&EventFilter::plan(plan.as_deref()), None, 1).await {
        Ok(latest) => latest.first().map_or(0, |e| e.id),
        Err(e) => return super::PageError::from(e).into_response(),
    };
    let resumed = headers.get("last-event-id").and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<i64>().ok());
    let after = resumed.or(q.after).map_or(newest, |a| a.clamp((newest - REPLAY).max(0), newest));
    // The stream ends when the session does; the watcher ends with the stream.
    let stop = CancellationToken::new();
    let gone = CancellationToken::new();
    tokio::spawn(watch(state.clone(), viewer, stop.clone(), gone.clone()));
    let held = Held { stop, keep: vec![Box::new(slot), Box::new(gone.drop_guard())] };
    crate::routes::events::stream(state, plan, after, page_frame, held).into_response()
}

/// Ends the stream (`stop`) when the viewer's session no longer stands; returns when the
/// stream is gone.
async fn watch(state: AppState, viewer: Viewer, stop: CancellationToken, gone: CancellationToken) {
    loop {
        tokio::select! {
            _ = gone.cancelled() => return,
            _ = tokio::time::sleep(RECHECK) => {
                if !still_valid(&state, &viewer).await {
                    stop.cancel();
                    return;
                }
            }
        }
    }
}

/// An event as a page needs it: that something of this plan and task changed.
fn page_frame(e: &PlanEvent) -> Event {
    let body = serde_json::json!({"id": e.id, "plan": e.plan_id, "task": e.task_id, "kind": e.kind});
    Event::default().id(e.id.to_string()).data(body.to_string())
}
