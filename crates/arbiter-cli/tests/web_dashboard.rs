//! The web dashboard in a real browser: headless Chromium (from the distribution's
//! packages) driven over WebDriver against a real `arbiter serve` — a plan running on a real
//! `arbiter worker run` and on a worker the test plays through the work protocol — and
//! against `arbiter ui` in a repository whose plan ran here.
//!
//! The tests log in through the form, open every page and read its DOM, watch a task change
//! status without a reload when the test reports it through the API, cancel a plan through
//! its confirmation, check that a read-only token can look but not act, and that hostile
//! titles render as text. A screenshot of every page is saved under
//! `target/web-screenshots/` (a desktop window, and the plan page on a phone's width).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::webdriver::{Browser, ChromeDriver, WAIT};
use common::*;
use serde_json::{Value, json};

/// Where the screenshots go: `target/web-screenshots/` of the workspace.
fn screenshots() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/web-screenshots")
}

async fn shot(browser: &Browser, name: &str) {
    browser.screenshot(&screenshots().join(format!("{name}.png"))).await;
}

/// How long the real worker may take over a task (a tournament on a busy machine).
const WORK: Duration = Duration::from_secs(120);

/// Polls `check` (every 100 ms, up to [`WAIT`]) until it gives a value; `what` says what
/// was awaited when it never does.
async fn eventually<T, F, Fut>(what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    eventually_within(WAIT, what, check).await
}

/// [`eventually`], up to `limit`.
async fn eventually_within<T, F, Fut>(limit: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(started.elapsed() < limit, "{what}: it never happened within {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The plan's name and a task's title: markup, a script and terminal escape sequences,
/// which the pages must show as text.
const HOSTILE_NAME: &str = "Web <script>window.__pwned = 1</script> \u{1b}[31mred";
const HOSTILE_TITLE: &str = "<img src=x onerror=\"window.__pwned = 2\"> \u{1b}]0;pwned\u{7}";

/// A repository whose agent writes `greet.py`: candidate 0 the right greeting, the
/// others a wrong one (its verify command fails).
fn greeting_repo() -> TestRepo {
    let repo = TestRepo::new();
    repo.write("README.md", "# greetings\n");
    repo.write(".gitignore", "__pycache__/\n");
    repo.write_agent(
        "agent.sh",
        r#"set -e
case "$ARBITER_CANDIDATE_INDEX" in
  0) printf 'def greet():\n    # the greeting the tests expect\n    return "hello"\n' > greet.py ;;
  *) printf 'def greet():\n    return "bye"\n' > greet.py ;;
esac
echo "candidate $ARBITER_CANDIDATE_ID wrote greet.py"
"#,
    );
    repo.commit_all("an agent");
    repo
}

const VERIFY_GREETING: &str = "python3 -c \"import greet; assert greet.greet() == 'hello'\"";

fn task(id: &str, title: &str, deps: &[&str]) -> Value {
    json!({
        "id": id, "title": title, "dependencies": deps,
        "description": format!("Carry out step {id} of the greeting work and leave the repository green."),
        "acceptance_criteria": [format!("step {id} is done")],
        // Only the test's own worker has this runner: these tasks wait for it.
        "runners": "claude-code",
    })
}

/// Plan `web`: A (two candidates, the command runner: the real worker runs it) before a
/// diamond B, C → D; E (claimed by the test) before F; H with a hostile title after A.
fn plan_json(repo: &Path) -> Value {
    let mut a = task("A", "Write the greeting", &[]);
    a["runners"] = json!("command");
    a["candidates"] = json!(2);
    a["verify"] = json!([VERIFY_GREETING]);
    json!({
        "id": "web", "name": HOSTILE_NAME, "repository": repo.display().to_string(),
        "budget_usd": "5",
        "defaults": {"command": "./agent.sh", "verify": ["true"], "candidates": 1, "retry_backoff_seconds": 0},
        "tasks": [
            a,
            task("B", "Greet in English", &["A"]),
            task("C", "Greet in French", &["A"]),
            task("D", "Pick the greeting", &["B", "C"]),
            task("E", "Measure the greeting", &[]),
            task("F", "Report the measure", &["E"]),
            task("H", HOSTILE_TITLE, &["A"]),
        ],
    })
}

