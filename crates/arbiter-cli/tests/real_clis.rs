//! The agent CLI runners on the real programs: Claude Code, Codex CLI and OpenCode from
//! npm, aider from PyPI, each driven through `arbiter run` against the scripted model server
//! (`arbiter mock-llm`) on loopback with a scripted edit. Gemini CLI (npm) speaks only the
//! Gemini API, which nothing local serves: its test proves the invocation and the reading
//! of its real error stream, not an edit. Proves the adapters (command
//! line, environment, key delivery, config files, stream parsing, verdicts) on what the
//! CLIs really do, offline.
//!
//! The CLIs come from `$ARBITER_CLI_CACHE` (`.ci/run` installs them there once:
//! `npm/node_modules/.bin/{claude,codex,opencode,gemini}` and `aider/bin/aider`). In CI (`CI` set) a
//! missing CLI fails its test; elsewhere the test says why it skips.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use common::*;
use serde_json::{Value, json};

const FIXED_CALC_PY: &str = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n";

/// The key the mock requires; the CLIs get it through the backend's variable only.
const MOCK_KEY: &str = "mock-key-7f3a9c1e5b2d";

/// Where the CLI `rel` is in the cache, or `None` (after saying why) when the test
/// cannot run here. Panics in CI: there every CLI must be installed.
fn real_cli(rel: &str) -> Option<PathBuf> {
    let in_ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty());
    let cache = match std::env::var_os("ARBITER_CLI_CACHE") {
        Some(dir) => PathBuf::from(dir),
        None if in_ci => panic!("CI is set but ARBITER_CLI_CACHE is not: .ci/run installs the agent CLIs and sets it"),
        None => {
            skip(rel, "ARBITER_CLI_CACHE is not set (run .ci/run, or point it at a directory with the CLIs)");
            return None;
        }
    };
    let path = cache.join(rel);
    if is_executable(&path) {
        return Some(path);
    }
    assert!(!in_ci, "{} is not installed (CI installs it with .ci/run)", path.display());
    skip(rel, &format!("{} is not installed", path.display()));
    None
}

/// A repository with the buggy calculator, `.arbiter/`, and `config` in its config.toml.
fn calc_repo(config: &str) -> TestRepo {
    let repo = TestRepo::new();
    repo.write("calc.py", CALC_PY);
    repo.write("test_calc.py", TEST_CALC_PY);
    repo.write(".gitignore", "__pycache__/\n");
    repo.commit_all("calc with a bug");
    repo.arbiter(&["init"]).assert_code(0);
    let path = repo.arbiter_dir().join("config.toml");
    let mut text = fs::read_to_string(&path).expect("config.toml");
    text.push_str(config);
    fs::write(&path, text).expect("write config.toml");
    repo
}

/// `arbiter run` with the mock's key in the backend's variable, and decoy secrets that must
/// not reach the agent.
fn run(repo: &TestRepo, runner: &str, candidates: &str) -> Run {
    let out = repo
        .arbiter_cmd(&[
            "run",
            "--task",
            "Fix add in calc.py",
            "--runner",
            runner,
            "--candidates",
            candidates,
            "--verify",
            VERIFY_PY,
            "--timeout-seconds",
            "180",
            "--no-judge",
        ])
        .env("MOCK_KEY", MOCK_KEY)
        .env("DATABASE_URL", "postgres://u:pw-SECRET@127.0.0.1/db")
        .stdin(Stdio::null())
        .output()
        .expect("run arbiter");
    Run::from_output(out)
}

/// The `METHOD PATH` of every request the mock logged, the test's own probes left out.
fn routes(mock: &mut MockLlm) -> Vec<String> {
    mock.chat_requests();
    mock.log_lines()
        .iter()
        .filter(|l| l.starts_with('#'))
        .filter_map(|l| {
            let mut words = l.split_whitespace().skip(1);
            Some(format!("{} {}", words.next()?, words.next()?))
        })
        .filter(|r| r != "GET /v1/models")
        .collect()
}

