//! The server over real HTTP on a loopback port, with real stores (a temporary SQLite file;
//! a fresh Postgres database where the store matters), real `git` and real TLS: workers and
//! their tokens, limits and error bodies, server-sent events, git fetches, artifacts,
//! metrics and shutdown.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use arbiter_core::plan::file::{Syntax, parse};
use arbiter_core::time::Timestamp;
use arbiter_server::client::{Client, ClientOptions};
use arbiter_server::serve::{ServeConfig, TlsFiles, bind};
use arbiter_server::state::{AppState, Limits, Tokens};
use arbiter_store::plans::{Import, PlanStore};
use arbiter_store::postgres::PgStore;
use arbiter_store::sqlite::SqliteStore;
use arbiter_store::workers::Secret;
use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const BOOTSTRAP: &str = "bootstrap-token-0123456789abcdef0123456789abcdef";
const ADMIN: &str = "admin-token-0123456789abcdef0123456789abcdef";

struct Server {
    url: String,
    state: AppState,
    shutdown: CancellationToken,
    handle: JoinHandle<Result<(), arbiter_server::ServeError>>,
    http: reqwest::Client,
    dir: tempfile::TempDir,
    pg: Option<String>,
}

enum Db {
    Sqlite,
    Postgres,
}

fn tokens() -> Tokens {
    Tokens::new(&Secret::new(BOOTSTRAP), &Secret::new(ADMIN)).unwrap()
}

async fn start(db: Db) -> Server {
    start_with(db, Limits::default(), None).await
}

async fn start_with(db: Db, limits: Limits, tls: Option<TlsFiles>) -> Server {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let (state, pg) = match db {
        Db::Sqlite => {
            let store = Arc::new(SqliteStore::open(&dir.path().join("arbiter.db")).await.unwrap());
            (AppState::new(store, tokens(), dir.path()), None)
        }
        Db::Postgres => {
            let (url, name) = fresh_database().await;
            let store = Arc::new(PgStore::connect(&url).await.unwrap());
            (AppState::new(store, tokens(), dir.path()), Some(name))
        }
    };
    let state = state.with_limits(limits);
    let mut config = ServeConfig::new("127.0.0.1:0".parse().unwrap());
    config.tls = tls;
    let bound = bind(config).await.unwrap();
    let url = bound.url();
    let shutdown = CancellationToken::new();
    let handle = tokio::spawn(bound.run(state.clone(), shutdown.clone()));
    Server { url, state, shutdown, handle, http: reqwest::Client::new(), dir, pg }
}

impl Server {
    fn at(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }

    async fn register(&self, name: &str) -> (String, String) {
        let r = self
            .http
            .post(self.at("/api/v1/workers/register"))
            .bearer_auth(BOOTSTRAP)
            .json(&json!({"name": name, "runners": ["command"], "backends": [], "slots": 2}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::CREATED);
        let body: Value = r.json().await.unwrap();
        (body["worker_id"].as_str().unwrap().to_string(), body["token"].as_str().unwrap().to_string())
    }

    async fn get(&self, path: &str, token: &str) -> reqwest::Response {
        self.http.get(self.at(path)).bearer_auth(token).send().await.unwrap()
    }

    async fn post(&self, path: &str, token: &str) -> reqwest::Response {
        self.http.post(self.at(path)).bearer_auth(token).send().await.unwrap()
    }

    async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(15), self.handle).await.expect("the server stops").unwrap().unwrap();
        if let Some(name) = &self.pg {
            drop_database(name).await;
        }
    }
}

/// An error answer: its status, `error` code, and message.
async fn error_of(r: reqwest::Response) -> (StatusCode, String, String) {
    let status = r.status();
    let body: Value = r.json().await.expect("an error body is JSON");
    (status, body["error"].as_str().unwrap().to_string(), body["message"].as_str().unwrap().to_string())
}

