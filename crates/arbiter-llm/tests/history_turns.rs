//! `"turns": "history"`: the answer to a request is chosen by how many turns the mock
//! already produced in that request's own history, so several clients sharing one mock
//! (candidates of one tournament) each walk the whole script. Over real loopback HTTP.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;
mod raw;

use arbiter_llm::{ChatRequest, Message, StopReason, ToolSpec};
use common::{PROVIDERS, endpoint, fast_client};
use raw::{anthropic_message, chat_message, post, script, start};
use serde_json::{Value, json};

/// Claude Code's script for the calc.py fix.
fn claude_script() -> Value {
    json!({"turns": "history", "responses": [
        {"tool_calls": [{"name": "Read", "arguments": {"file_path": "calc.py"}}]},
        {"tool_calls": [{"name": "Edit", "arguments": {"file_path": "calc.py", "old_string": "a - b", "new_string": "a + b"}}]},
        {"text": "Done"}
    ]})
}

fn claude_tools() -> Value {
    json!([{"name": "Read", "description": "read", "input_schema": {"type": "object"}},
           {"name": "Edit", "description": "edit", "input_schema": {"type": "object"}},
           {"name": "Bash", "description": "run", "input_schema": {"type": "object"}}])
}

/// A Claude Code-like request: its messages end with a `system` message.
fn claude_request(messages: &[Value], stream: bool) -> Value {
    let mut all = messages.to_vec();
    all.push(json!({"role": "system", "content": "<system-reminder>mid-conversation</system-reminder>"}));
    json!({"model": "claude-opus-4-8", "max_tokens": 64000, "stream": stream, "system": "You are Claude Code.",
           "tools": claude_tools(), "messages": all})
}

/// One conversation as a client keeps it.
struct Conversation {
    messages: Vec<Value>,
}

impl Conversation {
    fn new(prompt: &str) -> Self {
        Conversation { messages: vec![json!({"role": "user", "content": prompt})] }
    }

    /// Sends the next request and answers every tool call with a result.
    async fn step(&mut self, server: &arbiter_llm::MockServer) -> Value {
        let answer = post(server, "/v1/messages?beta=true", &claude_request(&self.messages, true)).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        let message = anthropic_message(&answer.body);
        let content = message["content"].clone();
        self.messages.push(json!({"role": "assistant", "content": content}));
        let results: Vec<Value> = content
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["type"] == "tool_use")
            .map(|b| json!({"type": "tool_result", "tool_use_id": b["id"], "content": "ok"}))
            .collect();
        if !results.is_empty() {
            self.messages.push(json!({"role": "user", "content": results}));
        }
        message
    }
}

/// What a turn did: the tool it called, or its text.
fn what(message: &Value) -> String {
    let block = &message["content"][0];
    match block["type"].as_str() {
        Some("tool_use") => format!("{} {}", block["name"].as_str().unwrap(), block["input"]),
        _ => block["text"].as_str().unwrap_or_default().to_string(),
    }
}

#[tokio::test]
async fn parallel_conversations_each_get_every_turn_in_their_own_order() {
    let server = start(script(claude_script())).await;
    // Three candidates, same prompt, interleaved the way parallel runs interleave.
    let mut conversations: Vec<Conversation> = (0..3).map(|_| Conversation::new("Fix add in calc.py")).collect();
    let order = [0, 1, 0, 2, 1, 0, 2, 1, 2];
    let mut seen: Vec<Vec<String>> = vec![Vec::new(); 3];
    for c in order {
        let message = conversations[c].step(&server).await;
        seen[c].push(what(&message));
    }
    let expected = [
        r#"Read {"file_path":"calc.py"}"#.to_string(),
        r#"Edit {"file_path":"calc.py","new_string":"a + b","old_string":"a - b"}"#.to_string(),
        "Done".to_string(),
    ];
    for (c, turns) in seen.iter().enumerate() {
        assert_eq!(turns, &expected, "conversation {c}");
    }
    // Each tool call carries the turn marker, and the final stop is end_turn.
    let first = &conversations[2].messages[1]["content"][0]["id"];
    assert!(first.as_str().unwrap().starts_with("toolu_mock_t1_"), "{first}");
    let served: Vec<String> = server.requests().iter().map(|r| r.served.clone().unwrap()).collect();
    let turns: Vec<&str> = served.iter().map(|s| &s[..6]).collect();
    assert_eq!(turns, ["turn 1", "turn 1", "turn 2", "turn 1", "turn 2", "turn 3", "turn 2", "turn 3", "turn 3"]);
    assert!(server.requests().iter().all(|r| r.query.as_deref() == Some("beta=true")));
}

#[tokio::test]
async fn the_last_non_system_message_decides_whether_a_turn_is_served() {
    let server = start(script(claude_script())).await;
    // Ends with a system message after the user prompt: turn 1.
    let user = json!({"role": "user", "content": "Fix add in calc.py"});
    let answer = post(&server, "/v1/messages", &claude_request(std::slice::from_ref(&user), false)).await;
    let message = answer.json();
    assert_eq!(message["content"][0]["name"], json!("Read"));
    assert_eq!(message["stop_reason"], json!("tool_use"));
    // The last non-system message is the assistant's: no turn, a plain OK.
    let assistant = json!({"role": "assistant", "content": message["content"]});
    let answer = post(&server, "/v1/messages", &claude_request(&[user.clone(), assistant.clone()], false)).await;
    let ok = answer.json();
    assert_eq!(ok["content"], json!([{"type": "text", "text": "OK"}]));
    assert_eq!(ok["stop_reason"], json!("end_turn"));
    // A tool result after it: turn 2.
    let result = json!({"role": "user", "content": [{"type": "tool_result",
        "tool_use_id": message["content"][0]["id"], "content": "def add(a, b): ..."}]});
    let answer = post(&server, "/v1/messages", &claude_request(&[user, assistant, result], false)).await;
    assert_eq!(answer.json()["content"][0]["name"], json!("Edit"));
    let served = server.requests()[1].served.clone().unwrap();
    assert!(served.starts_with("OK: the last non-system message"), "{served}");
}

