//! A new user's first hour, as the README walks it: the Quick start's own agent example with
//! a script that is not committed, and the conveniences a user expects of a command line.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use common::*;
use serde_json::Value;

/// The README's agent: fixes add() (candidates 0 and 1), does nothing (2), breaks mul (3).
const MY_AGENT: &str = r#"set -e
case "$ARBITER_CANDIDATE_INDEX" in
  0|1) sed -i 's/return a - b/return a + b/' calc.py ;;
  2) echo "nothing to do" ;;
  *) sed -i 's/return a - b/return a + b/; s/return a \* b/return a + b/' calc.py ;;
esac
"#;

#[test]
fn the_readme_quick_start_runs_as_written_with_an_uncommitted_agent_script() {
    // calc.py and its tests are committed; my-agent.sh is written but not committed.
    let repo = TestRepo::new();
    repo.write("calc.py", CALC_PY);
    repo.write("test_calc.py", TEST_CALC_PY);
    repo.write(".gitignore", "__pycache__/\n");
    repo.commit_all("calc with a bug");
    repo.write_agent("my-agent.sh", MY_AGENT);
    repo.arbiter(&["init"]).assert_code(0);
    let run = repo.arbiter(&[
        "run",
        "--task",
        "Fix the failing test in calc.py",
        "--success-criteria",
        "All tests pass; the diff is minimal",
        "--verify",
        "python3 -m unittest -q",
        "--candidates",
        "4",
        "--runner",
        "command",
        "--command",
        "./my-agent.sh",
        "--timeout-seconds",
        "600",
    ]);
    run.assert_code(0);
    assert!(
        run.stderr.contains("my-agent.sh is not committed at HEAD: every candidate runs your working tree's copy"),
        "{}",
        run.stderr
    );
    // The fix is applied, the script is still the user's own untracked file, in no patch.
    assert!(repo.read("calc.py").contains("return a + b"));
    assert_eq!(repo.status(), vec![" M calc.py".to_string(), "?? my-agent.sh".to_string()]);
    let dir = repo.run_dir();
    for c in ["c01", "c02", "c03", "c04"] {
        let patch = std::fs::read_to_string(dir.join(format!("candidates/{c}/patch.diff"))).unwrap();
        assert!(!patch.contains("my-agent.sh"), "{c}: {patch}");
    }
    let ranking = read_json(&dir.join("comparisons/ranking.json"));
    let c03 = ranking["candidates"].as_array().unwrap().iter().find(|c| c["candidate_id"] == "c03").unwrap();
    assert_eq!(c03["rejection"]["code"], "empty_patch", "the do-nothing candidate changed nothing: {c03:#}");
    let list = repo.arbiter(&["runs", "list", "--json"]);
    let runs: Value = serde_json::from_str(&list.stdout).unwrap();
    assert_eq!(runs["runs"][0]["status"], "succeeded", "{runs:#}");
    // The next steps the Quick start prints work as printed.
    repo.arbiter(&["runs", "show", "latest"]).assert_code(0);
    repo.git(&["checkout", "--", "calc.py"]);
    repo.arbiter(&["apply", "latest"]).assert_code(0);
    assert!(repo.read("calc.py").contains("return a + b"));

    // The copy is outside the repository and read-only; a candidate cannot change it.
    let settings = read_json(&dir.join("settings.json"));
    let copy = settings["settings"]["outside_programs"][0]["copy"].as_str().unwrap().to_string();
    assert!(!copy.starts_with(&repo.path().display().to_string()), "{copy}");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&copy).unwrap().permissions().mode() & 0o222, 0, "{copy} is read-only");
}

