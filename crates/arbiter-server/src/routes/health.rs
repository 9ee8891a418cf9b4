//! `GET /healthz` (the process answers) and `GET /readyz` (the store answers too). Neither
//! needs a token; neither says more than "ok" or why it is not ready.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, response::IntoResponse};
use serde_json::json;

use crate::error::ApiError;
use crate::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new().route("/healthz", get(healthz)).route("/readyz", get(readyz))
}

async fn healthz() -> impl IntoResponse {
    Json(json!({"status": "ok"}))
}

async fn readyz(State(state): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    match tokio::time::timeout(std::time::Duration::from_secs(5), state.registry.ping()).await {
        Ok(Ok(())) => Ok(Json(json!({"status": "ready"}))),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "readiness: the store does not answer");
            Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "not_ready",
                "the store does not answer (the database is unreachable or failing); the server's log says why",
            ))
        }
        Err(_) => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "not_ready",
            "the store did not answer within 5 seconds",
        )),
    }
}