#[tokio::test]
async fn a_turn_calling_an_undeclared_tool_is_answered_ok_and_does_not_advance() {
    let server = start(script(claude_script())).await;
    // Claude Code's title request: the same prompt, `tools: []`.
    let prompt = json!({"role": "user", "content": "Fix add in calc.py"});
    let mut title = claude_request(std::slice::from_ref(&prompt), true);
    title["tools"] = json!([]);
    title["output_config"] = json!({"format": {"type": "json_schema"}});
    let answer = post(&server, "/v1/messages", &title).await;
    let message = anthropic_message(&answer.body);
    assert_eq!(message["content"], json!([{"type": "text", "text": "OK"}]));
    assert_eq!(message["stop_reason"], json!("end_turn"));
    let served = server.requests()[0].served.clone().unwrap();
    assert!(served.contains("calls Read, which the request does not declare"), "{served}");
    assert_eq!(server.remaining(), 3, "turn 1 was not served");

    // The real conversation still starts at turn 1, even with that OK in its history.
    let ok = json!({"role": "assistant", "content": message["content"]});
    let again = json!({"role": "user", "content": "go on"});
    let answer = post(&server, "/v1/messages", &claude_request(&[prompt, ok, again], true)).await;
    assert_eq!(what(&anthropic_message(&answer.body)), r#"Read {"file_path":"calc.py"}"#);
    assert_eq!(server.remaining(), 2);
}

#[tokio::test]
async fn text_only_conversations_advance_by_recognising_scripted_texts() {
    let search_replace =
        "calc.py\n```python\n<<<<<<< SEARCH\n    return a - b\n=======\n    return a + b\n>>>>>>> REPLACE\n```\n";
    let server = start(script(json!({"turns": "history", "responses": [
        {"text": search_replace},
        {"text": "The lint errors are fixed."}
    ]})))
    .await;
    // aider: a system prompt, few-shot user/assistant pairs (not mock text), no tools.
    let mut messages = vec![
        json!({"role": "system", "content": "Act as an expert software developer."}),
        json!({"role": "user", "content": "Change get_factorial() to use math.factorial"}),
        json!({"role": "assistant", "content": "To make this change we need to modify `mathweb/flask/app.py`..."}),
        json!({"role": "user", "content": "I switched to a new code base."}),
        json!({"role": "assistant", "content": "Ok."}),
        json!({"role": "user", "content": "calc.py\n```\ndef add(a, b):\n    return a - b\n```\nFix add in calc.py"}),
    ];
    let request = |messages: &[Value]| json!({"model": "mock", "stream": true, "temperature": 0, "messages": messages});
    let answer = post(&server, "/v1/chat/completions", &request(&messages)).await;
    let first = chat_message(&answer.body);
    assert_eq!(first["content"], json!(search_replace));
    assert!(first.get("tool_calls").is_none());
    // The same request again (another candidate) gets turn 1 too.
    let answer = post(&server, "/v1/chat/completions", &request(&messages)).await;
    assert_eq!(chat_message(&answer.body)["content"], json!(search_replace));
    // aider keeps the reply (trailing whitespace trimmed) and asks again: turn 2.
    messages.push(json!({"role": "assistant", "content": search_replace.trim_end()}));
    messages.push(json!({"role": "user", "content": "Fix any errors below, if possible."}));
    let answer = post(&server, "/v1/chat/completions", &request(&messages)).await;
    assert_eq!(chat_message(&answer.body)["content"], json!("The lint errors are fixed."));
    // Past the last turn: a 400 that says so, not a retryable 500.
    messages.push(json!({"role": "assistant", "content": "The lint errors are fixed."}));
    messages.push(json!({"role": "user", "content": "and?"}));
    let answer = post(&server, "/v1/chat/completions", &request(&messages)).await;
    assert_eq!(answer.status, 400);
    let message = answer.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("has 2 mock turn(s) in its history") && message.contains("scripts 2"), "{message}");
}

#[tokio::test]
async fn chat_tool_results_select_turns_and_the_crates_own_client_walks_the_script() {
    let tool =
        |name: &str| ToolSpec { name: name.into(), description: name.into(), parameters: json!({"type": "object"}) };
    for provider in PROVIDERS {
        let server = start(script(claude_script())).await;
        let e = endpoint("m", provider, &server);
        let client = fast_client();
        let mut request = ChatRequest { tools: vec![tool("Read"), tool("Edit")], ..ChatRequest::user("Fix add") };
        let mut names = Vec::new();
        loop {
            let r = client.chat(&e, &request).await.unwrap_or_else(|err| panic!("{provider}: {err}"));
            request.messages.push(Message::from_response(&r));
            if r.stop_reason != StopReason::ToolUse {
                names.push(r.text);
                break;
            }
            for call in &r.tool_calls {
                names.push(call.name.clone());
                assert!(call.id.contains("_mock_t"), "{provider}: {}", call.id);
                request.messages.push(Message::ToolResult {
                    tool_call_id: call.id.clone(),
                    content: "ok".into(),
                    is_error: false,
                });
            }
        }
        assert_eq!(names, ["Read", "Edit", "Done"], "{provider}");
        assert_eq!(server.remaining(), 0, "{provider}");
    }
}
