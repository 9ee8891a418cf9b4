//! The web dashboard over real HTTP on a loopback port, with a real SQLite store, a real git
//! repository and real plan administration: who may open which page, logins and their
//! cookies, one-time links, CSRF and the admin role on every action, read-only tokens on the
//! API, hostile text, and bad input. (The pages in a real browser: the CLI's
//! `web_dashboard` tests.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use arbiter_core::plan::file::{Syntax, parse};
use arbiter_runner::coordinator::OneRepository;
use arbiter_runner::plan_admin::{LocalPlanAdmin, PlanAdmin, PlanImport};
use arbiter_runner::workspace::Workspace;
use arbiter_server::serve::{ServeConfig, bind};
use arbiter_server::state::{AppState, Tokens};
use arbiter_store::plans::ImportMode;
use arbiter_store::sqlite::SqliteStore;
use arbiter_store::tokens::Role;
use arbiter_store::workers::Secret;
use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, COOKIE, LOCATION, SET_COOKIE};
use serde_json::json;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const BOOTSTRAP: &str = "bootstrap-token-0123456789abcdef0123456789abcdef";
const ADMIN: &str = "admin-token-0123456789abcdef0123456789abcdef";
const FORM: &str = "application/x-www-form-urlencoded";

/// A form body, as a browser encodes it.
fn form(fields: &[(&str, &str)]) -> String {
    let enc = |s: &str| -> String {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
                b' ' => "+".to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect()
    };
    fields.iter().map(|(k, v)| format!("{}={}", enc(k), enc(v))).collect::<Vec<_>>().join("&")
}

const HOSTILE: &str = "<script>alert(1)</script>\u{1b}[2J";

struct Server {
    url: String,
    state: AppState,
    admin: Arc<dyn PlanAdmin>,
    shutdown: CancellationToken,
    handle: JoinHandle<Result<(), arbiter_server::ServeError>>,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t.invalid"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A server over a fresh store and repository, with a plan `p` of three tasks whose names
/// are hostile.
async fn start() -> Server {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["commit", "-q", "--allow-empty", "-m", "init"]);
    let store = Arc::new(SqliteStore::open(&dir.path().join("arbiter.db")).await.unwrap());
    let repos = Arc::new(OneRepository(Workspace::at(repo.clone())));
    let admin: Arc<dyn PlanAdmin> = Arc::new(LocalPlanAdmin::new(store.clone(), repos.clone()));
    let tokens = Tokens::new(&Secret::new(BOOTSTRAP), &Secret::new(ADMIN)).unwrap();
    let state =
        AppState::new(store, tokens, dir.path()).with_admin(admin.clone()).with_plan_repositories(repos.clone());
    let plan = json!({
        "id": "p", "name": HOSTILE, "repository": repo.display().to_string(),
        "tasks": [
            {"id": "A", "title": HOSTILE},
            {"id": "B", "title": "second", "dependencies": ["A"]},
            {"id": "C", "title": "third", "dependencies": ["A"]},
        ],
    });
    let spec = parse(&plan.to_string(), Syntax::Json).unwrap();
    admin
        .import(&PlanImport { spec, mode: ImportMode::Add, apply: None, adopt_branch: None, gate: Default::default() })
        .await
        .unwrap();
    let bound = bind(ServeConfig::new("127.0.0.1:0".parse().unwrap())).await.unwrap();
    let url = bound.url();
    let shutdown = CancellationToken::new();
    let handle = tokio::spawn(bound.run(state.clone(), shutdown.clone()));
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    Server { url, state, admin, shutdown, handle, http, _dir: dir }
}

/// A logged-in browser: its cookie and its CSRF token.
struct Session {
    cookie: String,
    csrf: String,
}

impl Server {
    fn at(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }

    async fn login(&self, token: &str) -> reqwest::Response {
        self.http
            .post(self.at("/login"))
            .header(CONTENT_TYPE, FORM)
            .body(form(&[("token", token), ("next", "/")]))
            .send()
            .await
            .unwrap()
    }

    /// Logs in with `token` and reads the CSRF token off a page.
    async fn session(&self, token: &str) -> Session {
        let r = self.login(token).await;
        assert_eq!(r.status(), StatusCode::SEE_OTHER, "the login is accepted");
        let set = r.headers().get(SET_COOKIE).unwrap().to_str().unwrap().to_string();
        let cookie = set.split(';').next().unwrap().to_string();
        let page = self.page(&cookie, "/").await.1;
        let csrf = page.split("name=\"csrf\" value=\"").nth(1).unwrap().split('"').next().unwrap().to_string();
        Session { cookie, csrf }
    }

