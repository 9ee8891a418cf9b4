//! Statements shared by both stores: their text is valid on SQLite and Postgres alike
//! (`$N` placeholders, `ON CONFLICT … DO UPDATE`), so the two implementations cannot drift.
//! Statements that need a dialect of their own live with their store.

pub const PUT_RUN: &str =
    "INSERT INTO runs (id, repo, task_title, status, base_commit, run_dir, candidates, winner, started_at, finished_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
     ON CONFLICT (id) DO UPDATE SET status = excluded.status, winner = excluded.winner,
         finished_at = excluded.finished_at, base_commit = excluded.base_commit, version = runs.version + 1";

pub const FINISH_RUN: &str =
    "UPDATE runs SET status = $2, winner = $3, finished_at = $4, version = version + 1 WHERE id = $1";

pub const PUT_CANDIDATE: &str =
    "INSERT INTO candidates (run_id, id, idx, runner, status, exit_code, normalized_hash, eligible, rank)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
     ON CONFLICT (run_id, id) DO UPDATE SET status = excluded.status, exit_code = excluded.exit_code,
         normalized_hash = excluded.normalized_hash, eligible = excluded.eligible, rank = excluded.rank";

pub const APPEND_EVENT: &str =
    "INSERT INTO events (run_id, seq, at, kind, candidate, data) VALUES ($1, $2, $3, $4, $5, $6)";

pub const LIST_RUNS: &str = "SELECT id, repo, task_title, status, base_commit, run_dir, candidates, winner, started_at, finished_at FROM runs ORDER BY started_at DESC, id DESC LIMIT $1";

pub const GET_RUN: &str = "SELECT id, repo, task_title, status, base_commit, run_dir, candidates, winner, started_at, finished_at FROM runs WHERE id = $1";

pub const CANDIDATES: &str = "SELECT id, idx, runner, status, exit_code, normalized_hash, eligible, rank FROM candidates WHERE run_id = $1 ORDER BY idx";

pub const EVENTS: &str = "SELECT seq, at, kind, candidate, data FROM events WHERE run_id = $1 ORDER BY seq";

pub const CURRENT_VERSION: &str = "SELECT COALESCE(MAX(version), 0) FROM schema_migrations";

pub const RECORD_MIGRATION: &str = "INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)";

use crate::db::{Db, Sql, sql};
use crate::store::{Backend, SqlStore};
use crate::{CandidateRecord, RunRecord};

/// `PUT_RUN` with its parameters bound.
fn put_run<D: Db>(r: &RunRecord) -> Sql<'static, D> {
    sql(PUT_RUN)
        .bind(r.id.as_str())
        .bind(r.repo.as_str())
        .bind(r.task_title.as_str())
        .bind(r.status.as_str())
        .bind(r.base_commit.as_str())
        .bind(r.run_dir.as_str())
        .bind(r.candidates as i64)
        .bind(r.winner.as_ref().map(|w| w.as_str()))
        .bind(r.started_at.0)
        .bind(r.finished_at.map(|t| t.0))
}

/// `PUT_CANDIDATE` with its parameters bound.
fn put_candidate<D: Db>(c: &CandidateRecord) -> Sql<'static, D> {
    sql(PUT_CANDIDATE)
        .bind(c.run_id.as_str())
        .bind(c.id.as_str())
        .bind(c.index as i64)
        .bind(c.runner.as_str())
        .bind(c.status.as_str())
        .bind(c.exit_code)
        .bind(c.normalized_hash.as_deref())
        .bind(c.eligible)
        .bind(c.rank.map(|r| r as i64))
}

/// The run index over any backend.
#[async_trait::async_trait]
impl<B: Backend> crate::Store for SqlStore<B> {
    async fn put_run(&self, r: &crate::RunRecord) -> Result<(), crate::StoreError> {
        put_run(r).execute(&self.pool).await?;
        Ok(())
    }

    async fn finish_run(
        &self,
        id: &arbiter_core::ids::RunId,
        status: arbiter_core::status::RunStatus,
        winner: Option<&arbiter_core::ids::CandidateId>,
        finished_at: Option<arbiter_core::time::Timestamp>,
    ) -> Result<(), crate::StoreError> {
        sql(crate::sql::FINISH_RUN)
            .bind(id.as_str())
            .bind(status.as_str())
            .bind(winner.map(|w| w.as_str()))
            .bind(finished_at.map(|t| t.0))
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn put_candidate(&self, c: &crate::CandidateRecord) -> Result<(), crate::StoreError> {
        put_candidate(c).execute(&self.pool).await?;
        Ok(())
    }

    async fn append_event(&self, e: &arbiter_core::event::Event) -> Result<(), crate::StoreError> {
        sql(crate::sql::APPEND_EVENT)
            .bind(e.run_id.as_str())
            .bind(e.seq as i64)
            .bind(e.at.0)
            .bind(e.kind.as_str())
            .bind(e.candidate.as_ref().map(|c| c.as_str()))
            .bind(e.data.to_string())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn list_runs(&self, limit: u32) -> Result<Vec<crate::RunRecord>, crate::StoreError> {
        let found = sql(crate::sql::LIST_RUNS).bind(limit as i64).fetch_all(&self.pool).await?;
        found.iter().map(crate::rows::run).collect()
    }

    async fn get_run(&self, id: &arbiter_core::ids::RunId) -> Result<Option<crate::RunRecord>, crate::StoreError> {
        let row = sql(crate::sql::GET_RUN).bind(id.as_str()).fetch_optional(&self.pool).await?;
        row.as_ref().map(crate::rows::run).transpose()
    }

    async fn candidates(
        &self,
        run: &arbiter_core::ids::RunId,
    ) -> Result<Vec<crate::CandidateRecord>, crate::StoreError> {
        let found = sql(crate::sql::CANDIDATES).bind(run.as_str()).fetch_all(&self.pool).await?;
        found.iter().map(|row| crate::rows::candidate(run, row)).collect()
    }

    async fn events(
        &self,
        run: &arbiter_core::ids::RunId,
    ) -> Result<Vec<arbiter_core::event::Event>, crate::StoreError> {
        let found = sql(crate::sql::EVENTS).bind(run.as_str()).fetch_all(&self.pool).await?;
        found.iter().map(|row| crate::rows::event(run, row)).collect()
    }
}
