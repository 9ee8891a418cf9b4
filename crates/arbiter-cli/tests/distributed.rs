//! Distributed mode end to end: a real `arbiter serve` and real `arbiter worker run`
//! processes on loopback, each worker in its own directory with its own repository copies
//! and workspace pool, shell-script agents making real edits, the store in SQLite or
//! Postgres. Plans finish with every task done once and the integration branch complete;
//! tournaments spread over workers; workers and the server die (`kill -9`) and come back;
//! hostile clients are refused; no token reaches a log or a file it should not.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arbiter_core::plan::file::{Syntax, parse};
use arbiter_store::plans::{Import, PlanEvent, PlanStore};
use arbiter_store::units::UnitQueue;
use common::*;
use serde_json::{Value, json};

/// A repository whose agent acts on the task id in its prompt: `X.txt` holding `X`, after
/// checking the files of the task's dependencies (the `needs` map); a task named in
/// `$HOLD_DIR/<task>` waits until that file is gone; candidate 0 of a task listed in
/// `wrong` writes the wrong content.
fn plan_repo(needs: &[(&str, &[&str])]) -> TestRepo {
    let repo = TestRepo::new();
    repo.write("README.md", "# distributed\n");
    let mut checks = String::new();
    for (task, deps) in needs {
        let tests: Vec<String> = deps.iter().map(|d| format!("test -f {d}.txt")).collect();
        checks.push_str(&format!("  {task}) {} ;;\n", tests.join(" && ")));
    }
    repo.write_agent(
        "agent.sh",
        &format!(
            r#"set -e
task=$(sed -n 's/^(Task \([^ ]*\) of plan.*/\1/p' "$ARBITER_PROMPT_FILE")
hold="$1/$task"
while [ -e "$hold" ]; do sleep 0.1; done
case "$task" in
{checks}  *) ;;
esac
if [ "$task" = S ] && [ "$ARBITER_CANDIDATE_INDEX" = 0 ]; then echo wrong > "$task.txt"; else echo "$task" > "$task.txt"; fi
"#
        ),
    );
    repo.commit_all("agent");
    repo
}

fn task(id: &str, deps: &[&str], candidates: u32) -> Value {
    json!({
        "id": id,
        "title": format!("Task {id}"),
        "description": format!("Do what task {id} asks."),
        "dependencies": deps,
        "candidates": candidates,
        "verify": [format!("grep -qx {id} {id}.txt")],
    })
}

fn plan_json(id: &str, repo: &Path, holds: &Path, tasks: Vec<Value>) -> Value {
    json!({
        "id": id,
        "name": format!("plan {id}"),
        "repository": repo.display().to_string(),
        "defaults": {
            "runners": "command",
            "command": format!("./agent.sh {}", holds.display()),
            "retry_backoff_seconds": 0,
            "max_attempts": 3,
        },
        "tasks": tasks,
    })
}

/// The server's store, as the tests look into it.
async fn store_of(serve: &Serve, pg: Option<&str>) -> Arc<dyn UnitQueue> {
    match pg {
        Some(url) => Arc::new(arbiter_store::postgres::PgStore::connect(url).await.unwrap()),
        None => Arc::new(arbiter_store::sqlite::SqliteStore::open(&serve.data_dir().join("arbiter.db")).await.unwrap()),
    }
}

async fn import(store: &dyn PlanStore, plan: &Value) {
    let spec = parse(&plan.to_string(), Syntax::Json).unwrap();
    let import = Import::adding(&spec, arbiter_core::Clock::now(&arbiter_runner::SystemClock));
    store.import_plan(import).await.unwrap();
}

