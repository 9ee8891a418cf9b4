//! The plan queue over any backend: one implementation of the worker half
//! ([`PlanWork`](crate::plans::PlanWork), [`work`]) and the admin half
//! ([`PlanAdmin`](crate::plans::PlanAdmin), [`admin`] and [`import`]) for SQLite and
//! Postgres alike, built from the transaction steps in [`steps`]. The rules they decide
//! with are `arbiter_core::queue::rules`.

mod admin;
mod import;
mod steps;
mod work;

use crate::plans::*;
use arbiter_core::budget::Budget;
use arbiter_core::money::Usd;
use arbiter_core::plan::state::AttemptStatus;
use arbiter_core::time::Timestamp;

/// A report that arrived under a lease that is no longer held.
pub(crate) struct Stale;

/// A locked plan's budget and flags.
pub(crate) struct PlanLock {
    budget: Budget,
    guard_files: bool,
    cancelled: bool,
    backoff_base: u64,
}

/// How an attempt ends.
pub(crate) struct Ending<'a> {
    plan: &'a str,
    task: &'a str,
    fence: i64,
    result: &'a AttemptResult,
    status: AttemptStatus,
    cost: Usd,
    /// An expiry: only if the lease is still expired at this moment.
    expired_by: Option<Timestamp>,
}
