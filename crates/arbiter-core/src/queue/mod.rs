//! The queue's ports and rules, plain Rust: the plan queue ([`plans::PlanStore`], a worker
//! half and an admin half), the unit queue of spread tournaments ([`units::UnitQueue`]),
//! the records they read and write, the failures they report ([`StoreError`]) and the rules
//! every implementation decides with ([`rules`]). The stores (`arbiter-store`) implement
//! the ports over SQLite and Postgres.

#[cfg(feature = "arbitrary")]
mod arbitrary;
pub mod plans;
pub mod rules;
pub mod units;

use std::error::Error;
use std::fmt;

/// A failure of the database under a store, as the database reported it.
#[derive(Debug)]
pub struct DatabaseError {
    source: Box<dyn Error + Send + Sync>,
    unique_violation: bool,
}

impl DatabaseError {
    /// `unique_violation`: the statement broke a unique constraint (a name taken, say).
    pub fn new(source: impl Into<Box<dyn Error + Send + Sync>>, unique_violation: bool) -> Self {
        DatabaseError { source: source.into(), unique_violation }
    }

    /// The statement broke a unique constraint.
    pub fn is_unique_violation(&self) -> bool {
        self.unique_violation
    }
}

impl fmt::Display for DatabaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.source.fmt(f)
    }
}

impl Error for DatabaseError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(self.source.as_ref())
    }
}

/// Store failures.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the database {location}: {source}; check the path and its permissions")]
    Open { location: String, source: DatabaseError },
    #[error("cannot connect to the Postgres database {location}: {problem}; {fix}")]
    Connect { location: String, problem: String, fix: String },
    #[error("{problem}; {fix}")]
    UnsupportedDatabase { problem: String, fix: String },
    #[error("database migration {version} ({name}) failed: {source}")]
    Migration { version: i64, name: &'static str, source: DatabaseError },
    #[error("the database is at schema version {found}, newer than this arbiter knows ({known}); upgrade arbiter")]
    TooNew { found: i64, known: i64 },
    #[error("database error: {0}")]
    Query(DatabaseError),
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
