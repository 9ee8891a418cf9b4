//! End-to-end tests of the built-in coding agent: the real `arbiter` binary, real git
//! repositories, and a scripted model server (`arbiter mock-llm`) running as a separate
//! process, spoken to over real HTTP in both wire formats (OpenAI and Anthropic).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use common::*;
use serde_json::{Value, json};

/// The fixed calculator of the Python fixture.
const FIXED_CALC_PY: &str = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n";

/// A repository with the buggy calculator and its tests, committed, with `.arbiter/`.
fn calc_repo() -> TestRepo {
    let repo = TestRepo::new();
    repo.write("calc.py", CALC_PY);
    repo.write("test_calc.py", TEST_CALC_PY);
    repo.write(".gitignore", "__pycache__/\n");
    repo.commit_all("calc with a bug");
    repo.arbiter(&["init"]).assert_code(0);
    repo
}

/// `arbiter backend add NAME --provider PROVIDER --model MODEL --base-url URL [extra...]`.
fn add_backend(repo: &TestRepo, name: &str, provider: &str, model: &str, url: &str, extra: &[&str]) {
    let mut args = vec!["backend", "add", name, "--provider", provider, "--model", model, "--base-url", url];
    args.extend_from_slice(extra);
    repo.arbiter(&args).assert_code(0);
}

/// The flags of a one-candidate tournament with the built-in agent.
fn builtin_run<'a>(task: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["run", "--task", task, "--runner", "builtin", "--candidates", "1", "--timeout-seconds", "120"];
    args.extend_from_slice(extra);
    args
}

/// The scripted tool call that fixes `add`.
fn fix_call() -> Value {
    json!({"name": "edit_file", "arguments": {"path": "calc.py", "old": "    return a - b\n", "new": "    return a + b\n"}})
}

/// The ranking entry of one candidate.
fn ranked<'a>(ranking: &'a Value, id: &str) -> &'a Value {
    ranking["candidates"]
        .as_array()
        .expect("ranking.json has a candidates array")
        .iter()
        .find(|c| c["candidate_id"] == id)
        .unwrap_or_else(|| panic!("no {id} in ranking.json: {ranking:#}"))
}

/// The entries of one type in a transcript.
fn entries<'a>(transcript: &'a [Value], kind: &str) -> Vec<&'a Value> {
    transcript.iter().filter(|e| e["type"] == kind).collect()
}

