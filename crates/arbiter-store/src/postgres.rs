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
//! so concurrent claims, reports, imports and cancels do not deadlock. Waiting claimers are
//! woken by `LISTEN/NOTIFY` on the `arbiter_plans` channel (sent after each commit that may
//! make work), with polling as the safety net.
//!
//! One-statement claims and reports that callers make at the same moment (a control plane's
//! many workers) are made together ([`crate::batch`]): one statement claims the best ready
//! tasks of a plan for several claimers, one call finishes several reports of a plan — one
//! round trip and one commit instead of one each. A lone request goes out at once, alone.

use std::sync::Arc;
use std::time::Duration;

use arbiter_core::time::Timestamp;
use sqlx::Connection;
use sqlx::Row;
use sqlx::postgres::{PgConnection, PgListener, PgPool, PgPoolOptions};
use tokio::sync::{Notify, OnceCell};

use crate::StoreError;
use crate::batch::{Batched, Batcher};
use crate::db::{OrStore, Rec, Tx, sql};
use crate::migrate::POSTGRES;
use crate::pg_url::PgUrl;
use crate::plan_sql::{PICK_READY, PICK_READY_AMONG_HEAD, PICK_READY_AMONG_TAIL, PLAN_BUDGET, PlanDialect, TASK_STATE};
use crate::plans::{AttemptResult, Claimed, Finished, Lease, Wake};
use crate::store::{Backend, SqlStore};
use arbiter_core::queue::rules::FastOutcome;
use const_format::concatcp;

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

/// How many batches of one-statement claims (and, apart, of reports) go to the database at
/// once. One each: while a batch runs the next one forms, and larger batches did more per
/// second than two lanes of smaller ones (a control plane's drain of 20,000 tasks with 16
/// workers took 0.87 of the time; docs/BENCHMARKS.md, "The control plane").
const BATCH_LANES: usize = 1;

/// The most claims or reports of one batch.
const BATCH_MOST: usize = 64;

/// The Postgres store.
pub type PgStore = SqlStore<PgBackend>;

/// What is Postgres's own: row locks, `LISTEN/NOTIFY`, and the one-statement claims and
/// reports made together.
#[derive(Clone)]
pub struct PgBackend {
    pool: PgPool,
    work: Arc<Notify>,
    listening: Arc<OnceCell<()>>,
    /// One-statement claims made at the same moment, made as one statement per plan.
    claims: Arc<Batcher<Claims>>,
    /// One-statement reports made at the same moment, made as one call per plan.
    reports: Arc<Batcher<Reports>>,
}

/// A one-statement claim of any ready task of a plan.
struct ClaimAsked {
    plan: String,
    worker: String,
    expires: Timestamp,
    now: Timestamp,
}

/// A one-statement report.
struct ReportAsked {
    lease: Lease,
    outcome: FastOutcome,
    now: Timestamp,
}

impl SqlStore<PgBackend> {
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
        migrate(&pool).await?;
        let backend = PgBackend {
            claims: Arc::new(Batcher::new(BATCH_LANES, BATCH_MOST, Claims(pool.clone()))),
            reports: Arc::new(Batcher::new(BATCH_LANES, BATCH_MOST, Reports(pool.clone()))),
            pool: pool.clone(),
            work: Arc::new(Notify::new()),
            listening: Arc::new(OnceCell::new()),
        };
        Ok(SqlStore::new(pool, backend))
    }
}

async fn migrate(pool: &PgPool) -> Result<(), StoreError> {
    let mut tx = pool.begin().await.or_store()?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(MIGRATION_LOCK).execute(&mut *tx).await.or_store()?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)",
    )
    .execute(&mut *tx)
    .await.or_store()?;
    crate::migrate::apply::<sqlx::Postgres>(&mut tx, POSTGRES).await?;
    tx.commit().await.or_store()?;
    Ok(())
}

impl PgBackend {
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
}

impl Backend for PgBackend {
    type Db = sqlx::Postgres;

    async fn write_tx(pool: &PgPool) -> Result<Tx<'_, sqlx::Postgres>, StoreError> {
        pool.begin().await.or_store()
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

