//! End-to-end tests of the agent CLI runners with fake CLIs: `tests/fixtures/fake-cli.py`
//! linked as `claude`, `codex`, `gemini`, `aider`, `opencode` and `villani-code` on a PATH the
//! test controls. Each fake prints its CLI's real output format and makes a real edit; the
//! real `arbiter` binary runs them, reads their streams, judges and applies the result.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use tempfile::TempDir;

/// The agent CLIs and the program each runs as.
const CLIS: &[(&str, &str)] = &[
    ("claude-code", "claude"),
    ("codex", "codex"),
    ("gemini", "gemini"),
    ("aider", "aider"),
    ("opencode", "opencode"),
    ("villani-code", "villani-code"),
];

const FIXED_CALC_PY: &str = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n";

/// Secrets in arbiter's own environment that must never reach the wrong place.
const DB_URL: &str = "postgres://arbiter:pw-SECRET-db@127.0.0.1/arbiter";
const OPENAI_KEY: &str = "sk-openai-SECRET-1111111111111111";
const ANTHROPIC_KEY: &str = "sk-ant-SECRET-2222222222222222222";
const BACKEND_KEY: &str = "backend-SECRET-3333333333333333";

/// A directory holding the fake CLIs (and, after a run, `records/`).
struct FakeClis {
    dir: TempDir,
}

impl FakeClis {
    fn new() -> Self {
        let dir = tempfile::Builder::new().prefix("arbiter-fake-clis-").tempdir().expect("temp dir");
        let script = dir.path().join("fake-cli.py");
        fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fake-cli.py"), &script)
            .expect("copy the fake CLI");
        set_mode(&script, 0o755);
        for (_, program) in CLIS {
            std::os::unix::fs::symlink(&script, dir.path().join(program)).expect("link a fake CLI");
        }
        FakeClis { dir }
    }

    fn bin(&self) -> &Path {
        self.dir.path()
    }

    /// PATH with the fakes first.
    fn path(&self) -> String {
        format!("{}:{}", self.bin().display(), std::env::var("PATH").unwrap_or_default())
    }

    /// What the fake `program` recorded when it ran for `candidate`.
    fn record(&self, program: &str, candidate: &str) -> Value {
        read_json(&self.bin().join("records").join(format!("{program}-{candidate}.json")))
    }

    fn records_dir(&self) -> PathBuf {
        self.bin().join("records")
    }
}

/// Runs arbiter in `repo` with the fakes on PATH and secrets in its environment. The fakes
/// record how they were started beside themselves: the sandbox lets candidates write there
/// (`[sandbox] writable`), and nowhere else outside their workspaces.
fn arbiter_with(repo: &TestRepo, fakes: &FakeClis, args: &[&str], extra_env: &[(&str, &str)]) -> Run {
    let config = repo.arbiter_dir().join("config.toml");
    let text = fs::read_to_string(&config).unwrap_or_default();
    if !text.lines().any(|l| l.trim() == "[sandbox]") {
        fs::create_dir_all(fakes.records_dir()).expect("records dir");
        let table = format!("\n[sandbox]\nwritable = [{:?}]\n", fakes.records_dir().display().to_string());
        fs::write(&config, text + &table).expect("write config.toml");
    }
    let mut cmd = repo.arbiter_cmd(args);
    cmd.env("PATH", fakes.path())
        .env("DATABASE_URL", DB_URL)
        .env("OPENAI_API_KEY", OPENAI_KEY)
        .env("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
        .stdin(Stdio::null());
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    Run::from_output(cmd.output().expect("run arbiter"))
}

/// A repository with the buggy calculator and its tests, `.arbiter/` initialized, and
/// `config` appended to its config.toml.
fn calc_repo(config: &str) -> TestRepo {
    let repo = python_repo(AGENT_FIX);
    repo.arbiter(&["init"]).assert_code(0);
    let path = repo.arbiter_dir().join("config.toml");
    let mut text = fs::read_to_string(&path).expect("config.toml");
    text.push_str(config);
    fs::write(&path, text).expect("write config.toml");
    repo
}

fn run_args<'a>(runner: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["run", "--task", "Fix add in calc.py", "--runner", runner, "--timeout-seconds", "60"];
    args.extend_from_slice(extra);
    args
}

fn ranked<'a>(ranking: &'a Value, id: &str) -> &'a Value {
    ranking["candidates"]
        .as_array()
        .expect("ranking.json has candidates")
        .iter()
        .find(|c| c["candidate_id"] == id)
        .unwrap_or_else(|| panic!("no {id} in {ranking:#}"))
}

