//! End-to-end tests of the `arbiter` binary: real git repositories, real worktrees, fake
//! agents (shell scripts) that make real edits, real verify commands.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use std::fs;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::*;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

/// The ranking entry of one candidate.
fn ranked<'a>(ranking: &'a Value, id: &str) -> &'a Value {
    ranking["candidates"]
        .as_array()
        .expect("ranking.json has a candidates array")
        .iter()
        .find(|c| c["candidate_id"] == id)
        .unwrap_or_else(|| panic!("no {id} in ranking.json: {ranking:#}"))
}

/// The common flags of a tournament with the `command` runner and `./agent.sh`.
fn run_args<'a>(task: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args =
        vec!["run", "--task", task, "--runner", "command", "--command", "./agent.sh", "--timeout-seconds", "60"];
    args.extend_from_slice(extra);
    args
}

const FIXED_CALC_PY: &str = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n";

#[test]
fn three_candidates_the_fixer_wins_and_is_applied() {
    let repo = python_repo(AGENT_FIX_BREAK_NOTHING);
    let run = repo.arbiter(&run_args("Fix the failing test in calc.py", &["--verify", VERIFY_PY, "--candidates", "3"]));
    run.assert_code(0);

    let dir = repo.run_dir();
    assert_candidates_prepared(&dir);
    let selection = read_json(&dir.join("selection.json"));
    assert_eq!(selection["outcome"], "selected", "{selection:#}");
    assert_eq!(selection["winner"], "c01", "{selection:#}");
    assert_eq!(selection["winner_patch"], "candidates/c01/patch.diff");

    let ranking = read_json(&dir.join("comparisons/ranking.json"));
    let c01 = ranked(&ranking, "c01");
    assert_eq!(c01["rank"], 1);
    assert_eq!(c01["eligible"], true);
    let c02 = ranked(&ranking, "c02");
    assert_eq!(c02["eligible"], false);
    assert_eq!(c02["rejection"]["code"], "gates_failed", "{c02:#}");
    assert!(c02["reason"].as_str().unwrap_or_default().contains("gates failed"), "{c02:#}");
    let c03 = ranked(&ranking, "c03");
    assert_eq!(c03["eligible"], false);
    assert_eq!(c03["rejection"]["code"], "empty_patch", "{c03:#}");

    // The winner's patch is in the working tree, and nothing else changed.
    assert_eq!(repo.read("calc.py"), FIXED_CALC_PY);
    assert_eq!(repo.status(), vec![" M calc.py".to_string()]);
}

#[test]
fn identical_patches_count_as_votes() {
    let repo = python_repo(AGENT_TWO_VOTES);
    let run = repo.arbiter(&run_args("Fix add", &["--verify", VERIFY_PY, "--candidates", "3", "--apply", "none"]));
    run.assert_code(0);

    let dir = repo.run_dir();
    assert_candidates_prepared(&dir);
    assert_eq!(read_json(&dir.join("selection.json"))["winner"], "c01");
    let ranking = read_json(&dir.join("comparisons/ranking.json"));
    let c01 = ranked(&ranking, "c01");
    let c02 = ranked(&ranking, "c02");
    let c03 = ranked(&ranking, "c03");
    assert_eq!(c01["votes"], 2, "{ranking:#}");
    assert_eq!(c03["votes"], 2, "{ranking:#}");
    assert_eq!(c02["votes"], 1, "{ranking:#}");
    // Every candidate is eligible and the patches have the same size: only votes separate them.
    for c in [c01, c02, c03] {
        assert_eq!(c["eligible"], true, "{c:#}");
    }
    assert_eq!(c01["patch_weight"], c02["patch_weight"]);
    assert_eq!(c01["rank"], 1);
    assert_eq!(c02["rank"], 3, "the lone patch ranks after both voters: {ranking:#}");
    assert!(c01["reason"].as_str().unwrap_or_default().contains("votes"), "{c01:#}");

    let agreement = read_json(&dir.join("comparisons/agreement.json"));
    assert_eq!(agreement["consensus"], "partial", "{agreement:#}");
    let groups = agreement["groups"].as_array().expect("groups");
    assert_eq!(groups.len(), 2, "{agreement:#}");
    let pair: Vec<&str> =
        groups[0]["candidates"].as_array().expect("candidates").iter().filter_map(Value::as_str).collect();
    assert_eq!(pair, vec!["c01", "c03"]);
    assert_eq!(groups[1]["candidates"], serde_json::json!(["c02"]));
}

/// The bytes of the binary file the round-trip agent writes.
const BLOB: &[u8] = b"\x00\x01\x02\xff\xfebinary\x00tail";

/// Checks a tree the round-trip agent's patch was applied to.
fn assert_round_trip_tree(root: &Path) {
    assert_eq!(fs::read_to_string(root.join("new_file.txt")).expect("new_file.txt"), "brand new\n");
    assert!(!root.join("to_delete.txt").exists(), "to_delete.txt should be gone");
    assert!(!root.join("old_name.txt").exists(), "old_name.txt should have been renamed");
    assert_eq!(
        fs::read_to_string(root.join("new_name.txt")).expect("new_name.txt"),
        "line one\nline two\nline three\n"
    );
    assert_eq!(fs::read(root.join("blob.bin")).expect("blob.bin"), BLOB);
    assert!(is_executable(&root.join("tool.sh")), "tool.sh should be executable");
    assert_eq!(fs::read_to_string(root.join("tool.sh")).expect("tool.sh"), "echo tool\n");
    assert_eq!(fs::read_to_string(root.join("keep.txt")).expect("keep.txt"), "unchanged\n");
}