    /// One statement when the plan has no budget and no key files: pick with
    /// `SKIP LOCKED`, claim, record the attempt and the event. `None` sends the claim down
    /// the general path (a guarded plan, or nothing ready). `among`: a JSON array of the
    /// tasks to claim one of (`None`: any; such claims made at the same moment are made
    /// together, one statement per plan).
    async fn claim_fast(
        &self,
        plan: &str,
        worker: &str,
        expires: Timestamp,
        now: Timestamp,
        among: Option<&str>,
    ) -> Result<Option<Claimed>, StoreError> {
        if among.is_none() {
            let asked = ClaimAsked { plan: plan.to_string(), worker: worker.to_string(), expires, now };
            // A claim nobody waits for any more is not made (it would hold a task until its
            // lease ran out).
            return self.claims.ask(asked, false).await;
        }
        claim_one(&self.pool, plan, worker, expires, now, among).await
    }

    /// One statement for a report with nothing to charge or release: end the task and the
    /// attempt, unblock dependents, write the events. `None` sends the report down the
    /// general path (which also refuses a stale fence). Reports made at the same moment are
    /// made together, one call per plan.
    async fn finish_fast(
        &self,
        lease: &Lease,
        result: &AttemptResult,
        now: Timestamp,
    ) -> Result<Option<Finished>, StoreError> {
        let Some(outcome) = arbiter_core::queue::rules::fast_outcome(lease, result, now) else { return Ok(None) };
        self.reports.ask(ReportAsked { lease: lease.clone(), outcome, now }, true).await
    }
}

impl PlanDialect for PgBackend {
    const LOCK_PLAN: &'static str = concatcp!(PLAN_BUDGET, " FOR UPDATE");
    const LOCK_TASK: &'static str = concatcp!(TASK_STATE, " FOR UPDATE");
    const PICK: &'static str = concatcp!(PICK_READY, " FOR UPDATE OF t SKIP LOCKED");
    const PICK_AMONG: &'static str = concatcp!(
        PICK_READY_AMONG_HEAD,
        "SELECT jsonb_array_elements_text($4::jsonb)",
        PICK_READY_AMONG_TAIL,
        " FOR UPDATE OF t SKIP LOCKED"
    );
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

/// [`CLAIM_FAST`] for as many claimers as `$3` (their workers) and `$4` (their leases'
/// expiries) name: the n-th best ready task goes to the n-th claimer (`n`, from 1); there
/// are fewer rows than claimers when fewer tasks were ready.
const CLAIM_MANY: &str = "WITH asked AS (
        SELECT a.worker, a.expires, a.n FROM unnest($3::text[], $4::bigint[]) WITH ORDINALITY AS a(worker, expires, n)),
    picked AS (
        SELECT t.plan_id, t.id, t.priority, t.ord FROM plan_tasks t JOIN plans p ON p.id = t.plan_id
        WHERE t.plan_id = $1 AND t.status = 'ready' AND t.not_before <= $2
          AND NOT p.cancelled AND NOT p.guard_files AND p.budget_pico IS NULL
        ORDER BY t.priority, t.ord LIMIT cardinality($3::text[])
        FOR UPDATE OF t SKIP LOCKED),
    paired AS (
        SELECT r.plan_id, r.id, a.worker, a.expires, a.n
        FROM (SELECT plan_id, id, row_number() OVER (ORDER BY priority, ord) AS n FROM picked) r
        JOIN asked a ON a.n = r.n),
    claimed AS (
        UPDATE plan_tasks t SET status = 'running', attempts = t.attempts + 1, fence = t.fence + 1,
            lease_owner = paired.worker, lease_expires = paired.expires, reserved_pico = 0, version = t.version + 1,
            updated_at = $2
        FROM paired WHERE t.plan_id = paired.plan_id AND t.id = paired.id
        RETURNING t.plan_id, t.id, t.attempts, t.max_attempts, t.fence, t.spec, paired.worker, paired.expires, paired.n),
    att AS (
        INSERT INTO plan_attempts (plan_id, task_id, attempt, fence, worker, status, started_at, reserved_pico)
        SELECT plan_id, id, attempts, fence, worker, 'running', $2, 0 FROM claimed),
    ev AS (
        INSERT INTO plan_events (plan_id, task_id, attempt, kind, at, data)
        SELECT plan_id, id, attempts, 'task_claimed', $2,
               json_build_object('worker', worker, 'fence', fence, 'lease_expires', expires, 'reserved', '0')::text
        FROM claimed ORDER BY n)
    SELECT c.n, c.id, c.attempts, c.max_attempts, c.fence, c.spec, p.retry_backoff_seconds
    FROM claimed c JOIN plans p ON p.id = c.plan_id";

