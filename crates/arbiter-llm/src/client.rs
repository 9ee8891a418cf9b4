//! The HTTP side of a chat call (`LlmClient`): one shared `reqwest` client, the per-attempt
//! timeout, retries with exponential backoff and jitter (honouring `Retry-After`), the
//! per-endpoint concurrency limit shared by every clone, streamed reading, and redaction of
//! the endpoint's key from every error.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use arbiter_core::redact::Redactor;
use futures_util::StreamExt;
use reqwest::header::HeaderMap;
use tokio::sync::Semaphore;

use crate::error::LlmError;
use crate::sse::SseDecoder;
use crate::types::{ChatRequest, ChatResponse, Endpoint, Provider};
use crate::wire::{Completion, WireError, shorten};
use crate::{anthropic, openai};

/// How failed attempts are retried.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (at least 1).
    pub max_attempts: u32,
    /// The delay after the first failure; doubled after each further one.
    pub base_delay: Duration,
    /// The longest backoff delay.
    pub max_backoff: Duration,
    /// The longest delay a `Retry-After` header may impose.
    pub retry_after_cap: Duration,
    /// Randomize each backoff delay between half and all of its value.
    pub jitter: bool,
}

impl Default for RetryPolicy {
    /// 4 attempts, 500 ms doubling up to 30 s with jitter, `Retry-After` capped at 60 s.
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 4,
            base_delay: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            retry_after_cap: Duration::from_secs(60),
            jitter: true,
        }
    }
}

impl RetryPolicy {
    /// The delay before the attempt that follows failed attempt number `failed_attempt`
    /// (1-based). `Retry-After` wins when present (capped); otherwise exponential backoff,
    /// scaled into `[1/2, 1]` of its value by `unit` (in `[0, 1]`) when jitter is on.
    pub fn delay(&self, failed_attempt: u32, retry_after: Option<Duration>, unit: f64) -> Duration {
        if let Some(asked) = retry_after {
            return asked.min(self.retry_after_cap);
        }
        let exponent = failed_attempt.saturating_sub(1).min(31);
        let backoff = self.base_delay.saturating_mul(1u32 << exponent).min(self.max_backoff);
        if self.jitter { backoff.mul_f64(0.5 + 0.5 * unit.clamp(0.0, 1.0)) } else { backoff }
    }
}

/// A retry about to happen, for logs and progress displays.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryNotice {
    pub endpoint: String,
    /// The attempt that failed (1-based).
    pub attempt: u32,
    /// How long the client waits before the next attempt.
    pub delay: Duration,
    /// The failure, redacted.
    pub reason: String,
}

type RetryHook = Arc<dyn Fn(&RetryNotice) + Send + Sync>;
type Limits = Arc<Mutex<HashMap<String, (u32, Arc<Semaphore>)>>>;

/// A chat client. Cheap to clone; clones share the connection pool and the per-endpoint
/// concurrency limits.
#[derive(Clone)]
pub struct LlmClient {
    http: reqwest::Client,
    retry: RetryPolicy,
    limits: Limits,
    on_retry: Option<RetryHook>,
}

impl fmt::Debug for LlmClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LlmClient").field("retry", &self.retry).finish_non_exhaustive()
    }
}

/// The longest error body read from a provider.
const MAX_ERROR_BODY: usize = 64 * 1024;

impl LlmClient {
    /// A client with the default retry policy. Installs the `ring` TLS provider for the
    /// process if no provider is installed yet.
    pub fn new() -> Result<Self, LlmError> {
        // Fails only when a provider is already installed, which is just as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .user_agent(concat!("arbiter-llm/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(15))
            .build()
            .map_err(|e| LlmError::Client(error_chain(&e)))?;
        Ok(LlmClient { http, retry: RetryPolicy::default(), limits: Limits::default(), on_retry: None })
    }

    /// Replaces the retry policy (tests use short delays).
    pub fn with_retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// Calls `hook` before every retry delay.
    pub fn on_retry(mut self, hook: impl Fn(&RetryNotice) + Send + Sync + 'static) -> Self {
        self.on_retry = Some(Arc::new(hook));
        self
    }

    pub fn retry_policy(&self) -> &RetryPolicy {
        &self.retry
    }

