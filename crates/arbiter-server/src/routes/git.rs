//! Git over smart HTTP, read-only, behind a worker's token:
//! `GET /git/{plan}/info/refs?service=git-upload-pack` and `POST /git/{plan}/git-upload-pack`,
//! served by `git http-backend` ([`crate::git`]) from the repository the
//! [`RepoResolver`](crate::state::RepoResolver) gives for the plan.
//!
//! Pushing (`git-receive-pack`, either route) is 403; the dumb protocol (`info/refs` without
//! `?service=`, or any other file) is 403 too; a plan id that is not a safe name, or a plan
//! with no repository here, is 404.

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{HeaderMap, header};
use axum::response::Response;
use axum::routing::{any, get, post};
use serde::Deserialize;

use crate::auth::WorkerAuth;
use crate::error::ApiError;
use crate::git::{CgiRequest, Service, http_backend, servable};
use crate::routes::{Peer, safe_id};
use crate::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/git/{plan}/info/refs", get(info_refs))
        .route("/git/{plan}/git-upload-pack", post(upload_pack))
        .route("/git/{plan}/git-receive-pack", any(push_refused))
        .route("/git/{plan}/{*rest}", any(not_served))
        // Negotiation bodies stream to git under their own limit.
        .layer(DefaultBodyLimit::disable())
}

#[derive(Debug, Deserialize)]
struct InfoRefsQuery {
    service: Option<String>,
}

fn read_only() -> ApiError {
    ApiError::forbidden(
        "read_only",
        "repositories are served read-only: workers fetch over git, and upload their results as artifacts",
    )
}

async fn push_refused(_: WorkerAuth) -> ApiError {
    read_only()
}

async fn not_served(_: WorkerAuth) -> ApiError {
    ApiError::forbidden(
        "smart_http_only",
        "only git's smart HTTP protocol is served (info/refs?service=git-upload-pack, git-upload-pack)",
    )
}

/// The repository of `plan`, or 404.
async fn repository(state: &AppState, plan: &str) -> Result<std::path::PathBuf, ApiError> {
    let none = || ApiError::not_found(format!("no repository for plan '{}' on this server", plan.escape_default()));
    if !safe_id(plan) {
        return Err(none());
    }
    let path = state.repos.repository(plan).await.ok_or_else(none)?;
    servable(&path).await.ok_or_else(none)
}

fn header_text(headers: &HeaderMap, name: impl header::AsHeaderName) -> Option<String> {
    headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_string)
}

async fn info_refs(
    worker: WorkerAuth,
    State(state): State<AppState>,
    Path(plan): Path<String>,
    Query(q): Query<InfoRefsQuery>,
    Peer(peer): Peer,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    match q.service.as_deref() {
        Some("git-upload-pack") => {}
        Some("git-receive-pack") => return Err(read_only()),
        _ => {
            return Err(ApiError::forbidden(
                "smart_http_only",
                "only git's smart HTTP protocol is served: ?service=git-upload-pack",
            ));
        }
    }
    let repo = repository(&state, &plan).await?;
    let req = CgiRequest {
        service: Service::InfoRefs,
        content_type: None,
        content_encoding: None,
        git_protocol: header_text(&headers, "git-protocol"),
        remote_user: worker.0.name,
        remote_addr: peer.map(|p| p.ip().to_string()),
        body: Body::empty(),
        body_limit: 0,
    };
    http_backend(&state.git, &repo, req).await
}

async fn upload_pack(
    worker: WorkerAuth,
    State(state): State<AppState>,
    Path(plan): Path<String>,
    Peer(peer): Peer,
    request: Request,
) -> Result<Response, ApiError> {
    let repo = repository(&state, &plan).await?;
    let headers = request.headers();
    let limit = state.limits.git_request;
    let declared = header_text(headers, header::CONTENT_LENGTH).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(ApiError::too_large(limit));
    }
    let req = CgiRequest {
        service: Service::UploadPack,
        content_type: header_text(headers, header::CONTENT_TYPE),
        content_encoding: header_text(headers, header::CONTENT_ENCODING),
        git_protocol: header_text(headers, "git-protocol"),
        remote_user: worker.0.name,
        remote_addr: peer.map(|p| p.ip().to_string()),
        body: request.into_body(),
        body_limit: limit,
    };
    http_backend(&state.git, &repo, req).await
}
