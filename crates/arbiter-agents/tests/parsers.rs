//! Every CLI's fixtures, read line by line by its parser, folded and judged: exact
//! sessions, token totals, costs, commands, files, verdicts and endings.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

use std::path::{Path, PathBuf};

use arbiter_agents::{
    AgentEnding, AgentEvent, AgentSummary, CliAgent, CommandRecord, FinalStatus, ending, parse_all, parser,
};
use arbiter_core::money::Usd;

const WORKTREE: &str = "/work/cand";

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn read_fixture(agent: CliAgent, file: &str) -> String {
    let path = fixture_dir().join(agent.name()).join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Feeds the fixture line by line through the public parser seam, as a runner would.
fn run(agent: CliAgent, file: &str) -> (Vec<AgentEvent>, AgentSummary) {
    let mut p = parser(agent);
    let mut events = Vec::new();
    for line in read_fixture(agent, file).lines() {
        events.extend(p.line(line));
    }
    events.extend(p.finish());
    let summary = AgentSummary::fold(&events, Path::new(WORKTREE));
    (events, summary)
}

fn usd(s: &str) -> Usd {
    Usd::parse(s).unwrap()
}

fn cmd(command: &str, exit_code: Option<i32>) -> CommandRecord {
    CommandRecord { command: command.into(), exit_code }
}

fn failed(reason: &str) -> AgentEnding {
    AgentEnding::Failed { reason: reason.into() }
}

fn unparsed_lines(events: &[AgentEvent]) -> Vec<usize> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Unparsed { line, .. } => Some(*line),
            _ => None,
        })
        .collect()
}

// ---------------------------------------------------------------- Claude Code

#[test]
fn claude_success_dedupes_usage_and_prefers_the_result_totals() {
    let (events, s) = run(CliAgent::ClaudeCode, "success.jsonl");
    assert_eq!(s.session_id.as_deref(), Some("5f0c8a2e-3b1d-4c2a-9e7f-1a2b3c4d5e6f"));
    assert_eq!(s.model.as_deref(), Some("claude-opus-4-8"));
    // result.usage: 12 + 3000 cache writes + 9000 cache reads.
    assert_eq!((s.input_tokens, s.output_tokens, s.cached_tokens), (12_012, 420, 9_000));
    assert!(s.usage_seen);
    // Each response's usage as it arrived (msg_01 twice on two lines, counted once), then
    // what the result's cumulative totals add: the fold equals the result's totals.
    let usages: Vec<(u64, u64, u64)> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Usage { input_tokens, output_tokens, cached_tokens, .. } => {
                Some((*input_tokens, *output_tokens, *cached_tokens))
            }
            _ => None,
        })
        .collect();
    assert!(usages.len() >= 2, "usage arrives per response, not only at the end: {usages:?}");
    assert_eq!(usages[0], (2_003, 40, 0), "msg_01: 3 + 2000 cache writes");
    assert_eq!(s.cli_cost, Some(usd("0.3")), "0.30000000000000004 rounds to 12 decimals");
    assert_eq!(
        s.commands,
        [cmd("python3 -m pytest -q", Some(0)), cmd("python3 -c 'import calc; print(calc.add(2, 2))'", None)]
    );
    assert_eq!(s.files_touched, ["calc.py"]);
    assert_eq!((s.tool_calls, s.messages, s.unparsed_lines), (4, 2, 0));
    assert_eq!(s.final_status, Some(FinalStatus::Success));
    assert_eq!(s.final_text.as_deref(), Some("Fixed `add` in calc.py: it now returns a + b, and the tests pass."));
    assert_eq!(ending(CliAgent::ClaudeCode, Some(0), &s), AgentEnding::Success);
    assert!(events.contains(&AgentEvent::ToolResult {
        id: Some("toolu_04".into()),
        is_error: true,
        excerpt: "This command requires approval".into()
    }));
    assert!(events.contains(&AgentEvent::ToolResult {
        id: Some("toolu_02".into()),
        is_error: false,
        excerpt: "The file /work/cand/calc.py has been updated.".into()
    }));
}