    /// Sends `request` to `endpoint`, retrying 408/429/5xx and broken connections, and
    /// returns the answer. An answer with neither text nor tool calls is
    /// [`LlmError::Empty`]; tool arguments that are not a JSON object are
    /// [`LlmError::Malformed`].
    pub async fn chat(&self, endpoint: &Endpoint, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let redactor = Redactor::new(endpoint.api_key.clone());
        check_endpoint(endpoint)?;
        let limiter = self.limiter(endpoint)?;
        let started = Instant::now();
        let max_attempts = self.retry.max_attempts.max(1);
        let mut attempt = 1;
        loop {
            let result = {
                let _permit = limiter.acquire().await.map_err(|_| LlmError::Config {
                    endpoint: endpoint.name.clone(),
                    message: "its concurrency limiter was closed".into(),
                })?;
                match tokio::time::timeout(endpoint.timeout, self.attempt(endpoint, request)).await {
                    Ok(result) => result,
                    Err(_) => Err(LlmError::Timeout { endpoint: endpoint.name.clone(), after: endpoint.timeout }),
                }
            };
            let error = match result {
                Ok(completion) => return accept(endpoint, completion, started.elapsed(), attempt),
                Err(error) => redact_error(error, &redactor),
            };
            if !error.is_retryable() || attempt >= max_attempts {
                return Err(error);
            }
            let delay = self.retry.delay(attempt, error.retry_after(), jitter_unit());
            if let Some(hook) = &self.on_retry {
                hook(&RetryNotice { endpoint: endpoint.name.clone(), attempt, delay, reason: error.to_string() });
            }
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }

    /// Takes one of `endpoint`'s `max_parallel` places until the permit is dropped, for a
    /// caller that talks to the endpoint itself (an agent CLI on a backend): it and the
    /// calls made through this client stay within the limit together.
    pub async fn hold(&self, endpoint: &Endpoint) -> Result<tokio::sync::OwnedSemaphorePermit, LlmError> {
        self.limiter(endpoint)?.acquire_owned().await.map_err(|_| LlmError::Config {
            endpoint: endpoint.name.clone(),
            message: "its concurrency limit was closed".into(),
        })
    }

    fn limiter(&self, endpoint: &Endpoint) -> Result<Arc<Semaphore>, LlmError> {
        let permits = endpoint.max_parallel;
        if permits == 0 {
            return Err(LlmError::Config {
                endpoint: endpoint.name.clone(),
                message: "max_parallel is 0; set it to 1 or more".into(),
            });
        }
        let mut limits = self.limits.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = limits
            .entry(endpoint.name.clone())
            .or_insert_with(|| (permits, Arc::new(Semaphore::new(permits as usize))));
        if entry.0 != permits {
            // The endpoint was reconfigured: later calls use the new limit.
            *entry = (permits, Arc::new(Semaphore::new(permits as usize)));
        }
        Ok(entry.1.clone())
    }

    async fn attempt(&self, endpoint: &Endpoint, request: &ChatRequest) -> Result<Completion, LlmError> {
        let name = endpoint.name.as_str();
        let (body, headers) = match endpoint.provider {
            Provider::Anthropic => {
                (anthropic::build_body(endpoint, request, endpoint.stream), anthropic::headers(endpoint))
            }
            Provider::OpenAi | Provider::OpenAiCompatible => {
                (openai::build_body(endpoint, request, endpoint.stream), openai::headers(endpoint))
            }
        };
        let body = serde_json::to_vec(&body).map_err(|e| LlmError::Malformed {
            endpoint: name.into(),
            message: format!("request not encodable: {e}"),
        })?;
        let mut builder = self.http.post(endpoint.chat_url()).timeout(endpoint.timeout).body(body);
        for (header, value) in headers {
            builder = builder.header(header, value);
        }
        let response = builder.send().await.map_err(|e| transport_error(endpoint, &e))?;
        let status = response.status();
        if !status.is_success() {
            let retry_after = retry_after(response.headers());
            let body = read_capped(response, MAX_ERROR_BODY).await;
            return Err(LlmError::Status {
                endpoint: name.into(),
                status: status.as_u16(),
                message: provider_message(&body),
                retry_after,
            });
        }
        let is_json = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().starts_with("application/json"));
        if endpoint.stream && !is_json {
            return read_stream(endpoint, response).await;
        }
        let bytes = response.bytes().await.map_err(|e| transport_error(endpoint, &e))?;
        let value: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| LlmError::Malformed {
            endpoint: name.into(),
            message: format!("the body is not JSON ({e}): {}", shorten(&String::from_utf8_lossy(&bytes), 200)),
        })?;
        match endpoint.provider {
            Provider::Anthropic => anthropic::parse_body(&value),
            Provider::OpenAi | Provider::OpenAiCompatible => openai::parse_body(&value),
        }
        .map_err(|e| e.at(name))
    }
}