fn transcript_types(run_dir: &Path, id: &str) -> Vec<String> {
    read_json_lines(&run_dir.join("candidates").join(id).join("transcript.jsonl"))
        .iter()
        .map(|e| e["type"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// No file under `.arbiter/` holds any of `secrets` (the secrets file is not in there).
#[track_caller]
fn assert_no_secret_under_arbiter(repo: &TestRepo, secrets: &[&str]) {
    for file in files_under(&repo.arbiter_dir()) {
        let text = String::from_utf8_lossy(&fs::read(&file).expect("read")).into_owned();
        for secret in secrets {
            assert!(!text.contains(secret), "{} contains {secret}", file.display());
        }
    }
}

/// The agent homes are emptied after the run.
#[track_caller]
fn assert_agent_homes_removed(repo: &TestRepo) {
    let leftovers = repo.agent_home_leftovers();
    assert!(leftovers.is_empty(), "agent homes left behind: {leftovers:?}");
}

#[test]
fn every_cli_runs_through_arbiter_and_its_fix_lands() {
    let fakes = FakeClis::new();
    for (runner, program) in CLIS {
        // villani-code has no provider of its own: it always runs on a backend.
        let on_backend = *runner == "villani-code";
        let config = if on_backend {
            "[backends.vb]\nprovider = \"openai-compatible\"\nmodel = \"fix\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\
             api_key_env = \"VB_KEY\"\ninput_cost = \"1\"\noutput_cost = \"2\"\n"
        } else {
            ""
        };
        let repo = calc_repo(config);
        let mut args = run_args(runner, &["--candidates", "1", "--verify", VERIFY_PY]);
        if on_backend {
            args.extend(["--backend", "vb"]);
        }
        let run = arbiter_with(&repo, &fakes, &args, &[("VB_KEY", BACKEND_KEY)]);
        run.assert_code(0);
        assert_eq!(repo.read("calc.py"), FIXED_CALC_PY, "{runner}: the fix was not applied");

        let dir = repo.run_dir();
        let label = if on_backend { format!("{runner}/vb") } else { runner.to_string() };
        let selection = read_json(&dir.join("selection.json"));
        assert_eq!(selection["winner"], "c01", "{runner}: {selection:#}");
        assert_eq!(selection["candidates"][0]["runner"], label.as_str(), "{runner}: {selection:#}");

        let summary = read_json(&dir.join("candidates/c01/runner_summary.json"));
        assert_eq!(summary["kind"], *runner, "{summary:#}");
        assert_eq!(summary["status"], "finished", "{summary:#}");
        let cli = &summary["agent_cli"];
        assert_eq!(cli["cli"], *runner, "{summary:#}");
        assert_eq!(cli["final_status"], "success", "{summary:#}");
        assert_eq!(cli["exit_code"], 0, "{summary:#}");
        assert!(cli["program"].as_str().is_some_and(|p| p.ends_with(&format!("/{program}"))), "{summary:#}");
        // What each CLI's stream says it did.
        match *runner {
            "villani-code" => {
                // Its output says nothing of what it did; its debug trace does.
                assert_eq!(cli["files_touched"], json!(["calc.py"]), "{summary:#}");
                assert_eq!(cli["usage"], json!({"input_tokens": 2000, "output_tokens": 100, "cached_tokens": 0}));
                assert_eq!(cli["commands"], json!([{"command": "python3 -m unittest -q", "exit_code": 0}]));
                assert_eq!(cli["session_id"], "vc-c01", "{summary:#}");
                // 2000 × 1 + 100 × 2 per million tokens, at the backend's prices; the usage is
                // what its own trace says, and flagged so.
                assert_eq!(cli["cost"]["usd"], "0.0022", "{summary:#}");
                assert_eq!(cli["cost"]["flags"], json!(["usage_from_agent_trace"]), "{summary:#}");
                assert_eq!(cli["final_text"], "I fixed the bug in calc.py: add now returns a + b.", "{summary:#}");
            }
            _ => {
                assert_eq!(cli["files_touched"], json!(["calc.py"]), "{runner}: {summary:#}");
                assert!(cli["usage"]["input_tokens"].as_u64().is_some_and(|n| n > 0), "{summary:#}");
            }
        }
        match *runner {
            "claude-code" | "codex" | "gemini" | "opencode" | "villani-code" => {
                assert!(cli["session_id"].as_str().is_some_and(|s| !s.is_empty()), "{runner}: {summary:#}")
            }
            _ => assert_eq!(cli["session_id"], Value::Null, "{runner}: {summary:#}"),
        }
        match *runner {
            // Claude Code and OpenCode report their own cost: it is the cost of record.
            "claude-code" => {
                assert_eq!(cli["cost"]["usd"], "0.0123", "{summary:#}");
                assert_eq!(cli["cost"]["source"], "cli", "{summary:#}");
                assert_eq!(cli["usage"], json!({"input_tokens": 2050, "output_tokens": 50, "cached_tokens": 1000}));
                assert_eq!(cli["commands"], json!([{"command": "python3 -m unittest -q", "exit_code": 0}]));
                assert_eq!(cli["session_id"], "5f0c8a2e-3b1d-4c2a-9e7f-000000000c01");
            }
            "opencode" => {
                assert_eq!(cli["cost"]["usd"], "0.003", "{summary:#}");
                assert_eq!(cli["cost"]["source"], "cli", "{summary:#}");
            }
            // Without a price anywhere the cost is unknown, never $0.
            "codex" | "gemini" | "aider" => {
                assert_eq!(cli["cost"]["usd"], Value::Null, "{summary:#}");
                assert_eq!(cli["cost"]["source"], "unpriced", "{summary:#}");
                assert_eq!(cli["cost"]["flags"], json!(["unpriced"]), "{summary:#}");
            }
            _ => {}
        }
        if *runner == "codex" {
            assert_eq!(
                cli["commands"],
                json!([
                    {"command": "/bin/bash -lc 'cat calc.py'", "exit_code": 0},
                    {"command": "/bin/bash -lc 'python3 -m unittest -q'", "exit_code": 1}
                ]),
                "{summary:#}"
            );
        }
        let types = transcript_types(&dir, "c01");
        assert_eq!(types.first().map(String::as_str), Some("process_started"), "{types:?}");
        assert_eq!(types.last().map(String::as_str), Some("end"), "{types:?}");
        assert!(types.iter().any(|t| t == "file_change") && types.iter().any(|t| t == "usage"), "{types:?}");
        if *runner == "villani-code" {
            assert!(types.iter().any(|t| t == "tool_call") && types.iter().any(|t| t == "command"), "{types:?}");
        }

        // How the fake was started: in its workspace, with its own home beside it, and an
        // allowlisted environment holding its own key variables only.
        let rec = fakes.record(program, "c01");
        let cwd = rec["cwd"].as_str().expect("cwd");
        assert!(cwd.contains("/workspaces/") && cwd.ends_with("/tree"), "{cwd}");
        let env = rec["env"].as_object().expect("env");
        let home = env["HOME"].as_str().expect("HOME");
        assert_eq!(Path::new(home).parent(), Path::new(cwd).parent(), "{home} beside {cwd}");
        assert!(home.ends_with("/home") && !home.starts_with(cwd), "{home}");
        // In the sandbox its temporary files go to its private /tmp (or, on a kernel without
        // one, to its workspace's temporary directory), never to the machine's.
        let slot_tmp = Path::new(home).with_file_name("tmp").display().to_string();
        for name in ["TMPDIR", "TMP", "TEMP", "TEMPDIR"] {
            assert!(env[name] == "/tmp" || env[name] == slot_tmp.as_str(), "{runner}: {name}={}", env[name]);
        }
        assert!(!env.contains_key("DATABASE_URL"), "{runner} saw DATABASE_URL");
        let argv = rec["argv"].to_string();
        for secret in [DB_URL, OPENAI_KEY, ANTHROPIC_KEY, BACKEND_KEY] {
            assert!(!argv.contains(secret), "{runner}: a secret on argv: {argv}");
        }
        match *runner {
            "claude-code" => {
                assert_eq!(env["ANTHROPIC_API_KEY"], ANTHROPIC_KEY, "its own key");
                assert!(!env.contains_key("OPENAI_API_KEY"), "another CLI's key reached claude");
                assert!(env["CLAUDE_CONFIG_DIR"].as_str().is_some_and(|d| d.starts_with(home)));
                let argv = rec["argv"].as_array().expect("argv");
                assert_eq!(argv[1], "-p", "{argv:?}");
                // The candidate prompt (task, criteria, verify commands), short enough for argv.
                assert!(argv[2].as_str().is_some_and(|p| p.contains("Fix add in calc.py")), "{argv:?}");
                assert_eq!(argv[3], "--output-format", "{argv:?}");
            }
            "codex" => {
                assert_eq!(env["OPENAI_API_KEY"], OPENAI_KEY, "its own key");
                assert!(!env.contains_key("ANTHROPIC_API_KEY"), "another CLI's key reached codex");
                assert!(rec["home_files"].as_array().expect("files").contains(&json!(".codex/config.toml")));
                assert_eq!(
                    rec["argv"].as_array().expect("argv")[1..5],
                    [json!("exec"), json!("--json"), json!("--skip-git-repo-check"), json!("--sandbox")]
                );
            }
            "gemini" => assert!(!env.contains_key("OPENAI_API_KEY") && !env.contains_key("ANTHROPIC_API_KEY")),
            "aider" => {
                assert!(rec["argv"].as_array().expect("argv").contains(&json!("--no-auto-commits")));
                assert!(
                    rec["home_files"]
                        .as_array()
                        .expect("files")
                        .contains(&json!(".aider/caches/model_prices_and_context_window.json"))
                );
            }
            "villani-code" => {
                // On a backend: the backend's key through OPENAI_API_KEY, never the user's own.
                assert_eq!(env["OPENAI_API_KEY"], BACKEND_KEY);
                assert!(!env.contains_key("ANTHROPIC_API_KEY"));
                assert!(argv.contains("http://127.0.0.1:9/v1") && argv.contains("--auto-approve"), "{argv}");
                assert!(argv.contains("\"--debug\",\"trace\",\"--debug-dir\""), "{argv}");
            }
            _ => {}
        }
        assert_agent_homes_removed(&repo);
        assert_no_secret_under_arbiter(&repo, &[DB_URL, OPENAI_KEY, ANTHROPIC_KEY, BACKEND_KEY]);
    }
}

#[test]
fn a_cli_that_exits_0_after_a_failed_turn_is_a_failed_candidate() {
    let fakes = FakeClis::new();
    let repo = calc_repo(
        "[runners.claude-fails]\nkind = \"claude-code\"\nmodel = \"fail\"\n\
         [runners.codex-fails]\nkind = \"codex\"\nmodel = \"fail\"\n\
         [runners.opencode-fails]\nkind = \"opencode\"\nmodel = \"fail\"\n\
         [runners.aider-fails]\nkind = \"aider\"\nmodel = \"fail\"\n",
    );
    // No verify command: only the agents' own word could vouch for their patches.
    let run = arbiter_with(
        &repo,
        &fakes,
        &run_args(
            "claude-fails,codex-fails,opencode-fails,aider-fails",
            &["--candidates", "4", "--apply", "none", "--no-verify"],
        ),
        &[],
    );
    run.assert_code(1);
    let dir = repo.run_dir();
    let state = read_json(&dir.join("state.json"));
    let ranking = read_json(&dir.join("comparisons/ranking.json"));
    let reasons = ["scripted failure", "scripted failure", "scripted failure", "scripted failure"];
    for (i, expected) in reasons.iter().enumerate() {
        let id = format!("c0{}", i + 1);
        assert_eq!(state["candidates"][i]["status"], "agent_failed", "{id}: {state:#}");
        let evidence = read_json(&dir.join("candidates").join(&id).join("evidence.json"));
        assert_eq!(evidence["agent"]["exit_code"], 0, "{id} exited 0: {evidence:#}");
        let failure = evidence["agent"]["failure"].as_str().unwrap_or_default();
        assert!(failure.contains(expected), "{id}: {evidence:#}");
        let summary = read_json(&dir.join("candidates").join(&id).join("runner_summary.json"));
        assert_eq!(summary["agent_cli"]["final_status"], "failed", "{summary:#}");
        assert_eq!(summary["status"], "agent_failed", "{summary:#}");
        let c = ranked(&ranking, &id);
        assert_eq!(c["rejection"]["code"], "agent_failed", "{c:#}");
        assert!(c["reason"].as_str().unwrap_or_default().contains("the agent failed"), "{c:#}");
        let transcript = read_json_lines(&dir.join("candidates").join(&id).join("transcript.jsonl"));
        let end = transcript.last().expect("an end entry");
        assert_eq!(end["final_status"], "failed", "{end:#}");
        assert!(end["reason"].as_str().unwrap_or_default().contains(expected), "{end:#}");
    }
    assert_eq!(read_json(&dir.join("selection.json"))["winner"], Value::Null);
    assert_eq!(repo.read("calc.py"), CALC_PY, "nothing was applied");
}

#[test]
fn a_turn_limit_is_limit_reached_and_the_patch_is_still_judged() {
    let fakes = FakeClis::new();
    let repo = calc_repo(
        "[runners.claude-code]\nkind = \"claude-code\"\nmodel = \"maxturns\"\nmax_turns = 2\n\
         [runners.gemini]\nkind = \"gemini\"\nmodel = \"maxturns\"\nmax_turns = 3\n",
    );
    let run = arbiter_with(
        &repo,
        &fakes,
        &run_args("claude-code,gemini", &["--candidates", "2", "--verify", VERIFY_PY, "--apply", "none"]),
        &[],
    );
    run.assert_code(0);
    let dir = repo.run_dir();
    for (id, cli, limit) in [("c01", "claude-code", 2), ("c02", "gemini", 3)] {
        let evidence = read_json(&dir.join("candidates").join(id).join("evidence.json"));
        assert_eq!(evidence["status"], "limit_reached", "{evidence:#}");
        let why = evidence["agent"]["limit_reached"].as_str().unwrap_or_default();
        assert!(why.contains(&format!("{cli} reached its turn limit (max_turns = {limit})")), "{evidence:#}");
        let summary = read_json(&dir.join("candidates").join(id).join("runner_summary.json"));
        assert_eq!(summary["agent_cli"]["final_status"], "max_turns", "{summary:#}");
        assert_eq!(summary["runner"], format!("{cli}/maxturns"), "labelled with its model");
    }
    // Claude Code gets --max-turns; Gemini CLI gets maxSessionTurns in its settings file.
    let claude = fakes.record("claude", "c01");
    let argv: Vec<&str> = claude["argv"].as_array().expect("argv").iter().filter_map(Value::as_str).collect();
    assert!(argv.windows(2).any(|w| w == ["--max-turns", "2"]), "{argv:?}");
    assert!(
        fakes.record("gemini", "c02")["home_files"]
            .as_array()
            .expect("files")
            .contains(&json!(".gemini/settings.json"))
    );
    // Evaluated on its patch so far: the gates vouch for it.
    let selection = read_json(&dir.join("selection.json"));
    assert_eq!(selection["winner"], "c01", "{selection:#}");
}

#[test]
fn a_truncated_stream_is_a_failed_candidate_and_its_broken_line_is_recorded() {
    let fakes = FakeClis::new();
    let repo = calc_repo(
        "[runners.codex]\nkind = \"codex\"\nmodel = \"truncated\"\n\
         [runners.claude-code]\nkind = \"claude-code\"\nmodel = \"truncated\"\n\
         [runners.opencode]\nkind = \"opencode\"\nmodel = \"truncated\"\n",
    );
    let run = arbiter_with(
        &repo,
        &fakes,
        &run_args("codex,claude-code,opencode", &["--candidates", "3", "--apply", "none", "--no-verify"]),
        &[],
    );
    run.assert_code(1);
    let dir = repo.run_dir();
    let expected = [
        ("c01", "codex exited with code 0 without a completed turn"),
        ("c02", "claude-code exited with code 0 without a result line"),
        ("c03", "opencode exited with code 0 without a final step"),
    ];
    for (id, reason) in expected {
        let evidence = read_json(&dir.join("candidates").join(id).join("evidence.json"));
        assert_eq!(evidence["status"], "agent_failed", "{evidence:#}");
        assert_eq!(evidence["agent"]["failure"], reason, "{evidence:#}");
        let transcript = read_json_lines(&dir.join("candidates").join(id).join("transcript.jsonl"));
        let unparsed: Vec<&Value> = transcript.iter().filter(|e| e["type"] == "unparsed").collect();
        assert!(
            unparsed.iter().any(|e| e["reason"].as_str().unwrap_or_default().starts_with("truncated JSON")),
            "{id}: {transcript:#?}"
        );
        let summary = read_json(&dir.join("candidates").join(id).join("runner_summary.json"));
        assert!(summary["agent_cli"]["unparsed_lines"].as_u64().is_some_and(|n| n >= 1), "{summary:#}");
        // What the stream said before it broke is kept.
        assert_eq!(summary["agent_cli"]["files_touched"], json!(["calc.py"]), "{summary:#}");
    }
    // Codex's usage never arrived (its turn.completed line was cut): unknown, not zero.
    let codex = read_json(&dir.join("candidates/c01/runner_summary.json"));
    assert_eq!(codex["agent_cli"]["usage"], Value::Null, "{codex:#}");
    assert_eq!(codex["agent_cli"]["cost"]["flags"], json!(["usage_unavailable", "unpriced"]), "{codex:#}");
}

#[test]
fn a_mixed_tournament_labels_every_candidate_with_its_runner_and_model() {
    let fakes = FakeClis::new();
    let mut mock = MockLlm::start(&json!({"responses": [
        {"match": {"contains": "\"role\":\"tool\""}, "text": "Done: add() now adds.", "repeat": true,
         "usage": {"input_tokens": 300, "output_tokens": 20, "cached_tokens": 0}},
        {"text": "add() subtracts.", "repeat": true,
         "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old": "    return a - b\n", "new": "    return a + b\n"}}],
         "usage": {"input_tokens": 200, "output_tokens": 30, "cached_tokens": 0}},
    ]}));
    let repo = calc_repo(&format!(
        "[runners.claude-code]\nkind = \"claude-code\"\nmodel = \"fix\"\n\
         [runners.codex]\nkind = \"codex\"\nmodel = \"fix\"\n\
         [backends.mock]\nprovider = \"openai-compatible\"\nmodel = \"mock-coder\"\nbase_url = \"{}\"\n\
         input_cost = \"1\"\noutput_cost = \"2\"\nmax_parallel = 2\n\
         [roles]\ncoding = [\"mock\"]\n",
        mock.openai_url()
    ));
    let run = arbiter_with(
        &repo,
        &fakes,
        &run_args("claude-code,codex,builtin", &["--candidates", "6", "--verify", VERIFY_PY, "--no-judge"]),
        &[],
    );
    run.assert_code(0);
    assert_eq!(repo.read("calc.py"), FIXED_CALC_PY);
    let dir = repo.run_dir();
    assert_candidates_prepared(&dir);
    let expected = ["claude-code/fix", "codex/fix", "builtin/mock", "claude-code/fix", "codex/fix", "builtin/mock"];

    let selection = read_json(&dir.join("selection.json"));
    let labels: Vec<&str> = selection["candidates"]
        .as_array()
        .expect("candidates")
        .iter()
        .map(|c| c["runner"].as_str().unwrap_or_default())
        .collect();
    let mut sorted_ids: Vec<(&str, &str)> = selection["candidates"]
        .as_array()
        .expect("candidates")
        .iter()
        .map(|c| (c["candidate_id"].as_str().unwrap_or_default(), c["runner"].as_str().unwrap_or_default()))
        .collect();
    sorted_ids.sort();
    let by_id: Vec<&str> = sorted_ids.iter().map(|(_, r)| *r).collect();
    assert_eq!(by_id, expected, "{selection:#}");
    assert_eq!(labels.len(), 6);
    assert!(selection["winner"].is_string(), "{selection:#}");

    let state = read_json(&dir.join("state.json"));
    for (i, label) in expected.iter().enumerate() {
        assert_eq!(state["candidates"][i]["runner"], *label, "{state:#}");
        assert_eq!(state["candidates"][i]["status"], "finished", "{state:#}");
    }
    let report = fs::read_to_string(dir.join("final_report.md")).expect("final_report.md");
    let viewer = fs::read_to_string(dir.join("viewer/index.html")).expect("viewer");
    for label in ["claude-code/fix", "codex/fix", "builtin/mock"] {
        assert!(report.contains(label), "the report does not name {label}:\n{report}");
        assert!(viewer.contains(label), "the viewer does not name {label}");
    }
    for (i, label) in expected.iter().enumerate() {
        let id = format!("c0{}", i + 1);
        let summary = read_json(&dir.join("candidates").join(&id).join("runner_summary.json"));
        assert_eq!(summary["runner"], *label, "{summary:#}");
    }
    // Each builtin candidate made two model calls; the CLIs made none to the mock.
    assert_eq!(mock.chat_requests().len(), 4, "{:#?}", mock.log_lines());

    // Costs: Claude's own figure, Codex unpriced (its own provider reports no cost), the
    // built-in agent at the backend's price.
    let cost = read_json(&dir.join("cost_summary.json"));
    assert_eq!(cost["by_candidate"]["c01"]["known_cost"], "0.0123", "{cost:#}");
    assert_eq!(cost["by_candidate"]["c02"]["unpriced_calls"], 1, "{cost:#}");
    // 500 input and 50 output tokens at 1 and 2 USD per million.
    assert_eq!(cost["by_candidate"]["c03"]["known_cost"], "0.0006", "{cost:#}");
    assert_eq!(cost["complete"], false, "codex's cost is unknown: {cost:#}");
}

