//! The embedded SQLite store (`.arbiter/arbiter.db`): WAL journal, `synchronous=NORMAL`,
//! foreign keys on, a 5-second busy timeout so concurrent arbiter processes wait for each
//! other instead of failing.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use arbiter_core::event::{Event, EventKind};
use arbiter_core::ids::{CandidateId, RunId};
use arbiter_core::status::{CandidateStatus, RunStatus};
use arbiter_core::time::Timestamp;
use async_trait::async_trait;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteRow, SqliteSynchronous};
use sqlx::{Row, SqlitePool};

use crate::migrate::SQLITE;
use crate::{CandidateRecord, RunRecord, Store, StoreError};

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
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        sqlx::query(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)",
        )
        .execute(&mut *tx)
        .await?;
        let current: i64 = sqlx::query("SELECT COALESCE(MAX(version), 0) FROM schema_migrations")
            .fetch_one(&mut *tx)
            .await?
            .try_get(0)?;
        let known = SQLITE.last().map_or(0, |m| m.version);
        if current > known {
            return Err(StoreError::TooNew { found: current, known });
        }
        for m in SQLITE.iter().filter(|m| m.version > current) {
            sqlx::raw_sql(sqlx::AssertSqlSafe(m.sql))
                .execute(&mut *tx)
                .await
                .map_err(|source| StoreError::Migration { version: m.version, name: m.name, source })?;
            sqlx::query("INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, strftime('%s','now') * 1000000)")
                .bind(m.version)
                .bind(m.name)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }
}

fn run_from_row(row: &SqliteRow) -> Result<RunRecord, StoreError> {
    let id: String = row.try_get("id")?;
    let status: String = row.try_get("status")?;
    let winner: Option<String> = row.try_get("winner")?;
    Ok(RunRecord {
        id: RunId::parse(&id).map_err(|_| StoreError::Corrupt { column: "runs.id", value: id.clone() })?,
        repo: row.try_get("repo")?,
        task_title: row.try_get("task_title")?,
        status: RunStatus::parse(&status).ok_or(StoreError::Corrupt { column: "runs.status", value: status })?,
        base_commit: row.try_get("base_commit")?,
        run_dir: row.try_get("run_dir")?,
        candidates: row.try_get::<i64, _>("candidates")? as u32,
        winner: winner.and_then(|w| CandidateId::parse(&w)),
        started_at: Timestamp(row.try_get("started_at")?),
        finished_at: row.try_get::<Option<i64>, _>("finished_at")?.map(Timestamp),
    })
}

fn candidate_status(s: &str) -> Result<CandidateStatus, StoreError> {
    serde_json::from_value(serde_json::Value::String(s.to_string()))
        .map_err(|_| StoreError::Corrupt { column: "candidates.status", value: s.to_string() })
}

