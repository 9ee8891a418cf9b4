//! `arbiter backend ...` against a real repository: configuration edits keep the user's
//! file, keys go only to a 0600 secrets file, and nothing prints a key.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;

use common::*;

const KEY: &str = "sk-test-backend-key-0123456789abcdef";

#[test]
fn keys_stay_in_the_secrets_file_and_are_never_printed() {
    let repo = TestRepo::new();
    repo.write("README", "x\n");
    repo.commit_all("base");
    repo.arbiter(&["init"]).assert_code(0);
    let config_path = repo.arbiter_dir().join("config.toml");
    let before = std::fs::read_to_string(&config_path).expect("config");

    repo.arbiter(&[
        "backend",
        "add",
        "local",
        "--provider",
        "openai-compatible",
        "--model",
        "qwen",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--input-cost",
        "0.15",
        "--output-cost",
        "0.6",
        "--max-parallel",
        "2",
    ])
    .assert_code(0);
    let mut child = repo
        .arbiter_cmd(&[
            "backend",
            "add",
            "claude",
            "--provider",
            "anthropic",
            "--model",
            "m",
            "--api-key-stdin",
            "--roles",
            "coding,review",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    child.stdin.take().expect("stdin").write_all(format!("{KEY}\n").as_bytes()).expect("write key");
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));

    let config = std::fs::read_to_string(&config_path).expect("config");
    assert!(config.starts_with(&before), "the user's file must be kept as it was, with the new tables after it");
    assert!(!config.contains(KEY));
    assert!(config.contains("input_cost = \"0.15\""), "{config}");
    let secrets = repo.secrets_file();
    assert!(std::fs::read_to_string(&secrets).expect("secrets").contains(KEY));
    assert!(!repo.arbiter_dir().join("secrets.toml").exists(), "no secret inside the repository");
    assert_eq!(std::fs::metadata(&secrets).expect("meta").permissions().mode() & 0o777, 0o600);

    for args in [
        &["backend", "list"][..],
        &["backend", "list", "--json"],
        &["backend", "show", "claude"],
        &["backend", "show", "claude", "--json"],
    ] {
        let run = repo.arbiter(args);
        run.assert_code(0);
        assert!(!run.stdout.contains(KEY) && !run.stderr.contains(KEY), "{args:?} printed the key");
    }
    let list = repo.arbiter(&["backend", "list"]);
    assert!(list.stdout.contains("in the secrets file") && list.stdout.contains("0.15/0.6"), "{}", list.stdout);

    repo.arbiter(&["backend", "disable", "local"]).assert_code(0);
    assert!(repo.arbiter(&["backend", "list"]).stdout.contains("disabled"));
    repo.arbiter(&["backend", "remove", "claude"]).assert_code(0);
    assert!(!std::fs::read_to_string(&secrets).expect("secrets").contains(KEY));
    assert!(!std::fs::read_to_string(&config_path).expect("config").contains("[backends.claude]"));
}

#[test]
fn bad_backends_are_refused_without_writing() {
    let repo = TestRepo::new();
    repo.write("README", "x\n");
    repo.commit_all("base");
    repo.arbiter(&["init"]).assert_code(0);
    let config_path = repo.arbiter_dir().join("config.toml");
    let before = std::fs::read_to_string(&config_path).expect("config");
    for (args, needle) in [
        (&["backend", "add", "x", "--provider", "foo", "--model", "m"][..], "unknown provider"),
        (&["backend", "add", "x", "--provider", "openai-compatible", "--model", "m"], "--base-url"),
        (&["backend", "add", "x y", "--provider", "openai", "--model", "m"], "invalid backend name"),
        (&["backend", "add", "x", "--provider", "openai", "--model", "m", "--roles", "cooking"], "unknown role"),
        (&["backend", "add", "x", "--provider", "openai", "--model", "m", "--input-cost", "abc"], "not a price"),
        (&["backend", "show", "nope"], "no backend named"),
    ] {
        let run = repo.arbiter(args);
        run.assert_code(2);
        assert!(run.stderr.contains(needle), "{args:?}: {}", run.stderr);
    }
    assert_eq!(std::fs::read_to_string(&config_path).expect("config"), before);
}
