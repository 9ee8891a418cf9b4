//! What users read, as they read it: the human output of the commands, snapshotted (insta).
//! What varies from run to run — the repository's path, run ids, commit ids, durations — is
//! replaced by a placeholder first; everything else must stay exactly as it is unless the
//! change is meant (`cargo insta review`, or INSTA_UPDATE=always, then read the diff).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use common::*;

/// `text` with this repository's varying parts replaced: its path, the run ids under
/// `.arbiter/runs`, its commit ids (full and short), and durations.
fn normalized(repo: &TestRepo, text: &str) -> String {
    let mut out = text.replace(&repo.path().display().to_string(), "[REPO]");
    for dir in repo.run_dirs() {
        if let Some(id) = dir.file_name().and_then(|n| n.to_str()) {
            out = out.replace(id, "[RUN]");
        }
    }
    for commit in repo.git(&["log", "--all", "--format=%H"]).lines() {
        out = out.replace(commit, "[COMMIT]");
        for len in [12, 10, 8, 7] {
            out = out.replace(&commit[..len], "[COMMIT]");
        }
    }
    // Durations: a number with a unit (`1.3s`, `975ms`, `2m05s`) becomes `[DUR]`.
    out.split_inclusive(['\n', ' ', '(', ')'])
        .map(|word| {
            let core = word.trim_end_matches(['\n', ' ', '(', ')', ',', ';']);
            let tail = &word[core.len()..];
            let is_duration = !core.is_empty()
                && core.chars().next().is_some_and(|c| c.is_ascii_digit())
                && (core.ends_with("ms") || core.ends_with('s'))
                && core.trim_end_matches(['m', 's']).chars().all(|c| c.is_ascii_digit() || c == '.' || c == 'm');
            if is_duration { format!("[DUR]{tail}") } else { word.to_string() }
        })
        .collect::<String>()
        // A duration's width varies (`975ms`, `1.2s`), and so does the padding after it.
        .split("[DUR]")
        .enumerate()
        .map(|(i, part)| {
            let rest = part.trim_start_matches(' ');
            match i {
                0 => part.to_string(),
                _ if rest.starts_with('\n') || rest.is_empty() => format!("[DUR]{rest}"),
                _ => format!("[DUR] {rest}"),
            }
        })
        .collect()
}

const WHILLY: &str = r#"{"project": "Snapshot Demo", "plan_id": "snap", "tasks": [
  {"id": "S-1", "priority": "high", "status": "pending", "description": "Write one.txt holding the word one",
   "key_files": ["one.txt"], "acceptance_criteria": ["one.txt holds one"],
   "test_steps": ["test -s one.txt", "Open one.txt and confirm it reads well"]},
  {"id": "S-2", "priority": "low", "status": "pending", "description": "Write two.txt once one.txt exists",
   "dependencies": ["S-1"], "acceptance_criteria": ["two.txt holds two"], "test_steps": ["test -s two.txt"]},
  {"id": "S-3", "priority": "medium", "status": "done", "description": "Set the repository up"}
]}"#;

#[test]
fn plan_commands_read_as_they_did() {
    let repo = TestRepo::new();
    repo.write("README.md", "# snapshots\n");
    repo.write("tasks.json", WHILLY);
    repo.commit_all("init");
    repo.arbiter(&["init"]).assert_code(0);
    let import = repo.arbiter(&["plan", "import", "tasks.json"]);
    import.assert_code(0);
    insta::assert_snapshot!("plan_import_whilly", normalized(&repo, &import.stdout));
    let show = repo.arbiter(&["plan", "show", "snap"]);
    show.assert_code(0);
    insta::assert_snapshot!("plan_show", normalized(&repo, &show.stdout));
    let status = repo.arbiter(&["plan", "status", "snap"]);
    status.assert_code(0);
    insta::assert_snapshot!("plan_status", normalized(&repo, &status.stdout));
    repo.write(
        "gate.json",
        WHILLY.replace("\"snap\"", "\"snap-gate\"").replace("Write two.txt once one.txt exists", "Write two"),
    );
    let strict = repo.arbiter(&["plan", "apply", "gate.json", "--strict", "--gate", "whilly"]);
    strict.assert_code(0);
    insta::assert_snapshot!("plan_apply_whilly_gate", normalized(&repo, &strict.stdout));
}

