//! The one store: [`SqlStore`] implements every port (the run index, the registry of workers
//! and tokens, the plan queue, the unit queue) once, as generic code over a [`Backend`] —
//! the database it runs on ([`Db`]) and what is the backend's own: its locking dialect,
//! how a write transaction begins, how waiting claimers are woken, and the one-round-trip
//! claims and reports that earn their speed. [`crate::sqlite::SqliteStore`] and
//! [`crate::postgres::PgStore`] are this store over their backends.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use arbiter_core::time::Timestamp;
use sqlx::Pool;
use tokio::sync::Notify;

use crate::StoreError;
use crate::db::{Db, Tx};
use crate::plan_sql::PlanDialect;
use crate::plans::{AttemptResult, Claimed, Finished, Lease, Wake};
use crate::unit_sql::UnitDialect;

/// What a database backend adds to the generic store.
pub trait Backend: PlanDialect + UnitDialect + Send + Sync + 'static {
    type Db: Db;

    /// Begins a transaction that writes the queue (SQLite: `BEGIN IMMEDIATE`, the one writer).
    fn write_tx<'p>(pool: &'p Pool<Self::Db>) -> impl Future<Output = Result<Tx<'p, Self::Db>, StoreError>> + Send;

    /// Tells every waiting claimer (in this process, and in others where the backend can)
    /// that the plan may have work.
    fn notify_work(&self, plan_id: &str) -> impl Future<Output = ()> + Send;

    /// The notifier waiting claimers are woken through.
    fn work_handle(&self) -> impl Future<Output = Arc<Notify>> + Send;

    /// Waits for a notification, or the timeout.
    fn wait_notified(&self, timeout: Duration) -> impl Future<Output = Wake> + Send;

    /// A claim in one round trip where the plan allows it (no budget, no key files); `None`
    /// sends the claim down the general path. `among`: a JSON array of the tasks to claim
    /// one of (`None`: any).
    fn claim_fast(
        &self,
        plan: &str,
        worker: &str,
        expires: Timestamp,
        now: Timestamp,
        among: Option<&str>,
    ) -> impl Future<Output = Result<Option<Claimed>, StoreError>> + Send;

    /// A report in one round trip where it has nothing to charge or release; `None` sends
    /// the report down the general path (which also refuses a stale fence).
    fn finish_fast(
        &self,
        lease: &Lease,
        result: &AttemptResult,
        now: Timestamp,
    ) -> impl Future<Output = Result<Option<Finished>, StoreError>> + Send;
}

/// The store over a backend `B`.
#[derive(Clone)]
pub struct SqlStore<B: Backend> {
    pub(crate) pool: Pool<B::Db>,
    backend: B,
    /// Claims and reports may take the backend's one-round-trip forms (see
    /// [`Self::general_path_only`]).
    fast: bool,
}

impl<B: Backend> SqlStore<B> {
    pub(crate) fn new(pool: Pool<B::Db>, backend: B) -> Self {
        SqlStore { pool, backend, fast: true }
    }

    /// The same store with its one-round-trip claims and reports turned off: every claim and
    /// report takes the general path. The two paths must give the same outcomes, which the
    /// differential tests check by running the same scenarios both ways.
    pub fn general_path_only(mut self) -> Self {
        self.fast = false;
        self
    }

    /// Whether claims and reports may take the one-round-trip forms.
    pub(crate) fn fast_paths(&self) -> bool {
        self.fast
    }

    pub(crate) async fn write_tx(&self) -> Result<Tx<'_, B::Db>, StoreError> {
        B::write_tx(&self.pool).await
    }

    pub(crate) async fn notify_work(&self, plan_id: &str) {
        self.backend.notify_work(plan_id).await
    }

    pub(crate) async fn work_handle(&self) -> Arc<Notify> {
        self.backend.work_handle().await
    }

    pub(crate) async fn wait_notified(&self, timeout: Duration) -> Wake {
        self.backend.wait_notified(timeout).await
    }

    pub(crate) async fn claim_fast(
        &self,
        plan: &str,
        worker: &str,
        ttl: Duration,
        now: Timestamp,
        among: Option<&str>,
    ) -> Result<Option<Claimed>, StoreError> {
        if !self.fast {
            return Ok(None);
        }
        let expires = arbiter_core::queue::rules::expiry(now, ttl);
        self.backend.claim_fast(plan, worker, expires, now, among).await
    }

    pub(crate) async fn finish_fast(
        &self,
        lease: &Lease,
        result: &AttemptResult,
        now: Timestamp,
    ) -> Result<Option<Finished>, StoreError> {
        if !self.fast {
            return Ok(None);
        }
        self.backend.finish_fast(lease, result, now).await
    }
}