#[test]
fn a_hostile_candidate_cannot_rewrite_the_shared_agent_copy() {
    // Every candidate tries to overwrite the script it is run from; the copy stays as it was.
    let repo = TestRepo::new();
    repo.write("notes.txt", "draft\n");
    repo.commit_all("notes");
    repo.write_agent(
        "agent.sh",
        "printf '#!/bin/sh\\necho pwned > pwned.txt\\n' > \"$0\" 2>/dev/null || true\nchmod u+w \"$0\" 2>/dev/null || true\nprintf 'final\\n' > notes.txt\n",
    );
    let run = repo.arbiter(&[
        "run",
        "--task",
        "Finish the notes",
        "--runner",
        "command",
        "--command",
        "./agent.sh",
        "--candidates",
        "2",
        "--verify",
        "grep -q final notes.txt",
        "--apply",
        "none",
    ]);
    run.assert_code(0);
    let settings = read_json(&repo.run_dir().join("settings.json"));
    let copy = settings["settings"]["outside_programs"][0]["copy"].as_str().unwrap().to_string();
    let text = std::fs::read_to_string(&copy).unwrap();
    assert!(text.contains("printf 'final"), "the copy was changed: {text}");
    assert!(!repo.path().join("pwned.txt").exists());
}

#[test]
fn the_demo_s_closing_hints_work_as_printed_without_arbiter_on_path() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("demo");
    let mut demo = arbiter_cmd_in(scratch.path(), &["demo", "--dir", dir.to_str().unwrap()]);
    demo.env("PATH", "/usr/local/bin:/usr/bin:/bin");
    let run = Run::from_output(demo.output().unwrap());
    run.assert_code(0);
    let look =
        run.stdout.lines().find_map(|l| l.strip_prefix("Look around: ")).unwrap_or_else(|| panic!("{}", run.stdout));
    assert!(look.contains(ARBITER), "the hint names this binary, not an `arbiter` the shell cannot find: {look}");
    assert!(run.stdout.contains("cargo install --path"), "{}", run.stdout);
    let followed = std::process::Command::new("sh")
        .args(["-c", look])
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .output()
        .unwrap();
    assert!(followed.status.success(), "{look}: {}", String::from_utf8_lossy(&followed.stderr));
    assert!(String::from_utf8_lossy(&followed.stdout).contains("c01"), "{}", String::from_utf8_lossy(&followed.stdout));
}

#[test]
fn one_store_per_invocation_is_honoured_by_every_command_that_has_one() {
    let pg = PgDatabase::create();
    let repo = python_repo("set -e\nsed -i 's/return a - b/return a + b/' calc.py\n");
    repo.arbiter(&["init"]).assert_code(0);
    let db = ["--database-url", pg.url.as_str()];
    // A run records into Postgres, not into .arbiter/arbiter.db.
    let mut run =
        vec!["run", "--task", "Fix add", "--runner", "command", "--command", "./agent.sh", "--candidates", "1"];
    run.extend_from_slice(&["--apply", "none"]);
    run.extend_from_slice(&db);
    repo.arbiter(&run).assert_code(0);
    let list = |extra: &[&str]| -> Value {
        let mut args = vec!["runs", "list", "--json"];
        args.extend_from_slice(extra);
        let r = repo.arbiter(&args);
        r.assert_code(0);
        serde_json::from_str::<Value>(&r.stdout).unwrap()["runs"].clone()
    };
    assert_eq!(list(&db).as_array().unwrap().len(), 1);
    assert_eq!(list(&[]).as_array().unwrap().len(), 0, "nothing went to the local SQLite index");
    // A plan task's run on Postgres is listed by `runs list` on that database; the
    // environment variable works like the flag.
    let plan = serde_json::json!({
        "id": "p", "name": "P",
        "defaults": {"candidates": 1, "runners": "command", "command": "./agent.sh"},
        "tasks": [{"id": "T", "title": "Fix add", "description": "add subtracts; make it add.", "acceptance_criteria": ["add(2, 3) == 5"]}],
    });
    repo.write("plan.json", plan.to_string());
    repo.commit_all("plan");
    let mut import = vec!["plan", "import", "plan.json"];
    import.extend_from_slice(&db);
    repo.arbiter(&import).assert_code(0);
    let mut plan_run = repo.arbiter_cmd(&["plan", "run", "p"]);
    plan_run.env("ARBITER_DATABASE_URL", &pg.url);
    Run::from_output(plan_run.output().unwrap()).assert_code(0);
    let runs = list(&db);
    assert_eq!(runs.as_array().unwrap().len(), 2, "{runs:#}");
    // A command that uses no store refuses the flag (and ignores the variable).
    let refused = repo.arbiter(&["runners", "--database-url", pg.url.as_str()]);
    refused.assert_code(2);
    assert!(refused.stderr.contains("`arbiter runners` does not use a database"), "{}", refused.stderr);
    let mut runners = repo.arbiter_cmd(&["runners"]);
    runners.env("ARBITER_DATABASE_URL", &pg.url);
    Run::from_output(runners.output().unwrap()).assert_code(0);
}