/// The single run directory under `dir/.arbiter/runs`.
fn only_run_dir(dir: &Path) -> PathBuf {
    let runs = dir.join(".arbiter/runs");
    let dirs: Vec<PathBuf> = fs::read_dir(&runs)
        .unwrap_or_else(|e| panic!("read {}: {e}", runs.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(dirs.len(), 1, "expected one run directory under {}: {dirs:?}", runs.display());
    dirs.into_iter().next().unwrap_or_default()
}

/// An amount in units of 10⁻⁸ USD as a decimal string without trailing zeros.
fn usd_decimal(units_1e8: u64) -> String {
    let text = format!("{}.{:08}", units_1e8 / 100_000_000, units_1e8 % 100_000_000);
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[test]
fn demo_runs_a_scripted_tournament_and_applies_the_fixer() {
    let scratch = tempfile::tempdir().expect("temp dir");
    let dir = scratch.path().join("demo");
    fs::create_dir(&dir).expect("create the demo dir");
    let run = run_arbiter_in(scratch.path(), &["demo", "--dir", dir.to_str().expect("utf-8 path"), "--json"]);
    run.assert_code(0);
    let summary: Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("demo --json printed no JSON ({e}):\n{}", run.stdout));
    assert_eq!(summary["winner"], "c01", "{summary:#}");
    let c01 = summary["candidates"]
        .as_array()
        .expect("candidates")
        .iter()
        .find(|c| c["candidate_id"] == "c01")
        .unwrap_or_else(|| panic!("no c01: {summary:#}"));
    assert_eq!(c01["runner"], "builtin/demo-fixer", "{summary:#}");

    let run_dir = only_run_dir(&dir);
    let ranking = read_json(&run_dir.join("comparisons/ranking.json"));
    assert_eq!(ranked(&ranking, "c01")["eligible"], true, "{ranking:#}");
    for id in ["c02", "c03", "c04"] {
        let c = ranked(&ranking, id);
        assert_eq!(c["eligible"], false, "{c:#}");
        assert_eq!(c["rejection"]["code"], "gates_failed", "{c:#}");
    }
    let calc = fs::read_to_string(dir.join("calc.py")).expect("calc.py");
    assert!(calc.contains("return a + b"), "the winner was not applied:\n{calc}");

    // The cost is exactly what the script's usages cost at 0.15/0.60 USD per million tokens.
    let script: Value = serde_json::from_str(include_str!("../src/demo/script.json")).expect("the demo script is JSON");
    let responses = script["responses"].as_array().expect("responses");
    let (input, output) = responses.iter().fold((0u64, 0u64), |(i, o), r| {
        (
            i + r["usage"]["input_tokens"].as_u64().expect("input_tokens"),
            o + r["usage"]["output_tokens"].as_u64().expect("output_tokens"),
        )
    });
    // 0.15 USD per Mtok is 15 × 10⁻⁸ USD per token; 0.60 is 60 × 10⁻⁸.
    let expected = usd_decimal(input * 15 + output * 60);
    let cost = read_json(&run_dir.join("cost_summary.json"));
    assert_eq!(cost["total"]["calls"], 16, "{cost:#}");
    assert_eq!(responses.len(), 16, "the script has one response per call");
    assert_eq!(cost["complete"], true, "{cost:#}");
    assert_eq!(cost["total"]["input_tokens"], input, "{cost:#}");
    assert_eq!(cost["total"]["output_tokens"], output, "{cost:#}");
    assert_eq!(cost["total"]["known_cost"].as_str(), Some(expected.as_str()), "{cost:#}");
    assert_eq!(summary["cost"]["known_usd"].as_str(), Some(expected.as_str()), "{summary:#}");

    // Without --json, the demo says its model is scripted.
    let dir2 = scratch.path().join("demo-text");
    let run = run_arbiter_in(scratch.path(), &["demo", "--dir", dir2.to_str().expect("utf-8 path")]);
    run.assert_code(0);
    assert!(run.stderr.contains("SCRIPTED"), "stderr:\n{}", run.stderr);
    assert!(run.stdout.contains("scripted"), "stdout:\n{}", run.stdout);
    assert!(fs::read_to_string(dir2.join("calc.py")).expect("calc.py").contains("return a + b"));
}

#[test]
fn the_builtin_agent_fixes_a_bug_over_the_anthropic_format() {
    let mut mock = MockLlm::start(&json!({"responses": [
        {"text": "add() subtracts; make it add.", "tool_calls": [fix_call()]},
        {"text": "Done.", "tool_calls": [{"name": "finish", "arguments": {"summary": "add() now adds."}}]},
    ]}));
    let repo = calc_repo();
    add_backend(&repo, "b1", "anthropic", "claude-mock", &mock.anthropic_url(), &[]);
    let run = repo.arbiter(&builtin_run("Fix add() in calc.py", &["--backend", "b1", "--verify", VERIFY_PY]));
    run.assert_code(0);

    let dir = repo.run_dir();
    assert_candidates_prepared(&dir);
    assert_eq!(read_json(&dir.join("selection.json"))["winner"], "c01");
    let evidence = read_json(&dir.join("candidates/c01/evidence.json"));
    assert_eq!(evidence["status"], "finished", "{evidence:#}");
    // Candidates are labelled with their runner and the backend they use.
    assert_eq!(evidence["runner"], "builtin/b1", "{evidence:#}");
    let summary = read_json(&dir.join("candidates/c01/runner_summary.json"));
    assert_eq!(summary["kind"], "builtin", "{summary:#}");
    assert!(summary["command"].as_str().unwrap_or_default().contains("b1 (claude-mock)"), "{summary:#}");
    let transcript = read_json_lines(&dir.join("candidates/c01/transcript.jsonl"));
    let assistant = entries(&transcript, "assistant");
    assert_eq!(assistant.len(), 2, "{transcript:#?}");
    assert_eq!(assistant[0]["tool_calls"][0]["name"], "edit_file", "{transcript:#?}");
    let results = entries(&transcript, "tool_result");
    assert_eq!(results.len(), 2, "{transcript:#?}");
    assert_eq!(results[0]["name"], "edit_file");
    assert_eq!(results[0]["is_error"], false, "{transcript:#?}");
    let end = transcript.last().expect("a transcript");
    assert_eq!(end["type"], "end", "{transcript:#?}");
    assert_eq!(end["reason"], "finished", "{end:#}");
    assert_eq!(repo.read("calc.py"), FIXED_CALC_PY);

    // Both requests went over the Anthropic Messages API.
    let requests = mock.chat_requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    assert!(requests.iter().all(|r| r.contains(" POST /v1/messages ")), "{requests:#?}");
}

#[test]
fn the_step_limit_ends_the_loop_and_the_patch_so_far_is_evaluated() {
    let mut mock = MockLlm::start(&json!({"responses": [
        {"text": "Fix it first.", "tool_calls": [fix_call()]},
        {"text": "Let me read it again.", "tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}], "repeat": true},
    ]}));
    let repo = calc_repo();
    add_backend(&repo, "b1", "openai-compatible", "looper", &mock.openai_url(), &[]);
    let run = repo.arbiter(&builtin_run(
        "Fix add() in calc.py",
        &["--backend", "b1", "--verify", VERIFY_PY, "--max-steps", "3", "--apply", "none"],
    ));
    run.assert_code(0);

    let dir = repo.run_dir();
    assert_candidates_prepared(&dir);
    let evidence = read_json(&dir.join("candidates/c01/evidence.json"));
    assert_eq!(evidence["status"], "limit_reached", "{evidence:#}");
    let limit = evidence["agent"]["limit_reached"].as_str().unwrap_or_default();
    assert!(limit.contains("max_steps"), "{evidence:#}");
    let transcript = read_json_lines(&dir.join("candidates/c01/transcript.jsonl"));
    let end = transcript.last().expect("a transcript");
    assert_eq!(end["type"], "end", "{transcript:#?}");
    assert_eq!(end["reason"], "limit_reached", "{end:#}");
    assert_eq!(end["steps"], 3, "{end:#}");
    assert_eq!(mock.chat_requests().len(), 3, "{:#?}", mock.log_lines());

    // The edit of step 1 passes the gates: the candidate wins on its patch so far.
    let ranking = read_json(&dir.join("comparisons/ranking.json"));
    let c01 = ranked(&ranking, "c01");
    assert_eq!(c01["status"], "limit_reached", "{c01:#}");
    assert_eq!(c01["eligible"], true, "{c01:#}");
    assert_eq!(read_json(&dir.join("selection.json"))["winner"], "c01");
    assert_eq!(repo.status(), Vec::<String>::new(), "--apply none left the working tree alone");
}

#[test]
fn the_token_limit_ends_the_loop() {
    let usage = json!({"input_tokens": 900, "output_tokens": 100});
    let mut mock = MockLlm::start(&json!({"responses": [
        {"text": "Fix it first.", "tool_calls": [fix_call()], "usage": usage},
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}], "usage": usage, "repeat": true},
    ]}));
    let repo = calc_repo();
    add_backend(&repo, "b1", "openai-compatible", "spender", &mock.openai_url(), &[]);
    // No verify command: a candidate stopped by a limit has nothing to vouch for its patch.
    let run = repo.arbiter(&builtin_run(
        "Fix add() in calc.py",
        &["--backend", "b1", "--max-tokens", "1500", "--apply", "none", "--no-verify"],
    ));
    run.assert_code(1);

    let dir = repo.run_dir();
    assert_candidates_prepared(&dir);
    let evidence = read_json(&dir.join("candidates/c01/evidence.json"));
    assert_eq!(evidence["status"], "limit_reached", "{evidence:#}");
    let limit = evidence["agent"]["limit_reached"].as_str().unwrap_or_default();
    assert!(limit.contains("max_tokens"), "{evidence:#}");
    let transcript = read_json_lines(&dir.join("candidates/c01/transcript.jsonl"));
    let end = transcript.last().expect("a transcript");
    assert_eq!(end["reason"], "limit_reached", "{end:#}");
    assert_eq!(end["steps"], 2, "{end:#}");
    assert_eq!(end["tokens"], 2000, "{end:#}");
    assert_eq!(mock.chat_requests().len(), 2, "{:#?}", mock.log_lines());

    let ranking = read_json(&dir.join("comparisons/ranking.json"));
    let c01 = ranked(&ranking, "c01");
    assert_eq!(c01["eligible"], false, "{c01:#}");
    assert_eq!(c01["rejection"]["code"], "agent_failed", "{c01:#}");
    let cost = read_json(&dir.join("cost_summary.json"));
    assert_eq!(cost["total"]["calls"], 2, "{cost:#}");
    assert_eq!(cost["total"]["input_tokens"], 1800, "{cost:#}");
}

