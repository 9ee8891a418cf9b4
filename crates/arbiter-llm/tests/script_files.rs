//! Mock scripts load from JSON and TOML files (the same script either way) and drive a
//! whole tool turn: a rate limit, a tool call, and the answer matched on the tool result.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use std::path::PathBuf;

use arbiter_llm::{ChatRequest, Message, MockScript, MockScriptError, StopReason};
use common::{PROVIDERS, endpoint, fast_client, start};
use serde_json::json;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

#[tokio::test]
async fn json_and_toml_scripts_are_the_same_and_drive_a_tool_turn() {
    let from_json = MockScript::from_file(fixture("tool-turn.json")).unwrap();
    let from_toml = MockScript::from_file(fixture("tool-turn.toml")).unwrap();
    assert_eq!(from_json, from_toml);
    for provider in PROVIDERS {
        let server = start(from_json.clone()).await;
        let e = endpoint("m", provider, &server);
        let client = fast_client();
        let mut request = ChatRequest::user("make the test pass");
        let first = client.chat(&e, &request).await.unwrap();
        assert_eq!(first.attempts, 2, "{provider}");
        assert_eq!(first.text, "I will run the tests.");
        assert_eq!(first.tool_calls[0].arguments, json!({"command": "cargo test", "timeout_s": 60}));
        request.messages.push(Message::from_response(&first));
        request.messages.push(Message::ToolResult {
            tool_call_id: first.tool_calls[0].id.clone(),
            content: "ok".into(),
            is_error: false,
        });
        let second = client.chat(&e, &request).await.unwrap();
        assert_eq!(second.stop_reason, StopReason::EndTurn);
        assert_eq!(second.text, "The test passes now.");
        assert_eq!(second.usage.map(|u| (u.input_tokens, u.cached_tokens)), Some((900, 800)));
        // One of the two matched answers is left: the one for the other format.
        assert_eq!(server.remaining(), 1, "{provider}");
    }
}

#[test]
fn bad_script_files_say_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.json");
    let err = MockScript::from_file(&missing).unwrap_err();
    assert!(matches!(err, MockScriptError::Read { .. }));
    assert!(err.to_string().contains("missing.json"), "{err}");
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[[responses]]\ntxt = \"typo\"\n").unwrap();
    let err = MockScript::from_file(&bad).unwrap_err().to_string();
    assert!(err.contains("bad.toml") && err.contains("txt"), "{err}");
}