/// A worker the test plays itself through the work protocol, and the lease it holds.
struct Probe {
    token: String,
    lease: Value,
}

impl Probe {
    /// Registers with the bootstrap token and claims (the only task it can run: E).
    async fn claim(serve: &Serve, http: &reqwest::Client) -> Probe {
        let registered = http
            .post(serve.at("/api/v1/workers/register"))
            .bearer_auth(BOOTSTRAP)
            .json(&json!({"name": "probe", "runners": ["claude-code"], "slots": 1}))
            .send()
            .await
            .unwrap();
        assert_eq!(registered.status(), 201);
        let token = registered.json::<Value>().await.unwrap()["token"].as_str().unwrap().to_string();
        let claimed: Value = http
            .post(serve.at("/api/v1/work/claim"))
            .bearer_auth(&token)
            .json(&json!({"slot": "1", "plan": "web", "wait_ms": 10_000}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(claimed["status"], "assigned", "{claimed}\n{}", serve.log_text());
        let l = &claimed["assignment"]["lease"];
        assert_eq!(l["task_id"], "E", "{claimed}");
        let lease = json!({"plan_id": l["plan_id"], "task_id": l["task_id"], "fence": l["fence"], "worker": l["worker"], "unit": null});
        Probe { token, lease }
    }

    async fn post(&self, serve: &Serve, http: &reqwest::Client, path: &str, body: Value) {
        let r = http.post(serve.at(path)).bearer_auth(&self.token).json(&body).send().await.unwrap();
        let status = r.status();
        assert!(status.is_success(), "{path}: {status} {}", r.text().await.unwrap_or_default());
    }
}

/// The plan as the API shows it (admin token).
async fn plan_view(serve: &Serve, http: &reqwest::Client) -> Value {
    http.get(serve.at("/api/v1/plans/web")).bearer_auth(ADMIN).send().await.unwrap().json().await.unwrap()
}

fn task_of<'a>(view: &'a Value, id: &str) -> &'a Value {
    view["tasks"].as_array().unwrap().iter().find(|t| t["spec"]["id"] == id).unwrap()
}

/// The text of the status cell of `task`'s row in the plan page's task table.
async fn status_cell(browser: &Browser, task: &str) -> String {
    let found = browser
        .script(
            "for (const row of document.querySelectorAll('#tasks tbody tr')) { \
               if (row.cells[0].querySelector('a').textContent === arguments[0]) { return row.cells[1].textContent; } \
             } return null;",
            json!([task]),
        )
        .await;
    found.as_str().unwrap_or_else(|| panic!("no row of task {task} in the task table")).to_string()
}

/// Logs in through the form with `token`, starting from `path` (the form sends the
/// browser back there).
async fn log_in(browser: &Browser, base: &str, path: &str, token: &str) {
    browser.goto(&format!("{base}{path}")).await;
    assert!(browser.url().await.contains("/login?next="), "{}", browser.url().await);
    browser.find("#token").await.type_text(token).await;
    browser.find("form[action='/login'] button[type=submit]").await.click().await;
    let wanted = format!("{base}{path}");
    let wanted = &wanted;
    eventually("the login leads back to the page", || async move { (browser.url().await == *wanted).then_some(()) })
        .await;
}

/// Asserts that nothing a hostile title carried ran or became markup.
async fn assert_inert(browser: &Browser) {
    let r = browser
        .script(
            "return [typeof window.__pwned, document.querySelectorAll('main script, main img').length, document.scripts.length]",
            json!([]),
        )
        .await;
    assert_eq!(r, json!(["undefined", 0, 1]), "a title ran or became markup on {}", browser.url().await);
}