#[test]
fn patch_capture_round_trips_every_kind_of_change() {
    let repo = TestRepo::new();
    repo.write("keep.txt", "unchanged\n");
    repo.write("to_delete.txt", "doomed\n");
    repo.write("old_name.txt", "line one\nline two\nline three\n");
    repo.write("tool.sh", "echo tool\n");
    repo.write_agent(
        "agent.sh",
        r#"set -e
printf 'brand new\n' > new_file.txt
rm to_delete.txt
git mv old_name.txt new_name.txt
printf '\000\001\002\377\376binary\000tail' > blob.bin
chmod +x tool.sh
"#,
    );
    let base = repo.commit_all("base");
    assert!(!is_executable(&repo.path().join("tool.sh")));

    let run = repo.arbiter(&run_args("Reshape the repository", &["--candidates", "1", "--apply", "none"]));
    run.assert_code(0);
    let dir = repo.run_dir();
    assert_candidates_prepared(&dir);
    let patch = dir.join("candidates/c01/patch.diff");
    let text = fs::read_to_string(&patch).expect("patch.diff");
    for needle in [
        "rename from old_name.txt",
        "rename to new_name.txt",
        "deleted file mode",
        "new mode 100755",
        "GIT binary patch",
    ] {
        assert!(text.contains(needle), "patch.diff lacks {needle:?}:\n{text}");
    }
    let evidence = read_json(&dir.join("candidates/c01/evidence.json"));
    assert_eq!(evidence["patch"]["applies_cleanly"], true, "{evidence:#}");
    assert_eq!(evidence["patch"]["stats"]["files_changed"], 5, "{evidence:#}");
    assert_eq!(evidence["patch"]["stats"]["binary_files"], 1, "{evidence:#}");

    // --apply none left the repository alone.
    assert_eq!(repo.status(), Vec::<String>::new());
    assert_eq!(repo.head(), base);

    // A fresh clone at the base takes the patch with plain git.
    let scratch = tempfile::tempdir().expect("temp dir");
    let clone = scratch.path().join("clone");
    git_in(scratch.path(), &["clone", "-q", repo.path().to_str().expect("utf-8 path"), "clone"]);
    git_in(&clone, &["checkout", "-q", "--detach", &base]);
    let patch_str = patch.to_str().expect("utf-8 path");
    git_in(&clone, &["apply", "--check", patch_str]);
    git_in(&clone, &["apply", patch_str]);
    assert_round_trip_tree(&clone);

    // And `arbiter apply` puts it into the original repository.
    repo.arbiter(&["apply", "latest"]).assert_code(0);
    assert_round_trip_tree(repo.path());
    let apply = read_json(&dir.join("apply.json"));
    assert_eq!(apply["applied"], true, "{apply:#}");
}

#[test]
fn a_timed_out_agent_and_its_grandchild_are_killed() {
    let repo = python_repo(&format!(
        r#"pid_dir="$1"
sed -i 's/return a - b/return a + b/' calc.py
sh -c 'echo {HOST_PID} > "$0/grandchild.pid"; exec sleep 300' "$pid_dir" &
echo {HOST_PID} > "$pid_dir/agent.pid"
sleep 300
"#
    ));
    let pids = tempfile::tempdir().expect("temp dir");
    repo.allow_writes(pids.path());
    let command = format!("./agent.sh {}", pids.path().display());
    let run = repo.arbiter(&[
        "run",
        "--task",
        "Fix add",
        "--candidates",
        "1",
        "--runner",
        "command",
        "--command",
        &command,
        "--timeout-seconds",
        "2",
        "--apply",
        "none",
        "--no-verify",
    ]);
    run.assert_code(1);

    let dir = repo.run_dir();
    assert_candidates_prepared(&dir);
    let evidence = read_json(&dir.join("candidates/c01/evidence.json"));
    assert_eq!(evidence["agent"]["timed_out"], true, "{evidence:#}");
    assert_eq!(evidence["status"], "timed_out", "{evidence:#}");
    let state = read_json(&dir.join("state.json"));
    assert_eq!(state["status"], "failed", "{state:#}");
    assert_eq!(state["candidates"][0]["status"], "timed_out", "{state:#}");
    let selection = read_json(&dir.join("selection.json"));
    assert_eq!(selection["winner"], Value::Null, "{selection:#}");
    // Its partial patch exists, but without verify commands only the agent's word could vouch for it.
    let ranking = read_json(&dir.join("comparisons/ranking.json"));
    assert_eq!(ranked(&ranking, "c01")["rejection"]["code"], "agent_failed", "{ranking:#}");

    let agent = read_pid(&pids.path().join("agent.pid"));
    let grandchild = read_pid(&pids.path().join("grandchild.pid"));
    assert!(wait_pid_gone(agent), "the agent (pid {agent}) outlived arbiter");
    assert!(wait_pid_gone(grandchild), "the agent's grandchild (pid {grandchild}) outlived arbiter");
    // The repository is untouched: the timed-out candidate did not win.
    assert_eq!(repo.read("calc.py"), CALC_PY);
}

