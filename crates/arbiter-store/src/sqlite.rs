//! The embedded SQLite store (`.arbiter/arbiter.db`): WAL journal, `synchronous=NORMAL`,
//! foreign keys on, a 5-second busy timeout so concurrent arbiter processes wait for each
//! other instead of failing. Writes to the plan queue run in `BEGIN IMMEDIATE`
//! transactions (SQLite has one writer, so claims need no row locks); claimers waiting in
//! this process are woken directly, those in other processes poll.

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteRow, SqliteSynchronous};
use sqlx::{Row, SqlitePool};

use arbiter_core::time::Timestamp;
use tokio::sync::Notify;

use crate::StoreError;
use crate::db::{OrStore, database_error};
use crate::db::{Rec, Tx, sql};
use crate::migrate::SQLITE;
use crate::plan_sql::{PICK_READY, PICK_READY_AMONG_HEAD, PICK_READY_AMONG_TAIL, PLAN_BUDGET, PlanDialect, TASK_STATE};
use crate::plans::{AttemptResult, Claimed, Finished, Lease, Wake};
use crate::store::{Backend, SqlStore};
use const_format::concatcp;

/// The SQLite store.
pub type SqliteStore = SqlStore<SqliteBackend>;

/// What is SQLite's own: one writer (`BEGIN IMMEDIATE`), claimers woken in this process
/// only, and the one-round-trip scripts.
#[derive(Clone)]
pub struct SqliteBackend {
    pool: SqlitePool,
    work: Arc<Notify>,
}

impl SqlStore<SqliteBackend> {
    /// Opens (creating if needed) the database at `path` and brings its schema up to date.
    pub async fn open(path: &Path) -> Result<Self, StoreError> {
        let location = path.display().to_string();
        let options = SqliteConnectOptions::from_str("sqlite://")
            .map_err(|e| StoreError::Open { location: location.clone(), source: database_error(e) })?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(5))
            .foreign_keys(true);
        // A connection to a file does not go stale: no ping before each use (sqlx's default).
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .test_before_acquire(false)
            .connect_with(options)
            .await
            .map_err(|e| StoreError::Open { location, source: database_error(e) })?;
        migrate(&pool).await?;
        Ok(SqlStore::new(pool.clone(), SqliteBackend { pool, work: Arc::new(Notify::new()) }))
    }
}

async fn migrate(pool: &SqlitePool) -> Result<(), StoreError> {
    // BEGIN IMMEDIATE takes the write lock at once: two processes opening the database
    // together apply the migrations one after the other.
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await.or_store()?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)",
    )
    .execute(&mut *tx)
    .await.or_store()?;
    crate::migrate::apply::<sqlx::Sqlite>(&mut tx, SQLITE).await?;
    tx.commit().await.or_store()?;
    Ok(())
}

impl SqliteBackend {
    /// Runs a script holding its own `BEGIN IMMEDIATE … COMMIT` in one round trip to the
    /// connection's thread; on an error the transaction is rolled back before the
    /// connection goes back to the pool.
    async fn script(
        &self,
        query: sqlx::query::Query<'_, sqlx::Sqlite, sqlx::sqlite::SqliteArguments>,
    ) -> Result<Vec<SqliteRow>, StoreError> {
        let mut conn = self.pool.acquire().await.or_store()?;
        match query.fetch_all(&mut *conn).await {
            Ok(rows) => Ok(rows),
            Err(e) => {
                let _ = sqlx::query("ROLLBACK").execute(&mut *conn).await;
                Err(e).or_store()
            }
        }
    }
}

impl Backend for SqliteBackend {
    type Db = sqlx::Sqlite;

