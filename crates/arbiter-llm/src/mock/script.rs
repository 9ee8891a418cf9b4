//! The script format: what the mock answers, loaded from JSON or TOML.

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::types::Usage;

/// What the mock answers. Loaded from JSON or TOML.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MockScript {
    /// The default conversation: answers every request no entry of `conversations`
    /// matches.
    #[serde(default)]
    pub responses: Vec<MockResponse>,
    /// When set, chat requests must carry this key (`Authorization: Bearer` or
    /// `x-api-key`), else they get a 401 that does not consume a response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// The model ids `GET /v1/models` lists (default `["mock"]` and the models the
    /// conversations match).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
    /// How a conversation picks the response for a request: the next unused one
    /// (`queue`, the default) or by the request's own history (`history`).
    #[serde(default, skip_serializing_if = "MockTurns::is_queue")]
    pub turns: MockTurns,
    /// Conversations of their own, each for the requests its `match` fits (the first
    /// that fits answers; requests none fits go to `responses`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conversations: Vec<MockConversation>,
}

/// How a conversation picks the response for a request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MockTurns {
    /// The first unused response whose `match` fits, else the next unused one without a
    /// `match`; each is used once unless `repeat`. Stateful: one queue per conversation.
    #[default]
    Queue,
    /// Response *n* + 1 (faults not counted) answers a request whose own history holds
    /// *n* assistant turns the mock produced. Stateless, so parallel clients sharing one
    /// conversation each go through all its turns. Only a request whose last non-system
    /// message is a user message or a tool result is given a turn; a turn calling a tool
    /// the request does not declare is not served. Those requests are answered "OK".
    History,
}

impl MockTurns {
    fn is_queue(&self) -> bool {
        *self == MockTurns::Queue
    }
}

/// A conversation of its own: the requests its `match` fits get its responses.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MockConversation {
    #[serde(rename = "match", default)]
    pub matcher: MockConversationMatch,
    #[serde(default)]
    pub responses: Vec<MockResponse>,
}

/// Which requests a conversation answers; every field given must fit.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MockConversationMatch {
    /// The request's `model`, exactly (what the client's model flag sends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The request path, e.g. `/v1/responses`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// A substring of the request body as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contains: Option<String>,
}

impl MockConversationMatch {
    pub(super) fn fits(&self, path: &str, model: Option<&str>, body: &str) -> bool {
        self.model.as_ref().is_none_or(|m| Some(m.as_str()) == model)
            && self.path.as_ref().is_none_or(|p| p == path)
            && self.contains.as_ref().is_none_or(|c| body.contains(c.as_str()))
    }

    /// `model "fixer"`, `path "/v1/responses"`, … for messages.
    pub(super) fn describe(&self) -> String {
        let parts: Vec<String> = [("model", &self.model), ("path", &self.path), ("contains", &self.contains)]
            .into_iter()
            .filter_map(|(name, value)| value.as_ref().map(|v| format!("{name} {v:?}")))
            .collect();
        if parts.is_empty() { "anything".into() } else { parts.join(", ") }
    }
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
    /// Generated when absent: `call_N_K` / `toolu_N_K` (request N, call K) in queue mode,
    /// `call_mock_tT_rN_K` / `toolu_mock_tT_rN_K` (turn T) in history mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub name: String,
    /// A JSON object, sent as a JSON string; for a tool the request declares as custom
    /// (Responses API `"type": "custom"`), a string sent as the raw input.
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

    /// The raw input of a custom tool call: a string argument as it is.
    pub(super) fn custom_input(&self) -> String {
        match (&self.raw_arguments, &self.arguments) {
            (Some(raw), _) => raw.clone(),
            (None, Value::String(text)) => text.clone(),
            (None, other) => other.to_string(),
        }
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
        let script: MockScript = parsed.map_err(|message| MockScriptError::Parse { path: path.into(), message })?;
        script.check().map_err(|message| MockScriptError::Parse { path: path.into(), message })?;
        Ok(script)
    }

    /// What is inconsistent in the script, if anything: in history mode turns are chosen
    /// by position, so a response `match` has no meaning there.
    pub fn check(&self) -> Result<(), String> {
        if self.turns == MockTurns::History {
            let lists = std::iter::once(("the responses".to_string(), &self.responses)).chain(
                self.conversations.iter().enumerate().map(|(i, c)| (format!("conversation {}", i + 1), &c.responses)),
            );
            for (name, responses) in lists {
                if let Some(at) = responses.iter().position(|r| r.matcher.is_some()) {
                    return Err(format!(
                        "response {} of {name} has a `match`, but with `turns = \"history\"` turns are chosen by \
                         position; choose by model, path or body with `conversations` instead",
                        at + 1
                    ));
                }
            }
        }
        Ok(())
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

    /// A tool-call answer (no text).
    pub fn tool_call(name: impl Into<String>, arguments: Value) -> Self {
        MockResponse {
            tool_calls: vec![MockToolCall { name: name.into(), arguments, ..Default::default() }],
            ..Default::default()
        }
    }

    /// An HTTP error or a dropped connection rather than an answer.
    pub(super) fn is_fault(&self) -> bool {
        self.disconnect || self.status.is_some_and(|s| !(200..300).contains(&s))
    }
}
