//! The embedded SQLite store (`.arbiter/arbiter.db`): WAL journal, `synchronous=NORMAL`,
//! foreign keys on, a 5-second busy timeout so concurrent arbiter processes wait for each
//! other instead of failing.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use crate::StoreError;
use crate::migrate::SQLITE;

/// The SQLite implementation of [`Store`].
#[derive(Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
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
        let store = SqliteStore { pool };
        store.migrate().await?;
        Ok(store)
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

crate::store_impl!(SqliteStore);
