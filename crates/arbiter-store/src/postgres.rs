//! The Postgres store (`--database-url` / `ARBITER_DATABASE_URL`), for a control plane shared
//! by many workers. Same statements and row types as SQLite; migrations are numbered in
//! lock-step with SQLite's and serialized across processes by an advisory lock.
//!
//! The plan queue claims with `FOR UPDATE SKIP LOCKED`: concurrent claimers never wait for
//! each other's rows. A plan without a budget or key files is claimed, and a report without
//! cost finished, in one statement each; otherwise the plan row is locked for the
//! transaction, which is what keeps reservations under the budget and overlapping tasks
//! apart. (The one-statement claim reads the plan's flags without that lock: a budget set
//! or a cancel committed while it runs takes effect from the next claim.) Locks are taken
//! in one order everywhere — the plan's ending lock, the plan row, then tasks in id order —
//! so concurrent claims, reports, imports and cancels do not deadlock. Waiting claimers are woken by `LISTEN/NOTIFY` on the `arbiter_plans` channel
//! (sent after each commit that may make work), with polling as the safety net.

use std::sync::Arc;
use std::time::Duration;

use arbiter_core::time::Timestamp;
use sqlx::Connection;
use sqlx::Row;
use sqlx::postgres::{PgConnection, PgListener, PgPool, PgPoolOptions};
use tokio::sync::{Notify, OnceCell};

use crate::StoreError;
use crate::migrate::POSTGRES;
use crate::pg_url::PgUrl;
use crate::plan_sql::{PlanDialect, pick_ready, pick_ready_among, plan_budget, task_state};
use crate::plans::{AttemptResult, Claimed, Finished, Lease, Wake};

/// How long a connection attempt may take before the server counts as unreachable.
/// How long a pooled connection may sit idle and still be used without a ping first.
const IDLE_BEFORE_PING: Duration = Duration::from_secs(10);

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// What to check, for a connection that failed with `problem`.
fn connect_fix(problem: &str) -> &'static str {
    let p = problem.to_ascii_lowercase();
    if p.contains("role \"") && p.contains("does not exist") {
        "check the user in the database URL, or create it (createuser NAME)"
    } else if p.contains("password") || p.contains("authentication") {
        "check the user and password in the database URL (ARBITER_DATABASE_URL or --database-url)"
    } else if p.contains("does not exist") {
        "check the database name in the URL, or create it (createdb NAME)"
    } else if p.contains("tls") || p.contains("ssl") || p.contains("certificate") {
        "check sslmode in the URL: require encrypts, verify-ca and verify-full also check the server's certificate (sslrootcert=FILE names the CA); a server without TLS needs sslmode=disable or prefer"
    } else {
        "check that Postgres runs and accepts connections at that host and port (pg_isready -h HOST -p PORT), and the URL in ARBITER_DATABASE_URL or --database-url"
    }
}

/// The channel waiting claimers listen on.
const CHANNEL: &str = "arbiter_plans";

/// Serializes concurrent migrators (any constant shared by every arbiter process).
const MIGRATION_LOCK: i64 = 0x0061_7262_6974_6572; // "arbiter"

/// The Postgres implementation of [`Store`](crate::Store) and [`PlanStore`](crate::plans::PlanStore).
#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
    work: Arc<Notify>,
    listening: Arc<OnceCell<()>>,
}

