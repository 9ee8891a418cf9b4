//! The dashboard's pages, one module each; every one needs a session (any role) and reads
//! without JavaScript.
//!
//! | path | page |
//! |---|---|
//! | `/` | [`plans`]: every plan's progress, budget and status counts |
//! | `/plans/{plan}` | [`plan`]: the DAG, the critical path, the integration branch, the tasks |
//! | `/plans/{plan}/task?id=ID` | [`task`]: attempts, leases, workers, units, runs, retries, analysis |
//! | `/plans/{plan}/runs/{run}` | [`run`]: a plan task's tournament |
//! | `/runs`, `/runs/{run}` | [`runs`]: the local repository's runs (`arbiter ui` only) |
//! | `/workers` | [`workers`]: runners, slots, current work, heartbeat age |
//! | `/events` | [`events`]: the event log, filtered by plan, task and kind |
//! | `/costs` | [`costs`]: by plan, task, backend and role; tokens; spending over time |

pub mod costs;
pub mod diff;
pub mod events;
pub mod plan;
pub mod plans;
pub mod run;
pub mod runs;
pub mod task;
pub mod workers;

use axum::Router;
use axum::routing::get;

use crate::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(plans::page))
        .route("/plans/{plan}", get(plan::page))
        .route("/plans/{plan}/task", get(task::page))
        .route("/plans/{plan}/runs/{run}", get(run::plan_run))
        .route("/runs", get(runs::list))
        .route("/runs/{run}", get(run::local_run))
        .route("/workers", get(workers::page))
        .route("/events", get(events::page))
        .route("/costs", get(costs::page))
}