/// A plan running on a control plane, seen in a real browser: every page, a task's status
/// changing live, a cancel through its confirmation, a read-only token that cannot act,
/// hostile titles shown as text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_of_a_running_plan_in_a_real_browser() {
    let Some(driver) = ChromeDriver::start("the dashboard in a real browser").await else { return };
    let serve = Serve::start(&["--lease-seconds", "120"], None);
    let http = http();
    let repo = greeting_repo();
    repo.write("plans/web.json", plan_json(repo.path()).to_string());
    let imported = serve.cli(repo.path(), &["plan", "import", "plans/web.json"], &[("ARBITER_TOKEN", ADMIN)]);
    imported.assert_code(0);

    // The test's worker claims E before the real worker starts (which takes A, the only
    // task it has the runner for).
    let probe = Probe::claim(&serve, &http).await;
    let mut worker = Worker::register(&serve, "w1", &["command"]);
    worker.start(&serve.url, &[]);
    let (s, h, w) = (&serve, &http, &worker);
    let a = eventually_within(WORK, "task A is done", || async move {
        let view = plan_view(s, h).await;
        let a = task_of(&view, "A");
        let failed = a["status"] == "failed";
        assert!(!failed, "A failed: {a}\n{}", std::fs::read_to_string(w.log()).unwrap_or_default());
        (a["status"] == "done").then(|| a.clone())
    })
    .await;
    let run_id = a["run_id"].as_str().expect("A's run").to_string();
    let commit = a["commit"].as_str().expect("A's commit").to_string();

    // The login form.
    let browser = driver.browser(1280, 900).await;
    let b = &browser;
    browser.goto(&serve.at("/")).await;
    browser.wait_for("#token").await;
    assert_eq!(browser.status().await, 200);
    shot(&browser, "login").await;
    log_in(&browser, &serve.url, "/", ADMIN).await;

    // Plans: the plan's row, its progress, status counts and budget.
    let row = browser.find("#plan-web").await;
    let text = row.text().await;
    assert!(text.contains("<script>window.__pwned = 1</script>"), "the name is shown as text: {text}");
    assert!(text.contains("\\u{1b}[31mred"), "the escape sequence is shown escaped: {text}");
    assert!(text.contains("1/7 finished"), "{text}");
    assert!(text.contains("running 1") && text.contains("ready 3") && text.contains("done 1"), "{text}");
    assert!(text.contains("$5"), "the budget: {text}");
    assert_eq!(browser.find(".who .badge.role").await.text().await, "admin");
    assert_inert(&browser).await;
    shot(&browser, "plans").await;

    // The plan: its DAG by depth with the critical path, the branch with A's commit, the
    // task table, the admin's actions.
    row.find_all("a").await[0].click().await;
    eventually("the plan page opens", || async move { b.url().await.ends_with("/plans/web").then_some(()) }).await;
    let h1 = browser.find("h1").await.text().await;
    assert!(h1.contains("<script>") && h1.contains("\\u{1b}[31m"), "{h1}");
    let boxes = browser.find_all(".dag svg g.node").await;
    assert_eq!(boxes.len(), 7, "one box per task");
    assert_eq!(browser.find_all(".dag svg path.edge").await.len(), 6, "one curve per dependency");
    assert!(!browser.find_all(".dag svg g.node.critical").await.is_empty(), "the critical path is marked");
    assert!(!browser.find_all(".dag svg path.edge.critical").await.is_empty());
    let fills = browser
        .script(
            "return Array.from(document.querySelectorAll('.dag svg g.node')).map(g => g.querySelector('title').textContent.split(' ')[0] + '=' + g.querySelector('rect').getAttribute('class'))",
            json!([]),
        )
        .await;
    for expected in ["A=fill-done", "E=fill-running", "B=fill-ready", "D=fill-blocked"] {
        assert!(fills.as_array().unwrap().iter().any(|f| f == expected), "{expected} in {fills}");
    }
    // Boxes of a deeper task are further right.
    let x_of = |t: &str| {
        let t = t.to_string();
        let browser = &browser;
        async move {
            browser
                .script(
                    "for (const g of document.querySelectorAll('.dag svg g.node')) { if (g.querySelector('title').textContent.startsWith(arguments[0] + ' ')) return +g.querySelector('rect').getAttribute('x'); } return null;",
                    json!([t]),
                )
                .await
                .as_f64()
                .unwrap()
        }
    };
    assert!(x_of("A").await < x_of("B").await && x_of("B").await < x_of("D").await);
    assert_eq!(x_of("B").await, x_of("C").await, "B and C are at the same depth");
    let critical = browser.find("#dag-card p").await.text().await;
    assert!(critical.contains("Critical path") && critical.contains("→"), "{critical}");
    assert!(!browser.find_all("#tasks tr.critical").await.is_empty(), "critical rows are marked in the table");
    let branch = browser.find("#branch").await.text().await;
    assert!(branch.contains(&commit[..10]) && branch.contains("A"), "A's commit is on the branch: {branch}");
    assert_eq!(browser.find_all("#tasks tbody tr").await.len(), 7);
    assert_eq!(status_cell(&browser, "A").await, "done");
    assert_eq!(status_cell(&browser, "E").await, "running");
    assert_eq!(status_cell(&browser, "D").await, "blocked");
    assert!(browser.find("#actions-h").await.text().await.contains("Actions"));
    assert_inert(&browser).await;
    shot(&browser, "plan").await;
    browser.resize(390, 844).await;
    shot(&browser, "plan-phone").await;
    let overflow = browser
        .script("return document.documentElement.scrollWidth - document.documentElement.clientWidth", json!([]))
        .await;
    assert!(overflow.as_i64().unwrap() <= 0, "the plan page scrolls sideways on a phone by {overflow} px");
    browser.resize(1280, 900).await;

    // Filters: only the running task.
    browser.goto(&serve.at("/plans/web?status=running")).await;
    assert_eq!(browser.find_all("#tasks tbody tr").await.len(), 1);
    assert_eq!(status_cell(&browser, "E").await, "running");

    // A task: its attempt on w1 with its run; E's lease held by the probe.
    browser.goto(&serve.at("/plans/web/task?id=A")).await;
    let attempts = browser.find("#attempts").await.text().await;
    assert!(attempts.contains("succeeded") && attempts.contains(&run_id), "{attempts}");
    shot(&browser, "task").await;
    browser.goto(&serve.at("/plans/web/task?id=H")).await;
    let h1 = browser.find("h1").await.text().await;
    assert!(h1.contains("<img src=x onerror=") && h1.contains("\\u{1b}]0;pwned\\u{7}"), "{h1}");
    assert_inert(&browser).await;
    browser.goto(&serve.at("/plans/web/task?id=E")).await;
    let state = browser.find("#task-state").await.text().await;
    assert!(state.contains("running") && state.contains("held by probe:1"), "{state}");
    let task_events = browser.find("#task-events").await.text().await;
    assert!(task_events.contains("by probe:1"), "{task_events}");

    // A's run, reached from its task: the candidates, the ranking with its reasons, the
    // gates, the diffs side by side, the transcripts collapsed.
    browser.goto(&serve.at("/plans/web/task?id=A")).await;
    browser.find("#task-state a.mono").await.click().await;
    let run_path = format!("/plans/web/runs/{run_id}");
    let run_path = &run_path;
    eventually("the run page opens", || async move { b.url().await.ends_with(run_path).then_some(()) }).await;
    let candidates = browser.find_all("#candidates tbody tr").await;
    assert_eq!(candidates.len(), 2);
    let winner = browser.find("#candidates tr.win").await.text().await;
    assert!(winner.contains("c01") && winner.contains("command"), "{winner}");
    let loser = browser.find("#cand-c02").await.text().await;
    assert!(!loser.contains('★'), "{loser}");
    let ranking = browser.find("section[aria-labelledby=rank-h]").await.text().await;
    assert!(ranking.contains("c01") && ranking.contains("c02"), "{ranking}");
    let votes = browser.find("section[aria-labelledby=votes-h]").await.text().await;
    assert!(votes.contains("No two candidates produced the same patch."), "c01 and c02 differ: {votes}");
    let gates = browser.find("#gates").await.text().await;
    assert!(gates.contains("import greet"), "the verify command is in the gates: {gates}");
    let diffs = browser.find_all(".side > div").await;
    assert_eq!(diffs.len(), 2);
    let added = browser.find("#diff-c01 pre.diff").await.text().await;
    assert!(added.contains("+    return \"hello\""), "{added}");
    assert!(!browser.find_all("#diff-c01 pre.diff .add").await.is_empty(), "added lines are highlighted");
    assert!(!browser.find_all("#diff-c01 pre.diff .str").await.is_empty(), "strings are highlighted");
    let side_by_side = browser
        .script(
            "const [a, b] = Array.from(document.querySelectorAll('.side > div')).map(d => d.getBoundingClientRect()); return a.top === b.top && a.right <= b.left;",
            json!([]),
        )
        .await;
    assert_eq!(side_by_side, json!(true), "the two diffs stand side by side");
    let transcripts = browser
        .script(
            "return Array.from(document.querySelectorAll('section[aria-labelledby=tr-h] details')).map(d => d.open)",
            json!([]),
        )
        .await;
    assert_eq!(transcripts, json!([false, false]), "transcripts are collapsed");
    shot(&browser, "run").await;

    // Workers: the real one and the probe, with their runners; the admin may revoke.
    browser.goto(&serve.at("/workers")).await;
    let w1 = browser.find("#worker-w1").await.text().await;
    assert!(w1.contains("command") && w1.contains("connected"), "{w1}");
    let p = browser.find("#worker-probe").await.text().await;
    assert!(p.contains("claude-code"), "{p}");
    assert_eq!(browser.find_all("#workers a.button.danger").await.len(), 2, "a revoke button per worker");
    shot(&browser, "workers").await;

    // Events: filtered by task and kind.
    browser.goto(&serve.at("/events?plan=web&task=E")).await;
    let events = browser.find("#events").await.text().await;
    assert!(events.contains("task_claimed") && !events.contains("task_done"), "{events}");
    // The claim names the worker as the workers' table does, by its name, not its id.
    let probe_id = probe.lease["worker"].as_str().unwrap().split(':').next().unwrap().to_string();
    assert!(events.contains("by probe:1 (fence 1)") && !events.contains(&probe_id), "{events}");
    browser.goto(&serve.at("/events")).await;
    let events = browser.find("#events").await.text().await;
    assert!(events.contains("task_done") && events.contains("task_claimed"), "{events}");
    shot(&browser, "events").await;

    // Live: the probe spends and then fails E through the API; the plan page, never
    // reloaded, shows both.
    browser.goto(&serve.at("/plans/web")).await;
    browser.script("window.__marker = 1", json!([])).await;
    let before = browser.find("#budget").await.text().await;
    assert!(before.contains("$0 spent") || before.contains("$0.00 spent"), "{before}");
    probe.post(&serve, &http, "/api/v1/work/charge", json!({"lease": probe.lease, "amount": "0.42"})).await;
    let failed = json!({"lease": probe.lease, "verdict": {"outcome": "failed", "reason": "the probe gave up", "retry": "never", "run_id": null}, "cost": "0"});
    probe.post(&serve, &http, "/api/v1/work/report", failed).await;
    eventually("E's row says failed without a reload", || async move {
        (status_cell(b, "E").await == "failed").then_some(())
    })
    .await;
    let live = browser.script("return [window.__marker, !!document.body.dataset.updated]", json!([])).await;
    assert_eq!(live, json!([1, true]), "the page was updated in place, not reloaded");
    let gauge = eventually("the budget gauge shows the spending", || async move {
        let t = b.find("#budget").await.text().await;
        t.contains("$0.42 spent").then_some(t)
    })
    .await;
    assert!(gauge.contains("of $5"), "{gauge}");

    // Costs: by plan and by task, the curve.
    browser.goto(&serve.at("/costs?plan=web")).await;
    let by_plan = browser.find("#by-plan").await.text().await;
    assert!(by_plan.contains("$0.42"), "{by_plan}");
    let by_task = browser.find("#by-task").await.text().await;
    assert!(by_task.contains("E") && by_task.contains("$0.42"), "{by_task}");
    let curve = browser.find("#chart svg polyline.line").await.attr("points").await.unwrap_or_default();
    assert_eq!(curve.split(' ').count(), 2, "the curve rises from $0 to the one charge: {curve}");
    assert_inert(&browser).await;
    shot(&browser, "costs").await;

    // Cancel: the button, the confirmation, the plan cancelled, the event naming who.
    browser.goto(&serve.at("/plans/web")).await;
    browser.find("a.button.danger[href='/plans/web/cancel']").await.click().await;
    eventually("the confirmation opens", || async move { b.url().await.ends_with("/plans/web/cancel").then_some(()) })
        .await;
    assert_eq!(browser.find("h1").await.text().await, "Cancel plan web?");
    assert!(browser.find("main").await.text().await.contains("5 unfinished task(s)"));
    shot(&browser, "cancel-confirmation").await;
    browser.find("main form button.danger").await.click().await;
    eventually("the plan page shows it cancelled", || async move {
        let on_plan = b.url().await.ends_with("/plans/web");
        let h2 = b.find_all("#summary h2").await;
        match h2.first() {
            Some(h) if on_plan => h.text().await.contains("cancelled").then_some(()),
            _ => None,
        }
    })
    .await;
    assert_eq!(status_cell(&browser, "D").await, "cancelled");
    assert!(browser.find_all("a.button.danger[href='/plans/web/cancel']").await.is_empty(), "no second cancel");
    browser.goto(&serve.at("/events?plan=web&kind=plan_cancelled")).await;
    let cancelled = browser.find("#events").await.text().await;
    assert!(cancelled.contains("plan_cancelled") && cancelled.contains("by admin"), "{cancelled}");
    browser.quit().await;

    // A read-only token: it logs in and reads every page, sees no action, and cannot act
    // even with its own session's CSRF token.
    let viewer_dir = tempfile::tempdir().unwrap();
    let viewer_file = viewer_dir.path().join("viewer.token");
    let made = serve.cli(
        repo.path(),
        &[
            "token",
            "create",
            "viewer",
            "--read-only",
            "--server",
            &serve.url,
            "--token-file",
            viewer_file.to_str().unwrap(),
        ],
        &[("ARBITER_TOKEN", ADMIN)],
    );
    made.assert_code(0);
    let viewer_token = std::fs::read_to_string(&viewer_file).unwrap().trim().to_string();
    std::fs::remove_file(&viewer_file).unwrap();
    let reader = driver.browser(1280, 900).await;
    log_in(&reader, &serve.url, "/plans/web", &viewer_token).await;
    assert_eq!(reader.find(".who .badge.role").await.text().await, "read-only");
    assert!(reader.find(".who").await.text().await.contains("token:viewer"));
    assert!(reader.find_all("#actions-h").await.is_empty(), "no Actions section for a read-only session");
    // The session's own CSRF token (in its logout form), for the forged posts below.
    let csrf = reader.find("form[action='/logout'] input[name=csrf]").await.attr("value").await.unwrap();
    assert_eq!(reader.find_all(".dag svg g.node").await.len(), 7);
    shot(&reader, "read-only-plan").await;
    for path in ["/", "/plans/web/task?id=A", &format!("/plans/web/runs/{run_id}"), "/workers", "/events", "/costs"] {
        reader.goto(&serve.at(path)).await;
        assert_eq!(reader.status().await, 200, "{path}");
        assert!(reader.find_all("a.button.danger, a.button[href*='/retry']").await.is_empty(), "an action on {path}");
    }
    // The confirmations are refused before they are shown.
    for path in ["/plans/web/budget?limit=100", "/plans/web/cancel", "/plans/web/retry?task=E", "/workers/w1/revoke"] {
        reader.goto(&serve.at(path)).await;
        assert_eq!(reader.status().await, 403, "{path}");
        assert!(reader.find("main").await.text().await.contains("read-only"), "{path}");
        assert!(reader.find_all("main form").await.is_empty(), "no form to confirm on {path}");
    }
    let forged = reader
        .async_script(
            "const done = arguments[arguments.length - 1]; \
             const post = (path, fields) => fetch(path, {method: 'POST', body: new URLSearchParams(fields), redirect: 'manual'}).then(r => r.status); \
             Promise.all([ \
               post('/plans/web/budget', {csrf: arguments[0], limit: '100'}), \
               post('/plans/web/budget', {limit: '100'}), \
               post('/plans/web/cancel', {csrf: arguments[0]}), \
               post('/workers/w1/revoke', {csrf: arguments[0]}), \
             ]).then(done, e => done(String(e)));",
            json!([csrf]),
        )
        .await;
    assert_eq!(forged, json!([403, 403, 403, 403]), "a read-only session cannot act");
    let view = plan_view(&serve, &http).await;
    assert_eq!(view["plan"]["budget"]["limit"], "5", "the budget is unchanged: {}", view["plan"]["budget"]);
    let workers: Value =
        http.get(serve.at("/api/v1/workers")).bearer_auth(ADMIN).send().await.unwrap().json().await.unwrap();
    assert!(workers.to_string().contains("\"w1\""), "{workers}");
    assert!(!serve.log_text().contains(&viewer_token), "the token reached the server's log");
    reader.quit().await;
    worker.stop();
}