#[test]
fn a_cli_on_a_backend_gets_its_key_by_environment_only() {
    let fakes = FakeClis::new();
    let repo = calc_repo(
        "[runners.local-claude]\nkind = \"claude-code\"\nbackend = \"anthropic-local\"\nextra_args = [\"--verbose\"]\n",
    );
    let add = repo
        .arbiter_cmd(&[
            "backend",
            "add",
            "anthropic-local",
            "--provider",
            "anthropic",
            "--model",
            "fix",
            "--base-url",
            "http://127.0.0.1:9",
            "--api-key-stdin",
            "--input-cost",
            "3",
            "--output-cost",
            "15",
        ])
        .stdin(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().expect("stdin").write_all(BACKEND_KEY.as_bytes())?;
            child.wait_with_output()
        })
        .expect("add the backend");
    Run::from_output(add).assert_code(0);

    let run =
        arbiter_with(&repo, &fakes, &run_args("local-claude", &["--candidates", "1", "--verify", VERIFY_PY]), &[]);
    run.assert_code(0);
    assert_eq!(repo.read("calc.py"), FIXED_CALC_PY);
    let rec = fakes.record("claude", "c01");
    let env = rec["env"].as_object().expect("env");
    assert_eq!(env["ANTHROPIC_API_KEY"], BACKEND_KEY, "the backend's key, in the variable Claude Code reads");
    assert_eq!(env["ANTHROPIC_BASE_URL"], "http://127.0.0.1:9");
    assert!(!env.contains_key("OPENAI_API_KEY") && !env.contains_key("DATABASE_URL"), "{env:#?}");
    let names: Vec<&String> = env.keys().collect();
    assert!(
        names.iter().all(|n| !n.contains("KEY") || *n == "ANTHROPIC_API_KEY"),
        "only the backend's key variable: {names:?}"
    );
    let argv = rec["argv"].to_string();
    assert!(!argv.contains(BACKEND_KEY) && !argv.contains(ANTHROPIC_KEY), "{argv}");
    assert!(argv.contains("\"--model\",\"fix\"") && argv.ends_with("\"--verbose\"]"), "{argv}");

    let dir = repo.run_dir();
    let summary = read_json(&dir.join("candidates/c01/runner_summary.json"));
    assert_eq!(summary["runner"], "local-claude/anthropic-local", "{summary:#}");
    let cli = &summary["agent_cli"];
    assert_eq!(cli["backend"], "anthropic-local");
    // The CLI's own figure is the cost of record; tokens × the backend's price is kept beside it:
    // 2050 × 3 + 50 × 15 per million = 0.00690.
    assert_eq!(cli["cost"]["usd"], "0.0123", "{summary:#}");
    assert_eq!(cli["cost"]["computed"], "0.0069", "{summary:#}");
    assert!(summary["env_names"].as_array().expect("env names").iter().all(|n| n != "ANTHROPIC_API_KEY"));
    assert_no_secret_under_arbiter(&repo, &[BACKEND_KEY, ANTHROPIC_KEY, OPENAI_KEY, DB_URL]);
    assert!(
        fs::read_to_string(repo.secrets_file()).expect("secrets file").contains(BACKEND_KEY),
        "the key is kept where it was given"
    );
}

