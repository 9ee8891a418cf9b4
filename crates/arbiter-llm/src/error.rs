//! The errors of a chat call (`LlmError`): what went wrong, at which endpoint, and what to
//! do about it; plus which of them are worth retrying. Messages never contain an API key:
//! provider text is redacted before it is stored here.

use std::time::Duration;

use crate::types::{StopReason, Usage};

/// Why a chat call failed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum LlmError {
    /// The endpoint's configuration cannot work (no base URL, `max_parallel` 0, …).
    #[error("endpoint '{endpoint}' is misconfigured: {message}")]
    Config { endpoint: String, message: String },

    /// The HTTP client could not be built.
    #[error("could not set up the HTTP client: {0}; check the system's TLS certificates")]
    Client(String),

    /// The provider answered with a non-success status.
    #[error("endpoint '{endpoint}' answered HTTP {status}: {message} ({hint})", hint = status_hint(*.status))]
    Status {
        endpoint: String,
        status: u16,
        /// The provider's message, redacted and shortened.
        message: String,
        /// The `Retry-After` the provider asked for, if any.
        retry_after: Option<Duration>,
    },

    /// An attempt did not finish within the endpoint's timeout.
    #[error(
        "endpoint '{endpoint}' did not answer within {secs:.1} s; raise its timeout or ask for less output",
        secs = .after.as_secs_f64()
    )]
    Timeout { endpoint: String, after: Duration },

    /// The connection failed or broke before the answer was complete.
    #[error("could not talk to endpoint '{endpoint}': {message}; check its base_url and that the server is up")]
    Connection { endpoint: String, message: String },

    /// The answer arrived but cannot be used (bad JSON, tool arguments that are not JSON, …).
    #[error("endpoint '{endpoint}' sent an unusable answer: {message}; try again or use another model")]
    Malformed { endpoint: String, message: String },

    /// The provider reported an error in the middle of a streamed answer.
    #[error("endpoint '{endpoint}' failed mid-answer ({kind}): {message}; retry later or use a fallback endpoint")]
    Stream { endpoint: String, kind: String, message: String },

    /// The model answered with neither text nor a tool call.
    #[error(
        "endpoint '{endpoint}' answered with no text and no tool call (stop reason {stop_reason:?}); \
         rephrase the request or use another model"
    )]
    Empty { endpoint: String, stop_reason: StopReason, usage: Option<Usage> },
}

fn status_hint(status: u16) -> &'static str {
    match status {
        401 | 403 => "check the endpoint's API key and its permissions",
        404 => "check the endpoint's base_url and model name",
        400 | 413 | 422 => "the provider rejected the request; check the model name, max_tokens and the request size",
        408 | 429 => "rate limited or overloaded; lower max_parallel or retry later",
        500..=599 => "the provider failed; retry later or configure a fallback endpoint",
        _ => "unexpected status; check the endpoint's base_url",
    }
}

impl LlmError {
    /// The endpoint the error is about, if any.
    pub fn endpoint(&self) -> Option<&str> {
        match self {
            LlmError::Config { endpoint, .. }
            | LlmError::Status { endpoint, .. }
            | LlmError::Timeout { endpoint, .. }
            | LlmError::Connection { endpoint, .. }
            | LlmError::Malformed { endpoint, .. }
            | LlmError::Stream { endpoint, .. }
            | LlmError::Empty { endpoint, .. } => Some(endpoint),
            LlmError::Client(_) => None,
        }
    }

    /// Worth another attempt: HTTP 408, 429 and 5xx, broken connections, and mid-stream
    /// overload or server errors. Timeouts are not retried (each would cost a full timeout).
    pub fn is_retryable(&self) -> bool {
        match self {
            LlmError::Status { status, .. } => matches!(status, 408 | 429 | 500..=599),
            LlmError::Connection { .. } => true,
            LlmError::Stream { kind, .. } => {
                matches!(kind.as_str(), "overloaded_error" | "api_error" | "rate_limit_error" | "server_error")
            }
            _ => false,
        }
    }

    /// The delay the provider asked for (`Retry-After`).
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            LlmError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// Usage reported by a call that failed after the model ran (an empty answer).
    pub fn usage(&self) -> Option<&Usage> {
        match self {
            LlmError::Empty { usage, .. } => usage.as_ref(),
            _ => None,
        }
    }

    /// A short label of the kind of failure, for events and summaries.
    pub fn kind(&self) -> &'static str {
        match self {
            LlmError::Config { .. } => "config",
            LlmError::Client(_) => "client",
            LlmError::Status { .. } => "http_status",
            LlmError::Timeout { .. } => "timeout",
            LlmError::Connection { .. } => "connection",
            LlmError::Malformed { .. } => "malformed",
            LlmError::Stream { .. } => "stream_error",
            LlmError::Empty { .. } => "empty",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_say_what_to_do() {
        let e = LlmError::Status { endpoint: "a".into(), status: 401, message: "bad key".into(), retry_after: None };
        assert_eq!(
            e.to_string(),
            "endpoint 'a' answered HTTP 401: bad key (check the endpoint's API key and its permissions)"
        );
        assert!(!e.is_retryable());
        let e = LlmError::Status { endpoint: "a".into(), status: 529, message: "x".into(), retry_after: None };
        assert!(e.is_retryable());
        let e = LlmError::Timeout { endpoint: "a".into(), after: Duration::from_millis(1500) };
        assert!(e.to_string().contains("1.5 s"), "{e}");
        assert!(!e.is_retryable());
    }
}
