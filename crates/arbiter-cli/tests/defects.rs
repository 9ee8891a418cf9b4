//! Defects found by trying arbiter against real files and hostile input, each reproduced
//! first and fixed: the regression tests.

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use common::*;
use serde_json::json;

/// A plan of `n` independent tasks in `repo`, imported.
fn big_plan(repo: &TestRepo, n: usize) {
    let tasks: Vec<_> = (0..n)
        .map(|i| json!({"id": format!("t{i}"), "title": format!("task {i}"), "description": "Write the thing to the file there.", "acceptance_criteria": ["x"]}))
        .collect();
    let plan = json!({"id": "big", "name": "Big", "defaults": {"runners": "command", "command": "true"}, "tasks": tasks});
    repo.write("big.json", plan.to_string());
    repo.arbiter(&["plan", "import", "big.json"]).assert_code(0);
}

#[test]
fn a_reader_that_stops_reading_ends_the_output_without_a_panic() {
    let repo = TestRepo::new();
    repo.write("README.md", "x\n");
    repo.commit_all("init");
    repo.arbiter(&["init"]).assert_code(0);
    big_plan(&repo, 2000);
    for args in [&["plan", "show", "big"][..], &["plan", "status", "big"], &["plan", "export", "big"], &["plan", "events", "big"]] {
        let mut child = repo.arbiter_cmd(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
        // The reader goes away (as `| head -1` does).
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!first.is_empty(), "{args:?} printed nothing");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_ne!(out.status.code(), Some(101), "{args:?} exited like a panic: {stderr}");
    }
}