impl PgStore {
    /// Connects to `url` and brings the schema up to date. The URL's password is never
    /// echoed in errors. One connection is opened first, so that a refused connection, a
    /// wrong password or a TLS problem is reported at once with what to check (a pool would
    /// retry until its acquire timeout and say only that it timed out).
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let url = PgUrl::parse(url)?;
        let failed = |problem: String| StoreError::Connect {
            location: url.location.clone(),
            fix: connect_fix(&problem).into(),
            problem: url.scrub(&problem),
        };
        match tokio::time::timeout(CONNECT_TIMEOUT, PgConnection::connect_with(&url.options)).await {
            Err(_) => return Err(failed(format!("no answer within {} s", CONNECT_TIMEOUT.as_secs()))),
            Ok(Err(e)) => return Err(failed(e.to_string())),
            Ok(Ok(first)) => {
                let _ = first.close().await;
            }
        }
        // A connection taken from the pool is pinged only when it sat idle long enough for
        // the server (or something between) to have dropped it: sqlx pings every one by
        // default, a round trip more for every statement.
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(CONNECT_TIMEOUT)
            .test_before_acquire(false)
            .before_acquire(|conn, meta| {
                Box::pin(async move {
                    if meta.idle_for > IDLE_BEFORE_PING {
                        sqlx::Connection::ping(conn).await?;
                    }
                    Ok(true)
                })
            })
            .connect_lazy_with(url.options.clone());
        let store = PgStore { pool, work: Arc::new(Notify::new()), listening: Arc::new(OnceCell::new()) };
        store.migrate().await?;
        Ok(store)
    }

    async fn write_tx(&self) -> Result<sqlx::Transaction<'_, sqlx::Postgres>, StoreError> {
        Ok(self.pool.begin().await?)
    }

    /// Tells every listener (in any process) that the plan may have work.
    async fn notify_work(&self, plan_id: &str) {
        let _ = sqlx::query("SELECT pg_notify($1, $2)").bind(CHANNEL).bind(plan_id).execute(&self.pool).await;
        self.work.notify_waiters();
    }

    /// The notifier waiting claimers are woken through, listening from the first use on.
    async fn work_handle(&self) -> Arc<Notify> {
        self.listen().await;
        self.work.clone()
    }

    /// Waits for a notification, listening from the first wait on.
    async fn wait_notified(&self, timeout: Duration) -> Wake {
        self.listen().await;
        match tokio::time::timeout(timeout, self.work.notified()).await {
            Ok(()) => Wake::Notified,
            Err(_) => Wake::TimedOut,
        }
    }

    /// Starts listening for other processes' notifications (once).
    async fn listen(&self) {
        self.listening
            .get_or_init(|| async {
                let work = self.work.clone();
                if let Ok(mut listener) = PgListener::connect_with(&self.pool).await
                    && listener.listen(CHANNEL).await.is_ok()
                {
                    tokio::spawn(async move {
                        // Ends when the connection is lost for good; polling remains.
                        while listener.recv().await.is_ok() {
                            work.notify_waiters();
                        }
                    });
                }
            })
            .await;
    }

    /// One statement when the plan has no budget and no key files: pick with
    /// `SKIP LOCKED`, claim, record the attempt and the event. `None` sends the claim down
    /// the general path (a guarded plan, or nothing ready). `among`: a JSON array of the
    /// tasks to claim one of (`None`: any).
    async fn claim_fast(
        &self,
        plan: &str,
        worker: &str,
        ttl: Duration,
        now: Timestamp,
        among: Option<&str>,
    ) -> Result<Option<Claimed>, StoreError> {
        let expires = crate::plan_impl::expiry(now, ttl);
        let Some(row) = sqlx::query(CLAIM_FAST)
            .bind(plan)
            .bind(now.0)
            .bind(worker)
            .bind(expires.0)
            .bind(among)
            .fetch_optional(&self.pool)
            .await?
        else {
            return Ok(None);
        };
        crate::plan_impl::fast_claim(&row, plan, worker, expires).map(Some)
    }

    /// One statement for a report with nothing to charge or release: end the task and the
    /// attempt, unblock dependents, write the events. `None` sends the report down the
    /// general path (which also refuses a stale fence).
    async fn finish_fast(
        &self,
        lease: &Lease,
        result: &AttemptResult,
        now: Timestamp,
    ) -> Result<Option<Finished>, StoreError> {
        let Some(o) = crate::plan_impl::fast_outcome(lease, result, now) else { return Ok(None) };
        let row =
            crate::plan_impl::bind_fast_report!(sqlx::query(FINISH_FAST), lease, &o, now).fetch_one(&self.pool).await?;
        let newly_ready = row.try_get::<Option<Vec<String>>, _>("newly_ready")?;
        Ok(newly_ready.map(|ready| o.finished(ready)))
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

impl PlanDialect for PgStore {
    const LOCK_PLAN: &'static str = concat!(plan_budget!(), " FOR UPDATE");
    const LOCK_TASK: &'static str = concat!(task_state!(), " FOR UPDATE");
    const PICK: &'static str = concat!(pick_ready!(), " FOR UPDATE OF t SKIP LOCKED");
    const PICK_AMONG: &'static str =
        concat!(pick_ready_among!("SELECT jsonb_array_elements_text($4::jsonb)"), " FOR UPDATE OF t SKIP LOCKED");
    // The plan's ending lock: (1634886260, hashtext(plan)), as in `arbiter_finish_fast`.
    const ENDING_GUARD: Option<&'static str> = Some("SELECT pg_advisory_xact_lock_shared(1634886260, hashtext($1))");
    const IMPORT_GUARD: Option<&'static str> = Some("SELECT pg_advisory_xact_lock(1634886260, hashtext($1))");
    const LOCK_ENDING: Option<&'static str> = Some(
        "SELECT id FROM plan_tasks WHERE plan_id = $1
           AND id IN (SELECT $2 UNION ALL SELECT task_id FROM plan_deps WHERE plan_id = $1 AND depends_on = $2)
         ORDER BY id FOR UPDATE",
    );
    const LOCK_TASKS: Option<&'static str> =
        Some("SELECT id FROM plan_tasks WHERE plan_id = $1 ORDER BY id FOR UPDATE");
}

