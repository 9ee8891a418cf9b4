//! `arbiter plan … --server URL` against a real `arbiter serve` (SQLite in its data
//! directory, and a fresh Postgres database): import and apply, status, list, show, events,
//! export, budget, retry, cancel, reset (the branch moves back in the server's repository),
//! create; on Postgres the same commands run locally on the same store print the same bytes.
//! Then hostile clients: no token, the wrong kind of token, malformed and oversized bodies,
//! repositories that are relative, missing or outside, plan ids that are paths; and no
//! token in the server's log.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arbiter_core::money::Usd;
use arbiter_core::time::Timestamp;
use arbiter_runner::git::Git;
use arbiter_runner::{integration, plan_branch};
use arbiter_store::plans::{AttemptResult, ClaimOutcome, PlanStore};
use common::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// A repository with one commit on `main`, and the plan file `plans/<id>.json` in it.
fn repository() -> TestRepo {
    let repo = TestRepo::new();
    repo.write("README.md", "# served\n");
    repo.commit_all("start");
    repo
}

fn task(id: &str, deps: &[&str], description: &str, criteria: &[&str]) -> Value {
    json!({"id": id, "title": format!("Task {id}"), "description": description,
           "acceptance_criteria": criteria, "dependencies": deps})
}

/// Plan `id`: A (the gate allows it), B (rejected: a description of no substance), C (a
/// warning: no acceptance criterion), both after A.
fn plan_json(id: &str, repository: Option<&str>) -> Value {
    let mut plan = json!({
        "id": id, "name": format!("Plan {id}"),
        "defaults": {"verify": ["true"], "retry_backoff_seconds": 0},
        "tasks": [
            task("A", &[], "Write the file a.txt holding the letter a.", &["a.txt holds a"]),
            task("B", &["A"], "do it", &[]),
            task("C", &["A"], "Write the file c.txt holding the letter c.", &[]),
        ],
    });
    if let Some(r) = repository {
        plan["repository"] = json!(r);
    }
    plan
}

/// Writes `plans/<name>` in the repository; its path, relative to the repository.
fn write_plan(repo: &TestRepo, name: &str, plan: &Value) -> String {
    let rel = format!("plans/{name}");
    repo.write(&rel, serde_json::to_string_pretty(plan).unwrap());
    rel
}

fn now() -> Timestamp {
    Timestamp(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_micros() as i64)
}

fn rev(repo: &TestRepo, name: &str) -> String {
    repo.git(&["rev-parse", name]).trim().to_string()
}

fn task_refs(repo: &TestRepo, plan: &str) -> Vec<String> {
    let prefix = format!("refs/arbiter/plans/{plan}/tasks/");
    repo.git(&["for-each-ref", "--format=%(refname)", &prefix]).lines().map(str::to_string).collect()
}

/// The server's store, opened beside it by this process (as another worker would).
async fn server_store(serve: &Serve) -> Arc<dyn PlanStore> {
    match &serve.pg {
        Some(pg) => Arc::new(arbiter_store::postgres::PgStore::connect(&pg.url).await.unwrap()),
        None => Arc::new(arbiter_store::sqlite::SqliteStore::open(&serve.data_dir().join("arbiter.db")).await.unwrap()),
    }
}

/// What a worker does with task `task`: claims it, commits its winner (a new file
/// `<task>.txt`) onto the plan's integration branch (created for it), reports it done.
async fn work_on(store: &dyn PlanStore, repo: &TestRepo, plan: &str, task: &str) -> String {
    let claim = store.claim(plan, "test-worker", Duration::from_secs(600), now()).await.unwrap();
    let ClaimOutcome::Claimed(claimed) = claim else { panic!("nothing to claim: {claim:?}") };
    assert_eq!(claimed.task.id, task);
    let git = Git::new(repo.path());
    let view = store.plan(plan).await.unwrap().unwrap();
    plan_branch::ensure_for_run(&git, store, &view.plan, now()).await.unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let patch = scratch.path().join("winner.patch");
    let file = format!("{}.txt", task.to_lowercase());
    std::fs::write(&patch, format!("--- /dev/null\n+++ b/{file}\n@@ -0,0 +1 @@\n+{}\n", task.to_lowercase())).unwrap();
    let branch = view.plan.header.integration_branch.clone();
    let to = integration::Destination { plan, task, branch: &branch };
    let message = integration::message(&format!("Task {task}"), plan, task, "20261201T000000Z-000000", "c01");
    let limits = arbiter_core::limits::CandidateLimits::default();
    let checked = integration::check_at_tip(&git, &branch, &patch, &limits).await.unwrap();
    let commit = integration::commit_onto(&git, &to, &checked, &message).await.unwrap();
    let done = AttemptResult::Succeeded { run_id: None, commit: Some(commit.commit.clone()) };
    store.finish(&claimed.lease, done, Usd::ZERO, now()).await.unwrap();
    commit.commit
}

