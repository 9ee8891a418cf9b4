//! Fallback chains over real HTTP: a failing endpoint hands over to the next one with a
//! `Fallback` event carrying the reason; every failure is listed when all fail.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use arbiter_llm::{
    ChatRequest, Fallback, LlmError, MockMatch, MockResponse, MockScript, MockToolCall, Provider, chat_with_fallback,
};
use common::{endpoint, fast_client, start};

fn on_path(path: &str, mut response: MockResponse) -> MockResponse {
    response.matcher = Some(MockMatch { contains: None, path: Some(path.into()) });
    response
}

#[tokio::test]
async fn a_500_falls_through_to_the_second_endpoint() {
    let mut failing = on_path("/v1/chat/completions", MockResponse::error(500, "upstream exploded"));
    failing.repeat = true;
    let server = start(MockScript::new(vec![failing, on_path("/v1/messages", MockResponse::text("from b"))])).await;
    let endpoints = [endpoint("a", Provider::OpenAi, &server), endpoint("b", Provider::Anthropic, &server)];
    let mut events = Vec::new();
    let (index, r) =
        chat_with_fallback(&fast_client(), &endpoints, &ChatRequest::user("hi"), |f| events.push(f)).await.unwrap();
    assert_eq!((index, r.text.as_str()), (1, "from b"));
    assert_eq!(events.len(), 1);
    let Fallback { from, to, reason } = &events[0];
    assert_eq!((from.as_str(), to.as_deref()), ("a", Some("b")));
    assert!(reason.contains("HTTP 500") && reason.contains("upstream exploded"), "{reason}");
    let paths: Vec<String> = server.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, ["/v1/chat/completions"; 4].into_iter().chain(["/v1/messages"]).collect::<Vec<_>>());
}

#[tokio::test]
async fn empty_and_malformed_answers_fall_through() {
    let malformed = MockResponse {
        tool_calls: vec![MockToolCall {
            name: "f".into(),
            raw_arguments: Some("{not json".into()),
            ..Default::default()
        }],
        ..Default::default()
    };
    let server = start(MockScript::new(vec![MockResponse::text("  "), malformed, MockResponse::text("third")])).await;
    let endpoints = [
        endpoint("empty", Provider::Anthropic, &server),
        endpoint("broken", Provider::OpenAiCompatible, &server),
        endpoint("good", Provider::OpenAi, &server),
    ];
    let mut events = Vec::new();
    let (index, r) =
        chat_with_fallback(&fast_client(), &endpoints, &ChatRequest::user("hi"), |f| events.push(f)).await.unwrap();
    assert_eq!((index, r.text.as_str()), (2, "third"));
    let moves: Vec<(&str, Option<&str>)> = events.iter().map(|f| (f.from.as_str(), f.to.as_deref())).collect();
    assert_eq!(moves, [("empty", Some("broken")), ("broken", Some("good"))]);
    assert!(events[0].reason.contains("no text and no tool call"), "{}", events[0].reason);
    assert!(events[1].reason.contains("not valid JSON"), "{}", events[1].reason);
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn when_every_endpoint_fails_each_failure_is_listed() {
    let server =
        start(MockScript::new(vec![MockResponse::error(401, "bad key"), MockResponse::error(404, "no model")])).await;
    let endpoints = [endpoint("first", Provider::Anthropic, &server), endpoint("second", Provider::OpenAi, &server)];
    let mut events = Vec::new();
    let err =
        chat_with_fallback(&fast_client(), &endpoints, &ChatRequest::user("hi"), |f| events.push(f)).await.unwrap_err();
    assert_eq!(err.failures.len(), 2);
    assert!(matches!(err.failures[0].error, LlmError::Status { status: 401, .. }));
    assert!(matches!(err.failures[1].error, LlmError::Status { status: 404, .. }));
    let text = err.to_string();
    assert!(text.starts_with("all 2 LLM endpoint(s) failed; first: "), "{text}");
    assert!(text.contains("bad key") && text.contains("second: ") && text.contains("no model"), "{text}");
    assert_eq!(events.last().map(|f| f.to.clone()), Some(None));

    let err = chat_with_fallback(&fast_client(), &[], &ChatRequest::user("hi"), |_| {}).await.unwrap_err();
    assert!(err.to_string().contains("configure at least one endpoint"));
}