    async fn page(&self, cookie: &str, path: &str) -> (StatusCode, String) {
        let r = self.http.get(self.at(path)).header(COOKIE, cookie).send().await.unwrap();
        (r.status(), r.text().await.unwrap())
    }

    async fn post(&self, cookie: Option<&str>, path: &str, fields: &[(&str, &str)]) -> reqwest::Response {
        let mut r = self.http.post(self.at(path)).header(CONTENT_TYPE, FORM).body(form(fields));
        if let Some(c) = cookie {
            r = r.header(COOKIE, c);
        }
        r.send().await.unwrap()
    }

    async fn cancelled(&self) -> bool {
        self.state.plans.plan_record("p").await.unwrap().unwrap().cancelled
    }

    async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(15), self.handle).await.expect("the server stops").unwrap().unwrap();
    }
}

const PAGES: &[&str] = &["/", "/plans/p", "/plans/p/task?id=A", "/workers", "/events", "/costs", "/plans/p/cancel"];

#[tokio::test]
async fn every_page_and_action_needs_a_session() {
    let s = start().await;
    for page in PAGES {
        let r = s.http.get(s.at(page)).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::SEE_OTHER, "{page}");
        let to = r.headers().get(LOCATION).unwrap().to_str().unwrap();
        assert!(to.starts_with("/login?next=/"), "{page} → {to}");
    }
    // What a script fetches, and the stream, answer 401 rather than a login page.
    let r = s.http.get(s.at("/plans/p")).header("X-Arbiter-Live", "1").send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(s.http.get(s.at("/ui/stream?plan=p")).send().await.unwrap().status(), StatusCode::UNAUTHORIZED);
    for action in ["/plans/p/cancel", "/plans/p/retry", "/plans/p/budget", "/workers/w/revoke", "/logout"] {
        assert_eq!(s.post(None, action, &[("csrf", "x")]).await.status(), StatusCode::UNAUTHORIZED, "{action}");
    }
    // A forged cookie is no session.
    let (status, _) = s.page("arbiter_session=0123456789abcdef", "/").await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(!s.cancelled().await);
    s.stop().await;
}

