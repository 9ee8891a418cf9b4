//! `POST /v1/responses`, the OpenAI Responses API Codex speaks, over real loopback HTTP:
//! a Codex-like three-turn conversation (a function call, a custom freeform tool call,
//! text) streamed as Codex reads it, whole JSON answers, and scripted errors.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod raw;

use raw::{Answer, events, post, responses_items, script, shape, start};
use serde_json::{Value, json};

const PATCH: &str = "*** Begin Patch\n*** Update File: calc.py\n@@\n def add(a, b):\n-    return a - b\n+    return a + b\n*** End Patch\n";

/// The tools Codex declares for `-m gpt-5.5`: a JSON function and a custom freeform one.
fn codex_tools() -> Value {
    json!([
        {"type": "function", "name": "exec_command", "description": "run a command", "strict": false,
         "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}},
        {"type": "custom", "name": "apply_patch", "description": "edit files",
         "format": {"type": "grammar", "syntax": "lark", "definition": "start: begin_patch hunk+ end_patch"}},
        {"type": "web_search"}
    ])
}

fn codex_request(input: &[Value]) -> Value {
    json!({"model": "gpt-5.5", "instructions": "", "input": input, "tools": codex_tools(), "tool_choice": "auto",
           "parallel_tool_calls": false, "reasoning": null, "store": false, "stream": true, "include": [],
           "prompt_cache_key": "session-1"})
}

fn codex_start() -> Vec<Value> {
    let text = |role: &str, text: &str| {
        let kind = if role == "assistant" { "output_text" } else { "input_text" };
        json!({"type": "message", "role": role, "content": [{"type": kind, "text": text}]})
    };
    vec![
        text("developer", "<permissions instructions>"),
        text("developer", "<collaboration mode>"),
        text("user", "<environment_context><cwd>/work/repo</cwd></environment_context>"),
        text("user", "Fix add in calc.py"),
    ]
}

/// Checks the framing every Responses stream shares: names match `type`, sequence
/// numbers count up from 0, it opens with `response.created` and ends with
/// `response.completed`.
fn checked_stream(answer: &Answer) -> Vec<raw::Event> {
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.content_type, "text/event-stream");
    let events = events(&answer.body);
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.data["type"], json!(e.name), "{e:?}");
        assert_eq!(e.data["sequence_number"], json!(i), "{e:?}");
    }
    assert_eq!(events[0].data["response"]["status"], json!("in_progress"));
    assert_eq!(events[0].data["response"]["output"], json!([]));
    assert_eq!(events.last().unwrap().data["response"]["status"], json!("completed"));
    events
}

fn deltas(events: &[raw::Event], name: &str) -> Vec<String> {
    events.iter().filter(|e| e.name == name).map(|e| e.data["delta"].as_str().unwrap().to_string()).collect()
}