    async fn write_tx(pool: &SqlitePool) -> Result<Tx<'_, sqlx::Sqlite>, StoreError> {
        pool.begin_with("BEGIN IMMEDIATE").await.or_store()
    }

    async fn notify_work(&self, _plan_id: &str) {
        self.work.notify_waiters();
    }

    async fn work_handle(&self) -> Arc<Notify> {
        self.work.clone()
    }

    async fn wait_notified(&self, timeout: Duration) -> Wake {
        match tokio::time::timeout(timeout, self.work.notified()).await {
            Ok(()) => Wake::Notified,
            Err(_) => Wake::TimedOut,
        }
    }

    /// Pick, claim, record the attempt and the event, in one transaction.
    async fn claim_fast(
        &self,
        plan: &str,
        worker: &str,
        expires: Timestamp,
        now: Timestamp,
        among: Option<&str>,
    ) -> Result<Option<Claimed>, StoreError> {
        let token = crate::plan_rows::token("claim");
        let query =
            sqlx::query(CLAIM_FAST).bind(plan).bind(now.0).bind(worker).bind(expires.0).bind(&token).bind(among);
        let rows = self.script(query).await?;
        let Some(row) = rows.into_iter().next() else { return Ok(None) };
        crate::plan_rows::fast_claim(&Rec::<sqlx::Sqlite>(row), plan, worker, expires).map(Some)
    }

    /// End the task and the attempt, unblock dependents, write the events, in one
    /// transaction.
    async fn finish_fast(
        &self,
        lease: &Lease,
        result: &AttemptResult,
        now: Timestamp,
    ) -> Result<Option<Finished>, StoreError> {
        let Some(o) = arbiter_core::queue::rules::fast_outcome(lease, result, now) else { return Ok(None) };
        let (done, ready) = (crate::plan_rows::token("finish"), crate::plan_rows::token("ready"));
        let query = crate::plan_rows::bind_fast_report(sql(FINISH_FAST), lease, &o, now)
            .bind(done.as_str())
            .bind(ready.as_str());
        let rows = self.script(query.into_query()).await?;
        let mut finished = false;
        let mut newly_ready = Vec::new();
        for row in rows {
            let id: String = row.try_get("id").or_store()?;
            if row.try_get::<bool, _>("finished").or_store()? {
                finished = true;
            } else {
                newly_ready.push(id);
            }
        }
        newly_ready.sort();
        Ok(finished.then(|| o.finished(newly_ready)))
    }
}

/// See [`SqliteBackend::claim_fast`]; `$5` is the claim's token, `$6` a JSON array of the
/// tasks to claim among (NULL: the best ready one).
const CLAIM_FAST: &str = "BEGIN IMMEDIATE;
UPDATE plan_tasks SET status = 'running', attempts = attempts + 1, fence = fence + 1, lease_owner = $3,
    lease_expires = $4, reserved_pico = 0, claim_token = $5, version = version + 1, updated_at = $2
WHERE plan_id = $1 AND id = (
    SELECT t.id FROM plan_tasks t JOIN plans p ON p.id = t.plan_id
    WHERE t.plan_id = $1 AND t.status = 'ready' AND t.not_before <= $2
      AND NOT p.cancelled AND NOT p.guard_files AND p.budget_pico IS NULL
      AND (CAST($6 AS TEXT) IS NULL OR t.id IN (SELECT value FROM json_each($6)))
    ORDER BY t.priority, t.ord LIMIT 1);
INSERT INTO plan_attempts (plan_id, task_id, attempt, fence, worker, status, started_at, reserved_pico)
    SELECT plan_id, id, attempts, fence, $3, 'running', $2, 0 FROM plan_tasks WHERE plan_id = $1 AND claim_token = $5;
INSERT INTO plan_events (plan_id, task_id, attempt, kind, at, data)
    SELECT plan_id, id, attempts, 'task_claimed', $2,
           json_object('worker', $3, 'fence', fence, 'lease_expires', $4, 'reserved', '0')
    FROM plan_tasks WHERE plan_id = $1 AND claim_token = $5;
