//! Support for the end-to-end tests: real git repositories in temporary directories,
//! shell-script fake agents that make real edits, and the real `arbiter` binary.

// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

pub mod control_plane;
pub mod github_mock;
mod mock_llm;
pub mod model_server;
pub mod tmux;
pub mod webdriver;
#[allow(unused_imports)]
pub use control_plane::*;
#[allow(unused_imports)]
pub use mock_llm::*;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

/// Says that `test` could not run on this machine, and why: on stderr, and as a line of the
/// file `ARBITER_SKIPS` names, which the README's test command (`scripts/test.sh`) lists
/// after the run (a skipped test passes without checking anything).
pub fn skip(test: &str, why: &str) {
    eprintln!("skipped: {test}: {why}");
    if let Some(path) = std::env::var_os("ARBITER_SKIPS") {
        use std::io::Write;
        if let Ok(mut f) = fs::OpenOptions::new().create(true).append(true).open(path) {
            let _ = writeln!(f, "{test}: {why}");
        }
    }
}

/// The `arbiter` binary built for these tests.
pub const ARBITER: &str = env!("CARGO_BIN_EXE_arbiter");

/// A throwaway git repository (branch `main`, an author configured).
pub struct TestRepo {
    dir: TempDir,
}

impl TestRepo {
    /// An empty repository with no commit yet.
    pub fn new() -> Self {
        let dir = tempfile::Builder::new().prefix("arbiter-e2e-").tempdir().expect("create a temp dir");
        let repo = TestRepo { dir };
        repo.git(&["init", "-q", "-b", "main"]);
        repo.git(&["config", "user.name", "arbiter tests"]);
        repo.git(&["config", "user.email", "tests@arbiter.invalid"]);
        repo.git(&["config", "commit.gpgsign", "false"]);
        repo
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes a file (creating its directories).
    pub fn write(&self, rel: &str, contents: impl AsRef<[u8]>) {
        let p = self.path().join(rel);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).expect("create parent directories");
        }
        fs::write(&p, contents).unwrap_or_else(|e| panic!("write {}: {e}", p.display()));
    }

    /// Writes an executable file (mode 0755).
    pub fn write_exec(&self, rel: &str, contents: impl AsRef<[u8]>) {
        self.write(rel, contents);
        set_mode(&self.path().join(rel), 0o755);
    }

    /// Writes a fake agent script (`#!/bin/sh` is prepended) at `rel`, executable.
    pub fn write_agent(&self, rel: &str, body: &str) {
        self.write_exec(rel, format!("#!/bin/sh\n{body}"));
    }

    pub fn read(&self, rel: &str) -> String {
        let p = self.path().join(rel);
        fs::read_to_string(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
    }

    /// Stages everything and commits; returns the new commit id.
    pub fn commit_all(&self, message: &str) -> String {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", message]);
        self.head()
    }

    /// Lets candidates write `dir` too (`[sandbox] writable` in `.arbiter/config.toml`): how a
    /// fake agent reports to its test from inside the sandbox.
    pub fn allow_writes(&self, dir: &Path) {
        fs::create_dir_all(dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        let config = self.path().join(".arbiter").join("config.toml");
        if !config.exists() {
            run_arbiter_in(self.path(), &["init"]).assert_code(0);
        }
        let text = fs::read_to_string(&config).unwrap_or_default();
        assert!(!text.lines().any(|l| l.trim() == "[sandbox]"), "allow_writes is called once per repository");
        fs::write(&config, format!("{text}\n[sandbox]\nwritable = [{:?}]\n", dir.display().to_string()))
            .expect("write config.toml");
    }

    /// This repository's secrets file (in the tests' configuration directory).
    pub fn secrets_file(&self) -> PathBuf {
        test_dirs()
            .join("config")
            .join("secrets")
            .join(format!("{}.toml", arbiter_runner::user_dirs::repo_key(self.path())))
    }

    /// Files left in the agent homes of this repository's workspaces (a runner empties its
    /// agent's home when the agent ends).
    pub fn agent_home_leftovers(&self) -> Vec<PathBuf> {
        self.workspace_slots()
            .iter()
            .map(|slot| slot.join("home"))
            .filter(|home| home.exists())
            .flat_map(|home| files_under(&home))
            .collect()
    }

    /// The workspaces of this repository's pool (in the tests' cache).
    pub fn workspace_slots(&self) -> Vec<PathBuf> {
        let name = self.path().file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let pools = test_dirs().join("cache").join("workspaces");
        let mut slots: Vec<PathBuf> = fs::read_dir(&pools)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(&format!("{name}-")))
            .flat_map(|pool| fs::read_dir(pool.path()).into_iter().flatten().flatten())
            .filter(|e| e.file_name().to_string_lossy().starts_with("slot-"))
            .map(|e| e.path())
            .collect();
        slots.sort();
        slots
    }

    pub fn head(&self) -> String {
        self.git(&["rev-parse", "HEAD"]).trim().to_string()
    }

    /// Runs git in the repository, panicking when it fails; returns stdout.
    pub fn git(&self, args: &[&str]) -> String {
        git_in(self.path(), args)
    }

    /// `git status --porcelain` lines, sorted.
    pub fn status(&self) -> Vec<String> {
        let mut lines: Vec<String> = self.git(&["status", "--porcelain"]).lines().map(str::to_string).collect();
        lines.sort();
        lines
    }

    /// A `Command` for the arbiter binary, in the repository.
    pub fn arbiter_cmd(&self, args: &[&str]) -> Command {
        arbiter_cmd_in(self.path(), args)
    }

    /// Runs arbiter to completion in the repository.
    pub fn arbiter(&self, args: &[&str]) -> Run {
        run_arbiter_in(self.path(), args)
    }

    pub fn arbiter_dir(&self) -> PathBuf {
        self.path().join(".arbiter")
    }

    /// Every run directory under `.arbiter/runs` (none when it does not exist).
    pub fn run_dirs(&self) -> Vec<PathBuf> {
        let runs = self.arbiter_dir().join("runs");
        let mut dirs: Vec<PathBuf> = match fs::read_dir(&runs) {
            Ok(entries) => entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect(),
            Err(_) => Vec::new(),
        };
        dirs.sort();
        dirs
    }

    /// The single run directory under `.arbiter/runs`.
    pub fn run_dir(&self) -> PathBuf {
        let dirs = self.run_dirs();
        assert_eq!(dirs.len(), 1, "expected exactly one run directory, found {dirs:?}");
        dirs.into_iter().next().unwrap_or_default()
    }
}

