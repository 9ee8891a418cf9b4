//! Both wire formats over real loopback HTTP: streamed answers cut at awkward byte
//! positions (inside UTF-8 characters and tool-call argument JSON) reassemble exactly;
//! streamed and whole answers agree; request bodies and headers are what the providers
//! expect.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use arbiter_llm::{
    ChatRequest, LlmClient, LlmError, Message, MockMatch, MockResponse, MockScript, MockToolCall, Provider, StopReason,
    ToolCall, ToolSpec, Usage,
};
use common::{PROVIDERS, endpoint, fast_client, start};
use serde_json::json;

const TEXT: &str = "Résumé: naïve café ✓ — 𝄞 done";

fn tricky_arguments() -> serde_json::Value {
    json!({
        "path": "src/é/ünïcödé.rs",
        "content": "fn main() {\n    println!(\"✓ 𝄞 \\\"quoted\\\"\");\n}\n",
        "n": 3,
        "nested": {"a": [1, 2.5, {"b": null, "c": true}], "emoji": "🦀"}
    })
}

fn tool_script(write_chunk_bytes: Option<usize>) -> MockScript {
    MockScript::new(vec![MockResponse {
        text: TEXT.into(),
        tool_calls: vec![
            MockToolCall { name: "write_file".into(), arguments: tricky_arguments(), ..Default::default() },
            MockToolCall { name: "run_tests".into(), arguments: json!({}), ..Default::default() },
            MockToolCall {
                id: Some("fixed-id".into()),
                name: "ls".into(),
                arguments: json!({"dir": "."}),
                ..Default::default()
            },
        ],
        usage: Some(Usage { input_tokens: 321, output_tokens: 54, cached_tokens: 20 }),
        write_chunk_bytes,
        ..Default::default()
    }])
}

fn tools() -> Vec<ToolSpec> {
    ["write_file", "run_tests", "ls"]
        .into_iter()
        .map(|n| ToolSpec { name: n.into(), description: format!("{n} tool"), parameters: json!({"type": "object"}) })
        .collect()
}

#[tokio::test]
async fn streamed_tool_calls_split_at_every_byte_reassemble_exactly() {
    let client = fast_client();
    for provider in PROVIDERS {
        for chunk in [Some(1), Some(3), Some(7), None] {
            let server = start(tool_script(chunk)).await;
            let e = endpoint("m", provider, &server);
            let request = ChatRequest { tools: tools(), ..ChatRequest::user("write the file") };
            let r = client.chat(&e, &request).await.unwrap_or_else(|err| panic!("{provider} {chunk:?}: {err}"));
            let prefix = if provider == Provider::Anthropic { "toolu" } else { "call" };
            assert_eq!(r.text, TEXT, "{provider} {chunk:?}");
            assert_eq!(
                r.tool_calls,
                vec![
                    ToolCall { id: format!("{prefix}_1_0"), name: "write_file".into(), arguments: tricky_arguments() },
                    ToolCall { id: format!("{prefix}_1_1"), name: "run_tests".into(), arguments: json!({}) },
                    ToolCall { id: "fixed-id".into(), name: "ls".into(), arguments: json!({"dir": "."}) },
                ],
                "{provider} {chunk:?}"
            );
            assert_eq!(r.stop_reason, StopReason::ToolUse);
            assert_eq!(r.usage, Some(Usage { input_tokens: 321, output_tokens: 54, cached_tokens: 20 }));
            assert_eq!(r.attempts, 1);
            let seen = server.requests();
            assert_eq!(seen.len(), 1);
            assert_eq!(seen[0].body["stream"], json!(true));
            server.shutdown().await;
        }
    }
}