#[test]
fn the_budget_stops_a_cli_as_soon_as_its_usage_arrives() {
    let fakes = FakeClis::new();
    let repo = calc_repo(
        "[runners.codex]\nkind = \"codex\"\nmodel = \"spend\"\nbackend = \"pricey\"\n\
         [backends.pricey]\nprovider = \"openai-compatible\"\nmodel = \"spend\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\
         input_cost = \"10\"\noutput_cost = \"10\"\n",
    );
    let run = arbiter_with(
        &repo,
        &fakes,
        &run_args("codex", &["--candidates", "1", "--budget-usd", "1", "--apply", "none", "--no-verify"]),
        &[],
    );
    run.assert_code(1);
    let dir = repo.run_dir();
    let evidence = read_json(&dir.join("candidates/c01/evidence.json"));
    assert_eq!(evidence["status"], "limit_reached", "{evidence:#}");
    assert!(evidence["agent"]["limit_reached"].as_str().unwrap_or_default().contains("budget"), "{evidence:#}");
    assert!(!fakes.records_dir().join("c01.finished").exists(), "the agent was not stopped");
    let events = read_json_lines(&dir.join("runtime_events.jsonl"));
    assert!(events.iter().any(|e| e["kind"] == "budget_exceeded"), "{events:#?}");
    // 1.1M tokens at 10 USD per million.
    let cost = read_json(&dir.join("cost_summary.json"));
    assert_eq!(cost["by_candidate"]["c01"]["known_cost"], "11", "{cost:#}");
}

