//! The plan queue's throughput, measured: claim + complete cycles per second through the
//! store on SQLite and Postgres with 1, 4 and 16 concurrent claimers (no agents, no git),
//! against the floor of the bare claim and complete statements run in a loop on the same
//! table; and the import of a 10,000-task plan with about 20,000 dependency edges.
//!
//! ```text
//! cargo bench -p arbiter-store --bench queue              # both stores (Postgres at DATABASE_URL)
//! cargo bench -p arbiter-store --bench queue -- --sqlite  # SQLite only
//! cargo bench -p arbiter-store --bench queue -- --postgres  # Postgres only
//! ```
//!
//! Prints one markdown table (the rows of docs/BENCHMARKS.md). Each figure is the median of
//! three runs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use arbiter_core::money::Usd;
use arbiter_core::plan::PlanSpec;
use arbiter_core::plan::file::{Syntax, parse};
use arbiter_core::time::Timestamp;
use arbiter_store::db::{Db, sql};
use arbiter_store::plans::{AttemptResult, ClaimOutcome, Import, PlanStore};
use arbiter_store::postgres::PgStore;
use arbiter_store::sqlite::SqliteStore;
use sqlx::{Connection, Pool};

const CYCLES: usize = 3000;
const REPEATS: usize = 3;
const LEASE: Duration = Duration::from_secs(300);

fn now() -> Timestamp {
    Timestamp(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_micros() as i64)
}

/// `n` independent tasks, or (with `edges`) each task after the first two depending on the
/// one before it and on the one at half its index: about two edges per task.
fn plan(id: &str, n: usize, edges: bool) -> PlanSpec {
    let tasks: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            let deps: Vec<String> =
                if edges && i >= 2 { vec![format!("t{}", i - 1), format!("t{}", i / 2)] } else { Vec::new() };
            serde_json::json!({"id": format!("t{i}"), "title": format!("task {i}"), "dependencies": deps})
        })
        .collect();
    let text = serde_json::json!({"id": id, "name": id, "tasks": tasks}).to_string();
    parse(&text, Syntax::Json).expect("the generated plan parses")
}

async fn import(store: &dyn PlanStore, spec: &PlanSpec) -> Duration {
    let started = Instant::now();
    store.import_plan(Import::adding(spec, now())).await.expect("import");
    started.elapsed()
}

/// Claim + complete through the store until the plan is drained; cycles per second.
async fn through_store(store: Arc<dyn PlanStore>, plan_id: &str, claimers: usize) -> f64 {
    let started = Instant::now();
    let mut joins = Vec::new();
    for w in 0..claimers {
        let store = store.clone();
        let plan_id = plan_id.to_string();
        joins.push(tokio::spawn(async move {
            let worker = format!("bench-{w}");
            let mut done = 0usize;
            loop {
                match store.claim(&plan_id, &worker, LEASE, now()).await.expect("claim") {
                    ClaimOutcome::Claimed(c) => {
                        let result = AttemptResult::Succeeded { run_id: None, commit: None };
                        store.finish(&c.lease, result, Usd::ZERO, now()).await.expect("finish");
                        done += 1;
                    }
                    ClaimOutcome::Idle(_) => return done,
                }
            }
        }));
    }
    let mut total = 0;
    for j in joins {
        total += j.await.expect("claimer");
    }
    assert_eq!(total, CYCLES, "every task claimed and completed once");
    total as f64 / started.elapsed().as_secs_f64()
}

