//! One behaviour, two stores: every scenario runs against SQLite (a temporary file) and
//! Postgres (the real server: `DATABASE_URL`, default postgres://postgres@127.0.0.1:5432/postgres;
//! each run creates and drops its own database). A missing Postgres is a failure, not a skip.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use sqlx::Connection;

use std::sync::Arc;

use arbiter_core::event::{Event, EventKind};
use arbiter_core::ids::{CandidateId, RunId};
use arbiter_core::status::{CandidateStatus, RunStatus};
use arbiter_core::time::Timestamp;
use arbiter_store::postgres::PgStore;
use arbiter_store::sqlite::SqliteStore;
use arbiter_store::{CandidateRecord, RunRecord, Store};
use common::{drop_database, fresh_database};

fn run(id: &RunId, started: i64) -> RunRecord {
    RunRecord {
        id: id.clone(),
        repo: "/repo".into(),
        task_title: "Fix it".into(),
        status: RunStatus::Running,
        base_commit: "abc".into(),
        run_dir: "/repo/.arbiter/runs/x".into(),
        candidates: 2,
        winner: None,
        started_at: Timestamp(started),
        finished_at: None,
    }
}

/// Runs, candidates and events round-trip; upserts replace; the newest run lists first.
async fn round_trip(store: Arc<dyn Store>) {
    let a = RunId::new(Timestamp(1_000_000), 1);
    let b = RunId::new(Timestamp(2_000_000), 2);
    store.put_run(&run(&a, 1_000_000)).await.unwrap();
    store.put_run(&run(&b, 2_000_000)).await.unwrap();
    let c = CandidateRecord {
        run_id: a.clone(),
        id: CandidateId::from_index(0),
        index: 0,
        runner: "command".into(),
        status: CandidateStatus::Finished,
        exit_code: Some(0),
        normalized_hash: Some("h".into()),
        eligible: Some(true),
        rank: Some(1),
    };
    store.put_candidate(&c).await.unwrap();
    store
        .put_candidate(&CandidateRecord { rank: Some(2), status: CandidateStatus::LimitReached, ..c.clone() })
        .await
        .unwrap();
    for seq in 1..=3 {
        store
            .append_event(&Event {
                seq,
                run_id: a.clone(),
                at: Timestamp(seq as i64),
                kind: EventKind::Warning,
                candidate: (seq != 2).then(|| CandidateId::from_index(0)),
                data: serde_json::json!({"n": seq, "text": "ünïcode ✓"}),
            })
            .await
            .unwrap();
    }
    store
        .finish_run(&a, RunStatus::Succeeded, Some(&CandidateId::from_index(0)), Some(Timestamp(5_000_000)))
        .await
        .unwrap();

    let listed = store.list_runs(10).await.unwrap();
    assert_eq!(listed.iter().map(|r| r.id.clone()).collect::<Vec<_>>(), vec![b.clone(), a.clone()]);
    assert_eq!(store.list_runs(1).await.unwrap().len(), 1);
    let got = store.get_run(&a).await.unwrap().unwrap();
    assert_eq!(got.status, RunStatus::Succeeded);
    assert_eq!(got.winner, Some(CandidateId::from_index(0)));
    assert_eq!(got.finished_at, Some(Timestamp(5_000_000)));
    assert!(store.get_run(&RunId::new(Timestamp(9), 9)).await.unwrap().is_none());
    let cands = store.candidates(&a).await.unwrap();
    assert_eq!(cands.len(), 1);
    assert_eq!((cands[0].rank, cands[0].status), (Some(2), CandidateStatus::LimitReached));
    let events = store.events(&a).await.unwrap();
    assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 2, 3]);
    assert_eq!(events[2].data["text"], "ünïcode ✓");
    assert_eq!(events[1].candidate, None);
    // An event number is never written twice.
    let dup = Event {
        seq: 1,
        run_id: a.clone(),
        at: Timestamp(1),
        kind: EventKind::Warning,
        candidate: None,
        data: serde_json::json!({}),
    };
    assert!(store.append_event(&dup).await.is_err());
}

