//! The Postgres store (`--database-url` / `ARBITER_DATABASE_URL`), for a control plane shared
//! by many workers. Same statements and row types as SQLite; migrations are numbered in
//! lock-step with SQLite's and serialized across processes by an advisory lock.

use sqlx::postgres::{PgPool, PgPoolOptions};

use crate::StoreError;
use crate::migrate::POSTGRES;

/// Serializes concurrent migrators (any constant shared by every arbiter process).
const MIGRATION_LOCK: i64 = 0x0061_7262_6974_6572; // "arbiter"

/// The Postgres implementation of [`Store`](crate::Store).
#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
}

impl PgStore {
    /// Connects to `url` and brings the schema up to date. The URL is never echoed in
    /// errors (it may hold a password).
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let location = arbiter_core::redact::redact_patterns(url);
        let pool = PgPoolOptions::new()
            .max_connections(16)
            // An unreachable server is reported in seconds, not after the default 30.
            .acquire_timeout(std::time::Duration::from_secs(5))
            .connect(url)
            .await
            .map_err(|source| StoreError::Open { location, source })?;
        let store = PgStore { pool };
        store.migrate().await?;
        Ok(store)
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(MIGRATION_LOCK).execute(&mut *tx).await?;
        sqlx::query(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)",
        )
        .execute(&mut *tx)
        .await?;
        crate::migrate::apply::<sqlx::Postgres>(&mut tx, POSTGRES).await?;
        tx.commit().await?;
        Ok(())
    }
}

crate::store_impl!(PgStore);
