//! Spending end to end: the escalation strategy (cheapest capable backend first, stop at the
//! first candidate that passes) and the run budget, with the built-in agent over a scripted
//! model server on real HTTP, in real repositories.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use common::*;
use serde_json::{Value, json};

fn calc_repo() -> TestRepo {
    let repo = TestRepo::new();
    repo.write("calc.py", CALC_PY);
    repo.write("test_calc.py", TEST_CALC_PY);
    repo.write(".gitignore", "__pycache__/\n");
    repo.commit_all("calc with a bug");
    repo.arbiter(&["init"]).assert_code(0);
    repo
}

fn add_backend(repo: &TestRepo, name: &str, model: &str, url: &str, price: &str, capability: &str) {
    repo.arbiter(&[
        "backend",
        "add",
        name,
        "--provider",
        "openai-compatible",
        "--model",
        model,
        "--base-url",
        url,
        "--input-cost",
        price,
        "--output-cost",
        price,
        "--capability",
        capability,
    ])
    .assert_code(0);
}

fn edit(new: &str) -> Value {
    json!({"name": "edit_file", "arguments": {"path": "calc.py", "old": "    return a - b\n", "new": new}})
}

fn finish() -> Value {
    json!({"name": "finish", "arguments": {"summary": "done"}})
}

fn usage() -> Value {
    json!({"input_tokens": 1000, "output_tokens": 100})
}

fn events_of(dir: &std::path::Path, kind: &str) -> Vec<Value> {
    read_json_lines(&dir.join("runtime_events.jsonl")).into_iter().filter(|e| e["kind"] == kind).collect()
}