#[test]
fn completions_and_man_pages_come_from_the_grammar() {
    let scratch = tempfile::tempdir().unwrap();
    for (shell, marker) in [
        ("bash", "_arbiter()"),
        ("zsh", "#compdef arbiter"),
        ("fish", "complete -c arbiter"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let run = run_arbiter_in(scratch.path(), &["completions", shell]);
        run.assert_code(0);
        assert!(run.stdout.contains(marker), "{shell}: {}", &run.stdout[..run.stdout.len().min(300)]);
        assert!(run.stdout.contains("doctor") && run.stdout.contains("plan"), "{shell} completes every command");
    }
    let bad = run_arbiter_in(scratch.path(), &["completions", "tcsh"]);
    bad.assert_code(2);
    assert!(bad.stderr.contains("possible values: bash"), "{}", bad.stderr);

    let man = run_arbiter_in(scratch.path(), &["man"]);
    man.assert_code(0);
    assert!(
        man.stdout.starts_with(".ie") || man.stdout.contains(".TH arbiter"),
        "{}",
        &man.stdout[..200.min(man.stdout.len())]
    );
    let dir = scratch.path().join("man1");
    run_arbiter_in(scratch.path(), &["man", "--dir", dir.to_str().unwrap()]).assert_code(0);
    for page in ["arbiter.1", "arbiter-run.1", "arbiter-plan-run.1", "arbiter-worker-register.1", "arbiter-doctor.1"] {
        let text = std::fs::read_to_string(dir.join(page)).unwrap_or_else(|e| panic!("{page}: {e}"));
        assert!(text.contains(".TH"), "{page} is a man page");
    }
    let run_page = std::fs::read_to_string(dir.join("arbiter-run.1")).unwrap();
    assert!(run_page.contains("no\\-verify"), "the run page documents --no-verify");
}

#[test]
fn every_flag_and_argument_says_what_it_is_and_defaults_are_shown() {
    let scratch = tempfile::tempdir().unwrap();
    // Walk the whole grammar through --help.
    fn commands(path: &[String], scratch: &std::path::Path, out: &mut Vec<(Vec<String>, String)>) {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let run = run_arbiter_in(scratch, &args);
        run.assert_code(0);
        let help = run.stdout.clone();
        out.push((path.to_vec(), help.clone()));
        let mut in_commands = false;
        for line in help.lines() {
            if line == "Commands:" {
                in_commands = true;
                continue;
            }
            if in_commands {
                let Some(name) = line.strip_prefix("  ").and_then(|l| l.split_whitespace().next()) else { break };
                if name != "help" {
                    let mut next = path.to_vec();
                    next.push(name.to_string());
                    commands(&next, scratch, out);
                }
            }
        }
    }
    let mut pages = Vec::new();
    commands(&[], scratch.path(), &mut pages);
    assert!(pages.len() > 40, "{} commands", pages.len());
    for (path, help) in &pages {
        let lines: Vec<&str> = help.lines().collect();
        let mut section = "";
        for (i, line) in lines.iter().enumerate() {
            if line.ends_with(':') && !line.starts_with(' ') {
                section = line;
                continue;
            }
            if section != "Options:" && section != "Arguments:" {
                continue;
            }
            // An option line: `  -x, --long <V>  Help`, or its help on the next line, indented
            // deeper (clap's long help).
            let trimmed = line.trim_start();
            if !(trimmed.starts_with('-') || trimmed.starts_with('<') || trimmed.starts_with('[')) {
                continue;
            }
            let indent = line.len() - trimmed.len();
            let inline = trimmed.split("  ").skip(1).any(|p| !p.trim().is_empty());
            let below = lines.get(i + 1).is_some_and(|next| {
                let t = next.trim_start();
                next.len() - t.len() > indent && !t.is_empty() && !t.starts_with('-')
            });
            assert!(inline || below, "`arbiter {}`: `{}` has no help text", path.join(" "), trimmed);
        }
    }
    let run = pages.iter().find(|(p, _)| p == &["run".to_string()]).unwrap();
    assert!(run.1.contains("[default: worktree]") || run.1.contains("[default:"), "defaults are shown");
    let serve = pages.iter().find(|(p, _)| p == &["serve".to_string()]).unwrap();
    assert!(serve.1.contains("[default: 127.0.0.1:7878]"), "{}", serve.1);
}

#[test]
fn doctor_says_what_works_and_what_to_do_about_the_rest() {
    let repo = python_repo("true\n");
    repo.arbiter(&["init"]).assert_code(0);
    let run = repo.arbiter(&["doctor", "--json"]);
    run.assert_code(0);
    let checks: Value = serde_json::from_str(&run.stdout).unwrap();
    let find = |name: &str| checks["checks"].as_array().unwrap().iter().find(|c| c["name"] == name).cloned().unwrap();
    assert_eq!(find("git")["status"], "ok");
    assert_eq!(find("sqlite")["status"], "ok");
    assert!(["ok", "warn"].contains(&find("sandbox")["status"].as_str().unwrap()));
    for cli in ["claude-code", "codex", "gemini", "aider", "opencode", "villani-code"] {
        let c = find(cli);
        assert!(c["status"] != "fail", "{c:#}");
        if c["status"] == "absent" {
            assert!(c["hint"].as_str().unwrap().contains("install"), "{c:#}");
        }
    }
    // With Postgres, and with a Postgres that is not there (exit 3, and the fix).
    let pg = PgDatabase::create();
    let mut ok = repo.arbiter_cmd(&["doctor"]);
    ok.env("ARBITER_DATABASE_URL", &pg.url);
    let ok = Run::from_output(ok.output().unwrap());
    ok.assert_code(0);
    assert!(ok.stdout.contains("postgres") && ok.stdout.contains("reachable"), "{}", ok.stdout);
    let mut down = repo.arbiter_cmd(&["doctor"]);
    down.env("ARBITER_DATABASE_URL", "postgres://postgres:hunter2-doctor@127.0.0.1:1/x");
    let down = Run::from_output(down.output().unwrap());
    down.assert_code(3);
    assert!(down.stdout.contains("FAIL postgres") && down.stdout.contains("start the server"), "{}", down.stdout);
    assert!(!down.stdout.contains("hunter2-doctor") && !down.stderr.contains("hunter2-doctor"));
    // A backend that is down is named with the way to test it for real.
    repo.arbiter(&[
        "backend",
        "add",
        "local",
        "--provider",
        "openai-compatible",
        "--model",
        "m",
        "--base-url",
        "http://127.0.0.1:9/v1",
    ])
    .assert_code(0);
    let run = repo.arbiter(&["doctor"]);
    run.assert_code(3);
    assert!(run.stdout.contains("FAIL local") && run.stdout.contains("arbiter backend test local"), "{}", run.stdout);
}
