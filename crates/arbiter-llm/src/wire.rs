//! What the provider modules share: the parsed answer before timing is added
//! (`Completion`), the provider-neutral parse failure (`WireError`), and small helpers
//! (tool-argument parsing, shortening of provider text).

use crate::error::LlmError;
use crate::types::{ChatResponse, StopReason, ToolCall, Usage};

/// A parsed answer of one attempt.
#[derive(Clone, Debug, PartialEq)]
pub struct Completion {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub stop_reason: StopReason,
    pub usage: Option<Usage>,
}

impl Completion {
    pub fn into_response(self, latency: std::time::Duration, attempts: u32) -> ChatResponse {
        ChatResponse {
            text: self.text,
            tool_calls: self.tool_calls,
            stop_reason: self.stop_reason,
            usage: self.usage,
            latency,
            attempts,
        }
    }
}

/// Why a response body could not be turned into a `Completion`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The body is not what the protocol says it should be.
    #[error("{0}")]
    Malformed(String),
    /// The provider sent an error event inside the stream.
    #[error("{kind}: {message}")]
    Provider { kind: String, message: String },
    /// The stream ended before the answer was complete.
    #[error("{0}")]
    Truncated(String),
}

impl WireError {
    /// Attaches the endpoint name.
    pub fn at(self, endpoint: &str) -> LlmError {
        let endpoint = endpoint.to_string();
        match self {
            WireError::Malformed(message) => LlmError::Malformed { endpoint, message },
            WireError::Provider { kind, message } => LlmError::Stream { endpoint, kind, message },
            WireError::Truncated(message) => LlmError::Connection { endpoint, message },
        }
    }
}

/// Parses accumulated tool-call arguments: empty means `{}`, anything else must be a JSON
/// object.
pub fn parse_arguments(name: &str, id: &str, raw: &str) -> Result<serde_json::Value, WireError> {
    if raw.trim().is_empty() {
        return Ok(serde_json::Value::Object(Default::default()));
    }
    let value: serde_json::Value = serde_json::from_str(raw).map_err(|e| {
        WireError::Malformed(format!(
            "the arguments of tool call '{name}' ({id}) are not valid JSON ({e}): {}",
            shorten(raw, 200)
        ))
    })?;
    check_arguments(name, id, value)
}

/// Tool arguments must be a JSON object.
pub fn check_arguments(name: &str, id: &str, value: serde_json::Value) -> Result<serde_json::Value, WireError> {
    if name.trim().is_empty() {
        return Err(WireError::Malformed(format!("tool call {id} has no tool name")));
    }
    if value.is_object() {
        Ok(value)
    } else {
        Err(WireError::Malformed(format!(
            "the arguments of tool call '{name}' ({id}) are not a JSON object: {}",
            shorten(&value.to_string(), 200)
        )))
    }
}

/// At most `max` characters of `text`, with `…` when cut.
pub fn shorten(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// A JSON number as `u64` (0 when absent or not a number).
pub(crate) fn count(value: Option<&serde_json::Value>) -> u64 {
    value.and_then(serde_json::Value::as_u64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_must_be_json_objects() {
        assert_eq!(parse_arguments("t", "1", " ").unwrap(), serde_json::json!({}));
        assert_eq!(parse_arguments("t", "1", "{\"a\":1}").unwrap(), serde_json::json!({"a":1}));
        let e = parse_arguments("t", "1", "{\"a\":").unwrap_err().to_string();
        assert!(e.contains("not valid JSON") && e.contains("'t'"), "{e}");
        assert!(parse_arguments("t", "1", "[1]").is_err());
        assert!(parse_arguments("", "1", "{}").is_err());
        assert_eq!(shorten("héllo", 2), "hé…");
        assert_eq!(shorten("hé", 2), "hé");
    }
}