#[tokio::test]
async fn a_codex_like_conversation_streams_a_function_call_then_a_custom_tool_call_then_text() {
    let server = start(script(json!({"turns": "history", "responses": [
        {"tool_calls": [{"name": "exec_command", "arguments": {"cmd": "cat calc.py"}}],
         "usage": {"input_tokens": 1200, "output_tokens": 20, "cached_tokens": 0}},
        {"tool_calls": [{"name": "apply_patch", "arguments": PATCH}],
         "usage": {"input_tokens": 1300, "output_tokens": 40, "cached_tokens": 1100}},
        {"text": "Done: add returns a + b.", "usage": {"input_tokens": 1500, "output_tokens": 5, "cached_tokens": 1400}}
    ]})))
    .await;
    let mut input = codex_start();

    // Turn 1: a function call, its arguments a JSON string streamed in pieces.
    let answer = post(&server, "/v1/responses", &codex_request(&input)).await;
    let events = checked_stream(&answer);
    assert_eq!(
        shape(&events),
        [
            "response.created",
            "response.output_item.added",
            "response.function_call_arguments.delta*",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed"
        ]
    );
    let args = deltas(&events, "response.function_call_arguments.delta");
    assert!(args.len() >= 2, "{args:?}");
    assert_eq!(events[1].data["item"]["arguments"], json!(""));
    let item = &responses_items(&answer.body)[0];
    assert_eq!(item["type"], json!("function_call"));
    assert_eq!(item["name"], json!("exec_command"));
    assert_eq!(item["arguments"], json!(args.concat()));
    assert_eq!(
        serde_json::from_str::<Value>(item["arguments"].as_str().unwrap()).unwrap(),
        json!({"cmd": "cat calc.py"})
    );
    let call_id = item["call_id"].as_str().unwrap().to_string();
    assert!(call_id.starts_with("call_mock_t1_"), "{call_id}");
    let completed = &events.last().unwrap().data["response"];
    assert_eq!(completed["output"], json!([item]));
    assert_eq!(completed["model"], json!("gpt-5.5"));

    // Codex sends the call back with its output.
    input.push(item.clone());
    input.push(json!({"type": "function_call_output", "call_id": call_id,
                      "output": "def add(a, b):\n    return a - b\n"}));

    // Turn 2: apply_patch is declared custom, so a custom_tool_call with the raw patch.
    let answer = post(&server, "/v1/responses", &codex_request(&input)).await;
    let events = checked_stream(&answer);
    assert_eq!(
        shape(&events),
        [
            "response.created",
            "response.output_item.added",
            "response.custom_tool_call_input.delta*",
            "response.custom_tool_call_input.done",
            "response.output_item.done",
            "response.completed"
        ]
    );
    assert_eq!(deltas(&events, "response.custom_tool_call_input.delta").concat(), PATCH);
    let item = &responses_items(&answer.body)[0];
    assert_eq!(item["type"], json!("custom_tool_call"));
    assert_eq!(item["name"], json!("apply_patch"));
    assert_eq!(item["input"], json!(PATCH));
    assert!(item.get("arguments").is_none());
    let call_id = item["call_id"].as_str().unwrap().to_string();
    assert!(call_id.starts_with("call_mock_t2_"), "{call_id}");

    input.push(item.clone());
    input.push(json!({"type": "custom_tool_call_output", "call_id": call_id,
                      "output": "Success. Updated the following files:\nM calc.py\n"}));

    // Turn 3: text in a message item, then the usage.
    let answer = post(&server, "/v1/responses", &codex_request(&input)).await;
    let events = checked_stream(&answer);
    assert_eq!(
        shape(&events),
        [
            "response.created",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta*",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed"
        ]
    );
    assert_eq!(deltas(&events, "response.output_text.delta").concat(), "Done: add returns a + b.");
    assert_eq!(
        responses_items(&answer.body),
        [json!({"id": "msg_mock_3", "type": "message", "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": "Done: add returns a + b.", "annotations": []}]})]
    );
    assert_eq!(
        events.last().unwrap().data["response"]["usage"],
        json!({"input_tokens": 1500, "input_tokens_details": {"cached_tokens": 1400}, "output_tokens": 5,
               "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 1505})
    );

    let seen = server.requests();
    assert_eq!(seen.len(), 3);
    assert!(seen.iter().all(|r| r.routed && r.status == 200 && r.path == "/v1/responses"));
    let served: Vec<_> = seen.iter().map(|r| r.served.clone().unwrap()).collect();
    assert_eq!(served, ["turn 1 of the script", "turn 2 of the script", "turn 3 of the script"]);
    assert_eq!(server.remaining(), 0);
}

#[tokio::test]
async fn a_non_streamed_response_is_one_json_object() {
    let server = start(script(json!({"responses": [
        {"text": "Reading it.", "tool_calls": [{"id": "call_fixed", "name": "exec_command", "arguments": {"cmd": "ls"}}],
         "usage": {"input_tokens": 10, "output_tokens": 4, "cached_tokens": 2}}
    ]})))
    .await;
    let mut request = codex_request(&codex_start());
    request["stream"] = json!(false);
    let answer = post(&server, "/v1/responses", &request).await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.content_type, "application/json");
    assert_eq!(
        answer.json(),
        json!({"id": "resp_mock_1", "object": "response", "created_at": 0, "status": "completed", "model": "gpt-5.5",
               "incomplete_details": null, "error": null,
               "output": [
                   {"id": "msg_mock_1", "type": "message", "status": "completed", "role": "assistant",
                    "content": [{"type": "output_text", "text": "Reading it.", "annotations": []}]},
                   {"id": "fc_mock_1_0", "type": "function_call", "status": "completed", "call_id": "call_fixed",
                    "name": "exec_command", "arguments": "{\"cmd\":\"ls\"}"}],
               "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 2}, "output_tokens": 4,
                         "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 14}})
    );
}

#[tokio::test]
async fn scripted_errors_use_the_responses_error_shape() {
    let server = start(script(json!({"responses": [
        {"status": 429, "retry_after": 2, "error_message": "Rate limit reached. Please try again in 2s."},
        {"status": 400, "error_message": "bad input"},
        {"text": "fine"}
    ]})))
    .await;
    let request = codex_request(&codex_start());
    let answer = post(&server, "/v1/responses", &request).await;
    assert_eq!(answer.status, 429);
    assert_eq!(answer.retry_after.as_deref(), Some("2"));
    assert_eq!(
        answer.json(),
        json!({"error": {"message": "Rate limit reached. Please try again in 2s.", "type": "rate_limit_error",
                         "param": null, "code": "rate_limit_exceeded"}})
    );
    let answer = post(&server, "/v1/responses", &request).await;
    assert_eq!(answer.status, 400);
    assert_eq!(
        answer.json(),
        json!({"error": {"message": "bad input", "type": "invalid_request_error", "param": null, "code": null}})
    );
    let answer = post(&server, "/v1/responses", &request).await;
    assert_eq!(responses_items(&answer.body)[0]["content"][0]["text"], json!("fine"));
    // Nothing is left: the exhaustion error names the request, in the same shape.
    let answer = post(&server, "/v1/responses", &request).await;
    assert_eq!(answer.status, 500);
    let error = &answer.json()["error"];
    assert_eq!(error["code"], json!("server_error"));
    assert!(error["message"].as_str().unwrap().contains("request #4"), "{error}");
}
