//! Real toolchains verify candidates inside the sandbox, unchanged: `cargo test` (whose linker
//! writes to `/tmp`), `go test` (which builds its test binaries in the temporary directory),
//! pytest's `tmp_path` and Node's `os.tmpdir()`. Each test is an `arbiter run` end to end in
//! the default sandbox (`--sandbox auto`: Landlock, user, PID and mount namespaces) on a
//! one-file project with a bug: one candidate fixes it, the other finds nothing. The fix must
//! win — its gate passes in the sandbox — and the other lose for failing as the base did.
//! Before the private `/tmp`, every candidate failed there, the fix included. Where the kernel
//! refuses the candidate a mount namespace, `TMPDIR` and its cousins keep `cargo test` working.
//!
//! Tools: the `cargo` running these tests; Go at `ARBITER_GO` (default `go` on `PATH`);
//! pytest from the venv at `ARBITER_PYTEST_VENV`; `node` on `PATH`. A missing tool skips its
//! test, except when `CI` is set: then it fails.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::*;
use serde_json::Value;

/// Whether this machine's sandbox gives candidates a private `/tmp` (CI machines must).
fn sandbox_has_private_tmp(test: &str) -> bool {
    let out = Command::new(ARBITER).args(["__sandbox", "probe"]).output().expect("run the probe");
    let caps: Value = serde_json::from_slice(&out.stdout).expect("the probe's JSON");
    if caps["mounts"] == true && caps["landlock_abi"].is_u64() {
        return true;
    }
    assert!(std::env::var_os("CI").is_none(), "CI machines must offer the whole sandbox: {caps}");
    skip(test, &format!("this kernel's sandbox has no private /tmp ({caps})"));
    false
}

/// A program found at `env` (a path) or on `PATH`, or `None` after reporting `test` skipped
/// (never on CI).
fn tool(test: &str, name: &str, env: Option<&str>) -> Option<PathBuf> {
    let given = env.and_then(std::env::var_os).map(PathBuf::from);
    let found = given.or_else(|| {
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(std::env::var_os("CI").is_none(), "{name} is not installed, and CI is set: .ci/run installs it");
        skip(test, &format!("{name} is not installed"));
    }
    found
}

/// The agent: the first candidate applies `fix` (a shell command), the second writes notes
/// and fixes nothing.
fn agent(fix: &str) -> String {
    format!(
        "case \"$ARBITER_CANDIDATE_INDEX\" in\n  0) {fix} ;;\n  *) echo 'I could not find the problem.' > NOTES.md ;;\nesac\n"
    )
}

/// A repository holding `files` and the agent, committed.
fn project(files: &[(&str, &str)], fix: &str) -> TestRepo {
    let repo = TestRepo::new();
    for (path, text) in files {
        repo.write(path, text);
    }
    repo.write_agent("agent.sh", &agent(fix));
    repo.commit_all("a project with a bug");
    repo
}

/// Runs the two candidates with `verify` in the sandbox; the fix wins, the other is rejected
/// for its gates. `view` is whether the run's sandbox gave them a private `/tmp` and
/// `/proc` (`env` can make the probe report less). Returns the run's directory and the log
/// of the fix's gate.
fn the_fix_wins(repo: &TestRepo, verify: &str, env: &[(&str, &str)], view: bool) -> (PathBuf, String) {
    let mut cmd = repo.arbiter_cmd(&[
        "run",
        "--task",
        "Fix add",
        "--runner",
        "command",
        "--command",
        "./agent.sh",
        "--candidates",
        "2",
        "--verify",
        verify,
        "--apply",
        "none",
        "--timeout-seconds",
        "300",
        "--verify-timeout-seconds",
        "600",
    ]);
    cmd.envs(env.iter().copied());
    let run = Run::from_output(cmd.output().expect("run arbiter"));
    run.assert_code(0);
    let dir = repo.run_dir();
    let log =
        |id: &str| std::fs::read_to_string(dir.join(format!("candidates/{id}/gates/verify-1.log"))).unwrap_or_default();
    assert_candidates_prepared(&dir);
    let state = read_json(&dir.join("state.json"));
    assert_eq!(state["sandbox"]["mounts"], view, "{state:#}");
    assert_eq!(state["sandbox"]["filesystem"], true, "{state:#}");
    let selection = read_json(&dir.join("selection.json"));
    assert_eq!(selection["winner"], "c01", "{selection:#}\nc01's gate:\n{}", log("c01"));
    let ranking = read_json(&dir.join("comparisons/ranking.json"));
    let c02 = ranking["candidates"]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["candidate_id"] == "c02"))
        .unwrap_or_else(|| panic!("no c02 in {ranking:#}"));
    assert_eq!(c02["rejection"]["code"], "gates_failed", "{ranking:#}");
    let passed = log("c01");
    assert!(!passed.contains("Permission denied"), "{passed}");
    (dir, passed)
}