/// The same cycle as bare statements on the same table: one claim statement (the pick and
/// the update; `SKIP LOCKED` on Postgres) and one complete statement, each its own
/// transaction — no attempt row, no events, no readiness, no guards.
async fn raw_floor<D: Db>(pool: &Pool<D>, plan: &str, claimers: usize, pick: &'static str) -> f64 {
    let started = Instant::now();
    let mut joins = Vec::new();
    for w in 0..claimers {
        let pool = pool.clone();
        let plan = plan.to_string();
        joins.push(tokio::spawn(async move {
            let worker = format!("raw-{w}");
            let mut done = 0usize;
            loop {
                let claim = format!(
                    "UPDATE plan_tasks SET status = 'running', fence = fence + 1, lease_owner = $2, lease_expires = $3
                     WHERE plan_id = $1 AND id = (SELECT id FROM plan_tasks WHERE plan_id = $1 AND status = 'ready'
                                                  ORDER BY priority, ord LIMIT 1 {pick})
                     RETURNING id, fence"
                );
                let row = sql::<D>(sqlx::AssertSqlSafe(claim))
                    .bind(plan.as_str())
                    .bind(worker.as_str())
                    .bind(now().0)
                    .fetch_optional(&pool)
                    .await
                    .expect("raw claim");
                let Some(row) = row else { return done };
                let (id, fence): (String, i64) = (row.try_get("id").expect("id"), row.try_get("fence").expect("fence"));
                sql::<D>("UPDATE plan_tasks SET status = 'done', lease_owner = NULL WHERE plan_id = $1 AND id = $2 AND fence = $3")
                    .bind(plan.as_str())
                    .bind(id.as_str())
                    .bind(fence)
                    .execute(&pool)
                    .await
                    .expect("raw complete");
                done += 1;
            }
        }));
    }
    let mut total = 0;
    for j in joins {
        total += j.await.expect("raw claimer");
    }
    assert_eq!(total, CYCLES);
    total as f64 / started.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

struct Row {
    store: &'static str,
    claimers: usize,
    through_store: f64,
    floor: f64,
}

async fn sqlite_rows(dir: &std::path::Path) -> (Vec<Row>, f64) {
    let mut rows = Vec::new();
    for claimers in [1usize, 4, 16] {
        let (mut store_runs, mut raw_runs) = (Vec::new(), Vec::new());
        for r in 0..REPEATS {
            let path = dir.join(format!("q-{claimers}-{r}.db"));
            let store = Arc::new(SqliteStore::open(&path).await.expect("sqlite"));
            import(&*store, &plan("s", CYCLES, false)).await;
            store_runs.push(through_store(store.clone(), "s", claimers).await);
            import(&*store, &plan("raw", CYCLES, false)).await;
            let pool = sqlx::sqlite::SqlitePoolOptions::new()
                .max_connections(4)
                .connect_with(
                    sqlx::sqlite::SqliteConnectOptions::new()
                        .filename(&path)
                        .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
                        .synchronous(sqlx::sqlite::SqliteSynchronous::Normal)
                        .busy_timeout(Duration::from_secs(5)),
                )
                .await
                .expect("raw sqlite pool");
            raw_runs.push(raw_floor(&pool, "raw", claimers, "").await);
        }
        rows.push(Row { store: "SQLite", claimers, through_store: median(store_runs), floor: median(raw_runs) });
    }
    let store = SqliteStore::open(&dir.join("big.db")).await.expect("sqlite");
    let import_secs = import(&store, &plan("big", 10_000, true)).await.as_secs_f64();
    (rows, import_secs)
}

async fn pg_rows() -> (Vec<Row>, f64) {
    let admin = std::env::var("DATABASE_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let base = admin.rsplit_once('/').map(|(b, _)| b.to_string()).unwrap_or(admin.clone());
    let mut conn = sqlx::PgConnection::connect(&admin).await.expect("Postgres at DATABASE_URL");
    let mut rows = Vec::new();
    let fresh = |tag: String| {
        let name = format!("arbiter_bench_{}_{tag}", std::process::id());
        (format!("{base}/{name}"), name)
    };
    let mut dbs = Vec::new();
    for claimers in [1usize, 4, 16] {
        let (mut store_runs, mut raw_runs) = (Vec::new(), Vec::new());
        for r in 0..REPEATS {
            let (url, name) = fresh(format!("{claimers}_{r}"));
            sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
                .execute(&mut conn)
                .await
                .expect("create");
            dbs.push(name);
            let store = Arc::new(PgStore::connect(&url).await.expect("pg"));
            import(&*store, &plan("s", CYCLES, false)).await;
            store_runs.push(through_store(store.clone(), "s", claimers).await);
            import(&*store, &plan("raw", CYCLES, false)).await;
            let pool = sqlx::postgres::PgPoolOptions::new().max_connections(16).connect(&url).await.expect("raw pool");
            raw_runs.push(raw_floor(&pool, "raw", claimers, "FOR UPDATE SKIP LOCKED").await);
            pool.close().await;
        }
        rows.push(Row { store: "Postgres", claimers, through_store: median(store_runs), floor: median(raw_runs) });
    }
    let (url, name) = fresh("big".into());
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut conn).await.expect("create");
    dbs.push(name);
    let store = PgStore::connect(&url).await.expect("pg");
    let import_secs = import(&store, &plan("big", 10_000, true)).await.as_secs_f64();
    drop(store);
    for name in dbs {
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")))
            .execute(&mut conn)
            .await;
    }
    (rows, import_secs)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let sqlite_only = std::env::args().any(|a| a == "--sqlite");
    let postgres_only = std::env::args().any(|a| a == "--postgres");
    let dir = tempfile::tempdir().expect("temp dir");
    let (mut rows, mut imports) = (Vec::new(), Vec::new());
    if !postgres_only {
        let (sqlite, sqlite_import) = sqlite_rows(dir.path()).await;
        rows.extend(sqlite);
        imports.push(("SQLite", sqlite_import));
    }
    if !sqlite_only {
        let (pg, pg_import) = pg_rows().await;
        rows.extend(pg);
        imports.push(("Postgres", pg_import));
    }
    println!("| store | claimers | claim+complete/s through the store | raw SQL floor/s | ratio |");
    println!("|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {:.0} | {:.0} | {:.2} |",
            r.store,
            r.claimers,
            r.through_store,
            r.floor,
            r.through_store / r.floor
        );
    }
    println!();
    println!("| store | import of 10,000 tasks, ~20,000 edges |");
    println!("|---|---|");
    for (store, secs) in imports {
        println!("| {store} | {secs:.2} s |");
    }
}