#[tokio::test]
async fn only_the_admin_and_access_tokens_log_in_with_strict_cookies() {
    let s = start().await;
    let r = s.login(ADMIN).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let cookie = r.headers().get(SET_COOKIE).unwrap().to_str().unwrap().to_string();
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age="] {
        assert!(cookie.contains(flag), "{cookie}");
    }
    assert!(!cookie.contains(ADMIN), "the cookie is a session id, never the token");
    // A bootstrap token, a worker's, a wrong one: refused, with the reason.
    let worker = s
        .http
        .post(s.at("/api/v1/workers/register"))
        .bearer_auth(BOOTSTRAP)
        .json(&json!({"name": "w", "runners": ["command"], "backends": [], "slots": 1}))
        .send()
        .await
        .unwrap()
        .json::<serde_json::Value>()
        .await
        .unwrap()["token"]
        .as_str()
        .unwrap()
        .to_string();
    for token in [BOOTSTRAP, worker.as_str(), "arbt_wrong", ""] {
        let r = s.login(token).await;
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{token}");
        assert!(r.headers().get(SET_COOKIE).is_none());
        assert!(r.text().await.unwrap().contains("does not open the dashboard"));
    }
    // A login link cannot send the browser to another site.
    let r = s
        .http
        .post(s.at("/login"))
        .header(CONTENT_TYPE, FORM)
        .body(form(&[("token", ADMIN), ("next", "//evil.example/x")]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers().get(LOCATION).unwrap(), "/");
    // Logging out ends the session (and needs the CSRF token).
    let session = s.session(ADMIN).await;
    assert_eq!(s.post(Some(&session.cookie), "/logout", &[]).await.status(), StatusCode::FORBIDDEN);
    let r = s.post(Some(&session.cookie), "/logout", &[("csrf", &session.csrf)]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(s.page(&session.cookie, "/").await.0, StatusCode::SEE_OTHER, "the session is over");
    s.stop().await;
}

#[tokio::test]
async fn actions_need_the_csrf_token_the_admin_role_and_this_site_and_name_who_acted() {
    let s = start().await;
    let admin = s.session(ADMIN).await;
    let path = "/plans/p/cancel";
    let (status, confirm) = s.page(&admin.cookie, path).await;
    assert_eq!(status, StatusCode::OK);
    assert!(confirm.contains("Yes, cancel the plan"), "a cancel asks first");
    for form in [vec![], vec![("csrf", "0".repeat(32))]] {
        let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let r = s.post(Some(&admin.cookie), path, &form).await;
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
        assert!(r.text().await.unwrap().contains("CSRF"));
    }
    let cross_site = s
        .http
        .post(s.at(path))
        .header(COOKIE, &admin.cookie)
        .header("Origin", "https://evil.example")
        .header(CONTENT_TYPE, FORM)
        .body(form(&[("csrf", admin.csrf.as_str())]))
        .send()
        .await
        .unwrap();
    assert_eq!(cross_site.status(), StatusCode::FORBIDDEN);
    assert!(!s.cancelled().await, "no refused request changed anything");

    // A read-only session sees the pages, without actions, and can do nothing.
    let created = s.state.access.create_token("viewer", Role::ReadOnly, s.state.now()).await.unwrap();
    let viewer = s.session(created.token.expose()).await;
    let (status, plan) = s.page(&viewer.cookie, "/plans/p").await;
    assert_eq!(status, StatusCode::OK);
    assert!(!plan.contains("Cancel plan") && !plan.contains("Set budget"), "no action is offered");
    assert_eq!(s.page(&viewer.cookie, path).await.0, StatusCode::FORBIDDEN);
    let r = s.post(Some(&viewer.cookie), path, &[("csrf", &viewer.csrf)]).await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert!(r.text().await.unwrap().contains("read-only"));
    assert!(!s.cancelled().await);

    // The admin's confirmed cancel goes through, and its event names who did it.
    let r = s.post(Some(&admin.cookie), path, &[("csrf", &admin.csrf)]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert!(s.cancelled().await);
    let events = s.state.plans.events("p").await.unwrap();
    let cancelled = events.iter().find(|e| e.kind == "plan_cancelled").unwrap();
    assert_eq!(cancelled.data["by"], "admin", "{:?}", cancelled.data);
    let (_, log) = s.page(&admin.cookie, "/events?plan=p&kind=plan_cancelled").await;
    assert!(log.contains("cancelled by admin"), "the event log says who");

    // Retry and budget, the same way.
    let r = s.post(Some(&admin.cookie), "/plans/p/retry", &[("csrf", &admin.csrf), ("task", "A")]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let r = s.post(Some(&admin.cookie), "/plans/p/budget", &[("csrf", &admin.csrf), ("limit", "2.50")]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let events = s.state.plans.events("p").await.unwrap();
    assert!(events.iter().any(|e| e.kind == "task_retried" && e.data["by"] == "admin"));
    assert!(events.iter().any(|e| e.kind == "budget_changed" && e.data["by"] == "admin"));
    s.stop().await;
}

#[tokio::test]
async fn read_only_tokens_read_the_api_and_die_when_revoked() {
    let s = start().await;
    let token = s.state.access.create_token("viewer", Role::ReadOnly, s.state.now()).await.unwrap().token;
    let token = token.expose();
    let get = |path: &'static str| s.http.get(s.at(path)).bearer_auth(token).send();
    assert_eq!(get("/api/v1/plans").await.unwrap().status(), StatusCode::OK);
    assert_eq!(get("/api/v1/plans/p").await.unwrap().status(), StatusCode::OK);
    assert_eq!(get("/api/v1/workers").await.unwrap().status(), StatusCode::OK);
    assert_eq!(get("/api/v1/tokens").await.unwrap().status(), StatusCode::FORBIDDEN);
    let r = s.http.post(s.at("/api/v1/plans/p/cancel")).bearer_auth(token).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert!(r.text().await.unwrap().contains("read-only"));
    assert!(!s.cancelled().await);

    // An admin access token acts, and is named as the actor.
    let ops = s
        .http
        .post(s.at("/api/v1/tokens"))
        .bearer_auth(ADMIN)
        .json(&json!({"name": "ops", "role": "admin"}))
        .send()
        .await
        .unwrap();
    assert_eq!(ops.status(), StatusCode::CREATED);
    let ops = ops.json::<serde_json::Value>().await.unwrap()["token"].as_str().unwrap().to_string();
    let session = s.session(token).await;
    let r = s.http.post(s.at("/api/v1/plans/p/cancel")).bearer_auth(&ops).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let events = s.state.plans.events("p").await.unwrap();
    assert_eq!(events.iter().find(|e| e.kind == "plan_cancelled").unwrap().data["by"], "token:ops");

    // Revoked: the bearer is refused at once, its dashboard session ends.
    let r = s.http.post(s.at("/api/v1/tokens/viewer/revoke")).bearer_auth(ADMIN).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(get("/api/v1/plans").await.unwrap().status(), StatusCode::UNAUTHORIZED);
    assert_eq!(s.page(&session.cookie, "/").await.0, StatusCode::SEE_OTHER);
    let listed = s.http.get(s.at("/api/v1/tokens")).bearer_auth(ADMIN).send().await.unwrap().text().await.unwrap();
    assert!(listed.contains("viewer") && !listed.contains(token), "tokens are listed without their values");
    s.stop().await;
}

#[tokio::test]
async fn hostile_text_is_shown_as_text_under_a_strict_policy() {
    let s = start().await;
    let admin = s.session(ADMIN).await;
    for page in ["/", "/plans/p", "/plans/p/task?id=A", "/events?plan=p"] {
        let r = s.http.get(s.at(page)).header(COOKIE, &admin.cookie).send().await.unwrap();
        let csp = r.headers().get("content-security-policy").unwrap().to_str().unwrap().to_string();
        assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"), "{csp}");
        let body = r.text().await.unwrap();
        assert!(!body.contains("<script>alert"), "{page} holds the title as markup");
        assert!(!body.contains('\u{1b}'), "{page} holds a raw escape sequence");
        assert!(body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{page} shows the title as text");
    }
    s.stop().await;
}

#[tokio::test]
async fn bad_input_gets_a_page_that_says_what_is_wrong() {
    let s = start().await;
    let admin = s.session(ADMIN).await;
    let cases = [
        ("/plans/nope", StatusCode::NOT_FOUND, "no plan named 'nope'"),
        ("/plans/..%2Fetc", StatusCode::NOT_FOUND, "no plan named"),
        ("/plans/p/task", StatusCode::BAD_REQUEST, "name the task"),
        ("/plans/p/task?id=ZZ", StatusCode::NOT_FOUND, "has no task"),
        ("/plans/p/runs/not-a-run", StatusCode::NOT_FOUND, "is not a run id"),
        ("/plans/p/budget?limit=abc", StatusCode::UNPROCESSABLE_ENTITY, "is not a budget"),
        ("/plans/p/budget?limit=-3", StatusCode::UNPROCESSABLE_ENTITY, "is not a budget"),
        ("/runs", StatusCode::NOT_FOUND, "no local runs"),
        ("/workers/nobody/revoke", StatusCode::NOT_FOUND, "no worker named"),
        // Text no store keeps (a NUL character) is no task and no event kind.
        ("/plans/p/retry?task=a%00b", StatusCode::NOT_FOUND, "has no task"),
        ("/events?task=a%00b", StatusCode::OK, "No event"),
        ("/events?kind=a%00b", StatusCode::OK, "No event"),
    ];
    for (path, status, says) in cases {
        let (got, body) = s.page(&admin.cookie, path).await;
        assert_eq!(got, status, "{path}");
        assert!(body.contains(says), "{path}: {body}");
    }
    let r = s.post(Some(&admin.cookie), "/plans/p/retry", &[("csrf", &admin.csrf), ("task", "a\0b")]).await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert!(r.text().await.unwrap().contains("has no task"));
    // A retry of a task that cannot be retried says why, and changes nothing.
    let r = s.post(Some(&admin.cookie), "/plans/p/retry", &[("csrf", &admin.csrf), ("task", "B")]).await;
    assert_eq!(r.status(), StatusCode::CONFLICT);
    assert!(r.text().await.unwrap().contains("only failed, cancelled or skipped tasks are retried"));
    s.stop().await;
}

#[tokio::test]
async fn a_one_time_link_logs_in_once() {
    let s = start().await;
    let code = s.state.sessions.one_time(Role::Admin, "cli:me").unwrap();
    let r = s.http.get(s.at(&format!("/login/once?code={code}"))).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let cookie = r.headers().get(SET_COOKIE).unwrap().to_str().unwrap().split(';').next().unwrap().to_string();
    let (status, page) = s.page(&cookie, "/").await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("cli:me"), "the page says who is logged in");
    let again = s.http.get(s.at(&format!("/login/once?code={code}"))).send().await.unwrap();
    assert_eq!(again.status(), StatusCode::UNAUTHORIZED);
    assert!(again.text().await.unwrap().contains("used already"));
    let _ = s.admin.list().await.unwrap();
    s.stop().await;
}

#[tokio::test]
async fn logins_come_from_this_site_and_lead_only_within_it() {
    let s = start().await;
    let from = |origin: &'static str| {
        s.http
            .post(s.at("/login"))
            .header(CONTENT_TYPE, FORM)
            .header("Origin", origin)
            .body(form(&[("token", ADMIN), ("next", "/")]))
            .send()
    };
    let r = from("https://evil.example").await.unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN, "another site cannot log a browser in");
    assert!(r.headers().get(SET_COOKIE).is_none());
    let own = s.url.clone();
    let r = s
        .http
        .post(s.at("/login"))
        .header(CONTENT_TYPE, FORM)
        .header("Origin", own)
        .body(form(&[("token", ADMIN), ("next", "/plans/p")]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers().get(LOCATION).unwrap(), "/plans/p");
    // Browsers drop a tab from a URL: `/\t/evil.example` would become `//evil.example`.
    for away in ["/\t/evil.example", "/\\evil.example", "/%09/x\u{1}"] {
        let r = s
            .http
            .post(s.at("/login"))
            .header(CONTENT_TYPE, FORM)
            .body(form(&[("token", ADMIN), ("next", away)]))
            .send()
            .await
            .unwrap();
        assert_eq!(r.headers().get(LOCATION).unwrap(), "/", "{away:?}");
    }
    s.stop().await;
}

#[tokio::test]
async fn a_page_stream_ends_with_its_session_and_a_session_holds_few_of_them() {
    let s = start().await;
    let admin = s.session(ADMIN).await;
    let open = || s.http.get(s.at("/ui/stream?plan=p")).header(COOKIE, &admin.cookie).send();
    let mut streams = Vec::new();
    for _ in 0..16 {
        let r = open().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        streams.push(r);
    }
    assert_eq!(open().await.unwrap().status(), StatusCode::TOO_MANY_REQUESTS, "no 17th stream");
    drop(streams.split_off(1));
    // Closed streams give their slots back (the server sees the drop on its next write or
    // keep-alive; a fresh stream may take a moment).
    let mut reopened = None;
    for _ in 0..100 {
        let r = open().await.unwrap();
        if r.status() == StatusCode::OK {
            reopened = Some(r);
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut stream = reopened.expect("a closed stream's slot comes back");
    assert_eq!(s.post(Some(&admin.cookie), "/logout", &[("csrf", &admin.csrf)]).await.status(), StatusCode::SEE_OTHER);
    // The open stream ends once the session has: it does not go on telling a logged-out
    // browser what happens.
    let ended =
        tokio::time::timeout(Duration::from_secs(30), async { while let Ok(Some(_)) = stream.chunk().await {} }).await;
    assert!(ended.is_ok(), "the stream of a logged-out session ended");
    s.stop().await;
}

#[tokio::test]
async fn a_server_that_names_its_hosts_answers_no_other() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(&dir.path().join("arbiter.db")).await.unwrap());
    let tokens = Tokens::new(&Secret::new(BOOTSTRAP), &Secret::new(ADMIN)).unwrap();
    let bound = bind(ServeConfig::new("127.0.0.1:0".parse().unwrap())).await.unwrap();
    let addr = bound.local_addr();
    let state = AppState::new(store, tokens, dir.path()).with_allowed_hosts(vec![addr.to_string()]);
    let shutdown = CancellationToken::new();
    let handle = tokio::spawn(bound.run(state, shutdown.clone()));
    let http = reqwest::Client::new();
    let at = format!("http://{addr}/login");
    assert_eq!(http.get(&at).send().await.unwrap().status(), StatusCode::OK);
    // DNS rebinding: a name that resolves to 127.0.0.1, sent as the Host.
    let r = http.get(&at).header("Host", format!("evil.example:{}", addr.port())).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::MISDIRECTED_REQUEST);
    assert!(r.text().await.unwrap().contains("open the address it printed"));
    shutdown.cancel();
    handle.await.unwrap().unwrap();
}
