//! arbiter-llm: calls to language models over HTTP, for the parts of arbiter that talk to a
//! model themselves (judges, summaries, built-in agents).
//!
//! Map:
//! - [`types`]: endpoints, providers, requests, responses, tool calls, usage.
//! - [`openai`] and [`anthropic`]: the two wire formats, request bodies and streamed or
//!   whole answers.
//! - [`sse`]: the byte-level Server-Sent Events decoder both streams go through.
//! - [`client`]: [`LlmClient::chat`] with timeouts, retries and per-endpoint concurrency.
//! - [`chain`]: [`chat_with_fallback`] over a list of endpoints.
//! - [`cost`]: [`call_record`], the exact cost record of one call.
//! - [`error`]: [`LlmError`], what went wrong and whether to retry.
//! - [`wire`]: what the two formats share.
//! - [`mock`]: [`MockServer`], a scriptable local server speaking both formats, for tests
//!   and demos.
//!
//! API keys travel only in request headers; they are never put in URLs, errors or logs.

#![forbid(unsafe_code)]

pub mod anthropic;
pub mod chain;
pub mod client;
pub mod cost;
pub mod error;
pub mod mock;
pub mod openai;
pub mod sse;
pub mod types;
pub mod wire;

pub use chain::{ChainError, EndpointFailure, Fallback, chat_with_fallback};
pub use client::{LlmClient, RetryNotice, RetryPolicy};
pub use cost::call_record;
pub use error::LlmError;
pub use mock::{MockMatch, MockResponse, MockScript, MockScriptError, MockServer, MockToolCall, RecordedRequest};
pub use types::{
    ChatRequest, ChatResponse, Endpoint, Message, Provider, StopReason, ToolCall, ToolSpec, UnknownProvider, Usage,
};
