//! The per-endpoint `max_parallel` limit holds across clones of one client: with a limit
//! of 1 the mock sees the second request only after the first was answered.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use arbiter_llm::{ChatRequest, MockResponse, MockScript, Provider, RecordedRequest};
use common::{endpoint, fast_client, start};

fn slow_script() -> MockScript {
    MockScript::new(vec![MockResponse { delay_ms: Some(400), repeat: true, ..MockResponse::text("done") }])
}

async fn two_concurrent_calls(name: &str, max_parallel: u32, provider: Provider) -> Vec<RecordedRequest> {
    let server = start(slow_script()).await;
    let mut e = endpoint(name, provider, &server);
    e.max_parallel = max_parallel;
    let client = fast_client();
    let other = client.clone();
    let request = ChatRequest::user("hi");
    let (a, b) = tokio::join!(client.chat(&e, &request), other.chat(&e, &request));
    assert_eq!((a.unwrap().text, b.unwrap().text), ("done".to_string(), "done".to_string()));
    let mut seen = server.requests();
    seen.sort_by_key(|r| r.started_at);
    assert_eq!(seen.len(), 2);
    seen
}

#[tokio::test]
async fn max_parallel_one_serializes_requests() {
    for provider in [Provider::OpenAi, Provider::Anthropic] {
        let seen = two_concurrent_calls("serial", 1, provider).await;
        let first_done = seen[0].finished_at.unwrap();
        assert!(seen[1].started_at >= first_done, "the second request started before the first was answered");
    }
}

#[tokio::test]
async fn max_parallel_two_lets_them_overlap() {
    let seen = two_concurrent_calls("parallel", 2, Provider::OpenAi).await;
    assert!(seen[1].started_at < seen[0].finished_at.unwrap(), "the requests did not overlap");
}