#[test]
fn a_failing_backend_falls_back_to_the_next_in_the_coding_chain() {
    let mut mock = MockLlm::start(&json!({"responses": [
        {"text": "Fixing.", "tool_calls": [fix_call()]},
        {"text": "Done.", "tool_calls": [{"name": "finish", "arguments": {"summary": "add() now adds."}}]},
    ]}));
    let repo = calc_repo();
    let closed = format!("http://127.0.0.1:{}/v1", free_port());
    add_backend(&repo, "bad", "openai-compatible", "nowhere", &closed, &[]);
    add_backend(&repo, "good", "openai-compatible", "somewhere", &mock.openai_url(), &[]);
    let config_path = repo.arbiter_dir().join("config.toml");
    let mut config = fs::read_to_string(&config_path).expect("config.toml");
    config.push_str("\n[roles]\ncoding = [\"bad\", \"good\"]\n");
    fs::write(&config_path, config).expect("write config.toml");

    let run = repo.arbiter(&builtin_run("Fix add() in calc.py", &["--verify", VERIFY_PY, "--apply", "none"]));
    run.assert_code(0);

    let dir = repo.run_dir();
    assert_candidates_prepared(&dir);
    assert_eq!(read_json(&dir.join("selection.json"))["winner"], "c01");
    let events = read_json_lines(&dir.join("runtime_events.jsonl"));
    let fallbacks: Vec<&Value> = events.iter().filter(|e| e["kind"] == "model_fallback").collect();
    assert!(!fallbacks.is_empty(), "no model_fallback event: {events:#?}");
    for f in &fallbacks {
        assert_eq!(f["candidate"], "c01", "{f:#}");
        assert_eq!(f["data"]["from"], "bad", "{f:#}");
        assert_eq!(f["data"]["to"], "good", "{f:#}");
        assert!(!f["data"]["reason"].as_str().unwrap_or_default().trim().is_empty(), "{f:#}");
    }
    // Every answer came from the good backend, and only the good one was billed.
    let transcript = read_json_lines(&dir.join("candidates/c01/transcript.jsonl"));
    let assistant = entries(&transcript, "assistant");
    assert_eq!(assistant.len(), 2, "{transcript:#?}");
    assert!(assistant.iter().all(|a| a["backend"] == "good"), "{transcript:#?}");
    assert!(!entries(&transcript, "fallback").is_empty(), "{transcript:#?}");
    let cost = read_json(&dir.join("cost_summary.json"));
    assert_eq!(cost["by_backend"]["good"]["calls"], 2, "{cost:#}");
    assert!(cost["by_backend"].get("bad").is_none(), "{cost:#}");
    let requests = mock.chat_requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    assert!(requests.iter().all(|r| r.contains("model=somewhere")), "{requests:#?}");
}