#[test]
fn bad_runner_input_is_refused_before_anything_runs() {
    let fakes = FakeClis::new();
    let repo = calc_repo(
        "[backends.chat]\nprovider = \"openai-compatible\"\nmodel = \"m\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\
         [runners.cursor]\nkind = \"cursor\"\n\
         [runners.ghost]\nkind = \"claude-code\"\nbinary = \"./no/such/claude\"\n",
    );
    let refused = |args: &[&str], path: &str, expect: &[&str]| {
        let mut cmd = repo.arbiter_cmd(args);
        let run = Run::from_output(cmd.env("PATH", path).output().expect("run arbiter"));
        run.assert_code(2);
        for e in expect {
            assert!(run.stderr.contains(e), "stderr lacks {e:?}:\n{}", run.stderr);
        }
    };
    let plain_path = std::env::var("PATH").unwrap_or_default();
    let fake_path = fakes.path();
    let task = |runner: &'static str, extra: &[&'static str]| {
        let mut args = vec!["run", "--task", "Fix add", "--runner", runner];
        args.extend_from_slice(extra);
        args
    };
    refused(
        &task("claude-code", &[]),
        &plain_path,
        &["`claude`", "is not on PATH", "npm install -g @anthropic-ai/claude-code"],
    );
    refused(
        &task("claude-code", &["--backend", "chat"]),
        &fake_path,
        &["claude-code cannot use backend 'chat' (openai-compatible)", "it speaks anthropic"],
    );
    refused(&task("villani-code", &[]), &fake_path, &["villani-code needs a backend"]);
    refused(&task("cursor", &[]), &fake_path, &["kind 'cursor'", "claude-code"]);
    refused(&task("codex", &["--backend", "nope"]), &fake_path, &["no backend named 'nope'"]);
    refused(&task("ghost", &[]), &fake_path, &["./no/such/claude", "does not exist"]);
    refused(&task("claud", &[]), &fake_path, &["unknown runner 'claud'", "claude-code"]);
    assert!(repo.run_dirs().is_empty(), "a refused run must not start: {:?}", repo.run_dirs());
}

