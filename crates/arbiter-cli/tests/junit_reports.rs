//! JUnit XML reports as per-test evidence: a report a gate's run writes (a path the verify
//! command names, or one of the `test_reports` globs) is read for the tests that failed, so
//! any test runner that writes JUnit XML is judged test by test. Only reports the run itself
//! wrote count, and no report enters a patch. Real repositories, real agents (shell scripts).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use common::*;
use serde_json::{Value, json};

/// A test runner arbiter does not know: it checks calc.py, prints one line, and writes
/// `build/reports/TEST-calc.xml`.
const CHECK_SH: &str = r#"#!/bin/sh
mkdir -p build/reports
exec python3 - <<'EOF'
import sys
from calc import add, mul
cases = [("calc", "adds", add(2, 3) == 5), ("calc", "multiplies", mul(2, 3) == 6)]
with open("build/reports/TEST-calc.xml", "w") as f:
    f.write('<testsuite name="calc" tests="2">')
    for cls, name, ok in cases:
        f.write(f'<testcase classname="{cls}" name="{name}">' + ("" if ok else '<failure message="wrong"/>') + "</testcase>")
    f.write("</testsuite>")
print("checked", len(cases), "cases")
sys.exit(0 if all(ok for *_, ok in cases) else 1)
EOF
"#;

/// `0`: fixes add (and leaves a report where pytest would write one, as an agent that ran the
/// tests does). `1`: fixes add and breaks mul. `2`: a change that fixes nothing, and a report
/// in the reports directory that says every case passes.
const AGENT: &str = r#"set -e
case "$ARBITER_CANDIDATE_INDEX" in
  0) sed -i 's/return a - b/return a + b/' calc.py
     mkdir -p reports && echo '<testsuite><testcase classname="x" name="ran-by-the-agent"/></testsuite>' > reports/junit.xml ;;
  1) sed -i 's/return a - b/return a + b/; s/return a \* b/return a + b/' calc.py ;;
  *) sed -i 's/return a - b/return a - b + 0/' calc.py
     mkdir -p build/reports
     echo '<testsuite><testcase classname="calc" name="adds"/><testcase classname="calc" name="multiplies"/></testsuite>' > build/reports/TEST-forged.xml ;;
esac
"#;

fn reason(ranking: &Value, id: &str) -> String {
    let c = ranking["candidates"].as_array().unwrap().iter().find(|c| c["candidate_id"] == id);
    c.map(|c| c["reason"].as_str().unwrap_or_default().to_string()).unwrap_or_default()
}

fn run_args(verify: &str) -> Vec<&str> {
    vec![
        "run",
        "--task",
        "Fix add",
        "--candidates",
        "3",
        "--command",
        "./agent.sh",
        "--verify",
        verify,
        "--timeout-seconds",
        "60",
    ]
}

#[test]
fn any_runner_s_junit_report_is_read_test_by_test_and_a_forged_one_is_not() {
    let repo = python_repo(AGENT);
    repo.write_agent("check.sh", CHECK_SH);
    repo.commit_all("a test runner of our own");
    repo.arbiter(&["init"]).assert_code(0);
    let config = repo.path().join(".arbiter/config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, text.replacen("[run]", "[run]\ntest_reports = [\"build/reports/*.xml\"]", 1)).unwrap();
    let shown = repo.arbiter(&["config", "show"]);
    assert!(shown.assert_code(0).stdout.contains("build/reports/*.xml"), "{}", shown.stdout);

    let run = repo.arbiter(&run_args("./check.sh"));
    run.assert_code(0);
    let dir = repo.run_dir();
    let baseline = read_json(&dir.join("baseline.json"));
    assert_eq!(baseline["commands"][0]["failed_tests"], json!(["calc.adds"]), "{baseline:#}");
    assert_eq!(baseline["commands"][0]["test_reports"], json!(["build/reports/TEST-calc.xml"]), "{baseline:#}");
    let ranking = read_json(&dir.join("comparisons/ranking.json"));
    assert!(reason(&ranking, "c02").contains("broke 1 passing test (calc.multiplies)"), "{ranking:#}");
    assert!(reason(&ranking, "c01").contains("fixed 1 of 1 failing test (calc.adds)"), "{ranking:#}");
    // The forged report was in c03's tree before its gate ran: the run's own report decides.
    let forged = read_json(&dir.join("candidates/c03/evidence.json"));
    assert_eq!(forged["gates"][0]["failed_tests"], json!(["calc.adds"]), "{forged:#}");
    assert_eq!(forged["gates"][0]["test_reports"], json!(["build/reports/TEST-calc.xml"]), "{forged:#}");
    let c03_patch = std::fs::read_to_string(dir.join("candidates/c03/patch.diff")).unwrap_or_default();
    assert!(!c03_patch.contains("TEST-forged.xml"), "a report is never part of a patch: {c03_patch}");
    assert_eq!(read_json(&dir.join("selection.json"))["winner"], "c01");
    assert!(repo.read("calc.py").contains("return a + b"));
}

#[test]
fn pytest_s_junitxml_report_is_the_evidence_and_never_part_of_the_patch() {
    let Some(python) = pytest_python("pytest_s_junitxml_report_is_the_evidence_and_never_part_of_the_patch") else {
        return;
    };
    let repo = python_repo(AGENT);
    repo.write(".gitignore", "__pycache__/\n.pytest_cache/\n");
    repo.commit_all("ignore pytest's cache");
    let verify = format!("{} -m pytest -q --junitxml=reports/junit.xml test_calc.py", python.display());
    let run = repo.arbiter(&run_args(&verify));
    run.assert_code(0);
    let dir = repo.run_dir();
    let baseline = read_json(&dir.join("baseline.json"));
    assert_eq!(baseline["commands"][0]["test_reports"], json!(["reports/junit.xml"]), "{baseline:#}");
    assert_eq!(baseline["commands"][0]["failed_tests"], json!(["test_calc.CalcTest.test_add"]), "{baseline:#}");
    let ranking = read_json(&dir.join("comparisons/ranking.json"));
    assert!(reason(&ranking, "c02").contains("broke 1 passing test (test_calc.CalcTest.test_mul)"), "{ranking:#}");
    // c01 wrote a report itself, as an agent running the tests would: not in its patch, not
    // in the working tree once its patch is applied.
    assert_eq!(read_json(&dir.join("selection.json"))["winner"], "c01");
    let patch = std::fs::read_to_string(dir.join("candidates/c01/patch.diff")).unwrap();
    assert!(!patch.contains("reports/junit.xml"), "{patch}");
    assert!(!repo.path().join("reports/junit.xml").exists());
    assert!(repo.read("calc.py").contains("return a + b"));
}