#[tokio::test]
async fn sqlite_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("arbiter.db");
    round_trip(Arc::new(SqliteStore::open(&path).await.unwrap())).await;
    // Reopening applies no migration twice and keeps the data.
    let again = SqliteStore::open(&path).await.unwrap();
    assert_eq!(again.list_runs(10).await.unwrap().len(), 2);
}

#[tokio::test]
async fn postgres_round_trip() {
    let (url, name) = fresh_database().await;
    round_trip(Arc::new(PgStore::connect(&url).await.unwrap())).await;
    // Two processes connecting (and migrating) at once keep the data and the schema.
    let (x, y) = tokio::join!(PgStore::connect(&url), PgStore::connect(&url));
    assert_eq!(x.unwrap().list_runs(10).await.unwrap().len(), 2);
    assert_eq!(y.unwrap().list_runs(10).await.unwrap().len(), 2);
    drop_database(&name).await;
}

#[tokio::test]
async fn unreachable_stores_are_clear_errors() {
    let err = SqliteStore::open(std::path::Path::new("/proc/arbiter/none.db")).await.err().unwrap();
    assert!(err.to_string().contains("cannot open the database /proc/arbiter/none.db"), "{err}");
    // A refused connection is said at once as what it is (a pool would retry until its
    // timeout and report only "pool timed out"), with what to check; the password, in
    // either place a URL can hold it, never appears.
    for url in ["postgres://user:hunter2pw@127.0.0.1:9/db", "postgres://user@127.0.0.1:9/db?password=hunter2pw"] {
        let err = PgStore::connect(url).await.err().unwrap().to_string();
        assert!(!err.contains("hunter2pw"), "the password leaked: {err}");
        assert!(err.contains("cannot connect to the Postgres database postgres://user@127.0.0.1:9/db"), "{err}");
        assert!(err.to_lowercase().contains("refused") && err.contains("pg_isready"), "{err}");
        assert!(!err.contains("check the path"), "a SQLite hint for Postgres: {err}");
    }
    // Another database is refused for what it is, not looked up in DNS.
    let err = PgStore::connect("mysql://root:hunter2pw@db.invalid/x").await.err().unwrap();
    assert!(matches!(err, arbiter_store::StoreError::UnsupportedDatabase { .. }), "{err}");
    assert!(err.to_string().contains("'mysql://' is not a database arbiter can use"), "{err}");
    assert!(!err.to_string().contains("hunter2pw"), "{err}");
    // A database that does not exist says so, and how to create it.
    let base = common::admin_url();
    let base = base.rsplit_once('/').map(|(b, _)| b.to_string()).unwrap();
    let err = PgStore::connect(&format!("{base}/arbiter_no_such_database")).await.err().unwrap().to_string();
    assert!(err.contains("does not exist") && err.contains("createdb"), "{err}");
}

/// Managed Postgres requires TLS: `sslmode` is read as libpq reads it, and arbiter is built
/// with TLS (rustls). The machine's server offers TLS with a certificate no CA signed
/// (Debian's default), so `require` connects and `verify-full` says what to check.
#[tokio::test]
async fn postgres_over_tls_as_sslmode_asks() {
    let (url, name) = fresh_database().await;
    let mut admin = sqlx::PgConnection::connect(&common::admin_url()).await.unwrap();
    let ssl: String = sqlx::query_scalar("SHOW ssl").fetch_one(&mut admin).await.unwrap();
    let required = PgStore::connect(&format!("{url}?sslmode=require")).await;
    if ssl == "on" {
        let store = required.unwrap();
        assert!(store.list_runs(1).await.unwrap().is_empty());
        let err = PgStore::connect(&format!("{url}?sslmode=verify-full")).await.err().unwrap().to_string();
        assert!(err.contains("sslmode") && err.contains("sslrootcert"), "{err}");
    } else {
        eprintln!("this Postgres has ssl = off: only the refusal of sslmode=require is checked");
        let err = required.err().unwrap().to_string();
        assert!(err.contains("sslmode"), "{err}");
    }
    drop_database(&name).await;
}