/// Runs `arbiter plan ARGS…` locally (in the repository, on `store_args`' store).
fn local(repo: &TestRepo, args: &[&str], store_args: &[&str]) -> Run {
    let mut all = vec!["plan"];
    all.extend_from_slice(args);
    all.extend_from_slice(store_args);
    let mut cmd = repo.arbiter_cmd(&all);
    cmd.env_remove("ARBITER_SERVER").env_remove("ARBITER_DATABASE_URL");
    Run::from_output(cmd.output().unwrap())
}

/// `arbiter plan ARGS…` against the server with the admin token, run from `dir`.
fn remote_in(serve: &Serve, dir: &Path, args: &[&str]) -> Run {
    let mut all = vec!["plan"];
    all.extend_from_slice(args);
    serve.cli(dir, &all, &[("ARBITER_TOKEN", ADMIN)])
}

fn json_of(run: &Run) -> Value {
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", run.stdout))
}

fn statuses(status: &Value) -> Vec<(String, String)> {
    status["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["id"].as_str().unwrap().to_string(), t["status"].as_str().unwrap().to_string()))
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

/// Every plan command through `--server`, on the server's store.
async fn tour(pg: Option<PgDatabase>) {
    let serve = Serve::start(&[], pg);
    let repo = repository();
    let base = rev(&repo, "main");
    let root = repo.path().canonicalize().unwrap().display().to_string();
    let remote = |args: &[&str]| remote_in(&serve, repo.path(), args);
    // The same command on the server's store, run here (Postgres only: the server's SQLite
    // file is its own).
    let pg_args: Vec<String> = serve.pg.iter().flat_map(|p| ["--database-url".to_string(), p.url.clone()]).collect();
    let pg_args: Vec<&str> = pg_args.iter().map(String::as_str).collect();
    let same_here = |args: &[&str], remote_run: &Run| {
        if serve.pg.is_some() {
            let here = local(&repo, args, &pg_args);
            here.assert_code(0);
            assert_eq!(here.stdout, remote_run.stdout, "`plan {}` differs between here and the server", args.join(" "));
        }
    };

    // Without the admin token: refused before anything is sent, naming the variable. The
    // hint (set ARBITER_TOKEN) works.
    let run = serve.cli(repo.path(), &["plan", "list"], &[]);
    run.assert_code(2);
    assert!(run.stderr.contains("set ARBITER_TOKEN to the server's admin token"), "{}", run.stderr);
    let run = serve.cli(repo.path(), &["plan", "list"], &[("ARBITER_TOKEN", "not-the-admin-token")]);
    run.assert_code(2);
    assert!(run.stderr.contains("401") && run.stderr.contains("invalid_token"), "{}", run.stderr);
    let run = remote(&["list"]);
    run.assert_code(0);
    assert!(run.stdout.contains("No plans yet"), "{}", run.stdout);

    // Outside a repository, a plan that names none is refused by the server; the hint
    // (give `repository`) works, a relative one taken from the plan file's directory.
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(elsewhere.path().join("calc.json"), plan_json("calc", None).to_string()).unwrap();
    let run = remote_in(&serve, elsewhere.path(), &["apply", "calc.json", "--strict"]);
    run.assert_code(2);
    assert!(
        run.stderr.contains("plan calc names no repository: give `repository` (a path or a git URL)"),
        "{}",
        run.stderr
    );
    let file = write_plan(&repo, "calc.json", &plan_json("calc", Some("..")));
    let run = remote(&["apply", &file, "--strict"]);
    run.assert_code(0);
    assert!(
        run.stdout.contains("Created plan calc (Plan calc): 3 added, 0 updated, 0 unchanged, 1 skipped"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("REJECT  B: missing a description of substance"), "{}", run.stdout);
    assert!(run.stdout.contains("skipped (--strict)"), "{}", run.stdout);
    assert!(run.stdout.contains("WARN    C:"), "{}", run.stdout);
    let again = remote(&["apply", &file, "--json"]);
    again.assert_code(0);
    let again = json_of(&again);
    assert_eq!(again["report"]["unchanged"], json!(["A", "B", "C"]), "{again:#}");
    assert_eq!(again["verdicts"], json!([]), "only added or changed tasks are judged");

    let status = remote(&["status", "calc", "--json"]);
    status.assert_code(0);
    let v = json_of(&status);
    assert_eq!(v["repository"], json!(root), "the relative path was resolved against the plan file");
    assert_eq!(statuses(&v), pairs(&[("A", "ready"), ("B", "skipped"), ("C", "blocked")]));
    same_here(&["status", "calc", "--json"], &status);

    // A worker does A: its commit lands on the plan's branch in the server's repository.
    let store = server_store(&serve).await;
    let a = work_on(store.as_ref(), &repo, "calc", "A").await;
    assert_eq!(rev(&repo, "arbiter/calc"), a);
    assert_eq!(rev(&repo, "arbiter/calc~1"), base);

    for args in [
        &["status", "calc"][..],
        &["status", "calc", "--json"],
        &["show", "calc"],
        &["show", "calc", "--json"],
        &["list"],
        &["list", "--json"],
        &["events", "calc"],
        &["events", "calc", "--json"],
        &["export", "calc"],
    ] {
        let run = remote(args);
        run.assert_code(0);
        same_here(args, &run);
    }
    let v = json_of(&remote(&["status", "calc", "--json"]));
    assert_eq!(statuses(&v), pairs(&[("A", "done"), ("B", "skipped"), ("C", "ready")]));
    assert_eq!(v["tasks"][0]["commit"], json!(a));
    assert_eq!(v["attempts"][0]["worker"], "test-worker");
    assert_eq!(v["integration_branch_record"]["base"], json!(base));
    let show = remote(&["show", "calc"]).stdout;
    assert!(show.contains("[DONE]") && show.contains("depends on: A"), "{show}");
    let list = remote(&["list"]).stdout;
    assert!(list.contains("calc") && list.contains("Plan calc"), "{list}");
    let events = assert_schema("plan-events", &remote(&["events", "calc", "--json"]).stdout)["events"].clone();
    let events = events.as_array().unwrap();
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["kind"].as_str()).collect();
    for kind in ["task_skipped", "task_claimed", "task_done", "integration_branch_created"] {
        assert!(kinds.contains(&kind), "no {kind} in {kinds:?}");
    }
    assert!(events.windows(2).all(|w| w[0]["id"].as_i64() < w[1]["id"].as_i64()), "oldest first");

    // Export, and import it back: nothing changes.
    let exported = remote(&["export", "calc", "-o", "plans/exported.json"]);
    exported.assert_code(0);
    assert_eq!(
        std::fs::read_to_string(repo.path().join("plans/exported.json")).unwrap(),
        remote(&["export", "calc"]).stdout
    );
    let back = remote(&["import", "plans/exported.json", "--update"]);
    back.assert_code(0);
    assert!(back.stdout.contains("0 added, 0 updated, 3 unchanged"), "{}", back.stdout);

    // Budget: the amount is checked here, the change made there.
    let run = remote(&["budget", "calc", "5"]);
    run.assert_code(0);
    assert_eq!(run.stdout, "Plan calc: budget $5.00, $0.00 spent, $0.00 reserved\n");
    let run = remote(&["budget", "calc", "lots"]);
    run.assert_code(2);
    assert!(run.stderr.contains("'lots' is not an amount of USD; write it like 5 or 2.50"), "{}", run.stderr);
    let run = remote(&["budget", "calc", "2.50"]);
    run.assert_code(0);
    assert!(run.stdout.contains("budget $2.50"), "{}", run.stdout);
    remote(&["budget", "calc", "none"]).assert_code(0);
    assert_eq!(json_of(&remote(&["status", "calc", "--json"]))["budget"]["limit"], Value::Null);

    // Retry: an unknown task names where to look; the hint works.
    let run = remote(&["retry", "calc", "T9"]);
    run.assert_code(2);
    assert!(
        run.stderr.contains("plan calc has no task 'T9'; `arbiter plan show calc` lists its tasks"),
        "{}",
        run.stderr
    );
    remote(&["show", "calc"]).assert_code(0);
    let run = remote(&["retry", "calc", "B"]);
    run.assert_code(0);
    assert_eq!(run.stdout, "Task B of plan calc is ready again, with new attempts.\n");
    let run = remote(&["retry", "calc", "A"]);
    run.assert_code(2);
    assert!(run.stderr.contains("task A of plan calc is done"), "{}", run.stderr);
    // An unknown plan: the hint (`arbiter plan list`) works, as shown above.
    let run = remote(&["show", "nope"]);
    run.assert_code(2);
    assert!(run.stderr.contains("no plan named 'nope'; `arbiter plan list` shows the plans"), "{}", run.stderr);
    let run = remote(&["events", "../x"]);
    run.assert_code(2);
    assert!(run.stderr.contains("no plan named '../x'"), "{}", run.stderr);

    // Reset: not while the branch is checked out (the hint: switch away, reset again); no
    // confirmation without a terminal (the hint: --yes); then the branch goes back.
    repo.git(&["switch", "-q", "arbiter/calc"]);
    let run = remote(&["reset", "calc", "--yes"]);
    run.assert_code(2);
    assert!(run.stderr.contains("is checked out in") && run.stderr.contains("switch OTHER"), "{}", run.stderr);
    assert!(run.stderr.contains("nothing was reset"), "{}", run.stderr);
    assert_eq!(rev(&repo, "arbiter/calc"), a);
    repo.git(&["switch", "-q", "main"]);
    let run = remote(&["reset", "calc"]);
    run.assert_code(2);
    assert!(run.stderr.contains("pass --yes"), "{}", run.stderr);
    let run = remote(&["reset", "calc", "--yes"]);
    run.assert_code(0);
    assert_eq!(
        run.stdout,
        format!(
            "Reset 3 task(s) of plan calc; arbiter/calc was at {} and now points where arbiter created it ({})\n",
            &a[..10],
            &base[..10]
        )
    );
    assert_eq!(rev(&repo, "arbiter/calc"), base, "the branch is back where arbiter created it");
    assert!(task_refs(&repo, "calc").is_empty(), "the tasks' commits are forgotten");
    let v = json_of(&remote(&["status", "calc", "--json"]));
    assert_eq!(statuses(&v), pairs(&[("A", "ready"), ("B", "skipped"), ("C", "blocked")]));

    // Cancel.
    let run = remote(&["cancel", "calc"]);
    run.assert_code(0);
    assert!(run.stdout.starts_with("Cancelled plan calc: 2 unfinished task(s)"), "{}", run.stdout);
    assert_eq!(json_of(&remote(&["status", "calc", "--json"]))["cancelled"], json!(true));

    // Workers run a control plane's plans, not `plan run`.
    let run = remote(&["run", "calc", "--server", &serve.url]);
    run.assert_code(2);
    assert!(run.stderr.contains(&format!("`arbiter worker run --server {}`", serve.url)), "{}", run.stderr);

    // Create: outside a repository, the repository must be named (the hint works); in one,
    // it is that one. A second create is refused, and its hint (`plan budget`) works.
    let create = ["create", "--id", "empty", "--name", "Empty", "--budget", "2.50"];
    let run = remote_in(&serve, elsewhere.path(), &create);
    run.assert_code(2);
    assert!(run.stderr.contains("`plan create --server` needs --repository PATH_OR_URL"), "{}", run.stderr);
    let run = remote_in(&serve, elsewhere.path(), &[&create[..], &["--repository", root.as_str()]].concat());
    run.assert_code(0);
    assert!(run.stdout.contains("Created plan empty (Empty)"), "{}", run.stdout);
    let v = json_of(&remote(&["status", "empty", "--json"]));
    assert_eq!((v["repository"].clone(), v["budget"]["limit"].clone()), (json!(root), json!("2.5")));
    let run = remote(&["create", "--id", "empty", "--name", "Empty", "--repository", &root]);
    run.assert_code(2);
    assert!(run.stderr.contains("plan empty exists already; `arbiter plan budget empty USD`"), "{}", run.stderr);
    remote(&["budget", "empty", "3"]).assert_code(0);
    remote(&["create", "--id", "here", "--name", "Here"]).assert_code(0);
    assert_eq!(json_of(&remote(&["status", "here", "--json"]))["repository"], json!(root));
    let run = remote(&["create", "--id", "bad/id", "--name", "Bad", "--repository", &root]);
    run.assert_code(2);
    assert!(run.stderr.contains("plan id 'bad/id' is not a safe name"), "{}", run.stderr);

    // A branch that exists is refused until adopted (the hint works); an adopted branch is
    // never moved back (the hint, --keep-branch, works).
    repo.git(&["branch", "feature"]);
    let mut adopt = plan_json("adopt", Some(".."));
    adopt["integration_branch"] = json!("feature");
    let file = write_plan(&repo, "adopt.json", &adopt);
    let run = remote(&["import", &file]);
    run.assert_code(2);
    assert!(
        run.stderr.contains("branch feature already exists") && run.stderr.contains("--adopt-branch feature"),
        "{}",
        run.stderr
    );
    let run = remote(&["import", &file, "--adopt-branch", "feature"]);
    run.assert_code(0);
    assert!(run.stdout.contains("integration branch feature adopted at"), "{}", run.stdout);
    let run = remote(&["reset", "adopt", "--yes"]);
    run.assert_code(2);
    assert!(
        run.stderr.contains("branch feature was adopted by plan adopt") && run.stderr.contains("--keep-branch"),
        "{}",
        run.stderr
    );
    let run = remote(&["reset", "adopt", "--yes", "--keep-branch"]);
    run.assert_code(0);
    assert!(run.stdout.contains("feature stays at"), "{}", run.stdout);
    assert_eq!(rev(&repo, "feature"), base);

    // The server pushes a plan's branch from its copy of the repository: a remote it lacks
    // is named with the fix, which works.
    let run = remote(&["push", "adopt"]);
    run.assert_code(2);
    assert!(
        run.stderr.contains("has no remote 'origin'") && run.stderr.contains("remote add origin URL"),
        "{}",
        run.stderr
    );
    let bare = tempfile::tempdir().unwrap();
    git_in(bare.path(), &["init", "-q", "--bare", "origin.git"]);
    let origin = bare.path().join("origin.git");
    repo.git(&["remote", "add", "origin", origin.to_str().unwrap()]);
    let run = remote(&["push", "adopt", "--json"]);
    run.assert_code(0);
    let pushed = json_of(&run);
    assert_eq!((pushed["branch"].clone(), pushed["commit"].clone()), (json!("feature"), json!(base)), "{pushed:#}");
    assert_eq!(git_in(&origin, &["rev-parse", "refs/heads/feature"]).trim(), base);

    // A Whilly file (no repository: the one the command runs in; a done task stays done).
    repo.write(
        "plans/tasks.json",
        r#"{"project": "Demo", "plan_id": "demo", "tasks": [
          {"id": "DEMO-1", "priority": "high", "status": "done", "description": "Already done elsewhere"},
          {"id": "DEMO-2", "priority": "low", "status": "pending", "description": "Then this", "dependencies": ["DEMO-1"]}
        ]}"#,
    );
    remote(&["import", "plans/tasks.json"]).assert_code(0);
    let v = json_of(&remote(&["status", "demo", "--json"]));
    assert_eq!(v["repository"], json!(root));
    assert_eq!(statuses(&v), pairs(&[("DEMO-1", "done"), ("DEMO-2", "ready")]));
    // A git URL: the server clones it into its data directory.
    let url = format!("file://{root}");
    let file = write_plan(&repo, "cloned.json", &plan_json("cloned", Some(&url)));
    remote(&["import", &file]).assert_code(0);
    assert_eq!(json_of(&remote(&["status", "cloned", "--json"]))["repository"], json!(url));
    let clone = serve.data_dir().join("repos/cloned/repo");
    assert_eq!(git_in(&clone, &["rev-parse", "HEAD"]).trim(), base, "the server cloned it");

    // On Postgres, what the server wrote is what a local command reads.
    same_here(&["list", "--json"], &remote(&["list", "--json"]));
    same_here(&["events", "adopt"], &remote(&["events", "adopt"]));

    // No token in the server's log.
    let log = serve.log_text();
    assert!(log.contains("plan imported") && log.contains("/api/v1/plans/{plan}/reset"), "{log}");
    for secret in [ADMIN, BOOTSTRAP] {
        assert!(!log.contains(secret), "a token is in the server's log");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_commands_through_the_server_on_sqlite() {
    tour(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_commands_through_the_server_on_postgres() {
    tour(Some(PgDatabase::create())).await;
}

/// An error answer: its status, `error` code and message.
async fn error_of(r: reqwest::Response) -> (StatusCode, String, String) {
    let status = r.status();
    let body: Value = r.json().await.expect("an error body is JSON");
    (status, body["error"].as_str().unwrap().to_string(), body["message"].as_str().unwrap().to_string())
}

/// One request written by hand (no client normalizes its path): the status line.
fn raw_request(url: &str, line: &str) -> String {
    let addr = url.trim_start_matches("http://");
    let mut tcp = std::net::TcpStream::connect(addr).unwrap();
    write!(tcp, "{line}\r\nHost: {addr}\r\nAuthorization: Bearer {ADMIN}\r\nConnection: close\r\n\r\n").unwrap();
    let mut answer = String::new();
    tcp.read_to_string(&mut answer).unwrap();
    answer.lines().next().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_clients_are_refused() {
    let serve = Serve::start(&[], None);
    let repo = repository();
    let scratch = tempfile::tempdir().unwrap();
    let token_file = scratch.path().join("w1.token");
    let register = ["register", "--name", "w1", "--token-file", token_file.to_str().unwrap()];
    serve.worker(&register, &[("ARBITER_BOOTSTRAP_TOKEN", BOOTSTRAP)]).assert_code(0);
    let worker = std::fs::read_to_string(&token_file).unwrap().trim().to_string();
    let http = http();
    let plans = serve.at("/api/v1/plans");

    // Tokens: none or a wrong one is 401, a worker's or the bootstrap token 403.
    let r = http.get(&plans).send().await.unwrap();
    assert_eq!(error_of(r).await.0, StatusCode::UNAUTHORIZED);
    let r = http.get(&plans).bearer_auth("arbw_wrong").send().await.unwrap();
    assert_eq!(error_of(r).await.1, "invalid_token");
    for (token, says) in [(worker.as_str(), "a worker token cannot administer"), (BOOTSTRAP, "only registers workers")]
    {
        let r = http.post(&plans).bearer_auth(token).json(&json!({"plan": plan_json("x", None)})).send().await.unwrap();
        let (status, code, message) = error_of(r).await;
        assert_eq!((status, code.as_str()), (StatusCode::FORBIDDEN, "admin_only"));
        assert!(message.contains(says), "{message}");
        let r = http.post(serve.at("/api/v1/plans/calc/cancel")).bearer_auth(token).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
    }
    let run = serve.cli(repo.path(), &["plan", "list"], &[("ARBITER_TOKEN", &worker)]);
    run.assert_code(2);
    assert!(run.stderr.contains("403") && run.stderr.contains("admin token (ARBITER_ADMIN_TOKEN)"), "{}", run.stderr);

    // Bodies: malformed, unknown fields, the wrong type, too large, a bad plan.
    let post = |body: String| {
        http.post(&plans).bearer_auth(ADMIN).header("content-type", "application/json").body(body).send()
    };
    let (status, code, message) = error_of(post(r#"{"plan": {"id": "#.into()).await.unwrap()).await;
    assert_eq!((status, code.as_str()), (StatusCode::BAD_REQUEST, "malformed_json"));
    assert!(message.contains("not valid JSON"), "{message}");
    let (status, _, message) = error_of(post(json!({"plan": {}, "colour": "blue"}).to_string()).await.unwrap()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(message.contains("colour"), "{message}");
    let mut bad = plan_json("calc", Some(repo.path().to_str().unwrap()));
    bad["tasks"][0]["priority"] = json!("urgent");
    let (status, _, message) = error_of(post(json!({"plan": bad}).to_string()).await.unwrap()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(message.starts_with("plan: ") && message.contains("priority 'urgent'"), "{message}");
    let (status, _, message) =
        error_of(post(json!({"plan": plan_json("calc", Some("/x")), "strict": true}).to_string()).await.unwrap()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(message.starts_with("strict: "), "{message}");
    let huge = json!({"plan": {"id": "big", "name": "x".repeat(2 << 20), "tasks": []}}).to_string();
    let (status, code, _) = error_of(post(huge).await.unwrap()).await;
    assert_eq!((status, code.as_str()), (StatusCode::PAYLOAD_TOO_LARGE, "body_too_large"));
    let r = http.post(&plans).bearer_auth(ADMIN).body("{}").send().await.unwrap();
    assert_eq!(error_of(r).await.0, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let r = http
        .post(serve.at("/api/v1/plans/calc/budget"))
        .bearer_auth(ADMIN)
        .json(&json!({"limit_usd": "-3"}))
        .send()
        .await
        .unwrap();
    let (status, _, message) = error_of(r).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(message.contains("limit_usd"), "{message}");

    // Repositories: relative, outside, missing, not a repository, none: 422 naming it.
    let not_git = tempfile::tempdir().unwrap();
    let missing = not_git.path().join("missing");
    for (repository, says) in [
        (Some("repo"), "plan calc's repository 'repo' is not a plain absolute path"),
        (Some("../../etc"), "plan calc's repository '../../etc' is not a plain absolute path"),
        (Some("/tmp/../etc"), "plan calc's repository '/tmp/../etc' is not a plain absolute path"),
        (Some(missing.to_str().unwrap()), "does not exist on this machine"),
        (Some(not_git.path().to_str().unwrap()), "is not a git repository"),
        (None, "plan calc names no repository"),
    ] {
        let body = json!({"plan": plan_json("calc", repository), "apply": true});
        let (status, code, message) = error_of(post(body.to_string()).await.unwrap()).await;
        assert_eq!((status, code.as_str()), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_request"), "{message}");
        assert!(message.contains(says), "{repository:?}: {message}");
        if let Some(r) = repository.filter(|r| !r.starts_with('.')) {
            assert!(message.contains(r), "{message}");
        }
    }
    // A "URL" that is an option of git clone is a URL to it, nothing else.
    let marker = scratch.path().join("ran");
    let option = format!("--upload-pack=touch {};://x", marker.display());
    let (status, _, message) =
        error_of(post(json!({"plan": plan_json("calc", Some(&option))}).to_string()).await.unwrap()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(message.contains("cannot clone plan calc's repository"), "{message}");
    assert!(!marker.exists());
    let r = http
        .put(serve.at("/api/v1/plans/calc"))
        .bearer_auth(ADMIN)
        .json(&json!({"name": "Calc", "repository": "relative/dir"}))
        .send()
        .await
        .unwrap();
    let (status, _, message) = error_of(r).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(message.contains("'relative/dir' is not a plain absolute path"), "{message}");
    // Plan ids that are paths: refused, in the body and in the path.
    let body = json!({"plan": plan_json("../x", Some(repo.path().to_str().unwrap()))});
    let (status, _, message) = error_of(post(body.to_string()).await.unwrap()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(message.contains("plan id '../x' is not a safe name"), "{message}");
    for path in ["/api/v1/plans/a%2Fb", "/api/v1/plans/..%2F..%2Fetc", "/api/v1/plans/a%2Fb/events"] {
        let r = http.get(serve.at(path)).bearer_auth(ADMIN).send().await.unwrap();
        let (status, _, message) = error_of(r).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        assert!(message.starts_with("no plan named"), "{path}: {message}");
    }
    for line in
        ["GET /api/v1/plans/.. HTTP/1.1", "GET /api/v1/plans/%2e%2e HTTP/1.1", "GET /api/v1/plans/../../etc HTTP/1.1"]
    {
        let status = raw_request(&serve.url, line);
        assert!(status.contains(" 404 "), "{line}: {status}");
    }
    let r = http.get(serve.at("/api/v1/plans/calc/events?after=x")).bearer_auth(ADMIN).send().await.unwrap();
    assert_eq!(error_of(r).await.1, "invalid_query");
    // Nothing was stored by any of it.
    let list: Value = http.get(&plans).bearer_auth(ADMIN).send().await.unwrap().json().await.unwrap();
    assert_eq!(list, json!({"plans": []}));
    // The hints work: an absolute path of a repository, strict with apply, a numeric `after`.
    let body = json!({"plan": plan_json("calc", Some(repo.path().to_str().unwrap())), "apply": true, "strict": true});
    let r = post(body.to_string()).await.unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let imported: Value = r.json().await.unwrap();
    assert_eq!(imported["report"]["skipped"], json!(["B"]), "{imported:#}");
    let events = |query: &'static str| {
        http.get(serve.at(&format!("/api/v1/plans/calc/events{query}"))).bearer_auth(ADMIN).send()
    };
    let all: Value = events("?after=0").await.unwrap().json().await.unwrap();
    let all = all["events"].as_array().unwrap().clone();
    assert!(all.len() > 2, "{all:#?}");
    // Pages: at most `limit`, after the given event.
    let page: Value = events("?limit=2").await.unwrap().json().await.unwrap();
    assert_eq!(page["events"].as_array().unwrap()[..], all[..2]);
    let after = all[1]["id"].as_i64().unwrap();
    let r = http
        .get(serve.at(&format!("/api/v1/plans/calc/events?after={after}&limit=1")))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.json::<Value>().await.unwrap()["events"][0], all[2]);
    let (status, code, message) = error_of(events("?limit=0").await.unwrap()).await;
    assert_eq!((status, code.as_str()), (StatusCode::BAD_REQUEST, "invalid_query"));
    assert!(message.contains("limit 0 is out of range"), "{message}");

    // No token in the server's log.
    let log = serve.log_text();
    assert!(log.contains("/api/v1/plans"), "{log}");
    for secret in [ADMIN, BOOTSTRAP, worker.as_str()] {
        assert!(!log.contains(secret), "a token is in the server's log");
    }
}

/// Over HTTPS with a self-signed certificate: `--ca-cert` trusts it; without it, the
/// client refuses the server.
#[test]
fn plan_commands_over_https_with_a_ca_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let (cert_file, key_file) = (dir.path().join("server.crt"), dir.path().join("server.key"));
    std::fs::write(&cert_file, cert.cert.pem()).unwrap();
    std::fs::write(&key_file, cert.signing_key.serialize_pem()).unwrap();
    let serve =
        Serve::start(&["--tls-cert", cert_file.to_str().unwrap(), "--tls-key", key_file.to_str().unwrap()], None);
    let url = serve.url.replace("127.0.0.1", "localhost");
    let repo = repository();
    let file = write_plan(&repo, "tls.json", &plan_json("tls", Some("..")));
    let run = remote_in(&serve, repo.path(), &["import", &file, "--server", &url]);
    run.assert_code(3);
    let ca: PathBuf = cert_file.clone();
    let run = remote_in(&serve, repo.path(), &["import", &file, "--server", &url, "--ca-cert", ca.to_str().unwrap()]);
    run.assert_code(0);
    assert!(run.stdout.contains("Created plan tls"), "{}", run.stdout);
    let run = remote_in(&serve, repo.path(), &["list", "--server", &url, "--ca-cert", ca.to_str().unwrap()]);
    run.assert_code(0);
    assert!(run.stdout.contains("tls"), "{}", run.stdout);
    // Plain HTTP to a host that is not loopback is refused before anything is sent.
    let run = remote_in(&serve, repo.path(), &["list", "--server", "http://192.0.2.1:7878"]);
    run.assert_code(2);
    assert!(run.stderr.contains("plain HTTP") && run.stderr.contains("--insecure"), "{}", run.stderr);
}
