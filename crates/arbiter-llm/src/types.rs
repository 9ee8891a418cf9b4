//! The provider-neutral vocabulary of a chat call: which endpoint to call (`Endpoint`,
//! `Provider`), what to send (`ChatRequest`, `Message`, `ToolSpec`) and what came back
//! (`ChatResponse`, `ToolCall`, `StopReason`, `Usage`). The wire formats live in
//! [`crate::openai`] and [`crate::anthropic`].

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use arbiter_core::money::Usd;
use serde::{Deserialize, Serialize};

/// The wire protocol an endpoint speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Provider {
    /// Any server that speaks OpenAI Chat Completions (vLLM, llama.cpp, Ollama, LiteLLM, …);
    /// sends `max_tokens`. Has no default base URL.
    OpenAiCompatible,
    /// api.openai.com; sends `max_completion_tokens`.
    OpenAi,
    /// The Anthropic Messages API.
    Anthropic,
}

impl Provider {
    /// The name used in configuration files (`openai-compatible`, `openai`, `anthropic`).
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::OpenAiCompatible => "openai-compatible",
            Provider::OpenAi => "openai",
            Provider::Anthropic => "anthropic",
        }
    }

    /// The public base URL of the provider; `None` for `openai-compatible`, which must be
    /// given one.
    pub fn default_base_url(self) -> Option<&'static str> {
        match self {
            Provider::OpenAiCompatible => None,
            Provider::OpenAi => Some("https://api.openai.com/v1"),
            Provider::Anthropic => Some("https://api.anthropic.com"),
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A provider name that is not one of the known ones.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown LLM provider '{0}': use one of openai-compatible, openai, anthropic")]
pub struct UnknownProvider(pub String);

impl FromStr for Provider {
    type Err = UnknownProvider;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "openai-compatible" => Ok(Provider::OpenAiCompatible),
            "openai" => Ok(Provider::OpenAi),
            "anthropic" => Ok(Provider::Anthropic),
            _ => Err(UnknownProvider(s.to_string())),
        }
    }
}

/// One configured model endpoint.
///
/// `Debug` never shows the API key.
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The name it is configured under; also the key of its concurrency limit.
    pub name: String,
    pub provider: Provider,
    pub model: String,
    /// `http://host:port/v1` for OpenAI-style endpoints (`/chat/completions` is appended),
    /// `http://host:port` for Anthropic (`/v1/messages` is appended).
    pub base_url: String,
    /// Sent only in a header (`Authorization: Bearer` or `x-api-key`), never in a URL.
    pub api_key: Option<String>,
    /// Default output limit when the request does not set one.
    pub max_tokens: u32,
    /// Limit of one attempt, from sending the request to the end of the response.
    pub timeout: Duration,
    /// Requests in flight at once to this endpoint, across every clone of an `LlmClient`.
    pub max_parallel: u32,
    /// USD per million input tokens.
    pub input_price: Option<Usd>,
    /// USD per million output tokens.
    pub output_price: Option<Usd>,
    /// Ask for a streamed response (the default) or a single JSON body.
    pub stream: bool,
}

impl Endpoint {
    pub const DEFAULT_MAX_TOKENS: u32 = 4096;
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
    pub const DEFAULT_MAX_PARALLEL: u32 = 4;

    /// An endpoint with the provider's default base URL (empty for `openai-compatible`),
    /// no key, no prices, streaming, and the default limits.
    pub fn new(name: impl Into<String>, provider: Provider, model: impl Into<String>) -> Self {
        Endpoint {
            name: name.into(),
            provider,
            model: model.into(),
            base_url: provider.default_base_url().unwrap_or_default().to_string(),
            api_key: None,
            max_tokens: Self::DEFAULT_MAX_TOKENS,
            timeout: Self::DEFAULT_TIMEOUT,
            max_parallel: Self::DEFAULT_MAX_PARALLEL,
            input_price: None,
            output_price: None,
            stream: true,
        }
    }