/// Runs git in `dir`, panicking when it fails; returns stdout.
pub fn git_in(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .stdin(Stdio::null())
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?} failed in {}:\n{}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A `Command` for the arbiter binary with `dir` as its working directory. Its cache (the
/// workspace pools) and configuration directories are the tests' own, never the user's.
pub fn arbiter_cmd_in(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(ARBITER);
    cmd.args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .env("ARBITER_CACHE_DIR", test_dirs().join("cache"))
        .env("ARBITER_CONFIG_DIR", test_dirs().join("config"));
    cmd
}

/// A directory a test holds its fake agents back through (a file there the agent waits on,
/// which the test removes to let it go). Not under the machine's `/tmp`: a candidate sees
/// `/tmp` through an overlay, which keeps showing a file of the machine's `/tmp` it has looked
/// at once, so a hold removed later would hold it forever (docs/security.md, "What a candidate
/// can see").
pub fn holds_dir() -> TempDir {
    tempfile::Builder::new().prefix("holds-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("create a holds dir")
}

/// Where the tests' arbiter keeps its cache and configuration.
pub fn test_dirs() -> PathBuf {
    std::env::temp_dir().join("arbiter-tests")
}

/// The result of one arbiter invocation.
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn from_output(out: Output) -> Self {
        Run {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Panics with both streams unless the exit code is `code`.
    #[track_caller]
    pub fn assert_code(&self, code: i32) -> &Self {
        assert_eq!(
            self.code,
            Some(code),
            "unexpected exit code\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.stdout,
            self.stderr
        );
        self
    }
}

pub fn run_arbiter_in(dir: &Path, args: &[&str]) -> Run {
    Run::from_output(arbiter_cmd_in(dir, args).output().expect("run arbiter"))
}

pub fn set_mode(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {}: {e}", path.display()));
}

pub fn is_executable(path: &Path) -> bool {
    fs::metadata(path).map(|m| m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

/// Reads and parses a JSON file.
pub fn read_json(path: &Path) -> Value {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not valid JSON: {e}\n{text}", path.display()))
}

/// Parses every line of a JSON-lines file.
pub fn read_json_lines(path: &Path) -> Vec<Value> {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{} line {}: not JSON ({e}): {line}", path.display(), i + 1))
        })
        .collect()
}

/// Every regular file under `dir`, recursively.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).unwrap_or_else(|e| panic!("read dir {}: {e}", d.display())).flatten() {
            let p = entry.path();
            let ft = entry.file_type().expect("file type");
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file() {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Polls `cond` every 50 ms until it holds or `limit` passes; returns whether it held.
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if cond() {
            return true;
        }
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether `pid` names no process any more (`kill(pid, 0)` fails with ESRCH).
pub fn pid_gone(pid: i32) -> bool {
    use nix::errno::Errno;
    use nix::sys::signal::kill;
    use nix::unistd::Pid;
    matches!(kill(Pid::from_raw(pid), None), Err(Errno::ESRCH))
}

/// Waits (a few seconds at most, for the reaping of orphans) until `pid` is gone.
pub fn wait_pid_gone(pid: i32) -> bool {
    wait_until(Duration::from_secs(10), || pid_gone(pid))
}

/// A shell expression for the shell's own identity as the host can find it: its pid in its
/// PID namespace and that namespace (`2@pid:[4026532…]`). A candidate's `/proc` lists its
/// own namespace only, so its pid on the host is not there to read: [`read_pid`] finds it on
/// the host's side.
pub const HOST_PID: &str = "$$@$(readlink /proc/self/ns/pid)";

/// The host pid of the live process whose identity [`HOST_PID`] wrote (`pid@namespace`), or
/// `None` when none lives: the pid its namespace gives it and the namespace both match.
pub fn host_pid_of(identity: &str) -> Option<i32> {
    let (inner, namespace) = identity.trim().split_once('@').unwrap_or_default();
    assert!(
        inner.parse::<i32>().is_ok() && namespace.starts_with("pid:["),
        "not a pid@namespace identity: {identity:?}"
    );
    fs::read_dir("/proc").ok()?.flatten().filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok()).find(|pid| {
        let same_namespace =
            fs::read_link(format!("/proc/{pid}/ns/pid")).is_ok_and(|l| l.to_string_lossy() == namespace);
        same_namespace
            && fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|status| {
                status.lines().find_map(|l| l.strip_prefix("NSpid:")).and_then(|ids| ids.split_whitespace().last())
                    == Some(inner)
            })
    })
}

/// Processes whose command line holds `marker` (as the host sees them).
pub fn processes_with(marker: &str) -> Vec<i32> {
    fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).replace('\0', " ").contains(marker))
                .unwrap_or(false)
        })
        .collect()
}