#[test]
fn runners_lists_every_kind_with_install_state_and_version() {
    let fakes = FakeClis::new();
    let repo = calc_repo(
        "[backends.mock]\nprovider = \"openai-compatible\"\nmodel = \"m\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\
         [runners.claude-code]\nkind = \"claude-code\"\nmodel = \"sonnet\"\n\
         [runners.pinned]\nkind = \"codex\"\nbinary = \"/opt/nowhere/codex\"\nbackend = \"mock\"\n\
         [runners.fast]\nkind = \"command\"\ncommand = \"./agent.sh --fast\"\n",
    );
    // Only claude and codex of the fakes on PATH.
    let partial = tempfile::tempdir().expect("temp dir");
    for program in ["claude", "codex"] {
        std::os::unix::fs::symlink(fakes.bin().join("fake-cli.py"), partial.path().join(program)).expect("link");
    }
    let path = format!("{}:{}", partial.path().display(), std::env::var("PATH").unwrap_or_default());
    let run = Run::from_output(repo.arbiter_cmd(&["runners", "--json"]).env("PATH", &path).output().expect("run"));
    run.assert_code(0);
    let rows = assert_schema("runners", &run.stdout)["runners"].clone();
    let row = |name: &str| {
        rows.as_array()
            .expect("rows")
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("no {name}: {rows:#}"))
            .clone()
    };
    let names: Vec<&str> = rows.as_array().expect("rows").iter().filter_map(|r| r["name"].as_str()).collect();
    assert_eq!(
        names,
        ["command", "builtin", "claude-code", "codex", "gemini", "aider", "opencode", "villani-code", "fast", "pinned"]
    );
    assert_eq!(row("claude-code")["installed"], true);
    assert_eq!(row("claude-code")["version"], "2.1.197 (Claude Code)");
    assert_eq!(row("claude-code")["configured"], true);
    assert_eq!(row("claude-code")["model"], "sonnet");
    assert_eq!(row("codex")["version"], "codex-cli 0.171.0");
    assert_eq!(row("gemini")["installed"], false);
    assert!(row("gemini")["hint"].as_str().unwrap_or_default().contains("@google/gemini-cli"));
    assert_eq!(row("pinned")["installed"], false);
    assert_eq!(row("pinned")["backend"], "mock");
    assert!(row("pinned")["problem"].as_str().unwrap_or_default().contains("/opt/nowhere/codex"));
    assert_eq!(row("fast")["installed"], true, "{:#}", row("fast"));
    assert_eq!(row("builtin")["backends"][0]["name"], "mock");

    let text = Run::from_output(repo.arbiter_cmd(&["runners"]).env("PATH", &path).output().expect("run"));
    text.assert_code(0);
    for needle in
        ["NAME", "INSTALLED", "VERSION", "claude-code", "2.1.197 (Claude Code)", "villani-code", "backends: mock"]
    {
        assert!(text.stdout.contains(needle), "no {needle:?} in:\n{}", text.stdout);
    }
    // Outside any repository the kinds are listed all the same.
    let elsewhere = tempfile::tempdir().expect("temp dir");
    let out =
        Run::from_output(arbiter_cmd_in(elsewhere.path(), &["runners"]).env("PATH", &path).output().expect("run"));
    out.assert_code(0);
    assert!(out.stdout.contains("claude-code") && out.stdout.contains("no backend configured"), "{}", out.stdout);
}

