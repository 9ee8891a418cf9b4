//! Cross-tests end to end: the real binary, a real repository, command-runner candidates
//! making real edits, and the tests they wrote run against each other and the base.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use common::*;
use serde_json::Value;

/// Candidates 0 and 2 special-case the visible test (`add(2, 3)`); candidate 1 fixes `add`
/// and adds a test of its own for other numbers. Every candidate passes the visible gates,
/// and the overfit patch is smaller and has two votes.
const AGENT_OVERFIT_OR_REAL: &str = r#"set -e
case "$ARBITER_CANDIDATE_INDEX" in
  1)
    sed -i 's/return a - b/return a + b/' calc.py
    cat > test_add_more.py <<'EOF'
import unittest

from calc import add


class AddMore(unittest.TestCase):
    def test_other_numbers(self):
        self.assertEqual(add(10, 5), 15)


if __name__ == "__main__":
    unittest.main()
EOF
    ;;
  *)
    sed -i 's/    return a - b/    if (a, b) == (2, 3):\n        return 5\n    return a - b/' calc.py
    ;;
esac
"#;

fn run(repo: &TestRepo, extra: &[&str]) -> std::path::PathBuf {
    let mut args = vec![
        "run",
        "--task",
        "Fix add",
        "--candidates",
        "3",
        "--command",
        "./agent.sh",
        "--verify",
        VERIFY_PY,
        "--apply",
        "none",
    ];
    args.extend_from_slice(extra);
    repo.arbiter(&args).assert_code(0);
    let dirs = repo.run_dirs();
    dirs.last().cloned().expect("a run directory")
}

fn ranked<'a>(ranking: &'a Value, id: &str) -> &'a Value {
    ranking["candidates"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["candidate_id"] == id))
        .unwrap_or_else(|| panic!("no {id} in {ranking:#}"))
}

#[test]
fn a_test_the_real_fix_wrote_separates_it_from_an_overfit_candidate() {
    let repo = python_repo(AGENT_OVERFIT_OR_REAL);
    repo.arbiter(&["init"]).assert_code(0);
    let dir = run(&repo, &[]);
    assert_candidates_prepared(&dir);

    let matrix = read_json(&dir.join("comparisons/cross_tests.json"));
    assert_eq!(matrix["schema_version"], 1);
    assert_eq!(matrix["ran"], true, "{matrix:#}");
    let tests = matrix["tests"].as_array().expect("tests");
    assert_eq!(tests.len(), 1, "{matrix:#}");
    let t = &tests[0];
    assert_eq!(t["path"], "test_add_more.py");
    assert_eq!(t["authors"], serde_json::json!(["c02"]));
    assert_eq!(t["command"], "python3 -m unittest test_add_more.py");
    assert_eq!(t["discriminating"], true, "{t:#}");
    assert_eq!(t["results"]["base"]["passed"], false, "{t:#}");
    assert_eq!(t["results"]["c02"]["passed"], true, "{t:#}");
    assert_eq!(t["results"]["c01"]["passed"], false, "{t:#}");
    // c03 made the same patch as c01 and shares its result.
    assert_eq!(t["results"]["c03"]["passed"], false, "{t:#}");
    let log = dir.join(t["results"]["c01"]["log"].as_str().expect("a log path"));
    assert!(std::fs::read_to_string(&log).expect("the log").contains("FAIL"), "{}", log.display());
    assert_eq!(matrix["scores"]["c02"]["passed"], 1);
    assert_eq!(matrix["scores"]["c01"]["passed"], 0);

    // The cross-test score ranks before votes and patch size.
    let selection = read_json(&dir.join("selection.json"));
    assert_eq!(selection["winner"], "c02", "{selection:#}");
    assert!(selection["summary"].as_str().unwrap_or("").contains("cross-tests"), "{selection:#}");
    let ranking = read_json(&dir.join("comparisons/ranking.json"));
    assert_eq!(ranked(&ranking, "c01")["votes"], 2);
    assert_eq!(ranked(&ranking, "c02")["cross_tests"]["passed"], 1, "{ranking:#}");
    assert!(ranked(&ranking, "c01")["reason"].as_str().unwrap_or("").contains("lost to c02 on cross-tests"));
    assert!(ranking["criteria"].as_array().expect("criteria").iter().any(|c| c == "cross-tests passed"));

    // The base tree is left as it was: no pooled file leaked into the repository or a patch.
    assert!(!repo.path().join("test_add_more.py").exists());
    let c01_patch = std::fs::read_to_string(dir.join("candidates/c01/patch.diff")).expect("patch");
    assert!(!c01_patch.contains("test_add_more"), "{c01_patch}");

    let report = std::fs::read_to_string(dir.join("final_report.md")).expect("report");
    assert!(report.contains("## Cross-tests") && report.contains("`test_add_more.py`"), "{report}");
    let viewer = std::fs::read_to_string(dir.join("viewer/index.html")).expect("viewer");
    assert!(viewer.contains("<h2>Cross-tests</h2>") && viewer.contains("Diffs side by side"), "the viewer");
    let event = read_json_lines(&dir.join("runtime_events.jsonl"))
        .into_iter()
        .find(|e| e["kind"] == "cross_tests")
        .expect("a cross_tests event");
    assert_eq!(event["data"]["discriminating"], 1, "{event:#}");
}