/// See [`PgStore::finish_fast`]: the function `arbiter_finish_fast` of migration 0002,
/// which takes its locks in the order the general path does.
const FINISH_FAST: &str =
    "SELECT arbiter_finish_fast($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) AS newly_ready";

/// [`FINISH_FAST`] for many reports of one plan: `arbiter_finish_fast_many` of migration 10,
/// which takes every lock the reports need, in order, before it finishes any.
const FINISH_MANY: &str =
    "SELECT n, newly_ready FROM arbiter_finish_fast_many($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)";

/// One claim on its own (see [`PgBackend::claim_fast`]).
async fn claim_one(
    pool: &PgPool,
    plan: &str,
    worker: &str,
    expires: Timestamp,
    now: Timestamp,
    among: Option<&str>,
) -> Result<Option<Claimed>, StoreError> {
    let Some(row) = sqlx::query(CLAIM_FAST)
        .bind(plan)
        .bind(now.0)
        .bind(worker)
        .bind(expires.0)
        .bind(among)
        .fetch_optional(pool)
        .await
        .or_store()?
    else {
        return Ok(None);
    };
    crate::plan_rows::fast_claim(&Rec::<sqlx::Postgres>(row), plan, worker, expires).map(Some)
}

/// Claims of one plan, one statement: the claimers in order, each with its claim or `None`.
async fn claim_many(pool: &PgPool, asked: &[&ClaimAsked]) -> Result<Vec<Option<Claimed>>, StoreError> {
    let Some(plan) = asked.first().map(|a| a.plan.as_str()) else { return Ok(Vec::new()) };
    let now = asked.iter().map(|a| a.now).max().unwrap_or(Timestamp(0));
    let workers: Vec<&str> = asked.iter().map(|a| a.worker.as_str()).collect();
    let expires: Vec<i64> = asked.iter().map(|a| a.expires.0).collect();
    let rows = sqlx::query(CLAIM_MANY)
        .bind(plan)
        .bind(now.0)
        .bind(&workers)
        .bind(&expires)
        .fetch_all(pool)
        .await
        .or_store()?;
    let mut claims: Vec<Option<Claimed>> = asked.iter().map(|_| None).collect();
    for row in rows.into_iter().map(Rec::<sqlx::Postgres>) {
        let (i, a) = nth(asked, row.try_get::<i64, _>("n")?, "claim batch n")?;
        claims[i] = Some(crate::plan_rows::fast_claim(&row, plan, &a.worker, a.expires)?);
    }
    Ok(claims)
}

/// The request a batch's row answers: its `n`-th (from 1), with its index.
fn nth<'a, T>(asked: &[&'a T], n: i64, column: &'static str) -> Result<(usize, &'a T), StoreError> {
    usize::try_from(n)
        .ok()
        .and_then(|n| n.checked_sub(1))
        .and_then(|i| asked.get(i).map(|r| (i, *r)))
        .ok_or_else(|| StoreError::Corrupt { column, value: n.to_string() })
}

/// Claims of any ready task, one statement per plan (a lone claim as [`CLAIM_FAST`]).
struct Claims(PgPool);

#[async_trait::async_trait]
impl Batched for Claims {
    type Request = ClaimAsked;
    type Answer = Option<Claimed>;
    type Group = String;

    fn group(&self, asked: &ClaimAsked) -> String {
        asked.plan.clone()
    }

    async fn one(&self, a: &ClaimAsked) -> Result<Option<Claimed>, StoreError> {
        claim_one(&self.0, &a.plan, &a.worker, a.expires, a.now, None).await
    }

    async fn many(&self, asked: &[&ClaimAsked]) -> Result<Vec<Option<Claimed>>, StoreError> {
        claim_many(&self.0, asked).await
    }
}

/// One report on its own (see [`PgBackend::finish_fast`]).
async fn finish_one(pool: &PgPool, r: &ReportAsked) -> Result<Option<Finished>, StoreError> {
    let row = crate::plan_rows::bind_fast_report(sql(FINISH_FAST), &r.lease, &r.outcome, r.now)
        .into_query()
        .fetch_one(pool)
        .await
        .or_store()?;
    let newly_ready = row.try_get::<Option<Vec<String>>, _>("newly_ready").or_store()?;
    Ok(newly_ready.map(|ready| r.outcome.finished(ready)))
}

