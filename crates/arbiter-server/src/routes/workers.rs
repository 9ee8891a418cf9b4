//! Workers: registration (bootstrap token), and the admin's list, revoke and rotate.
//!
//! - `POST /api/v1/workers/register` → 201 `{worker_id, name, token}`: the token is shown
//!   this once; the registry keeps its hash.
//! - `GET /api/v1/workers` → `{workers: [...]}` (never a token; an access token may read it).
//! - `POST /api/v1/workers/{name}/revoke` → the worker, its token dead.
//! - `POST /api/v1/workers/{name}/rotate` → `{worker_id, name, token}`, the old token dead.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};

use arbiter_store::workers::{Capabilities, Registered, Registration, check_name};

use crate::api::{RegisterRequest, WorkerCredentials, WorkerList, WorkerView};
use crate::auth::{AdminAuth, BootstrapAuth, ReaderAuth};
use crate::error::{ApiError, ApiJson};
use crate::state::AppState;

/// The most runners or backends a worker may advertise, and the longest name of one.
const MAX_NAMES: usize = 64;
const MAX_NAME_LEN: usize = 64;
/// The most units of work a worker may take at once.
const MAX_SLOTS: u32 = 1024;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/workers/register", post(register))
        .route("/api/v1/workers", get(list))
        .route("/api/v1/workers/{name}/revoke", post(revoke))
        .route("/api/v1/workers/{name}/rotate", post(rotate))
}

fn invalid(message: String) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_request", message)
}

/// Checks what a worker advertises.
pub fn check_capabilities(runners: &[String], backends: &[String], slots: u32) -> Result<(), ApiError> {
    for (field, names) in [("runners", runners), ("backends", backends)] {
        if names.len() > MAX_NAMES {
            return Err(invalid(format!("{field}: at most {MAX_NAMES} entries")));
        }
        for (i, n) in names.iter().enumerate() {
            let ok = !n.is_empty()
                && n.len() <= MAX_NAME_LEN
                && n.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':' | '/'));
            if !ok {
                return Err(invalid(format!(
                    "{field}[{i}]: '{}' is not a runner or backend name (1 to {MAX_NAME_LEN} of letters, digits, '.', '_', '-', ':', '/')",
                    n.escape_default()
                )));
            }
        }
    }
    if slots == 0 || slots > MAX_SLOTS {
        return Err(invalid(format!(
            "slots: {slots} is out of range; a worker takes 1 to {MAX_SLOTS} units of work at once"
        )));
    }
    Ok(())
}

fn credentials(r: Registered) -> WorkerCredentials {
    WorkerCredentials {
        worker_id: r.worker.id,
        name: r.worker.name,
        token: r.token.expose().to_string(),
        replaced: r.replaced,
    }
}

async fn register(
    _: BootstrapAuth,
    State(state): State<AppState>,
    ApiJson(req): ApiJson<RegisterRequest>,
) -> Result<(StatusCode, Json<WorkerCredentials>), ApiError> {
    check_name(&req.name).map_err(|m| invalid(format!("name: {m}")))?;
    check_capabilities(&req.runners, &req.backends, req.slots)?;
    let registration = Registration {
        name: req.name,
        capabilities: Capabilities { runners: req.runners, backends: req.backends, slots: req.slots },
        replace: req.replace,
    };
    let registered = state.registry.register(&registration, state.now()).await?;
    state.worker_tokens.forget(&registered.worker.id);
    tracing::info!(worker = %registered.worker.name, id = %registered.worker.id, replaced = registered.replaced, "worker registered");
    Ok((StatusCode::CREATED, Json(credentials(registered))))
}

async fn list(_: ReaderAuth, State(state): State<AppState>) -> Result<Json<WorkerList>, ApiError> {
    let since = state.connected_since();
    let workers = state.registry.workers().await?.iter().map(|w| WorkerView::new(w, since)).collect();
    Ok(Json(WorkerList { workers }))
}

async fn revoke(
    who: AdminAuth,
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<WorkerView>, ApiError> {
    let worker = state.registry.revoke(&name, &who.by, state.now()).await?;
    state.worker_tokens.forget(&worker.id);
    tracing::info!(worker = %worker.name, id = %worker.id, by = %who.by, "worker revoked");
    Ok(Json(WorkerView::new(&worker, state.connected_since())))
}

async fn rotate(
    _: AdminAuth,
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<WorkerCredentials>, ApiError> {
    let rotated = state.registry.rotate(&name, state.now()).await?;
    state.worker_tokens.forget(&rotated.worker.id);
    tracing::info!(worker = %rotated.worker.name, id = %rotated.worker.id, "worker token rotated");
    Ok(Json(credentials(rotated)))
}
