//! `arbiter serve` and `arbiter worker register|list|revoke|rotate` as real processes over
//! real HTTP on a loopback port: SQLite in the data directory, and Postgres (a fresh
//! database on the machine's server; a missing Postgres fails). The tour covers tokens and
//! their files, administration, limits, server-sent events, git over HTTP, artifacts,
//! metrics, SIGTERM, and that no token ends up in the server's log or data directory.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use arbiter_core::plan::file::{Syntax, parse};
use arbiter_core::time::Timestamp;
use arbiter_store::plans::{Import, PlanStore};
use common::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn read_token(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap().trim().to_string()
}

/// A git command with the token in the environment (never on the command line).
fn git_with_token(dir: &Path, args: &[&str], token: &str) -> std::process::Output {
    Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "http.extraHeader")
        .env("GIT_CONFIG_VALUE_0", format!("Authorization: Bearer {token}"))
        .output()
        .unwrap()
}

/// Reads SSE frames until `n` events arrived: (id, kind, data).
async fn read_events(response: &mut reqwest::Response, n: usize) -> Vec<(i64, String, Value)> {
    let mut buffer = String::new();
    let mut events = Vec::new();
    while events.len() < n {
        let chunk = tokio::time::timeout(Duration::from_secs(15), response.chunk())
            .await
            .expect("an event within 15 s")
            .unwrap()
            .expect("the stream goes on");
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let frame: String = buffer.drain(..end + 2).collect();
            let mut id = None;
            let (mut kind, mut data) = (String::new(), Value::Null);
            for line in frame.lines() {
                if let Some(v) = line.strip_prefix("id: ") {
                    id = v.parse::<i64>().ok();
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

/// A plan with events, written by this process into the server's store.
async fn make_plan(store: &dyn PlanStore, repository: &Path) {
    let text = json!({"id": "calc", "name": "Calc", "repository": repository,
        "tasks": [{"id": "T1", "title": "one"}, {"id": "T2", "title": "two", "dependencies": ["T1"]}]});
    let spec = parse(&text.to_string(), Syntax::Json).unwrap();
    let import = Import::adding(&spec, Timestamp(1));
    store.import_plan(import).await.unwrap();
    store.note_event("calc", overrides(1), Timestamp(2)).await.unwrap();
    store.note_event("calc", overrides(2), Timestamp(3)).await.unwrap();
}

/// The repository plan `calc` names (on the server's host), with one commit: its path and
/// head.
fn make_repo(scratch: &Path) -> (PathBuf, String) {
    let work = scratch.join("work");
    std::fs::create_dir_all(&work).unwrap();
    git_in(&work, &["init", "-q", "-b", "main"]);
    std::fs::write(work.join("calc.py"), "def add(a, b):\n    return a + b\n").unwrap();
    git_in(&work, &["add", "."]);
    git_in(&work, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "calc"]);
    let head = git_in(&work, &["rev-parse", "main"]).trim().to_string();
    (work, head)
}

/// Everything a control plane does for its workers and its admin, against one store.
async fn tour(pg: Option<PgDatabase>) {
    let store_url = pg.as_ref().map(|p| p.url.clone());
    let mut serve = Serve::start(&[], pg);
    let scratch = tempfile::tempdir().unwrap();
    let tokens_dir = scratch.path().join("secrets/arbiter");
    let token_file = tokens_dir.join("w1.token");
    let admin_env = [("ARBITER_TOKEN", ADMIN)];
    let http = http();

    // Register: the token goes to a 0600 file in a 0700 directory, never to the terminal.
    let run = serve.worker(
        &[
            "register",
            "--name",
            "w1",
            "--token-file",
            token_file.to_str().unwrap(),
            "--runner",
            "command",
            "--slots",
            "2",
        ],
        &[("ARBITER_BOOTSTRAP_TOKEN", BOOTSTRAP)],
    );
    run.assert_code(0);
    let token = read_token(&token_file);
    assert!(token.starts_with("arbw_") && token.len() == 69, "{token}");
    assert_eq!(mode(&token_file), 0o600);
    assert_eq!(mode(&tokens_dir), 0o700);
    assert!(!run.stdout.contains(&token) && !run.stderr.contains(&token));
    assert!(run.stdout.contains("w1") && run.stdout.contains(token_file.to_str().unwrap()), "{}", run.stdout);

    // A wrong bootstrap token is 401 (exit 2); a taken name or token file is refused.
    let other_file = scratch.path().join("w2.token");
    let run = serve.worker(
        &["register", "--name", "w2", "--token-file", other_file.to_str().unwrap()],
        &[("ARBITER_BOOTSTRAP_TOKEN", "not-the-bootstrap-token")],
    );
    run.assert_code(2);
    assert!(run.stderr.contains("401"), "{}", run.stderr);
    assert!(!other_file.exists());
    let run = serve.worker(
        &["register", "--name", "w1", "--token-file", other_file.to_str().unwrap()],
        &[("ARBITER_BOOTSTRAP_TOKEN", BOOTSTRAP)],
    );
    run.assert_code(2);
    assert!(run.stderr.contains("409") && run.stderr.contains("re-register"), "{}", run.stderr);
    let run = serve.worker(
        &["register", "--name", "w3", "--token-file", token_file.to_str().unwrap()],
        &[("ARBITER_BOOTSTRAP_TOKEN", BOOTSTRAP)],
    );
    run.assert_code(2);
    assert_eq!(read_token(&token_file), token, "an existing token file is never overwritten without --replace");
    let run = serve.worker(&["register", "--name", "w4", "--token-file", "x"], &[]);
    run.assert_code(2);
    assert!(run.stderr.contains("ARBITER_BOOTSTRAP_TOKEN"), "{}", run.stderr);

    // List with the admin token; a worker token there is 403.
    let run = serve.worker(&["list"], &admin_env);
    run.assert_code(0);
    assert!(run.stdout.contains("w1") && run.stdout.contains("command"), "{}", run.stdout);
    let run = serve.worker(&["list", "--json"], &admin_env);
    let list: Value = serde_json::from_str::<Value>(&run.stdout).unwrap()["workers"].clone();
    assert_eq!(list[0]["name"], "w1");
    assert_eq!(list[0]["slots"], 2);
    let run = serve.worker(&["list"], &[("ARBITER_TOKEN", &token)]);
    run.assert_code(2);
    assert!(run.stderr.contains("403"), "{}", run.stderr);

    // Limits and malformed requests: JSON errors that say what is wrong.
    let register = |body: String| {
        http.post(serve.at("/api/v1/workers/register"))
            .bearer_auth(BOOTSTRAP)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let r = register(format!(r#"{{"name": "big", "runners": ["{}"]}}"#, "x".repeat(2 << 20))).await.unwrap();
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let r = register(r#"{"name": "w5", "slots": 1,"#.into()).await.unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"], "malformed_json");
    assert!(body["message"].as_str().unwrap().contains("not valid JSON"), "{body}");
    let r = register(r#"{"name": "w5", "colour": "blue"}"#.into()).await.unwrap();
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(r.text().await.unwrap().contains("colour"));

    // Server-sent events: replay after Last-Event-ID, then live.
    let store: Arc<dyn PlanStore> = match &store_url {
        Some(url) => Arc::new(arbiter_store::postgres::PgStore::connect(url).await.unwrap()),
        None => Arc::new(arbiter_store::sqlite::SqliteStore::open(&serve.data_dir().join("arbiter.db")).await.unwrap()),
    };
    let (repository, head) = make_repo(scratch.path());
    make_plan(store.as_ref(), &repository).await;
    let all = store.events("calc").await.unwrap();
    let mut sse = http
        .get(serve.at("/api/v1/events?plan=calc"))
        .bearer_auth(ADMIN)
        .header("Last-Event-ID", all[0].id.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(sse.status(), StatusCode::OK);
    let replayed = read_events(&mut sse, all.len() - 1).await;
    assert_eq!(replayed.iter().map(|e| e.0).collect::<Vec<_>>(), all[1..].iter().map(|e| e.id).collect::<Vec<_>>());
    assert_eq!(replayed.last().unwrap().1, "run_overrides");
    assert_eq!(replayed.last().unwrap().2["data"]["overrides"]["candidates"], 2);
    store.note_event("calc", overrides(3), Timestamp(4)).await.unwrap();
    let live = read_events(&mut sse, 1).await;
    assert_eq!(live[0].2["data"]["overrides"]["candidates"], 3);
    let r = http.get(serve.at("/api/v1/events?plan=calc")).bearer_auth(&token).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);

    // Git over HTTP with the worker token; a wrong token fails.
    let out = git_with_token(scratch.path(), &["clone", "-q", &serve.at("/git/calc"), "clone"], &token);
    assert!(out.status.success(), "clone: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(git_in(&scratch.path().join("clone"), &["rev-parse", "HEAD"]).trim(), head);
    let out = git_with_token(scratch.path(), &["clone", "-q", &serve.at("/git/calc"), "bad"], "arbw_wrong");
    assert!(!out.status.success());
    assert!(!scratch.path().join("bad/.git").exists());

    // Artifacts: a wrong digest is 400 and nothing is kept; the right one is 201, then 200.
    let content = b"--- a/calc.py\n+++ b/calc.py\n".to_vec();
    let digest = sha256_hex(&content);
    let put = |digest: String| {
        http.put(serve.at(&format!("/api/v1/artifacts/{digest}"))).bearer_auth(&token).body(content.clone()).send()
    };
    let r = put("0".repeat(64)).await.unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(r.json::<Value>().await.unwrap()["error"], "digest_mismatch");
    assert_eq!(put(digest.clone()).await.unwrap().status(), StatusCode::CREATED);
    assert_eq!(put(digest.clone()).await.unwrap().status(), StatusCode::OK);
    let artifacts: Vec<PathBuf> = files_under(&serve.data_dir().join("artifacts"));
    assert_eq!(artifacts.len(), 1, "{artifacts:?}");
    assert!(artifacts[0].ends_with(&digest));

    // Metrics: the admin's, in the Prometheus text format.
    let r = http.get(serve.at("/metrics")).bearer_auth(ADMIN).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let text = r.text().await.unwrap();
    for family in [
        "# TYPE arbiter_claims_total counter",
        "# TYPE arbiter_completions_total counter",
        "# TYPE arbiter_lease_expiries_total counter",
        "# TYPE arbiter_queue_depth gauge",
        "# TYPE arbiter_workers_connected gauge",
        "# TYPE arbiter_http_request_duration_seconds histogram",
    ] {
        assert!(text.contains(family), "missing {family}\n{text}");
    }
    assert!(text.lines().any(|l| l == "arbiter_tasks{plan=\"calc\",status=\"ready\"} 1"), "{text}");
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (_, value) = line.rsplit_once(' ').unwrap();
        assert!(value.parse::<f64>().is_ok(), "{line}");
    }

    // Rotate to a file: the old token is dead (401), the new one works; then revoke it.
    let rotated_file = scratch.path().join("rotated/w1.token");
    serve.worker(&["rotate", "w1", "--token-file", rotated_file.to_str().unwrap()], &admin_env).assert_code(0);
    let new_token = read_token(&rotated_file);
    assert_ne!(new_token, token);
    assert_eq!(mode(&rotated_file), 0o600);
    let probe = |t: String| http.put(serve.at(&format!("/api/v1/artifacts/{digest}"))).bearer_auth(t).send();
    assert_eq!(probe(token.clone()).await.unwrap().status(), StatusCode::UNAUTHORIZED);
    assert_eq!(probe(new_token.clone()).await.unwrap().status(), StatusCode::OK);
    let run = serve.worker(&["rotate", "w1"], &admin_env);
    run.assert_code(0);
    let printed = run.stdout.trim().to_string();
    assert!(printed.starts_with("arbw_") && run.stderr.contains("warning"), "{}", run.stderr);
    serve.worker(&["revoke", "w1"], &admin_env).assert_code(0);
    let r = probe(printed.clone()).await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(r.headers()["www-authenticate"].to_str().unwrap().starts_with("Bearer"));
    let run = serve.worker(&["list", "--json"], &admin_env);
    assert!(serde_json::from_str::<Value>(&run.stdout).unwrap()["workers"][0]["revoked_at"].is_string());

    // SIGTERM with an event stream open: the server stops promptly, exit 0.
    assert_eq!(serve.terminate(), Some(0), "{}", serve.log_text());
    drop(sse);

    // No token in the log, nor in any file of the data directory (the database included).
    let log = serve.log_text();
    assert!(log.contains("listening") && log.contains("/api/v1/workers/register"), "{log}");
    for secret in [BOOTSTRAP, ADMIN, &token, &new_token, &printed] {
        assert!(!log.contains(secret), "a token is in the server's log");
        for file in files_under(&serve.data_dir()) {
            let bytes = std::fs::read(&file).unwrap();
            assert!(!bytes.windows(secret.len()).any(|w| w == secret.as_bytes()), "a token is in {}", file.display());
        }
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    format!("{:x}", sha2::Sha256::digest(bytes))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_control_plane_on_sqlite() {
    tour(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_control_plane_on_postgres() {
    tour(Some(PgDatabase::create())).await;
}

/// Without its two tokens the server does not start, and says which and how to make one.
#[test]
fn serve_refuses_to_start_without_its_tokens() {
    let data = tempfile::tempdir().unwrap();
    let out = Command::new(ARBITER)
        .args(["serve", "--bind", "127.0.0.1:0", "--data-dir"])
        .arg(data.path())
        .env_remove("ARBITER_BOOTSTRAP_TOKEN")
        .env("ARBITER_ADMIN_TOKEN", ADMIN)
        .output()
        .unwrap();
    let run = Run::from_output(out);
    run.assert_code(2);
    assert!(
        run.stderr.contains("ARBITER_BOOTSTRAP_TOKEN") && run.stderr.contains("openssl rand -hex 32"),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains(ADMIN));
    let out = Command::new(ARBITER)
        .args(["serve", "--bind", "127.0.0.1:0", "--data-dir"])
        .arg(data.path())
        .env("ARBITER_BOOTSTRAP_TOKEN", "short")
        .env("ARBITER_ADMIN_TOKEN", ADMIN)
        .output()
        .unwrap();
    let run = Run::from_output(out);
    run.assert_code(2);
    assert!(run.stderr.contains("at least 32"), "{}", run.stderr);
}

/// Plain HTTP off loopback is refused (exit 2, nothing bound) unless --insecure.
#[test]
fn plain_http_on_every_interface_is_refused() {
    let data = tempfile::tempdir().unwrap();
    let out = Command::new(ARBITER)
        .args(["serve", "--bind", "0.0.0.0:0", "--data-dir"])
        .arg(data.path())
        .env("ARBITER_BOOTSTRAP_TOKEN", BOOTSTRAP)
        .env("ARBITER_ADMIN_TOKEN", ADMIN)
        .output()
        .unwrap();
    let run = Run::from_output(out);
    run.assert_code(2);
    assert!(run.stderr.contains("plain HTTP") && run.stderr.contains("--insecure"), "{}", run.stderr);
    assert!(!run.stdout.contains("listening"));
}

/// HTTPS with a self-signed certificate made here: `--ca-cert` trusts it, without it the
/// client refuses the server; the client refuses plain HTTP to a non-loopback host.
#[test]
fn https_with_a_self_signed_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let (cert_file, key_file) = (dir.path().join("server.crt"), dir.path().join("server.key"));
    std::fs::write(&cert_file, cert.cert.pem()).unwrap();
    std::fs::write(&key_file, cert.signing_key.serialize_pem()).unwrap();
    let serve = Serve::start(
        &["--tls-cert", cert_file.to_str().unwrap(), "--tls-key", key_file.to_str().unwrap(), "--log-format", "json"],
        None,
    );
    assert!(serve.url.starts_with("https://127.0.0.1:"), "{}", serve.url);
    let url = serve.url.replace("127.0.0.1", "localhost");
    let token_file = dir.path().join("w.token");

    let run = serve.worker(
        &["register", "--server", &url, "--name", "tls", "--token-file", token_file.to_str().unwrap()],
        &[("ARBITER_BOOTSTRAP_TOKEN", BOOTSTRAP)],
    );
    run.assert_code(3);
    assert!(!token_file.exists());
    let run = serve.worker(
        &[
            "register",
            "--server",
            &url,
            "--ca-cert",
            cert_file.to_str().unwrap(),
            "--name",
            "tls",
            "--token-file",
            token_file.to_str().unwrap(),
        ],
        &[("ARBITER_BOOTSTRAP_TOKEN", BOOTSTRAP)],
    );
    run.assert_code(0);
    assert!(read_token(&token_file).starts_with("arbw_"));
    let run = serve.worker(
        &["list", "--server", &url, "--ca-cert", cert_file.to_str().unwrap(), "--json"],
        &[("ARBITER_TOKEN", ADMIN)],
    );
    run.assert_code(0);
    assert!(run.stdout.contains("\"tls\""));

    // JSON logs: one object a line, requests among them.
    let log = serve.log_text();
    let lines: Vec<Value> = log.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("{l}"))).collect();
    assert!(lines.iter().any(|l| l["route"] == "/api/v1/workers/register" && l["status"] == 201), "{log}");

    let run = serve.worker(&["list", "--server", "http://192.0.2.1:7878"], &[("ARBITER_TOKEN", ADMIN)]);
    run.assert_code(2);
    assert!(run.stderr.contains("plain HTTP") && run.stderr.contains("--insecure"), "{}", run.stderr);
}

/// A plan-level event to append by hand: what `plan run --candidates N` records.
fn overrides(candidates: u32) -> arbiter_core::plan::event::PlanEntry {
    let said = arbiter_core::plan::settings::RunOverrides { candidates: Some(candidates), ..Default::default() };
    arbiter_core::plan::event::PlanEntry::RunOverrides { overrides: said }
}
