//! Plans end to end: the real binary, real repositories, command-runner agents making real
//! edits, the plan queue in SQLite (and once in Postgres), and real signals.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::*;
use serde_json::{Value, json};

/// A repository whose agent (`agent.sh LOG`) acts on the task id in its prompt, as the
/// `case` arms in `body` say, after logging `<task> saw: <files>` to LOG (in an ignored
/// directory the sandbox lets candidates write: `[sandbox] writable`).
fn plan_repo(body: &str) -> (TestRepo, PathBuf) {
    let repo = TestRepo::new();
    repo.write("README.md", "# plans\n");
    repo.write(".gitignore", "__pycache__/\nagent-log/\n");
    repo.write_agent(
        "agent.sh",
        &format!(
            r#"set -e
log="$1"
task=$(sed -n 's/^(Task \([^ ]*\) of plan.*/\1/p' "$ARBITER_PROMPT_FILE")
echo "$task saw: $(ls *.txt 2>/dev/null | tr '\n' ' ')" >> "$log"
case "$task" in
{body}
esac
"#
        ),
    );
    repo.commit_all("agent");
    repo.arbiter(&["init"]).assert_code(0);
    let log_dir = repo.path().join("agent-log");
    repo.allow_writes(&log_dir);
    (repo, log_dir.join("agent.log"))
}

fn write_plan(repo: &TestRepo, plan: &Value) -> String {
    let name = "plan.json";
    repo.write(name, serde_json::to_string_pretty(plan).expect("plan JSON"));
    name.to_string()
}

fn plan_of(id: &str, log: &Path, tasks: Value) -> Value {
    json!({
        "id": id,
        "name": format!("plan {id}"),
        "defaults": {
            "candidates": 1,
            "runners": "command",
            "command": format!("./agent.sh {}", log.display()),
            "retry_backoff_seconds": 0,
            "max_attempts": 2,
        },
        "tasks": tasks,
    })
}

fn task(id: &str, deps: &[&str], verify: &str) -> Value {
    json!({
        "id": id,
        "title": format!("Task {id}"),
        "description": format!("Do what task {id} asks in this repository."),
        "acceptance_criteria": [format!("{id} is done")],
        "dependencies": deps,
        "verify": [verify],
    })
}

fn log_lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log).unwrap_or_default().lines().map(str::to_string).collect()
}

fn status_json(repo: &TestRepo, id: &str, extra: &[&str]) -> Value {
    let mut args = vec!["plan", "status", id, "--json"];
    args.extend_from_slice(extra);
    let run = repo.arbiter(&args);
    run.assert_code(0);
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", run.stdout))
}

fn events(repo: &TestRepo, id: &str, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["plan", "events", id, "--json"];
    args.extend_from_slice(extra);
    let run = repo.arbiter(&args);
    run.assert_code(0);
    let doc = assert_schema("plan-events", &run.stdout);
    serde_json::from_value(doc["events"].clone()).unwrap_or_else(|e| panic!("no events ({e}): {}", run.stdout))
}

fn kinds_for<'a>(events: &'a [Value], task: &str) -> Vec<&'a str> {
    events.iter().filter(|e| e["task_id"] == task).filter_map(|e| e["kind"].as_str()).collect()
}

/// `Arbiter-Task` trailers on the integration branch, oldest first.
fn integrated_tasks(repo: &TestRepo, branch: &str) -> Vec<String> {
    repo.git(&["log", "--reverse", "--format=%(trailers:key=Arbiter-Task,valueonly)", branch])
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

const DIAMOND: &str = r#"  A) echo a > a.txt ;;
  B) test -f a.txt; echo b > b.txt ;;
  C) test -f a.txt; echo c > c.txt ;;
  D) test -f a.txt; test -f b.txt; test -f c.txt; echo d > d.txt ;;"#;

fn diamond(log: &Path) -> Value {
    plan_of(
        "diamond",
        log,
        json!([
            task("D", &["B", "C"], "test -f d.txt"),
            task("B", &["A"], "test -f b.txt"),
            task("C", &["A"], "test -f c.txt"),
            task("A", &[], "test -f a.txt"),
        ]),
    )
}

fn assert_diamond_ran(repo: &TestRepo, log: &Path, extra: &[&str]) {
    // Each task ran once, after its dependencies, on a tree holding their changes.
    let lines = log_lines(log);
    assert_eq!(lines.len(), 4, "{lines:#?}");
    assert_eq!(lines[0], "A saw: ", "{lines:#?}");
    let b = lines.iter().find(|l| l.starts_with("B ")).expect("B ran");
    let c = lines.iter().find(|l| l.starts_with("C ")).expect("C ran");
    assert!(b.contains("a.txt") && c.contains("a.txt"), "{lines:#?}");
    assert_eq!(lines[3], "D saw: a.txt b.txt c.txt ", "{lines:#?}");
    let status = status_json(repo, "diamond", extra);
    for t in status["tasks"].as_array().expect("tasks") {
        assert_eq!(t["status"], "done", "{t:#}");
        assert_eq!(t["attempts"], 1, "{t:#}");
    }
    let mut integrated = integrated_tasks(repo, "arbiter/diamond");
    assert_eq!(integrated.first().map(String::as_str), Some("A"));
    assert_eq!(integrated.last().map(String::as_str), Some("D"));
    integrated.sort();
    assert_eq!(integrated, vec!["A", "B", "C", "D"], "each winner committed once");
    let tree = repo.git(&["ls-tree", "--name-only", "arbiter/diamond"]);
    for f in ["a.txt", "b.txt", "c.txt", "d.txt"] {
        assert!(tree.lines().any(|l| l == f), "{f} is on the integration branch: {tree}");
    }
    // The events show D claimed only after B and C were done.
    let events = events(repo, "diamond", extra);
    let seq = |task: &str, kind: &str| {
        events
            .iter()
            .find(|e| e["task_id"] == task && e["kind"] == kind)
            .and_then(|e| e["id"].as_i64())
            .unwrap_or_else(|| panic!("no {kind} event for {task}"))
    };
    assert!(seq("D", "task_claimed") > seq("B", "task_done"));
    assert!(seq("D", "task_claimed") > seq("C", "task_done"));
    assert!(seq("B", "task_claimed") > seq("A", "task_done"));
}

#[test]
fn a_diamond_runs_in_dependency_order_on_its_dependencies_changes() {
    let (repo, log) = plan_repo(DIAMOND);
    let file = write_plan(&repo, &diamond(&log));
    repo.commit_all("plan");
    repo.arbiter(&["plan", "import", &file]).assert_code(0);
    let show = repo.arbiter(&["plan", "show", "diamond"]);
    show.assert_code(0);
    assert!(show.stdout.contains("[READY]") && show.stdout.contains("waiting on A (ready)"), "{}", show.stdout);
    let run = repo.arbiter(&["plan", "run", "diamond", "--workers", "3"]);
    run.assert_code(0);
    assert!(run.stdout.contains("4 of 4 task(s) done"), "{}", run.stdout);
    assert_diamond_ran(&repo, &log, &[]);
    // The user's branch and working tree are untouched.
    assert_eq!(repo.git(&["rev-parse", "--abbrev-ref", "HEAD"]).trim(), "main");
    assert!(!repo.path().join("a.txt").exists());
}

#[test]
fn the_same_plan_runs_on_postgres() {
    let pg = PgDatabase::create();
    let url = pg.url.clone();
    let (repo, log) = plan_repo(DIAMOND);
    let file = write_plan(&repo, &diamond(&log));
    repo.commit_all("plan");
    let db = ["--database-url", url.as_str()];
    let mut import = vec!["plan", "import", &file];
    import.extend_from_slice(&db);
    repo.arbiter(&import).assert_code(0);
    let mut run = vec!["plan", "run", "diamond", "--workers", "2"];
    run.extend_from_slice(&db);
    repo.arbiter(&run).assert_code(0);
    assert_diamond_ran(&repo, &log, &db);
    // Nothing went to the local SQLite queue.
    let local = repo.arbiter(&["plan", "list"]);
    assert!(local.stdout.contains("No plans yet"), "{}", local.stdout);
}