#[async_trait]
impl Store for SqliteStore {
    async fn put_run(&self, r: &RunRecord) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO runs (id, repo, task_title, status, base_commit, run_dir, candidates, winner, started_at, finished_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
             ON CONFLICT (id) DO UPDATE SET status = excluded.status, winner = excluded.winner,
                 finished_at = excluded.finished_at, base_commit = excluded.base_commit, version = runs.version + 1",
        )
        .bind(r.id.as_str())
        .bind(&r.repo)
        .bind(&r.task_title)
        .bind(r.status.as_str())
        .bind(&r.base_commit)
        .bind(&r.run_dir)
        .bind(r.candidates as i64)
        .bind(r.winner.as_ref().map(|w| w.as_str().to_string()))
        .bind(r.started_at.0)
        .bind(r.finished_at.map(|t| t.0))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn finish_run(
        &self,
        id: &RunId,
        status: RunStatus,
        winner: Option<&CandidateId>,
        finished_at: Option<Timestamp>,
    ) -> Result<(), StoreError> {
        sqlx::query("UPDATE runs SET status = $2, winner = $3, finished_at = $4, version = version + 1 WHERE id = $1")
            .bind(id.as_str())
            .bind(status.as_str())
            .bind(winner.map(|w| w.as_str().to_string()))
            .bind(finished_at.map(|t| t.0))
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn put_candidate(&self, c: &CandidateRecord) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO candidates (run_id, id, idx, runner, status, exit_code, normalized_hash, eligible, rank)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
             ON CONFLICT (run_id, id) DO UPDATE SET status = excluded.status, exit_code = excluded.exit_code,
                 normalized_hash = excluded.normalized_hash, eligible = excluded.eligible, rank = excluded.rank",
        )
        .bind(c.run_id.as_str())
        .bind(c.id.as_str())
        .bind(c.index as i64)
        .bind(&c.runner)
        .bind(c.status.as_str())
        .bind(c.exit_code)
        .bind(&c.normalized_hash)
        .bind(c.eligible)
        .bind(c.rank.map(|r| r as i64))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn append_event(&self, e: &Event) -> Result<(), StoreError> {
        sqlx::query("INSERT INTO events (run_id, seq, at, kind, candidate, data) VALUES ($1, $2, $3, $4, $5, $6)")
            .bind(e.run_id.as_str())
            .bind(e.seq as i64)
            .bind(e.at.0)
            .bind(e.kind.as_str())
            .bind(e.candidate.as_ref().map(|c| c.as_str().to_string()))
            .bind(e.data.to_string())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn list_runs(&self, limit: u32) -> Result<Vec<RunRecord>, StoreError> {
        let rows = sqlx::query(LIST_RUNS).bind(limit as i64).fetch_all(&self.pool).await?;
        rows.iter().map(run_from_row).collect()
    }

    async fn get_run(&self, id: &RunId) -> Result<Option<RunRecord>, StoreError> {
        let row = sqlx::query(GET_RUN).bind(id.as_str()).fetch_optional(&self.pool).await?;
        row.as_ref().map(run_from_row).transpose()
    }

    async fn candidates(&self, run: &RunId) -> Result<Vec<CandidateRecord>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, idx, runner, status, exit_code, normalized_hash, eligible, rank FROM candidates WHERE run_id = $1 ORDER BY idx",
        )
        .bind(run.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                let id: String = row.try_get("id")?;
                let status: String = row.try_get("status")?;
                Ok(CandidateRecord {
                    run_id: run.clone(),
                    id: CandidateId::parse(&id).ok_or(StoreError::Corrupt { column: "candidates.id", value: id })?,
                    index: row.try_get::<i64, _>("idx")? as usize,
                    runner: row.try_get("runner")?,
                    status: candidate_status(&status)?,
                    exit_code: row.try_get("exit_code")?,
                    normalized_hash: row.try_get("normalized_hash")?,
                    eligible: row.try_get("eligible")?,
                    rank: row.try_get::<Option<i64>, _>("rank")?.map(|r| r as usize),
                })
            })
            .collect()
    }

    async fn events(&self, run: &RunId) -> Result<Vec<Event>, StoreError> {
        let rows = sqlx::query("SELECT seq, at, kind, candidate, data FROM events WHERE run_id = $1 ORDER BY seq")
            .bind(run.as_str())
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                let kind: String = row.try_get("kind")?;
                let data: String = row.try_get("data")?;
                let candidate: Option<String> = row.try_get("candidate")?;
                Ok(Event {
                    seq: row.try_get::<i64, _>("seq")? as u64,
                    run_id: run.clone(),
                    at: Timestamp(row.try_get("at")?),
                    kind: serde_json::from_value::<EventKind>(serde_json::Value::String(kind.clone()))
                        .map_err(|_| StoreError::Corrupt { column: "events.kind", value: kind })?,
                    candidate: candidate.and_then(|c| CandidateId::parse(&c)),
                    data: serde_json::from_str(&data)
                        .map_err(|_| StoreError::Corrupt { column: "events.data", value: data })?,
                })
            })
            .collect()
    }
}

const LIST_RUNS: &str = "SELECT id, repo, task_title, status, base_commit, run_dir, candidates, winner, started_at, finished_at FROM runs ORDER BY started_at DESC, id DESC LIMIT $1";
const GET_RUN: &str = "SELECT id, repo, task_title, status, base_commit, run_dir, candidates, winner, started_at, finished_at FROM runs WHERE id = $1";
