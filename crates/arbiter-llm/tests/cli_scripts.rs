//! The example scripts of docs/mock-llm.md (tests/fixtures/*-calc.*, tournament.json)
//! replayed with the requests Claude Code, Codex and aider send for "Fix add in calc.py"
//! (docs: real-CLI research): the same routes, history shapes and quirks, over real
//! loopback HTTP. One mock serves a whole tournament through model-matched conversations.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod raw;

use std::path::PathBuf;

use arbiter_llm::{MockScript, MockServer};
use raw::{anthropic_message, chat_message, http, post, responses_items, start};
use serde_json::{Value, json};

const PATCH: &str = "*** Begin Patch\n*** Update File: calc.py\n@@\n def add(a, b):\n-    return a - b\n+    return a + b\n*** End Patch\n";
const SEARCH_REPLACE: &str =
    "calc.py\n```python\n<<<<<<< SEARCH\n    return a - b\n=======\n    return a + b\n>>>>>>> REPLACE\n```\n";

fn fixture(name: &str) -> MockScript {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
    MockScript::from_file(path).unwrap()
}

/// Claude Code: `HEAD /`, the title request (`tools: []`), then one streamed
/// `/v1/messages?beta=true` per turn, each ending with a system message. What each
/// turn did, in order.
async fn claude_run(server: &MockServer, model: &str) -> Vec<String> {
    let r = http().head(server.base_url()).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let tools = json!([{"name": "Read", "input_schema": {}}, {"name": "Edit", "input_schema": {}},
                       {"name": "Write", "input_schema": {}}, {"name": "Bash", "input_schema": {}}]);
    let request = |messages: &[Value], tools: &Value| {
        let mut messages = messages.to_vec();
        messages.push(json!({"role": "system", "content": "<system-reminder/>"}));
        json!({"model": model, "max_tokens": 64000, "stream": true, "thinking": {"type": "adaptive"},
               "system": [{"type": "text", "text": "Primary working directory: /work/repo"}],
               "tools": tools, "messages": messages})
    };
    let mut messages = vec![json!({"role": "user", "content": "Fix add in calc.py"})];
    let title = post(server, "/v1/messages?beta=true", &request(&messages, &json!([]))).await;
    let title = anthropic_message(&title.body);
    assert_eq!(title["stop_reason"], json!("end_turn"), "{title}");
    let mut did = Vec::new();
    for _ in 0..10 {
        let answer = post(server, "/v1/messages?beta=true", &request(&messages, &tools)).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        let message = anthropic_message(&answer.body);
        messages.push(json!({"role": "assistant", "content": message["content"]}));
        let mut results = Vec::new();
        for block in message["content"].as_array().unwrap() {
            match block["type"].as_str().unwrap() {
                "tool_use" => {
                    did.push(format!("{} {}", block["name"].as_str().unwrap(), block["input"]));
                    results.push(json!({"type": "tool_result", "tool_use_id": block["id"], "content": "ok"}));
                }
                _ => did.push(block["text"].as_str().unwrap().to_string()),
            }
        }
        if message["stop_reason"] != "tool_use" {
            return did;
        }
        messages.push(json!({"role": "user", "content": results}));
    }
    panic!("no end of turn: {did:?}");
}

