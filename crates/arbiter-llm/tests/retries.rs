//! Retries over real HTTP: `Retry-After` is honoured, 5xx and dropped connections are
//! retried up to the limit, client errors and timeouts are not.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use arbiter_llm::{ChatRequest, LlmClient, LlmError, MockResponse, MockScript, RetryNotice, RetryPolicy};
use common::{PROVIDERS, endpoint, fast_client, fast_policy, start};

fn recorder() -> (Arc<Mutex<Vec<RetryNotice>>>, impl Fn(&RetryNotice) + Send + Sync + 'static) {
    let notices = Arc::new(Mutex::new(Vec::new()));
    let sink = notices.clone();
    (notices, move |n: &RetryNotice| sink.lock().unwrap().push(n.clone()))
}

#[tokio::test]
async fn a_429_with_retry_after_is_retried_after_the_asked_delay() {
    for provider in PROVIDERS {
        let mut limited = MockResponse::error(429, "rate limited, slow down");
        limited.retry_after = Some(1);
        let server = start(MockScript::new(vec![limited, MockResponse::text("finally")])).await;
        let (notices, hook) = recorder();
        // A tiny base delay: only Retry-After can make the client wait a whole second.
        let policy = RetryPolicy { base_delay: Duration::from_millis(1), ..RetryPolicy::default() };
        let client = LlmClient::new().unwrap().with_retry_policy(policy).on_retry(hook);
        let r = client.chat(&endpoint("m", provider, &server), &ChatRequest::user("hi")).await.unwrap();
        assert_eq!(r.text, "finally");
        assert_eq!(r.attempts, 2);
        assert_eq!(server.requests().len(), 2);
        assert!(r.latency >= Duration::from_secs(1), "{:?}", r.latency);
        let notices = notices.lock().unwrap();
        assert_eq!(notices.len(), 1);
        assert_eq!(notices[0].attempt, 1);
        assert_eq!(notices[0].delay, Duration::from_secs(1));
        assert!(
            notices[0].reason.contains("HTTP 429") && notices[0].reason.contains("slow down"),
            "{}",
            notices[0].reason
        );
    }
}

#[tokio::test]
async fn retry_after_is_capped() {
    let mut limited = MockResponse::error(429, "later");
    limited.retry_after = Some(3600);
    let server = start(MockScript::new(vec![limited, MockResponse::text("ok")])).await;
    let (notices, hook) = recorder();
    let client = LlmClient::new().unwrap().with_retry_policy(fast_policy()).on_retry(hook);
    let r =
        client.chat(&endpoint("m", arbiter_llm::Provider::OpenAi, &server), &ChatRequest::user("hi")).await.unwrap();
    assert_eq!(r.attempts, 2);
    assert_eq!(notices.lock().unwrap()[0].delay, fast_policy().retry_after_cap);
}

#[tokio::test]
async fn server_errors_are_retried_up_to_four_attempts() {
    for provider in PROVIDERS {
        let mut failing = MockResponse::error(503, "down for maintenance");
        failing.repeat = true;
        let server = start(MockScript::new(vec![failing])).await;
        let err = fast_client().chat(&endpoint("m", provider, &server), &ChatRequest::user("hi")).await.unwrap_err();
        assert!(matches!(err, LlmError::Status { status: 503, .. }), "{err}");
        assert!(err.to_string().contains("down for maintenance"), "{err}");
        assert_eq!(server.requests().len(), 4);
    }
}

#[tokio::test]
async fn dropped_connections_are_retried() {
    for provider in PROVIDERS {
        let drop = MockResponse { disconnect: true, ..Default::default() };
        let server = start(MockScript::new(vec![drop.clone(), drop, MockResponse::text("third time")])).await;
        let r = fast_client().chat(&endpoint("m", provider, &server), &ChatRequest::user("hi")).await.unwrap();
        assert_eq!(r.text, "third time");
        assert_eq!(r.attempts, 3);
    }
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    for status in [400, 401, 404] {
        let server = start(MockScript::new(vec![MockResponse::error(status, "no"), MockResponse::text("x")])).await;
        let err = fast_client()
            .chat(&endpoint("m", arbiter_llm::Provider::Anthropic, &server), &ChatRequest::user("hi"))
            .await
            .unwrap_err();
        assert!(matches!(err, LlmError::Status { status: s, .. } if s == status), "{err}");
        assert_eq!(server.requests().len(), 1);
    }
}

#[tokio::test]
async fn a_slow_answer_times_out_once() {
    let slow = MockResponse { delay_ms: Some(3000), ..MockResponse::text("too late") };
    let server = start(MockScript::new(vec![slow])).await;
    let mut e = endpoint("slow", arbiter_llm::Provider::OpenAiCompatible, &server);
    e.timeout = Duration::from_millis(200);
    let err = fast_client().chat(&e, &ChatRequest::user("hi")).await.unwrap_err();
    assert!(matches!(err, LlmError::Timeout { .. }), "{err}");
    assert!(err.to_string().contains("raise its timeout"), "{err}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn an_exhausted_script_says_which_request() {
    let server = start(MockScript::new(vec![MockResponse::text("only one")])).await;
    let client = LlmClient::new().unwrap().with_retry_policy(RetryPolicy { max_attempts: 1, ..fast_policy() });
    let e = endpoint("m", arbiter_llm::Provider::OpenAi, &server);
    client.chat(&e, &ChatRequest::user("1")).await.unwrap();
    let err = client.chat(&e, &ChatRequest::user("2")).await.unwrap_err();
    assert!(err.to_string().contains("mock script exhausted: request #2 (POST /v1/chat/completions)"), "{err}");
}

#[tokio::test]
async fn misconfigured_endpoints_fail_before_any_request() {
    let client = fast_client();
    let e = arbiter_llm::Endpoint::new("local", arbiter_llm::Provider::OpenAiCompatible, "m");
    let err = client.chat(&e, &ChatRequest::user("hi")).await.unwrap_err();
    assert!(matches!(err, LlmError::Config { .. }) && err.to_string().contains("no base_url"), "{err}");
    let mut e = e.with_base_url("http://127.0.0.1:9/v1");
    e.max_parallel = 0;
    let err = client.chat(&e, &ChatRequest::user("hi")).await.unwrap_err();
    assert!(err.to_string().contains("max_parallel"), "{err}");
}