#[test]
fn escalation_runs_the_cheapest_first_and_stops_at_the_first_pass() {
    // The cheap model breaks add differently; the mid one fixes it; the expensive one is
    // never needed. Each answers once, in one step, with 1000 input and 100 output tokens.
    let mut mock = MockLlm::start(&json!({"responses": [
        {"match": {"contains": "model-cheap-x"}, "tool_calls": [edit("    return a * b\n"), finish()], "usage": usage()},
        {"match": {"contains": "model-mid-x"}, "tool_calls": [edit("    return a + b\n"), finish()], "usage": usage()},
        {"match": {"contains": "model-expensive-x"}, "tool_calls": [edit("    return b + a\n"), finish()], "usage": usage()},
    ]}));
    let repo = calc_repo();
    let url = mock.openai_url();
    add_backend(&repo, "expensive", "model-expensive-x", &url, "10", "90");
    add_backend(&repo, "cheap", "model-cheap-x", &url, "0.1", "20");
    add_backend(&repo, "mid", "model-mid-x", &url, "1", "50");
    let run = repo.arbiter(&[
        "run",
        "--task",
        "Fix add() in calc.py",
        "--runner",
        "builtin",
        "--backend",
        "expensive,cheap,mid",
        "--strategy",
        "escalate",
        "--verify",
        VERIFY_PY,
        "--json",
    ]);
    run.assert_code(0);
    let summary: Value = serde_json::from_str(&run.stdout).expect("--json output");
    assert_eq!(summary["winner"], "c02", "{summary:#}");

    let dir = repo.run_dir();
    let selection = read_json(&dir.join("selection.json"));
    let spending = &selection["spending"];
    assert_eq!(spending["strategy"], "escalate", "{selection:#}");
    let order: Vec<&str> = spending["candidates"]
        .as_array()
        .expect("candidates")
        .iter()
        .map(|c| c["runner"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(order, vec!["builtin/cheap", "builtin/mid", "builtin/expensive"], "cheapest first: {spending:#}");
    assert_eq!(spending["ran"], 2);
    assert_eq!(spending["stopped_at"], "c02");
    // 1100 tokens at 0.1 and at 1 USD per Mtok; the expensive one estimated at 10.
    assert_eq!(spending["spent"], "0.00121", "{spending:#}");
    assert_eq!(spending["cost_of_all"], "0.01221", "{spending:#}");
    assert_eq!(spending["candidates"][2]["status"], "skipped");

    let ranking = read_json(&dir.join("comparisons/ranking.json"));
    let c03 =
        ranking["candidates"].as_array().expect("candidates").iter().find(|c| c["candidate_id"] == "c03").expect("c03");
    assert_eq!(c03["rejection"]["code"], "not_run", "{c03:#}");
    assert!(c03["reason"].as_str().unwrap_or("").contains("c02 already passed its gates"), "{c03:#}");
    assert!(!dir.join("candidates/c03/patch.diff").exists(), "a skipped candidate never ran");
    assert_eq!(events_of(&dir, "escalation_stopped").len(), 1);
    // Only two model calls were made, one per candidate that ran.
    assert_eq!(mock.chat_requests().len(), 2, "{:#?}", mock.log_lines());
    let report = std::fs::read_to_string(dir.join("final_report.md")).expect("report");
    assert!(report.contains("running all of them would have cost about $0.01221"), "{report}");
    assert!(repo.read("calc.py").contains("return a + b"), "the winner was applied");
}

#[test]
fn the_run_budget_stops_the_agents_and_the_run_ends_with_what_it_has() {
    // c01 fixes add on its first step, then keeps reading; each call costs 0.0011 USD. The
    // budget of 0.002 is crossed by its second call: it is stopped, evaluated on its patch
    // so far, and c02 never starts.
    let mut mock = MockLlm::start(&json!({"responses": [
        {"tool_calls": [edit("    return a + b\n")], "usage": usage()},
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}], "usage": usage(), "repeat": true},
    ]}));
    let repo = calc_repo();
    add_backend(&repo, "b1", "spender", &mock.openai_url(), "1", "10");
    let run = repo.arbiter(&[
        "run",
        "--task",
        "Fix add() in calc.py",
        "--runner",
        "builtin",
        "--backend",
        "b1",
        "--candidates",
        "2",
        "--parallel",
        "1",
        "--budget-usd",
        "0.002",
        "--verify",
        VERIFY_PY,
        "--apply",
        "none",
    ]);
    run.assert_code(0);
    assert!(run.stdout.contains("the budget of $0.002 was reached"), "{}", run.stdout);

    let dir = repo.run_dir();
    let crossings = events_of(&dir, "budget_exceeded");
    assert_eq!(crossings.len(), 1, "exactly one crossing: {crossings:#?}");
    assert_eq!(crossings[0]["data"]["spent"], "0.0022");
    let c01 = read_json(&dir.join("candidates/c01/evidence.json"));
    assert_eq!(c01["status"], "limit_reached", "{c01:#}");
    assert!(c01["agent"]["limit_reached"].as_str().unwrap_or("").contains("budget"), "{c01:#}");
    let c02 = read_json(&dir.join("candidates/c02/evidence.json"));
    assert_eq!(c02["status"], "skipped", "{c02:#}");
    assert!(c02["not_run"].as_str().unwrap_or("").contains("before it started"), "{c02:#}");
    let selection = read_json(&dir.join("selection.json"));
    assert_eq!(selection["winner"], "c01", "the patch so far passes its gates: {selection:#}");
    let budget = &selection["spending"]["budget"];
    assert_eq!(budget["reached"], true, "{budget:#}");
    assert_eq!(budget["limit"], "0.002");
    assert_eq!(budget["stopped"], json!(["c01"]));
    assert_eq!(budget["not_started"], json!(["c02"]));
    let cost = read_json(&dir.join("cost_summary.json"));
    assert_eq!(cost["total"]["calls"], 2, "{cost:#}");
    assert_eq!(cost["total"]["known_cost"], "0.0022");
    assert_eq!(mock.chat_requests().len(), 2, "{:#?}", mock.log_lines());
}

#[test]
fn a_bad_budget_or_strategy_is_refused_before_anything_runs() {
    let repo = calc_repo();
    for (flag, value, needle) in [
        ("--budget-usd", "lots", "--budget-usd 'lots' is not a positive amount"),
        ("--budget-usd", "0", "is not a positive amount"),
        ("--strategy", "fastest", "use one of tournament, escalate, cheap, balanced, quality"),
    ] {
        let run = repo.arbiter(&["run", "--task", "x", "--command", "true", flag, value]);
        run.assert_code(2);
        assert!(run.stderr.contains(needle), "{flag} {value}: {}", run.stderr);
    }
    assert!(repo.run_dirs().is_empty(), "nothing ran");
}
