//! villani-code's own debug telemetry (`--debug trace --debug-dir DIR`), read after it
//! exits: its text output says almost nothing, but its trace says what it did.
//!
//! The trace is `DIR/<run id>/` (the child holding `final_summary.json` or `summary.json`,
//! the newest when there are several; `DIR` itself when it holds one):
//! `session_meta.json` (`run_id`, `model`), `tool_calls.jsonl` (`tool_call_id`,
//! `tool_name`, `status`, `args` or `normalized_args_summary`, `result_summary`, `error`),
//! `commands.jsonl` (`command`, `exit_code`, `stdout`, `stderr`), `patches.jsonl`
//! (`file_path`, `ok`), `model_responses.jsonl` (each with `usage`), and the summary
//! (`tokens_input`|`input_tokens`, `tokens_output`|`output_tokens`). Token counts come from
//! the responses' `usage` when they are there (summed), else from the summary.
//!
//! The directory is the agent's to write (it lives in the agent's home): everything read is
//! bounded (file size, line count, excerpts) and a malformed line is skipped, never trusted.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::event::{AgentEvent, excerpt};

/// The debug directory, relative to the agent home.
pub(crate) const DEBUG_DIR: &str = "villani-debug";

/// The most read of one trace file, and the most lines taken from it.
const MAX_FILE_BYTES: u64 = 16 << 20;
const MAX_LINES: usize = 10_000;

/// The trace's files, as text (empty when absent).
#[derive(Default)]
pub(crate) struct TraceFiles {
    pub session_meta: String,
    pub summary: String,
    pub tool_calls: String,
    pub commands: String,
    pub patches: String,
    pub model_responses: String,
}

/// Reads the trace of the run whose agent home is `home`, if it left one.
pub(crate) fn read(home: &Path) -> Option<TraceFiles> {
    let dir = trace_dir(&home.join(DEBUG_DIR))?;
    let text = |name: &str| {
        let path = dir.join(name);
        let small = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file() && m.len() <= MAX_FILE_BYTES);
        if small { std::fs::read_to_string(path).unwrap_or_default() } else { String::new() }
    };
    let summary =
        Some(text("final_summary.json")).filter(|s| !s.trim().is_empty()).unwrap_or_else(|| text("summary.json"));
    Some(TraceFiles {
        session_meta: text("session_meta.json"),
        summary,
        tool_calls: text("tool_calls.jsonl"),
        commands: text("commands.jsonl"),
        patches: text("patches.jsonl"),
        model_responses: text("model_responses.jsonl"),
    })
}

fn holds_summary(dir: &Path) -> bool {
    dir.join("final_summary.json").is_file() || dir.join("summary.json").is_file()
}

/// `debug` itself when it holds a summary, else its newest child that does. Symlinks are
/// not followed.
fn trace_dir(debug: &Path) -> Option<PathBuf> {
    // A debug directory the agent replaced with a symlink points outside its home.
    if !std::fs::symlink_metadata(debug).is_ok_and(|m| m.is_dir()) {
        return None;
    }
    if holds_summary(debug) {
        return Some(debug.to_path_buf());
    }
    std::fs::read_dir(debug)
        .ok()?
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .filter(|p| holds_summary(p))
        .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
}

fn lines(text: &str) -> impl Iterator<Item = Value> + '_ {
    text.lines().take(MAX_LINES).filter_map(|l| serde_json::from_str::<Value>(l).ok()).filter(Value::is_object)
}

fn first_u64(v: &Value, keys: &[&str]) -> Option<u64> {
    keys.iter().find_map(|k| v.get(*k).and_then(Value::as_u64))
}