/// The host pid of the process whose [`HOST_PID`] a fake agent wrote to `path` (or of a plain
/// pid it wrote); a process that has ended gets a pid no process has (`i32::MAX`).
pub fn read_pid(path: &Path) -> i32 {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    if text.contains('@') {
        return host_pid_of(&text).unwrap_or(i32::MAX);
    }
    text.trim().parse().unwrap_or_else(|e| panic!("{}: not a pid ({e}): {text:?}", path.display()))
}

/// The buggy calculator of the Python fixture.
pub const CALC_PY: &str = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n";

/// Its tests: `test_add` fails on the base, `test_mul` passes.
pub const TEST_CALC_PY: &str = "import unittest\n\nfrom calc import add, mul\n\n\nclass CalcTest(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n    def test_mul(self):\n        self.assertEqual(mul(2, 3), 6)\n\n\nif __name__ == \"__main__\":\n    unittest.main()\n";

/// `arbiter run --task TASK --runner command --command ./agent.sh --candidates N EXTRA…`:
/// a tournament of the repository's `agent.sh`.
pub fn agent_run<'a>(task: &'a str, candidates: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args =
        vec!["run", "--task", task, "--runner", "command", "--command", "./agent.sh", "--candidates", candidates];
    args.extend_from_slice(extra);
    args
}

/// The verify command of the Python fixture.
pub const VERIFY_PY: &str = "python3 -m unittest -q";

/// A fake agent for the Python fixture; candidate `i` does what the `i`-th arm says.
/// `0`: fixes add. `1`: fixes add, breaks mul. `2`: changes nothing.
pub const AGENT_FIX_BREAK_NOTHING: &str = r#"set -e
echo "agent $ARBITER_CANDIDATE_ID (index $ARBITER_CANDIDATE_INDEX) of run $ARBITER_RUN_ID in $ARBITER_WORKTREE"
test -f "$ARBITER_PROMPT_FILE"
case "$ARBITER_CANDIDATE_INDEX" in
  0) sed -i 's/return a - b/return a + b/' calc.py ;;
  1) sed -i 's/return a - b/return a + b/; s/return a \* b/return a + b/' calc.py ;;
  *) echo "I could not find the problem." ;;
