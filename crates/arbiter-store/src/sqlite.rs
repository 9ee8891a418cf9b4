//! The embedded SQLite store (`.arbiter/arbiter.db`): WAL journal, `synchronous=NORMAL`,
//! foreign keys on, a 5-second busy timeout so concurrent arbiter processes wait for each
//! other instead of failing. Writes to the plan queue run in `BEGIN IMMEDIATE`
//! transactions (SQLite has one writer, so claims need no row locks); claimers waiting in
//! this process are woken directly, those in other processes poll.

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use arbiter_core::time::Timestamp;
use tokio::sync::Notify;

use crate::StoreError;
use crate::migrate::SQLITE;
use crate::plan_sql::{PlanDialect, pick_ready, plan_budget, task_state};
use crate::plans::{AttemptResult, Claimed, Finished, Lease, Wake};

/// The SQLite implementation of [`Store`](crate::Store) and [`PlanStore`](crate::plans::PlanStore).
#[derive(Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    work: Arc<Notify>,
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and brings its schema up to date.
    pub async fn open(path: &Path) -> Result<Self, StoreError> {
        let location = path.display().to_string();
        let options = SqliteConnectOptions::from_str("sqlite://")
            .map_err(|source| StoreError::Open { location: location.clone(), source })?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(5))
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await
            .map_err(|source| StoreError::Open { location, source })?;
        let store = SqliteStore { pool, work: Arc::new(Notify::new()) };
        store.migrate().await?;
        Ok(store)
    }

    async fn write_tx(&self) -> Result<sqlx::Transaction<'_, sqlx::Sqlite>, StoreError> {
        Ok(self.pool.begin_with("BEGIN IMMEDIATE").await?)
    }

    async fn notify_work(&self, _plan_id: &str) {
        self.work.notify_waiters();
    }

    async fn wait_notified(&self, timeout: Duration) -> Wake {
        match tokio::time::timeout(timeout, self.work.notified()).await {
            Ok(()) => Wake::Notified,
            Err(_) => Wake::TimedOut,
        }
    }

    /// SQLite has no faster claim than the general one.
    async fn claim_fast(
        &self,
        _plan: &str,
        _worker: &str,
        _ttl: Duration,
        _now: Timestamp,
    ) -> Result<Option<Claimed>, StoreError> {
        Ok(None)
    }

    /// SQLite has no faster report than the general one.
    async fn finish_fast(
        &self,
        _lease: &Lease,
        _result: &AttemptResult,
        _now: Timestamp,
    ) -> Result<Option<Finished>, StoreError> {
        Ok(None)
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        // BEGIN IMMEDIATE takes the write lock at once: two processes opening the database
        // together apply the migrations one after the other.
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        sqlx::query(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)",
        )
        .execute(&mut *tx)
        .await?;
        crate::migrate::apply::<sqlx::Sqlite>(&mut tx, SQLITE).await?;
        tx.commit().await?;
        Ok(())
    }
}

impl PlanDialect for SqliteStore {
    const LOCK_PLAN: &'static str = plan_budget!();
    const LOCK_TASK: &'static str = task_state!();
    const PICK: &'static str = pick_ready!();
}

crate::store_impl!(SqliteStore);
crate::plan_store_impl!(SqliteStore, sqlx::Sqlite);