fn text_of(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

/// The events the trace records, in the order a transcript reads them: the session, each
/// tool call with its result, each command, each applied patch, then the token usage.
pub(crate) fn events(files: &TraceFiles) -> Vec<AgentEvent> {
    let mut out = Vec::new();
    let meta: Value = serde_json::from_str(&files.session_meta).unwrap_or(Value::Null);
    if let Some(id) = text_of(&meta, "run_id").filter(|s| !s.is_empty()) {
        out.push(AgentEvent::Session { id: excerpt(&id) });
    }
    for call in lines(&files.tool_calls) {
        let id = text_of(&call, "tool_call_id");
        let name = text_of(&call, "tool_name").unwrap_or_else(|| "tool".into());
        let input = call.get("args").or_else(|| call.get("normalized_args_summary")).cloned().unwrap_or(Value::Null);
        let input = match input {
            Value::String(s) => Value::String(excerpt(&s)),
            other if other.to_string().len() > crate::event::EXCERPT_LIMIT => {
                Value::String(excerpt(&other.to_string()))
            }
            other => other,
        };
        out.push(AgentEvent::ToolCall { id: id.clone(), name: excerpt(&name), input });
        let error = text_of(&call, "error").filter(|e| !e.is_empty());
        let failed = error.is_some()
            || call.get("status").and_then(Value::as_str).is_some_and(|s| s == "error" || s == "failed");
        let result = error.or_else(|| text_of(&call, "result_summary")).unwrap_or_default();
        out.push(AgentEvent::ToolResult { id, is_error: failed, excerpt: excerpt(&result) });
    }
    for c in lines(&files.commands) {
        let Some(command) = text_of(&c, "command").filter(|s| !s.is_empty()) else { continue };
        let output =
            [text_of(&c, "stdout"), text_of(&c, "stderr")].into_iter().flatten().collect::<Vec<_>>().join("\n");
        let exit_code = c.get("exit_code").and_then(Value::as_i64).and_then(|n| i32::try_from(n).ok());
        out.push(AgentEvent::Command { command: excerpt(&command), exit_code, output_excerpt: excerpt(&output) });
    }
    for p in lines(&files.patches) {
        if let (Some(path), true) = (text_of(&p, "file_path"), p.get("ok").and_then(Value::as_bool).unwrap_or(true)) {
            out.push(AgentEvent::FileChange { path: excerpt(&path), kind: "update".into() });
        }
    }
    let (mut input, mut output, mut seen) = (0u64, 0u64, false);
    for r in lines(&files.model_responses) {
        let Some(usage) = r.get("usage").filter(|u| u.is_object()) else { continue };
        seen = true;
        input = input.saturating_add(first_u64(usage, &["prompt_tokens", "input_tokens", "tokens_input"]).unwrap_or(0));
        output = output
            .saturating_add(first_u64(usage, &["completion_tokens", "output_tokens", "tokens_output"]).unwrap_or(0));
    }
    if !seen {
        let summary: Value = serde_json::from_str(&files.summary).unwrap_or(Value::Null);
        if let (Some(i), Some(o)) = (
            first_u64(&summary, &["tokens_input", "input_tokens"]),
            first_u64(&summary, &["tokens_output", "output_tokens"]),
        ) {
            (input, output, seen) = (i, o, true);
        }
    }
    if seen {
        let model = text_of(&meta, "model").map(|m| excerpt(&m));
        out.push(AgentEvent::Usage { input_tokens: input, output_tokens: output, cached_tokens: 0, model });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files() -> TraceFiles {
        TraceFiles {
            session_meta: r#"{"run_id": "run-7", "model": "coder", "provider": "openai"}"#.into(),
            summary: r#"{"tokens_input": 999, "tokens_output": 99}"#.into(),
            tool_calls: concat!(
                r#"{"tool_call_id": "t1", "turn_index": 0, "tool_name": "Read", "status": "ok", "args": {"file_path": "calc.py"}, "result_summary": "2 lines"}"#,
                "\nnot json\n",
                r#"{"tool_call_id": "t2", "tool_name": "Bash", "status": "error", "error": "exit 1"}"#
            )
            .into(),
            commands: r#"{"ts": 1, "tool_call_id": "t2", "command": "python3 -m unittest -q", "exit_code": 1, "stdout": "", "stderr": "FAILED"}"#.into(),
            patches: "{\"file_path\": \"calc.py\", \"ok\": true}\n{\"file_path\": \"bad.py\", \"ok\": false}\n".into(),
            model_responses: "{\"usage\": {\"prompt_tokens\": 300, \"completion_tokens\": 20}}\n{\"usage\": {\"input_tokens\": 200, \"output_tokens\": 10}}\n".into(),
        }
    }

    #[test]
    fn the_trace_becomes_tool_calls_commands_edits_and_usage() {
        let ev = events(&files());
        assert_eq!(ev[0], AgentEvent::Session { id: "run-7".into() });
        assert!(matches!(&ev[1], AgentEvent::ToolCall { name, .. } if name == "Read"));
        assert_eq!(ev[2], AgentEvent::ToolResult { id: Some("t1".into()), is_error: false, excerpt: "2 lines".into() });
        assert_eq!(ev[4], AgentEvent::ToolResult { id: Some("t2".into()), is_error: true, excerpt: "exit 1".into() });
        assert_eq!(
            ev[5],
            AgentEvent::Command {
                command: "python3 -m unittest -q".into(),
                exit_code: Some(1),
                output_excerpt: "\nFAILED".into()
            }
        );
        assert_eq!(ev[6], AgentEvent::FileChange { path: "calc.py".into(), kind: "update".into() });
        // The responses' usage, summed, wins over the summary's totals.
        assert_eq!(
            ev[7],
            AgentEvent::Usage { input_tokens: 500, output_tokens: 30, cached_tokens: 0, model: Some("coder".into()) }
        );
        assert_eq!(ev.len(), 8);
    }

    #[test]
    fn without_responses_the_summary_gives_the_tokens_and_nothing_is_nothing() {
        let f = TraceFiles { model_responses: String::new(), ..files() };
        assert!(events(&f).contains(&AgentEvent::Usage {
            input_tokens: 999,
            output_tokens: 99,
            cached_tokens: 0,
            model: Some("coder".into())
        }));
        assert!(events(&TraceFiles::default()).is_empty());
    }

    #[test]
    fn the_newest_run_directory_is_read_and_symlinks_are_not_followed() {
        let home = tempfile::tempdir().unwrap();
        let debug = home.path().join(DEBUG_DIR);
        for (run, tokens) in [("old", 1), ("new", 2)] {
            std::fs::create_dir_all(debug.join(run)).unwrap();
            std::fs::write(
                debug.join(run).join("final_summary.json"),
                format!("{{\"tokens_input\": {tokens}, \"tokens_output\": 0}}"),
            )
            .unwrap();
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let read = read(home.path()).unwrap();
        assert!(read.summary.contains("\"tokens_input\": 2"), "{}", read.summary);
        std::os::unix::fs::symlink("/etc/passwd", debug.join("new").join("commands.jsonl")).unwrap();
        assert_eq!(super::read(home.path()).unwrap().commands, "", "a symlink is not read");
        // The whole debug directory a symlink to elsewhere: nothing is read.
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::write(elsewhere.path().join("final_summary.json"), "{\"tokens_input\": 5, \"tokens_output\": 5}")
            .unwrap();
        std::fs::remove_dir_all(&debug).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), &debug).unwrap();
        assert!(super::read(home.path()).is_none());
    }
}