#[track_caller]
fn assert_only_routes(mock: &mut MockLlm, allowed: &[&str]) -> Vec<String> {
    let seen = routes(mock);
    assert!(!seen.is_empty(), "the CLI never reached the mock:\n{}", mock.log_lines().join("\n"));
    for r in &seen {
        assert!(
            allowed.contains(&r.as_str()),
            "unexpected request {r}; the mock log:\n{}",
            mock.log_lines().join("\n")
        );
    }
    seen
}

/// The run fixed the bug, the candidate finished by its CLI's own account, and nothing
/// under `.arbiter/` holds the key.
#[track_caller]
fn assert_fixed(repo: &TestRepo, run: &Run, cli: &str) -> Value {
    run.assert_code(0);
    assert_eq!(repo.read("calc.py"), FIXED_CALC_PY, "{cli}: the fix did not land\n{}", run.stderr);
    let dir = repo.run_dir();
    let summary = read_json(&dir.join("candidates/c01/runner_summary.json"));
    assert_eq!(summary["status"], "finished", "{summary:#}");
    assert_eq!(summary["kind"], cli, "{summary:#}");
    assert_eq!(summary["agent_cli"]["final_status"], "success", "{summary:#}");
    assert!(summary["agent_cli"]["usage"]["input_tokens"].as_u64().is_some_and(|n| n > 0), "{summary:#}");
    for file in files_under(&repo.arbiter_dir()) {
        let text = String::from_utf8_lossy(&fs::read(&file).expect("read")).into_owned();
        assert!(!text.contains(MOCK_KEY), "{} holds the key", file.display());
    }
    // It ran in the sandbox, and its home was emptied afterwards.
    let state = read_json(&dir.join("state.json"));
    assert_eq!(state["sandbox"]["filesystem"], true, "{cli} ran outside the sandbox: {state:#}");
    let homes = repo.agent_home_leftovers();
    assert!(homes.is_empty(), "an agent home was left behind: {homes:?}");
    summary
}

fn claude_script() -> Value {
    json!([
        {"tool_calls": [{"name": "Read", "arguments": {"file_path": "calc.py"}}],
         "usage": {"input_tokens": 900, "output_tokens": 40, "cached_tokens": 0}},
        {"tool_calls": [{"name": "Edit", "arguments": {"file_path": "calc.py", "old_string": "a - b", "new_string": "a + b"}}],
         "usage": {"input_tokens": 1000, "output_tokens": 60, "cached_tokens": 0}},
        {"text": "Fixed add in calc.py.", "usage": {"input_tokens": 1100, "output_tokens": 10, "cached_tokens": 0}}
    ])
}

fn codex_script() -> Value {
    json!([
        {"tool_calls": [{"name": "apply_patch", "arguments":
            "*** Begin Patch\n*** Update File: calc.py\n@@\n def add(a, b):\n-    return a - b\n+    return a + b\n*** End Patch\n"}],
         "usage": {"input_tokens": 1000, "output_tokens": 100, "cached_tokens": 0}},
        {"text": "Fixed add in calc.py.", "usage": {"input_tokens": 1200, "output_tokens": 10, "cached_tokens": 0}}
    ])
}

fn aider_script() -> Value {
    json!([
        {"text": "calc.py\n```python\n<<<<<<< SEARCH\n    return a - b\n=======\n    return a + b\n>>>>>>> REPLACE\n```\n",
         "usage": {"input_tokens": 2400, "output_tokens": 33, "cached_tokens": 0}}
    ])
}

fn opencode_script() -> Value {
    json!([
        {"tool_calls": [{"name": "read", "arguments": {"filePath": "calc.py"}}],
         "usage": {"input_tokens": 7000, "output_tokens": 6, "cached_tokens": 0}},
        {"tool_calls": [{"name": "edit", "arguments": {"filePath": "calc.py", "oldString": "a - b", "newString": "a + b"}}],
         "usage": {"input_tokens": 7500, "output_tokens": 12, "cached_tokens": 0}},
        {"text": "Fixed add in calc.py.", "usage": {"input_tokens": 7600, "output_tokens": 8, "cached_tokens": 0}}
    ])
}

