//! Defects found by trying arbiter against real files and hostile input, each reproduced
//! first and fixed: the regression tests.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

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
    let plan =
        json!({"id": "big", "name": "Big", "defaults": {"runners": "command", "command": "true"}, "tasks": tasks});
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
    for args in [
        &["plan", "show", "big"][..],
        &["plan", "status", "big"],
        &["plan", "export", "big"],
        &["plan", "events", "big"],
    ] {
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

#[test]
fn include_never_copies_the_workspace_into_itself() {
    let repo = python_repo("set -e\nsed -i 's/return a - b/return a + b/' calc.py\n");
    repo.arbiter(&["init"]).assert_code(0);
    for entry in [".arbiter/**", "./.git", ".git/config"] {
        let run = repo.arbiter(&[
            "run",
            "--task",
            "Fix add",
            "--runner",
            "command",
            "--command",
            "./agent.sh",
            "--candidates",
            "1",
            "--include",
            entry,
        ]);
        run.assert_code(2);
        assert!(run.stderr.contains("names arbiter's own directory or git's"), "{entry}: {}", run.stderr);
    }
    // A broad pattern copies the ignored files it matches, never .git/ or .arbiter/.
    repo.write(".env", "TOKEN_NAME=x\n");
    repo.write(".gitignore", "__pycache__/\n.env\n");
    repo.commit_all("ignore .env");
    let run = repo.arbiter(&[
        "run",
        "--task",
        "Fix add",
        "--runner",
        "command",
        "--command",
        "./agent.sh",
        "--candidates",
        "1",
        "--include",
        ".*",
        "--apply",
        "none",
    ]);
    run.assert_code(0);
    let events = read_json_lines(&repo.run_dir().join("runtime_events.jsonl"));
    let copied: Vec<String> = events
        .iter()
        .filter(|e| e["kind"] == "include_copied")
        .flat_map(|e| e["data"]["copied"].as_array().cloned().unwrap_or_default())
        .filter_map(|c| c.as_str().map(str::to_string))
        .collect();
    assert!(copied.contains(&".env".to_string()), "{copied:?}");
    let private = |c: &String| [".git", ".arbiter"].iter().any(|d| c == d || c.starts_with(&format!("{d}/")));
    assert!(!copied.iter().any(private), "{copied:?}");
}

/// One candidate of the command agent, gated by the tests under `tests/`, nothing applied.
const RUN_ONE: [&str; 14] = [
    "run",
    "--task",
    "Fix add",
    "--runner",
    "command",
    "--command",
    "./agent.sh",
    "--candidates",
    "1",
    "--verify",
    "python3 -m unittest discover -s tests -q",
    "--apply",
    "none",
    "--no-judge",
];

/// In a repository without a `.gitignore`, an agent that ran the tests left `__pycache__`
/// behind, some of it under the protected `tests/`: those files entered its patch, counted
/// as changed lines (it lost on size to an overfit) and, when it won, were written into the
/// user's tree. Build and cache output never enters a patch; a file the base tracks there
/// (the project's own) still does, and `build_outputs = []` captures everything.
#[test]
fn build_and_cache_output_never_enters_a_patch() {
    let repo = TestRepo::new();
    repo.write("calc.py", CALC_PY);
    repo.write("tests/test_calc.py", TEST_CALC_PY);
    repo.write("node_modules/kept.js", "// vendored on purpose\n");
    repo.write_agent(
        "agent.sh",
        "set -e\nsed -i 's/return a - b/return a + b/' calc.py\n\
         mkdir -p __pycache__ tests/__pycache__ .pytest_cache/v node_modules/left target/debug\n\
         printf 'pyc' > __pycache__/calc.cpython-311.pyc\n\
         printf 'pyc' > tests/__pycache__/test_calc.cpython-311.pyc\n\
         printf '{}' > .pytest_cache/v/lastfailed\n\
         printf 'x' > node_modules/left/index.js\n\
         printf 'changed' > node_modules/kept.js\n\
         printf 'bin' > target/debug/calc\n",
    );
    repo.commit_all("calc with a bug, no .gitignore");
    repo.arbiter(&["init"]).assert_code(0);
    let run = repo.arbiter(&RUN_ONE);
    run.assert_code(0);
    let patch = std::fs::read_to_string(repo.run_dir().join("candidates/c01/patch.diff")).unwrap();
    for left_out in ["__pycache__", ".pyc", ".pytest_cache", "node_modules/left", "target/debug"] {
        assert!(!patch.contains(left_out), "{left_out} entered the patch:\n{patch}");
    }
    assert!(patch.contains("calc.py") && patch.contains("node_modules/kept.js"), "{patch}");
    let evidence = read_json(&repo.run_dir().join("candidates/c01/evidence.json"));
    assert_eq!(evidence["protected_changes"], json!([]), "{evidence}");
    let ranking = read_json(&repo.run_dir().join("comparisons/ranking.json"));
    assert_eq!(ranking["candidates"][0]["files_changed"], json!(2), "{ranking}");

    std::fs::remove_dir_all(repo.run_dir()).unwrap();
    repo.write(".arbiter/config.toml", "[run]\nbuild_outputs = []\n");
    let run = repo.arbiter(&RUN_ONE);
    run.assert_code(0);
    let patch = std::fs::read_to_string(repo.run_dir().join("candidates/c01/patch.diff")).unwrap();
    assert!(patch.contains("__pycache__/calc.cpython-311.pyc"), "{patch}");

    repo.write(".arbiter/config.toml", "[run]\nbuild_outputs = [\"[oops\"]\n");
    let bad = repo.arbiter(&["run", "--task", "Fix add", "--runner", "command", "--command", "./agent.sh"]);
    bad.assert_code(2);
    assert!(bad.stderr.contains("build_outputs") && bad.stderr.contains("'[oops' is not a glob"), "{}", bad.stderr);
}

/// Database URLs as users get them wrong: `mysql://` was looked up in DNS and exited 3, a
/// `?password=` was printed back, a Postgres error ended with SQLite's "check the path", and
/// a refused connection waited 5 s for a pool to give up. Each is now said for what it is;
/// following the hint of the first (leave the variable unset) works.
#[test]
fn database_urls_get_errors_that_name_the_problem_and_never_the_password() {
    let repo = TestRepo::new();
    repo.write("README.md", "x\n");
    repo.commit_all("init");
    let with_url = |url: &str| {
        Run::from_output(repo.arbiter_cmd(&["plan", "list"]).env("ARBITER_DATABASE_URL", url).output().unwrap())
    };
    let other = with_url("mysql://root:hunter2-mysql@db.example/x");
    other.assert_code(2);
    assert!(
        other.stderr.contains("'mysql://' is not a database arbiter can use") && other.stderr.contains("SQLite"),
        "{}",
        other.stderr
    );
    assert!(!other.stderr.contains("hunter2"), "{}", other.stderr);
    // The hint: leave the variable unset, and the SQLite store of the repository answers.
    repo.arbiter(&["plan", "list"]).assert_code(0);

    let refused = with_url("postgres://app@127.0.0.1:1/x?sslmode=prefer&password=hunter2-query");
    refused.assert_code(3);
    assert!(!refused.stderr.contains("hunter2"), "{}", refused.stderr);
    assert!(
        refused.stderr.contains("postgres://app@127.0.0.1:1/x") && refused.stderr.contains("Connection refused"),
        "{}",
        refused.stderr
    );
    assert!(refused.stderr.contains("pg_isready") && !refused.stderr.contains("check the path"), "{}", refused.stderr);
}

/// Plan files that could never run were imported: unknown runner, backend and strategy
/// names, zero counts in the defaults, `budget_usd = nan` (read as "no limit"), a task id
/// that cannot be part of a branch name; a NUL byte reached Postgres and exited 3. Each is
/// refused with exit 2 and nothing written; following the hint (define the runner) works.
#[test]
fn plan_files_that_could_never_run_are_refused_at_import() {
    let repo = TestRepo::new();
    repo.write("README.md", "x\n");
    repo.commit_all("init");
    repo.arbiter(&["init"]).assert_code(0);
    let plan =
        |body: &str| format!("id = \"p1\"\nname = \"P\"\n{body}\n[[tasks]]\nid = \"a\"\ntitle = \"Write the thing\"\n");
    for (body, expected) in [
        ("budget_usd = nan", "budget_usd: nan is not a number a plan can use"),
        ("budget_usd = -inf", "budget_usd: -inf is not a number"),
        ("[defaults]\ncandidates = 0", "defaults: candidates is 0"),
        ("[defaults]\nmax_attempts = 0", "defaults: max_attempts is 0"),
        ("[defaults]\nstrategy = \"fastest\"", "'fastest' is not a strategy"),
        ("[defaults]\nrunners = [\"speedy\"]", "defaults: no runner named 'speedy'"),
        ("[defaults]\nbackend = \"gpt9\"", "defaults: no backend named 'gpt9'"),
    ] {
        repo.write("plan.toml", plan(body));
        let run = repo.arbiter(&["plan", "import", "plan.toml"]);
        run.assert_code(2);
        assert!(run.stderr.contains(expected), "{body}: {}", run.stderr);
    }
    repo.write("plan.toml", "id = \"p1\"\nname = \"P\"\n[[tasks]]\nid = \"a/.b\"\ntitle = \"t\"\n");
    let bad_id = repo.arbiter(&["plan", "import", "plan.toml"]);
    bad_id.assert_code(2);
    assert!(bad_id.stderr.contains("task id 'a/.b' is not a safe name"), "{}", bad_id.stderr);
    let listed = repo.arbiter(&["plan", "list"]);
    assert!(!listed.stdout.contains("p1"), "a refused plan was written: {}", listed.stdout);

    // The hint of the unknown runner: define it in .arbiter/config.toml.
    let config = std::fs::read_to_string(repo.arbiter_dir().join("config.toml")).unwrap();
    repo.write(".arbiter/config.toml", format!("{config}\n[runners.speedy]\nkind = \"command\"\ncommand = \"true\"\n"));
    repo.write("plan.toml", plan("[defaults]\nrunners = [\"speedy\"]"));
    repo.arbiter(&["plan", "import", "plan.toml"]).assert_code(0);

    // A NUL byte on Postgres: refused before the store, exit 2.
    let pg = PgDatabase::create();
    repo.write("nul.json", r#"{"id": "p\u0000x", "name": "P", "tasks": []}"#);
    let nul = Run::from_output(
        repo.arbiter_cmd(&["plan", "import", "nul.json"]).env("ARBITER_DATABASE_URL", &pg.url).output().unwrap(),
    );
    nul.assert_code(2);
    assert!(nul.stderr.contains("id holds a NUL byte"), "{}", nul.stderr);
}

/// Configuration that was quietly wrong: `config show` exited 0 over runner tables that
/// cannot work, a TOML error was flattened onto one line, a `[runners.command]` table
/// overrode `--command`, and `--candidates 100000` was accepted.
#[test]
fn configuration_errors_are_said_where_they_are_and_flags_win() {
    let repo = python_repo("set -e\nsed -i 's/return a - b/return a + b/' calc.py\n");
    repo.arbiter(&["init"]).assert_code(0);
    repo.write(".arbiter/config.toml", "[runners.fast]\nkind = \"command\"\ncommand = \"true\"\nmodel = \"gpt\"\n");
    let show = repo.arbiter(&["config", "show"]);
    show.assert_code(2);
    assert!(show.stderr.contains("[runners.fast] is a command runner but sets `model`"), "{}", show.stderr);

    repo.write(".arbiter/config.toml", "[run]\ncandidates = 2\ntimeout_seconds = \n");
    let show = repo.arbiter(&["config", "show"]);
    show.assert_code(2);
    assert!(show.stderr.contains("line 3, column 19\n"), "{}", show.stderr);
    assert!(show.stderr.contains("\n3 | timeout_seconds = \n"), "the line is not shown: {}", show.stderr);
    assert!(show.stderr.contains("^"), "no caret: {}", show.stderr);

    // A [runners.command] table with its own command: --command still wins.
    repo.write_agent("wrong.sh", "echo 'def add(a, b):\n    return 0' > calc.py\n");
    repo.commit_all("a wrong agent");
    repo.write(".arbiter/config.toml", "[runners.command]\nkind = \"command\"\ncommand = \"./wrong.sh\"\n");
    let run = repo.arbiter(&[
        "run",
        "--task",
        "Fix add",
        "--runner",
        "command",
        "--command",
        "./agent.sh",
        "--candidates",
        "1",
        "--verify",
        "python3 -m unittest -q",
    ]);
    run.assert_code(0);
    assert!(std::fs::read_to_string(repo.path().join("calc.py")).unwrap().contains("return a + b"));

    let many = repo.arbiter(&["run", "--task", "Fix add", "--command", "./agent.sh", "--candidates", "100000"]);
    many.assert_code(2);
    assert!(many.stderr.contains("at most 64 candidates"), "{}", many.stderr);
}

/// `arbiter apply` defects: `--commit --force` committed the user's unrelated staged files
/// with the winner, and a patch applied already was refused as one that does not apply.
#[test]
fn apply_commits_the_winner_only_and_knows_a_patch_it_applied() {
    let repo = python_repo(AGENT_FIX);
    let run = repo.arbiter(&[
        "run",
        "--task",
        "Fix add",
        "--command",
        "./agent.sh",
        "--candidates",
        "1",
        "--verify",
        VERIFY_PY,
        "--apply",
        "none",
    ]);
    run.assert_code(0);
    // The user's own work, staged, and unrelated to the run.
    repo.write("NOTES.md", "my notes\n");
    repo.git(&["add", "NOTES.md"]);
    let applied = repo.arbiter(&["apply", "latest", "--commit", "--force"]);
    applied.assert_code(0);
    let committed = repo.git(&["show", "--name-only", "--format=", "HEAD"]);
    assert_eq!(committed.trim(), "calc.py", "the commit holds more than the winner: {committed}");
    assert_eq!(repo.status(), vec!["A  NOTES.md".to_string()], "the user's staged file is no longer staged");

    // Again: the repository holds it already (committed), and says so.
    let again = repo.arbiter(&["apply", "latest"]);
    again.assert_code(0);
    assert!(again.stdout.contains("is applied already"), "{}", again.stdout);
    // Applied to the working tree only, then applied again: the same.
    repo.git(&["reset", "--hard", "HEAD~1"]);
    repo.arbiter(&["apply", "latest"]).assert_code(0);
    let twice = repo.arbiter(&["apply", "latest"]);
    twice.assert_code(0);
    assert!(twice.stdout.contains("is applied already"), "{}", twice.stdout);
    assert_eq!(repo.status(), vec![" M calc.py".to_string()]);
}

/// `runs resume` applied the winner onto a working tree the user had changed since the run
/// was interrupted. Now it finishes the run and leaves the tree alone, saying how to apply
/// later; following that (commit the change, `arbiter apply`) works.
#[test]
fn resume_does_not_apply_onto_a_tree_changed_meanwhile() {
    let scratch = tempfile::tempdir().unwrap();
    let marker = scratch.path().join("hold");
    let started = scratch.path().join("started");
    std::fs::write(&marker, "").unwrap();
    let repo = python_repo(&format!(
        "set -e\ntouch {started}\nwhile [ -e {marker} ]; do sleep 0.1; done\nsed -i 's/return a - b/return a + b/' calc.py\n",
        started = started.display(),
        marker = marker.display()
    ));
    repo.allow_writes(scratch.path());
    let mut child = repo
        .arbiter_cmd(&[
            "run",
            "--task",
            "Fix add",
            "--command",
            "./agent.sh",
            "--candidates",
            "1",
            "--verify",
            VERIFY_PY,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(wait_until(std::time::Duration::from_secs(60), || started.exists()), "the agent never started");
    child.kill().unwrap();
    let _ = child.wait();
    // Its process is gone: `runs list` says it was interrupted (not `running` forever)
    // and how to continue it.
    let listed = repo.arbiter(&["runs", "list"]);
    listed.assert_code(0);
    assert!(listed.stdout.contains("interrupted") && !listed.stdout.contains("running"), "{}", listed.stdout);
    assert!(listed.stdout.contains("`arbiter runs resume "), "{}", listed.stdout);
    let json = repo.arbiter(&["runs", "list", "--json"]);
    assert!(json.stdout.contains("\"status\": \"interrupted\""), "{}", json.stdout);
    let none = repo.arbiter(&["runs", "list", "--limit", "0"]);
    none.assert_code(2);
    assert!(none.stderr.contains("--limit 0 lists nothing"), "{}", none.stderr);
    std::fs::remove_file(&marker).unwrap();
    repo.write("README.md", "# calc, edited while the run was stopped\n");
    let resumed = repo.arbiter(&["runs", "resume", "latest"]);
    let said = format!("{}{}", resumed.stdout, resumed.stderr);
    assert!(said.contains("the working tree changed during the run") && said.contains("arbiter apply"), "{said}");
    assert!(
        std::fs::read_to_string(repo.path().join("calc.py")).unwrap().contains("return a - b"),
        "applied onto a changed tree"
    );
    // The hint: commit (or stash) the change, then apply.
    repo.commit_all("the edit");
    repo.arbiter(&["apply", "latest"]).assert_code(0);
    assert!(std::fs::read_to_string(repo.path().join("calc.py")).unwrap().contains("return a + b"));
}

/// `plan apply` (or `backend add`, which writes `.arbiter/config.toml`) before `arbiter init`
/// left `.arbiter/` out of git's exclude list: it showed up as untracked work, one
/// `git add -A` away from a commit.
#[test]
fn arbiter_s_directory_is_never_untracked_work_even_before_init() {
    for first in ["plan", "backend"] {
        let repo = TestRepo::new();
        repo.write("README.md", "x\n");
        repo.commit_all("init");
        if first == "plan" {
            repo.write("plan.json", r#"{"id": "p", "name": "P", "tasks": [{"id": "a", "title": "Write the thing"}]}"#);
            repo.git(&["add", "plan.json"]);
            repo.git(&["commit", "-qm", "plan"]);
            repo.arbiter(&["plan", "apply", "plan.json"]).assert_code(0);
        } else {
            let add = repo
                .arbiter_cmd(&["backend", "add", "b", "--provider", "openai", "--model", "m", "--api-key-stdin"])
                .stdin(Stdio::piped())
                .spawn()
                .and_then(|mut child| {
                    use std::io::Write;
                    child.stdin.take().expect("stdin").write_all(b"sk-before-init-0123456789")?;
                    child.wait_with_output()
                })
                .unwrap();
            Run::from_output(add).assert_code(0);
            assert!(repo.arbiter_dir().join("config.toml").exists());
        }
        assert!(repo.arbiter_dir().is_dir(), "{first}: no .arbiter/");
        assert_eq!(repo.status(), Vec::<String>::new(), "{first}: .arbiter/ is untracked work");
    }
}

/// The runner library printed warnings straight to stderr, garbling the live progress.
/// Libraries never print: they return values, emit events, or log through `tracing`, which
/// the CLI writes above its progress. (The sandbox's roles are processes of their own, whose
/// stderr is theirs.)
#[test]
fn library_crates_never_print() {
    let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found = Vec::new();
    for lib in [
        "arbiter-core",
        "arbiter-runner",
        "arbiter-store",
        "arbiter-llm",
        "arbiter-agents",
        "arbiter-server",
        "arbiter-slices",
    ] {
        found.extend(prints_in(&crates.join(lib).join("src"), &[]));
    }
    assert!(found.is_empty(), "library code prints (log with tracing, or return it):\n{}", found.join("\n"));
}

/// The CLI prints through its output layer only (`output.rs` owns stdout, `console.rs`
/// stderr above the live progress): a stray `println!` would garble the progress display,
/// bypass `--quiet`, or break `--json`'s one document.
#[test]
fn the_cli_prints_only_through_its_output_layer() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = prints_in(&src, &["output.rs", "console.rs"]);
    assert!(
        found.is_empty(),
        "CLI code prints around its output layer (use out!, note!, warning!):\n{}",
        found.join("\n")
    );
}

/// The lines of the Rust files under `dir` (but `except`) that print, test modules aside.
fn prints_in(dir: &std::path::Path, except: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if path.extension().is_none_or(|e| e != "rs") || except.contains(&name) {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            // Test modules close the files they are in.
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            for (n, line) in code.lines().enumerate() {
                if ["println!(", "eprintln!(", "print!(", "eprint!(", "dbg!("].iter().any(|m| line.contains(m)) {
                    found.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                }
            }
        }
    }
    found
}

/// Build output stays out of the patch but not out of the tree the gates run in. A hostile
/// candidate leaves a crafted `__pycache__/calc.*.pyc` — the fixed module, compiled against
/// the unchanged source's size and time — so Python would import the fix while its patch
/// changes only the README. Its gates run with the bytecode cache moved out of the tree:
/// they see the source it did not fix, and it fails them.
#[test]
fn bytecode_a_candidate_left_in_its_tree_is_never_what_its_gates_import() {
    let repo = python_repo(
        r#"set -e
python3 - <<'PY'
import os, py_compile, shutil
st = os.stat("calc.py")
src = open("calc.py").read()
open("calc.py", "w").write(src.replace("return a - b", "return a + b"))
os.utime("calc.py", (st.st_atime, st.st_mtime))
py_compile.compile("calc.py", doraise=True)
open("calc.py", "w").write(src)
os.utime("calc.py", (st.st_atime, st.st_mtime))
PY
echo "calc, now documented" >> README.md
"#,
    );
    repo.arbiter(&["init"]).assert_code(0);
    let run = repo.arbiter(&[
        "run",
        "--task",
        "Fix add",
        "--command",
        "./agent.sh",
        "--candidates",
        "1",
        "--verify",
        VERIFY_PY,
        "--apply",
        "none",
    ]);
    let evidence = read_json(&repo.run_dir().join("candidates/c01/evidence.json"));
    assert_eq!(evidence["gates"][0]["passed"], json!(false), "the crafted bytecode passed the gate: {evidence:#}");
    assert_eq!(read_json(&repo.run_dir().join("selection.json"))["winner"], json!(null), "{}", run.stdout);
}

/// `--quiet` silences what is for people watching (notes, progress) and nothing else: the
/// result still goes to stdout, and errors to stderr.
#[test]
fn quiet_silences_notes_and_progress_but_not_results_or_errors() {
    let repo = python_repo("sed -i 's/return a - b/return a + b/' calc.py\n");
    repo.arbiter(&["init"]).assert_code(0);
    let args = ["run", "--task", "Fix add", "--command", "./agent.sh", "--candidates", "1", "--apply", "none"];
    let loud = repo.arbiter(&args);
    loud.assert_code(0);
    assert!(loud.stderr.contains("no verify command given"), "{}", loud.stderr);
    assert!(loud.stderr.contains("c01"), "progress lines name the candidate: {}", loud.stderr);
    let mut quiet_args = vec!["--quiet"];
    quiet_args.extend(args);
    let quiet = repo.arbiter(&quiet_args);
    quiet.assert_code(0);
    assert_eq!(quiet.stderr, "", "--quiet printed notes or progress");
    assert!(quiet.stdout.contains("c01 won"), "the result is still printed: {}", quiet.stdout);
    let missing = repo.arbiter(&["-q", "runs", "show", "no-such-run"]);
    assert_ne!(missing.code, Some(0));
    assert!(missing.stderr.contains("arbiter: error:"), "errors still print: {}", missing.stderr);
}

/// A command agent reports no usage: its run said "cost unknown", the plan said "$0.00"
/// for the same task. The plan now says what it does not know, as the run does.
#[test]
fn a_plan_task_whose_calls_have_no_cost_reads_unknown_as_its_run_does() {
    let repo = initialized_repo("# plan\n", "echo done > done.txt\n");
    let plan = json!({"id": "p", "name": "Plan p", "defaults": {"verify": ["true"], "candidates": 2,
        "runners": "command", "command": "./agent.sh"},
        "tasks": [{"id": "A", "title": "Write done", "description": "Write done.txt.", "acceptance_criteria": ["done.txt"]}]});
    repo.write("plan.json", plan.to_string());
    repo.arbiter(&["plan", "import", "plan.json"]).assert_code(0);
    let ran = repo.arbiter(&["plan", "run", "p"]);
    ran.assert_code(0);
    assert!(ran.stdout.contains("Spent $0.00, plus 2 call(s) of unknown cost"), "{}", ran.stdout);

    let run_id = repo
        .arbiter(&["runs", "list"])
        .stdout
        .lines()
        .nth(1)
        .and_then(|l| l.split_whitespace().next())
        .map(str::to_string);
    let shown = repo.arbiter(&["runs", "show", &run_id.expect("a run")]);
    assert!(shown.stdout.contains("Cost:     unknown (2 call(s) without usage or price)"), "{}", shown.stdout);
    let status = repo.arbiter(&["plan", "status", "p"]);
    status.assert_code(0);
    let row = status.stdout.lines().find(|l| l.starts_with("A ")).expect("task A's row").to_string();
    assert!(row.contains("unknown") && !row.contains("$0.00"), "{row}");
    assert!(
        status.stdout.contains("No budget limit: $0.00 spent, plus 2 call(s) of unknown cost"),
        "{}",
        status.stdout
    );
    assert!(status.stdout.contains("Cost unknown for 2 call(s) of 1 task(s)"), "{}", status.stdout);
    let json_status = assert_schema("plan-status", &repo.arbiter(&["plan", "status", "p", "--json"]).stdout);
    assert_eq!(json_status["tasks"][0]["uncosted_calls"], 2, "{json_status:#}");
}

/// A result that cannot be written (a full disk) is a failure the reader must see: exit 3
/// and why, not 0 with nothing written. A reader that stops reading is not (exit 141).
#[test]
fn a_result_that_cannot_be_written_is_not_a_success() {
    let repo = initialized_repo("# full\n", "true\n");
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").expect("/dev/full");
    let out = repo.arbiter_cmd(&["runs", "list", "--json"]).stdout(full).output().expect("arbiter runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("could not be written to standard output"), "{stderr}");
}

/// A plan file is not trusted: its titles and its Whilly test steps are printed with their
/// control characters escaped, so they cannot colour, clear or forge the user's terminal.
#[test]
fn a_hostile_plan_file_cannot_drive_the_terminal() {
    let repo = initialized_repo("# hostile\n", "true\n");
    let whilly = json!({"project": "Hostile", "plan_id": "hostile", "tasks": [{
        "id": "T1", "priority": "high", "status": "pending",
        "description": "Title \u{1b}[31mred\u{1b}[0m and\nPlan forged",
        "acceptance_criteria": ["it holds"],
        "test_steps": ["Confirm \u{1b}[2J it reads well"]}]});
    repo.write("tasks.json", whilly.to_string());
    let imported = repo.arbiter(&["plan", "import", "tasks.json"]);
    imported.assert_code(0);
    let shown = repo.arbiter(&["plan", "show", "hostile"]);
    shown.assert_code(0);
    for out in [&imported.stdout, &shown.stdout] {
        assert!(!out.contains('\u{1b}') && !out.contains("\nPlan forged"), "{out}");
    }
    assert!(imported.stdout.contains("\\u{1b}[2J"), "{}", imported.stdout);
    assert!(shown.stdout.contains("\\u{1b}[31mred"), "{}", shown.stdout);
}
