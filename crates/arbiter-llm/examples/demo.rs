//! A self-contained tour: a mock server, a fallback chain whose first endpoint is down, a
//! tool call and its result, and the exact cost of every call.
//!
//! ```sh
//! cargo run -p arbiter-llm --example demo
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]
#![forbid(unsafe_code)]

use arbiter_core::cost::summarize;
use arbiter_core::money::Usd;
use arbiter_llm::{
    ChatRequest, Endpoint, LlmClient, Message, MockMatch, MockResponse, MockScript, MockServer, MockToolCall, Provider,
    ToolSpec, Usage, call_record, chat_with_fallback,
};
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut down = MockResponse::error(503, "the primary is down");
    down.repeat = true;
    down.matcher = Some(MockMatch { contains: None, path: Some("/v1/chat/completions".into()) });
    let mut done = MockResponse::text("Fixed: the test passes.");
    done.matcher = Some(MockMatch { contains: Some("tool_result".into()), path: None });
    done.usage = Some(Usage { input_tokens: 1200, output_tokens: 8, cached_tokens: 1000 });
    let call = MockResponse {
        text: "Let me run the tests.".into(),
        tool_calls: vec![MockToolCall {
            name: "run".into(),
            arguments: json!({"cmd": "cargo test"}),
            ..Default::default()
        }],
        usage: Some(Usage { input_tokens: 1000, output_tokens: 25, cached_tokens: 0 }),
        ..Default::default()
    };
    let server = MockServer::start(MockScript::new(vec![down, done, call]), "127.0.0.1:0".parse()?).await?;

    let usd = |s: &str| Usd::parse(s).ok_or("bad price");
    let primary = Endpoint::new("primary", Provider::OpenAi, "gpt-mock")
        .with_base_url(server.openai_base_url())
        .with_prices(usd("2.5")?, usd("10")?);
    let backup = Endpoint::new("backup", Provider::Anthropic, "claude-mock")
        .with_base_url(server.base_url())
        .with_api_key("demo-key-not-secret")
        .with_prices(usd("3")?, usd("15")?);
    let endpoints = [primary, backup];

    let client =
        LlmClient::new()?.on_retry(|n| println!("  retry: {} attempt {} in {:?}", n.endpoint, n.attempt, n.delay));
    let tools = vec![ToolSpec {
        name: "run".into(),
        description: "Run a command".into(),
        parameters: json!({"type": "object"}),
    }];
    let mut request = ChatRequest { tools, ..ChatRequest::user("Make the failing test pass.") };
    let mut records = Vec::new();
    for turn in 1..=2 {
        let (used, response) = chat_with_fallback(&client, &endpoints, &request, |f| {
            println!("  fallback: {} -> {:?} because {}", f.from, f.to, f.reason);
        })
        .await?;
        let endpoint = &endpoints[used];
        println!(
            "turn {turn}: {} answered {:?} with {} tool call(s)",
            endpoint.name,
            response.text,
            response.tool_calls.len()
        );
        records.push(call_record("demo", endpoint, None, response.usage.as_ref()));
        request.messages.push(Message::from_response(&response));
        for call in &response.tool_calls {
            request.messages.push(Message::ToolResult {
                tool_call_id: call.id.clone(),
                content: "1 passed".into(),
                is_error: false,
            });
        }
    }
    let summary = summarize(records);
    println!(
        "cost: {} over {} calls ({} requests seen by the mock)",
        summary.total.describe_cost(),
        summary.total.calls,
        server.requests().len()
    );
    server.shutdown().await;
    Ok(())
}
