//! `GET /api/v1/events?plan=ID` (the admin token or an access token, read-only ones too): a plan's event log as server-sent events,
//! oldest first, then live.
//!
//! Each event is one frame:
//!
//! ```text
//! id: 42
//! event: task_claimed
//! data: {"id":42,"plan_id":"calc","task_id":"T1","attempt":1,"kind":"task_claimed","at":1764590000000000,"data":{...}}
//!
//! ```
//!
//! `id` is the event's id in the store (monotonic over the store, so across plans too);
//! `event` its kind; `data` the whole event as one line of JSON (`at` in microseconds since
//! the epoch). A client that reconnects with `Last-Event-ID: 42` (or `?after=42`) gets the
//! events after 42 and nothing twice. Without either, the stream starts at the plan's first
//! event. A comment line (`: keep-alive`) every 15 seconds keeps proxies from closing an
//! idle stream. A store failure ends the stream with one `event: error` frame whose data is
//! `{"error": "...", "message": "..."}`; reconnecting resumes.
//!
//! New events are found by waking on the store's work notifications and the in-process
//! [`AppState::plan_events`] notifier, with a poll every second as the safety net (another
//! process may write events too). The stream ends when the server stops.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::Router;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::routing::get;
use futures_util::Stream;
use serde::Deserialize;

use arbiter_store::plans::PlanEvent;
use tokio_util::sync::CancellationToken;

use crate::auth::ReaderAuth;
use crate::error::ApiError;
use crate::state::AppState;

/// Events read from the store at a time.
const PAGE: u32 = 500;
/// The safety-net poll of the store.
const POLL: Duration = Duration::from_secs(1);
/// A keep-alive comment this often on an idle stream.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

pub fn routes() -> Router<AppState> {
    Router::new().route("/api/v1/events", get(events))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EventsQuery {
    plan: String,
    after: Option<i64>,
}

async fn events(
    _: ReaderAuth,
    State(state): State<AppState>,
    headers: HeaderMap,
    query: Result<Query<EventsQuery>, QueryRejection>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let Query(q) = query.map_err(|e| {
        ApiError::bad_request(
            "invalid_query",
            format!("{}; this route takes ?plan=ID and optionally &after=EVENT_ID", e.body_text()),
        )
    })?;
    let last_event_id = match headers.get("last-event-id") {
        None => None,
        Some(v) => {
            Some(v.to_str().ok().and_then(|s| s.trim().parse::<i64>().ok()).filter(|n| *n >= 0).ok_or_else(|| {
                ApiError::bad_request("invalid_last_event_id", "Last-Event-ID must be the id of an event (a number)")
            })?)
        }
    };
    let after = last_event_id.or(q.after).unwrap_or(0).max(0);
    if state.plans.plan_record(&q.plan).await?.is_none() {
        return Err(ApiError::not_found(format!("no plan named '{}'", q.plan.escape_default())));
    }
    Ok(stream(state, Some(q.plan), after, frame, Held::default()))
}

/// What a stream holds while it lasts, and what can end it early: `stop` ends it (a
/// dashboard session that ended); `keep` is dropped with it (a session's stream slot, a
/// guard whose drop tells a watcher the stream is gone).
#[derive(Default)]
pub struct Held {
    pub stop: CancellationToken,
    pub keep: Vec<Box<dyn std::any::Any + Send + Sync>>,
}

/// The events of one plan (or, `plan` `None`, of every plan) after the event `after`, then
/// live, as server-sent events made by `frame`: what the API's stream and the dashboard's
/// pages follow.
pub fn stream(
    state: AppState,
    plan: Option<String>,
    after: i64,
    frame: fn(&PlanEvent) -> Event,
    held: Held,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let cursor = Cursor { state, plan, after, pending: VecDeque::new(), done: false, frame, held };
    let stream = futures_util::stream::unfold(cursor, next_frame);
    Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive"))
}

struct Cursor {
    state: AppState,
    plan: Option<String>,
    after: i64,
    pending: VecDeque<PlanEvent>,
    done: bool,
    frame: fn(&PlanEvent) -> Event,
    held: Held,
}

async fn next_frame(mut c: Cursor) -> Option<(Result<Event, Infallible>, Cursor)> {
    loop {
        if c.done || c.held.stop.is_cancelled() {
            return None;
        }
        if let Some(e) = c.pending.pop_front() {
            c.after = e.id;
            return Some((Ok((c.frame)(&e)), c));
        }
        let page = match &c.plan {
            Some(plan) => c.state.plans.events_after(plan, c.after, PAGE).await,
            None => c.state.plans.all_events_after(c.after, PAGE).await,
        };
        match page {
            Ok(page) if !page.is_empty() => {
                c.pending.extend(page);
                continue;
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, plan = ?c.plan, "event stream: the store failed");
                c.done = true;
                let body = serde_json::json!({
                    "error": "store_failed",
                    "message": "reading the plan's events failed; reconnect with Last-Event-ID to resume",
                });
                return Some((Ok(Event::default().event("error").data(body.to_string())), c));
            }
        }
        let wait_plan = c.plan.clone().unwrap_or_default();
        tokio::select! {
            _ = c.state.stopping.cancelled() => return None,
            _ = c.held.stop.cancelled() => return None,
            _ = c.state.plans.wait_for_work(&wait_plan, POLL) => {}
            _ = c.state.plan_events.notified() => {}
        }
    }
}

/// One event as an SSE frame (see the module's docs).
pub fn frame(e: &PlanEvent) -> Event {
    // A kind is an identifier; a line break in one would end the frame early.
    let kind: String = e.kind.chars().filter(|c| !matches!(c, '\n' | '\r')).collect();
    Event::default().id(e.id.to_string()).event(kind).data(serde_json::to_string(e).unwrap_or_else(|_| "{}".into()))
}