#[test]
fn sigint_interrupts_the_run_and_cleans_up() {
    let repo = python_repo(&format!(
        r#"pid_dir="$1"
echo {HOST_PID} > "$pid_dir/$ARBITER_CANDIDATE_ID.tmp"
mv "$pid_dir/$ARBITER_CANDIDATE_ID.tmp" "$pid_dir/$ARBITER_CANDIDATE_ID.pid"
sleep 300
"#
    ));
    let pids = tempfile::tempdir().expect("temp dir");
    repo.allow_writes(pids.path());
    let logs = tempfile::tempdir().expect("temp dir");
    let command = format!("./agent.sh {}", pids.path().display());
    let mut child = repo
        .arbiter_cmd(&[
            "run",
            "--task",
            "Fix add",
            "--candidates",
            "2",
            "--runner",
            "command",
            "--command",
            &command,
            "--timeout-seconds",
            "300",
        ])
        .stdout(Stdio::from(fs::File::create(logs.path().join("stdout")).expect("stdout file")))
        .stderr(Stdio::from(fs::File::create(logs.path().join("stderr")).expect("stderr file")))
        .spawn()
        .expect("spawn arbiter");
    let pid_files = [pids.path().join("c01.pid"), pids.path().join("c02.pid")];
    wait_until(Duration::from_secs(60), || {
        pid_files.iter().all(|p| p.exists()) || child.try_wait().ok().flatten().is_some()
    });
    if !pid_files.iter().all(|p| p.exists()) {
        // Stop arbiter (and through it the agents that did start) before failing.
        let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGINT);
        if !wait_until(Duration::from_secs(30), || child.try_wait().ok().flatten().is_some()) {
            let _ = child.kill();
        }
        let _ = child.wait();
        let stderr = fs::read_to_string(logs.path().join("stderr")).unwrap_or_default();
        let ranking =
            repo.run_dirs().first().map(|d| fs::read_to_string(d.join("comparisons/ranking.json")).unwrap_or_default());
        panic!("the agents did not all start\nstderr:\n{stderr}\nranking: {ranking:?}");
    }
    let agents: Vec<i32> = pid_files.iter().map(|p| read_pid(p)).collect();
    assert!(agents.iter().all(|pid| !pid_gone(*pid)), "the agents are not running: {agents:?}");

    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).expect("send SIGINT");
    let mut status = None;
    let exited = wait_until(Duration::from_secs(60), || {
        status = child.try_wait().expect("wait for arbiter");
        status.is_some()
    });
    if !exited {
        let _ = child.kill();
        let _ = child.wait();
        panic!("arbiter did not exit after SIGINT");
    }
    let stderr = fs::read_to_string(logs.path().join("stderr")).unwrap_or_default();
    let stdout = fs::read_to_string(logs.path().join("stdout")).unwrap_or_default();
    assert_eq!(status.and_then(|s| s.code()), Some(130), "stdout:\n{stdout}\nstderr:\n{stderr}");

    let dir = repo.run_dir();
    let state = read_json(&dir.join("state.json"));
    assert_eq!(state["status"], "interrupted", "{state:#}");
    let selection = read_json(&dir.join("selection.json"));
    assert_eq!(selection["outcome"], "interrupted", "{selection:#}");
    assert_eq!(selection["winner"], Value::Null, "{selection:#}");
    for id in ["c01", "c02"] {
        let evidence = read_json(&dir.join(format!("candidates/{id}/evidence.json")));
        assert_eq!(evidence["agent"]["cancelled"], true, "{evidence:#}");
        assert_eq!(evidence["status"], "cancelled", "{evidence:#}");
    }

    // Every workspace went back to the pool; the repository has no worktree of arbiter's.
    let slots = repo.workspace_slots();
    assert!(!slots.is_empty());
    for slot in &slots {
        assert_eq!(read_json(&slot.join("slot.json"))["use"], "idle", "{}", slot.display());
    }
    let listed: Vec<String> = repo
        .git(&["worktree", "list", "--porcelain"])
        .lines()
        .filter_map(|l| l.strip_prefix("worktree ").map(str::to_string))
        .collect();
    let main = repo.path().canonicalize().expect("canonical repo path");
    assert_eq!(listed.len(), 1, "worktrees left: {listed:?}");
    assert_eq!(Path::new(&listed[0]).canonicalize().expect("canonical worktree path"), main);

    for pid in agents {
        assert!(wait_pid_gone(pid), "agent pid {pid} outlived arbiter");
    }
    assert_eq!(repo.status(), Vec::<String>::new());
}

#[test]
fn a_dirty_tree_is_refused_unless_allowed() {
    let repo = python_repo(AGENT_FIX);
    repo.write("README.md", "# calc\n\nlocal edit\n");
    let args = run_args("Fix add", &["--verify", VERIFY_PY, "--candidates", "1", "--apply", "none"]);

    let refused = repo.arbiter(&args);
    refused.assert_code(2);
    assert!(refused.stderr.contains("uncommitted changes"), "{}", refused.stderr);
    assert!(refused.stderr.contains("--allow-dirty"), "{}", refused.stderr);
    assert!(!refused.stderr.contains("panicked"), "{}", refused.stderr);
    assert!(repo.run_dirs().is_empty(), "a refused run created {:?}", repo.run_dirs());

    let mut allowed_args = args.clone();
    allowed_args.push("--allow-dirty");
    repo.arbiter(&allowed_args).assert_code(0);
    let dir = repo.run_dir();
    assert_candidates_prepared(&dir);
    assert_eq!(read_json(&dir.join("selection.json"))["winner"], "c01");
    // Candidates start from HEAD: the local edit is not part of their patch, and it is kept.
    let patch = fs::read_to_string(dir.join("candidates/c01/patch.diff")).expect("patch.diff");
    assert!(patch.contains("calc.py") && !patch.contains("README.md"), "{patch}");
    assert_eq!(repo.status(), vec![" M README.md".to_string()]);
    assert_eq!(repo.read("README.md"), "# calc\n\nlocal edit\n");
}

#[test]
fn apply_a_finished_run_on_a_new_branch() {
    let repo = python_repo(AGENT_FIX);
    let base = repo.head();
    repo.arbiter(&run_args("Fix add", &["--verify", VERIFY_PY, "--candidates", "1", "--apply", "none"])).assert_code(0);
    assert_eq!(repo.read("calc.py"), CALC_PY, "--apply none changed the working tree");
    assert_eq!(repo.status(), Vec::<String>::new());
    let dir = repo.run_dir();
    assert_candidates_prepared(&dir);

    // A dirty tree is refused without --force, and left as it was.
    repo.write("README.md", "# calc\n\nlocal edit\n");
    let refused = repo.arbiter(&["apply", "latest"]);
    refused.assert_code(2);
    assert!(refused.stderr.contains("uncommitted changes"), "{}", refused.stderr);
    assert!(!refused.stderr.contains("panicked"), "{}", refused.stderr);
    assert_eq!(repo.read("calc.py"), CALC_PY);
    assert_eq!(repo.status(), vec![" M README.md".to_string()]);
    repo.git(&["checkout", "-q", "--", "README.md"]);

    let applied = repo.arbiter(&["apply", "latest", "--branch", "fix-branch", "--commit"]);
    applied.assert_code(0);
    assert_eq!(repo.git(&["rev-parse", "--abbrev-ref", "HEAD"]).trim(), "fix-branch");
    assert_eq!(repo.git(&["show", "HEAD:calc.py"]), FIXED_CALC_PY);
    assert_eq!(repo.git(&["rev-parse", "HEAD^"]).trim(), base);
    assert_eq!(repo.git(&["rev-parse", "main"]).trim(), base, "main moved");
    assert_eq!(repo.status(), Vec::<String>::new());
    assert_eq!(repo.read("calc.py"), FIXED_CALC_PY);

    let record = read_json(&dir.join("apply.json"));
    assert_eq!(record["schema_version"], 1);
    assert_eq!(record["applied"], true, "{record:#}");
    assert_eq!(record["branch"], "fix-branch");
    assert_eq!(record["created_branch"], true);
    assert_eq!(record["candidate_id"], "c01");
    assert_eq!(record["commit"].as_str(), Some(repo.head().as_str()), "{record:#}");
}