/// Codex with `-m gpt-5.5`: only streamed `/v1/responses`, apply_patch a custom tool.
async fn codex_run(server: &MockServer, model: &str) -> Vec<String> {
    let tools = json!([{"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
                       {"type": "custom", "name": "apply_patch", "format": {"type": "grammar"}}]);
    let message = |role: &str, text: &str| {
        json!({"type": "message", "role": role,
        "content": [{"type": "input_text", "text": text}]})
    };
    let mut input = vec![
        message("developer", "<permissions instructions>"),
        message("user", "<environment_context><cwd>/work/repo</cwd></environment_context>"),
        message("user", "Fix add in calc.py"),
    ];
    let mut did = Vec::new();
    for _ in 0..10 {
        let body = json!({"model": model, "instructions": "", "input": input, "tools": tools, "stream": true,
                          "store": false, "parallel_tool_calls": false});
        let answer = post(server, "/v1/responses", &body).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        let items = responses_items(&answer.body);
        let mut called = false;
        for item in items {
            input.push(item.clone());
            match item["type"].as_str().unwrap() {
                "custom_tool_call" => {
                    did.push(format!("{}: {}", item["name"].as_str().unwrap(), item["input"].as_str().unwrap()));
                    input.push(json!({"type": "custom_tool_call_output", "call_id": item["call_id"], "output": "ok"}));
                    called = true;
                }
                "function_call" => {
                    did.push(format!("{} {}", item["name"].as_str().unwrap(), item["arguments"].as_str().unwrap()));
                    input.push(json!({"type": "function_call_output", "call_id": item["call_id"], "output": "ok"}));
                    called = true;
                }
                _ => did.push(item["content"][0]["text"].as_str().unwrap().to_string()),
            }
        }
        if !called {
            return did;
        }
    }
    panic!("no end of turn: {did:?}");
}

/// aider: streamed `/v1/chat/completions`, no tools, few-shot pairs first.
async fn aider_run(server: &MockServer) -> String {
    let messages = json!([
        {"role": "system", "content": "Act as an expert software developer."},
        {"role": "user", "content": "Change get_factorial() to use math.factorial"},
        {"role": "assistant", "content": "To make this change we need to modify `mathweb/flask/app.py`."},
        {"role": "user", "content": "calc.py\n```\ndef add(a, b):\n    return a - b\n```"},
        {"role": "assistant", "content": "Ok."},
        {"role": "user", "content": "Fix add in calc.py"}
    ]);
    let answer =
        post(server, "/v1/chat/completions", &json!({"model": "mock", "stream": true, "messages": messages})).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    chat_message(&answer.body)["content"].as_str().unwrap().to_string()
}

fn claude_fix() -> Vec<String> {
    vec![
        r#"Read {"file_path":"calc.py"}"#.to_string(),
        r#"Edit {"file_path":"calc.py","new_string":"a + b","old_string":"a - b"}"#.to_string(),
        "Done".to_string(),
    ]
}

#[tokio::test]
async fn each_cli_script_drives_its_cli_through_the_calc_fix() {
    let server = start(fixture("claude-code-calc.json")).await;
    assert_eq!(claude_run(&server, "claude-opus-4-8").await, claude_fix());
    let unknown: Vec<String> = server.unknown_requests().iter().map(|r| format!("{} {}", r.method, r.path)).collect();
    assert_eq!(unknown, ["HEAD /"]);
    assert!(server.requests().iter().skip(1).all(|r| r.path == "/v1/messages" && r.status == 200));

    let server = start(fixture("codex-calc.toml")).await;
    assert_eq!(codex_run(&server, "gpt-5.5").await, [format!("apply_patch: {PATCH}"), "Done".to_string()]);
    assert!(server.requests().iter().all(|r| r.path == "/v1/responses" && r.status == 200));

    let server = start(fixture("aider-calc.json")).await;
    assert_eq!(aider_run(&server).await, SEARCH_REPLACE);
    assert_eq!(server.remaining(), 0);
}

#[tokio::test]
async fn one_mock_serves_a_tournament_by_model() {
    let server = start(fixture("tournament.json")).await;
    // The candidates run side by side: two Claude Code ones with different --model,
    // Codex and aider, twice each.
    let (fixer, idler, codex, aider) = tokio::join!(
        async { (claude_run(&server, "fixer").await, claude_run(&server, "fixer").await) },
        claude_run(&server, "idler"),
        async { (codex_run(&server, "gpt-5.5").await, codex_run(&server, "gpt-5.5").await) },
        async { (aider_run(&server).await, aider_run(&server).await) },
    );
    assert_eq!(fixer, (claude_fix(), claude_fix()));
    assert_eq!(idler, ["I would rather not."]);
    let codex_fix = vec![format!("apply_patch: {PATCH}"), "Done".to_string()];
    assert_eq!(codex, (codex_fix.clone(), codex_fix));
    assert_eq!(aider, (SEARCH_REPLACE.to_string(), SEARCH_REPLACE.to_string()));
    let unknown = server.unknown_requests();
    assert_eq!(unknown.len(), 3);
    assert!(unknown.iter().all(|r| r.method == "HEAD" && r.path == "/"));
    assert_eq!(server.remaining(), 0);
}
