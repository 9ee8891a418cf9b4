//! Named access tokens (admin): `arbiter token create|list|revoke --server URL`.
//!
//! - `POST /api/v1/tokens` `{name, role}` → 201 `{name, role, token}`: the token is shown
//!   this once; the store keeps its hash. `role` is `admin` or `read-only`.
//! - `GET /api/v1/tokens` → `{tokens: [...]}` (never a value).
//! - `POST /api/v1/tokens/{name}/revoke` → the token, dead; its dashboard sessions end.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};

use crate::api::{TokenCreated, TokenList, TokenRequest, TokenView};
use crate::auth::{AdminAuth, token_actor};
use crate::error::{ApiError, ApiJson};
use crate::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new().route("/api/v1/tokens", get(list).post(create)).route("/api/v1/tokens/{name}/revoke", post(revoke))
}

async fn create(
    who: AdminAuth,
    State(state): State<AppState>,
    ApiJson(req): ApiJson<TokenRequest>,
) -> Result<(StatusCode, Json<TokenCreated>), ApiError> {
    arbiter_store::tokens::check_token_name(&req.name)
        .map_err(|m| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_request", format!("name: {m}")))?;
    let created = state.access.create_token(&req.name, req.role, state.now()).await?;
    tracing::info!(token = %created.record.name, role = %created.record.role, by = %who.by, "access token created");
    Ok((
        StatusCode::CREATED,
        Json(TokenCreated {
            name: created.record.name,
            role: created.record.role,
            token: created.token.expose().to_string(),
        }),
    ))
}

async fn list(_: AdminAuth, State(state): State<AppState>) -> Result<Json<TokenList>, ApiError> {
    Ok(Json(TokenList { tokens: state.access.tokens().await?.iter().map(TokenView::from).collect() }))
}

async fn revoke(
    who: AdminAuth,
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<TokenView>, ApiError> {
    let revoked = state.access.revoke_token(&name, state.now()).await?;
    state.access_tokens.forget_where(|t| t.name == revoked.name);
    state.sessions.close_all_of(&token_actor(&revoked.name));
    tracing::info!(token = %revoked.name, by = %who.by, "access token revoked");
    Ok(Json(TokenView::from(&revoked)))
}