/// Waits until every task of the plan is finished (done, failed, skipped, cancelled).
async fn finished(store: &dyn PlanStore, plan: &str, limit: Duration, logs: &dyn Fn() -> String) {
    let started = Instant::now();
    loop {
        let view = store.plan(plan).await.unwrap().unwrap();
        if view.tasks.iter().all(|t| t.status.is_terminal()) {
            return;
        }
        if started.elapsed() > limit {
            let states: Vec<String> =
                view.tasks.iter().map(|t| format!("{}={}", t.spec.id, t.status.as_str())).collect();
            panic!("plan {plan} did not finish in {limit:?}: {}\n{}", states.join(" "), logs());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn count<'a>(events: &'a [PlanEvent], kind: &str) -> BTreeMap<&'a str, usize> {
    let mut by_task = BTreeMap::new();
    for e in events.iter().filter(|e| e.kind == kind) {
        *by_task.entry(e.task_id.as_deref().unwrap_or("-")).or_default() += 1;
    }
    by_task
}

fn integrated(repo: &TestRepo, branch: &str) -> Vec<String> {
    repo.git(&["log", "--reverse", "--format=%(trailers:key=Arbiter-Task,valueonly)", branch])
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

fn all_logs(serve: &Serve, workers: &[&Worker]) -> String {
    let mut out = format!("--- server ---\n{}", serve.log_text());
    for w in workers {
        out.push_str(&format!("--- {} ---\n{}", w.name, std::fs::read_to_string(w.log()).unwrap_or_default()));
    }
    out
}

/// No token in any of the files (or the files under the directories) named.
fn assert_no_token(places: &[PathBuf], tokens: &[String]) {
    let files: Vec<PathBuf> =
        places.iter().flat_map(|p| if p.is_file() { vec![p.clone()] } else { files_under(p) }).collect();
    assert!(!files.is_empty());
    for file in files {
        let Ok(bytes) = std::fs::read(&file) else { continue };
        let text = String::from_utf8_lossy(&bytes);
        for t in tokens {
            assert!(!text.contains(t.as_str()), "a token is in {}", file.display());
        }
    }
}

/// Three workers run a diamond (its tournaments spread over them) and thirty independent
/// tasks: every task is done once, each dependent built on its dependencies' winners, the
/// integration branch complete, and no token in any log, run directory or repository copy.
async fn three_workers_run_a_diamond_and_thirty_tasks(pg: Option<PgDatabase>) {
    let pg_url = pg.as_ref().map(|p| p.url.clone());
    let serve = Serve::start(&["--lease-seconds", "5"], pg);
    let needs: Vec<(&str, &[&str])> = vec![("B", &["A"]), ("C", &["A"]), ("D", &["B", "C"])];
    let repo = plan_repo(&needs);
    let holds = holds_dir();
    let mut tasks = vec![task("A", &[], 2), task("B", &["A"], 2), task("C", &["A"], 2), task("D", &["B", "C"], 3)];
    tasks.extend((1..=30).map(|i| task(&format!("T{i:02}"), &[], 1)));
    let plan = plan_json("many", repo.path(), holds.path(), tasks);
    let store = store_of(&serve, pg_url.as_deref()).await;
    import(&*store, &plan).await;
    let mut workers: Vec<Worker> = (1..=3).map(|i| Worker::register(&serve, &format!("w{i}"), &["command"])).collect();
    for w in workers.iter_mut() {
        w.start(&serve.url, &[]);
    }
    let logs = || all_logs(&serve, &workers.iter().collect::<Vec<_>>());
    finished(&*store, "many", Duration::from_secs(240), &logs).await;

    let view = store.plan("many").await.unwrap().unwrap();
    for t in &view.tasks {
        assert_eq!(t.status.as_str(), "done", "{}: {:?}\n{}", t.spec.id, t.reason, logs());
    }
    let events = store.events("many").await.unwrap();
    let done = count(&events, "task_done");
    assert_eq!(done.len(), 34, "{done:?}");
    assert!(done.values().all(|n| *n == 1), "a task was done twice: {done:?}");
    let mut on_branch = integrated(&repo, "arbiter/many");
    assert_eq!(on_branch.len(), 34, "{on_branch:?}");
    on_branch.sort();
    on_branch.dedup();
    assert_eq!(on_branch.len(), 34, "a task was committed twice");
    let order: Vec<String> = integrated(&repo, "arbiter/many");
    let at = |t: &str| order.iter().position(|x| x == t).unwrap();
    assert!(at("A") < at("B") && at("A") < at("C") && at("B") < at("D") && at("C") < at("D"), "{order:?}");
    // D's candidates saw B's and C's winners (its agent checks for their files).
    assert_eq!(repo.git(&["show", "arbiter/many:D.txt"]), "D\n");
    // The spread tournaments ran on more than one worker.
    let claimers: BTreeSet<String> = events
        .iter()
        .filter(|e| e.kind == "unit_claimed")
        .filter_map(|e| e.data["worker"].as_str().map(|w| w.split(':').next().unwrap_or(w).to_string()))
        .collect();
    assert!(claimers.len() >= 2, "the units all went to one worker: {claimers:?}");

    let stop_times: Vec<Duration> = workers.iter_mut().map(Worker::stop).collect();
    for (w, t) in workers.iter().zip(&stop_times) {
        assert!(
            std::fs::read_to_string(w.log()).unwrap().contains("worker stopped"),
            "{} did not stop cleanly",
            w.name
        );
        eprintln!("idle worker {} stopped in {t:?}", w.name);
    }
    // No token anywhere it should not be.
    let tokens: Vec<String> =
        workers.iter().map(Worker::token).chain([BOOTSTRAP.to_string(), ADMIN.to_string()]).collect();
    let mut places: Vec<PathBuf> = vec![serve.log.clone(), repo.arbiter_dir()];
    for w in &workers {
        places.push(w.log());
        places.push(w.dir.path().join("data"));
    }
    assert_no_token(&places, &tokens);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_workers_run_a_diamond_and_thirty_tasks_on_sqlite() {
    three_workers_run_a_diamond_and_thirty_tasks(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_workers_run_a_diamond_and_thirty_tasks_on_postgres() {
    three_workers_run_a_diamond_and_thirty_tasks(Some(PgDatabase::create())).await;
}

/// The workers (by name) that claimed units of `task`, by unit name.
fn unit_claims(events: &[PlanEvent], task: &str, names: &BTreeMap<String, String>) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in events.iter().filter(|e| e.kind == "unit_claimed" && e.task_id.as_deref() == Some(task)) {
        let id = e.data["worker"].as_str().unwrap_or_default().split(':').next().unwrap_or_default().to_string();
        let unit = e.data["unit"].as_str().unwrap_or_default().to_string();
        out.entry(unit).or_default().push(names.get(&id).cloned().unwrap_or(id));
    }
    out
}

/// Worker ids (as leases name them) → worker names, from `worker list --json`.
fn worker_names(serve: &Serve) -> BTreeMap<String, String> {
    let run = serve.worker(&["list", "--json"], &[("ARBITER_TOKEN", ADMIN)]);
    run.assert_code(0);
    let list = assert_schema("worker-list", &run.stdout);
    list["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| (w["id"].as_str().unwrap().to_string(), w["name"].as_str().unwrap().to_string()))
        .collect()
}

/// A tournament of four candidates spreads over two workers; a worker that registered
/// without the runner the candidates need never claims one of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tournament_spreads_over_workers_that_have_its_runner() {
    let serve = Serve::start(&["--lease-seconds", "5"], None);
    let repo = plan_repo(&[]);
    let holds = holds_dir();
    let plan = plan_json("spread", repo.path(), holds.path(), vec![task("S", &[], 4)]);
    let store = store_of(&serve, None).await;
    // Held until every candidate is claimed: no worker can finish one and take another.
    std::fs::write(holds.path().join("S"), "").unwrap();
    let mut other = Worker::register(&serve, "no-command", &["claude-code"]);
    other.start(&serve.url, &[]);
    import(&*store, &plan).await;
    let mut workers =
        [Worker::register(&serve, "cmd-1", &["command"]), Worker::register(&serve, "cmd-2", &["command"])];
    for w in workers.iter_mut() {
        w.start(&serve.url, &[]);
    }
    let names = worker_names(&serve);
    let logs = || all_logs(&serve, &[&other, &workers[0], &workers[1]]);
    let started = Instant::now();
    while unit_claims(&store.events("spread").await.unwrap(), "S", &names).len() < 4 {
        assert!(started.elapsed() < Duration::from_secs(60), "the four candidates were never all claimed\n{}", logs());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    std::fs::remove_file(holds.path().join("S")).unwrap();
    finished(&*store, "spread", Duration::from_secs(120), &logs).await;
    let view = store.plan("spread").await.unwrap().unwrap();
    assert_eq!(view.tasks[0].status.as_str(), "done", "{:?}\n{}", view.tasks[0].reason, logs());
    let claims = unit_claims(&store.events("spread").await.unwrap(), "S", &names);
    let candidates: BTreeSet<&String> =
        claims.iter().filter(|(u, _)| u.starts_with('c')).flat_map(|(_, w)| w).collect();
    assert_eq!(
        candidates.into_iter().cloned().collect::<Vec<_>>(),
        vec!["cmd-1".to_string(), "cmd-2".to_string()],
        "{claims:?}"
    );
    assert!(claims.values().all(|w| w.len() == 1), "a unit was claimed twice: {claims:?}");
    // The evaluation needs no runner: any worker may take it; no candidate went to the
    // worker without the runner.
    let candidate_claimers = claims.iter().filter(|(u, _)| u.starts_with('c')).flat_map(|(_, w)| w);
    assert!(!candidate_claimers.into_iter().any(|w| w == "no-command"), "{claims:?}");
    assert_eq!(repo.git(&["show", "arbiter/spread:S.txt"]), "S\n", "candidate 0's wrong answer won");
    other.stop();
}

/// `kill -9` of a worker in the middle of its candidates: their leases run out, another
/// worker runs those candidates again, and each is done once; the dead worker's agents die
/// with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_worker_s_candidates_are_run_again_by_another() {
    let serve = Serve::start(&["--lease-seconds", "3"], None);
    let repo = plan_repo(&[]);
    let holds = holds_dir();
    let plan = plan_json("killed", repo.path(), holds.path(), vec![task("K", &[], 2)]);
    let store = store_of(&serve, None).await;
    std::fs::write(holds.path().join("K"), "").unwrap();
    import(&*store, &plan).await;
    let mut doomed = Worker::register(&serve, "doomed", &["command"]);
    doomed.start(&serve.url, &[]);
    let names = worker_names(&serve);
    let started = Instant::now();
    while unit_claims(&store.events("killed").await.unwrap(), "K", &names).len() < 2 {
        assert!(started.elapsed() < Duration::from_secs(60), "{}", all_logs(&serve, &[&doomed]));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let marker = holds.path().display().to_string();
    assert!(wait_until(Duration::from_secs(30), || !processes_with(&marker).is_empty()), "the agents never started");
    doomed.kill_9();
    assert!(
        wait_until(Duration::from_secs(15), || processes_with(&marker).is_empty()),
        "the killed worker's agents outlived it:\n{}",
        processes_with(&marker)
            .iter()
            .map(|pid| {
                let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
                let keep: Vec<&str> = status
                    .lines()
                    .filter(|l| l.starts_with("State") || l.starts_with("PPid") || l.starts_with("NSpid"))
                    .collect();
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                format!("{pid} {} {}", keep.join(" "), String::from_utf8_lossy(&cmdline).replace('\0', " "))
            })
            .collect::<Vec<_>>()
            .join("\n")
    );
    let mut rescuer = Worker::register(&serve, "rescuer", &["command"]);
    rescuer.start(&serve.url, &[]);
    std::fs::remove_file(holds.path().join("K")).unwrap();
    let logs = || all_logs(&serve, &[&doomed, &rescuer]);
    finished(&*store, "killed", Duration::from_secs(120), &logs).await;
    let events = store.events("killed").await.unwrap();
    let names = worker_names(&serve);
    let claims = unit_claims(&events, "K", &names);
    assert_eq!(claims["c01"], vec!["doomed".to_string(), "rescuer".to_string()], "{claims:?}");
    assert_eq!(claims["c02"], vec!["doomed".to_string(), "rescuer".to_string()], "{claims:?}");
    let done: Vec<String> = events
        .iter()
        .filter(|e| e.kind == "unit_done")
        .filter_map(|e| e.data["unit"].as_str().map(str::to_string))
        .collect();
    assert_eq!(done.iter().filter(|u| u.starts_with('c')).count(), 2, "each candidate done once: {done:?}");
    assert!(events.iter().any(|e| e.kind == "unit_expired"), "no lease ran out");
    assert_eq!(count(&events, "task_done").get("K"), Some(&1));
    assert_eq!(integrated(&repo, "arbiter/killed"), vec!["K"]);
}

/// A worker whose git cannot reach the control plane (every clone and fetch fails) claims
/// units it cannot run: it refuses each one — the server records why, `plan status` says
/// what holds the task up — pauses, and goes on; it never exits. Another worker runs every
/// candidate and the evaluation, and the plan finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_whose_git_cannot_reach_the_server_refuses_its_units_and_goes_on() {
    let serve = Serve::start(&["--lease-seconds", "5"], None);
    let repo = plan_repo(&[]);
    let holds = holds_dir();
    let plan = plan_json("refused", repo.path(), holds.path(), vec![task("R", &[], 3)]);
    let store = store_of(&serve, None).await;
    // The broken worker's git: the real one, but for talking to the server.
    let bin = tempfile::tempdir().unwrap();
    let real_git =
        String::from_utf8(std::process::Command::new("sh").args(["-c", "command -v git"]).output().unwrap().stdout)
            .unwrap()
            .trim()
            .to_string();
    let wrapper = bin.path().join("git");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh
for a in \"$@\"; do case \"$a\" in clone|fetch) echo \"fatal: unable to access the control plane: Failed to connect: Connection refused\" >&2; exit 128;; esac; done\nexec {real_git} \"$@\"\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.path().display(), std::env::var("PATH").unwrap_or_default());
    let mut broken = Worker::register(&serve, "broken", &["command"]);
    broken.start_with_env(&serve.url, &[], &[("PATH", path.as_str())]);
    import(&*store, &plan).await;
    let logs = |workers: &[&Worker]| all_logs(&serve, workers);
    let started = Instant::now();
    let refusals = |events: &[PlanEvent]| {
        events
            .iter()
            .filter(|e| {
                e.kind == "unit_expired" && e.data["reason"].as_str().is_some_and(|r| r.contains("could not run it"))
            })
            .count()
    };
    while refusals(&store.events("refused").await.unwrap()) == 0 {
        assert!(started.elapsed() < Duration::from_secs(60), "no unit was refused\n{}", logs(&[&broken]));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // What holds the task up, in `plan status`.
    let status = serve.cli(repo.path(), &["plan", "status", "refused"], &[("ARBITER_TOKEN", ADMIN)]);
    status.assert_code(0);
    assert!(
        status.stdout.contains("is waiting for another worker") && status.stdout.contains("could not run it"),
        "{}",
        status.stdout
    );
    let mut healthy = Worker::register(&serve, "healthy", &["command"]);
    healthy.start(&serve.url, &[]);
    finished(&*store, "refused", Duration::from_secs(180), &|| logs(&[&broken, &healthy])).await;
    let view = store.plan("refused").await.unwrap().unwrap();
    assert_eq!(view.tasks[0].status.as_str(), "done", "{:?}\n{}", view.tasks[0].reason, logs(&[&broken, &healthy]));
    assert_eq!(integrated(&repo, "arbiter/refused"), vec!["R"]);
    // Nothing was done by the broken worker, and no worker exited.
    let names = worker_names(&serve);
    let events = store.events("refused").await.unwrap();
    let done_by: BTreeSet<String> = events
        .iter()
        .filter(|e| e.kind == "unit_done")
        .filter_map(|e| e.data["worker"].as_str())
        .map(|w| names.get(w.split(':').next().unwrap_or(w)).cloned().unwrap_or_else(|| w.to_string()))
        .collect();
    assert_eq!(done_by, BTreeSet::from(["healthy".to_string()]), "{events:?}");
    assert!(refusals(&events) >= 1);
    assert!(broken.exited().is_none(), "the broken worker exited\n{}", logs(&[&broken]));
    assert!(healthy.exited().is_none(), "the healthy worker exited\n{}", logs(&[&healthy]));
    let broken_log = std::fs::read_to_string(broken.log()).unwrap_or_default();
    assert!(
        broken_log.contains("WARN") && broken_log.contains("refused") && broken_log.contains("Connection refused"),
        "{broken_log}"
    );
    assert!(serve.log_text().contains("refused: the worker could not run its work"), "{}", serve.log_text());
    broken.stop();
    healthy.stop();
}

/// `kill -9` of the server in the middle of a plan, then a restart on the same address:
/// the workers reconnect, the plan finishes, nothing is done twice.
async fn the_plan_survives_a_killed_server(pg: Option<PgDatabase>) {
    let pg_url = pg.as_ref().map(|p| p.url.clone());
    // On a fixed port, so the workers find it again after the restart.
    let mut serve = Serve::start_on(&format!("127.0.0.1:{}", free_port()), &["--lease-seconds", "5"], pg);
    let repo = plan_repo(&[("Q", &["P"])]);
    let holds = holds_dir();
    let mut tasks: Vec<Value> = (1..=6).map(|i| task(&format!("R{i}"), &[], 1)).collect();
    tasks.extend([task("P", &[], 1), task("Q", &["P"], 2)]);
    let plan = plan_json("crash", repo.path(), holds.path(), tasks);
    std::fs::write(holds.path().join("P"), "").unwrap();
    {
        let store = store_of(&serve, pg_url.as_deref()).await;
        import(&*store, &plan).await;
    }
    let mut workers = [Worker::register(&serve, "w1", &["command"]), Worker::register(&serve, "w2", &["command"])];
    for w in workers.iter_mut() {
        w.start(&serve.url, &[]);
    }
    let started = Instant::now();
    loop {
        let store = store_of(&serve, pg_url.as_deref()).await;
        let events = store.events("crash").await.unwrap();
        if events.iter().any(|e| e.kind == "task_claimed" && e.task_id.as_deref() == Some("P")) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "P was never claimed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    serve.crash_and_restart();
    std::fs::remove_file(holds.path().join("P")).unwrap();
    let store = store_of(&serve, pg_url.as_deref()).await;
    let logs = || all_logs(&serve, &[&workers[0], &workers[1]]);
    finished(&*store, "crash", Duration::from_secs(180), &logs).await;
    let view = store.plan("crash").await.unwrap().unwrap();
    for t in &view.tasks {
        assert_eq!(t.status.as_str(), "done", "{}: {:?}\n{}", t.spec.id, t.reason, logs());
    }
    let events = store.events("crash").await.unwrap();
    let done = count(&events, "task_done");
    assert!(done.len() == 8 && done.values().all(|n| *n == 1), "{done:?}");
    let mut on_branch = integrated(&repo, "arbiter/crash");
    on_branch.sort();
    assert_eq!(on_branch, vec!["P", "Q", "R1", "R2", "R3", "R4", "R5", "R6"]);
    for w in workers.iter_mut() {
        w.stop();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_plan_survives_a_killed_server_on_sqlite() {
    the_plan_survives_a_killed_server(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_plan_survives_a_killed_server_on_postgres() {
    the_plan_survives_a_killed_server(Some(PgDatabase::create())).await;
}

/// Sends `head` (a request's line and headers) on a new connection, and returns the first
/// line of the answer: what the server says before any body is sent.
fn raw_request(url: &str, head: &str) -> String {
    use std::io::{BufRead, Write};
    let addr = url.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let head = head.replacen("\r\n", &format!("\r\nHost: {addr}\r\n"), 1);
    stream.write_all(head.as_bytes()).unwrap();
    let mut line = String::new();
    std::io::BufReader::new(stream).read_line(&mut line).unwrap();
    line
}

/// Hostile clients of the work protocol: no token, another kind of token, another worker's
/// lease, a revoked token, a stale report, an oversized upload, bodies that are not what
/// the protocol says, files that would leave the run directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hostile_clients_of_the_work_protocol_are_refused() {
    let serve = Serve::start(&["--lease-seconds", "2", "--max-artifact-mib", "1"], None);
    let repo = plan_repo(&[]);
    let holds = holds_dir();
    let plan = plan_json("hostile", repo.path(), holds.path(), vec![task("H", &[], 1), task("I", &[], 1)]);
    let store = store_of(&serve, None).await;
    import(&*store, &plan).await;
    let a = Worker::register(&serve, "a", &["command"]);
    let b = Worker::register(&serve, "b", &["command"]);
    let (ta, tb) = (a.token(), b.token());
    let http = http();
    let post = |path: &str, token: Option<&str>, body: Value| {
        let mut r = http.post(serve.at(path)).json(&body);
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        r.send()
    };
    let claim = json!({"slot": "1", "wait_ms": 0});
    assert_eq!(post("/api/v1/work/claim", None, claim.clone()).await.unwrap().status(), 401);
    assert_eq!(post("/api/v1/work/claim", Some("arbw_not_a_token"), claim.clone()).await.unwrap().status(), 401);
    assert_eq!(post("/api/v1/work/claim", Some(ADMIN), claim.clone()).await.unwrap().status(), 403);
    assert_eq!(post("/api/v1/work/claim", Some(BOOTSTRAP), claim.clone()).await.unwrap().status(), 403);
    let r = post("/api/v1/work/claim", Some(&ta), json!({"slot": "../x", "wait_ms": 0})).await.unwrap();
    assert_eq!(r.status(), 422);
    let r = post("/api/v1/work/claim", Some(&ta), json!({"slot": "1", "colour": "red"})).await.unwrap();
    assert_eq!(r.status(), 422);
    assert!(r.text().await.unwrap().contains("colour"));
    let r = http
        .post(serve.at("/api/v1/work/claim"))
        .bearer_auth(&ta)
        .header("content-type", "application/json")
        .body("{")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);

    // A claims a task; B may not act on A's lease.
    let got: Value = post("/api/v1/work/claim", Some(&ta), claim.clone()).await.unwrap().json().await.unwrap();
    assert_eq!(got["status"], "assigned", "{got}");
    let lease = &got["assignment"]["lease"];
    let lease_ref = json!({"plan_id": lease["plan_id"], "task_id": lease["task_id"], "fence": lease["fence"], "worker": lease["worker"], "unit": null});
    let beat = json!({"leases": [lease_ref]});
    let r = post("/api/v1/work/heartbeat", Some(&tb), beat.clone()).await.unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(r.json::<Value>().await.unwrap()["error"], "not_your_lease");
    let failed = json!({"lease": lease_ref, "verdict": {"outcome": "failed", "reason": "forged", "retry": "never", "run_id": null}, "cost": "0"});
    assert_eq!(post("/api/v1/work/report", Some(&tb), failed.clone()).await.unwrap().status(), 403);
    let r: Value = post("/api/v1/work/heartbeat", Some(&ta), beat.clone()).await.unwrap().json().await.unwrap();
    assert_eq!(r["renewed"], json!([true]));
    // Files that would leave the run directory, or were never uploaded.
    let won = |files: Value| json!({"lease": lease_ref, "verdict": {"outcome": "won", "run_id": "20261201T000000Z-abcdef", "winner": "c01"}, "cost": "0", "files": files});
    let r = post(
        "/api/v1/work/report",
        Some(&ta),
        won(json!([{"path": "../../etc/passwd", "sha256": "0".repeat(64), "size": 1}])),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 422);
    assert!(r.text().await.unwrap().contains("not a path inside a run directory"));
    let r = post(
        "/api/v1/work/report",
        Some(&ta),
        won(json!([{"path": "candidates/c01/patch.diff", "sha256": "a".repeat(64), "size": 1}])),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 422);
    assert!(r.text().await.unwrap().contains("was not uploaded"));
    let r = post("/api/v1/work/report", Some(&ta), won(json!([]))).await.unwrap();
    assert_eq!(r.status(), 422);
    // A report with the next claim: B may not end A's lease that way either, and claims
    // nothing; a bad claim is refused before the report is taken.
    let task_status = |task: &str| {
        let store = store.clone();
        let task = task.to_string();
        async move { store.plan("hostile").await.unwrap().unwrap().task(&task).unwrap().status.as_str().to_string() }
    };
    let other = if lease["task_id"] == "H" { "I" } else { "H" };
    let and_claim = |slot: &str| json!({"report": failed, "claim": {"slot": slot, "wait_ms": 0}});
    let r = post("/api/v1/work/report-and-claim", Some(&tb), and_claim("1")).await.unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(task_status(other).await, "ready", "a refused report claimed nothing");
    let r = post("/api/v1/work/report-and-claim", Some(&ta), and_claim("../x")).await.unwrap();
    assert_eq!(r.status(), 422);
    assert_eq!(task_status(lease["task_id"].as_str().unwrap()).await, "running", "the report was not taken");
    let r =
        post("/api/v1/work/report-and-claim", Some(&ta), json!({"report": failed, "claim": {"slot": "1"}, "then": 1}))
            .await
            .unwrap();
    assert_eq!(r.status(), 422);
    // An oversized upload is refused on its declared size, before its body is read.
    let status = raw_request(
        &serve.url,
        &format!(
            "PUT /api/v1/artifacts/{} HTTP/1.1\r\nAuthorization: Bearer {ta}\r\nContent-Length: {}\r\n\r\n",
            "b".repeat(64),
            2 << 20
        ),
    );
    assert!(status.starts_with("HTTP/1.1 413"), "{status}");
    let artifacts = serve.data_dir().join("artifacts");
    assert!(!artifacts.exists() || files_under(&artifacts).iter().all(|f| !f.ends_with("b".repeat(64))));
    // The lease runs out and the sweeper takes it back: A's late report is refused (409).
    let started = Instant::now();
    loop {
        let r: Value =
            post("/api/v1/work/heartbeat", Some(&tb), json!({"leases": []})).await.unwrap().json().await.unwrap();
        assert_eq!(r["renewed"], json!([]));
        let view = store.plan("hostile").await.unwrap().unwrap();
        let t = view.task(lease["task_id"].as_str().unwrap()).unwrap();
        if t.status.as_str() != "running" {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "the lease never ran out");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let r = post("/api/v1/work/report", Some(&ta), failed.clone()).await.unwrap();
    assert_eq!(r.status(), 409);
    assert_eq!(r.json::<Value>().await.unwrap()["error"], "stale_lease");
    assert!(store.events("hostile").await.unwrap().iter().any(|e| e.kind == "stale_report_refused"));
    let r = post("/api/v1/work/report-and-claim", Some(&ta), and_claim("1")).await.unwrap();
    assert_eq!(r.status(), 409);
    assert_eq!(task_status(other).await, "ready", "a stale report claimed nothing");
    // A revoked token is refused everywhere.
    serve.worker(&["revoke", "b"], &[("ARBITER_TOKEN", ADMIN)]).assert_code(0);
    assert_eq!(post("/api/v1/work/claim", Some(&tb), claim.clone()).await.unwrap().status(), 401);
    // And none of it put a token in the server's log.
    assert_no_token(std::slice::from_ref(&serve.log), &[ta, tb, ADMIN.to_string(), BOOTSTRAP.to_string()]);
}

/// `arbiter bench queue` drives the work protocol for real: every task of its plan is
/// claimed and reported (a plan the server refuses task by task, as one without verify
/// commands once was, is an error, not a fast benchmark), and the wake-ups are measured.
#[test]
fn the_queue_benchmark_claims_and_reports_every_task() {
    let serve = Serve::start(&[], None);
    let repo = TestRepo::new();
    repo.write("README.md", "# bench\n");
    repo.commit_all("start");
    let tokens = [("ARBITER_TOKEN", ADMIN), ("ARBITER_BOOTSTRAP_TOKEN", BOOTSTRAP)];
    let bench = ["bench", "queue", "--workers", "3", "--tasks", "30", "--wakeups", "2", "--json"];
    // A wrong admin token: refused before any worker is registered, as the user's to fix.
    let wrong = serve.cli(
        repo.path(),
        &bench,
        &[("ARBITER_TOKEN", "not-the-admin-token-0123456789abcdef"), ("ARBITER_BOOTSTRAP_TOKEN", BOOTSTRAP)],
    );
    wrong.assert_code(2);
    assert!(wrong.stderr.contains("401") && wrong.stderr.contains("ARBITER_ADMIN_TOKEN"), "{}", wrong.stderr);
    let workers = serve.cli(repo.path(), &["worker", "list", "--json"], &tokens);
    assert!(!workers.assert_code(0).stdout.contains("bench-"), "no bench worker was registered: {}", workers.stdout);
    // A server with someone's work on it: the benchmark's workers would take it, so it refuses.
    let theirs = json!({"id": "theirs", "name": "real work", "repository": repo.path().display().to_string(),
        "defaults": {"verify": ["true"]},
        "tasks": [{"id": "T1", "title": "Real work", "description": "Write t1.txt holding t1.", "acceptance_criteria": ["t1.txt exists"]}]});
    repo.write("theirs.json", theirs.to_string());
    serve.cli(repo.path(), &["plan", "import", "theirs.json"], &tokens).assert_code(0);
    let refused = serve.cli(repo.path(), &bench, &tokens);
    refused.assert_code(2);
    assert!(
        refused.stderr.contains("theirs") && refused.stderr.contains("arbiter plan cancel ID"),
        "{}",
        refused.stderr
    );
    let status = serve.cli(repo.path(), &["plan", "status", "theirs", "--json"], &tokens);
    assert!(status.stdout.contains("\"ready\""), "their task is untouched: {}", status.stdout);
    // Following the hint: cancelled, their plan is left alone and the benchmark runs.
    serve.cli(repo.path(), &["plan", "cancel", "theirs"], &tokens).assert_code(0);
    let run = serve.cli(repo.path(), &bench, &tokens);
    run.assert_code(0);
    let report = assert_schema("bench-queue", &run.stdout);
    assert_eq!(report["cycles"], 30, "{report:#}");
    assert_eq!(report["wakeup_ms"]["samples"], 2, "{report:#}");
    assert!(report["claim_complete_per_second"].as_f64().is_some_and(|r| r > 0.0), "{report:#}");
    assert!(!serve.log_text().contains(ADMIN) && !serve.log_text().contains(BOOTSTRAP));
}

/// A spread tournament runs with the settings its attempt started with: the repository's
/// configuration, edited between two unit claims, changes nothing for the second unit
/// (while a task claimed afterwards runs with the edit).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_unit_of_a_spread_tournament_runs_with_its_attempts_settings() {
    let serve = Serve::start(&[], None);
    let repo = plan_repo(&[]);
    let holds = holds_dir();
    let store = store_of(&serve, None).await;
    import(&*store, &plan_json("frozen", repo.path(), holds.path(), vec![task("F", &[], 2)])).await;
    let w = Worker::register(&serve, "w", &["command"]);
    let v = Worker::register(&serve, "v", &["command"]);
    let http = http();
    let claim = |worker: &Worker, slot: &str| {
        http.post(serve.at("/api/v1/work/claim"))
            .bearer_auth(worker.token())
            .json(&json!({"slot": slot, "wait_ms": 0}))
            .send()
    };
    let first: Value = claim(&w, "1").await.unwrap().json().await.unwrap();
    assert_eq!(first["assignment"]["unit"]["name"], "c01", "{first}");
    let kept = first["assignment"]["settings"].clone();
    assert_eq!(kept["keep_worktrees"]["value"], false, "{kept}");

    repo.write(".arbiter/config.toml", "[run]\nkeep_worktrees = true\n");
    let second: Value = claim(&w, "2").await.unwrap().json().await.unwrap();
    assert_eq!(second["assignment"]["unit"]["name"], "c02", "{second}");
    assert_eq!(second["assignment"]["settings"], kept, "the second unit runs with the attempt's settings");

    // The edit holds for what starts after it.
    import(&*store, &plan_json("later", repo.path(), holds.path(), vec![task("L", &[], 1)])).await;
    let later: Value = claim(&v, "1").await.unwrap().json().await.unwrap();
    assert_eq!(later["assignment"]["task"]["id"], "L", "{later}");
    assert_eq!(later["assignment"]["settings"]["keep_worktrees"]["value"], true, "{later}");
}
