//! Verified by default: a run without verify commands checks the candidates with the
//! repository's own test command, and where there is none it applies nothing until told
//! (`--no-verify`). The same for plans. Real repositories, real agents (shell scripts).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use common::*;
use serde_json::{Value, json};

/// Candidate 0 makes a wrong fix (the smaller patch), candidate 1 the right one.
const AGENT_WRONG_THEN_RIGHT: &str = r#"set -e
case "$ARBITER_CANDIDATE_INDEX" in
  0) sed -i 's/return a - b/return a % b/' calc.py ;;
  *) sed -i 's/return a - b/return a + b/' calc.py ;;
esac
"#;

fn run_without_verify<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = agent_run("Fix add in calc.py", "2", &["--timeout-seconds", "60"]);
    args.extend_from_slice(extra);
    args
}

#[test]
fn a_python_repository_s_tests_are_found_and_the_wrong_fix_loses() {
    let repo = python_repo(AGENT_WRONG_THEN_RIGHT);
    let run = repo.arbiter(&run_without_verify(&[]));
    run.assert_code(0);
    assert!(
        run.stderr.contains("checking every candidate with `python3 -m unittest -q` (detected from test_calc.py)"),
        "{}",
        run.stderr
    );
    assert!(run.stdout.contains("Verified by `python3 -m unittest -q` (detected from test_calc.py)"), "{}", run.stdout);
    let dir = repo.run_dir();
    assert_eq!(read_json(&dir.join("selection.json"))["winner"], "c02");
    assert!(repo.read("calc.py").contains("return a + b"), "the right fix is applied");
    let settings = &read_json(&dir.join("settings.json"))["settings"];
    assert_eq!(settings["verify"], json!({"value": ["python3 -m unittest -q"], "origin": "detected"}));
    assert_eq!(settings["verify_detected_from"], "test_calc.py");
    let report = std::fs::read_to_string(dir.join("final_report.md")).unwrap();
    let first = report.lines().filter(|l| !l.trim().is_empty()).nth(1).unwrap_or_default();
    assert!(first.starts_with("Verified by `python3 -m unittest -q` (detected from test_calc.py)"), "{report}");
    let evidence = read_json(&dir.join("candidates/c01/evidence.json"));
    assert_eq!(evidence["gate_summary"]["all_passed"], json!(false), "{evidence:#}");
}

#[test]
fn without_any_test_command_nothing_is_applied_until_no_verify_is_given() {
    let repo = TestRepo::new();
    repo.write("notes.txt", "draft\n");
    repo.write_agent("agent.sh", "printf 'final\\n' > notes.txt\n");
    repo.commit_all("notes");
    let run = repo.arbiter(&run_without_verify(&[]));
    run.assert_code(1);
    assert!(run.stderr.contains("none found in the repository"), "{}", run.stderr);
    assert!(run.stdout.contains("Not applied: nothing checked the candidates"), "{}", run.stdout);
    assert!(run.stdout.contains("--no-verify"), "{}", run.stdout);
    assert_eq!(repo.read("notes.txt"), "draft\n", "nothing was written into the working tree");
    let list = repo.arbiter(&["runs", "list", "--json"]);
    list.assert_code(0);
    let runs: Value = serde_json::from_str(&list.stdout).unwrap();
    assert_eq!(runs["runs"][0]["status"], "not_applied", "{runs:#}");

    // The hint: --no-verify applies the winner, and the report says it was unverified.
    let run = repo.arbiter(&run_without_verify(&["--no-verify"]));
    run.assert_code(0);
    assert!(run.stdout.contains("Unverified: no verify command ran (--no-verify)"), "{}", run.stdout);
    assert_eq!(repo.read("notes.txt"), "final\n");
    let dir = run.stdout.lines().find_map(|l| l.strip_prefix("Run directory: ")).unwrap().to_string();
    let report = std::fs::read_to_string(std::path::Path::new(&dir).join("final_report.md")).unwrap();
    assert!(report.contains("**Warning:** Unverified"), "{report}");

    // The other hint: `arbiter apply` of the unapplied run.
    repo.git(&["checkout", "--", "notes.txt"]);
    let first = runs["runs"][0]["run_id"].as_str().unwrap().to_string();
    repo.arbiter(&["apply", &first]).assert_code(0);
    assert_eq!(repo.read("notes.txt"), "final\n");

    // --verify and --no-verify together are refused.
    let both = repo.arbiter(&run_without_verify(&["--no-verify", "--verify", "true"]));
    both.assert_code(2);
}