#[test]
fn claude_api_error_with_success_subtype_is_a_failure() {
    let (_, s) = run(CliAgent::ClaudeCode, "api_error.jsonl");
    let message =
        r#"API Error: 400 {"type":"error","error":{"type":"invalid_request_error","message":"scripted failure"}}"#;
    assert_eq!(s.session_id.as_deref(), Some("9d1e2f3a-0000-4000-8000-000000000400"));
    assert_eq!(s.final_status, Some(FinalStatus::Error { message: message.into() }));
    assert_eq!((s.input_tokens, s.output_tokens, s.usage_seen), (0, 0, true));
    assert_eq!(s.cli_cost, Some(Usd::ZERO));
    assert_eq!(s.messages, 1);
    assert_eq!(ending(CliAgent::ClaudeCode, Some(1), &s), failed(message));
    // Even an exit 0 would not turn it into a success.
    assert_eq!(ending(CliAgent::ClaudeCode, Some(0), &s), failed(message));
}

#[test]
fn claude_max_turns() {
    let (_, s) = run(CliAgent::ClaudeCode, "max_turns.jsonl");
    assert_eq!(s.session_id.as_deref(), Some("77aa88bb-0000-4000-8000-000000000053"));
    assert_eq!(s.final_status, Some(FinalStatus::MaxTurns));
    assert_eq!(s.final_text, None);
    assert_eq!(s.commands, [cmd("cargo test --quiet", Some(101))]);
    assert_eq!(s.files_touched, ["src/lib.rs"]);
    assert_eq!((s.input_tokens, s.output_tokens, s.cached_tokens), (3_210, 140, 1_500));
    assert_eq!(s.cli_cost, Some(usd("0.0421875")));
    assert_eq!(s.tool_calls, 2);
    assert_eq!(ending(CliAgent::ClaudeCode, Some(1), &s), AgentEnding::MaxTurns);
}

#[test]
fn claude_without_a_result_line_failed_and_keeps_deduplicated_usage() {
    let (events, s) = run(CliAgent::ClaudeCode, "truncated.jsonl");
    assert_eq!(unparsed_lines(&events), [1, 8]);
    assert_eq!(s.unparsed_lines, 2);
    assert_eq!(s.session_id.as_deref(), Some("0e0e0e0e-0000-4000-8000-00000000dead"));
    // msg_21 (two lines, counted once) + msg_22.
    assert_eq!((s.input_tokens, s.output_tokens, s.cached_tokens), (2_108, 55, 1_000));
    assert!(s.files_touched.is_empty(), "the Edit failed: {:?}", s.files_touched);
    assert_eq!((s.tool_calls, s.messages), (2, 1));
    assert_eq!(s.final_status, None);
    assert_eq!(s.final_text.as_deref(), Some("Looking at calc.py."));
    assert_eq!(
        ending(CliAgent::ClaudeCode, None, &s),
        failed("claude-code was killed by a signal without a result line")
    );
    assert_eq!(
        ending(CliAgent::ClaudeCode, Some(0), &s),
        failed("claude-code exited with code 0 without a result line")
    );
}

// ---------------------------------------------------------------- Codex

#[test]
fn codex_success_sums_turn_usage_and_reads_native_items() {
    let (events, s) = run(CliAgent::Codex, "success.jsonl");
    assert_eq!(s.session_id.as_deref(), Some("0199a213-81c0-7800-8aa1-bbab2a035a53"));
    assert_eq!((s.input_tokens, s.output_tokens, s.cached_tokens), (25_963, 152, 25_448));
    assert_eq!(s.model, None);
    assert_eq!(s.cli_cost, None, "codex reports no cost");
    assert_eq!(
        s.commands,
        [
            cmd("/bin/bash -lc 'cat calc.py'", Some(0)),
            cmd("/bin/bash -lc 'python3 -m pytest -q'", Some(1)),
            cmd("/bin/bash -lc 'python3 -m pytest -q'", Some(0)),
        ]
    );
    assert_eq!(s.files_touched, ["calc.py", "tests/test_calc.py"]);
    assert_eq!((s.tool_calls, s.messages, s.unparsed_lines), (6, 2, 0));
    assert!(events.contains(&AgentEvent::Error {
        message: "Model metadata for `mock` not found. Defaulting to fallback metadata; this can degrade performance and cause issues.".into(),
        fatal: false
    }));
    assert!(
        events.contains(&AgentEvent::FileChange { path: "/work/cand/tests/test_calc.py".into(), kind: "add".into() })
    );
    assert_eq!(s.final_status, Some(FinalStatus::Success), "an error item is not a failure");
    assert_eq!(s.final_text.as_deref(), Some("Done: add is fixed and all tests pass."));
    assert_eq!(ending(CliAgent::Codex, Some(0), &s), AgentEnding::Success);
}