/// `arbiter ui` in a repository whose plan ran here: its one-time link logs in once, the
/// runs page lists the plan's runs, a run's page shows its candidates; the same link a
/// second time is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arbiter_ui_logs_in_once_and_shows_the_local_runs() {
    let Some(driver) = ChromeDriver::start("arbiter ui in a real browser").await else { return };
    let repo = greeting_repo();
    repo.arbiter(&["init"]).assert_code(0);
    let plan = json!({
        "id": "local", "name": "Local greetings",
        "defaults": {"runners": "command", "command": "./agent.sh", "candidates": 2, "verify": [VERIFY_GREETING]},
        "tasks": [{"id": "G", "title": "Write the greeting",
                   "description": "Write greet.py whose greet() returns hello.",
                   "acceptance_criteria": ["greet() returns hello"]}],
    });
    repo.write("plan.json", plan.to_string());
    repo.arbiter(&["plan", "import", "plan.json"]).assert_code(0);
    repo.arbiter(&["plan", "run", "local"]).assert_code(0);

    let mut ui = Killed::spawn(repo.arbiter_cmd(&["ui", "--bind", "127.0.0.1:0", "--no-open"]));
    let lines = ui.stdout_lines();
    let lines = &lines;
    let login = eventually("arbiter ui prints its one-time link", || async move {
        lines.try_recv().ok().and_then(|l: String| l.trim().contains("/login/once?code=").then(|| l.trim().to_string()))
    })
    .await;
    let base = login.split("/login/once").next().unwrap().to_string();

    let browser = driver.browser(1280, 900).await;
    let b = &browser;
    browser.goto(&login).await;
    let home = format!("{base}/");
    let home = &home;
    eventually("the link logs in", || async move { (b.url().await == *home).then_some(()) }).await;
    assert_eq!(browser.find(".who .badge.role").await.text().await, "admin");
    assert!(browser.find("#plan-local").await.text().await.contains("1/1 finished"));
    browser.find("nav a[href='/runs']").await.click().await;
    eventually("the runs page opens", || async move { b.url().await.ends_with("/runs").then_some(()) }).await;
    let runs = browser.find_all("#runs tbody tr").await;
    assert_eq!(runs.len(), 1, "{}", browser.body_text().await);
    let row = runs[0].text().await;
    assert!(row.contains("succeeded") && row.contains("c01"), "{row}");
    shot(&browser, "ui-runs").await;
    runs[0].find_all("a").await[0].click().await;
    eventually("the run page opens", || async move { b.url().await.contains("/runs/").then_some(()) }).await;
    assert_eq!(browser.find_all("#candidates tbody tr").await.len(), 2);
    assert!(browser.find("#candidates tr.win").await.text().await.contains("c01"));
    assert!(browser.find("#diff-c01 pre.diff").await.text().await.contains("return \"hello\""));
    shot(&browser, "ui-run").await;
    browser.quit().await;

    // The same link again, in a browser of its own: used already.
    let other = driver.browser(1280, 900).await;
    other.goto(&login).await;
    assert_eq!(other.status().await, 401);
    assert!(other.find("main").await.text().await.contains("used already"), "{}", other.body_text().await);
    assert!(other.find_all(".who").await.is_empty(), "nobody is logged in");
    other.goto(&format!("{base}/runs")).await;
    assert!(other.url().await.contains("/login?next="), "{}", other.url().await);
    other.quit().await;
    ui.stop();
}

/// A child process killed when the test ends, however it ends.
struct Killed(std::process::Child);

impl Killed {
    fn spawn(mut cmd: std::process::Command) -> Killed {
        Killed(cmd.stdout(std::process::Stdio::piped()).spawn().expect("start arbiter"))
    }

    /// Its stdout, line by line, as they come.
    fn stdout_lines(&mut self) -> std::sync::mpsc::Receiver<String> {
        use std::io::BufRead;
        let out = self.0.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        rx
    }

    /// SIGINT, as Ctrl-C: it must exit 0.
    fn stop(&mut self) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.0.id() as i32), nix::sys::signal::Signal::SIGINT)
            .unwrap();
        let stopped = wait_until(Duration::from_secs(15), || self.0.try_wait().unwrap().is_some());
        assert!(stopped, "arbiter ui did not stop on Ctrl-C");
        assert_eq!(self.0.wait().unwrap().code(), Some(0));
    }
}

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
