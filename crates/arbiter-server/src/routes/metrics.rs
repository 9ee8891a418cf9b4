//! `GET /metrics` (admin token): the Prometheus text exposition of [`crate::metrics`], with
//! the gauges read from the stores at scrape time.

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

use crate::auth::AdminAuth;
use crate::error::ApiError;
use crate::metrics::Gauges;
use crate::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new().route("/metrics", get(metrics))
}

async fn metrics(_: AdminAuth, State(state): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    let mut gauges = Gauges::default();
    for plan in state.plans.plans().await? {
        for (status, n) in plan.counts {
            gauges.tasks.insert((plan.id.clone(), status.as_str().to_string()), n as u64);
        }
    }
    let since = state.connected_since();
    for w in state.registry.workers().await? {
        if !w.revoked() {
            gauges.workers_registered += 1;
        }
        if w.seen_since(since) {
            gauges.workers_connected += 1;
        }
    }
    let body = state.metrics.render(&gauges);
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], body))
}