#[test]
fn a_killed_run_resumes_keeping_finished_candidates_and_continuing_the_cli_session() {
    // c01 (claude, model fix) finishes; c02 (claude, model hang) reports its session and
    // waits. The run is SIGKILLed; the resume keeps c01, and continues c02 with
    // `--resume <its session>` in the worktree it left.
    let fakes = FakeClis::new();
    fs::create_dir_all(fakes.records_dir()).expect("records dir");
    fs::write(fakes.records_dir().join("hang"), "").expect("hang marker");
    let repo = calc_repo(
        "\n[runners.fixer]\nkind = \"claude-code\"\nmodel = \"fix\"\n[runners.hanger]\nkind = \"claude-code\"\nmodel = \"hang\"\n",
    );
    repo.allow_writes(&fakes.records_dir());
    let mut cmd = repo.arbiter_cmd(&run_args(
        "fixer,hanger",
        &["--candidates", "2", "--verify", VERIFY_PY, "--apply", "none", "--budget-usd", "1"],
    ));
    cmd.env("PATH", fakes.path()).env("ANTHROPIC_API_KEY", ANTHROPIC_KEY).stdout(Stdio::null()).stderr(Stdio::null());
    let mut child = cmd.spawn().expect("start the run");
    let pid_file = fakes.records_dir().join("claude-c02.pid");
    let dirs = || repo.run_dirs();
    assert!(
        wait_until(Duration::from_secs(60), || pid_file.exists()
            && dirs().first().is_some_and(|d| d.join("candidates/c01/result.json").exists())),
        "the run never got c01 done and c02 waiting"
    );
    child.kill().expect("SIGKILL arbiter");
    let _ = child.wait();
    let orphan = read_pid(&pid_file);
    fs::remove_file(fakes.records_dir().join("hang")).expect("let c02 finish");

    // The sandbox ended the waiting agent with its arbiter.
    assert!(wait_pid_gone(orphan), "the interrupted agent {orphan} outlived its SIGKILLed arbiter");
    let resumed = arbiter_with(&repo, &fakes, &["runs", "resume", "latest", "--json"], &[]);
    resumed.assert_code(0);
    let summary: Value = serde_json::from_str(&resumed.stdout).expect("--json");
    assert_eq!(summary["status"], "succeeded", "{summary:#}");
    // c01 ran once; c02 ran again, continuing its session in its own worktree.
    assert!(!fakes.records_dir().join("claude-c01-2.json").exists(), "c01 was kept, not run again");
    let first = fakes.record("claude", "c02");
    let again = read_json(&fakes.records_dir().join("claude-c02-2.json"));
    let argv: Vec<String> =
        again["argv"].as_array().expect("argv").iter().filter_map(|a| a.as_str().map(str::to_string)).collect();
    let at = argv.iter().position(|a| a == "--resume").unwrap_or_else(|| panic!("no --resume in {argv:?}"));
    assert_eq!(argv[at + 1], "5f0c8a2e-3b1d-4c2a-9e7f-000000000c02");
    assert_eq!(first["cwd"], again["cwd"], "the resumed agent works in the worktree it left");
    let dir = repo.run_dir();
    let events = read_json_lines(&dir.join("runtime_events.jsonl"));
    let resumed_event = events.iter().find(|e| e["kind"] == "run_resumed").expect("a run_resumed event");
    assert_eq!(resumed_event["data"]["kept"], serde_json::json!(["c01"]), "{resumed_event:#}");
    assert_eq!(resumed_event["data"]["restarting"][0]["reuses_worktree"], true);
    let seqs: Vec<u64> = events.iter().filter_map(|e| e["seq"].as_u64()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "event numbers keep increasing across the resume");
    assert!(dir.join("candidates/c02/stdout.interrupted.log").exists(), "the interrupted output is kept");
    let selection = read_json(&dir.join("selection.json"));
    assert_eq!(selection["outcome"], "selected", "{selection:#}");
    // Both candidates made the same fix: the kept one and the resumed one are eligible.
    let ranking = read_json(&dir.join("comparisons/ranking.json"));
    assert_eq!(ranked(&ranking, "c01")["eligible"], true, "{ranking:#}");
    assert_eq!(ranked(&ranking, "c02")["eligible"], true, "{ranking:#}");
    // The kept c01 cost as much before the interruption as the resumed c02 now: each is in the
    // spending report once, and the budget was charged with both (nothing was exceeded).
    let spending = &selection["spending"];
    assert_eq!(spending["candidates"][0]["candidate_id"], "c01", "{spending:#}");
    assert_eq!(spending["candidates"][0]["cost"], "0.0123", "{spending:#}");
    assert_eq!(spending["candidates"][1]["cost"], "0.0123", "{spending:#}");
    assert_eq!(spending["spent"], "0.0246", "{spending:#}");
    assert_eq!(spending["budget"]["spent"], "0.0246", "{spending:#}");
    assert_eq!(spending["budget"]["reached"], false, "{spending:#}");
    assert_eq!(spending["budget"]["uncharged_calls"], 0, "{spending:#}");
    let cost = read_json(&dir.join("cost_summary.json"));
    assert_eq!(cost["by_candidate"]["c01"]["calls"], 1, "{cost:#}");
    assert!(!events.iter().any(|e| e["kind"] == "budget_exceeded"), "{events:#?}");
    // A finished run is not resumed again.
    let twice = arbiter_with(&repo, &fakes, &["runs", "resume", "latest"], &[]);
    twice.assert_code(2);
    assert!(twice.stderr.contains("already finished"), "{}", twice.stderr);
}