/// Reports of one plan, one call: each report's outcome, in order.
async fn finish_many(pool: &PgPool, asked: &[&ReportAsked]) -> Result<Vec<Option<Finished>>, StoreError> {
    let Some(plan) = asked.first().map(|r| r.lease.plan_id.as_str()) else { return Ok(Vec::new()) };
    let texts = |f: fn(&ReportAsked) -> &str| asked.iter().map(|r| f(r)).collect::<Vec<&str>>();
    let optional = |f: fn(&ReportAsked) -> Option<&str>| asked.iter().map(|r| f(r)).collect::<Vec<Option<&str>>>();
    let numbers = |f: fn(&ReportAsked) -> i64| asked.iter().map(|r| f(r)).collect::<Vec<i64>>();
    let tasks = texts(|r| &r.lease.task_id);
    let statuses = texts(|r| r.outcome.decision.status.as_str());
    let not_befores = numbers(|r| r.outcome.decision.not_before.0);
    let run_ids = optional(|r| r.outcome.decision.run_id.as_deref());
    let commits = optional(|r| r.outcome.decision.commit.as_deref());
    let reasons = optional(|r| r.outcome.decision.reason.as_deref());
    let nows = numbers(|r| r.now.0);
    let fences = numbers(|r| r.lease.fence);
    let attempt_statuses = texts(|r| r.outcome.attempt_status.as_str());
    let kinds = texts(|r| &r.outcome.kind);
    let datas: Vec<String> = asked.iter().map(|r| r.outcome.data.to_string()).collect();
    let rows = sqlx::query(FINISH_MANY)
        .bind(plan)
        .bind(&tasks)
        .bind(&statuses)
        .bind(&not_befores)
        .bind(&run_ids)
        .bind(&commits)
        .bind(&reasons)
        .bind(&nows)
        .bind(&fences)
        .bind(&attempt_statuses)
        .bind(&kinds)
        .bind(&datas)
        .fetch_all(pool)
        .await
        .or_store()?;
    let mut finished: Vec<Option<Finished>> = asked.iter().map(|_| None).collect();
    for row in &rows {
        let (i, r) = nth(asked, row.try_get::<i32, _>("n").or_store()?.into(), "report batch n")?;
        let newly_ready = row.try_get::<Option<Vec<String>>, _>("newly_ready").or_store()?;
        finished[i] = newly_ready.map(|ready| r.outcome.finished(ready));
    }
    Ok(finished)
}

/// One-statement reports, one call per plan (a lone report as [`FINISH_FAST`]).
struct Reports(PgPool);

#[async_trait::async_trait]
impl Batched for Reports {
    type Request = ReportAsked;
    type Answer = Option<Finished>;
    type Group = String;

    fn group(&self, asked: &ReportAsked) -> String {
        asked.lease.plan_id.clone()
    }

    async fn one(&self, r: &ReportAsked) -> Result<Option<Finished>, StoreError> {
        finish_one(&self.0, r).await
    }

    async fn many(&self, asked: &[&ReportAsked]) -> Result<Vec<Option<Finished>>, StoreError> {
        finish_many(&self.0, asked).await
    }
}

/// Units are locked like tasks: a claim skips the rows another claimer holds. A unit that
/// changes locks its task's row too, so the units of one attempt change one after another:
/// of candidates finishing at once, the last sees the others done and readies the
/// evaluation (locking only its own row, each would see the others still running).
impl crate::unit_sql::UnitDialect for PgBackend {
    const PICK_UNITS: &'static str = concatcp!(crate::unit_sql::PICK_UNITS, " FOR UPDATE OF u SKIP LOCKED");
    const LOCK_UNIT: &'static str = concatcp!(crate::unit_sql::UNIT_STATE, " FOR UPDATE OF t, u");
    const LOCK_ATTEMPT: &'static str = concatcp!(crate::unit_sql::ATTEMPT_STATE, " FOR UPDATE");
}