/// `[backends.NAME]` on the mock, the key from `MOCK_KEY`.
fn backend(name: &str, provider: &str, model: &str, url: &str) -> String {
    format!(
        "[backends.{name}]\nprovider = \"{provider}\"\nmodel = \"{model}\"\nbase_url = \"{url}\"\napi_key_env = \"MOCK_KEY\"\n\
         input_cost = \"1\"\noutput_cost = \"2\"\nmax_parallel = 4\n"
    )
}

fn runner(name: &str, kind: &str, binary: &Path, backend: &str) -> String {
    format!("[runners.{name}]\nkind = \"{kind}\"\nbinary = \"{}\"\nbackend = \"{backend}\"\n", binary.display())
}

#[test]
fn claude_code_fixes_the_bug_through_arbiter_run() {
    let Some(claude) = real_cli("npm/node_modules/.bin/claude") else { return };
    let mut mock = MockLlm::start(&json!({"turns": "history", "api_key": MOCK_KEY, "responses": claude_script()}));
    let repo = calc_repo(&format!(
        "{}{}",
        backend("mock-anthropic", "anthropic", "claude-mock", &mock.anthropic_url()),
        runner("claude-code", "claude-code", &claude, "mock-anthropic")
    ));
    let run = run(&repo, "claude-code", "1");
    let summary = assert_fixed(&repo, &run, "claude-code");
    let cli = &summary["agent_cli"];
    assert!(cli["session_id"].as_str().is_some_and(|s| !s.is_empty()), "{summary:#}");
    assert_eq!(cli["requested_model"], "claude-mock", "{summary:#}");
    assert!(cli["files_touched"].as_array().is_some_and(|f| f.contains(&json!("calc.py"))), "{summary:#}");
    // Claude Code prices tokens itself (its own table); arbiter keeps tokens × the backend's
    // price beside it.
    assert_eq!(cli["cost"]["source"], "cli", "{summary:#}");
    assert!(cli["cost"]["computed"].is_string(), "{summary:#}");
    assert_eq!(summary["runner"], "claude-code/mock-anthropic");
    let seen = assert_only_routes(&mut mock, &["HEAD /", "POST /v1/messages"]);
    assert!(seen.iter().filter(|r| *r == "POST /v1/messages").count() >= 3, "{seen:?}");
}

#[test]
fn codex_fixes_the_bug_through_arbiter_run() {
    let Some(codex) = real_cli("npm/node_modules/.bin/codex") else { return };
    let mut mock = MockLlm::start(&json!({"turns": "history", "api_key": MOCK_KEY, "responses": codex_script()}));
    let repo = calc_repo(&format!(
        "{}{}",
        backend("mock-responses", "openai-compatible", "gpt-5.5", &mock.openai_url()),
        runner("codex", "codex", &codex, "mock-responses")
    ));
    let run = run(&repo, "codex", "1");
    let summary = assert_fixed(&repo, &run, "codex");
    let cli = &summary["agent_cli"];
    assert!(cli["session_id"].as_str().is_some_and(|s| !s.is_empty()), "{summary:#}");
    assert!(cli["files_touched"].as_array().is_some_and(|f| f.contains(&json!("calc.py"))), "{summary:#}");
    // Codex reports no cost: tokens × the backend's price (1 and 2 USD per million).
    assert_eq!(cli["cost"]["source"], "tokens", "{summary:#}");
    let input = cli["usage"]["input_tokens"].as_u64().expect("input tokens");
    let output = cli["usage"]["output_tokens"].as_u64().expect("output tokens");
    let pico = input * 1_000_000 + output * 2_000_000;
    let expected = format!("{}.{:012}", pico / 1_000_000_000_000, pico % 1_000_000_000_000);
    let expected = expected.trim_end_matches('0').trim_end_matches('.');
    assert_eq!(cli["cost"]["usd"], expected, "{summary:#}");
    assert_only_routes(&mut mock, &["POST /v1/responses"]);
}