#[test]
fn a_detected_program_that_is_missing_is_named_with_the_way_out() {
    // An Elixir project on a machine without Elixir: `mix test` cannot run.
    let repo = TestRepo::new();
    repo.write("mix.exs", "defmodule X.MixProject do\nend\n");
    repo.write_agent("agent.sh", "echo hi > hi.txt\n");
    repo.commit_all("mix project");
    let run = repo.arbiter(&run_without_verify(&[]));
    run.assert_code(2);
    assert!(run.stderr.contains("`mix test` (detected from mix.exs)"), "{}", run.stderr);
    assert!(run.stderr.contains("the verify command detected from mix.exs"), "{}", run.stderr);
    assert!(run.stderr.contains("--no-verify"), "{}", run.stderr);
    // Following the hint: --verify with a command that exists.
    repo.arbiter(&run_without_verify(&["--verify", "test -f hi.txt"])).assert_code(0);
    assert_eq!(repo.read("hi.txt"), "hi\n");
}

#[test]
fn a_plan_without_verify_commands_uses_the_repository_s_tests_or_says_how() {
    let repo = python_repo("set -e\nsed -i 's/return a - b/return a + b/' calc.py\n");
    repo.arbiter(&["init"]).assert_code(0);
    let plan = json!({
        "id": "fix", "name": "Fix",
        "defaults": {"candidates": 1, "runners": "command", "command": "./agent.sh", "max_attempts": 1},
        "tasks": [{"id": "T1", "title": "Fix add", "description": "add subtracts; make it add.", "acceptance_criteria": ["add(2, 3) == 5"]}],
    });
    repo.write("plan.json", plan.to_string());
    repo.commit_all("plan");
    repo.arbiter(&["plan", "import", "plan.json"]).assert_code(0);
    let run = repo.arbiter(&["plan", "run", "fix"]);
    run.assert_code(0);
    assert!(run.stderr.contains("Verified by `python3 -m unittest -q` (detected from test_calc.py)"), "{}", run.stderr);
    let shown = repo.git(&["show", "arbiter/fix:calc.py"]);
    assert!(shown.contains("return a + b"), "{shown}");

    // A repository without tests: the plan does not start, and the hint works.
    let bare = TestRepo::new();
    bare.write("notes.txt", "draft\n");
    bare.write_agent("agent.sh", "printf 'final\\n' > notes.txt\n");
    bare.arbiter(&["init"]).assert_code(0);
    let mut plan = plan.clone();
    plan["id"] = json!("notes");
    bare.write("plan.json", plan.to_string());
    bare.commit_all("notes");
    bare.arbiter(&["plan", "import", "plan.json"]).assert_code(0);
    let refused = bare.arbiter(&["plan", "run", "notes"]);
    refused.assert_code(2);
    assert!(refused.stderr.contains("task T1 has no verify command and none was found"), "{}", refused.stderr);
    assert!(refused.stderr.contains("arbiter plan run notes --no-verify"), "{}", refused.stderr);
    bare.arbiter(&["plan", "run", "notes", "--no-verify"]).assert_code(0);
    assert_eq!(bare.git(&["show", "arbiter/notes:notes.txt"]), "final\n");
}

#[test]
fn one_whole_suite_command_is_judged_test_by_test() {
    // c01 fixes add and breaks mul; c02 fixes add only. One verify command runs every test.
    let repo = python_repo(AGENT_FIX_BREAK_NOTHING);
    let run = repo.arbiter(&run_without_verify(&["--apply", "none"]));
    run.assert_code(0);
    let ranking = read_json(&repo.run_dir().join("comparisons/ranking.json"));
    let reason = |id: &str| {
        ranking["candidates"].as_array().unwrap().iter().find(|c| c["candidate_id"] == id).unwrap()["reason"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(
        reason("c02").contains("broke 1 passing test (test_calc.CalcTest.test_mul)")
            && reason("c02").contains("fixed 1 of 1 failing test (test_calc.CalcTest.test_add)"),
        "{ranking:#}"
    );
    assert!(reason("c01").contains("fixed 1 of 1 failing test (test_calc.CalcTest.test_add)"), "{ranking:#}");
    let evidence = read_json(&repo.run_dir().join("candidates/c02/evidence.json"));
    assert_eq!(evidence["gates"][0]["tests"]["broke"], json!(["test_calc.CalcTest.test_mul"]), "{evidence:#}");
    let baseline = read_json(&repo.run_dir().join("baseline.json"));
    assert_eq!(baseline["commands"][0]["failed_tests"], json!(["test_calc.CalcTest.test_add"]), "{baseline:#}");
}