#[test]
fn a_failed_task_leaves_its_dependents_blocked_and_the_run_exits_1() {
    let (repo, log) = plan_repo("  A) echo a > a.txt ;;\n  B) echo 'I give up' ;;\n  C) echo c > c.txt ;;");
    let plan = plan_of(
        "fails",
        &log,
        json!([
            task("A", &[], "test -f a.txt"),
            task("B", &["A"], "test -f b.txt"),
            task("C", &["B"], "test -f c.txt")
        ]),
    );
    let file = write_plan(&repo, &plan);
    repo.arbiter(&["plan", "import", &file]).assert_code(0);
    let run = repo.arbiter(&["plan", "run", "fails"]);
    run.assert_code(1);
    assert!(run.stdout.contains("blocked by B (failed)"), "{}", run.stdout);
    let status = status_json(&repo, "fails", &[]);
    let by_id = |id: &str| {
        status["tasks"].as_array().and_then(|t| t.iter().find(|t| t["id"] == id)).cloned().unwrap_or_default()
    };
    assert_eq!(by_id("A")["status"], "done");
    assert_eq!((by_id("B")["status"].clone(), by_id("B")["attempts"].clone()), (json!("failed"), json!(2)));
    assert!(by_id("B")["reason"].as_str().unwrap_or("").contains("no candidate is acceptable"), "{status:#}");
    assert_eq!(by_id("C")["status"], "blocked");
    assert_eq!(log_lines(&log).iter().filter(|l| l.starts_with("C ")).count(), 0, "C never ran");
    // A retry gives B new attempts (it fails again here, but it ran again).
    repo.arbiter(&["plan", "retry", "fails", "B"]).assert_code(0);
    repo.arbiter(&["plan", "run", "fails"]).assert_code(1);
    assert_eq!(log_lines(&log).iter().filter(|l| l.starts_with("B ")).count(), 4);
}

#[test]
fn a_winner_that_conflicts_with_the_branch_is_retried_from_the_new_tip() {
    // A and B edit the same line at the same time; A commits first, so B's first winner no
    // longer applies and B runs again on top of A.
    let (repo, log) = plan_repo(
        "  A) sleep 0.2; sed -i 's/^value = .*/value = A/' value.txt ;;\n  B) sleep 1; sed -i 's/^value = .*/value = B/' value.txt ;;",
    );
    repo.write("value.txt", "value = 0\n");
    repo.commit_all("value");
    let plan = plan_of(
        "conflict",
        &log,
        json!([task("A", &[], "grep -q A value.txt"), task("B", &[], "grep -q B value.txt")]),
    );
    let file = write_plan(&repo, &plan);
    repo.arbiter(&["plan", "import", &file]).assert_code(0);
    let run = repo.arbiter(&["plan", "run", "conflict", "--workers", "2"]);
    run.assert_code(0);
    assert!(run.stderr.contains("does not apply to the integration branch"), "{}", run.stderr);
    let status = status_json(&repo, "conflict", &[]);
    let b = status["tasks"].as_array().and_then(|t| t.iter().find(|t| t["id"] == "B")).cloned().unwrap_or_default();
    assert_eq!(b["attempts"], 2, "{status:#}");
    assert_eq!(repo.git(&["show", "arbiter/conflict:value.txt"]), "value = B\n");
    assert_eq!(integrated_tasks(&repo, "arbiter/conflict"), vec!["A", "B"]);
}