#[test]
fn aider_fixes_the_bug_through_arbiter_run() {
    let Some(aider) = real_cli("aider/bin/aider") else { return };
    let mut mock = MockLlm::start(&json!({"turns": "history", "api_key": MOCK_KEY, "responses": aider_script()}));
    let repo = calc_repo(&format!(
        "{}{}",
        backend("mock-chat", "openai-compatible", "mock", &mock.openai_url()),
        runner("aider", "aider", &aider, "mock-chat")
    ));
    let run = run(&repo, "aider", "1");
    let summary = assert_fixed(&repo, &run, "aider");
    let cli = &summary["agent_cli"];
    assert_eq!(cli["files_touched"], json!(["calc.py"]), "{summary:#}");
    assert_eq!(cli["model"], "openai/mock", "{summary:#}");
    assert_eq!(cli["cost"]["source"], "tokens", "{summary:#}");
    assert_only_routes(&mut mock, &["POST /v1/chat/completions"]);
    // aider left nothing of its own in the patch (no .aider* files, no .gitignore edit).
    let patch = fs::read_to_string(repo.run_dir().join("candidates/c01/patch.diff")).expect("patch.diff");
    assert!(!patch.contains(".aider") && !patch.contains(".gitignore"), "{patch}");
}

#[test]
fn opencode_fixes_the_bug_through_arbiter_run() {
    let Some(opencode) = real_cli("npm/node_modules/.bin/opencode") else { return };
    let mut mock = MockLlm::start(&json!({"turns": "history", "api_key": MOCK_KEY, "responses": opencode_script()}));
    let repo = calc_repo(&format!(
        "{}{}",
        backend("mock-chat", "openai-compatible", "oc-mock", &mock.openai_url()),
        runner("opencode", "opencode", &opencode, "mock-chat")
    ));
    let run = run(&repo, "opencode", "1");
    let summary = assert_fixed(&repo, &run, "opencode");
    let cli = &summary["agent_cli"];
    assert!(cli["session_id"].as_str().is_some_and(|s| s.starts_with("ses_")), "{summary:#}");
    assert_eq!(cli["files_touched"], json!(["calc.py"]), "{summary:#}");
    // OpenCode reports $0 for a model it has no price for: not a price, so tokens × the
    // backend's price is the cost of record.
    assert_eq!(cli["cost"]["cli_reported"], "0", "{summary:#}");
    assert_eq!(cli["cost"]["source"], "tokens", "{summary:#}");
    assert_only_routes(&mut mock, &["POST /v1/chat/completions"]);
}

#[test]
fn gemini_starts_unattended_and_its_real_error_stream_fails_the_candidate() {
    let Some(gemini) = real_cli("npm/node_modules/.bin/gemini") else { return };
    let mut mock = MockLlm::start(&json!({"responses": [{"text": "unused", "repeat": true}]}));
    let repo = calc_repo(&format!("[runners.gemini]\nkind = \"gemini\"\nbinary = \"{}\"\n", gemini.display()));
    // Its own provider, redirected to the mock through the variables it honours.
    let out = repo
        .arbiter_cmd(&[
            "run",
            "--task",
            "Fix add in calc.py",
            "--runner",
            "gemini",
            "--candidates",
            "1",
            "--timeout-seconds",
            "120",
        ])
        .env("GEMINI_API_KEY", MOCK_KEY)
        .env("GOOGLE_GEMINI_BASE_URL", mock.anthropic_url())
        .stdin(Stdio::null())
        .output()
        .expect("run arbiter");
    let run = Run::from_output(out);
    run.assert_code(1);
    let dir = repo.run_dir();
    let summary = read_json(&dir.join("candidates/c01/runner_summary.json"));
    assert_eq!(summary["status"], "agent_failed", "{summary:#}");
    let cli = &summary["agent_cli"];
    // It authenticated with the key and ran headless: its init and its error result came.
    assert!(cli["session_id"].as_str().is_some_and(|s| !s.is_empty()), "{summary:#}");
    assert_eq!(cli["final_status"], "failed", "{summary:#}");
    assert!(cli["reason"].as_str().unwrap_or_default().contains("API Error"), "{summary:#}");
    let seen = routes(&mut mock);
    assert!(!seen.is_empty() && seen.iter().all(|r| r.starts_with("POST /v1beta/models/")), "{seen:?}");
    assert!(
        mock.log_lines().iter().all(|l| !l.contains(MOCK_KEY)),
        "the mock logs no key, and arbiter put none on a command line"
    );
}

