//! `/runs` (`arbiter ui` only): the local repository's runs (`arbiter run`), newest first,
//! from the run index of its store.

use axum::extract::State;
use axum::response::Response;
use maud::html;

use crate::state::AppState;
use crate::web::PageError;
use crate::web::layout::{Page, Section, Tone, empty, printable, segment, time_cell, word_badge};
use crate::web::session::Viewer;

/// The most runs listed.
const LISTED: u32 = 200;

pub async fn list(viewer: Viewer, State(state): State<AppState>) -> Result<Response, PageError> {
    if state.local_runs.is_none() {
        return Err(PageError::not_found(
            "this server lists no local runs (a control plane's runs are its plans' tasks: open a plan)",
        ));
    }
    let runs = state.runs.list_runs(LISTED).await?;
    let now = state.now();
    let body = html! {
        h1 { "Runs" }
        section.card #runs data-live {
            @if runs.is_empty() { (empty("No run yet: arbiter run --task \"…\" starts one.")) } @else {
                div.scroll { table {
                    thead { tr {
                        th scope="col" { "Run" } th scope="col" { "Task" } th scope="col" { "Status" }
                        th scope="col" class="num" { "Candidates" } th scope="col" { "Winner" } th scope="col" { "Started" }
                    } }
                    tbody {
                        @for r in &runs {
                            tr {
                                td { a.mono href={ "/runs/" (segment(r.id.as_str())) } { (r.id.as_str()) } }
                                td { (printable(&r.task_title)) }
                                td { (word_badge(r.status.as_str(), match r.status {
                                    arbiter_core::status::RunStatus::Running => Tone::Busy,
                                    arbiter_core::status::RunStatus::Succeeded => Tone::Good,
                                    _ => Tone::Bad,
                                })) }
                                td.num { (r.candidates) }
                                td.mono { (r.winner.as_ref().map(|w| w.to_string()).unwrap_or_default()) }
                                td { (time_cell(r.started_at, now)) }
                            }
                        }
                    }
                } }
            }
        }
    };
    Ok(Page::new("Runs", Section::Runs, &viewer, &state, body).every(Some(3)).render())
}