#[tokio::test]
async fn streamed_and_whole_answers_agree_for_both_formats() {
    let client = fast_client();
    for provider in PROVIDERS {
        for stream in [true, false] {
            let server = start(tool_script(None)).await;
            let mut e = endpoint("m", provider, &server);
            e.stream = stream;
            let request = ChatRequest { tools: tools(), ..ChatRequest::user("go") };
            let r = client.chat(&e, &request).await.unwrap();
            assert_eq!(r.text, TEXT);
            assert_eq!(r.tool_calls.len(), 3);
            assert_eq!(r.tool_calls[0].arguments, tricky_arguments());
            assert_eq!(r.usage, Some(Usage { input_tokens: 321, output_tokens: 54, cached_tokens: 20 }));
            let body = &server.requests()[0].body;
            assert_eq!(body.get("stream").is_some(), stream, "{provider} {body}");
            assert_eq!(body["model"], json!("mock-model"));
        }
    }
}

#[tokio::test]
async fn plain_text_without_scripted_usage_gets_an_estimate() {
    let client = fast_client();
    for provider in PROVIDERS {
        let server = start(MockScript::new(vec![MockResponse::text("just text")])).await;
        let r = client.chat(&endpoint("m", provider, &server), &ChatRequest::user("hi")).await.unwrap();
        assert_eq!(r.text, "just text");
        assert!(r.tool_calls.is_empty());
        assert_eq!(r.stop_reason, StopReason::EndTurn);
        let usage = r.usage.unwrap();
        assert!(usage.input_tokens > 0 && usage.output_tokens == 3, "{usage:?}");
    }
}

#[tokio::test]
async fn request_bodies_and_headers_follow_each_provider() {
    let client = LlmClient::new().unwrap();
    let request = ChatRequest {
        system: Some("You are terse.".into()),
        messages: vec![
            Message::user("list files"),
            Message::Assistant {
                text: String::new(),
                tool_calls: vec![ToolCall { id: "t1".into(), name: "ls".into(), arguments: json!({"dir": "."}) }],
            },
            Message::ToolResult { tool_call_id: "t1".into(), content: "a.txt".into(), is_error: false },
        ],
        tools: tools(),
        temperature: Some(0.5),
        max_tokens: Some(77),
    };

    let server = start(MockScript::new(vec![MockResponse::text("a.txt")])).await;
    let e = endpoint("anth", Provider::Anthropic, &server).with_api_key("anthropic-test-key-123456");
    client.chat(&e, &request).await.unwrap();
    let seen = &server.requests()[0];
    assert_eq!(seen.path, "/v1/messages");
    assert_eq!(seen.headers.get("anthropic-version").map(String::as_str), Some("2023-06-01"));
    assert_eq!(seen.headers.get("x-api-key").map(String::as_str), Some("[REDACTED]"));
    assert!(!seen.headers.contains_key("authorization"));
    assert_eq!(seen.body["system"], json!("You are terse."));
    assert_eq!(seen.body["max_tokens"], json!(77));
    assert_eq!(seen.body["tools"][0]["input_schema"], json!({"type": "object"}));
    assert_eq!(
        seen.body["messages"][2],
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.txt"}]})
    );

    let server = start(MockScript::new(vec![MockResponse::text("a.txt")])).await;
    let e = endpoint("oai", Provider::OpenAi, &server).with_api_key("sk-openai-test-key-1234567890");
    client.chat(&e, &request).await.unwrap();
    let seen = &server.requests()[0];
    assert_eq!(seen.path, "/v1/chat/completions");
    assert_eq!(seen.headers.get("authorization").map(String::as_str), Some("[REDACTED]"));
    assert_eq!(seen.body["messages"][0], json!({"role": "system", "content": "You are terse."}));
    assert_eq!(seen.body["messages"][3], json!({"role": "tool", "tool_call_id": "t1", "content": "a.txt"}));
    assert_eq!(seen.body["max_completion_tokens"], json!(77));
    assert_eq!(seen.body["stream_options"], json!({"include_usage": true}));
    assert_eq!(seen.body["temperature"], json!(0.5));
}