const LEAK_KEY: &str = "sk-test-leakcheck-0123456789abcdef";

#[test]
fn a_stored_key_reaches_the_server_and_nothing_else() {
    // The mock answers only requests carrying the key (else 401), so a successful run shows
    // the key was sent. The model also repeats the key, in text and in a tool call.
    let mut mock = MockLlm::start(&json!({"api_key": LEAK_KEY, "responses": [
        {"text": format!("I was given {LEAK_KEY}; fixing."), "tool_calls": [fix_call()]},
        {"tool_calls": [{"name": "run_shell", "arguments": {"command": format!("echo {LEAK_KEY}")}}]},
        {"text": "Done.", "tool_calls": [{"name": "finish", "arguments": {"summary": "add() now adds."}}]},
    ]}));
    let repo = calc_repo();
    let mut child = repo
        .arbiter_cmd(&[
            "backend",
            "add",
            "keyed",
            "--provider",
            "openai-compatible",
            "--model",
            "keyed-model",
            "--base-url",
            &mock.openai_url(),
            "--api-key-stdin",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn arbiter backend add");
    child.stdin.take().expect("stdin").write_all(format!("{LEAK_KEY}\n").as_bytes()).expect("write the key");
    let added = Run::from_output(child.wait_with_output().expect("wait for arbiter backend add"));
    added.assert_code(0);

    let run = repo.arbiter(&builtin_run("Fix add() in calc.py", &["--backend", "keyed", "--verify", VERIFY_PY]));
    run.assert_code(0);
    assert_eq!(repo.read("calc.py"), FIXED_CALC_PY);
    assert_eq!(mock.chat_requests().len(), 3, "{:#?}", mock.log_lines());
    let shown = repo.arbiter(&["runs", "show", "latest", "--json"]);
    shown.assert_code(0);
    for (what, text) in [
        ("backend add stdout", &added.stdout),
        ("backend add stderr", &added.stderr),
        ("run stdout", &run.stdout),
        ("run stderr", &run.stderr),
        ("runs show", &shown.stdout),
    ] {
        assert!(!text.contains(LEAK_KEY), "{what} holds the key:\n{text}");
    }

    // The key the model repeated reached the transcript masked.
    let transcript = read_json_lines(&repo.run_dir().join("candidates/c01/transcript.jsonl"));
    let assistant = entries(&transcript, "assistant");
    assert!(assistant[0]["text"].as_str().unwrap_or_default().contains("[REDACTED]"), "{transcript:#?}");
    let shell = entries(&transcript, "tool_result").into_iter().find(|r| r["name"] == "run_shell");
    let shell = shell.unwrap_or_else(|| panic!("no run_shell result: {transcript:#?}"));
    assert!(shell["content"].as_str().unwrap_or_default().contains("[REDACTED]"), "{shell:#}");

    let secrets = repo.secrets_file();
    assert!(fs::read_to_string(&secrets).expect("secrets.toml").contains(LEAK_KEY), "the key belongs in secrets.toml");
    let config = fs::read_to_string(repo.arbiter_dir().join("config.toml")).expect("config.toml");
    assert!(!config.contains(LEAK_KEY), "config.toml holds the key:\n{config}");
    let files = files_under(&repo.arbiter_dir());
    assert!(files.iter().any(|f| f.ends_with("transcript.jsonl")), "{files:#?}");
    assert!(files.iter().any(|f| f.file_name().is_some_and(|n| n == "arbiter.db")), "{files:#?}");
    let needle = LEAK_KEY.as_bytes();
    let leaks: Vec<&PathBuf> = files
        .iter()
        .filter(|f| **f != secrets)
        .filter(|f| fs::read(f).expect("read a file under .arbiter").windows(needle.len()).any(|w| w == needle))
        .collect();
    assert!(leaks.is_empty(), "the key is written in {leaks:#?}");
}

#[test]
fn tool_calls_written_as_text_are_executed() {
    let edit =
        json!({"name": "edit_file", "arguments": {"path": "calc.py", "old": "return a - b", "new": "return a + b"}});
    let finish = json!({"name": "finish", "arguments": {"summary": "add() now adds."}});
    let mut mock = MockLlm::start(&json!({"responses": [
        {"text": format!("add() subtracts. I will fix it.\n```tool\n{edit}\n```\n")},
        {"text": format!("The fix is in.\n```tool\n{finish}\n```")},
    ]}));
    let repo = calc_repo();
    add_backend(&repo, "plain", "openai-compatible", "no-tools", &mock.openai_url(), &[]);
    let run = repo.arbiter(&builtin_run("Fix add() in calc.py", &["--backend", "plain", "--verify", VERIFY_PY]));
    run.assert_code(0);

    let dir = repo.run_dir();
    assert_candidates_prepared(&dir);
    assert_eq!(read_json(&dir.join("selection.json"))["winner"], "c01");
    assert_eq!(read_json(&dir.join("candidates/c01/evidence.json"))["status"], "finished");
    let transcript = read_json_lines(&dir.join("candidates/c01/transcript.jsonl"));
    let assistant = entries(&transcript, "assistant");
    assert_eq!(assistant.len(), 2, "{transcript:#?}");
    assert_eq!(assistant[0]["tool_calls"][0]["name"], "edit_file", "{transcript:#?}");
    assert_eq!(assistant[1]["tool_calls"][0]["name"], "finish", "{transcript:#?}");
    let results = entries(&transcript, "tool_result");
    assert_eq!(results[0]["is_error"], false, "{transcript:#?}");
    assert_eq!(transcript.last().expect("a transcript")["reason"], "finished");
    assert_eq!(repo.read("calc.py"), FIXED_CALC_PY);
    assert_eq!(mock.chat_requests().len(), 2, "{:#?}", mock.log_lines());
}