enum StreamParser {
    OpenAi(openai::StreamParser),
    Anthropic(anthropic::StreamParser),
}

impl StreamParser {
    fn on_event(&mut self, event: &crate::sse::SseEvent) -> Result<(), WireError> {
        match self {
            StreamParser::OpenAi(p) => p.on_event(event),
            StreamParser::Anthropic(p) => p.on_event(event),
        }
    }

    fn is_done(&self) -> bool {
        match self {
            StreamParser::OpenAi(p) => p.is_done(),
            StreamParser::Anthropic(p) => p.is_done(),
        }
    }

    fn finish(self) -> Result<Completion, WireError> {
        match self {
            StreamParser::OpenAi(p) => p.finish(),
            StreamParser::Anthropic(p) => p.finish(),
        }
    }
}

async fn read_stream(endpoint: &Endpoint, response: reqwest::Response) -> Result<Completion, LlmError> {
    let name = endpoint.name.as_str();
    let mut parser = match endpoint.provider {
        Provider::Anthropic => StreamParser::Anthropic(anthropic::StreamParser::new()),
        Provider::OpenAi | Provider::OpenAiCompatible => StreamParser::OpenAi(openai::StreamParser::new()),
    };
    let mut decoder = SseDecoder::new();
    let mut stream = response.bytes_stream();
    'read: while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| transport_error(endpoint, &e))?;
        let events =
            decoder.push(&chunk).map_err(|e| LlmError::Malformed { endpoint: name.into(), message: e.to_string() })?;
        for event in events {
            parser.on_event(&event).map_err(|e| e.at(name))?;
            if parser.is_done() {
                break 'read;
            }
        }
    }
    if !parser.is_done()
        && let Some(event) = decoder.finish()
    {
        parser.on_event(&event).map_err(|e| e.at(name))?;
    }
    parser.finish().map_err(|e| e.at(name))
}

fn check_endpoint(endpoint: &Endpoint) -> Result<(), LlmError> {
    let problem = if endpoint.base_url.trim().is_empty() {
        Some("it has no base_url; set one such as http://127.0.0.1:8000/v1".to_string())
    } else if !(endpoint.base_url.starts_with("http://") || endpoint.base_url.starts_with("https://")) {
        Some(format!("its base_url '{}' is not an http:// or https:// URL", endpoint.base_url))
    } else if endpoint.model.trim().is_empty() {
        Some("it names no model; set its model".to_string())
    } else {
        None
    };
    match problem {
        Some(message) => Err(LlmError::Config { endpoint: endpoint.name.clone(), message }),
        None => Ok(()),
    }
}

/// Turns a parsed answer into the response, refusing an empty one.
fn accept(
    endpoint: &Endpoint,
    completion: Completion,
    latency: Duration,
    attempts: u32,
) -> Result<ChatResponse, LlmError> {
    let response = completion.into_response(latency, attempts);
    if response.is_empty() {
        return Err(LlmError::Empty {
            endpoint: endpoint.name.clone(),
            stop_reason: response.stop_reason,
            usage: response.usage,
        });
    }
    Ok(response)
}

fn transport_error(endpoint: &Endpoint, error: &reqwest::Error) -> LlmError {
    if error.is_timeout() {
        LlmError::Timeout { endpoint: endpoint.name.clone(), after: endpoint.timeout }
    } else {
        LlmError::Connection { endpoint: endpoint.name.clone(), message: error_chain(error) }
    }
}

/// The error and its sources, `a: b: c`.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(s) = source {
        let next = s.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = s.source();
    }
    text
}

/// `Retry-After` in seconds (HTTP dates are ignored), or `retry-after-ms`.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return Duration::try_from_secs_f64(ms / 1000.0).ok();
    }
    header("retry-after").and_then(|v| v.parse::<f64>().ok()).and_then(|s| Duration::try_from_secs_f64(s).ok())
}