#[tokio::test]
async fn a_tool_loop_is_answered_by_matching_responses() {
    let client = fast_client();
    for provider in PROVIDERS {
        let mut final_answer = MockResponse::text("The file says hello.");
        final_answer.matcher = Some(MockMatch { contains: Some("hello from disk".into()), path: None });
        let first = MockResponse {
            tool_calls: vec![MockToolCall {
                name: "read".into(),
                arguments: json!({"path": "a.txt"}),
                ..Default::default()
            }],
            ..Default::default()
        };
        // The matching response is listed first but only fits the second request.
        let server = start(MockScript::new(vec![final_answer, first])).await;
        let e = endpoint("m", provider, &server);
        let mut request = ChatRequest { tools: tools(), ..ChatRequest::user("what does a.txt say?") };
        let r = client.chat(&e, &request).await.unwrap();
        assert_eq!(r.stop_reason, StopReason::ToolUse);
        assert!(r.text.is_empty());
        request.messages.push(Message::from_response(&r));
        request.messages.push(Message::ToolResult {
            tool_call_id: r.tool_calls[0].id.clone(),
            content: "hello from disk".into(),
            is_error: false,
        });
        let r = client.chat(&e, &request).await.unwrap();
        assert_eq!(r.text, "The file says hello.");
        assert_eq!(server.remaining(), 0);
    }
}

#[tokio::test]
async fn empty_and_malformed_answers_are_errors() {
    let client = fast_client();
    for provider in PROVIDERS {
        for stream in [true, false] {
            let broken = MockResponse {
                tool_calls: vec![MockToolCall {
                    name: "edit".into(),
                    raw_arguments: Some("{\"path\": \"a.txt\", ".into()),
                    ..Default::default()
                }],
                ..Default::default()
            };
            let server = start(MockScript::new(vec![MockResponse::text(""), broken])).await;
            let mut e = endpoint("m", provider, &server);
            e.stream = stream;
            let err = client.chat(&e, &ChatRequest::user("x")).await.unwrap_err();
            assert!(matches!(&err, LlmError::Empty { usage: Some(_), .. }), "{provider}: {err}");
            assert!(err.to_string().contains("no text and no tool call"), "{err}");
            let err = client.chat(&e, &ChatRequest::user("x")).await.unwrap_err();
            assert!(matches!(&err, LlmError::Malformed { .. }), "{provider} stream={stream}: {err}");
            assert!(err.to_string().contains("'edit'"), "{err}");
            assert_eq!(server.requests().len(), 2, "neither is retried");
        }
    }
}

#[tokio::test]
async fn models_are_listed_and_unknown_paths_are_404() {
    let _ = LlmClient::new().unwrap();
    let server = start(MockScript { models: vec!["m1".into(), "m2".into()], ..Default::default() }).await;
    let http = reqwest::Client::new();
    let list: serde_json::Value =
        http.get(format!("{}/models", server.openai_base_url())).send().await.unwrap().json().await.unwrap();
    assert_eq!(list["data"][1]["id"], json!("m2"));
    let r = http.get(format!("{}/nope", server.base_url())).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 404);
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn the_mock_really_delivers_tiny_pieces_that_cut_characters() {
    use futures_util::StreamExt;
    let _ = LlmClient::new().unwrap();
    let server = start(tool_script(Some(1))).await;
    let body = json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "x"}]});
    let response = reqwest::Client::new()
        .post(format!("{}/messages", server.openai_base_url()))
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let mut stream = response.bytes_stream();
    let (mut pieces, mut cut_chars, mut all) = (0, 0, Vec::new());
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.unwrap();
        pieces += 1;
        if std::str::from_utf8(&chunk).is_err() {
            cut_chars += 1;
        }
        all.extend_from_slice(&chunk);
    }
    let text = String::from_utf8(all).unwrap();
    assert!(text.contains("event: message_stop"));
    assert!(pieces > 100 && cut_chars > 0, "{pieces} pieces, {cut_chars} inside a character");
}