SELECT t.id, t.attempts, t.max_attempts, t.fence, t.spec, p.retry_backoff_seconds
    FROM plan_tasks t JOIN plans p ON p.id = t.plan_id WHERE t.plan_id = $1 AND t.claim_token = $5;
UPDATE plan_tasks SET claim_token = NULL WHERE plan_id = $1 AND claim_token = $5;
COMMIT;";

/// See [`SqliteBackend::finish_fast`]; `$13` marks the reported task, `$14` the dependents it
/// makes ready.
const FINISH_FAST: &str = "BEGIN IMMEDIATE;
UPDATE plan_tasks SET status = $3, not_before = $4, lease_owner = NULL, lease_expires = NULL,
    run_id = COALESCE($5, run_id), commit_sha = COALESCE($6, commit_sha), reason = $7, claim_token = $13,
    version = version + 1, updated_at = $8
WHERE plan_id = $1 AND id = $2 AND status = 'running' AND fence = $9 AND reserved_pico = 0;
UPDATE plan_attempts SET status = $10, finished_at = $8, run_id = COALESCE($5, run_id), commit_sha = $6, reason = $7
WHERE plan_id = $1 AND task_id = $2 AND fence = $9
  AND EXISTS (SELECT 1 FROM plan_tasks WHERE plan_id = $1 AND id = $2 AND claim_token = $13);
INSERT INTO plan_events (plan_id, task_id, attempt, kind, at, data)
    SELECT plan_id, id, attempts, $11, $8, $12 FROM plan_tasks WHERE plan_id = $1 AND id = $2 AND claim_token = $13;
UPDATE plan_tasks SET deps_left = deps_left - 1,
    status = CASE WHEN deps_left = 1 AND status = 'blocked' THEN 'ready' ELSE status END,
    claim_token = CASE WHEN deps_left = 1 AND status = 'blocked' THEN $14 ELSE claim_token END,
    version = version + 1, updated_at = $8
WHERE $3 = 'done' AND plan_id = $1
  AND id IN (SELECT task_id FROM plan_deps WHERE plan_id = $1 AND depends_on = $2)
  AND EXISTS (SELECT 1 FROM plan_tasks WHERE plan_id = $1 AND id = $2 AND claim_token = $13);
INSERT INTO plan_events (plan_id, task_id, attempt, kind, at, data)
    SELECT plan_id, id, NULL, 'task_ready', $8, json_object('after', $2) FROM plan_tasks
    WHERE plan_id = $1 AND claim_token = $14;
SELECT id, 1 AS finished FROM plan_tasks WHERE plan_id = $1 AND id = $2 AND claim_token = $13
UNION ALL
SELECT id, 0 AS finished FROM plan_tasks WHERE plan_id = $1 AND claim_token = $14;
UPDATE plan_tasks SET claim_token = NULL WHERE plan_id = $1 AND claim_token IN ($13, $14);
COMMIT;";

/// SQLite has one writer at a time: write transactions need no locks of their own.
impl PlanDialect for SqliteBackend {
    const LOCK_PLAN: &'static str = PLAN_BUDGET;
    const LOCK_TASK: &'static str = TASK_STATE;
    const PICK: &'static str = PICK_READY;
    const PICK_AMONG: &'static str =
        concatcp!(PICK_READY_AMONG_HEAD, "SELECT value FROM json_each($4)", PICK_READY_AMONG_TAIL);
    const ENDING_GUARD: Option<&'static str> = None;
    const IMPORT_GUARD: Option<&'static str> = None;
    const LOCK_ENDING: Option<&'static str> = None;
    const LOCK_TASKS: Option<&'static str> = None;
}

impl crate::unit_sql::UnitDialect for SqliteBackend {
    const PICK_UNITS: &'static str = crate::unit_sql::PICK_UNITS;
    const LOCK_UNIT: &'static str = crate::unit_sql::UNIT_STATE;
    const LOCK_ATTEMPT: &'static str = crate::unit_sql::ATTEMPT_STATE;
}