#[test]
fn a_killed_plan_run_continues_where_it_stopped_and_does_no_task_twice() {
    let scratch = tempfile::tempdir().expect("temp dir");
    let slow = scratch.path().join("slow");
    std::fs::write(&slow, "").expect("marker");
    let (repo, log) = plan_repo(&format!(
        "  T1) echo one > one.txt ;;\n  T2) echo {HOST_PID} > \"$(dirname \"$log\")/agent.pid\"; if [ -e {slow} ]; then sleep 120; fi; echo two > two.txt ;;\n  T3) echo three > three.txt ;;",
        slow = slow.display()
    ));
    let pid_file = log.with_file_name("agent.pid");
    let plan = plan_of(
        "chain",
        &log,
        json!([
            task("T1", &[], "test -f one.txt"),
            task("T2", &["T1"], "test -f two.txt"),
            task("T3", &["T2"], "test -f three.txt")
        ]),
    );
    let file = write_plan(&repo, &plan);
    repo.arbiter(&["plan", "import", &file]).assert_code(0);
    let mut child = repo
        .arbiter_cmd(&["plan", "run", "chain"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start plan run");
    assert!(
        wait_until(Duration::from_secs(60), || log_lines(&log).iter().any(|l| l.starts_with("T2 "))
            && pid_file.exists()),
        "T2 never started: {:?}",
        log_lines(&log)
    );
    child.kill().expect("SIGKILL the plan run");
    let _ = child.wait();
    let orphan = read_pid(&pid_file);
    std::fs::remove_file(&slow).expect("make T2 fast");

    let again = repo.arbiter(&["plan", "run", "chain"]);
    again.assert_code(0);
    assert!(again.stdout.contains("3 of 3 task(s) done"), "{}", again.stdout);
    assert!(wait_pid_gone(orphan), "the killed run's agent {orphan} was left running");
    let lines = log_lines(&log);
    assert_eq!(lines.iter().filter(|l| l.starts_with("T1 ")).count(), 1, "T1 ran once: {lines:#?}");
    assert_eq!(lines.iter().filter(|l| l.starts_with("T3 ")).count(), 1, "{lines:#?}");
    assert_eq!(integrated_tasks(&repo, "arbiter/chain"), vec!["T1", "T2", "T3"], "no task is done twice");
    let events = events(&repo, "chain", &[]);
    assert_eq!(kinds_for(&events, "T1").iter().filter(|k| **k == "task_done").count(), 1);
    assert!(kinds_for(&events, "T2").contains(&"task_released"), "{:#?}", kinds_for(&events, "T2"));
    let status = status_json(&repo, "chain", &[]);
    let t2 = status["tasks"].as_array().and_then(|t| t.iter().find(|t| t["id"] == "T2")).cloned().unwrap_or_default();
    assert_eq!(t2["attempts"], 1, "the killed attempt does not count: {t2:#}");
}

/// The first claims of a new plan come at once (a control plane's workers all start on it):
/// each finds the integration branch missing, or just created by another, from the same
/// read of the plan. Every one gets the branch; none is refused as "exists and arbiter did not
/// create it" (what 100 workers starting together on a control plane once hit).
#[tokio::test(flavor = "multi_thread")]
async fn claimers_starting_together_on_a_new_plan_all_get_its_branch() {
    use arbiter_core::time::Timestamp;
    use arbiter_runner::git::Git;
    use arbiter_runner::plan_branch;
    use arbiter_store::plans::PlanAdmin;
    let (repo, log) = plan_repo("  A) echo a > a.txt ;;");
    let plan = plan_of("together", &log, json!([task("A", &[], "test -f a.txt")]));
    let file = write_plan(&repo, &plan);
    repo.arbiter(&["plan", "import", &file]).assert_code(0);
    let store = std::sync::Arc::new(
        arbiter_store::sqlite::SqliteStore::open(&repo.arbiter_dir().join("arbiter.db")).await.expect("store"),
    );
    let now = Timestamp(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_micros() as i64,
    );
    // One read of the plan, before any branch: what every claimer saw.
    let seen = store.plan("together").await.expect("read").expect("the plan").plan;
    assert!(seen.branch_record().is_none());
    let mut claimers = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let (store, seen, git) = (store.clone(), seen.clone(), Git::new(repo.path()));
        claimers.spawn(async move { plan_branch::ensure_for_run(&git, &*store, &seen, now).await.map(|r| r.base) });
    }
    let mut bases = std::collections::BTreeSet::new();
    while let Some(done) = claimers.join_next().await {
        bases.insert(done.expect("joined").unwrap_or_else(|e| panic!("a claimer was refused the branch: {e}")));
    }
    assert_eq!(bases.len(), 1, "one branch, one base: {bases:?}");
    assert_eq!(repo.git(&["rev-parse", "arbiter/together"]).trim(), bases.first().unwrap().as_str());
    // The interleaving that refused: a claimer whose look at the repository comes after
    // another created the branch, with its read of the plan from before.
    let late = plan_branch::ensure_for_run(&Git::new(repo.path()), &*store, &seen, now).await;
    assert_eq!(
        late.map(|r| r.base).unwrap_or_else(|e| panic!("the late claimer was refused: {e}")),
        *bases.first().unwrap()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_winner_committed_before_its_worker_died_is_not_done_twice() {
    use arbiter_core::time::Timestamp;
    use arbiter_runner::git::Git;
    use arbiter_runner::{integration, plan_branch};
    use arbiter_store::plans::{ClaimOutcome, PlanAdmin, PlanWork};
    let (repo, log) = plan_repo("  A) echo a > a.txt ;;\n  B) echo b > b.txt ;;");
    let plan = plan_of("recover", &log, json!([task("A", &[], "test -f a.txt"), task("B", &["A"], "test -f b.txt")]));
    let file = write_plan(&repo, &plan);
    repo.arbiter(&["plan", "import", &file]).assert_code(0);
    // A worker claimed A, committed its winner the way every worker does, and died before
    // reporting.
    let mut gone = std::process::Command::new("true").spawn().expect("spawn true");
    let dead_pid = gone.id();
    gone.wait().expect("reap");
    let host = nix::unistd::gethostname().expect("hostname").to_string_lossy().into_owned();
    let store = arbiter_store::sqlite::SqliteStore::open(&repo.arbiter_dir().join("arbiter.db")).await.expect("store");
    let now = Timestamp(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_micros() as i64,
    );
    let worker = format!("local:{host}:{dead_pid}:1");
    let claim = store.claim("recover", &worker, Duration::from_secs(3600), now).await.expect("claim");
    assert!(matches!(claim, ClaimOutcome::Claimed(_)));
    let git = Git::new(repo.path());
    let view = store.plan("recover").await.expect("read").expect("the plan");
    let owned = plan_branch::ensure_for_run(&git, &store, &view.plan, now).await.expect("the plan's branch");
    repo.write("a.txt", "a\n");
    repo.git(&["add", "a.txt"]);
    let patch = repo.path().join(".arbiter").join("a.patch");
    std::fs::write(&patch, repo.git(&["diff", "--cached", "--binary"])).expect("patch");
    repo.git(&["rm", "-q", "--cached", "a.txt"]);
    std::fs::remove_file(repo.path().join("a.txt")).expect("clean");
    let message = integration::message("Task A", "recover", "A", "20261201T000000Z-000000", "c01");
    let to = integration::Destination { plan: "recover", task: "A", branch: "arbiter/recover" };
    let limits = arbiter_core::limits::CandidateLimits::default();
    let checked = integration::check_at_tip(&git, to.branch, &patch, &limits).await.expect("check A");
    let a = integration::commit_onto(&git, &to, &checked, &message).await.expect("commit A").commit;
    assert_eq!(
        integration::find_task_commit(&git, "arbiter/recover", &owned.base, "recover", "A").await.unwrap(),
        Some(a.clone())
    );
    // Someone adds a commit whose message claims to be B's: text proves nothing.
    let tree = repo.git(&["rev-parse", "arbiter/recover^{tree}"]).trim().to_string();
    let forged = repo
        .git(&[
            "commit-tree",
            &tree,
            "-p",
            &a,
            "-m",
            "Task B\n\nArbiter-Plan: recover\nArbiter-Task: B\nArbiter-Run: 20261201T000000Z-000000",
        ])
        .trim()
        .to_string();
    repo.git(&["update-ref", "refs/heads/arbiter/recover", &forged, &a]);

    let run = repo.arbiter(&["plan", "run", "recover"]);
    run.assert_code(0);
    assert!(run.stderr.contains("A: its winner was already committed"), "{}", run.stderr);
    let lines = log_lines(&log);
    assert_eq!(
        lines,
        vec!["B saw: a.txt ".to_string()],
        "A was not run again; B ran (on A's work) despite the forged commit"
    );
    let status = status_json(&repo, "recover", &[]);
    assert_eq!(status["tasks"][0]["commit"], json!(a));
    let b_commit = status["tasks"][1]["commit"].as_str().unwrap_or_default().to_string();
    assert!(!b_commit.is_empty() && b_commit != forged, "{status:#}");
    assert_eq!(repo.git(&["rev-parse", &integration::task_ref("recover", "B")]).trim(), b_commit);
}

/// A task titled like a trailer does not make another task count as done.
#[test]
fn a_title_that_forges_a_trailer_does_not_mark_another_task_done() {
    let (repo, log) = plan_repo("  T1) echo one > one.txt ;;\n  T2) echo two > two.txt ;;");
    let mut t1 = task("T1", &[], "test -f one.txt");
    t1["title"] = json!("Arbiter-Task: T2");
    let file = write_plan(&repo, &plan_of("forged", &log, json!([t1, task("T2", &["T1"], "test -f two.txt")])));
    repo.arbiter(&["plan", "import", &file]).assert_code(0);
    let run = repo.arbiter(&["plan", "run", "forged"]);
    run.assert_code(0);
    assert!(!run.stderr.contains("already committed"), "{}", run.stderr);
    let lines = log_lines(&log);
    assert_eq!(lines, vec!["T1 saw: ".to_string(), "T2 saw: one.txt ".to_string()], "T2's agent ran");
    let status = status_json(&repo, "forged", &[]);
    let (c1, c2) = (status["tasks"][0]["commit"].clone(), status["tasks"][1]["commit"].clone());
    assert!(c1.is_string() && c2.is_string() && c1 != c2, "{status:#}");
    assert_eq!(status["tasks"][1]["attempts"], 1);
    assert_eq!(repo.git(&["show", "arbiter/forged:two.txt"]), "two\n");
    assert_eq!(repo.git(&["log", "-1", "--format=%s", "arbiter/forged~1"]).trim(), "Arbiter-Task: T2");
}

/// Where a test's plans are stored: the repository's SQLite file, or a fresh Postgres
/// database.
struct Db {
    args: Vec<String>,
    _pg: Option<PgDatabase>,
}

impl Db {
    fn sqlite() -> Self {
        Db { args: Vec::new(), _pg: None }
    }

    fn postgres() -> Self {
        let pg = PgDatabase::create();
        Db { args: vec!["--database-url".into(), pg.url.clone()], _pg: Some(pg) }
    }

    fn extra(&self) -> Vec<&str> {
        self.args.iter().map(String::as_str).collect()
    }

    fn arbiter(&self, repo: &TestRepo, args: &[&str]) -> Run {
        let mut all = args.to_vec();
        all.extend(self.extra());
        repo.arbiter(&all)
    }
}

fn plan_on(id: &str, log: &Path, branch: &str, tasks: Value) -> Value {
    let mut plan = plan_of(id, log, tasks);
    plan["integration_branch"] = json!(branch);
    plan
}

fn rev(repo: &TestRepo, name: &str) -> String {
    repo.git(&["rev-parse", name]).trim().to_string()
}

fn task_refs(repo: &TestRepo, plan: &str) -> Vec<String> {
    let prefix = format!("refs/arbiter/plans/{plan}/tasks/");
    repo.git(&["for-each-ref", "--format=%(refname)", &prefix]).lines().map(str::to_string).collect()
}

fn task_status(status: &Value, id: &str) -> String {
    status["tasks"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["id"] == id))
        .and_then(|t| t["status"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// A user's branch is refused until it is adopted; an adopted branch gets the plan's
/// commits on top of the user's, and a reset never moves it back.
fn an_existing_branch_is_refused_until_adopted_and_never_moved_back(db: Db) {
    let (repo, log) = plan_repo("  A) echo a > a.txt ;;");
    repo.git(&["switch", "-q", "-c", "feature"]);
    repo.write("mine.txt", "mine\n");
    let mine = repo.commit_all("my own work");
    repo.git(&["switch", "-q", "main"]);
    let file = write_plan(&repo, &plan_on("adopt", &log, "feature", json!([task("A", &[], "test -f a.txt")])));
    for command in ["import", "apply"] {
        let run = db.arbiter(&repo, &["plan", command, &file]);
        run.assert_code(2);
        assert!(run.stderr.contains("branch feature already exists"), "{}", run.stderr);
        assert!(run.stderr.contains("arbiter did not create it for plan adopt"), "{}", run.stderr);
        assert!(run.stderr.contains("--adopt-branch feature"), "{}", run.stderr);
    }
    assert_eq!(rev(&repo, "feature"), mine, "the refused import left the branch alone");
    assert!(db.arbiter(&repo, &["plan", "list"]).stdout.contains("No plans yet"), "nothing was written");
    let wrong = db.arbiter(&repo, &["plan", "import", &file, "--adopt-branch", "main"]);
    wrong.assert_code(2);
    assert!(
        wrong.stderr.contains("--adopt-branch main does not name plan adopt's integration branch (feature)"),
        "{}",
        wrong.stderr
    );

    // The hint: adopt it.
    let adopted = db.arbiter(&repo, &["plan", "import", &file, "--adopt-branch", "feature"]);
    adopted.assert_code(0);
    assert!(adopted.stdout.contains("integration branch feature adopted at"), "{}", adopted.stdout);
    let status = status_json(&repo, "adopt", &db.extra());
    assert_eq!(status["integration_branch_record"]["origin"], "adopted", "{status:#}");
    assert_eq!(status["integration_branch_record"]["base"], json!(mine));
    // Re-imports of the same file go on working.
    db.arbiter(&repo, &["plan", "import", &file]).assert_code(0);
    db.arbiter(&repo, &["plan", "import", &file, "--update"]).assert_code(0);
    db.arbiter(&repo, &["plan", "apply", &file, "--adopt-branch", "feature"]).assert_code(0);

    db.arbiter(&repo, &["plan", "run", "adopt"]).assert_code(0);
    let after = rev(&repo, "feature");
    assert_eq!(rev(&repo, "feature~1"), mine, "the winner is committed on top of the user's work");
    assert_eq!(repo.git(&["show", "feature:a.txt"]), "a\n");

    let reset = db.arbiter(&repo, &["plan", "reset", "adopt", "--yes"]);
    reset.assert_code(2);
    assert!(reset.stderr.contains("branch feature was adopted by plan adopt"), "{}", reset.stderr);
    assert!(reset.stderr.contains("nothing was reset"), "{}", reset.stderr);
    assert!(reset.stderr.contains("--keep-branch"), "{}", reset.stderr);
    assert_eq!(rev(&repo, "feature"), after, "an adopted branch is never moved back");
    assert_eq!(task_status(&status_json(&repo, "adopt", &db.extra()), "A"), "done");

    // The hint: reset the tasks and keep the branch.
    let keep = db.arbiter(&repo, &["plan", "reset", "adopt", "--yes", "--keep-branch"]);
    keep.assert_code(0);
    assert!(keep.stdout.contains("feature stays at"), "{}", keep.stdout);
    assert_eq!(rev(&repo, "feature"), after);
    assert_eq!(rev(&repo, "feature~1"), mine, "the user's commit is still there");
    assert_eq!(task_status(&status_json(&repo, "adopt", &db.extra()), "A"), "ready");
    assert!(task_refs(&repo, "adopt").is_empty(), "a reset forgets the tasks' commits");
    let events = events(&repo, "adopt", &db.extra());
    let e = events.iter().rfind(|e| e["kind"] == "plan_reset").expect("a plan_reset event");
    assert_eq!(e["data"]["branch"]["old_tip"], json!(after), "{e:#}");
    assert_eq!(e["data"]["branch"]["new_tip"], Value::Null, "{e:#}");
    assert_eq!(e["data"]["branch"]["kept"], "--keep-branch", "{e:#}");
}

#[test]
fn an_existing_branch_is_refused_until_adopted_and_never_moved_back_sqlite() {
    an_existing_branch_is_refused_until_adopted_and_never_moved_back(Db::sqlite());
}

#[test]
fn an_existing_branch_is_refused_until_adopted_and_never_moved_back_postgres() {
    an_existing_branch_is_refused_until_adopted_and_never_moved_back(Db::postgres());
}

#[test]
fn checked_out_default_and_invalid_branches_are_refused() {
    let (repo, log) = plan_repo("");
    let main = rev(&repo, "main");
    let refused = |id: &str, branch: &str, adopt: bool| {
        let file = write_plan(&repo, &plan_on(id, &log, branch, json!([task("A", &[], "true")])));
        let mut args = vec!["plan", "import", file.as_str()];
        if adopt {
            args.extend(["--adopt-branch", branch]);
        }
        let run = repo.arbiter(&args);
        run.assert_code(2);
        run.stderr
    };
    // The checked-out branch, adopted or not.
    for adopt in [false, true] {
        let err = refused("here", "main", adopt);
        assert!(err.contains("branch main (plan here's integration branch) is checked out in"), "{err}");
        assert!(err.contains("switch OTHER`) and import again with --adopt-branch main"), "{err}");
    }
    // A branch checked out in a linked worktree.
    let scratch = tempfile::tempdir().expect("temp dir");
    let linked = scratch.path().join("side");
    repo.git(&["worktree", "add", "-q", "-b", "side", &linked.display().to_string()]);
    let err = refused("linked", "side", true);
    assert!(err.contains("branch side (plan linked's integration branch) is checked out in"), "{err}");
    assert!(err.contains("/side"), "{err}");

    // The default branch, not checked out: refused, unless adopted explicitly.
    repo.git(&["switch", "-q", "-c", "feature"]);
    let err = refused("default", "main", false);
    assert!(err.contains("branch main is the repository's default branch"), "{err}");
    assert!(err.contains("--adopt-branch main"), "{err}");
    let file = write_plan(&repo, &plan_on("default", &log, "main", json!([task("A", &[], "true")])));
    repo.arbiter(&["plan", "import", &file, "--adopt-branch", "main"]).assert_code(0);
    // What init.defaultBranch names, even before it exists.
    repo.git(&["config", "init.defaultBranch", "trunk"]);
    let err = refused("trunk", "trunk", false);
    assert!(err.contains("branch trunk is the repository's default branch (init.defaultBranch names it)"), "{err}");
    assert!(err.contains("Name another `integration_branch`"), "{err}");
    // What refs/remotes/origin/HEAD points to.
    repo.git(&["update-ref", "refs/remotes/origin/develop", "HEAD"]);
    repo.git(&["symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/develop"]);
    let err = refused("develop", "develop", false);
    assert!(
        err.contains("branch develop is the repository's default branch (refs/remotes/origin/HEAD points to it)"),
        "{err}"
    );
    // Not a branch name at all.
    let err = refused("bad", "bad..name", false);
    assert!(err.contains("'bad..name' is not a valid branch name"), "{err}");

    assert_eq!(rev(&repo, "main"), main, "no refused import moved anything");
    let list = repo.arbiter(&["plan", "list", "--json"]).stdout;
    let ids: Vec<String> = serde_json::from_str::<Value>(&list).expect("JSON")["plans"]
        .as_array()
        .expect("plans")
        .iter()
        .filter_map(|p| p["id"].as_str().map(str::to_string))
        .collect();
    assert_eq!(ids, vec!["default"], "only the adopted plan was stored");
}

/// `plan reset` moves a branch arbiter created back to where it was created, records the
/// old tip, and forgets the tasks' commits; a checked-out branch is neither run on nor reset.
fn reset_moves_back_the_branch_arbiter_created(db: Db) {
    let (repo, log) = plan_repo("  A) echo a > a.txt ;;\n  B) echo b > b.txt ;;");
    let base = rev(&repo, "main");
    let file = write_plan(
        &repo,
        &plan_of("own", &log, json!([task("A", &[], "test -f a.txt"), task("B", &["A"], "test -f b.txt")])),
    );
    db.arbiter(&repo, &["plan", "import", &file]).assert_code(0);
    let status = db.arbiter(&repo, &["plan", "status", "own"]).stdout;
    assert!(status.contains("integration branch arbiter/own (not created yet"), "{status}");
    db.arbiter(&repo, &["plan", "run", "own"]).assert_code(0);
    let record = status_json(&repo, "own", &db.extra())["integration_branch_record"].clone();
    assert_eq!((record["origin"].as_str(), record["base"].as_str()), (Some("created"), Some(base.as_str())));
    let tip = rev(&repo, "arbiter/own");
    assert_eq!(task_refs(&repo, "own").len(), 2, "each task's commit is recorded");
    // Re-importing the unchanged file works, with or without --update.
    db.arbiter(&repo, &["plan", "import", &file]).assert_code(0);
    db.arbiter(&repo, &["plan", "import", &file, "--update"]).assert_code(0);

    // Checked out: neither run on nor moved.
    repo.git(&["switch", "-q", "arbiter/own"]);
    let reset = db.arbiter(&repo, &["plan", "reset", "own", "--yes"]);
    reset.assert_code(2);
    assert!(
        reset.stderr.contains("branch arbiter/own (plan own's integration branch) is checked out in"),
        "{}",
        reset.stderr
    );
    assert!(reset.stderr.contains("nothing was reset"), "{}", reset.stderr);
    let run = db.arbiter(&repo, &["plan", "run", "own"]);
    run.assert_code(2);
    assert!(run.stderr.contains("is checked out in") && run.stderr.contains("switch OTHER"), "{}", run.stderr);
    assert_eq!(rev(&repo, "arbiter/own"), tip);
    assert_eq!(task_status(&status_json(&repo, "own", &db.extra()), "B"), "done");
    // The hint: switch away, reset again.
    repo.git(&["switch", "-q", "main"]);
    let reset = db.arbiter(&repo, &["plan", "reset", "own", "--yes"]);
    reset.assert_code(0);
    assert!(reset.stdout.contains(&format!("arbiter/own was at {}", &tip[..10])), "{}", reset.stdout);
    assert_eq!(rev(&repo, "arbiter/own"), base, "back where arbiter created it");
    assert!(task_refs(&repo, "own").is_empty());
    let events = events(&repo, "own", &db.extra());
    let e = events.iter().rfind(|e| e["kind"] == "plan_reset").expect("a plan_reset event");
    assert_eq!(
        (e["data"]["branch"]["old_tip"].clone(), e["data"]["branch"]["new_tip"].clone()),
        (json!(tip), json!(base))
    );
    // The tasks run again from the start.
    db.arbiter(&repo, &["plan", "run", "own"]).assert_code(0);
    assert_eq!(log_lines(&log).len(), 4, "{:?}", log_lines(&log));
    assert_eq!(rev(&repo, "arbiter/own~2"), base);
}

#[test]
fn reset_moves_back_the_branch_arbiter_created_sqlite() {
    reset_moves_back_the_branch_arbiter_created(Db::sqlite());
}

#[test]
fn reset_moves_back_the_branch_arbiter_created_postgres() {
    reset_moves_back_the_branch_arbiter_created(Db::postgres());
}

/// A branch made outside arbiter after the import is refused at run time (the hint leads
/// to adopting it); one arbiter created and the user deleted is created again, recorded; a
/// store that lost its record refuses arbiter's old branch and says so.
#[test]
fn branches_made_deleted_or_forgotten_between_runs() {
    let (repo, log) = plan_repo("  A) echo a > a.txt ;;");
    let file = write_plan(&repo, &plan_of("late", &log, json!([task("A", &[], "test -f a.txt")])));
    repo.arbiter(&["plan", "import", &file]).assert_code(0);
    repo.git(&["branch", "arbiter/late"]);
    let run = repo.arbiter(&["plan", "run", "late"]);
    run.assert_code(2);
    assert!(run.stderr.contains("branch arbiter/late already exists"), "{}", run.stderr);
    assert!(run.stderr.contains("`arbiter plan export late -o late.json`"), "{}", run.stderr);
    assert!(run.stderr.contains("--adopt-branch arbiter/late"), "{}", run.stderr);
    assert!(log_lines(&log).is_empty(), "nothing ran");
    repo.arbiter(&["plan", "export", "late", "-o", "late.json"]).assert_code(0);
    repo.arbiter(&["plan", "import", "late.json", "--adopt-branch", "arbiter/late"]).assert_code(0);
    repo.arbiter(&["plan", "run", "late"]).assert_code(0);
    assert_eq!(repo.git(&["show", "arbiter/late:a.txt"]), "a\n");

    // Created by arbiter, deleted by the user: created again, and recorded again.
    let file = write_plan(&repo, &plan_of("again", &log, json!([task("A", &[], "test -f a.txt")])));
    repo.arbiter(&["plan", "import", &file]).assert_code(0);
    repo.arbiter(&["plan", "run", "again"]).assert_code(0);
    repo.git(&["branch", "-q", "-D", "arbiter/again"]);
    let reset = repo.arbiter(&["plan", "reset", "again", "--yes"]);
    reset.assert_code(0);
    assert!(task_refs(&repo, "again").is_empty());
    repo.arbiter(&["plan", "run", "again"]).assert_code(0);
    assert_eq!(repo.git(&["show", "arbiter/again:a.txt"]), "a\n");
    let events = events(&repo, "again", &[]);
    let created: Vec<&Value> = events.iter().filter(|e| e["kind"] == "integration_branch_created").collect();
    assert_eq!(created.len(), 2, "{events:#?}");
    assert_eq!(created[1]["data"]["previous"]["origin"], "created");

    // The store is lost: arbiter's old branch is a branch like any other to the new one.
    for f in std::fs::read_dir(repo.arbiter_dir()).expect("read .arbiter").flatten() {
        if f.file_name().to_string_lossy().starts_with("arbiter.db") {
            std::fs::remove_file(f.path()).expect("drop the store");
        }
    }
    let tip = rev(&repo, "arbiter/again");
    let run = repo.arbiter(&["plan", "import", &file]);
    run.assert_code(2);
    assert!(run.stderr.contains("arbiter did create a branch for a plan 'again' here before"), "{}", run.stderr);
    assert!(run.stderr.contains("--adopt-branch arbiter/again"), "{}", run.stderr);
    assert_eq!(rev(&repo, "arbiter/again"), tip);
    repo.arbiter(&["plan", "import", &file, "--adopt-branch", "arbiter/again"]).assert_code(0);
    let record = status_json(&repo, "again", &[])["integration_branch_record"].clone();
    assert_eq!((record["origin"].as_str(), record["base"].as_str()), (Some("adopted"), Some(tip.as_str())));
}

#[test]
fn import_problems_are_named_and_nothing_is_written() {
    let (repo, log) = plan_repo("");
    let cases = [
        (json!([task("A", &["B"], "true"), task("B", &["A"], "true")]), "dependency cycle: A → B → A"),
        (json!([task("A", &["nope"], "true")]), "depends on 'nope'"),
        (json!([task("A", &[], "true"), task("A", &[], "true")]), "'A' is used twice"),
    ];
    for (tasks, needle) in cases {
        let file = write_plan(&repo, &plan_of("bad", &log, tasks));
        let run = repo.arbiter(&["plan", "import", &file]);
        run.assert_code(2);
        assert!(run.stderr.contains(needle), "{needle}: {}", run.stderr);
        assert!(run.stderr.contains("nothing was written"), "{}", run.stderr);
    }
    let mut bad_priority = plan_of("bad", &log, json!([task("A", &[], "true")]));
    bad_priority["tasks"][0]["priority"] = json!("urgent");
    let file = write_plan(&repo, &bad_priority);
    let run = repo.arbiter(&["plan", "import", &file]);
    run.assert_code(2);
    assert!(run.stderr.contains("priority 'urgent' is not one of critical, high, medium, low"), "{}", run.stderr);
    let run = repo.arbiter(&["plan", "import", "missing.json"]);
    run.assert_code(2);
    assert!(run.stderr.contains("cannot read the plan file missing.json"), "{}", run.stderr);
    assert!(repo.arbiter(&["plan", "list"]).stdout.contains("No plans yet"));
}

#[test]
fn export_import_export_is_byte_identical_and_whilly_files_import() {
    let (repo, log) = plan_repo("");
    let file = write_plan(&repo, &diamond(&log));
    repo.arbiter(&["plan", "import", &file]).assert_code(0);
    let first = repo.arbiter(&["plan", "export", "diamond"]);
    first.assert_code(0);
    repo.write("exported.json", &first.stdout);
    let again = repo.arbiter(&["plan", "import", "exported.json", "--update"]);
    again.assert_code(0);
    assert!(again.stdout.contains("0 added, 0 updated, 4 unchanged"), "{}", again.stdout);
    let second = repo.arbiter(&["plan", "export", "diamond"]);
    assert_eq!(first.stdout, second.stdout);

    repo.write(
        "tasks.json",
        r#"{"project": "Demo", "plan_id": "demo", "tasks": [
          {"id": "DEMO-001", "priority": "high", "status": "pending", "description": "Create DEMO-HELLO.md with a greeting",
           "dependencies": [], "key_files": ["DEMO-HELLO.md"], "acceptance_criteria": ["DEMO-HELLO.md exists"],
           "test_steps": ["test -s DEMO-HELLO.md"], "prd_requirement": "demo-step-1"},
          {"id": "DEMO-002", "priority": "low", "status": "done", "description": "Already done elsewhere",
           "dependencies": ["DEMO-001"], "key_files": [], "acceptance_criteria": [], "test_steps": [], "prd_requirement": ""}
        ]}"#,
    );
    repo.arbiter(&["plan", "import", "tasks.json"]).assert_code(0);
    let status = status_json(&repo, "demo", &[]);
    assert_eq!(status["tasks"][0]["status"], "ready");
    assert_eq!(status["tasks"][1]["status"], "done", "a done Whilly task stays done");
    let exported = repo.arbiter(&["plan", "export", "demo"]).stdout;
    assert!(exported.contains("\"verify\": [\n        \"test -s DEMO-HELLO.md\"\n      ]"), "{exported}");
}

#[test]
fn apply_strict_skips_what_the_gate_rejects_and_records_why() {
    let (repo, log) = plan_repo("  A) echo a > a.txt ;;");
    let mut thin = task("B", &[], "true");
    thin["description"] = json!("do it");
    let file = write_plan(&repo, &plan_of("gate", &log, json!([task("A", &[], "test -f a.txt"), thin])));
    let run = repo.arbiter(&["plan", "apply", &file, "--strict"]);
    run.assert_code(0);
    assert!(run.stdout.contains("REJECT  B: missing a description of substance"), "{}", run.stdout);
    assert!(run.stdout.contains("skipped (--strict)"), "{}", run.stdout);
    let events = events(&repo, "gate", &[]);
    let skipped = events.iter().find(|e| e["kind"] == "task_skipped").expect("a task_skipped event");
    assert_eq!(skipped["task_id"], "B");
    assert!(skipped["data"]["reason"].as_str().unwrap_or("").contains("decision gate"), "{skipped:#}");
    repo.arbiter(&["plan", "run", "gate"]).assert_code(0);
    let status = status_json(&repo, "gate", &[]);
    assert_eq!(status["counts"], json!({"done": 1, "skipped": 1}));
}

#[test]
fn budgets_commands_and_bad_input() {
    let (repo, _log) = plan_repo("");
    repo.arbiter(&["plan", "create", "--id", "empty", "--name", "Empty", "--budget", "2.50"]).assert_code(0);
    let again = repo.arbiter(&["plan", "create", "--id", "empty", "--name", "Empty"]);
    again.assert_code(2);
    assert!(again.stderr.contains("exists already"), "{}", again.stderr);
    let b = repo.arbiter(&["plan", "budget", "empty", "5"]);
    b.assert_code(0);
    assert!(b.stdout.contains("budget $5.00"), "{}", b.stdout);
    let bad = repo.arbiter(&["plan", "budget", "empty", "lots"]);
    bad.assert_code(2);
    assert!(bad.stderr.contains("'lots' is not an amount of USD"), "{}", bad.stderr);
    let missing = repo.arbiter(&["plan", "show", "nope"]);
    missing.assert_code(2);
    assert!(missing.stderr.contains("no plan named 'nope'"), "{}", missing.stderr);
    let reset = repo.arbiter(&["plan", "reset", "empty"]);
    reset.assert_code(2);
    assert!(reset.stderr.contains("pass --yes"), "{}", reset.stderr);
    let retry = repo.arbiter(&["plan", "retry", "empty", "T9"]);
    retry.assert_code(2);
    assert!(retry.stderr.contains("has no task 'T9'"), "{}", retry.stderr);
    let list = repo.arbiter(&["plan", "list"]);
    assert!(list.stdout.contains("empty") && list.stdout.contains("$0.00 of $5.00"), "{}", list.stdout);
    let schema = repo.arbiter(&["plan", "schema"]);
    schema.assert_code(0);
    serde_json::from_str::<Value>(&schema.stdout).expect("the schema is JSON");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_worker_whose_lease_was_taken_commits_nothing() {
    use arbiter_core::time::Timestamp;
    use arbiter_store::plans::{ClaimOutcome, PlanWork};
    let scratch = holds_dir();
    let hold = scratch.path().join("hold");
    std::fs::write(&hold, "").expect("marker");
    let (repo, log) =
        plan_repo(&format!("  T) while [ -e {hold} ]; do sleep 0.1; done; echo t > t.txt ;;", hold = hold.display()));
    let plan = plan_of("taken", &log, json!([task("T", &[], "test -f t.txt")]));
    let file = write_plan(&repo, &plan);
    repo.arbiter(&["plan", "import", &file]).assert_code(0);
    let child = repo
        .arbiter_cmd(&["plan", "run", "taken", "--lease-seconds", "3"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start plan run");
    assert!(wait_until(Duration::from_secs(60), || !log_lines(&log).is_empty()), "T never started");
    // Another worker takes the task over (as if the lease had run out).
    let store = arbiter_store::sqlite::SqliteStore::open(&repo.arbiter_dir().join("arbiter.db")).await.expect("store");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_micros() as i64;
    let later = Timestamp(now + 3_600_000_000);
    assert_eq!(store.sweep_expired(later).await.expect("sweep").len(), 1);
    let thief = store.claim("taken", "thief", Duration::from_secs(7200), later).await.expect("claim");
    assert!(matches!(thief, ClaimOutcome::Claimed(_)));
    std::fs::remove_file(&hold).expect("let the agent finish");
    let stderr_done = wait_until(Duration::from_secs(60), || {
        events(&repo, "taken", &[]).iter().any(|e| e["kind"] == "stale_report_refused")
    });
    assert!(stderr_done, "the first worker never reported: {:#?}", events(&repo, "taken", &[]));
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGINT)
        .expect("interrupt");
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("T: its lease was lost"), "{stderr}");
    assert!(integrated_tasks(&repo, "arbiter/taken").is_empty(), "the worker without its lease committed");
    let status = status_json(&repo, "taken", &[]);
    let t = &status["tasks"][0];
    assert_eq!((t["status"].as_str(), t["lease_owner"].as_str()), (Some("running"), Some("thief")), "{t:#}");
}

/// A branch checked out while the plan runs is not moved under that checkout: the run stops
/// before committing, gives the task back and says how to go on.
#[test]
fn a_branch_checked_out_during_a_run_stops_the_run_before_it_commits() {
    let scratch = holds_dir();
    let hold = scratch.path().join("hold");
    std::fs::write(&hold, "").expect("marker");
    let (repo, log) =
        plan_repo(&format!("  T) while [ -e {hold} ]; do sleep 0.1; done; echo t > t.txt ;;", hold = hold.display()));
    let base = rev(&repo, "main");
    let file = write_plan(&repo, &plan_of("busy", &log, json!([task("T", &[], "test -f t.txt")])));
    repo.arbiter(&["plan", "import", &file]).assert_code(0);
    let child = repo
        .arbiter_cmd(&["plan", "run", "busy"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start plan run");
    assert!(wait_until(Duration::from_secs(60), || !log_lines(&log).is_empty()), "T never started");
    repo.git(&["switch", "-q", "arbiter/busy"]);
    std::fs::remove_file(&hold).expect("let the agent finish");
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("branch arbiter/busy (plan busy's integration branch) is checked out in"), "{stderr}");
    assert!(stderr.contains("the plan run stopped"), "{stderr}");
    assert_eq!(rev(&repo, "arbiter/busy"), base, "the checked-out branch was not moved");
    assert_eq!(repo.status(), vec!["?? plan.json"], "the checkout shows no change");
    let status = status_json(&repo, "busy", &[]);
    assert_eq!((task_status(&status, "T").as_str(), status["tasks"][0]["attempts"].clone()), ("ready", json!(0)));
    // The hint: switch away and run again.
    repo.git(&["switch", "-q", "main"]);
    repo.arbiter(&["plan", "run", "busy"]).assert_code(0);
    assert_eq!(repo.git(&["show", "arbiter/busy:t.txt"]), "t\n");
}

/// A password given on the command line is readable by every process (candidates included):
/// refused, and the hint — the environment variable — works.
#[test]
fn a_database_password_on_the_command_line_is_refused_and_the_environment_works() {
    let (repo, _log) = plan_repo("  A) true ;;");
    let url = std::env::var("DATABASE_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    // Trust authentication ignores the password: the same database, with one.
    let with_password = url.replacen("postgres://postgres@", "postgres://postgres:not-a-real-password@", 1);
    assert_ne!(with_password, url, "DATABASE_URL has the expected shape: {url}");
    let refused = repo.arbiter(&["--database-url", &with_password, "plan", "list"]);
    refused.assert_code(2);
    assert!(refused.stderr.contains("put the URL in ARBITER_DATABASE_URL"), "{}", refused.stderr);
    assert!(!refused.stderr.contains("not-a-real-password"), "{}", refused.stderr);
    let out = repo.arbiter_cmd(&["plan", "list"]).env("ARBITER_DATABASE_URL", &with_password).output().expect("run");
    Run::from_output(out).assert_code(0);
}

/// A task with several candidates spreads over the worker slots: each candidate is a unit of
/// its own, the evaluation gates every candidate once they are all in (the wrong one fails
/// its gate), selects, and the winner goes onto the branch for the dependent task. The run
/// directory holds the whole tournament, sealed, with every unit's events.
#[test]
fn a_tournament_spreads_over_the_workers_and_its_evaluation_gates_every_candidate() {
    let (repo, log) = plan_repo(
        r#"  S) sleep 1; if [ "$ARBITER_CANDIDATE_INDEX" = 0 ]; then echo wrong > s.txt; else echo right > s.txt; fi ;;
  T) grep -q right s.txt; echo t > t.txt ;;"#,
    );
    let mut spread = task("S", &[], "grep -q right s.txt");
    spread["candidates"] = json!(3);
    let plan = plan_of("spread", &log, json!([spread, task("T", &["S"], "test -f t.txt")]));
    let file = write_plan(&repo, &plan);
    repo.arbiter(&["plan", "import", &file]).assert_code(0);
    let run = repo.arbiter(&["plan", "run", "spread", "--workers", "3"]);
    run.assert_code(0);
    assert!(run.stderr.contains("S: its tournament (run "), "{}", run.stderr);
    assert!(run.stderr.contains("every candidate is in, the evaluation is ready"), "{}", run.stderr);
    assert_eq!(integrated_tasks(&repo, "arbiter/spread"), vec!["S", "T"]);
    assert_eq!(repo.git(&["show", "arbiter/spread:s.txt"]), "right\n");

    let all = events(&repo, "spread", &[]);
    let kinds = kinds_for(&all, "S");
    for kind in ["units_started", "evaluation_ready", "task_done"] {
        assert_eq!(kinds.iter().filter(|k| **k == kind).count(), 1, "{kind} in {kinds:?}");
    }
    assert_eq!(kinds.iter().filter(|k| **k == "unit_done").count(), 3, "{kinds:?}");
    let claims: Vec<&Value> = all.iter().filter(|e| e["task_id"] == "S" && e["kind"] == "unit_claimed").collect();
    let units: Vec<&str> = claims.iter().filter_map(|e| e["data"]["unit"].as_str()).collect();
    assert_eq!(units.len(), 4, "three candidates and the evaluation, each claimed once: {units:?}");
    let workers: std::collections::BTreeSet<&str> = claims
        .iter()
        .filter(|e| e["data"]["kind"] == "candidate")
        .filter_map(|e| e["data"]["worker"].as_str())
        .collect();
    assert!(workers.len() >= 2, "the candidates ran in one slot: {workers:?}");

    let status = status_json(&repo, "spread", &[]);
    let run_id = status["tasks"].as_array().unwrap().iter().find(|t| t["id"] == "S").unwrap()["run_id"]
        .as_str()
        .expect("S records its run")
        .to_string();
    let dir = repo.arbiter_dir().join("runs").join(&run_id);
    assert_eq!(read_json(&dir.join("selection.json"))["winner"], "c02");
    let wrong = read_json(&dir.join("candidates/c01/evidence.json"));
    assert_eq!(wrong["gates"][0]["passed"], false, "{wrong:#}");
    assert_eq!(read_json(&dir.join("candidates/c02/evidence.json"))["gates"][0]["passed"], true);
    let events_file = read_json_lines(&dir.join("runtime_events.jsonl"));
    let started: Vec<&Value> = events_file.iter().filter(|e| e["kind"] == "agent_started").collect();
    assert_eq!(started.len(), 3, "every candidate unit's events are in the run's log");
    let seqs: Vec<u64> = events_file.iter().filter_map(|e| e["seq"].as_u64()).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "the run's log is numbered in order: {seqs:?}");
    repo.arbiter(&["runs", "verify", &run_id]).assert_code(0);
}

/// `push = true`: every winner's commit reaches the repository's `origin`; `arbiter plan
/// push` pushes on demand, never forced, to a remote named safely, and never shows a password
/// the remote's URL holds.
#[test]
fn a_plan_with_push_sends_its_branch_to_origin_and_never_forces() {
    let (repo, log) = plan_repo(DIAMOND);
    let remote = tempfile::tempdir().expect("a temp dir");
    let bare = remote.path().join("origin.git");
    git_in(remote.path(), &["init", "-q", "--bare", bare.to_str().expect("utf-8 path")]);
    repo.git(&["remote", "add", "origin", bare.to_str().expect("utf-8 path")]);
    let mut plan = diamond(&log);
    plan["push"] = json!(true);
    let file = write_plan(&repo, &plan);
    repo.commit_all("plan");
    repo.arbiter(&["plan", "import", &file]).assert_code(0);
    repo.arbiter(&["plan", "run", "diamond", "--workers", "2"]).assert_code(0);
    let ours = rev(&repo, "arbiter/diamond");
    assert_eq!(git_in(&bare, &["rev-parse", "refs/heads/arbiter/diamond"]).trim(), ours);
    let evs = events(&repo, "diamond", &[]);
    let pushed: Vec<&Value> = evs.iter().filter(|e| e["kind"] == "branch_pushed").collect();
    assert_eq!(pushed.len(), 4, "one push per winner: {evs:#?}");
    assert!(evs.iter().all(|e| e["kind"] != "branch_push_failed"), "{evs:#?}");

    // On demand: the remote has it already.
    let again = repo.arbiter(&["plan", "push", "diamond"]);
    again.assert_code(0);
    assert!(again.stdout.contains("already"), "{}", again.stdout);
    let again = repo.arbiter(&["plan", "push", "diamond", "--json"]);
    let pushed = assert_schema("plan-push", &again.assert_code(0).stdout);
    assert_eq!((pushed["up_to_date"].clone(), pushed["commit"].clone()), (json!(true), json!(ours)));

    // Someone moved the remote's branch elsewhere: arbiter leaves it, and says why.
    let other = tempfile::tempdir().expect("a temp dir");
    git_in(other.path(), &["clone", "-q", bare.to_str().expect("utf-8 path"), "c"]);
    let clone = other.path().join("c");
    git_in(&clone, &["checkout", "-q", "--orphan", "theirs"]);
    std::fs::write(clone.join("theirs.txt"), "theirs\n").expect("write");
    git_in(&clone, &["add", "theirs.txt"]);
    git_in(&clone, &["-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-q", "-m", "theirs"]);
    git_in(&clone, &["push", "-q", "--force", "origin", "theirs:arbiter/diamond"]);
    let theirs = git_in(&bare, &["rev-parse", "refs/heads/arbiter/diamond"]);
    let refused = repo.arbiter(&["plan", "push", "diamond"]);
    refused.assert_code(2);
    assert!(refused.stderr.contains("never force-pushes"), "{}", refused.stderr);
    assert_eq!(git_in(&bare, &["rev-parse", "refs/heads/arbiter/diamond"]), theirs, "the remote was left as it was");

    // A remote name that git would read as an option is refused before git runs.
    let hostile = repo.arbiter(&["plan", "push", "diamond", "--remote=--receive-pack=touch /tmp/arbiter-pwned"]);
    hostile.assert_code(2);
    assert!(hostile.stderr.contains("is not a remote name"), "{}", hostile.stderr);
    assert!(!Path::new("/tmp/arbiter-pwned").exists());
    // The hint of a remote that does not exist: add it, and the push goes through.
    let missing = repo.arbiter(&["plan", "push", "diamond", "--remote", "backup"]);
    missing.assert_code(2);
    assert!(missing.stderr.contains("remote add backup URL"), "{}", missing.stderr);
    let backup = remote.path().join("backup.git");
    git_in(remote.path(), &["init", "-q", "--bare", backup.to_str().expect("utf-8 path")]);
    repo.git(&["remote", "add", "backup", backup.to_str().expect("utf-8 path")]);
    repo.arbiter(&["plan", "push", "diamond", "--remote", "backup"]).assert_code(0);
    assert_eq!(git_in(&backup, &["rev-parse", "refs/heads/arbiter/diamond"]).trim(), ours);

    // A password in a remote's URL is never printed.
    repo.git(&["remote", "add", "locked", "http://arbiter:hunter2-remote-pw@127.0.0.1:9/repo.git"]);
    let failed = repo.arbiter(&["plan", "push", "diamond", "--remote", "locked"]);
    failed.assert_code(3);
    assert!(
        !failed.stderr.contains("hunter2-remote-pw") && !failed.stdout.contains("hunter2-remote-pw"),
        "{}",
        failed.stderr
    );
    assert!(failed.stderr.contains("pushing arbiter/diamond to locked"), "{}", failed.stderr);
}

/// Whilly's plans as they are: a v3 file without `plan_id`, statuses `done`, `in_progress`
/// and `skipped`, shell test steps and sentences. The sentences become manual checks (the
/// import says which), nothing stops the run for them, the run's flags give the runner a
/// Whilly file does not name (recorded in the plan's events), `--gate whilly` applies
/// Whilly's own rules, and `plan export --format whilly` writes a file that imports back.
#[test]
fn whilly_plans_run_as_they_are() {
    let (repo, log) = plan_repo("  W-1) echo one > one.txt ;;\n  W-2) echo two > two.txt ;;");
    repo.write(
        "tasks.json",
        r#"{"project": "Whilly Demo", "prd_file": "PRD.md", "agent_instructions": "be brief", "tasks": [
          {"id": "W-1", "phase": "1", "priority": "high", "status": "pending", "description": "Write one.txt holding the word one",
           "dependencies": [], "key_files": ["one.txt"], "acceptance_criteria": ["one.txt holds one"],
           "test_steps": ["test -s one.txt", "Open one.txt and confirm it reads well"], "prd_requirement": "R1"},
          {"id": "W-2", "priority": "medium", "status": "in_progress", "description": "Write two.txt after one.txt exists",
           "dependencies": ["W-1"], "acceptance_criteria": ["two.txt holds two"],
           "test_steps": ["Run the tests and confirm the endpoint returns 200"]},
          {"id": "W-3", "priority": "low", "status": "done", "description": "Set up the repository layout",
           "dependencies": []},
          {"id": "W-4", "priority": "low", "status": "skipped", "description": "Nothing to do here any more",
           "dependencies": []}
        ]}"#,
    );
    let imported = repo.arbiter(&["plan", "import", "tasks.json"]);
    imported.assert_code(0);
    assert!(
        imported
            .stdout
            .contains("Whilly test steps: 1 command(s) run as verify commands, 2 sentence(s) kept as manual checks"),
        "{}",
        imported.stdout
    );
    assert!(
        imported.stdout.contains("check   W-2: Run the tests and confirm the endpoint returns 200"),
        "{}",
        imported.stdout
    );
    let status = status_json(&repo, "whilly-demo", &[]);
    let of = |id: &str| status["tasks"].as_array().unwrap().iter().find(|t| t["id"] == id).unwrap()["status"].clone();
    assert_eq!((of("W-3"), of("W-4")), (json!("done"), json!("skipped")));
    assert_eq!(of("W-2"), json!("blocked"), "in_progress in the file starts afresh");

    // No runner in the file: the run's flags give it. W-2 has no verify command (a sentence
    // only): --no-verify says it may be committed unverified. A key typed into the command
    // is masked in the plan's history.
    let command = format!("MY_TOKEN=sk-typed-0123456789abcdefghij ./agent.sh {}", log.display());
    let run = repo.arbiter(&[
        "plan",
        "run",
        "whilly-demo",
        "--runner",
        "command",
        "--command",
        &command,
        "--candidates",
        "1",
        "--no-verify",
    ]);
    run.assert_code(0);
    assert_eq!(integrated_tasks(&repo, "arbiter/whilly-demo"), vec!["W-1", "W-2"]);
    let said = events(&repo, "whilly-demo", &[]);
    let overrides = said.iter().find(|e| e["kind"] == "run_overrides").expect("a run_overrides event");
    assert_eq!(overrides["data"]["overrides"]["runner"], "command", "{overrides:#}");
    assert_eq!(overrides["data"]["overrides"]["candidates"], 1, "{overrides:#}");
    let recorded = overrides["data"]["overrides"]["command"].as_str().unwrap_or_default();
    let tail = format!("./agent.sh {}", log.display());
    assert!(!recorded.contains("0123456789abcdefghij") && recorded.ends_with(&tail), "{recorded}");
    // The agents saw the sentence as a check to meet.
    let prompts: Vec<String> = repo
        .run_dirs()
        .iter()
        .filter_map(|d| std::fs::read_to_string(d.join("candidates/c01/prompt.md")).ok())
        .collect();
    assert!(
        prompts.iter().any(|p| p.contains("Run the tests and confirm the endpoint returns 200 (a check to meet")),
        "{prompts:#?}"
    );

    // Back to Whilly: statuses, test steps, the requirement; and in again, the same plan.
    let exported = repo.arbiter(&["plan", "export", "whilly-demo", "--format", "whilly"]);
    exported.assert_code(0);
    let w: Value = serde_json::from_str(&exported.stdout).unwrap();
    assert_eq!(w["project"], "Whilly Demo");
    let task = |id: &str| w["tasks"].as_array().unwrap().iter().find(|t| t["id"] == id).unwrap().clone();
    assert_eq!(task("W-1")["status"], "DONE");
    assert_eq!(task("W-4")["status"], "SKIPPED");
    assert_eq!(task("W-1")["test_steps"], json!(["test -s one.txt", "Open one.txt and confirm it reads well"]));
    assert_eq!(task("W-1")["prd_requirement"], "R1");
    let mut back = w.clone();
    back["plan_id"] = json!("whilly-again");
    repo.write("again.json", back.to_string());
    repo.arbiter(&["plan", "import", "again.json"]).assert_code(0);
    let again = repo.arbiter(&["plan", "export", "whilly-again"]).stdout;
    let first = repo.arbiter(&["plan", "export", "whilly-demo"]).stdout;
    assert_eq!(again.replace("whilly-again", "whilly-demo"), first, "the round trip changed the plan");

    // Whilly's gate rejects what arbiter's only warns about.
    repo.write(
        "gate.json",
        r#"{"project": "Gate", "plan_id": "gate", "tasks": [
          {"id": "G-1", "priority": "low", "status": "pending", "description": "A description of twenty-odd characters",
           "acceptance_criteria": ["it is done"], "test_steps": []}]}"#,
    );
    let ours = repo.arbiter(&["plan", "apply", "gate.json", "--strict"]);
    ours.assert_code(0);
    assert!(ours.stdout.contains("WARN    G-1: missing a verify command"), "{}", ours.stdout);
    repo.write(
        "gate.json",
        std::fs::read_to_string(repo.path().join("gate.json")).unwrap().replace("\"gate\"", "\"gate-w\""),
    );
    let theirs = repo.arbiter(&["plan", "apply", "gate.json", "--strict", "--gate", "whilly"]);
    theirs.assert_code(0);
    assert!(
        theirs.stdout.contains("REJECT  G-1: decision gate refused: missing test_steps — skipped (--strict)"),
        "{}",
        theirs.stdout
    );
}