#[test]
fn codex_failed_turn() {
    let (_, s) = run(CliAgent::Codex, "turn_failed.jsonl");
    let message =
        r#"unexpected status 400 Bad Request: {"error":{"message":"scripted failure","type":"invalid_request_error"}}"#;
    assert_eq!(s.session_id.as_deref(), Some("0199a213-81c0-7800-8aa1-00000000400a"));
    assert!(!s.usage_seen);
    assert_eq!(s.final_status, Some(FinalStatus::Error { message: message.into() }));
    assert_eq!(ending(CliAgent::Codex, Some(1), &s), failed(message));
}

#[test]
fn codex_error_then_exit_zero_is_a_failure() {
    let (_, s) = run(CliAgent::Codex, "error_exit0.jsonl");
    let message =
        "stream disconnected before completion: error sending request for url (http://127.0.0.1:9/v1/responses)";
    assert_eq!(s.commands, [cmd("/bin/bash -lc 'ls'", Some(1))]);
    assert_eq!((s.input_tokens, s.output_tokens), (900, 15));
    assert_eq!(s.final_status, Some(FinalStatus::Error { message: message.into() }));
    assert_eq!(s.final_text.as_deref(), Some("I could not run any command."));
    assert_eq!(ending(CliAgent::Codex, Some(0), &s), failed(message));
}

#[test]
fn codex_truncated_stream_has_no_verdict() {
    let (events, s) = run(CliAgent::Codex, "truncated.jsonl");
    assert_eq!(unparsed_lines(&events), [1, 6, 7]);
    assert_eq!(s.files_touched, ["calc.py"], "the failed deletion changed nothing");
    assert!(!s.usage_seen);
    assert_eq!(s.final_status, None);
    assert_eq!(ending(CliAgent::Codex, None, &s), failed("codex was killed by a signal without a completed turn"));
}

// ---------------------------------------------------------------- Gemini CLI

#[test]
fn gemini_success_joins_deltas_and_skips_banners() {
    let (events, s) = run(CliAgent::Gemini, "success.jsonl");
    assert_eq!(unparsed_lines(&events), [1]);
    assert_eq!(s.session_id.as_deref(), Some("c0ffee00-1234-4567-89ab-000000000001"));
    assert_eq!(s.model.as_deref(), Some("gemini-2.5-pro"));
    assert_eq!((s.input_tokens, s.output_tokens, s.cached_tokens), (9_600, 250, 4_000));
    assert_eq!(s.cli_cost, None);
    assert_eq!(s.commands, [cmd("python3 -m pytest -q", None)]);
    assert_eq!(s.files_touched, ["calc.py"]);
    assert_eq!((s.tool_calls, s.messages), (3, 2));
    assert!(events.contains(&AgentEvent::Message { text: "I'll read calc.py first.".into() }));
    assert_eq!(s.final_status, Some(FinalStatus::Success));
    assert_eq!(s.final_text.as_deref(), Some("Fixed the bug."));
    assert_eq!(ending(CliAgent::Gemini, Some(0), &s), AgentEnding::Success);
}

#[test]
fn gemini_error_result() {
    let (events, s) = run(CliAgent::Gemini, "error.jsonl");
    let message = "[API Error: 400 Bad Request] scripted failure";
    assert!(events.contains(&AgentEvent::Error { message: "Quota exceeded; retrying in 2s".into(), fatal: false }));
    assert_eq!(s.messages, 0, "the user's own prompt is not an agent message");
    assert_eq!(s.final_status, Some(FinalStatus::Error { message: message.into() }));
    assert_eq!(ending(CliAgent::Gemini, Some(1), &s), failed(message));
}

