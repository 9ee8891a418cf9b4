//! arbiter-store: where runs, candidates and events are indexed.
//!
//! [`Store`] is the port; [`sqlite::SqliteStore`] the embedded implementation behind
//! `.arbiter/arbiter.db`, [`postgres::PgStore`] the shared one. Both run the same statements
//! ([`sql`]) and decode rows with the same code, and one conformance suite tests both. The run
//! directory stays the source of truth for a run's artifacts; the store indexes them and
//! keeps the event log queryable. [`plans::PlanStore`] is the plan queue (tasks, leases,
//! budgets, plan events), implemented by both stores with one behaviour;
//! [`workers::WorkerRegistry`] the remote workers of a control plane and their tokens.

#![forbid(unsafe_code)]

#[cfg(feature = "arbitrary")]
mod arbitrary;
mod batch;
pub mod db;
pub mod migrate;
pub mod pg_url;
mod plan_impl;
mod plan_queue;
pub mod plan_sql;
pub mod plans;
pub mod postgres;
mod rows;
pub mod sql;
pub mod sqlite;
pub mod store;
pub mod tokens;
mod unit_impl;
mod unit_queue;
pub mod units;
pub mod workers;

use arbiter_core::event::Event;
use arbiter_core::ids::{CandidateId, RunId};
use arbiter_core::status::{CandidateStatus, RunStatus};
use arbiter_core::time::Timestamp;
use async_trait::async_trait;

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

/// Store failures.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the database {location}: {source}; check the path and its permissions")]
    Open { location: String, source: sqlx::Error },
    #[error("cannot connect to the Postgres database {location}: {problem}; {fix}")]
    Connect { location: String, problem: String, fix: String },
    #[error("{problem}; {fix}")]
    UnsupportedDatabase { problem: String, fix: String },
    #[error("database migration {version} ({name}) failed: {source}")]
    Migration { version: i64, name: &'static str, source: sqlx::Error },
    #[error("the database is at schema version {found}, newer than this arbiter knows ({known}); upgrade arbiter")]
    TooNew { found: i64, known: i64 },
    #[error("database error: {0}")]
    Query(#[from] sqlx::Error),
    #[error("the database holds an invalid value in {column}: '{value}'")]
    Corrupt { column: &'static str, value: String },
    #[error("no plan named '{id}'; `arbiter plan list` shows the plans, `arbiter plan import FILE` adds one")]
    NoPlan { id: String },
    #[error("plan {plan} has no task '{task}'; `arbiter plan show {plan}` lists its tasks")]
    NoTask { plan: String, task: String },
    #[error(
        "a plan named '{id}' exists already, nothing was written; `arbiter plan show {id}` shows it (pick another id, or `arbiter plan import FILE` to add tasks to it)"
    )]
    PlanExists { id: String },
    #[error(
        "plan {plan} comes from {url} already, nothing was written: a source makes one plan (`arbiter plan show {plan}` shows it)"
    )]
    SourceTaken { url: String, plan: String },
    #[error("the plan is not valid, nothing was written:\n{}", .problems.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n"))]
    PlanInvalid { problems: Vec<String> },
    #[error("the import would change tasks that already started, nothing was written:\n{}\nonly tasks that have not started can be updated; `arbiter plan retry` or `arbiter plan reset` first", .tasks.iter().map(|t| format!("  - {t}")).collect::<Vec<_>>().join("\n"))]
    ImportRefused { tasks: Vec<String> },
    #[error(
        "the lease on task {task} of plan {plan} (fencing token {fence}) is no longer held: its lease expired and another attempt took over, or the plan was cancelled or reset; the report was refused (the cost it reported was charged)"
    )]
    StaleLease { plan: String, task: String, fence: i64 },
    #[error(
        "the lease on unit {unit} of task {task} of plan {plan} (fencing token {fence}) is no longer held: it expired and another worker took the unit over, or its attempt ended; the report was refused (the cost it reported was charged)"
    )]
    StaleUnit { plan: String, task: String, unit: String, fence: i64 },
    #[error("plan {plan} has tasks running under live leases: {}; stop their workers or `arbiter plan cancel {plan}` first (a lease that is not renewed also runs out), then reset", .tasks.join(", "))]
    LeasesHeld { plan: String, tasks: Vec<String> },
    #[error("task {task} of plan {plan} is {status}: {action} is not possible from there")]
    NotAllowed { plan: String, task: String, status: String, action: &'static str },
    #[error("no worker named '{name}'; `arbiter worker list` shows the workers")]
    NoWorker { name: String },
    #[error(
        "a worker named '{name}' is registered already; choose another name, or re-register it explicitly (its old token stops working)"
    )]
    WorkerExists { name: String },
    #[error("{reason}")]
    InvalidWorker { reason: String },
    #[error("no access token named '{name}'; `arbiter token list` shows the tokens")]
    NoToken { name: String },
    #[error(
        "an access token named '{name}' exists already (names stay taken after a revocation: the event log names who acted); choose another name"
    )]
    TokenExists { name: String },
    #[error("{reason}")]
    InvalidToken { reason: String },
    #[error("the operating system's random number generator failed: {0}")]
    Random(String),
    #[error("a request batched with others got no answer ({0}); it may be made again")]
    Unanswered(String),
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