async fn read_capped(mut response: reqwest::Response, cap: usize) -> String {
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        body.extend_from_slice(&chunk);
        if body.len() >= cap {
            body.truncate(cap);
            break;
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

/// The provider's message from an error body (`{"error":{"message"}}` in both formats),
/// else the body itself, shortened.
fn provider_message(body: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let message = parsed.as_ref().and_then(|v| {
        let error = v.get("error")?;
        error.get("message").and_then(|m| m.as_str()).map(str::to_string).or_else(|| error.as_str().map(str::to_string))
    });
    let message = message.unwrap_or_else(|| body.trim().to_string());
    if message.is_empty() { "(no message)".into() } else { shorten(&message, 500) }
}

/// Removes the key from every text of the error.
fn redact_error(error: LlmError, redactor: &Redactor) -> LlmError {
    let r = |s: String| redactor.redact(&s);
    match error {
        LlmError::Config { endpoint, message } => LlmError::Config { endpoint, message: r(message) },
        LlmError::Client(message) => LlmError::Client(r(message)),
        LlmError::Status { endpoint, status, message, retry_after } => {
            LlmError::Status { endpoint, status, message: r(message), retry_after }
        }
        LlmError::Connection { endpoint, message } => LlmError::Connection { endpoint, message: r(message) },
        LlmError::Malformed { endpoint, message } => LlmError::Malformed { endpoint, message: r(message) },
        LlmError::Stream { endpoint, kind, message } => {
            LlmError::Stream { endpoint, kind: r(kind), message: r(message) }
        }
        other @ (LlmError::Timeout { .. } | LlmError::Empty { .. }) => other,
    }
}

/// A number in `[0, 1)` that differs from call to call (good enough for jitter).
fn jitter_unit() -> f64 {
    use std::hash::BuildHasher;
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let bits = std::collections::hash_map::RandomState::new().hash_one(nanos);
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_is_capped_and_honours_retry_after() {
        let p = RetryPolicy { jitter: false, ..RetryPolicy::default() };
        assert_eq!(p.delay(1, None, 0.0), Duration::from_millis(500));
        assert_eq!(p.delay(2, None, 0.0), Duration::from_millis(1000));
        assert_eq!(p.delay(3, None, 0.0), Duration::from_millis(2000));
        assert_eq!(p.delay(40, None, 0.0), Duration::from_secs(30));
        assert_eq!(p.delay(1, Some(Duration::from_secs(7)), 0.0), Duration::from_secs(7));
        assert_eq!(p.delay(1, Some(Duration::from_secs(600)), 0.0), Duration::from_secs(60));
        let j = RetryPolicy::default();
        assert_eq!(j.delay(2, None, 0.0), Duration::from_millis(500));
        assert_eq!(j.delay(2, None, 1.0), Duration::from_millis(1000));
        let u = jitter_unit();
        assert!((0.0..1.0).contains(&u));
    }

    #[test]
    fn calls_can_be_spawned() {
        fn assert_send<T: Send + 'static>(_: T) {}
        let client = LlmClient::new().unwrap();
        let endpoint = Endpoint::new("e", Provider::OpenAi, "m");
        assert_send(async move { client.chat(&endpoint, &ChatRequest::user("hi")).await });
        let client = LlmClient::new().unwrap();
        assert_send(
            async move { crate::chain::chat_with_fallback(&client, &[], &ChatRequest::user("hi"), |_| {}).await },
        );
    }

    #[test]
    fn retry_after_headers_parse() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after", "3".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(3)));
        h.insert("retry-after-ms", "250".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_millis(250)));
        let mut h = HeaderMap::new();
        h.insert("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap());
        assert_eq!(retry_after(&h), None);
    }

    #[test]
    fn provider_messages_are_extracted() {
        assert_eq!(provider_message(r#"{"error":{"message":"slow down","type":"rate_limit"}}"#), "slow down");
        assert_eq!(provider_message(r#"{"type":"error","error":{"type":"x","message":"busy"}}"#), "busy");
        assert_eq!(provider_message("  plain text "), "plain text");
        assert_eq!(provider_message(""), "(no message)");
    }

    #[test]
    fn errors_lose_the_key() {
        let redactor = Redactor::new(Some("key-abcdef123456".to_string()));
        let e = LlmError::Status {
            endpoint: "a".into(),
            status: 401,
            message: "bad key key-abcdef123456".into(),
            retry_after: None,
        };
        assert!(!redact_error(e, &redactor).to_string().contains("abcdef123456"));
    }
}