/// Captured from gemini 0.61.0 pointed (GOOGLE_GEMINI_BASE_URL) at a server that does not
/// speak the Gemini API: its init, the user's prompt echoed, and an error result; exit 1.
#[test]
fn gemini_real_api_error_stream() {
    let (events, s) = run(CliAgent::Gemini, "real_no_gemini_api.jsonl");
    assert_eq!(unparsed_lines(&events), Vec::<usize>::new());
    assert_eq!(s.session_id.as_deref(), Some("dc351710-7f52-4838-8455-5fd76d9f334b"));
    assert_eq!(s.model.as_deref(), Some("auto"));
    assert_eq!((s.usage_seen, s.input_tokens, s.output_tokens), (true, 0, 0));
    let Some(FinalStatus::Error { message }) = &s.final_status else { panic!("{:?}", s.final_status) };
    assert!(message.starts_with("[API Error: ") && message.contains("streamGenerateContent"), "{message}");
    assert!(matches!(ending(CliAgent::Gemini, Some(1), &s), AgentEnding::Failed { .. }));
}

#[test]
fn gemini_turn_limit_exit_53() {
    let (_, s) = run(CliAgent::Gemini, "max_turns.jsonl");
    assert_eq!(s.model.as_deref(), Some("gemini-2.5-flash"));
    assert!(s.files_touched.is_empty(), "the denied write changed nothing");
    assert_eq!(s.commands, [cmd("git status --short", None)]);
    assert_eq!((s.input_tokens, s.output_tokens), (5_000, 200));
    assert_eq!(s.final_text.as_deref(), Some("Still working on it."));
    assert_eq!(ending(CliAgent::Gemini, Some(53), &s), AgentEnding::MaxTurns);
}

#[test]
fn gemini_truncated_result_is_a_failure() {
    let (events, s) = run(CliAgent::Gemini, "truncated.jsonl");
    assert_eq!(unparsed_lines(&events), [1, 6]);
    assert_eq!(s.files_touched, ["calc.py"]);
    assert_eq!(s.messages, 1);
    assert_eq!(s.final_status, None);
    assert_eq!(ending(CliAgent::Gemini, Some(0), &s), failed("gemini exited with code 0 without a result event"));
}

// ---------------------------------------------------------------- OpenCode

#[test]
fn opencode_success_sums_steps() {
    let (_, s) = run(CliAgent::OpenCode, "success.jsonl");
    assert_eq!(s.session_id.as_deref(), Some("ses_5b1c9e0a7ffeXq2mZr8TnK4d"));
    // (1200 + 800 + 0) + (300 + 1500 + 100) input; (80 + 20) + (12 + 0) output.
    assert_eq!((s.input_tokens, s.output_tokens, s.cached_tokens), (3_900, 112, 2_300));
    assert_eq!(s.cli_cost, Some(usd("0.0015")));
    assert_eq!(s.commands, [cmd("python3 -m pytest -q", Some(0))]);
    assert_eq!(s.files_touched, ["calc.py"], "the failed write is not a change");
    assert_eq!((s.tool_calls, s.messages, s.unparsed_lines), (4, 1, 0));
    assert_eq!(s.final_status, Some(FinalStatus::Success));
    assert_eq!(s.final_text.as_deref(), Some("Fixed add in calc.py; the tests pass."));
    assert_eq!(ending(CliAgent::OpenCode, Some(0), &s), AgentEnding::Success);
}

#[test]
fn opencode_error_event_fails_even_with_exit_zero() {
    let (events, s) = run(CliAgent::OpenCode, "error.jsonl");
    assert!(events.contains(&AgentEvent::Error { message: "Bad Request: scripted failure".into(), fatal: true }));
    assert_eq!(s.session_id.as_deref(), Some("ses_5b1c9e0a7ffeXq2mZr8T0400"));
    assert_eq!(s.final_status, Some(FinalStatus::Error { message: "Bad Request: scripted failure".into() }));
    assert_eq!(ending(CliAgent::OpenCode, Some(0), &s), failed("Bad Request: scripted failure"));
}

