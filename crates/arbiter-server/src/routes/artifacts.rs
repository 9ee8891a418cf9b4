//! Content-addressed artifacts (patches, evidence): `PUT /api/v1/artifacts/{sha256}`
//! (worker token) and `GET /api/v1/artifacts/{sha256}` (admin token).
//!
//! An upload streams to a temporary file in `DATA_DIR/artifacts/tmp/`, hashing as it goes,
//! under a size limit ([`crate::state::Limits::artifact`], 413 past it); it is kept only
//! when the SHA-256 of what arrived is the one in the path (400 otherwise, nothing kept),
//! and then renamed to `DATA_DIR/artifacts/sha256/<first two hex digits>/<sha256>`. The same
//! content has the same name, so uploads are idempotent: 201 when stored now, 200 when the
//! server had it already.

use std::path::PathBuf;

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::put;
use axum::{Json, extract::Request};
use futures_util::StreamExt;
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use crate::api::ArtifactStored;
use crate::auth::{AdminAuth, WorkerAuth};
use crate::error::ApiError;
use crate::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/artifacts/{sha256}", put(upload).get(download))
        // Uploads stream under their own limit.
        .layer(DefaultBodyLimit::disable())
}

/// A SHA-256 in lowercase hex.
pub fn valid_digest(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn checked(sha256: &str) -> Result<(), ApiError> {
    if valid_digest(sha256) {
        Ok(())
    } else {
        Err(ApiError::bad_request(
            "invalid_digest",
            "an artifact is named by the SHA-256 of its content: 64 lowercase hex digits",
        ))
    }
}

/// Where the artifact `sha256` is kept.
pub fn artifact_path(state: &AppState, sha256: &str) -> PathBuf {
    state.artifacts_dir().join("sha256").join(&sha256[..2]).join(sha256)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

async fn upload(
    worker: WorkerAuth,
    State(state): State<AppState>,
    Path(sha256): Path<String>,
    headers: HeaderMap,
    request: Request,
) -> Result<Response, ApiError> {
    checked(&sha256)?;
    let limit = state.limits.artifact;
    let dest = artifact_path(&state, &sha256);
    if let Ok(meta) = tokio::fs::metadata(&dest).await {
        let stored = ArtifactStored { sha256, size: meta.len(), created: false };
        // The body is not read: the connection cannot carry another request.
        return Ok((StatusCode::OK, [(header::CONNECTION, "close")], Json(stored)).into_response());
    }
    let declared =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(ApiError::too_large(limit));
    }
    let tmp_dir = state.artifacts_dir().join("tmp");
    tokio::fs::create_dir_all(&tmp_dir).await.map_err(|e| ApiError::internal("creating the artifacts directory", e))?;
    let tmp = tmp_dir.join(format!("{sha256}.{}.part", unique()));
    let result = receive(request.into_body(), &tmp, limit).await;
    let (actual, size) = match result {
        Ok(done) => done,
        Err(e) => {
            let _ = tokio::fs::remove_file(&tmp).await;
            return Err(e);
        }
    };
    if actual != sha256 {
        let _ = tokio::fs::remove_file(&tmp).await;
        return Err(ApiError::bad_request(
            "digest_mismatch",
            format!("the content's SHA-256 is {actual}, not the {sha256} in the path; nothing was kept"),
        ));
    }
    let parent = dest.parent().map(PathBuf::from).unwrap_or_else(|| state.artifacts_dir());
    let renamed = async {
        tokio::fs::create_dir_all(&parent).await?;
        tokio::fs::rename(&tmp, &dest).await
    }
    .await;
    if let Err(e) = renamed {
        let _ = tokio::fs::remove_file(&tmp).await;
        return Err(ApiError::internal("storing the artifact", e));
    }
    tracing::info!(worker = %worker.0.name, sha256 = %sha256, size, "artifact stored");
    Ok((StatusCode::CREATED, Json(ArtifactStored { sha256, size, created: true })).into_response())
}

/// Streams `body` to `tmp` (synced to disk), returning its SHA-256 and size.
async fn receive(body: Body, tmp: &std::path::Path, limit: u64) -> Result<(String, u64), ApiError> {
    let mut file = tokio::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(tmp)
        .await
        .map_err(|e| ApiError::internal("creating a temporary file for an artifact", e))?;
    let mut hasher = Sha256::new();
    let mut size = 0u64;
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| {
            ApiError::bad_request("unreadable_body", format!("the upload was cut off or unreadable: {e}"))
        })?;
        size += chunk.len() as u64;
        if size > limit {
            return Err(ApiError::too_large(limit));
        }
        hasher.update(&chunk);
        file.write_all(&chunk).await.map_err(|e| ApiError::internal("writing an artifact", e))?;
    }
    file.sync_all().await.map_err(|e| ApiError::internal("writing an artifact", e))?;
    Ok((hex(&hasher.finalize()), size))
}

/// A name part no other upload in this process or another uses at the same time.
fn unique() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    format!("{}-{nanos}-{n}", std::process::id())
}

async fn download(
    _: AdminAuth,
    State(state): State<AppState>,
    Path(sha256): Path<String>,
) -> Result<Response, ApiError> {
    checked(&sha256)?;
    let path = artifact_path(&state, &sha256);
    let file = match tokio::fs::File::open(&path).await {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ApiError::not_found(format!("no artifact {sha256}")));
        }
        Err(e) => return Err(ApiError::internal("reading an artifact", e)),
    };
    let size = file.metadata().await.map(|m| m.len()).ok();
    let body = Body::from_stream(tokio_util::io::ReaderStream::new(file));
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/octet-stream"));
    if let Some(size) = size {
        headers.insert(header::CONTENT_LENGTH, size.into());
    }
    if let Ok(etag) = header::HeaderValue::from_str(&format!("\"{sha256}\"")) {
        headers.insert(header::ETAG, etag);
    }
    Ok(response)
}
