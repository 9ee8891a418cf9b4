//! `conversations` with `"match": {"model": …}`: candidates of one tournament, told
//! apart only by the model name their CLI sends, get different scripts from one mock, in
//! queue mode and, composed with history turns, per model conversation.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod raw;

use raw::{anthropic_message, http, post, script, start};
use serde_json::{Value, json};

fn user(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

fn chat(model: &str, messages: &[Value]) -> Value {
    json!({"model": model, "messages": messages})
}

fn text_of(answer: &raw::Answer) -> String {
    answer.json()["choices"][0]["message"]["content"].as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn conversations_are_chosen_by_the_request_model() {
    let server = start(script(json!({
        "responses": [{"text": "default", "repeat": true}],
        "conversations": [
            {"match": {"model": "fixer"}, "responses": [{"text": "fixer 1"}, {"text": "fixer 2"}]},
            {"match": {"model": "breaker", "path": "/v1/chat/completions"}, "responses": [{"text": "breaker 1"}]}
        ]
    })))
    .await;
    let ask = async |model: &str| post(&server, "/v1/chat/completions", &chat(model, &[user("go")])).await;
    assert_eq!(text_of(&ask("breaker").await), "breaker 1");
    assert_eq!(text_of(&ask("fixer").await), "fixer 1");
    assert_eq!(text_of(&ask("mock").await), "default");
    assert_eq!(text_of(&ask("fixer").await), "fixer 2");
    // Fixer's queue is used up: it does not borrow from the default responses.
    let answer = ask("fixer").await;
    assert_eq!(answer.status, 500);
    assert!(answer.body.contains(r#"conversation 1 (model \"fixer\")"#), "{}", answer.body);
    // The model matcher is exact, and every given field must fit: the breaker
    // conversation is for chat completions only.
    assert_eq!(text_of(&ask("fixer-2").await), "default");
    let body = json!({"model": "breaker", "max_tokens": 9, "messages": [user("go")]});
    let answer = post(&server, "/v1/messages", &body).await;
    assert_eq!(answer.json()["content"][0]["text"], json!("default"));

    let served: Vec<String> = server.requests().iter().map(|r| r.served.clone().unwrap()).collect();
    assert_eq!(served[0], r#"response 1 of conversation 2 (model "breaker", path "/v1/chat/completions")"#);
    assert_eq!(served[2], "response 1 of the default responses");
    assert_eq!(server.remaining(), 0);

    // GET /v1/models lists the conversations' models after the default.
    let list: Value =
        http().get(format!("{}/models", server.openai_base_url())).send().await.unwrap().json().await.unwrap();
    let ids: Vec<&str> = list["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["mock", "fixer", "breaker"]);
}

#[tokio::test]
async fn per_model_history_conversations_advance_independently() {
    let turn = |name: &str, text: &str| json!({"tool_calls": [{"name": name, "arguments": {"file_path": "calc.py", "note": text}}]});
    let server = start(script(json!({
        "turns": "history",
        "conversations": [
            {"match": {"model": "fixer"}, "responses": [turn("Read", "fixer"), turn("Edit", "fixer"), {"text": "fixed"}]},
            {"match": {"model": "breaker"}, "responses": [turn("Write", "breaker"), {"text": "broken"}]}
        ]
    })))
    .await;
    let tools = json!([{"name": "Read", "input_schema": {}}, {"name": "Edit", "input_schema": {}},
                       {"name": "Write", "input_schema": {}}]);
    let mut histories = [("fixer", vec![user("Fix add in calc.py")]), ("breaker", vec![user("Fix add in calc.py")])];
    let mut got: Vec<(String, String)> = Vec::new();
    // fixer, breaker, fixer, breaker, fixer: each by its own history.
    for k in [0, 1, 0, 1, 0] {
        let (model, messages) = &mut histories[k];
        let body = json!({"model": model, "max_tokens": 100, "stream": true, "tools": tools, "messages": messages});
        let answer = post(&server, "/v1/messages", &body).await;
        let message = anthropic_message(&answer.body);
        let block = message["content"][0].clone();
        let did = block["name"].as_str().or(block["text"].as_str()).unwrap().to_string();
        got.push((model.to_string(), did));
        messages.push(json!({"role": "assistant", "content": message["content"]}));
        if block["type"] == "tool_use" {
            messages.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": block["id"], "content": "ok"}]}));
        }
    }
    let expected =
        [("fixer", "Read"), ("breaker", "Write"), ("fixer", "Edit"), ("breaker", "broken"), ("fixer", "fixed")];
    assert_eq!(got, expected.map(|(m, d)| (m.to_string(), d.to_string())));
    // A model no conversation matches, with no default responses: a 400 that says so.
    let answer =
        post(&server, "/v1/messages", &json!({"model": "other", "max_tokens": 5, "messages": [user("x")]})).await;
    assert_eq!(answer.status, 400);
    assert!(answer.body.contains("the default responses scripts 0"), "{}", answer.body);
    assert_eq!(server.remaining(), 0);
}