#[test]
fn a_plan_task_s_spending_reaches_the_plan_while_it_runs_and_is_charged_once() {
    let fakes = FakeClis::new();
    let repo = calc_repo(
        "[runners.codex]\nkind = \"codex\"\nmodel = \"spend\"\nbackend = \"pricey\"\n\
         [backends.pricey]\nprovider = \"openai-compatible\"\nmodel = \"spend\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\
         input_cost = \"10\"\noutput_cost = \"10\"\n",
    );
    repo.allow_writes(&fakes.records_dir());
    let plan = json!({
        "id": "costly",
        "name": "Costly",
        "budget_usd": "100",
        "defaults": {"candidates": 1, "runners": "codex", "attempt_budget_usd": "50", "verify": ["python3 -m unittest -q"]},
        "tasks": [{"id": "fix", "title": "Fix add in calc.py"}],
    });
    repo.write("plan.json", serde_json::to_string_pretty(&plan).expect("plan JSON"));
    let mut cmd = repo.arbiter_cmd(&["plan", "import", "plan.json"]);
    Run::from_output(cmd.output().expect("import")).assert_code(0);
    let mut child = repo
        .arbiter_cmd(&["plan", "run", "costly"])
        .env("PATH", fakes.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the plan run");
    let status = || -> Value {
        let run = repo.arbiter(&["plan", "status", "costly", "--json"]);
        serde_json::from_str(&run.stdout).unwrap_or(Value::Null)
    };
    // The agent reported a turn of 1.1M tokens (11 USD) and keeps working: the plan has
    // been charged already, on the task's running attempt.
    let charged = wait_until(Duration::from_secs(60), || {
        let s = status();
        s["budget"]["spent"] == "11" && s["tasks"][0]["status"] == "running"
    });
    let seen = status();
    assert!(charged, "the cost did not reach the plan while the task ran: {seen:#}");
    assert_eq!(seen["tasks"][0]["cost"], "11", "{seen:#}");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGINT)
        .expect("interrupt the plan run");
    let exit = child.wait().expect("wait for the plan run");
    assert_eq!(exit.code(), Some(130), "an interrupted plan run exits 130");
    // The attempt was given back; what it spent is on the plan once, not again at its report.
    let after = status();
    assert_eq!(after["budget"]["spent"], "11", "{after:#}");
    assert_eq!(after["budget"]["reserved"], "0", "{after:#}");
    assert_eq!(after["tasks"][0]["status"], "ready", "{after:#}");
    assert!(!fakes.records_dir().join("c01.finished").exists(), "the agent was stopped");
}

/// Agent CLIs on a backend call it themselves: three ran at once on a backend with
/// `max_parallel = 1`. Now each holds one of the backend's places while it runs.
#[test]
fn cli_candidates_on_a_backend_keep_to_its_max_parallel() {
    let fakes = FakeClis::new();
    let repo = calc_repo(
        "[runners.codex]\nkind = \"codex\"\nmodel = \"slow\"\nbackend = \"single\"\n\
         [backends.single]\nprovider = \"openai-compatible\"\nmodel = \"slow\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\
         max_parallel = 1\n",
    );
    let run = arbiter_with(
        &repo,
        &fakes,
        &run_args("codex", &["--candidates", "3", "--parallel", "3", "--verify", VERIFY_PY, "--no-judge"]),
        &[],
    );
    run.assert_code(0);
    let events = read_json_lines(&repo.run_dir().join("runtime_events.jsonl"));
    let mut running = 0;
    for e in &events {
        match e["kind"].as_str() {
            Some("agent_started") => {
                running += 1;
                assert!(running <= 1, "two agents on a max_parallel = 1 backend at once: {events:#?}");
            }
            Some("agent_finished") => running -= 1,
            _ => {}
        }
    }
    let started = events.iter().filter(|e| e["kind"] == "agent_started").count();
    assert_eq!(started, 3, "{events:#?}");
}