fn admin_url() -> String {
    std::env::var("DATABASE_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

async fn fresh_database() -> (String, String) {
    use sqlx::Connection;
    let admin = admin_url();
    let mut conn = sqlx::PgConnection::connect(&admin)
        .await
        .unwrap_or_else(|e| panic!("Postgres is required for these tests ({e}); start it and set DATABASE_URL"));
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    let name = format!("arbiter_server_test_{}_{nanos}_{n}", std::process::id());
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut conn).await.unwrap();
    let base = admin.rsplit_once('/').map(|(b, _)| b.to_string()).unwrap_or(admin.clone());
    (format!("{base}/{name}"), name)
}

async fn drop_database(name: &str) {
    use sqlx::Connection;
    if let Ok(mut conn) = sqlx::PgConnection::connect(&admin_url()).await {
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")))
            .execute(&mut conn)
            .await;
    }
}

/// Registration, the three kinds of token, list, revoke, rotate.
async fn workers_and_tokens(db: Db) {
    let s = start(db).await;
    let (id, token) = s.register("w1").await;
    assert!(id.starts_with("w-") && token.starts_with("arbw_"));

    // The bootstrap token registers and does nothing else; a wrong one is 401.
    let r = s
        .http
        .post(s.at("/api/v1/workers/register"))
        .bearer_auth("wrong-bootstrap")
        .json(&json!({"name": "w2", "slots": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["www-authenticate"], "Bearer realm=\"arbiter\"");
    assert_eq!(error_of(r).await.0, StatusCode::UNAUTHORIZED);
    let r = s.http.post(s.at("/api/v1/workers/register")).json(&json!({"name": "w2"})).send().await.unwrap();
    assert_eq!(error_of(r).await.1, "missing_token");
    assert_eq!(s.get("/api/v1/workers", BOOTSTRAP).await.status(), StatusCode::FORBIDDEN);
    // A taken name is 409 unless re-registering is explicit.
    let r = s
        .http
        .post(s.at("/api/v1/workers/register"))
        .bearer_auth(BOOTSTRAP)
        .json(&json!({"name": "w1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(r).await.1, "name_taken");

    // The admin token lists; a worker token on an admin route is 403, an unknown one 401.
    let list: Value = s.get("/api/v1/workers", ADMIN).await.json().await.unwrap();
    let w = &list["workers"][0];
    assert_eq!((w["name"].as_str(), w["id"].as_str()), (Some("w1"), Some(id.as_str())));
    assert_eq!(w["runners"], json!(["command"]));
    assert_eq!(w["slots"], 2);
    assert_eq!(w["last_heartbeat"], Value::Null);
    assert_eq!(w["revoked_at"], Value::Null);
    assert!(!list.to_string().contains(&token));
    let (status, code, _) = error_of(s.get("/api/v1/workers", &token).await).await;
    assert_eq!((status, code.as_str()), (StatusCode::FORBIDDEN, "admin_only"));
    assert_eq!(s.get("/api/v1/workers", "arbw_nope").await.status(), StatusCode::UNAUTHORIZED);

    // A heartbeat (the work protocol's touch) shows in the list.
    s.state.registry.touch(&id, None, &json!({"plan": "p", "task": "T1"}), s.state.now()).await.unwrap();
    let list: Value = s.get("/api/v1/workers", ADMIN).await.json().await.unwrap();
    assert_eq!(list["workers"][0]["current_work"], json!({"plan": "p", "task": "T1"}));
    assert_eq!(list["workers"][0]["connected"], true);

    // Rotate: a new token, the old one dead.
    let rotated: Value = s.post("/api/v1/workers/w1/rotate", ADMIN).await.json().await.unwrap();
    let new_token = rotated["token"].as_str().unwrap().to_string();
    assert_ne!(new_token, token);
    assert_eq!(rotated["worker_id"], id.as_str());
    let (status, code, message) = error_of(s.get("/api/v1/artifacts/00", &token).await).await;
    assert_eq!((status, code.as_str()), (StatusCode::UNAUTHORIZED, "invalid_token"), "{message}");

    // Revoke: the token is dead (401), the list says so.
    let revoked: Value = s.post("/api/v1/workers/w1/revoke", ADMIN).await.json().await.unwrap();
    assert!(revoked["revoked_at"].is_string());
    let digest = "0".repeat(64);
    let r = s.http.put(s.at(&format!("/api/v1/artifacts/{digest}"))).bearer_auth(&new_token).body("x").send().await;
    assert_eq!(r.unwrap().status(), StatusCode::UNAUTHORIZED);
    assert_eq!(error_of(s.post("/api/v1/workers/nobody/revoke", ADMIN).await).await.0, StatusCode::NOT_FOUND);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_and_tokens_on_sqlite() {
    workers_and_tokens(Db::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_and_tokens_on_postgres() {
    workers_and_tokens(Db::Postgres).await;
}

/// Bad requests get a JSON error that says what is wrong, never a panic or an empty body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_get_json_errors() {
    let s = start(Db::Sqlite).await;
    let register = |body: reqwest::Body| {
        s.http
            .post(s.at("/api/v1/workers/register"))
            .bearer_auth(BOOTSTRAP)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let (status, code, message) = error_of(register("{\"name\": ".into()).await.unwrap()).await;
    assert_eq!((status, code.as_str()), (StatusCode::BAD_REQUEST, "malformed_json"), "{message}");
    let (status, _, message) = error_of(register(r#"{"name": "a", "slotz": 1}"#.into()).await.unwrap()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(message.contains("slotz"), "{message}");
    let (status, _, message) = error_of(register(r#"{"name": "a", "slots": "two"}"#.into()).await.unwrap()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(message.starts_with("slots: "), "{message}");
    let (status, _, message) = error_of(register(r#"{"name": "a/b"}"#.into()).await.unwrap()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(message.starts_with("name: "), "{message}");
    let (status, _, message) = error_of(register(r#"{"name": "a", "slots": 0}"#.into()).await.unwrap()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{message}");
    // A name of the form of a worker id (another worker's, here) would pass for that worker
    // where dashboards show names: refused; the name the hint suggests registers.
    let (honest_id, _) = s.register("honest").await;
    let (status, _, message) = error_of(register(json!({"name": honest_id}).to_string().into()).await.unwrap()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{message}");
    assert!(message.contains("form of a worker id") && message.contains("gpu-box-1"), "{message}");
    assert_eq!(register(r#"{"name": "gpu-box-1"}"#.into()).await.unwrap().status(), StatusCode::CREATED);
    // A NUL character (which Postgres keeps in no text column) is refused by name, whatever
    // the field; the text `\u0000` is not one.
    let (status, _, message) =
        error_of(register(r#"{"name": "a", "runners": ["x\u0000"]}"#.into()).await.unwrap()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{message}");
    assert!(message.contains("NUL") && message.contains("remove it"), "{message}");
    let big = format!(r#"{{"name": "a", "runners": ["{}"]}}"#, "x".repeat(2 << 20));
    let (status, code, _) = error_of(register(big.into()).await.unwrap()).await;
    assert_eq!((status, code.as_str()), (StatusCode::PAYLOAD_TOO_LARGE, "body_too_large"));
    let r = s.http.post(s.at("/api/v1/workers/register")).bearer_auth(BOOTSTRAP).body("name=a").send().await.unwrap();
    assert_eq!(error_of(r).await.0, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(error_of(s.get("/api/v1/nothing", ADMIN).await).await.0, StatusCode::NOT_FOUND);
    assert_eq!(error_of(s.get("/api/v1/workers/register", ADMIN).await).await.0, StatusCode::METHOD_NOT_ALLOWED);
    let (status, code, _) = error_of(s.get("/api/v1/events", ADMIN).await).await;
    assert_eq!((status, code.as_str()), (StatusCode::BAD_REQUEST, "invalid_query"));
    assert_eq!(error_of(s.get("/api/v1/events?plan=nope", ADMIN).await).await.0, StatusCode::NOT_FOUND);
    // Health needs no token; readiness asks the store.
    assert_eq!(s.http.get(s.at("/healthz")).send().await.unwrap().status(), StatusCode::OK);
    assert_eq!(s.http.get(s.at("/readyz")).send().await.unwrap().status(), StatusCode::OK);
    s.stop().await;
}

/// A plan with two tasks, one claimed and finished: events to stream.
async fn plan_with_events(store: &dyn PlanStore) {
    let spec = parse(
        r#"{"id": "calc", "name": "Calc", "tasks": [{"id": "T1", "title": "one"}, {"id": "T2", "title": "two", "dependencies": ["T1"]}]}"#,
        Syntax::Json,
    )
    .unwrap();
    store.import_plan(Import::adding(&spec, Timestamp(1))).await.unwrap();
    let arbiter_store::plans::ClaimOutcome::Claimed(c) =
        store.claim("calc", "w-x", Duration::from_secs(60), Timestamp(2)).await.unwrap()
    else {
        panic!("T1 is ready");
    };
    let done = arbiter_store::plans::AttemptResult::Succeeded { run_id: None, commit: None };
    store.finish(&c.lease, done, arbiter_core::money::Usd::ZERO, Timestamp(3)).await.unwrap();
}

/// Reads SSE frames from `response` until `n` events have arrived (or the time runs out).
async fn read_events(response: &mut reqwest::Response, n: usize) -> Vec<(i64, String, Value)> {
    let mut buffer = String::new();
    let mut events = Vec::new();
    while events.len() < n {
        let chunk = tokio::time::timeout(Duration::from_secs(10), response.chunk())
            .await
            .expect("an event within 10 s")
            .unwrap()
            .expect("the stream goes on");
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let frame: String = buffer.drain(..end + 2).collect();
            let (mut id, mut kind, mut data) = (None, String::new(), Value::Null);
            for line in frame.lines() {
                if let Some(v) = line.strip_prefix("id: ") {
                    id = Some(v.parse::<i64>().unwrap());
                } else if let Some(v) = line.strip_prefix("event: ") {
                    kind = v.to_string();
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data = serde_json::from_str(v).unwrap();
                }
            }
            if let Some(id) = id {
                events.push((id, kind, data));
            }
        }
    }
    events
}

/// The event stream replays from `Last-Event-ID`, then goes on live; frames carry the
/// event's id, kind and JSON; the server's shutdown ends the stream.
async fn events_stream(db: Db) {
    let s = start(db).await;
    plan_with_events(s.state.plans.as_ref()).await;
    let all = s.state.plans.events("calc").await.unwrap();
    assert!(all.len() >= 4, "{all:?}");

    let mut r = s.get("/api/v1/events?plan=calc", ADMIN).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    let got = read_events(&mut r, all.len()).await;
    let ids: Vec<i64> = got.iter().map(|e| e.0).collect();
    assert_eq!(ids, all.iter().map(|e| e.id).collect::<Vec<_>>());
    assert_eq!(got[0].1, all[0].kind);
    assert_eq!(got[0].2["plan_id"], "calc");
    assert_eq!(got[0].2["id"], all[0].id);
    drop(r);

    // Resume after the second event: the rest, nothing twice; then a live one.
    let mut r = s
        .http
        .get(s.at("/api/v1/events?plan=calc"))
        .bearer_auth(ADMIN)
        .header("Last-Event-ID", all[1].id.to_string())
        .send()
        .await
        .unwrap();
    let got = read_events(&mut r, all.len() - 2).await;
    assert_eq!(got.iter().map(|e| e.0).collect::<Vec<_>>(), all[2..].iter().map(|e| e.id).collect::<Vec<_>>());
    let said = arbiter_core::plan::settings::RunOverrides { candidates: Some(2), ..Default::default() };
    let entry = arbiter_core::plan::event::PlanEntry::RunOverrides { overrides: said };
    s.state.plans.note_event("calc", entry, Timestamp(4)).await.unwrap();
    s.state.plan_events.notify_waiters();
    let live = read_events(&mut r, 1).await;
    assert_eq!(live[0].1, "run_overrides");
    assert_eq!(live[0].2["data"]["overrides"]["candidates"], 2);
    assert!(live[0].0 > all.last().unwrap().id);

    // Stopping the server ends the stream instead of waiting for it.
    let handle_r = tokio::spawn(async move { while let Ok(Some(_)) = r.chunk().await {} });
    s.stop().await;
    tokio::time::timeout(Duration::from_secs(10), handle_r).await.expect("the stream ends").unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_stream_on_sqlite() {
    events_stream(Db::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_stream_on_postgres() {
    events_stream(Db::Postgres).await;
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git").args(args).current_dir(dir).output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A git command over HTTP with the token in the environment (never argv).
fn git_http(dir: &Path, args: &[&str], token: &str) -> std::process::Output {
    Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "http.extraHeader")
        .env("GIT_CONFIG_VALUE_0", format!("Authorization: Bearer {token}"))
        .output()
        .unwrap()
}

/// The server's repository of plan `plan`: `DATA_DIR/repos/<plan>.git` with one commit.
fn make_repo(data_dir: &Path, plan: &str) -> (PathBuf, String) {
    let work = data_dir.join(format!("work-{plan}"));
    std::fs::create_dir_all(&work).unwrap();
    git(&work, &["init", "-q", "-b", "main"]);
    std::fs::write(work.join("README.md"), "hello\n").unwrap();
    git(&work, &["add", "."]);
    git(&work, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one"]);
    let bare = data_dir.join("repos").join(format!("{plan}.git"));
    std::fs::create_dir_all(bare.parent().unwrap()).unwrap();
    git(data_dir, &["clone", "-q", "--bare", work.to_str().unwrap(), bare.to_str().unwrap()]);
    (work, git(&bare, &["rev-parse", "main"]))
}

/// A worker clones and fetches a plan's repository over smart HTTP with its token (protocol
/// v2 and v0, gzip request bodies); a wrong token, a push, the dumb protocol and a path out of
/// the repository are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_fetch_over_http() {
    let s = start(Db::Sqlite).await;
    let (work, first) = make_repo(s.dir.path(), "calc");
    let (_, token) = s.register("w1").await;
    let clones = tempfile::tempdir().unwrap();
    let url = s.at("/git/calc");

    let c = clones.path().to_path_buf();
    let (u, t) = (url.clone(), token.clone());
    let out = tokio::task::spawn_blocking(move || git_http(&c, &["clone", "-q", &u, "v2"], &t)).await.unwrap();
    assert!(out.status.success(), "clone: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(git(&clones.path().join("v2"), &["rev-parse", "HEAD"]), first);

    // A new commit on the server's side, fetched with protocol v0 (a POST body git gzips).
    std::fs::write(work.join("b.txt"), "b\n".repeat(5000)).unwrap();
    git(&work, &["add", "."]);
    git(&work, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "two"]);
    let bare = s.dir.path().join("repos/calc.git");
    git(&work, &["push", "-q", bare.to_str().unwrap(), "main"]);
    let second = git(&bare, &["rev-parse", "main"]);
    let c = clones.path().join("v2");
    let t = token.clone();
    let out =
        tokio::task::spawn_blocking(move || git_http(&c, &["-c", "protocol.version=0", "fetch", "-q", "origin"], &t))
            .await
            .unwrap();
    assert!(out.status.success(), "fetch: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(git(&clones.path().join("v2"), &["rev-parse", "origin/main"]), second);

    // Many wants make a request body over 1 KiB, which git sends gzipped.
    for i in 0..40 {
        git(
            &work,
            &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", &format!("c{i}")],
        );
        git(&work, &["push", "-q", bare.to_str().unwrap(), &format!("HEAD:refs/heads/b{i}")]);
    }
    let trace = clones.path().join("trace");
    let (c, u, t, tr) = (clones.path().to_path_buf(), url.clone(), token.clone(), trace.clone());
    let out = tokio::task::spawn_blocking(move || {
        let mut cmd = Command::new("git");
        cmd.args(["-c", "protocol.version=0", "clone", "-q", "--mirror", &u, "v0"])
            .current_dir(&c)
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_TRACE_CURL", &tr)
            .env("GIT_TRACE_CURL_NO_DATA", "1")
            .env("GIT_CONFIG_COUNT", "1")
            .env("GIT_CONFIG_KEY_0", "http.extraHeader")
            .env("GIT_CONFIG_VALUE_0", format!("Authorization: Bearer {t}"));
        cmd.output().unwrap()
    })
    .await
    .unwrap();
    assert!(out.status.success(), "clone v0: {}", String::from_utf8_lossy(&out.stderr));
    let trace = std::fs::read_to_string(&trace).unwrap();
    assert!(trace.contains("Content-Encoding: gzip"), "git sent no gzip body:\n{trace}");
    assert_eq!(git(&clones.path().join("v0"), &["rev-parse", "b39"]), git(&bare, &["rev-parse", "b39"]));

    // A push is refused (403), and so is a wrong token (401).
    let c = clones.path().join("v2");
    let t = token.clone();
    let out = tokio::task::spawn_blocking(move || git_http(&c, &["push", "-q", "origin", "HEAD:refs/heads/x"], &t))
        .await
        .unwrap();
    assert!(!out.status.success());
    assert!(git(&bare, &["branch", "--list", "x"]).is_empty());
    let c = clones.path().to_path_buf();
    let u = url.clone();
    let out =
        tokio::task::spawn_blocking(move || git_http(&c, &["clone", "-q", &u, "bad"], "arbw_wrong")).await.unwrap();
    assert!(!out.status.success());
    assert!(!clones.path().join("bad/.git").exists());

    for (path, status) in [
        ("/git/calc/info/refs?service=git-receive-pack", StatusCode::FORBIDDEN),
        ("/git/calc/info/refs", StatusCode::FORBIDDEN),
        ("/git/calc/HEAD", StatusCode::FORBIDDEN),
        ("/git/calc/objects/info/packs", StatusCode::FORBIDDEN),
        ("/git/..%2Fcalc/info/refs?service=git-upload-pack", StatusCode::NOT_FOUND),
        ("/git/nope/info/refs?service=git-upload-pack", StatusCode::NOT_FOUND),
    ] {
        assert_eq!(s.get(path, &token).await.status(), status, "{path}");
    }
    assert_eq!(s.get("/git/calc/info/refs?service=git-upload-pack", ADMIN).await.status(), StatusCode::FORBIDDEN);
    let r = s.http.post(s.at("/git/calc/git-receive-pack")).bearer_auth(&token).body("0000").send().await.unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    s.stop().await;
}

/// Uploads are content-addressed and idempotent; a wrong digest or an oversized body keeps
/// nothing; downloads need the admin token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn artifacts() {
    let limits = Limits { artifact: 1 << 20, ..Limits::default() };
    let s = start_with(Db::Sqlite, limits, None).await;
    let (_, token) = s.register("w1").await;
    let content = b"diff --git a/x b/x\n".repeat(1000);
    let digest = format!("{:x}", Sha256::digest(&content));
    let put = |digest: String, body: Vec<u8>| {
        s.http.put(s.at(&format!("/api/v1/artifacts/{digest}"))).bearer_auth(&token).body(body).send()
    };

    let r = put(digest.clone(), content.clone()).await.unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let body: Value = r.json().await.unwrap();
    assert_eq!((body["size"].as_u64(), body["created"].as_bool()), (Some(content.len() as u64), Some(true)));
    assert_eq!(put(digest.clone(), content.clone()).await.unwrap().status(), StatusCode::OK);

    let other = b"something else".to_vec();
    let (status, code, message) = error_of(put("a".repeat(64), other).await.unwrap()).await;
    assert_eq!((status, code.as_str()), (StatusCode::BAD_REQUEST, "digest_mismatch"), "{message}");
    assert_eq!(error_of(put("XYZ".into(), vec![]).await.unwrap()).await.1, "invalid_digest");
    let big = vec![7u8; (1 << 20) + 1];
    let big_digest = format!("{:x}", Sha256::digest(&big));
    // Refused with 413 as soon as the limit is passed; the server may close the connection
    // before the client has finished sending the rest, and the client then sees the closed
    // connection instead of the answer. Either way nothing is stored (checked below).
    match put(big_digest.clone(), big).await {
        Ok(r) => assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE),
        Err(e) => assert!(e.is_request() || e.is_body(), "not a refusal: {e}"),
    }

    let r = s.get(&format!("/api/v1/artifacts/{digest}"), ADMIN).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.bytes().await.unwrap().as_ref(), &content[..]);
    assert_eq!(s.get(&format!("/api/v1/artifacts/{digest}"), &token).await.status(), StatusCode::FORBIDDEN);
    assert_eq!(s.get(&format!("/api/v1/artifacts/{big_digest}"), ADMIN).await.status(), StatusCode::NOT_FOUND);

    // Only the good artifact is on disk; no temporary file is left.
    let files: Vec<PathBuf> = walk(&s.dir.path().join("artifacts"));
    assert_eq!(files, vec![s.dir.path().join("artifacts/sha256").join(&digest[..2]).join(&digest)]);
    s.stop().await;
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// `/metrics` needs the admin token and speaks the Prometheus text format: every sample line
/// is `name{labels} value` of a family announced by `# TYPE`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_exposition() {
    let s = start(Db::Sqlite).await;
    plan_with_events(s.state.plans.as_ref()).await;
    let (id, token) = s.register("w1").await;
    s.state.registry.touch(&id, None, &json!(null), s.state.now()).await.unwrap();
    s.state.metrics.claimed();
    assert_eq!(s.get("/metrics", &token).await.status(), StatusCode::FORBIDDEN);
    assert_eq!(s.http.get(s.at("/metrics")).send().await.unwrap().status(), StatusCode::UNAUTHORIZED);
    let r = s.get("/metrics", ADMIN).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.headers()["content-type"].to_str().unwrap().starts_with("text/plain; version=0.0.4"));
    let text = r.text().await.unwrap();
    let mut families = std::collections::BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            families.insert(rest.split(' ').next().unwrap().to_string());
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        let (name_labels, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("bad line {line}"));
        value.parse::<f64>().unwrap_or_else(|_| panic!("bad value in {line}"));
        let name = name_labels.split('{').next().unwrap();
        let family = ["_bucket", "_sum", "_count"].iter().fold(name, |n, s| n.strip_suffix(s).unwrap_or(n));
        assert!(families.contains(name) || families.contains(family), "{line} has no # TYPE");
    }
    for line in [
        "arbiter_claims_total 1",
        "arbiter_tasks{plan=\"calc\",status=\"done\"} 1",
        "arbiter_tasks{plan=\"calc\",status=\"ready\"} 1",
        "arbiter_queue_depth{status=\"ready\"} 1",
        "arbiter_workers_connected 1",
        "arbiter_lease_expiries_total 0",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line}\n{text}");
    }
    assert!(text.contains("arbiter_http_request_duration_seconds_bucket{method=\"POST\",route=\"/api/v1/workers/register\",le=\"+Inf\"} 1"), "{text}");
    s.stop().await;
}

/// HTTPS with a self-signed certificate: the client trusts it through `--ca-cert` (and not
/// without it); plain HTTP off loopback is refused unless insecure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_and_the_plain_http_guard() {
    let dir = tempfile::tempdir().unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let (cert_file, key_file) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert_file, cert.cert.pem()).unwrap();
    std::fs::write(&key_file, cert.signing_key.serialize_pem()).unwrap();
    let s = start_with(Db::Sqlite, Limits::default(), Some(TlsFiles { cert: cert_file.clone(), key: key_file })).await;
    assert!(s.url.starts_with("https://127.0.0.1:"), "{}", s.url);
    let url = s.url.replace("127.0.0.1", "localhost");

    let trusted =
        Client::new(&url, &ClientOptions { ca_cert: Some(cert_file.clone()), ..ClientOptions::default() }).unwrap();
    let workers = trusted.workers(&Secret::new(ADMIN)).await.unwrap();
    assert!(workers.is_empty());
    let untrusted = Client::new(&url, &ClientOptions::default()).unwrap();
    let err = untrusted.workers(&Secret::new(ADMIN)).await.unwrap_err();
    assert!(matches!(err, arbiter_server::client::ClientError::Transport { .. }), "{err}");
    s.stop().await;

    // Refused before anything is bound.
    let err =
        bind(ServeConfig::new("0.0.0.0:0".parse().unwrap())).await.err().expect("plain HTTP on 0.0.0.0 is refused");
    assert!(err.to_string().contains("--insecure") && err.is_usage(), "{err}");
}
