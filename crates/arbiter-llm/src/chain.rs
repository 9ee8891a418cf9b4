//! Fallback chains (`chat_with_fallback`): endpoints tried in order, each once (with its
//! own retries inside [`LlmClient::chat`]), moving on after an error, an empty answer or
//! malformed tool calls, and reporting every move and every failure.

use std::fmt;

use crate::client::LlmClient;
use crate::error::LlmError;
use crate::types::{ChatRequest, ChatResponse, Endpoint};

/// The chain moved away from an endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fallback {
    /// The endpoint that failed.
    pub from: String,
    /// The endpoint tried next; `None` when none is left.
    pub to: Option<String>,
    /// Why it failed (redacted).
    pub reason: String,
}

/// One endpoint's failure within a chain.
#[derive(Clone, Debug, PartialEq)]
pub struct EndpointFailure {
    pub endpoint: String,
    pub error: LlmError,
}

/// Every endpoint of the chain failed (or there was none).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub struct ChainError {
    /// In the order the endpoints were tried.
    pub failures: Vec<EndpointFailure>,
}

impl fmt::Display for ChainError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.failures.is_empty() {
            return f.write_str("no LLM endpoint to call: configure at least one endpoint");
        }
        write!(f, "all {} LLM endpoint(s) failed", self.failures.len())?;
        for failure in &self.failures {
            write!(f, "; {}: {}", failure.endpoint, failure.error)?;
        }
        f.write_str("; fix the first failure or add another endpoint")
    }
}

/// Tries `endpoints` in order and returns the index of the one that answered, with its
/// answer. `on_fallback` is called each time an endpoint fails.
pub async fn chat_with_fallback(
    client: &LlmClient,
    endpoints: &[Endpoint],
    request: &ChatRequest,
    mut on_fallback: impl FnMut(Fallback),
) -> Result<(usize, ChatResponse), ChainError> {
    let mut failures = Vec::new();
    for (index, endpoint) in endpoints.iter().enumerate() {
        match client.chat(endpoint, request).await {
            Ok(response) => return Ok((index, response)),
            Err(error) => {
                on_fallback(Fallback {
                    from: endpoint.name.clone(),
                    to: endpoints.get(index + 1).map(|e| e.name.clone()),
                    reason: error.to_string(),
                });
                failures.push(EndpointFailure { endpoint: endpoint.name.clone(), error });
            }
        }
    }
    Err(ChainError { failures })
}