#[test]
fn real_clis_share_one_mock_in_a_mixed_tournament() {
    let (Some(claude), Some(codex), Some(aider), Some(opencode)) = (
        real_cli("npm/node_modules/.bin/claude"),
        real_cli("npm/node_modules/.bin/codex"),
        real_cli("aider/bin/aider"),
        real_cli("npm/node_modules/.bin/opencode"),
    ) else {
        return;
    };
    let mut mock = MockLlm::start(&json!({
        "turns": "history",
        "api_key": MOCK_KEY,
        "responses": [{"text": "No script for this model.", "repeat": true}],
        "conversations": [
            {"match": {"model": "claude-mock"}, "responses": claude_script()},
            {"match": {"model": "gpt-5.5", "path": "/v1/responses"}, "responses": codex_script()},
            {"match": {"model": "mock", "path": "/v1/chat/completions"}, "responses": aider_script()},
            {"match": {"model": "oc-mock", "path": "/v1/chat/completions"}, "responses": opencode_script()},
        ],
    }));
    let repo = calc_repo(&format!(
        "{}{}{}{}{}{}{}{}",
        backend("mock-anthropic", "anthropic", "claude-mock", &mock.anthropic_url()),
        backend("mock-responses", "openai-compatible", "gpt-5.5", &mock.openai_url()),
        backend("mock-chat", "openai-compatible", "mock", &mock.openai_url()),
        backend("mock-oc", "openai-compatible", "oc-mock", &mock.openai_url()),
        runner("claude-code", "claude-code", &claude, "mock-anthropic"),
        runner("codex", "codex", &codex, "mock-responses"),
        runner("aider", "aider", &aider, "mock-chat"),
        runner("opencode", "opencode", &opencode, "mock-oc"),
    ));
    // Four real CLIs at once, in parallel, on one mock.
    let run = run(&repo, "claude-code,codex,aider,opencode", "4");
    run.assert_code(0);
    assert_eq!(repo.read("calc.py"), FIXED_CALC_PY);
    let dir = repo.run_dir();
    let state = read_json(&dir.join("state.json"));
    let labels = ["claude-code/mock-anthropic", "codex/mock-responses", "aider/mock-chat", "opencode/mock-oc"];
    for (i, label) in labels.iter().enumerate() {
        assert_eq!(state["candidates"][i]["runner"], *label, "{state:#}");
        assert_eq!(state["candidates"][i]["status"], "finished", "{state:#}");
    }
    let selection = read_json(&dir.join("selection.json"));
    let entries = selection["candidates"].as_array().expect("candidates");
    assert!(entries.iter().all(|c| c["eligible"] == true), "every candidate fixed the bug: {selection:#}");
    assert_only_routes(&mut mock, &["HEAD /", "POST /v1/messages", "POST /v1/responses", "POST /v1/chat/completions"]);
}

