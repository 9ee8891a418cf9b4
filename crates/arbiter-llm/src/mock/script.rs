//! The script format: what the mock answers, loaded from JSON or TOML.

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::types::Usage;

/// What the mock answers, in order. Loaded from JSON or TOML.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MockScript {
    #[serde(default)]
    pub responses: Vec<MockResponse>,
    /// When set, chat requests must carry this key (`Authorization: Bearer` or
    /// `x-api-key`), else they get a 401 that does not consume a response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// The model ids `GET /v1/models` lists (default `["mock"]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
}

/// One scripted answer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MockResponse {
    /// Used only for requests that match; unmatched responses serve the rest in order.
    #[serde(rename = "match", default, skip_serializing_if = "Option::is_none")]
    pub matcher: Option<MockMatch>,
    #[serde(default)]
    pub text: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<MockToolCall>,
    /// Reported usage; when absent, an estimate (bytes / 4) is reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Report no usage at all.
    #[serde(default)]
    pub omit_usage: bool,
    /// `end_turn`, `tool_use`, `max_tokens` or any other word (OpenAI streams get
    /// `stop`, `tool_calls`, `length`); by default `tool_use` when there are tool calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// Answer with this HTTP error status instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// `Retry-After` seconds sent with `status`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<u64>,
    /// The error message sent with `status`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// Never consumed: serves every request it is selected for.
    #[serde(default)]
    pub repeat: bool,
    /// Wait this long before answering.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    /// Write a streamed body in pieces of this many bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_chunk_bytes: Option<usize>,
    /// Close the connection without answering.
    #[serde(default)]
    pub disconnect: bool,
}

/// When a scripted response applies.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MockMatch {
    /// A substring of the request body as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contains: Option<String>,
    /// The request path, e.g. `/v1/messages`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// A scripted tool call.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MockToolCall {
    /// Generated (`call_N_K`, `toolu_N_K`) when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub name: String,
    #[serde(default = "empty_object")]
    pub arguments: Value,
    /// Sent verbatim instead of `arguments` (to script broken JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_arguments: Option<String>,
}

fn empty_object() -> Value {
    json!({})
}

impl MockToolCall {
    pub(super) fn arguments_text(&self) -> String {
        self.raw_arguments.clone().unwrap_or_else(|| self.arguments.to_string())
    }
}

/// A script file that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum MockScriptError {
    #[error("cannot read mock script {}: {source}; check the path", path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("mock script {} is not a valid script: {message}; see the MockScript format", path.display())]
    Parse { path: PathBuf, message: String },
}

impl MockScript {
    /// Loads a `.toml` file as TOML and anything else as JSON.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, MockScriptError> {
        let path = path.as_ref();
        let text =
            std::fs::read_to_string(path).map_err(|source| MockScriptError::Read { path: path.into(), source })?;
        let parsed = if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("toml")) {
            toml::from_str(&text).map_err(|e| e.to_string())
        } else {
            serde_json::from_str(&text).map_err(|e| e.to_string())
        };
        parsed.map_err(|message| MockScriptError::Parse { path: path.into(), message })
    }

    /// A script of these responses.
    pub fn new(responses: Vec<MockResponse>) -> Self {
        MockScript { responses, ..Default::default() }
    }
}

impl MockResponse {
    /// A plain text answer.
    pub fn text(text: impl Into<String>) -> Self {
        MockResponse { text: text.into(), ..Default::default() }
    }

    /// An HTTP error answer.
    pub fn error(status: u16, message: impl Into<String>) -> Self {
        MockResponse { status: Some(status), error_message: Some(message.into()), ..Default::default() }
    }
}
