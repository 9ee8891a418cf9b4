//! arbiter-store: where runs, candidates and events are indexed.
//!
//! [`Store`] is the port; [`sqlite::SqliteStore`] the embedded implementation behind
//! `.arbiter/arbiter.db`, [`postgres::PgStore`] the shared one. Both are one generic store
//! ([`store::SqlStore`]) over a database ([`db::Db`]): the same statements ([`sql`]), the
//! same row decoding and the same code, each backend adding only its dialect, its wake-ups
//! and its one-round-trip fast paths; one conformance suite tests both. The run directory
//! stays the source of truth for a run's artifacts; the store indexes them and keeps the
//! event log queryable. The plan queue ([`plans::PlanStore`]: tasks, leases, budgets, plan
//! events) and the unit queue ([`units::UnitQueue`]) are ports of `arbiter_core::queue`,
//! implemented here for both stores; [`workers::WorkerRegistry`] the remote workers of a
//! control plane and their tokens.

#![forbid(unsafe_code)]

mod batch;
pub mod db;
pub mod migrate;
pub mod pg_url;
mod plan_queue;
mod plan_rows;
pub mod plan_sql;
pub mod postgres;
mod rows;
pub mod sql;
pub mod sqlite;
pub mod store;
pub mod tokens;
mod unit_queue;
mod unit_sql;
pub mod workers;

use arbiter_core::event::Event;
use arbiter_core::ids::{CandidateId, RunId};
use arbiter_core::status::{CandidateStatus, RunStatus};
use arbiter_core::time::Timestamp;
use async_trait::async_trait;

pub use arbiter_core::queue::{DatabaseError, StoreError, plans, units};

/// A run as the store indexes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunRecord {
    pub id: RunId,
    pub repo: String,
    pub task_title: String,
    pub status: RunStatus,
    pub base_commit: String,
    pub run_dir: String,
    pub candidates: u32,
    pub winner: Option<CandidateId>,
    pub started_at: Timestamp,
    pub finished_at: Option<Timestamp>,
}

/// A candidate as the store indexes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CandidateRecord {
    pub run_id: RunId,
    pub id: CandidateId,
    pub index: usize,
    pub runner: String,
    pub status: CandidateStatus,
    pub exit_code: Option<i32>,
    pub normalized_hash: Option<String>,
    pub eligible: Option<bool>,
    pub rank: Option<usize>,
}

/// The persistence port.
#[async_trait]
pub trait Store: Send + Sync {
    /// Inserts a run, or replaces its row when it exists.
    async fn put_run(&self, run: &RunRecord) -> Result<(), StoreError>;
    /// Changes a run's status, winner and end time.
    async fn finish_run(
        &self,
        id: &RunId,
        status: RunStatus,
        winner: Option<&CandidateId>,
        finished_at: Option<Timestamp>,
    ) -> Result<(), StoreError>;
    /// Inserts a candidate, or replaces its row when it exists.
    async fn put_candidate(&self, c: &CandidateRecord) -> Result<(), StoreError>;
    /// Appends one event.
    async fn append_event(&self, e: &Event) -> Result<(), StoreError>;
    /// The newest runs first.
    async fn list_runs(&self, limit: u32) -> Result<Vec<RunRecord>, StoreError>;
    async fn get_run(&self, id: &RunId) -> Result<Option<RunRecord>, StoreError>;
    async fn candidates(&self, run: &RunId) -> Result<Vec<CandidateRecord>, StoreError>;
    /// A run's events in order.
    async fn events(&self, run: &RunId) -> Result<Vec<Event>, StoreError>;
}