#[test]
fn every_artifact_exists_and_parses() {
    let repo = python_repo(AGENT_FIX_BREAK_NOTHING);
    repo.arbiter(&run_args(
        "Fix the failing test in calc.py",
        &["--verify", VERIFY_PY, "--candidates", "3", "--apply", "none"],
    ))
    .assert_code(0);
    let dir = repo.run_dir();
    assert_candidates_prepared(&dir);
    let run_id = dir.file_name().expect("run id").to_string_lossy().into_owned();

    let state = read_json(&dir.join("state.json"));
    assert_eq!(state["run_id"], run_id.as_str());
    assert_eq!(state["status"], "succeeded");
    assert_eq!(state["phase"], "done");
    assert_eq!(state["winner"], "c01");

    let events = read_json_lines(&dir.join("runtime_events.jsonl"));
    assert!(!events.is_empty());
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().expect("seq")).collect();
    assert_eq!(seqs[0], 1, "{seqs:?}");
    assert!(seqs.windows(2).all(|w| w[1] > w[0]), "seq not strictly increasing: {seqs:?}");
    assert_eq!(events[0]["kind"], "run_started");
    assert_eq!(events[events.len() - 1]["kind"], "run_finished");
    assert!(events.iter().all(|e| e["run_id"] == run_id.as_str()));

    read_json(&dir.join("cost_summary.json"));
    let baseline = read_json(&dir.join("baseline.json"));
    assert_eq!(baseline["commands"].as_array().map(Vec::len), Some(1), "{baseline:#}");
    assert_ne!(baseline["commands"][0]["exit_code"], 0, "the test fails on the base: {baseline:#}");

    for id in ["c01", "c02", "c03"] {
        let cdir = dir.join("candidates").join(id);
        assert!(cdir.join("patch.diff").is_file(), "{id}: no patch.diff");
        let evidence = read_json(&cdir.join("evidence.json"));
        assert_eq!(evidence["candidate_id"], id);
        let summary = read_json(&cdir.join("runner_summary.json"));
        assert_eq!(summary["candidate_id"], id);
        let transcript = read_json_lines(&cdir.join("transcript.jsonl"));
        assert!(!transcript.is_empty(), "{id}: empty transcript");
    }
    assert!(fs::read_to_string(dir.join("candidates/c01/patch.diff")).expect("patch").contains("return a + b"));
    assert!(dir.join("reviews").is_dir());
    assert!(read_json(&dir.join("comparisons/pairwise.json")).is_array());
    read_json(&dir.join("comparisons/ranking.json"));
    read_json(&dir.join("comparisons/agreement.json"));
    assert_eq!(read_json(&dir.join("selection.json"))["winner"], "c01");

    let report = fs::read_to_string(dir.join("final_report.md")).expect("final_report.md");
    assert!(!report.trim().is_empty());
    assert!(report.contains("c01"), "{report}");
    let html = fs::read_to_string(dir.join("viewer/index.html")).expect("viewer/index.html");
    assert!(!html.is_empty());
    for bad in ["http://", "https://", "<script src"] {
        assert!(!html.contains(bad), "the viewer contains {bad:?}");
    }

    // Every JSON object artifact carries schema_version 1.
    let mut objects = 0;
    for file in files_under(&dir) {
        if file.extension().is_some_and(|e| e == "json") {
            let v = read_json(&file);
            if v.is_object() {
                assert_eq!(v["schema_version"], 1, "{} has no schema_version 1", file.display());
                objects += 1;
            }
        }
    }
    // state, cost, baseline, ranking, agreement, selection + 2 per candidate.
    assert!(objects >= 12, "only {objects} JSON objects");
}

#[test]
fn bad_input_is_refused_with_a_message() {
    #[track_caller]
    fn refused(run: Run, expect: &[&str]) {
        run.assert_code(2);
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
        for e in expect {
            assert!(run.stderr.contains(e), "stderr lacks {e:?}:\n{}", run.stderr);
        }
    }

    let plain = tempfile::tempdir().expect("temp dir");
    refused(
        run_arbiter_in(plain.path(), &["run", "--task", "Fix add", "--command", "./agent.sh"]),
        &["not inside a git repository"],
    );

    let repo = python_repo(AGENT_FIX);
    refused(repo.arbiter(&["run", "--task", "Fix add", "--runner", "nope"]), &["unknown runner 'nope'"]);
    refused(repo.arbiter(&["run", "--task", "  ", "--command", "./agent.sh"]), &["the task is empty"]);
    refused(
        repo.arbiter(&["run", "--task", "Fix add", "--candidates", "0", "--command", "./agent.sh"]),
        &["candidates"],
    );
    refused(
        repo.arbiter(&["run", "--task", "Fix add", "--verify", "no-such-program-xyz", "--command", "./agent.sh"]),
        &["no-such-program-xyz", "not on PATH"],
    );
    refused(repo.arbiter(&["run", "--task-file", "/nonexistent", "--command", "./agent.sh"]), &["/nonexistent"]);
    refused(repo.arbiter(&["run", "--task", "Fix add", "--bogus"]), &["--bogus"]);

    assert!(repo.run_dirs().is_empty(), "refused runs created {:?}", repo.run_dirs());
    assert_eq!(repo.status(), Vec::<String>::new());
}