#[test]
fn a_run_and_the_run_list_read_as_they_did() {
    let repo = python_repo(AGENT_FIX);
    repo.arbiter(&["init"]).assert_code(0);
    let run = repo.arbiter(&[
        "run",
        "--task",
        "Fix add",
        "--command",
        "./agent.sh",
        "--candidates",
        "2",
        "--verify",
        VERIFY_PY,
        "--apply",
        "none",
    ]);
    run.assert_code(0);
    insta::assert_snapshot!("run_stdout", normalized(&repo, &run.stdout));
    let list = repo.arbiter(&["runs", "list"]);
    list.assert_code(0);
    insta::assert_snapshot!("runs_list", normalized(&repo, &list.stdout));
    let show = repo.arbiter(&["runs", "show", "latest"]);
    show.assert_code(0);
    insta::assert_snapshot!("runs_show", normalized(&repo, &show.stdout));
}

#[test]
fn config_show_reads_as_it_did() {
    let repo = TestRepo::new();
    repo.write("README.md", "x\n");
    repo.commit_all("init");
    repo.arbiter(&["init"]).assert_code(0);
    let show = repo.arbiter(&["config", "show", "--command", "./agent.sh"]);
    show.assert_code(0);
    insta::assert_snapshot!("config_show", normalized(&repo, &show.stdout));
}

/// `text` with RFC 3339 times (`2026-12-02T04:21:07.932Z`) as `[TIME]` and `worker` as
/// `[WORKER]`, after [`normalized`].
fn normalized_plan(repo: &TestRepo, text: &str, worker: &str) -> String {
    normalized(repo, &text.replace(worker, "[WORKER]"))
        .split_inclusive([' ', '\n'])
        .map(|word| {
            let core = word.trim_end_matches([' ', '\n']);
            let b = core.as_bytes();
            let is_time = b.len() >= 20 && b[4] == b'-' && b[10] == b'T' && core.ends_with('Z');
            if is_time { format!("[TIME]{}", &word[core.len()..]) } else { word.to_string() }
        })
        .collect()
}

#[test]
fn a_plan_run_its_events_and_the_plan_list_read_as_they_did() {
    let repo = initialized_repo("# snapshots\n", TASK_FILE_AGENT);
    let plan = serde_json::json!({"id": "p", "name": "Plan p", "defaults": {"verify": ["true"], "candidates": 2,
    "runners": "command", "command": "./agent.sh"},
    "tasks": [
        {"id": "A", "title": "Write A", "description": "Write A.txt.", "acceptance_criteria": ["A.txt exists"]},
        {"id": "B", "title": "Write B", "description": "Write B.txt.", "dependencies": ["A"], "acceptance_criteria": ["B.txt exists"]}
    ]});
    repo.write("plan.json", plan.to_string());
    repo.arbiter(&["plan", "import", "plan.json"]).assert_code(0);
    let run = repo.arbiter(&["plan", "run", "p"]);
    run.assert_code(0);
    let status: serde_json::Value =
        serde_json::from_str(&repo.arbiter(&["plan", "status", "p", "--json"]).stdout).unwrap();
    let worker = status["attempts"][0]["worker"].as_str().expect("a worker").to_string();
    insta::assert_snapshot!("plan_run_stdout", normalized_plan(&repo, &run.stdout, &worker));
    insta::assert_snapshot!("plan_run_stderr", normalized_plan(&repo, &run.stderr, &worker));
    let events = repo.arbiter(&["plan", "events", "p"]);
    events.assert_code(0);
    insta::assert_snapshot!("plan_events", normalized_plan(&repo, &events.stdout, &worker));
    let list = repo.arbiter(&["plan", "list"]);
    list.assert_code(0);
    insta::assert_snapshot!("plan_list", normalized(&repo, &list.stdout));
}