    pub fn with_base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = base_url.into();
        self
    }

    pub fn with_api_key(mut self, api_key: impl Into<String>) -> Self {
        self.api_key = Some(api_key.into());
        self
    }

    /// Prices in USD per million input and output tokens.
    pub fn with_prices(mut self, input: Usd, output: Usd) -> Self {
        self.input_price = Some(input);
        self.output_price = Some(output);
        self
    }

    /// The URL the chat request is posted to.
    pub fn chat_url(&self) -> String {
        let base = self.base_url.trim_end_matches('/');
        match self.provider {
            Provider::Anthropic => format!("{base}/v1/messages"),
            Provider::OpenAi | Provider::OpenAiCompatible => format!("{base}/chat/completions"),
        }
    }
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("name", &self.name)
            .field("provider", &self.provider)
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "[REDACTED]"))
            .field("max_tokens", &self.max_tokens)
            .field("timeout", &self.timeout)
            .field("max_parallel", &self.max_parallel)
            .field("input_price", &self.input_price)
            .field("output_price", &self.output_price)
            .field("stream", &self.stream)
            .finish()
    }
}

/// A tool the model may call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: serde_json::Value,
}

/// A tool call the model made.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// Always a JSON object (an empty argument string becomes `{}`).
    pub arguments: serde_json::Value,
}

/// One turn of the conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", content = "content", rename_all = "snake_case")]
pub enum Message {
    User(String),
    Assistant { text: String, tool_calls: Vec<ToolCall> },
    ToolResult { tool_call_id: String, content: String, is_error: bool },
}

impl Message {
    pub fn user(text: impl Into<String>) -> Self {
        Message::User(text.into())
    }

    /// The assistant turn that produced `response`, for continuing the conversation.
    pub fn from_response(response: &ChatResponse) -> Self {
        Message::Assistant { text: response.text.clone(), tool_calls: response.tool_calls.clone() }
    }
}

/// What to ask.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    pub system: Option<String>,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
    pub temperature: Option<f32>,
    /// Overrides `Endpoint::max_tokens`.
    pub max_tokens: Option<u32>,
}

impl ChatRequest {
    /// A request with one user message.
    pub fn user(text: impl Into<String>) -> Self {
        ChatRequest { messages: vec![Message::user(text)], ..Default::default() }
    }
}

/// Why the model stopped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    ToolUse,
    MaxTokens,
    /// The provider's own word for any other reason (`content_filter`, `stop_sequence`, …).
    Other(String),
}

/// Token counts of one call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    /// Every prompt token, cached ones included.
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    /// The part of `input_tokens` read from the provider's prompt cache.
    #[serde(default)]
    pub cached_tokens: u64,
}

/// What came back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub stop_reason: StopReason,
    /// `None` when the provider reported no usage.
    pub usage: Option<Usage>,
    /// Wall time of the whole call, retries and their delays included.
    pub latency: Duration,
    /// HTTP attempts made (1 when the first one succeeded).
    pub attempts: u32,
}

impl ChatResponse {
    /// No text (beyond whitespace) and no tool call.
    pub fn is_empty(&self) -> bool {
        self.text.trim().is_empty() && self.tool_calls.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn providers_parse_and_have_base_urls() {
        assert_eq!("openai-compatible".parse::<Provider>(), Ok(Provider::OpenAiCompatible));
        assert_eq!("OpenAI".parse::<Provider>(), Ok(Provider::OpenAi));
        assert_eq!("anthropic".parse::<Provider>(), Ok(Provider::Anthropic));
        let err = "gemini".parse::<Provider>().unwrap_err().to_string();
        assert!(err.contains("gemini") && err.contains("openai-compatible"), "{err}");
        let e = Endpoint::new("a", Provider::Anthropic, "claude");
        assert_eq!(e.chat_url(), "https://api.anthropic.com/v1/messages");
        let e = Endpoint::new("o", Provider::OpenAi, "gpt").with_base_url("http://127.0.0.1:9/v1/");
        assert_eq!(e.chat_url(), "http://127.0.0.1:9/v1/chat/completions");
        assert_eq!(Endpoint::new("c", Provider::OpenAiCompatible, "m").base_url, "");
    }

    #[test]
    fn debug_hides_the_key() {
        let e = Endpoint::new("a", Provider::OpenAi, "m").with_api_key("sk-very-secret-value");
        let shown = format!("{e:?}");
        assert!(!shown.contains("very-secret"), "{shown}");
        assert!(shown.contains("[REDACTED]"));
    }
}