/// See [`PgStore::claim_fast`].
const CLAIM_FAST: &str = "WITH picked AS (
        SELECT t.plan_id, t.id FROM plan_tasks t JOIN plans p ON p.id = t.plan_id
        WHERE t.plan_id = $1 AND t.status = 'ready' AND t.not_before <= $2
          AND NOT p.cancelled AND NOT p.guard_files AND p.budget_pico IS NULL
          AND ($5::jsonb IS NULL OR t.id IN (SELECT jsonb_array_elements_text($5::jsonb)))
        ORDER BY t.priority, t.ord LIMIT 1
        FOR UPDATE OF t SKIP LOCKED),
    claimed AS (
        UPDATE plan_tasks t SET status = 'running', attempts = t.attempts + 1, fence = t.fence + 1, lease_owner = $3,
            lease_expires = $4, reserved_pico = 0, version = t.version + 1, updated_at = $2
        FROM picked WHERE t.plan_id = picked.plan_id AND t.id = picked.id
        RETURNING t.plan_id, t.id, t.attempts, t.max_attempts, t.fence, t.spec),
    att AS (
        INSERT INTO plan_attempts (plan_id, task_id, attempt, fence, worker, status, started_at, reserved_pico)
        SELECT plan_id, id, attempts, fence, $3, 'running', $2, 0 FROM claimed),
    ev AS (
        INSERT INTO plan_events (plan_id, task_id, attempt, kind, at, data)
        SELECT plan_id, id, attempts, 'task_claimed', $2,
               json_build_object('worker', $3::text, 'fence', fence, 'lease_expires', $4::bigint, 'reserved', '0')::text
        FROM claimed)
    SELECT c.id, c.attempts, c.max_attempts, c.fence, c.spec, p.retry_backoff_seconds
    FROM claimed c JOIN plans p ON p.id = c.plan_id";

/// See [`PgStore::finish_fast`]: the function `arbiter_finish_fast` of migration 0002,
/// which takes its locks in the order the general path does.
const FINISH_FAST: &str =
    "SELECT arbiter_finish_fast($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) AS newly_ready";

crate::store_impl!(PgStore);
crate::worker_registry_impl!(PgStore);
crate::access_tokens_impl!(PgStore);
crate::plan_store_impl!(PgStore, sqlx::Postgres);
crate::unit_queue_impl!(PgStore, sqlx::Postgres);

/// Units are locked like tasks: a claim skips the rows another claimer holds. A unit that
/// changes locks its task's row too, so the units of one attempt change one after another:
/// of candidates finishing at once, the last sees the others done and readies the
/// evaluation (locking only its own row, each would see the others still running).
impl crate::unit_impl::UnitDialect for PgStore {
    const PICK_UNITS: &'static str = concat!(crate::unit_impl::pick_units!(), " FOR UPDATE OF u SKIP LOCKED");
    const LOCK_UNIT: &'static str = concat!(crate::unit_impl::unit_state!(), " FOR UPDATE OF t, u");
    const LOCK_ATTEMPT: &'static str = concat!(crate::unit_impl::attempt_state!(), " FOR UPDATE");
}