/// The batched statements, made directly (whether concurrent callers batch depends on
/// timing; what a batch does must not), against the machine's real Postgres.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::plans::{Import, PlanAdmin, PlanWork};
    use arbiter_core::plan::file::{Syntax, parse};
    use arbiter_core::plan::state::TaskStatus;

    const SECOND: i64 = 1_000_000;

    fn t(s: i64) -> Timestamp {
        Timestamp(1_800_000_000 * SECOND + s * SECOND)
    }

    /// A store on a fresh database; drop it with [`drop_database`].
    async fn fresh_store() -> (PgStore, String) {
        let admin =
            std::env::var("DATABASE_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
        let mut conn = PgConnection::connect(&admin)
            .await
            .unwrap_or_else(|e| panic!("Postgres is required for these tests ({e}); start it and set DATABASE_URL"));
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
        let name = format!("arbiter_batch_test_{}_{nanos}", std::process::id());
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut conn).await.unwrap();
        let base = admin.rsplit_once('/').map(|(b, _)| b.to_string()).unwrap();
        (PgStore::connect(&format!("{base}/{name}")).await.unwrap(), name)
    }

    async fn drop_database(store: PgStore, name: &str) {
        store.pool.close().await;
        let admin =
            std::env::var("DATABASE_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
        let mut conn = PgConnection::connect(&admin).await.unwrap();
        let drop = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
        sqlx::query(sqlx::AssertSqlSafe(drop)).execute(&mut conn).await.unwrap();
    }

    fn claimer(worker: &str, at: i64) -> ClaimAsked {
        ClaimAsked { plan: "p".into(), worker: worker.into(), expires: t(at + 30), now: t(at) }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn batched_claims_and_reports_do_what_each_would_alone() {
        let (store, name) = fresh_store().await;
        let spec = parse(
            r#"{"id": "p", "name": "Plan", "defaults": {"retry_backoff_seconds": 0}, "tasks": [
                {"id": "A", "title": "a"}, {"id": "B", "title": "b"}, {"id": "C", "title": "c"},
                {"id": "D", "title": "d", "dependencies": ["A", "B"]},
                {"id": "E", "title": "e", "dependencies": ["A"]}]}"#,
            Syntax::Json,
        )
        .unwrap();
        let import = Import::adding(&spec, t(0));
        store.import_plan(import).await.unwrap();

        // Five claimers, three ready tasks: the best three go to the first three claimers,
        // each lease recorded for the worker that holds it.
        let asked: Vec<ClaimAsked> = (1..=5).map(|i| claimer(&format!("w{i}"), i)).collect();
        let refs: Vec<&ClaimAsked> = asked.iter().collect();
        let claims = claim_many(&store.pool, &refs).await.unwrap();
        let got: Vec<Option<(String, String)>> =
            claims.iter().map(|c| c.as_ref().map(|c| (c.lease.worker.clone(), c.lease.task_id.clone()))).collect();
        assert_eq!(
            got,
            vec![
                Some(("w1".into(), "A".into())),
                Some(("w2".into(), "B".into())),
                Some(("w3".into(), "C".into())),
                None,
                None
            ]
        );
        for c in claims.iter().flatten() {
            let record = store.task_record("p", &c.lease.task_id).await.unwrap().unwrap();
            assert_eq!(record.status, TaskStatus::Running);
            assert_eq!(record.lease_owner.as_deref(), Some(c.lease.worker.as_str()), "{}", c.lease.task_id);
            assert_eq!(record.fence, c.lease.fence);
            assert_eq!(record.lease_expires, Some(c.lease.expires));
        }
        let events = store.events("p").await.unwrap();
        let claimed: Vec<(String, String)> = events
            .iter()
            .filter(|e| e.kind == "task_claimed")
            .map(|e| (e.task_id.clone().unwrap(), e.data["worker"].as_str().unwrap().to_string()))
            .collect();
        assert_eq!(claimed, vec![("A".into(), "w1".into()), ("B".into(), "w2".into()), ("C".into(), "w3".into())]);
        assert!(events.iter().all(|e| e.entry().is_some()), "every event reads as its type");
        assert_eq!(store.attempts("p").await.unwrap().len(), 3);

        // Three reports at once: A and B done (D, which needs both, becomes ready once; E,
        // which needs A, too), and C's under a fencing token it no longer holds: refused,
        // nothing of it changed.
        let leases: Vec<Lease> = claims.into_iter().flatten().map(|c| c.lease).collect();
        let done = AttemptResult::Succeeded { run_id: Some("run".into()), commit: Some("abc".into()) };
        let mut stale = leases[2].clone();
        stale.fence += 1;
        let reports: Vec<ReportAsked> = [&leases[0], &leases[1], &stale]
            .into_iter()
            .map(|lease| ReportAsked {
                lease: lease.clone(),
                outcome: arbiter_core::queue::rules::fast_outcome(lease, &done, t(10)).unwrap(),
                now: t(10),
            })
            .collect();
        let refs: Vec<&ReportAsked> = reports.iter().collect();
        let finished = finish_many(&store.pool, &refs).await.unwrap();
        assert_eq!(finished.len(), 3);
        let newly: Vec<Option<Vec<String>>> =
            finished.iter().map(|f| f.as_ref().map(|f| f.newly_ready.clone())).collect();
        assert_eq!(newly, vec![Some(vec!["E".to_string()]), Some(vec!["D".to_string()]), None]);
        for (id, status) in [("A", TaskStatus::Done), ("B", TaskStatus::Done), ("C", TaskStatus::Running)] {
            assert_eq!(store.task_record("p", id).await.unwrap().unwrap().status, status, "{id}");
        }
        for id in ["D", "E"] {
            let record = store.task_record("p", id).await.unwrap().unwrap();
            assert_eq!((record.status, record.deps_left), (TaskStatus::Ready, 0), "{id}");
        }
        let events = store.events("p").await.unwrap();
        let ready: Vec<&str> =
            events.iter().filter(|e| e.kind == "task_ready").filter_map(|e| e.task_id.as_deref()).collect();
        assert_eq!(ready, vec!["E", "D"], "each dependent became ready once");
        assert!(events.iter().all(|e| e.entry().is_some()), "every event reads as its type");

        // Through the store's port, concurrent claims and reports (batched or not) claim each
        // task once and finish the plan.
        let store = Arc::new(store);
        let mut joins = Vec::new();
        for w in 0..8 {
            let store = store.clone();
            joins.push(tokio::spawn(async move {
                store.claim("p", &format!("v{w}"), Duration::from_secs(30), t(11)).await.unwrap()
            }));
        }
        let mut taken = Vec::new();
        for j in joins {
            if let crate::plans::ClaimOutcome::Claimed(c) = j.await.unwrap() {
                taken.push(c.lease);
            }
        }
        let mut ids: Vec<&str> = taken.iter().map(|l| l.task_id.as_str()).collect();
        ids.sort();
        assert_eq!(ids, vec!["D", "E"]);

        // A report Postgres refuses (a run id with a NUL byte, which no text column holds)
        // fails its batch's call: the others of the batch are then made one by one, and only
        // the bad one fails. (A reason is free text: its NUL is written out, and it is kept.)
        taken.sort_by(|a, b| a.task_id.cmp(&b.task_id));
        let hostile = AttemptResult::Failed {
            reason: "exit 1: a\0b".into(),
            retry: crate::plans::Retry::Never,
            run_id: Some("run\0".into()),
        };
        let reports: Vec<ReportAsked> = [(&taken[0], &done), (&taken[1], &hostile)]
            .into_iter()
            .map(|(lease, result)| ReportAsked {
                lease: lease.clone(),
                outcome: arbiter_core::queue::rules::fast_outcome(lease, result, t(12)).unwrap(),
                now: t(12),
            })
            .collect();
        let refs: Vec<&ReportAsked> = reports.iter().collect();
        assert!(finish_many(&store.pool, &refs).await.is_err(), "the batch's one call fails");
        let answers = crate::batch::answer_by_group(&Reports(store.pool.clone()), &reports).await;
        assert!(matches!(&answers[0], Ok(Some(f)) if f.status == TaskStatus::Done), "{:?}", answers[0].as_ref().err());
        assert!(answers[1].is_err(), "the bad report fails on its own");
        assert_eq!(store.task_record("p", "D").await.unwrap().unwrap().status, TaskStatus::Done);
        assert_eq!(store.task_record("p", "E").await.unwrap().unwrap().status, TaskStatus::Running);
        let free_text =
            AttemptResult::Failed { reason: "exit 1: a\0b".into(), retry: crate::plans::Retry::Never, run_id: None };
        let report = ReportAsked {
            lease: taken[1].clone(),
            outcome: arbiter_core::queue::rules::fast_outcome(&taken[1], &free_text, t(13)).unwrap(),
            now: t(13),
        };
        assert!(finish_one(&store.pool, &report).await.unwrap().is_some());
        let record = store.task_record("p", "E").await.unwrap().unwrap();
        assert_eq!((record.status, record.reason.as_deref()), (TaskStatus::Failed, Some("exit 1: a\\u{0}b")));
        let store = Arc::try_unwrap(store).unwrap_or_else(|_| panic!("the claimers ended"));
        drop_database(store, &name).await;
    }
}