#[test]
fn opencode_stream_cut_between_steps_has_no_verdict() {
    let (events, s) = run(CliAgent::OpenCode, "truncated.jsonl");
    assert_eq!(unparsed_lines(&events), [5]);
    assert_eq!(s.commands, [cmd("pytest -x", Some(1))]);
    assert_eq!((s.input_tokens, s.output_tokens), (500, 40));
    assert_eq!(s.cli_cost, Some(Usd::ZERO));
    assert_eq!(s.final_status, None);
    assert_eq!(s.final_text.as_deref(), Some("Let me run the tests."));
    assert_eq!(ending(CliAgent::OpenCode, Some(0), &s), failed("opencode exited with code 0 without a final step"));
}

// ---------------------------------------------------------------- aider

#[test]
fn aider_success_reads_tokens_cost_and_edits() {
    let (events, s) = run(CliAgent::Aider, "success.txt");
    assert_eq!(s.model.as_deref(), Some("openai/mock"));
    assert_eq!((s.input_tokens, s.output_tokens, s.cached_tokens), (5_500, 78, 1_200));
    assert_eq!(s.cli_cost, Some(usd("0.0123")), "the session figure is the total");
    // Each Cost line reports what it adds to the session total.
    let costs: Vec<Usd> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Cost { usd } => Some(*usd),
            _ => None,
        })
        .collect();
    assert_eq!(costs, [usd("0.0087"), usd("0.0036")]);
    assert_eq!(s.files_touched, ["calc.py", "tests/test_calc.py"]);
    assert!(s.commands.is_empty());
    assert_eq!((s.unparsed_lines, s.final_status.clone()), (0, None));
    assert_eq!(ending(CliAgent::Aider, Some(0), &s), AgentEnding::Success);
    assert_eq!(ending(CliAgent::Aider, Some(1), &s), failed("aider exited with code 1"));
}

#[test]
fn aider_unrecovered_api_error_fails_despite_exit_zero() {
    let (events, s) = run(CliAgent::Aider, "api_error.txt");
    let message =
        "litellm.BadRequestError: OpenAIException - Error code: 400 - {'error': {'message': 'scripted failure'}}";
    assert_eq!(events.iter().filter(|e| matches!(e, AgentEvent::Error { fatal: false, .. })).count(), 2);
    assert!(!s.usage_seen);
    assert_eq!(s.final_status, Some(FinalStatus::Error { message: message.into() }));
    assert_eq!(ending(CliAgent::Aider, Some(0), &s), failed(message));
}

#[test]
fn aider_without_prices_reports_tokens_only() {
    let (_, s) = run(CliAgent::Aider, "no_price.txt");
    assert_eq!((s.input_tokens, s.output_tokens, s.cached_tokens), (12_000, 1_500, 0));
    assert_eq!(s.cli_cost, None);
    assert_eq!(s.files_touched, ["calc.py"]);
    assert_eq!(ending(CliAgent::Aider, Some(0), &s), AgentEnding::Success);
}

// ---------------------------------------------------------------- villani-code

#[test]
fn villani_text_is_the_final_message_and_the_exit_code_decides() {
    let (events, s) = run(CliAgent::VillaniCode, "success.txt");
    assert_eq!(
        events,
        [AgentEvent::Message { text: "I fixed the bug in calc.py: add now returns a + b.\n\nAll tests pass.".into() }]
    );
    assert_eq!(s.final_text.as_deref(), Some("I fixed the bug in calc.py: add now returns a + b.\n\nAll tests pass."));
    assert!(!s.usage_seen);
    assert_eq!(ending(CliAgent::VillaniCode, Some(0), &s), AgentEnding::Success);

    let (events, s) = run(CliAgent::VillaniCode, "crash.txt");
    assert!(events.is_empty(), "the auto-approval banner is not a message");
    assert_eq!(ending(CliAgent::VillaniCode, Some(1), &s), failed("villani-code exited with code 1"));
}

// ---------------------------------------------------------------- robustness

/// Every fixture of every CLI, by agent.
fn all_fixtures() -> Vec<(CliAgent, String)> {
    let mut out = Vec::new();
    for agent in CliAgent::ALL {
        let dir = fixture_dir().join(agent.name());
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert!(names.len() >= 2, "{agent} has fixtures");
        out.extend(names.into_iter().map(|n| (*agent, n)));
    }
    out
}