/// The run: `arbiter run --verify 'cargo test'` on a one-file crate. The linker
/// writes its temporary files to `/tmp`; with the sandbox on, the fix wins.
#[test]
fn cargo_test_verifies_a_rust_fix_in_the_sandbox() {
    if !sandbox_has_private_tmp("cargo_test_verifies_a_rust_fix_in_the_sandbox") {
        return;
    }
    let repo = rust_project(
        "fn temporary_files_go_to_tmp() {\n        let dir = std::env::temp_dir();\n        assert_eq!(dir, std::path::Path::new(\"/tmp\"));\n        std::fs::write(dir.join(format!(\"calc-{}\", std::process::id())), \"x\").unwrap();\n    }",
    );
    let (_, log) = the_fix_wins(&repo, "cargo test", &[], true);
    assert_cargo_passed(&log, "temporary_files_go_to_tmp");
}

/// A one-file crate whose `add` subtracts, tested by `adds` and by `temporary` (the text of a
/// test function, from `fn` to its closing brace); the agent fixes `add`.
fn rust_project(temporary: &str) -> TestRepo {
    let lib = format!(
        "pub fn add(a: i32, b: i32) -> i32 {{\n    a - b\n}}\n\n#[cfg(test)]\nmod tests {{\n    #[test]\n    fn adds() {{\n        assert_eq!(super::add(2, 3), 5);\n    }}\n\n    #[test]\n    {temporary}\n}}\n"
    );
    project(
        &[
            ("Cargo.toml", "[package]\nname = \"calc\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n"),
            ("src/lib.rs", &lib),
            (".gitignore", "target/\n"),
        ],
        "sed -i 's/a - b/a + b/' src/lib.rs",
    )
}

/// Panics unless `cargo test`'s `log` shows `adds` and `temporary` passed.
fn assert_cargo_passed(log: &str, temporary: &str) {
    for test in ["adds", temporary] {
        assert!(log.contains(&format!("test tests::{test} ... ok")), "{test}: {log}");
    }
}

/// On a kernel that refuses the candidate a mount namespace (`ARBITER_SANDBOX_PROBE` makes
/// arbiter believe it has no namespaces at all), `/tmp` is the machine's and not writable —
/// the crate's test proves it — yet `cargo test` still verifies the fix: `TMPDIR` and its
/// cousins name the candidate's own temporary directory, where the linker and the tests
/// write. The run's report says what was not enforced.
#[test]
fn cargo_test_verifies_a_rust_fix_where_the_kernel_refuses_a_private_tmp() {
    if !sandbox_has_private_tmp("cargo_test_verifies_a_rust_fix_where_the_kernel_refuses_a_private_tmp") {
        return;
    }
    let repo = rust_project(
        "fn temporary_files_go_to_tmpdir() {\n        let dir = std::env::temp_dir();\n        assert_eq!(Some(dir.as_os_str()), std::env::var_os(\"TMPDIR\").as_deref());\n        for name in [\"TMP\", \"TEMP\", \"TEMPDIR\"] {\n            assert_eq!(Some(dir.as_os_str()), std::env::var_os(name).as_deref(), \"{name}\");\n        }\n        assert!(dir.ends_with(\"tmp\") && dir != std::path::Path::new(\"/tmp\"), \"{}\", dir.display());\n        std::fs::write(dir.join(format!(\"calc-{}\", std::process::id())), \"x\").unwrap();\n        let machine = format!(\"/tmp/calc-{}\", std::process::id());\n        assert!(std::fs::write(&machine, \"x\").is_err(), \"the machine's /tmp is writable\");\n    }",
    );
    let (dir, log) = the_fix_wins(&repo, "cargo test", &[("ARBITER_SANDBOX_PROBE", "no-namespaces")], false);
    assert_cargo_passed(&log, "temporary_files_go_to_tmpdir");
    let state = read_json(&dir.join("state.json"));
    assert_eq!(state["sandbox"]["namespaces"], false, "{state:#}");
    let report = std::fs::read_to_string(dir.join("final_report.md")).expect("final_report.md");
    assert!(
        report.contains("NO private /tmp or /proc of its own: TMPDIR names the candidate's temporary directory"),
        "{report}"
    );
}

