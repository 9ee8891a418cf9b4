//! The real databases the store tests run against: a temporary SQLite file, and a fresh
//! database on the machine's Postgres (`DATABASE_URL`, default
//! postgres://postgres@127.0.0.1:5432/postgres), dropped afterwards. A missing Postgres is
//! a failure, not a skip.

#![allow(dead_code)]

use sqlx::Connection;

pub fn admin_url() -> String {
    std::env::var("DATABASE_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

/// A fresh database on the real server: its URL and its name (for [`drop_database`]).
pub async fn fresh_database() -> (String, String) {
    let admin = admin_url();
    let mut conn = sqlx::PgConnection::connect(&admin).await.unwrap_or_else(|e| {
        panic!(
            "Postgres is required for these tests ({e}); start it (pg_ctlcluster ... main start) and set DATABASE_URL"
        )
    });
    // Unique across processes (pid, time) and within one (a counter: tests run in parallel
    // and the clock may read the same for two of them).
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    let name = format!("arbiter_test_{}_{nanos}_{n}", std::process::id());
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut conn).await.unwrap();
    let base = admin.rsplit_once('/').map(|(b, _)| b.to_string()).unwrap_or(admin.clone());
    (format!("{base}/{name}"), name)
}

pub async fn drop_database(name: &str) {
    if let Ok(mut conn) = sqlx::PgConnection::connect(&admin_url()).await {
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")))
            .execute(&mut conn)
            .await;
    }
}

/// Every event the store wrote reads back as its typed entry (the SQL fast paths build
/// some of them in SQL: their shapes are the types' too).
#[allow(dead_code)] // not every test file reads events
pub fn every_event_is_typed(events: &[arbiter_store::plans::PlanEvent]) {
    let untyped: Vec<String> =
        events.iter().filter(|e| e.entry().is_none()).map(|e| format!("{} {}", e.kind, e.data)).collect();
    assert!(untyped.is_empty(), "events that do not read as their types:\n{}", untyped.join("\n"));
}

/// Makes each named test (an `async fn(Arc<Store>)`) run twice: as `sqlite::NAME` on a
/// temporary SQLite file and as `postgres::NAME` on a fresh Postgres database.
#[allow(unused_macros)]
macro_rules! both {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let dir = tempfile::tempdir().unwrap();
                    let store = SqliteStore::open(&dir.path().join("arbiter.db")).await.unwrap();
                    super::$name(Arc::new(store)).await;
                }
            )*
        }
        mod postgres {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let (url, name) = common::fresh_database().await;
                    let store = PgStore::connect(&url).await.unwrap();
                    super::$name(Arc::new(store)).await;
                    common::drop_database(&name).await;
                }
            )*
        }
    };
}
#[allow(unused_imports)]
pub(crate) use both;