#[test]
fn a_stream_cut_anywhere_never_panics_and_only_the_cut_line_is_unparsed() {
    for (agent, name) in all_fixtures() {
        let text = read_fixture(agent, &name);
        let whole_unparsed = unparsed_lines(&parse_all(agent, &text));
        for cut in (0..text.len()).step_by(5).filter(|c| text.is_char_boundary(*c)) {
            let prefix = &text[..cut];
            let cut_line = prefix.lines().count();
            for line in unparsed_lines(&parse_all(agent, prefix)) {
                assert!(
                    whole_unparsed.contains(&line) || line == cut_line,
                    "{agent}/{name} cut at {cut}: line {line} unparsed (cut line {cut_line})"
                );
            }
        }
    }
}

#[test]
fn garbage_never_panics_any_parser() {
    let garbage = [
        "\u{0}\u{1}\u{2}",
        "{",
        "}",
        "{}",
        "null",
        "[]",
        "{\"type\":null}",
        "{\"type\":\"result\"}",
        "{\"type\":\"result\",\"usage\":\"many\",\"total_cost_usd\":\"NaN\",\"is_error\":\"no\"}",
        "{\"type\":\"assistant\",\"message\":{\"content\":\"just text\"}}",
        "{\"type\":\"user\",\"message\":{\"content\":[{\"type\":\"tool_result\",\"content\":{\"nested\":[1]}}]}}",
        "{\"type\":\"item.completed\",\"item\":{\"type\":\"file_change\",\"changes\":\"all\"}}",
        "{\"type\":\"item.completed\",\"item\":{\"type\":\"command_execution\",\"exit_code\":1e40}}",
        "{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":-5,\"output_tokens\":1.5e300}}",
        "{\"type\":\"step_finish\",\"part\":{\"tokens\":[],\"cost\":1e300}}",
        "{\"type\":\"step_finish\",\"part\":{\"tokens\":{\"input\":1e300,\"output\":1e300,\"reasoning\":1e300,\"cache\":{\"read\":1e300,\"write\":1e300}}}}",
        "{\"type\":\"assistant\",\"message\":{\"usage\":{\"input_tokens\":1e300,\"cache_creation_input_tokens\":1e300,\"cache_read_input_tokens\":1e300}}}",
        "{\"type\":\"assistant\",\"message\":{\"id\":\"other\",\"usage\":{\"input_tokens\":1e300}}}",
        "{\"type\":\"message\",\"role\":\"assistant\",\"content\":7,\"delta\":\"yes\"}",
        "{\"type\":\"tool_use\",\"part\":null,\"tool_id\":[],\"parameters\":\"x\"}",
        "{\"type\":\"error\",\"error\":42}",
        "Tokens: k sent, ? received. Cost: $ session.",
        "Tokens: 99999999999999999999M sent, 1 received.",
        "Applied edit to ",
        "Model: ",
        "litellm.",
        "\u{feff}{\"type\":\"thread.started\",\"thread_id\":\"t\"}",
    ];
    for agent in CliAgent::ALL {
        let mut p = parser(*agent);
        for (i, line) in garbage.iter().enumerate() {
            let events = p.line(line);
            for e in &events {
                if let AgentEvent::Unparsed { line, .. } = e {
                    assert_eq!(*line, i + 1, "{agent}: lines are numbered from 1");
                }
            }
        }
        let _ = p.finish();
    }
}

#[test]
fn unknown_event_types_and_fields_yield_nothing() {
    let unknown = [
        (CliAgent::ClaudeCode, r#"{"type":"system","subtype":"status","status":"compacting","new_field":[1,2]}"#),
        (CliAgent::ClaudeCode, r#"{"type":"control_request","request":{}}"#),
        (CliAgent::Codex, r#"{"type":"item.completed","item":{"id":"i","type":"todo_list","items":[]}}"#),
        (CliAgent::Codex, r#"{"type":"turn.started","extra":{"a":1}}"#),
        (CliAgent::Gemini, r#"{"type":"thought","subject":"x","timestamp":"t"}"#),
        (CliAgent::OpenCode, r#"{"type":"reasoning","timestamp":1,"part":{"type":"reasoning","text":"x"}}"#),
    ];
    for (agent, line) in unknown {
        let mut p = parser(agent);
        assert_eq!(p.line(line), [], "{agent}: {line}");
    }
}