/// A Codex user with a custom provider in `~/.codex/config.toml` (and an MCP server, and a
/// login in `auth.json`), and no arbiter backend: the candidate's Codex reaches that
/// provider with the key its `env_key` names and makes the edit; the MCP server stays out,
/// and neither the key nor the login reaches an artifact. `isolate = true` gives today's
/// clean home: no provider, no request.
#[test]
fn codex_on_the_user_s_own_config_toml_provider() {
    let Some(codex) = real_cli("npm/node_modules/.bin/codex") else { return };
    let mut mock = MockLlm::start(&json!({"turns": "history", "api_key": MOCK_KEY, "responses": codex_script()}));
    let user_home = tempfile::tempdir().expect("a home");
    let codex_dir = user_home.path().join(".codex");
    fs::create_dir_all(&codex_dir).expect("mkdir");
    let mcp_marker = user_home.path().join("mcp-started");
    fs::write(
        codex_dir.join("config.toml"),
        format!(
            "model = \"gpt-5.5\"\nmodel_provider = \"corp\"\n\n[model_providers.corp]\nname = \"Corp\"\nbase_url = \"{}\"\nenv_key = \"CORP_LLM_KEY\"\nwire_api = \"responses\"\n\n[mcp_servers.spy]\ncommand = \"sh\"\nargs = [\"-c\", \"touch {}\"]\n",
            mock.openai_url(),
            mcp_marker.display()
        ),
    )
    .expect("config.toml");
    const LOGIN_TOKEN: &str = "eyJhbGciOiJub25lIn0.user-login-token-3f9a";
    fs::write(codex_dir.join("auth.json"), format!("{{\"tokens\": {{\"access_token\": \"{LOGIN_TOKEN}\"}}}}"))
        .expect("auth.json");
    let repo = calc_repo(&format!("[runners.codex]\nkind = \"codex\"\nbinary = \"{}\"\n", codex.display()));
    let arbiter = |extra_config: &str, timeout: &str| {
        if !extra_config.is_empty() {
            let path = repo.arbiter_dir().join("config.toml");
            let text = fs::read_to_string(&path).expect("config").replace(
                "[runners.codex]\nkind = \"codex\"\n",
                &format!("[runners.codex]\nkind = \"codex\"\n{extra_config}"),
            );
            fs::write(&path, text).expect("config");
        }
        let out = repo
            .arbiter_cmd(&[
                "run",
                "--task",
                "Fix add in calc.py",
                "--runner",
                "codex",
                "--candidates",
                "1",
                "--verify",
                VERIFY_PY,
                "--timeout-seconds",
                timeout,
                "--no-judge",
            ])
            .env("HOME", user_home.path())
            .env("CORP_LLM_KEY", MOCK_KEY)
            .env_remove("XDG_CACHE_HOME")
            .env_remove("XDG_CONFIG_HOME")
            .stdin(Stdio::null())
            .output()
            .expect("run arbiter");
        Run::from_output(out)
    };
    let run = arbiter("", "180");
    assert_fixed(&repo, &run, "codex");
    assert_only_routes(&mut mock, &["POST /v1/responses"]);
    assert!(!mcp_marker.exists(), "the user's MCP server was started for a candidate");
    for file in files_under(&repo.arbiter_dir()) {
        let text = String::from_utf8_lossy(&fs::read(&file).expect("read")).into_owned();
        assert!(!text.contains(LOGIN_TOKEN), "{} holds the user's login", file.display());
    }
    let transcript = fs::read_to_string(repo.run_dir().join("candidates/c01/transcript.jsonl")).expect("transcript");
    assert!(transcript.contains(".codex/config.toml") && transcript.contains(".codex/auth.json"), "{transcript}");

    // isolate = true: a clean home, so Codex has no provider of the user's and reaches nothing
    // (it waits for the network it does not have until its timeout).
    repo.git(&["checkout", "--", "calc.py"]);
    let before = routes(&mut mock).len();
    let isolated = arbiter("isolate = true\n", "15");
    isolated.assert_code(1);
    assert_eq!(routes(&mut mock).len(), before, "an isolated Codex used the user's provider");
}
