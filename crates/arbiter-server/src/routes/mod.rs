//! The router: one module per area of the API, each with a `routes()` giving its
//! `Router<AppState>` (paths written out in full, so a route is found by grepping its path),
//! merged by [`router`] under the layers every route shares: the JSON body limit, the
//! request log and the latency histogram, JSON answers for unknown paths and methods.
//!
//! A new area (the work protocol, plan administration) is a new module here with its
//! `routes()` merged in [`router`].

pub mod artifacts;
pub mod events;
pub mod git;
pub mod health;
pub mod metrics;
pub mod plans;
pub mod tokens;
pub mod work;
pub mod workers;

use std::net::SocketAddr;
use std::time::Instant;

use axum::Router;
use axum::extract::{ConnectInfo, DefaultBodyLimit, FromRequestParts, MatchedPath, Request, State};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::state::AppState;

/// Every route of the server over `state`.
pub fn router(state: AppState) -> Router {
    Router::new()
        .merge(health::routes())
        .merge(metrics::routes())
        .merge(workers::routes())
        .merge(events::routes())
        .merge(artifacts::routes())
        .merge(git::routes())
        .merge(work::routes())
        .merge(plans::routes())
        .merge(tokens::routes())
        .merge(crate::web::routes())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(state.limits.json_body))
        .layer(middleware::from_fn_with_state(state.clone(), observe))
        .with_state(state)
}

async fn not_found() -> ApiError {
    ApiError::not_found("no such route; docs/protocol.md lists the routes")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this route does not take that method; docs/protocol.md lists the routes",
    )
}

/// Logs each request (method, route, path, status, time: never a header, a query or a
/// body, so never a token) and records its latency.
async fn observe(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if let Some(allowed) = &state.allowed_hosts {
        let host = request.headers().get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or_default();
        if !allowed.iter().any(|a| a.eq_ignore_ascii_case(host)) {
            return ApiError::new(
                StatusCode::MISDIRECTED_REQUEST,
                "unknown_host",
                "this server answers only to its own address; open the address it printed",
            )
            .into_response();
        }
    }
    let started = Instant::now();
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let route = request.extensions().get::<MatchedPath>().map(|m| m.as_str().to_string());
    let has_body = request.headers().contains_key(header::TRANSFER_ENCODING)
        || request.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).is_some_and(|v| v.trim() != "0");
    let mut response = next.run(request).await.into_response();
    // A request refused before its body was read leaves the rest of the body on the
    // connection: the server closes it, and says so, or the client would send its next
    // request on a connection that is going away.
    if has_body && !response.status().is_success() {
        response.headers_mut().insert(header::CONNECTION, header::HeaderValue::from_static("close"));
    }
    let elapsed = started.elapsed();
    let status = response.status();
    let route = route.unwrap_or_else(|| "unmatched".into());
    state.metrics.observe_request(method.as_str(), &route, status.as_u16(), elapsed.as_secs_f64());
    let ms = format!("{:.2}", elapsed.as_secs_f64() * 1000.0);
    if status.is_server_error() {
        tracing::warn!(method = %method, route = %route, path = %path, status = status.as_u16(), ms = %ms, "request");
    } else if status.is_success() && route.starts_with("/api/v1/work/") {
        // Workers claim, renew and report many times a second: their answered requests are
        // debug lines (claims that got work are logged as such, and /metrics counts them all).
        tracing::debug!(method = %method, route = %route, path = %path, status = status.as_u16(), ms = %ms, "request");
    } else {
        tracing::info!(method = %method, route = %route, path = %path, status = status.as_u16(), ms = %ms, "request");
    }
    response
}

/// The address of the peer of a request's connection, when the server recorded it (as
/// [`ConnectInfo`]; requests made without [`crate::serve`] have none).
#[derive(Clone, Copy, Debug)]
pub struct Peer(pub Option<SocketAddr>);

impl<S: Send + Sync> FromRequestParts<S> for Peer {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Peer(parts.extensions.get::<ConnectInfo<SocketAddr>>().map(|c| c.0)))
    }
}

/// A plan id, worker name or other path segment that is safe as a file name: 1 to 128 of
/// letters, digits, '.', '_', '-', not starting with '.' or '-', without "..".
pub fn safe_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && !id.starts_with(['.', '-'])
        && !id.contains("..")
        && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

#[cfg(test)]
mod tests {
    #[test]
    fn safe_ids() {
        for ok in ["calc", "a.b_c-1", "T1"] {
            assert!(super::safe_id(ok), "{ok}");
        }
        for bad in ["", ".git", "-x", "a/b", "..", "a..b", "a b", "a\0", &"x".repeat(129)] {
            assert!(!super::safe_id(bad), "{bad:?}");
        }
    }
}