#[test]
fn without_cross_tests_the_overfit_patch_wins_on_votes() {
    let repo = python_repo(AGENT_OVERFIT_OR_REAL);
    repo.arbiter(&["init"]).assert_code(0);
    let dir = run(&repo, &["--no-cross-tests"]);
    let matrix = read_json(&dir.join("comparisons/cross_tests.json"));
    assert_eq!(matrix["ran"], false);
    assert!(matrix["skip_reason"].as_str().unwrap_or("").contains("off"), "{matrix:#}");
    assert_eq!(read_json(&dir.join("selection.json"))["winner"], "c01");
}

#[test]
fn cross_tests_are_skipped_with_a_reason_when_nobody_wrote_a_test() {
    let repo = python_repo(AGENT_TWO_VOTES);
    repo.arbiter(&["init"]).assert_code(0);
    let dir = run(&repo, &[]);
    let matrix = read_json(&dir.join("comparisons/cross_tests.json"));
    assert_eq!(matrix["ran"], false);
    assert!(
        matrix["skip_reason"].as_str().unwrap_or("").contains("no candidate added or changed a test"),
        "{matrix:#}"
    );
}

/// With the verify command on a virtualenv's interpreter (`/venv/bin/python3 -m pytest`),
/// cross-tests ran `python3 -m pytest`, and every pooled test failed everywhere with "No
/// module named pytest", its author's tree included: the evidence was lost. They run the
/// way the verify command runs the tests now. (pytest from the venv `.ci/run` installs.)
#[test]
fn cross_tests_run_with_the_interpreter_of_the_verify_command() {
    let Some(python) = pytest_python("cross_tests_run_with_the_interpreter_of_the_verify_command") else {
        return;
    };
    let agent = AGENT_OVERFIT_OR_REAL.replace(
        "import unittest\n\nfrom calc import add\n\n\nclass AddMore(unittest.TestCase):\n    def test_other_numbers(self):\n        self.assertEqual(add(10, 5), 15)\n\n\nif __name__ == \"__main__\":\n    unittest.main()\n",
        "from calc import add\n\n\ndef test_other_numbers():\n    assert add(10, 5) == 15\n",
    );
    let repo = python_repo(&agent);
    repo.write(".gitignore", "__pycache__/\n.pytest_cache/\n");
    repo.commit_all("ignore pytest's cache");
    repo.arbiter(&["init"]).assert_code(0);
    let verify = format!("{} -m pytest -q test_calc.py", python.display());
    let run = repo.arbiter(&[
        "run",
        "--task",
        "Fix add",
        "--candidates",
        "3",
        "--command",
        "./agent.sh",
        "--verify",
        &verify,
        "--apply",
        "none",
    ]);
    run.assert_code(0);
    let dir = repo.run_dir();
    let matrix = read_json(&dir.join("comparisons/cross_tests.json"));
    let t = &matrix["tests"][0];
    assert_eq!(t["command"], format!("{} -m pytest -q test_add_more.py", python.display()), "{matrix:#}");
    assert_eq!(t["results"]["c02"]["passed"], true, "its author's tree passes it: {t:#}");
    assert_eq!(t["discriminating"], true, "{t:#}");
    assert_eq!(read_json(&dir.join("selection.json"))["winner"], "c02");
}