#[test]
fn init_and_config_show_report_origins() {
    let repo = python_repo(AGENT_FIX);
    repo.arbiter(&["init"]).assert_code(0);
    let config = repo.arbiter_dir().join("config.toml");
    assert!(config.is_file());
    let exclude = fs::read_to_string(repo.path().join(".git/info/exclude")).expect("exclude");
    assert!(exclude.lines().any(|l| l.trim() == ".arbiter/"), "{exclude}");
    assert_eq!(repo.status(), Vec::<String>::new(), ".arbiter/ is not ignored");

    fs::write(&config, "[run]\ncandidates = 5\n").expect("write config");
    let shown = repo.arbiter(&["config", "show", "--json", "--timeout-seconds", "9"]);
    shown.assert_code(0);
    let v: Value = serde_json::from_str(&shown.stdout).unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", shown.stdout));
    let setting = |key: &str| -> (String, String) {
        let row = v["settings"]
            .as_array()
            .expect("settings")
            .iter()
            .find(|r| r["key"] == key)
            .unwrap_or_else(|| panic!("no {key} in {v:#}"));
        let value = match &row["value"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        (value, row["origin"].as_str().unwrap_or_default().to_string())
    };
    assert_eq!(setting("candidates"), ("5".to_string(), "config".to_string()));
    assert_eq!(setting("timeout_seconds"), ("9".to_string(), "flag".to_string()));
    assert_eq!(setting("verify_timeout_seconds").1, "default");
    assert_eq!(v["config_file_exists"], true);
}

#[test]
fn secrets_never_reach_agents_or_the_run_directory() {
    const KEY: &str = "sk-test-SECRETVALUE1234567890";
    const DB: &str = "postgres://u:pw-SECRET@h/db";
    let repo = python_repo("set -e\nenv\nenv > agent_env.txt\n");
    let out = repo
        .arbiter_cmd(&run_args("Show the environment", &["--verify", "env", "--candidates", "1", "--apply", "none"]))
        .env("OPENAI_API_KEY", KEY)
        .env("DATABASE_URL", DB)
        .output()
        .expect("run arbiter");
    let run = Run::from_output(out);
    run.assert_code(0);
    for secret in [KEY, DB] {
        assert!(!run.stdout.contains(secret) && !run.stderr.contains(secret), "arbiter printed {secret}");
    }

    let dir = repo.run_dir();
    assert_candidates_prepared(&dir);
    let stdout_log = fs::read_to_string(dir.join("candidates/c01/stdout.log")).expect("stdout.log");
    assert!(stdout_log.contains("ARBITER_CANDIDATE_ID=c01"), "the agent did not print its environment:\n{stdout_log}");
    for secret in [KEY, DB] {
        assert!(!stdout_log.contains(secret), "the agent saw {secret}");
    }
    assert!(!stdout_log.contains("OPENAI_API_KEY") && !stdout_log.contains("DATABASE_URL"), "{stdout_log}");
    let patch = fs::read_to_string(dir.join("candidates/c01/patch.diff")).expect("patch.diff");
    assert!(patch.contains("agent_env.txt") && patch.contains("ARBITER_RUN_ID="), "{patch}");

    let files = files_under(&dir);
    assert!(files.len() > 10, "{files:?}");
    for file in files {
        let bytes = fs::read(&file).expect("read artifact");
        let text = String::from_utf8_lossy(&bytes);
        for secret in [KEY, DB] {
            assert!(!text.contains(secret), "{} contains {secret}", file.display());
        }
    }
}

/// Candidates (and the baseline) create their worktrees concurrently, and `git worktree add`
/// is not safe to run concurrently in one repository (one invocation can read another's
/// half-created `.git/worktrees/<name>/`). arbiter serializes the record creation; no
/// candidate may fail its preparation because of a sibling.
#[test]
fn concurrent_worktree_creation_never_fails_a_candidate() {
    let repo = TestRepo::new();
    repo.write("f.txt", "x\n");
    repo.write_agent("agent.sh", "echo \"$ARBITER_CANDIDATE_ID\" > f.txt\n");
    repo.commit_all("base");
    for attempt in 0..5 {
        repo.arbiter(&run_args("Write your id", &["--candidates", "8", "--verify", "true", "--apply", "none"]))
            .assert_code(0);
        let newest = repo.run_dirs().pop().expect("a run directory");
        let ranking = read_json(&newest.join("comparisons/ranking.json"));
        for c in ranking["candidates"].as_array().expect("candidates") {
            assert_ne!(c["status"], "setup_failed", "attempt {attempt}: {c:#}");
        }
    }
}

/// A variable named in `env_passthrough` reaches verify commands on purpose; its value must
/// still never be written to the run directory, including the full verify logs.
#[test]
fn passed_through_secrets_are_redacted_from_gate_logs() {
    const SECRET: &str = "hunter2-passed-through-secret";
    let repo = TestRepo::new();
    repo.write("f.txt", "x\n");
    repo.write_agent("agent.sh", "echo y > f.txt\n");
    repo.write_agent("verify.sh", "echo \"verify sees $MY_API_KEY\"\n");
    repo.commit_all("base");
    repo.arbiter(&["init"]).assert_code(0);
    fs::write(repo.arbiter_dir().join("config.toml"), "[run]\nenv_passthrough = [\"MY_API_KEY\"]\n").expect("config");
    let out = repo
        .arbiter_cmd(&run_args("Change f", &["--verify", "./verify.sh", "--candidates", "1", "--apply", "none"]))
        .env("MY_API_KEY", SECRET)
        .output()
        .expect("run arbiter");
    Run::from_output(out).assert_code(0);

    let dir = repo.run_dir();
    assert_candidates_prepared(&dir);
    // The value did reach the verify command, and the recorded tail masks it.
    let evidence = read_json(&dir.join("candidates/c01/evidence.json"));
    let tail = evidence["gates"][0]["output_tail"].as_str().unwrap_or_default();
    assert!(tail.contains("verify sees [REDACTED]"), "{evidence:#}");
    for file in files_under(&dir) {
        let text = String::from_utf8_lossy(&fs::read(&file).expect("read artifact")).into_owned();
        assert!(!text.contains(SECRET), "{} contains the secret value", file.display());
    }
}

/// A run killed outright (SIGKILL: no chance to clean up). In the sandbox nothing it started
/// survives it: the agents die with it. Without the sandbox (`--sandbox off`) they run on in
/// their own process groups until the next run ends them. Either way the next run records the
/// dead run as interrupted and proceeds normally.
#[test]
fn what_a_crashed_run_left_is_ended_with_it_or_by_the_next_run() {
    for sandbox in ["auto", "off"] {
        let repo = python_repo(&format!(
            r#"if [ "$1" = hang ]; then
  echo {HOST_PID} > "$2/$ARBITER_CANDIDATE_ID.tmp"
  mv "$2/$ARBITER_CANDIDATE_ID.tmp" "$2/$ARBITER_CANDIDATE_ID.pid"
  setsid sh -c 'exec sleep 301' </dev/null >/dev/null 2>&1 &
  sleep 300
fi
sed -i 's/return a - b/return a + b/' calc.py
"#
        ));
        let pids = tempfile::tempdir().expect("temp dir");
        repo.allow_writes(pids.path());
        let hang = format!("./agent.sh hang {}", pids.path().display());
        let mut child = repo
            .arbiter_cmd(&[
                "run",
                "--task",
                "Fix add",
                "--candidates",
                "2",
                "--command",
                &hang,
                "--apply",
                "none",
                "--sandbox",
                sandbox,
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn arbiter");
        let pid_files = [pids.path().join("c01.pid"), pids.path().join("c02.pid")];
        let started = wait_until(Duration::from_secs(60), || pid_files.iter().all(|p| p.exists()));
        // The daemons the agents started (new sessions: out of every process group).
        let daemons_of_this_repo = || {
            processes_with("sleep 301")
                .into_iter()
                .filter(|pid| {
                    fs::read_link(format!("/proc/{pid}/cwd"))
                        .is_ok_and(|cwd| repo.workspace_slots().iter().any(|s| cwd.starts_with(s)))
                })
                .collect::<Vec<_>>()
        };
        wait_until(Duration::from_secs(10), || daemons_of_this_repo().len() == 2);
        kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).expect("send SIGKILL");
        let _ = child.wait();
        let agents: Vec<i32> = pid_files.iter().filter(|p| p.exists()).map(|p| read_pid(p)).collect();
        let daemons = daemons_of_this_repo();
        let stop_all = || {
            for pid in agents.iter().chain(&daemons) {
                let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
            }
        };
        if !started || daemons.len() != 2 && sandbox == "off" {
            stop_all();
            panic!("{sandbox}: the agents did not start (daemons {daemons:?})");
        }
        if sandbox == "auto" {
            for pid in agents.iter().chain(&daemons) {
                assert!(wait_pid_gone(*pid), "process {pid} outlived its SIGKILLed arbiter in the sandbox");
            }
        } else {
            let alive = agents.iter().chain(&daemons).all(|pid| !pid_gone(*pid));
            if !alive {
                stop_all();
            }
            assert!(alive, "without the sandbox, the orphans still run before the next run");
        }
        let crashed = repo.run_dir();
        let crashed_id = crashed.file_name().expect("run id").to_string_lossy().into_owned();

        repo.arbiter(&[
            "run",
            "--task",
            "Fix add",
            "--candidates",
            "1",
            "--command",
            "./agent.sh",
            "--verify",
            VERIFY_PY,
            "--sandbox",
            sandbox,
        ])
        .assert_code(0);
        for pid in agents.iter().chain(&daemons) {
            assert!(wait_pid_gone(*pid), "{sandbox}: process {pid} of the crashed run is still running");
        }
        assert_eq!(read_json(&crashed.join("state.json"))["status"], "interrupted");
        let listed = repo.git(&["worktree", "list", "--porcelain"]);
        assert_eq!(listed.lines().filter(|l| l.starts_with("worktree ")).count(), 1, "{listed}");
        // Both runs may start within one second: find the second one by elimination, not order.
        let second = repo.run_dirs().into_iter().find(|d| *d != crashed).expect("the second run");
        let events = read_json_lines(&second.join("runtime_events.jsonl"));
        assert!(
            events.iter().any(|e| e["kind"] == "leftovers_pruned" && e["data"]["runs"][0] == crashed_id.as_str()),
            "{sandbox}: {events:#?}"
        );
    }
}

/// Ignored files named in the include-list reach each worktree, the setup command runs
/// there before the agent, and a setup that writes files git does not ignore is reported.
#[test]
fn include_list_and_setup_prepare_each_worktree() {
    let repo = TestRepo::new();
    repo.write(".gitignore", ".env\n*.log\n");
    repo.write("README", "x\n");
    repo.write_agent("agent.sh", "cat .env setup_done.log > seen.txt\n");
    repo.commit_all("base");
    repo.write(".env", "TOKEN=abc\n");
    let args = [
        "run",
        "--task",
        "Record what you see",
        "--candidates",
        "2",
        "--command",
        "./agent.sh",
        "--include",
        ".env",
        "--setup",
        "echo prepared > setup_done.log",
        "--apply",
        "none",
    ];
    repo.arbiter(&args).assert_code(0);
    let dir = repo.run_dir();
    for id in ["c01", "c02"] {
        let patch = fs::read_to_string(dir.join("candidates").join(id).join("patch.diff")).expect("patch");
        assert!(patch.contains("+TOKEN=abc") && patch.contains("+prepared"), "{id}: {patch}");
        assert!(!patch.contains("setup_done.log") && !patch.contains("a/.env"), "{id}: ignored files leaked: {patch}");
    }
    let events = read_json_lines(&dir.join("runtime_events.jsonl"));
    assert!(!events.iter().any(|e| e["kind"] == "warning"), "{events:#?}");

    let noisy = [
        "run",
        "--task",
        "Record what you see",
        "--candidates",
        "1",
        "--command",
        "./agent.sh",
        "--include",
        ".env",
        "--setup",
        "echo prepared > setup_done.log && echo x > setup_output.txt",
        "--apply",
        "none",
    ];
    repo.arbiter(&noisy).assert_code(0);
    let second = repo.run_dirs().into_iter().find(|d| *d != dir).expect("second run");
    let events = read_json_lines(&second.join("runtime_events.jsonl"));
    assert!(
        events
            .iter()
            .any(|e| e["kind"] == "warning"
                && e["data"]["message"].as_str().is_some_and(|m| m.contains("setup_output.txt"))),
        "{events:#?}"
    );
}

/// A candidate that edits an existing test's assertion to match the bug loses to a real fix
/// and is flagged; the gates ran with the base version of the test restored. A new test file
/// a candidate adds is its own and does not count against it.
#[test]
fn weakening_a_test_loses_to_a_real_fix_and_is_flagged() {
    let repo = python_repo(
        r#"set -e
if [ "$ARBITER_CANDIDATE_INDEX" = 0 ]; then
  sed -i 's/add(2, 3), 5/add(2, 3), -1/' test_calc.py
else
  sed -i 's/return a - b/return a + b/' calc.py
  printf 'import unittest\nfrom calc import add\n\n\nclass More(unittest.TestCase):\n    def test_zero(self):\n        self.assertEqual(add(0, 0), 0)\n' > test_more.py
fi
"#,
    );
    repo.arbiter(&run_args("Fix add", &["--candidates", "2", "--verify", VERIFY_PY])).assert_code(0);
    let dir = repo.run_dir();
    assert_eq!(read_json(&dir.join("selection.json"))["winner"], "c02");
    let ranking = read_json(&dir.join("comparisons/ranking.json"));
    let cheat =
        ranking["candidates"].as_array().expect("candidates").iter().find(|c| c["candidate_id"] == "c01").cloned();
    let cheat = cheat.expect("c01 ranked");
    assert_eq!(cheat["rejection"]["code"], "protected_changed", "{cheat:#}");
    let evidence = read_json(&dir.join("candidates/c01/evidence.json"));
    assert_eq!(evidence["protected_changes"], serde_json::json!(["test_calc.py"]));
    // The gates saw the base test, which the cheat does not pass.
    assert_eq!(evidence["gate_summary"]["all_passed"], false, "{evidence:#}");
    let fix = read_json(&dir.join("candidates/c02/evidence.json"));
    assert_eq!(fix["protected_changes"], serde_json::json!([]), "a new test file is the candidate's own");
    assert!(fs::read_to_string(dir.join("final_report.md")).expect("report").contains("Protected files changed"));
    assert!(repo.read("calc.py").contains("return a + b"));
}

/// A test runner that, like pytest, loads `conftest.py` before it collects the tests.
const RUN_TESTS_PY: &str = r#"import os
import sys
import unittest

if os.path.exists("conftest.py"):
    import conftest  # noqa: F401 (hooks, loaded before the tests as pytest loads them)

program = unittest.main(module=None, argv=["run_tests", "discover", "-q"], exit=False)
sys.exit(0 if program.result.wasSuccessful() else 1)
"#;

/// A candidate that adds a `conftest.py` making every test skip changes how the tests run,
/// not what they test: it is flagged and loses to a real fix, its gates having run without
/// the conftest.py it added (so the failing test failed). The test file the real fix adds
/// is its own and does not count against it.
#[test]
fn adding_a_conftest_that_skips_the_tests_loses_to_a_real_fix_and_is_flagged() {
    let repo = python_repo(
        r#"set -e
if [ "$ARBITER_CANDIDATE_INDEX" = 0 ]; then
  printf 'import unittest\n\nunittest.TestCase.setUp = lambda self: self.skipTest("skipped by conftest.py")\n' > conftest.py
else
  sed -i 's/return a - b/return a + b/' calc.py
  printf 'import unittest\nfrom calc import add\n\n\nclass More(unittest.TestCase):\n    def test_zero(self):\n        self.assertEqual(add(0, 0), 0)\n' > test_more.py
fi
"#,
    );
    repo.write("run_tests.py", RUN_TESTS_PY);
    repo.commit_all("a test runner that loads conftest.py");
    repo.arbiter(&run_args("Fix add", &["--candidates", "2", "--verify", "python3 run_tests.py"])).assert_code(0);
    let dir = repo.run_dir();
    assert_candidates_prepared(&dir);
    assert_eq!(read_json(&dir.join("selection.json"))["winner"], "c02");
    let ranking = read_json(&dir.join("comparisons/ranking.json"));
    let cheat = ranked(&ranking, "c01");
    assert_eq!(cheat["eligible"], false, "{cheat:#}");
    assert_eq!(cheat["rejection"]["code"], "protected_changed", "{cheat:#}");
    let evidence = read_json(&dir.join("candidates/c01/evidence.json"));
    assert_eq!(evidence["protected_changes"], serde_json::json!(["conftest.py"]), "{evidence:#}");
    // The gates ran without the added conftest.py: the test it skipped failed.
    assert_eq!(evidence["gate_summary"]["all_passed"], false, "{evidence:#}");
    let log = fs::read_to_string(dir.join("candidates/c01/gates/verify-1.log")).expect("gate log");
    assert!(log.contains("FAIL") && !log.contains("skipped by conftest.py"), "{log}");
    // Its patch is what it did, conftest.py included.
    let patch = fs::read_to_string(dir.join("candidates/c01/patch.diff")).expect("patch");
    assert!(patch.contains("b/conftest.py"), "{patch}");
    let events = read_json_lines(&dir.join("runtime_events.jsonl"));
    let warning = events
        .iter()
        .find(|e| e["kind"] == "warning" && e["candidate"] == "c01" && e["data"]["protected_changes"].is_array())
        .unwrap_or_else(|| panic!("no protected-changes warning: {events:#?}"));
    assert_eq!(warning["data"]["removed"], serde_json::json!(["conftest.py"]), "{warning:#}");
    assert_eq!(warning["data"]["restored"], serde_json::json!([]), "{warning:#}");
    let fix = read_json(&dir.join("candidates/c02/evidence.json"));
    assert_eq!(fix["protected_changes"], serde_json::json!([]), "a new test file is the candidate's own");
    assert_eq!(fix["gate_summary"]["all_passed"], true, "{fix:#}");
    assert!(fs::read_to_string(dir.join("final_report.md")).expect("report").contains("Protected files changed"));
    assert!(repo.read("calc.py").contains("return a + b"));
    assert!(!repo.path().join("conftest.py").exists(), "the loser's conftest.py reached the repository");
}

#[test]
fn a_killed_run_resumes_from_a_fresh_worktree_when_its_own_is_gone() {
    let scratch = tempfile::tempdir().expect("temp dir");
    let log = scratch.path().join("agents.log");
    let marker = scratch.path().join("slow");
    std::fs::write(&marker, "").expect("marker");
    let repo = python_repo(&format!(
        r#"set -e
echo "$ARBITER_CANDIDATE_ID" >> {log}
if [ "$ARBITER_CANDIDATE_ID" = c03 ]; then
  echo {HOST_PID} > {pid}
  while [ -e {marker} ]; do sleep 0.1; done
fi
sed -i 's/return a - b/return a + b/' calc.py
"#,
        log = log.display(),
        pid = scratch.path().join("c03.pid").display(),
        marker = marker.display()
    ));
    repo.allow_writes(scratch.path());
    let mut child = repo
        .arbiter_cmd(&[
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
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the run");
    let pid_file = scratch.path().join("c03.pid");
    assert!(
        wait_until(Duration::from_secs(60), || pid_file.exists()
            && repo.run_dirs().first().is_some_and(|d| {
                d.join("candidates/c01/result.json").exists() && d.join("candidates/c02/result.json").exists()
            })),
        "c01 and c02 never finished with c03 waiting"
    );
    child.kill().expect("SIGKILL arbiter");
    let _ = child.wait();
    let orphan = read_pid(&pid_file);
    // The sandbox ended c03's agent with its arbiter.
    assert!(wait_pid_gone(orphan), "c03's agent outlived its SIGKILLed arbiter");
    std::fs::remove_file(&marker).expect("let c03 finish");
    // Its workspace is gone (as after another run took it over): c03 starts again from scratch.
    let run_id = repo.run_dir().file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let own = repo
        .workspace_slots()
        .into_iter()
        .find(|s| {
            let state = read_json(&s.join("slot.json"));
            state["owner"]["run"] == run_id.as_str() && state["owner"]["candidate"] == "c03"
        })
        .expect("c03's workspace");
    std::fs::remove_dir_all(&own).expect("remove c03's workspace");

    let resumed = repo.arbiter(&["runs", "resume", &run_id]);
    resumed.assert_code(0);
    let lines: Vec<String> = std::fs::read_to_string(&log).unwrap_or_default().lines().map(str::to_string).collect();
    let count = |id: &str| lines.iter().filter(|l| *l == id).count();
    assert_eq!((count("c01"), count("c02"), count("c03")), (1, 1, 2), "{lines:?}");
    let dir = repo.run_dir();
    let state = read_json(&dir.join("state.json"));
    assert_eq!(state["status"], "succeeded", "{state:#}");
    let event = read_json_lines(&dir.join("runtime_events.jsonl"))
        .into_iter()
        .find(|e| e["kind"] == "run_resumed")
        .expect("run_resumed");
    assert_eq!(event["data"]["restarting"][0]["reuses_worktree"], false, "{event:#}");
    assert_eq!(event["data"]["baseline_kept"], true, "{event:#}");
}

/// The warm pool is bounded by `arbiter cache prune`: idle workspaces go, kept ones only when
/// asked, and the next run builds what it needs again.
#[test]
fn cache_prune_bounds_the_pool_and_keeps_what_the_user_kept() {
    let repo = python_repo(AGENT_FIX);
    // A cache of its own: pruning the shared one would race the other tests.
    let cache = tempfile::tempdir().expect("temp dir");
    let arbiter = |args: &[&str]| {
        Run::from_output(repo.arbiter_cmd(args).env("ARBITER_CACHE_DIR", cache.path()).output().expect("run arbiter"))
    };
    let slots = || -> Vec<std::path::PathBuf> {
        fs::read_dir(cache.path().join("workspaces"))
            .into_iter()
            .flatten()
            .flatten()
            .flat_map(|pool| fs::read_dir(pool.path()).into_iter().flatten().flatten())
            .filter(|e| e.file_name().to_string_lossy().starts_with("slot-"))
            .map(|e| e.path())
            .collect()
    };
    let run = |extra: &[&str]| {
        let mut args =
            vec!["run", "--task", "Fix add", "--command", "./agent.sh", "--verify", VERIFY_PY, "--apply", "none"];
        args.extend_from_slice(extra);
        arbiter(&args)
    };
    run(&["--candidates", "3"]).assert_code(0);
    assert_eq!(slots().len(), 4, "three candidates and the base: {:?}", slots());
    let kept = run(&["--candidates", "1", "--keep-worktrees"]);
    kept.assert_code(0);
    assert_eq!(slots().len(), 4, "the second run reused the warm workspaces: {:?}", slots());

    let pruned = arbiter(&["cache", "prune", "--json"]);
    pruned.assert_code(0);
    let report: Value = serde_json::from_str(&pruned.stdout).expect("--json");
    assert_eq!(report["workspaces_removed"], 2, "{report:#}");
    let left = slots();
    assert_eq!(left.len(), 2, "the kept candidate's and the kept base's workspaces stay: {left:?}");
    for slot in &left {
        assert_eq!(read_json(&slot.join("slot.json"))["use"], "kept", "{}", slot.display());
        assert!(slot.join("tree/calc.py").exists());
    }
    let all = arbiter(&["cache", "prune", "--kept"]);
    all.assert_code(0);
    assert!(all.stdout.contains("Removed 2 workspace(s)"), "{}", all.stdout);
    assert!(slots().is_empty(), "{:?}", slots());
    run(&["--candidates", "1"]).assert_code(0);
    assert_eq!(repo.status(), Vec::<String>::new());
}
