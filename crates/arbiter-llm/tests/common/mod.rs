//! Helpers shared by the integration tests: a mock server on a free loopback port, an
//! endpoint pointing at it, and a client whose retry delays are a few milliseconds.

#![allow(dead_code)]

use std::time::Duration;

use arbiter_llm::{Endpoint, LlmClient, MockScript, MockServer, Provider, RetryPolicy};

pub async fn start(script: MockScript) -> MockServer {
    MockServer::start(script, "127.0.0.1:0".parse().unwrap()).await.unwrap()
}

pub fn endpoint(name: &str, provider: Provider, server: &MockServer) -> Endpoint {
    let base = match provider {
        Provider::Anthropic => server.base_url(),
        Provider::OpenAi | Provider::OpenAiCompatible => server.openai_base_url(),
    };
    let mut e = Endpoint::new(name, provider, "mock-model").with_base_url(base);
    e.timeout = Duration::from_secs(20);
    e
}

pub fn fast_policy() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 4,
        base_delay: Duration::from_millis(1),
        max_backoff: Duration::from_millis(5),
        retry_after_cap: Duration::from_millis(5),
        jitter: true,
    }
}

pub fn fast_client() -> LlmClient {
    LlmClient::new().unwrap().with_retry_policy(fast_policy())
}

pub const PROVIDERS: [Provider; 3] = [Provider::OpenAiCompatible, Provider::OpenAi, Provider::Anthropic];
