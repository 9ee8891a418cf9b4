//! Errors as a client sees them: a status and a JSON body `{"error": "<code>", "message":
//! "<what went wrong and how to fix it>"}`, and [`ApiJson`], the JSON body extractor whose
//! every rejection is such an error (malformed JSON 400, an unknown or wrong field 422 with
//! its path, a body over the limit 413, the wrong content type 415).

use axum::Json;
use axum::extract::{FromRequest, Request};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::de::DeserializeOwned;

use arbiter_store::StoreError;

use crate::api::ErrorBody;

/// An error response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    /// A stable, machine-readable code (`invalid_token`, `not_found`, …).
    pub code: &'static str,
    /// What went wrong and what to do about it; never a secret.
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError { status, code, message: message.into() }
    }

    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// 401: no token, or one that is not (or no longer) valid here.
    pub fn unauthorized(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, code, message)
    }

    /// 403: a valid token that may not do this.
    pub fn forbidden(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, code, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub fn too_large(limit: u64) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("the request body is larger than this route accepts ({limit} bytes)"),
        )
    }

    /// 500 for a failure that is the server's: logged in full, answered without details.
    pub fn internal(what: &str, error: impl std::fmt::Display) -> Self {
        tracing::error!(error = %error, "{what}");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!("{what} failed on the server; its log says why"),
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Json(ErrorBody { error: self.code.to_string(), message: self.message });
        let mut response = (self.status, body).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer realm=\"arbiter\""));
        }
        response
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NoPlan { .. }
            | StoreError::NoTask { .. }
            | StoreError::NoWorker { .. }
            | StoreError::NoToken { .. } => ApiError::not_found(e.to_string()),
            StoreError::WorkerExists { .. } | StoreError::TokenExists { .. } => {
                ApiError::new(StatusCode::CONFLICT, "name_taken", e.to_string())
            }
            StoreError::StaleLease { .. } => ApiError::new(StatusCode::CONFLICT, "stale_lease", e.to_string()),
            StoreError::NotAllowed { .. }
            | StoreError::LeasesHeld { .. }
            | StoreError::ImportRefused { .. }
            | StoreError::PlanExists { .. }
            | StoreError::SourceTaken { .. } => ApiError::new(StatusCode::CONFLICT, "conflict", e.to_string()),
            StoreError::InvalidWorker { .. } | StoreError::InvalidToken { .. } | StoreError::PlanInvalid { .. } => {
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_request", e.to_string())
            }
            _ => ApiError::internal("the store", e),
        }
    }
}

/// A JSON request body of type `T` (which should refuse unknown fields:
/// `#[serde(deny_unknown_fields)]`), under the router's body limit.
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let json_type = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .is_some_and(|v| {
                let v = v.trim().to_ascii_lowercase();
                v == "application/json" || (v.starts_with("application/") && v.ends_with("+json"))
            });
        if !json_type {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "this route takes a JSON body: send Content-Type: application/json",
            ));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "body_too_large",
                    "the request body is larger than this route accepts (1 MiB for JSON by default)",
                )
            } else {
                ApiError::bad_request("unreadable_body", format!("the request body could not be read: {rejection}"))
            }
        })?;
        parse_json(&bytes).map(ApiJson)
    }
}

/// Parses a JSON body, naming the field that is wrong.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        match inner.classify() {
            serde_json::error::Category::Data => {
                let at = if path.is_empty() || path == "." { String::new() } else { format!("{path}: ") };
                ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "invalid_request",
                    format!("{at}{inner}; see docs/protocol.md for the fields of this request"),
                )
            }
            _ => malformed(&inner),
        }
    })?;
    de.end().map_err(|e| malformed(&e))?;
    if spells_nul(bytes) {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_request",
            "a string of the body holds a NUL character (\\u0000), which no store keeps in text; remove it",
        ));
    }
    Ok(value)
}

/// Whether the JSON text `bytes` spells a NUL character: `\u0000` is the only way JSON can
/// (a raw control character in a string is not JSON). Every backslash starts an escape, so
/// `\\u0000` (a backslash, then the text `u0000`) is not one.
fn spells_nul(bytes: &[u8]) -> bool {
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            if bytes[i + 1..].starts_with(b"u0000") {
                return true;
            }
            i += 2;
        } else {
            i += 1;
        }
    }
    false
}

fn malformed(e: &serde_json::Error) -> ApiError {
    ApiError::bad_request("malformed_json", format!("the body is not valid JSON ({e}); send one JSON object"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbiter_runner::coordinator::Verdict;
    use arbiter_store::plans::Retry;
    use arbiter_wire::work_api::WireVerdict;

    /// An agent's reason with a NUL character travels written out: the server, which refuses
    /// a NUL anywhere in a request, takes the report.
    #[test]
    fn a_reason_with_a_nul_character_travels_written_out() {
        let verdict = Verdict::Failed { reason: "exit 1: a\0b".into(), retry: Retry::Never, run_id: None };
        let wire = WireVerdict::new(&verdict);
        let text = serde_json::to_string(&wire).unwrap();
        assert!(!text.contains("\\u0000"), "{text}");
        let back: WireVerdict = parse_json(text.as_bytes()).unwrap();
        assert!(matches!(back, WireVerdict::Failed { reason, .. } if reason == "exit 1: a\\u{0}b"));
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Req {
        name: String,
        slots: u32,
    }

    #[test]
    fn json_errors_name_the_field_and_the_fix() {
        let e = parse_json::<Req>(br#"{"name": "a", "slots": 1, "nmae": 2}"#).unwrap_err();
        assert_eq!((e.status, e.code), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_request"));
        assert!(e.message.contains("nmae"), "{}", e.message);
        let e = parse_json::<Req>(br#"{"name": "a", "slots": -1}"#).unwrap_err();
        assert!(e.message.starts_with("slots: "), "{}", e.message);
        let e = parse_json::<Req>(br#"{"name": "a", "#).unwrap_err();
        assert_eq!((e.status, e.code), (StatusCode::BAD_REQUEST, "malformed_json"));
        let e = parse_json::<Req>(br#"{"name": "a", "slots": 1} x"#).unwrap_err();
        assert_eq!(e.code, "malformed_json");
        assert!(parse_json::<Req>(br#"{"name": "a", "slots": 1}"#).is_ok());
    }

    #[test]
    fn a_nul_character_is_refused_with_what_to_do_and_a_backslash_text_is_not_one() {
        let e = parse_json::<Req>(br#"{"name": "a\u0000b", "slots": 1}"#).unwrap_err();
        assert_eq!((e.status, e.code), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_request"));
        assert!(e.message.contains("NUL") && e.message.contains("remove it"), "{}", e.message);
        // The text `\u0000` (an escaped backslash, then u0000) is no NUL.
        let req = parse_json::<Req>(br#"{"name": "a\\u0000b", "slots": 1}"#).unwrap();
        assert_eq!(req.name, "a\\u0000b");
        assert!(parse_json::<Req>(br#"{"name": "a\\\u0000", "slots": 1}"#).is_err());
    }
}