/// `go test` builds its test binary in the temporary directory, and `t.TempDir()` is there
/// too. Go's build cache lives outside the workspace: it is named in `[sandbox] writable`,
/// as docs/security.md says for such caches.
#[test]
fn go_test_verifies_a_go_fix_in_the_sandbox() {
    let test = "go_test_verifies_a_go_fix_in_the_sandbox";
    if !sandbox_has_private_tmp(test) {
        return;
    }
    let Some(go) = tool(test, "go", Some("ARBITER_GO")) else { return };
    let repo = project(
        &[
            ("go.mod", "module calc\n\ngo 1.18\n"),
            ("calc.go", "package calc\n\nfunc Add(a, b int) int {\n\treturn a - b\n}\n"),
            (
                "calc_test.go",
                "package calc\n\nimport (\n\t\"os\"\n\t\"path/filepath\"\n\t\"testing\"\n)\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(\"2 + 3 is not 5\")\n\t}\n}\n\nfunc TestTempDir(t *testing.T) {\n\tif os.TempDir() != \"/tmp\" {\n\t\tt.Fatalf(\"the temporary directory is %s\", os.TempDir())\n\t}\n\tif err := os.WriteFile(filepath.Join(t.TempDir(), \"x\"), []byte(\"x\"), 0o600); err != nil {\n\t\tt.Fatal(err)\n\t}\n}\n",
            ),
        ],
        "sed -i 's/a - b/a + b/' calc.go",
    );
    let cache = tempfile::tempdir().expect("temp dir");
    let gocache = cache.path().join("go-build");
    repo.allow_writes(&gocache);
    let config = repo.arbiter_dir().join("config.toml");
    let text = std::fs::read_to_string(&config).expect("config.toml");
    assert!(text.contains("\n[run]\n"), "{text}");
    let text = text.replacen("\n[run]\n", "\n[run]\nenv_passthrough = [\"GOCACHE\"]\n", 1);
    std::fs::write(&config, text).expect("config.toml");
    let gocache = gocache.display().to_string();
    let (_, log) =
        the_fix_wins(&repo, &format!("{} test -v ./...", go.display()), &[("GOCACHE", gocache.as_str())], true);
    assert!(log.contains("--- PASS: TestAdd") && log.contains("--- PASS: TestTempDir"), "{log}");
}

/// pytest's `tmp_path` is made under the temporary directory.
#[test]
fn pytest_tmp_path_works_in_the_sandbox() {
    let test = "pytest_tmp_path_works_in_the_sandbox";
    if !sandbox_has_private_tmp(test) {
        return;
    }
    let Some(python) = pytest_python(test) else { return };
    let repo = project(
        &[
            ("calc.py", "def add(a, b):\n    return a - b\n"),
            (
                "test_calc.py",
                "import tempfile\n\nfrom calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\ndef test_tmp_path(tmp_path):\n    assert str(tmp_path).startswith(tempfile.gettempdir())\n    assert tempfile.gettempdir() == '/tmp'\n    (tmp_path / 'x').write_text('x')\n",
            ),
            (".gitignore", "__pycache__/\n.pytest_cache/\n"),
        ],
        "sed -i 's/a - b/a + b/' calc.py",
    );
    let (_, log) = the_fix_wins(&repo, &format!("{} -m pytest -v -p no:cacheprovider", python.display()), &[], true);
    assert!(log.contains("test_calc.py::test_tmp_path PASSED"), "{log}");
}

/// Node's `os.tmpdir()` is the private `/tmp`, and writable.
#[test]
fn node_os_tmpdir_works_in_the_sandbox() {
    let test = "node_os_tmpdir_works_in_the_sandbox";
    if !sandbox_has_private_tmp(test) {
        return;
    }
    let Some(node) = tool(test, "node", None) else { return };
    let repo = project(
        &[
            ("calc.js", "exports.add = (a, b) => a - b;\n"),
            (
                "calc.test.js",
                "const test = require('node:test');\nconst assert = require('node:assert');\nconst fs = require('node:fs');\nconst os = require('node:os');\nconst path = require('node:path');\nconst { add } = require('./calc');\n\ntest('adds', () => assert.strictEqual(add(2, 3), 5));\n\ntest('writes its temporary files', () => {\n  assert.strictEqual(os.tmpdir(), '/tmp');\n  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'calc-'));\n  fs.writeFileSync(path.join(dir, 'x'), 'x');\n});\n",
            ),
        ],
        "sed -i 's/a - b/a + b/' calc.js",
    );
    let (_, log) = the_fix_wins(&repo, &format!("{} --test", node.display()), &[], true);
    assert!(log.contains("ok 2 - writes its temporary files"), "{log}");
}
