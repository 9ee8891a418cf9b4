//! A check that cannot run says so: when a verify command cannot run on this machine (its
//! test runner is not installed for the interpreter, a program it starts is missing), the
//! run stops with the command, the cause from its output and the fix (exit 2), before any
//! agent starts and with nothing applied; following the fix leads to a working run. A check
//! that runs and fails — even one whose output looks like a missing module, because the task
//! is to write it — is judged as before.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use std::path::{Path, PathBuf};

use common::*;

/// The fix every candidate makes; each also leaves a mark in `marks` when its agent starts.
fn marking_agent(marks: &Path) -> String {
    format!(
        "set -e\ntouch {}/\"agent-$ARBITER_CANDIDATE_ID\"\nsed -i 's/return a - b/return a + b/' calc.py\n",
        marks.display()
    )
}

/// A virtualenv with no package installed (not pytest): `python3` on a PATH that starts
/// with its `bin` has none. Outside /tmp, which a sandbox may give candidates a private one of.
fn bare_venv() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("bare-venv-{}", std::process::id()));
    if !dir.join("bin/python3").exists() {
        let out = std::process::Command::new("python3")
            .args(["-m", "venv", "--without-pip"])
            .arg(&dir)
            .output()
            .expect("python3 -m venv");
        assert!(out.status.success(), "cannot make a virtualenv: {}", String::from_utf8_lossy(&out.stderr));
    }
    dir
}

/// The calculator repository with a pytest configuration (so `python3 -m pytest -q` is the
/// detected command), the marking agent, and a directory candidates may write their marks to.
fn pytest_repo() -> (TestRepo, PathBuf) {
    let repo = TestRepo::new();
    let marks = repo.path().with_extension("marks");
    repo.write("calc.py", CALC_PY);
    repo.write("test_calc.py", "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n");
    repo.write("pytest.ini", "[pytest]\n");
    repo.write(".gitignore", "__pycache__/\n.pytest_cache/\n");
    repo.write_agent("agent.sh", &marking_agent(&marks));
    repo.commit_all("calc with a bug, tested by pytest");
    repo.allow_writes(&marks);
    (repo, marks)
}

fn run_args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = agent_run("Fix add in calc.py", "2", &["--timeout-seconds", "120"]);
    args.extend_from_slice(extra);
    args
}

fn agent_marks(marks: &Path) -> Vec<String> {
    std::fs::read_dir(marks)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn a_test_runner_missing_from_the_interpreter_stops_the_run_before_any_agent_and_the_hint_works() {
    let Some(pytest) = pytest_python("a_test_runner_missing_from_the_interpreter_stops_the_run") else { return };
    let venv = bare_venv();
    let (repo, marks) = pytest_repo();
    let path = format!("{}:{}", venv.join("bin").display(), std::env::var("PATH").unwrap_or_default());
    let out = repo.arbiter_cmd(&run_args(&[])).env("PATH", &path).output().expect("run arbiter");
    let run = Run::from_output(out);
    run.assert_code(2);
    assert!(run.stderr.contains("checking every candidate with `python3 -m pytest -q`"), "{}", run.stderr);
    let error = run.stderr.lines().find(|l| l.starts_with("arbiter: error: ")).unwrap_or_default();
    // The command, the cause in its own words, the fix.
    assert!(
        error.contains("the verify command `python3 -m pytest -q` cannot run on this machine: ")
            && error.contains("bin/python3: No module named pytest")
            && error.contains("-m pip install pytest")
            && error.contains("--verify '/path/to/venv/bin/python -m pytest -q'")
            && error.contains("nothing was applied"),
        "{}",
        run.stderr
    );
    // No agent started, nothing applied; the run directory says why.
    assert_eq!(agent_marks(&marks), Vec::<String>::new());
    assert_eq!(repo.status(), Vec::<String>::new());
    let dir = repo.run_dir();
    let baseline = read_json(&dir.join("baseline.json"));
    assert_eq!(baseline["cannot_run"][0]["command"], "python3 -m pytest -q", "{baseline:#}");
    let ranking = read_json(&dir.join("comparisons/ranking.json"));
    for c in ranking["candidates"].as_array().unwrap() {
        assert_eq!(c["status"], "skipped", "{ranking:#}");
    }
    assert!(std::fs::read_to_string(dir.join("final_report.md")).unwrap().contains("cannot run on this machine"));

    // Following the hint: --verify with the interpreter that has pytest.
    let verify = format!("{} -m pytest -q", pytest.display());
    let out = repo.arbiter_cmd(&run_args(&["--verify", &verify])).env("PATH", &path).output().expect("run arbiter");
    let run = Run::from_output(out);
    run.assert_code(0);
    assert!(repo.read("calc.py").contains("return a + b"));
    assert_eq!(agent_marks(&marks).len(), 2, "both agents ran");
}

#[test]
fn a_program_missing_on_this_machine_stops_the_run_with_the_fix() {
    let repo = python_repo("");
    let marks = repo.path().with_extension("marks");
    repo.write_agent("agent.sh", &marking_agent(&marks));
    // A check script of the repository that starts a tool this machine does not have.
    repo.write_exec("check.sh", "#!/bin/sh\nset -e\narbiter-no-such-linter-0f3a calc.py\npython3 -m unittest -q\n");
    repo.commit_all("a check script");
    repo.allow_writes(&marks);
    let run = repo.arbiter(&run_args(&["--verify", "./check.sh"]));
    run.assert_code(2);
    assert!(
        run.stderr.contains("the verify command `./check.sh` cannot run on this machine: ")
            && run.stderr.contains("arbiter-no-such-linter-0f3a: not found")
            && run.stderr.contains("install arbiter-no-such-linter-0f3a"),
        "{}",
        run.stderr
    );
    assert_eq!(agent_marks(&marks), Vec::<String>::new());
    assert_eq!(repo.status(), Vec::<String>::new());
    // The same with --json: one document saying so, exit 2.
    let run = repo.arbiter(&run_args(&["--verify", "./check.sh", "--json"]));
    run.assert_code(2);
    let report = assert_schema("run", &run.stdout);
    assert_eq!(report["exit_code"], 2);
    assert!(report["summary"].as_str().unwrap_or_default().contains("cannot run on this machine"), "{report:#}");
}

/// A module the task is to write is missing on the base too, and the base's run says `No
/// module named`: that check fails, it does not fail to run. The run goes on and the
/// candidate that writes the module wins.
#[test]
fn a_module_the_task_writes_is_not_taken_for_a_missing_tool() {
    let repo = TestRepo::new();
    repo.write("test_shapes.py", "import unittest\n\nfrom shapes import area\n\n\nclass T(unittest.TestCase):\n    def test_area(self):\n        self.assertEqual(area(2, 3), 6)\n");
    repo.write(".gitignore", "__pycache__/\n");
    repo.write_agent("agent.sh", "printf 'def area(w, h):\\n    return w * h\\n' > shapes.py\n");
    repo.commit_all("a test of a module to write");
    let run = repo.arbiter(&agent_run("Write shapes.py", "1", &["--verify", VERIFY_PY]));
    run.assert_code(0);
    let baseline = read_json(&repo.run_dir().join("baseline.json"));
    assert!(baseline["commands"][0]["output_tail"].as_str().unwrap_or_default().contains("No module named 'shapes'"));
    assert!(baseline.get("cannot_run").is_none(), "{baseline:#}");
    assert!(repo.read("shapes.py").contains("w * h"));
}