esac
"#;

/// A fake agent: candidates 0 and 2 make the same fix, 1 a different fix of the same size.
pub const AGENT_TWO_VOTES: &str = r#"set -e
case "$ARBITER_CANDIDATE_INDEX" in
  0|2) sed -i 's/return a - b/return a + b/' calc.py ;;
  1) sed -i 's/return a - b/return b + a/' calc.py ;;
esac
"#;

/// A fake agent every candidate of which fixes add.
pub const AGENT_FIX: &str = "set -e\nsed -i 's/return a - b/return a + b/' calc.py\n";

/// The Python interpreter of the pytest virtualenv `.ci/run` installs (`ARBITER_PYTEST_VENV`),
/// or `None` after reporting `test` skipped when there is none (never on CI).
pub fn pytest_python(test: &str) -> Option<PathBuf> {
    let venv = std::env::var_os("ARBITER_PYTEST_VENV").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/arbiter-ci/frameworks/pytest")
    });
    let python = venv.join("bin/python3");
    let has_pytest = std::process::Command::new(&python)
        .args(["-m", "pytest", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_pytest {
        assert!(std::env::var_os("CI").is_none(), "CI must have pytest at {}", python.display());
        skip(test, "no pytest venv (bash .ci/run installs one)");
        return None;
    }
    Some(python)
}

/// A repository holding `README.md` (`readme`) and `agent.sh` (`agent_body`), committed,
/// with `arbiter init` done.
pub fn initialized_repo(readme: &str, agent_body: &str) -> TestRepo {
    let repo = TestRepo::new();
    repo.write("README.md", readme);
    repo.write_agent("agent.sh", agent_body);
    repo.commit_all("start");
    repo.arbiter(&["init"]).assert_code(0);
    repo
}

/// The body of an agent for plans: it writes `<task>.txt` holding the id of the task its
/// prompt names (the prompt's first line: "(Task A of plan p ...").
pub const TASK_FILE_AGENT: &str =
    "task=$(sed -n 's/^(Task \\([^ ]*\\) of plan.*/\\1/p' \"$ARBITER_PROMPT_FILE\")\necho \"$task\" > \"$task.txt\"\n";

/// A repository holding the buggy calculator, its tests and `agent.sh` (`agent_body`),
/// committed on `main`.
pub fn python_repo(agent_body: &str) -> TestRepo {
    let repo = TestRepo::new();
    repo.write("calc.py", CALC_PY);
    repo.write("test_calc.py", TEST_CALC_PY);
    repo.write("README.md", "# calc\n");
    repo.write(".gitignore", "__pycache__/\n");
    repo.write_agent("agent.sh", agent_body);
    repo.commit_all("calc with a bug");
    repo
}

/// Fails with the reason when a candidate of the run could not even be prepared (its
/// worktree or setup failed), before the test's own assertions report a confusing symptom.
/// A known cause is arbiter running `git worktree add` concurrently (see
/// `concurrent_worktree_creation_never_fails_a_candidate`).
#[track_caller]
pub fn assert_candidates_prepared(run_dir: &Path) {
    let ranking = read_json(&run_dir.join("comparisons/ranking.json"));
    for c in ranking["candidates"].as_array().expect("ranking.json has a candidates array") {
        assert_ne!(
            c["status"], "setup_failed",
            "candidate {} could not be prepared: {}",
            c["candidate_id"], c["rejection"]["detail"]
        );
    }
}

/// Parses `stdout` as the `--json` document `schema` names and checks it against
/// `docs/schemas/<schema>.schema.json` (the documented shape): every field it has, of its
/// type, and no field the schema does not name.
#[track_caller]
pub fn assert_schema(schema: &str, stdout: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/schemas").join(format!("{schema}.schema.json"));
    let document: Value = serde_json::from_str(stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"));
    let validator = jsonschema::validator_for(&read_json(&path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let errors: Vec<String> =
        validator.iter_errors(&document).map(|e| format!("{} at {}", e, e.instance_path())).collect();
    assert!(
        errors.is_empty(),
        "{schema}: the document does not match its schema:\n{}\n{document:#}",
        errors.join("\n")
    );
    document
}
