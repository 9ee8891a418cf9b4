//! A reader that stops reading ends every command quietly: `arbiter … | head -1` exits 141
//! (as a program killed by SIGPIPE does) or 0, with nothing on stderr — no panic, no error.
//! Each command is run twice: as the shell pipeline a user types, and with its stdout a pipe
//! whose reader is gone before it starts (the worst case of `| head`, where every write
//! fails), so the test does not depend on how much fits in a pipe's buffer.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};

use common::*;

/// The statuses a command that lost its reader may end with.
fn quiet_end(status: std::process::ExitStatus) -> bool {
    matches!(status.code(), Some(0 | 141)) || status.signal() == Some(nix::libc::SIGPIPE)
}

/// `arbiter ARGS` in `dir`, its stdout a pipe nobody reads any more.
fn into_a_closed_pipe(dir: &Path, args: &[&str]) -> (std::process::ExitStatus, String) {
    let (reader, writer) = nix::unistd::pipe().expect("a pipe");
    drop(reader);
    let out =
        arbiter_cmd_in(dir, args).stdout(Stdio::from(writer)).stderr(Stdio::piped()).output().expect("run arbiter");
    (out.status, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// `arbiter ARGS | READER` in `dir` through the shell: arbiter's own exit status, its stderr.
fn through_the_shell(dir: &Path, args: &[&str], reader: &str) -> (i32, String) {
    let words: Vec<String> = args.iter().map(|a| format!("'{}'", a.replace('\'', r"'\''"))).collect();
    let scratch = tempfile::tempdir().expect("a temp dir");
    let err = scratch.path().join("stderr");
    let line = format!(
        "'{ARBITER}' {} 2>'{}' | {reader} > /dev/null; exit \"${{PIPESTATUS[0]}}\"",
        words.join(" "),
        err.display()
    );
    let mut cmd = Command::new("bash");
    cmd.args(["-c", &line]).current_dir(dir).stdin(Stdio::null());
    for (k, v) in arbiter_cmd_in(dir, &[]).get_envs() {
        if let Some(v) = v {
            cmd.env(k, v);
        }
    }
    let status = cmd.status().expect("run bash");
    let stderr = std::fs::read_to_string(&err).unwrap_or_default();
    (status.code().unwrap_or(-1), stderr)
}

#[track_caller]
fn ends_quietly(dir: &Path, args: &[&str], reader: &str) {
    let (status, stderr) = into_a_closed_pipe(dir, args);
    assert!(quiet_end(status), "arbiter {args:?} into a closed pipe: {status:?}\n{stderr}");
    assert_eq!(stderr, "", "arbiter {args:?} into a closed pipe said something");
    let (code, stderr) = through_the_shell(dir, args, reader);
    assert!(matches!(code, 0 | 141), "arbiter {args:?} | {reader}: exit {code}\n{stderr}");
    assert_eq!(stderr, "", "arbiter {args:?} | {reader} said something");
}

#[test]
fn completions_end_quietly_when_the_reader_stops() {
    ends_quietly(&std::env::temp_dir(), &["completions", "bash"], "head -1");
}

#[test]
fn man_ends_quietly_when_the_reader_stops() {
    ends_quietly(&std::env::temp_dir(), &["man"], "head -1");
}

#[test]
fn help_ends_quietly_when_the_reader_stops() {
    ends_quietly(&std::env::temp_dir(), &["--help"], "head -1");
    ends_quietly(&std::env::temp_dir(), &["run", "--help"], "head -1");
}

#[test]
fn runs_list_after_a_demo_ends_quietly_when_the_reader_stops() {
    let dir = tempfile::tempdir().unwrap();
    let demo = dir.path().join("demo");
    let made = run_arbiter_in(dir.path(), &["demo", "--dir", demo.to_str().unwrap()]);
    made.assert_code(0);
    ends_quietly(&demo, &["runs", "list"], "head -1");
}

#[test]
fn a_run_s_json_ends_quietly_when_the_reader_stops() {
    let repo = python_repo(AGENT_FIX);
    let args = agent_run("Fix add", "1", &["--quiet", "--verify", VERIFY_PY, "--apply", "none", "--json"]);
    ends_quietly(repo.path(), &args, "head -c 10");
    // Both runs finished and were recorded, the reader's leaving notwithstanding.
    assert_eq!(repo.run_dirs().len(), 2);
}
