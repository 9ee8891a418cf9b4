//! `/workers`: every worker the control plane knows — its runners, backends and slots, what
//! it holds now, how long ago it was heard from — and the admin's revoke. Heartbeats are no
//! plan events: the page looks again every few seconds.

use arbiter_store::workers::WorkerRecord;
use axum::extract::State;
use axum::response::Response;
use maud::{Markup, html};

use crate::state::AppState;
use crate::web::PageError;
use crate::web::layout::{Page, Section, Tone, empty, printable, segment, time_cell, when, word_badge};
use crate::web::session::Viewer;

pub async fn page(viewer: Viewer, State(state): State<AppState>) -> Result<Response, PageError> {
    let workers = state.registry.workers().await?;
    let since = state.connected_since();
    let now = state.now();
    let body = html! {
        h1 { "Workers" }
        section.card #workers data-live {
            @if workers.is_empty() {
                (empty("No worker has registered. On a worker host: arbiter worker register --server URL --name NAME --token-file FILE"))
            } @else {
                p.muted {
                    (workers.iter().filter(|w| w.seen_since(since)).count()) " connected (heard from within two lease lengths) of "
                    (workers.len()) "."
                }
                div.scroll { table {
                    thead { tr {
                        th scope="col" { "Worker" } th scope="col" { "State" } th scope="col" { "Runners" }
                        th scope="col" { "Backends" } th scope="col" class="num" { "Slots" } th scope="col" { "Current work" }
                        th scope="col" { "Last heartbeat" }
                        @if viewer.may_act() { th scope="col" { span.muted { "Action" } } }
                    } }
                    tbody { @for w in &workers { (row(w, since, now, viewer.may_act())) } }
                } }
            }
        }
    };
    Ok(Page::new("Workers", Section::Workers, &viewer, &state, body)
        .live(Some(crate::web::stream_url(&state, None).await))
        .every(Some(5))
        .render())
}

fn row(
    w: &WorkerRecord,
    since: arbiter_core::time::Timestamp,
    now: arbiter_core::time::Timestamp,
    act: bool,
) -> Markup {
    let state = if w.revoked() {
        word_badge("revoked", Tone::Bad)
    } else if w.seen_since(since) {
        word_badge("connected", Tone::Good)
    } else {
        word_badge("not heard from", Tone::Quiet)
    };
    html! {
        tr id={ "worker-" (w.name) } {
            td { (w.name) br; span.muted.mono { (w.id) } }
            td {
                (state)
                @if let (Some(at), Some(by)) = (w.revoked_at, &w.revoked_by) {
                    br; span.muted { "by " (printable(by)) ", " (when(at)) }
                }
            }
            td.mono { (w.capabilities.runners.join(", ")) }
            td.mono { (w.capabilities.backends.join(", ")) }
            td.num { (w.capabilities.slots) }
            td { (current_work(&w.current_work)) }
            td { @match w.last_seen_at { Some(t) => (time_cell(t, now)), None => span.muted { "never" } } }
            @if act {
                td { @if !w.revoked() { a.button.danger href={ "/workers/" (segment(&w.name)) "/revoke" } { "Revoke…" } } }
            }
        }
    }
}

/// What a worker's heartbeat says it holds: `plan/task (unit)` per piece of work.
fn current_work(work: &serde_json::Value) -> Markup {
    let items: Vec<String> = match work {
        serde_json::Value::Array(list) => list
            .iter()
            .map(|w| {
                let text = |k: &str| w.get(k).and_then(|v| v.as_str()).unwrap_or("?").to_string();
                match w.get("unit").and_then(|u| u.as_str()) {
                    Some(unit) => format!("{}/{} ({unit})", text("plan"), text("task")),
                    None => format!("{}/{}", text("plan"), text("task")),
                }
            })
            .collect(),
        serde_json::Value::Object(o) if o.contains_key("claiming") => vec!["waiting for work".into()],
        _ => Vec::new(),
    };
    html! {
        @if items.is_empty() { span.muted { "idle" } }
        @else { ul { @for i in &items { li.mono { (printable(i)) } } } }
    }
}
