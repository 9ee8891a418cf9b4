//! The plan queue's statements that both stores run as written (`$N` placeholders, standard
//! SQL). Statements that need a dialect of their own (row locks, `SKIP LOCKED`, one-statement
//! fast paths) live with their store, behind [`PlanDialect`].

use const_format::concatcp;

/// What each store says in its own dialect.
pub trait PlanDialect {
    /// A plan's budget and flags, locked for the rest of the transaction where the store
    /// needs row locks (`id = $1`).
    const LOCK_PLAN: &'static str;
    /// A task's state, locked likewise (`plan_id = $1 AND id = $2`).
    const LOCK_TASK: &'static str;
    /// The best ready task (`plan_id = $1`, `not_before <= $2`), skipping tasks whose key
    /// files overlap a running task's when `$3` is true; other claimers' rows are skipped
    /// where the store can lock rows.
    const PICK: &'static str;
    /// [`PICK`](PlanDialect::PICK) among some tasks (`$4`: a JSON array of their ids).
    const PICK_AMONG: &'static str;
    /// Taken first by every transaction that ends an attempt (`$1` the plan): it waits
    /// while an import of the plan is in flight, so dependents an import adds are counted
    /// either by the import or by the report, never by neither. `None` where writers are
    /// serialized anyway.
    const ENDING_GUARD: Option<&'static str>;
    /// Taken first by an import (`$1` the plan): waits for reports in flight, and holds
    /// new ones back until the import commits.
    const IMPORT_GUARD: Option<&'static str>;
    /// Locks a task and its dependents in id order (`plan_id = $1`, task `$2`): every
    /// statement that changes several tasks takes their locks in that one order, so
    /// concurrent reports and bulk changes never deadlock. `None` without row locks.
    const LOCK_ENDING: Option<&'static str>;
    /// Locks every task of a plan in id order (`plan_id = $1`), before a bulk change.
    const LOCK_TASKS: Option<&'static str>;
}

pub(crate) const PLAN_COLUMNS: &str = "id, name, header, budget_pico, spent_pico, reserved_pico, budget_crossed, guard_files, retry_backoff_seconds, cancelled, created_at, updated_at, branch_name, branch_origin, branch_base, branch_recorded_at";

pub(crate) const TASK_COLUMNS: &str = "id, ord, priority, spec, status, deps_left, attempts, max_attempts, not_before, fence, lease_owner, lease_expires, reserved_pico, cost_pico, run_id, commit_sha, reason, version";

pub const SELECT_PLAN: &str = concatcp!("SELECT ", PLAN_COLUMNS, " FROM plans WHERE id = $1");

pub const SELECT_TASKS: &str = concatcp!("SELECT ", TASK_COLUMNS, " FROM plan_tasks WHERE plan_id = $1 ORDER BY ord");

pub const SELECT_TASK: &str = concatcp!("SELECT ", TASK_COLUMNS, " FROM plan_tasks WHERE plan_id = $1 AND id = $2");

/// A condition on the candidate task `t`: its key files overlap (the same path, or one
/// inside the other) a running task's. Used by each store's [`PlanDialect::PICK`].
pub(crate) const OVERLAPS_RUNNING: &str = "EXISTS (SELECT 1 FROM plan_files f
   JOIN plan_files g ON g.plan_id = f.plan_id AND g.task_id <> f.task_id
     AND (g.path = f.path OR substr(g.path, 1, length(f.path) + 1) = f.path || '/'
          OR substr(f.path, 1, length(g.path) + 1) = g.path || '/')
   JOIN plan_tasks r ON r.plan_id = g.plan_id AND r.id = g.task_id AND r.status = 'running'
   WHERE f.plan_id = t.plan_id AND f.task_id = t.id)";

/// The start of [`PlanDialect::PICK`]: the best ready task, skipping file overlaps when `$3`.
pub(crate) const PICK_READY: &str = concatcp!(
    "SELECT t.id, t.version, t.attempt_budget_pico FROM plan_tasks t
     WHERE t.plan_id = $1 AND t.status = 'ready' AND t.not_before <= $2
       AND (NOT $3 OR NOT t.has_files OR NOT ",
    OVERLAPS_RUNNING,
    ")
     ORDER BY t.priority, t.ord LIMIT 1"
);

/// [`pick_ready`] among some tasks: `$4` is a JSON array of their ids, which `$ids` (the
/// dialect's) turns into a set.
pub(crate) const PICK_READY_AMONG_HEAD: &str = "SELECT t.id, t.version, t.attempt_budget_pico FROM plan_tasks t
     WHERE t.plan_id = $1 AND t.id IN (";

/// The rest of [`PlanDialect::PICK_AMONG`], after the set of ids.
pub(crate) const PICK_READY_AMONG_TAIL: &str = concatcp!(
    ") AND t.status = 'ready' AND t.not_before <= $2
       AND (NOT $3 OR NOT t.has_files OR NOT ",
    OVERLAPS_RUNNING,
    ")
     ORDER BY t.priority, t.ord LIMIT 1"
);

/// The columns [`PlanDialect::LOCK_PLAN`] reads.
pub(crate) const PLAN_BUDGET: &str =
    "SELECT budget_pico, spent_pico, reserved_pico, budget_crossed, guard_files, cancelled, retry_backoff_seconds
 FROM plans WHERE id = $1";

/// The columns [`PlanDialect::LOCK_TASK`] reads.
pub(crate) const TASK_STATE: &str = "SELECT status, fence, attempts, max_attempts, reserved_pico, lease_expires FROM plan_tasks WHERE plan_id = $1 AND id = $2";

/// A new plan row (`$8` its source, unique among plans that have one).
pub const INSERT_PLAN: &str =
    "INSERT INTO plans (id, name, header, budget_pico, retry_backoff_seconds, guard_files, created_at, updated_at, source)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8)";

/// The plan that came from a source (`$1`).
pub const PLAN_BY_SOURCE: &str = "SELECT id FROM plans WHERE source = $1";

pub const UPDATE_PLAN: &str = "UPDATE plans SET name = $2, header = $3, retry_backoff_seconds = $4,
         guard_files = $5, updated_at = $6, version = version + 1
     WHERE id = $1";

/// Who owns the plan's integration branch (`$2` the branch, `$3` created or adopted, `$4` the
/// commit where the plan's own commits begin, `$5` now).
pub const SET_BRANCH: &str = "UPDATE plans SET branch_name = $2, branch_origin = $3, branch_base = $4,
         branch_recorded_at = $5, updated_at = $5, version = version + 1
     WHERE id = $1";

pub const SET_HEADER: &str = "UPDATE plans SET header = $2, updated_at = $3 WHERE id = $1";

pub const SAVE_BUDGET: &str =
    "UPDATE plans SET budget_pico = $2, spent_pico = $3, reserved_pico = $4, budget_crossed = $5,
         updated_at = $6, version = version + 1
     WHERE id = $1";

pub const UPDATE_TASK_DEFINITION: &str = "UPDATE plan_tasks SET priority = $3, spec = $4, status = $5, deps_left = $6,
         max_attempts = $7, attempt_budget_pico = $8, has_files = $9, reason = NULL, initial_status = NULL, version = version + 1, updated_at = $10
     WHERE plan_id = $1 AND id = $2 AND version = $11 AND attempts = 0 AND status IN ('blocked', 'ready')";

pub const DELETE_DEPS: &str = "DELETE FROM plan_deps WHERE plan_id = $1 AND task_id = $2";
pub const INSERT_DEP: &str = "INSERT INTO plan_deps (plan_id, task_id, depends_on) VALUES ($1, $2, $3)";
pub const DELETE_FILES: &str = "DELETE FROM plan_files WHERE plan_id = $1 AND task_id = $2";
pub const INSERT_FILE: &str = "INSERT INTO plan_files (plan_id, task_id, path) VALUES ($1, $2, $3)";

pub const SKIP_TASK: &str =
    "UPDATE plan_tasks SET status = 'skipped', initial_status = 'skipped', reason = $3, version = version + 1, updated_at = $4
     WHERE plan_id = $1 AND id = $2 AND status IN ('blocked', 'ready')";

pub const INSERT_EVENT: &str =
    "INSERT INTO plan_events (plan_id, task_id, attempt, kind, at, data) VALUES ($1, $2, $3, $4, $5, $6)";

pub const SELECT_EVENTS_AFTER: &str = "SELECT id, plan_id, task_id, attempt, kind, at, data FROM plan_events
     WHERE plan_id = $1 AND id > $2 ORDER BY id LIMIT $3";

pub const SELECT_ALL_EVENTS_AFTER: &str = "SELECT id, plan_id, task_id, attempt, kind, at, data FROM plan_events
     WHERE id > $1 ORDER BY id LIMIT $2";

pub const SELECT_RECENT_EVENTS: &str = "SELECT id, plan_id, task_id, attempt, kind, at, data FROM plan_events
     WHERE plan_id = $1 AND ($2 IS NULL OR task_id = $2) AND ($3 IS NULL OR kind = $3) AND id < $4
     ORDER BY id DESC LIMIT $5";

pub const SELECT_ALL_RECENT_EVENTS: &str = "SELECT id, plan_id, task_id, attempt, kind, at, data FROM plan_events
     WHERE ($1 IS NULL OR task_id = $1) AND ($2 IS NULL OR kind = $2) AND id < $3 ORDER BY id DESC LIMIT $4";

pub const SELECT_EVENTS: &str =
    "SELECT id, plan_id, task_id, attempt, kind, at, data FROM plan_events WHERE plan_id = $1 ORDER BY id";

pub const SELECT_ATTEMPTS: &str =
    "SELECT task_id, attempt, fence, worker, status, started_at, finished_at, reserved_pico,
         cost_pico, run_id, commit_sha, reason
     FROM plan_attempts WHERE plan_id = $1 ORDER BY started_at, task_id, fence";

pub const CLAIM_TASK: &str = "UPDATE plan_tasks SET status = 'running', attempts = attempts + 1, fence = fence + 1,
         lease_owner = $3, lease_expires = $4, reserved_pico = $5, version = version + 1, updated_at = $6
     WHERE plan_id = $1 AND id = $2 AND status = 'ready' AND version = $7
     RETURNING id, attempts, max_attempts, fence, spec";

pub const RESERVE: &str = "UPDATE plans SET reserved_pico = reserved_pico + $2 WHERE id = $1";

pub const INSERT_ATTEMPT: &str =
    "INSERT INTO plan_attempts (plan_id, task_id, attempt, fence, worker, status, started_at, reserved_pico)
     VALUES ($1, $2, $3, $4, $5, 'running', $6, $7)";

/// How many tasks run, how many are ready, and when the earliest ready one may be claimed.
/// Whether the fast path claims for the plan (`$1`): no budget, no key files, not cancelled.
pub const FAST_CLAIMS: &str =
    "SELECT (NOT cancelled AND NOT guard_files AND budget_pico IS NULL) AS fast FROM plans WHERE id = $1";

pub const IDLE: &str = "SELECT SUM(CASE WHEN status = 'running' THEN 1 ELSE 0 END) AS running,
         SUM(CASE WHEN status = 'ready' THEN 1 ELSE 0 END) AS ready,
         MIN(CASE WHEN status = 'ready' THEN not_before END) AS next_ready
     FROM plan_tasks WHERE plan_id = $1";

pub const HEARTBEAT: &str = "UPDATE plan_tasks SET lease_expires = $4, updated_at = $5
     WHERE plan_id = $1 AND id = $2 AND fence = $3 AND status = 'running'";

pub const END_TASK: &str = "UPDATE plan_tasks SET status = $3, not_before = $4, attempts = attempts - $11, lease_owner = NULL, lease_expires = NULL,
         reserved_pico = 0, cost_pico = cost_pico + $5, run_id = COALESCE($6, run_id), commit_sha = COALESCE($7, commit_sha),
         reason = $8, version = version + 1, updated_at = $9
     WHERE plan_id = $1 AND id = $2 AND status = 'running' AND fence = $10";

pub const END_ATTEMPT: &str = "UPDATE plan_attempts SET status = $4, finished_at = $5, cost_pico = cost_pico + $6,
         run_id = COALESCE($7, run_id), commit_sha = $8, reason = $9
     WHERE plan_id = $1 AND task_id = $2 AND fence = $3";

/// Counts a finished dependency off every dependent; those left with none become ready.
pub const UNBLOCK_DEPENDENTS: &str = "UPDATE plan_tasks SET deps_left = deps_left - 1,
         status = CASE WHEN deps_left = 1 AND status = 'blocked' THEN 'ready' ELSE status END,
         version = version + 1, updated_at = $3
     WHERE plan_id = $1 AND id IN (SELECT task_id FROM plan_deps WHERE plan_id = $1 AND depends_on = $2)
     RETURNING id, status";

/// Leases in one fixed order (ties of expiry by plan and plan order): a sweep ends them, and
/// takes their locks, in this order, so two sweepers cannot deadlock and the event log reads
/// the same whoever sweeps.
pub const EXPIRED_LEASES: &str = "SELECT plan_id, id, fence, lease_owner, attempts, max_attempts
     FROM plan_tasks WHERE status = 'running' AND lease_expires < $1 ORDER BY lease_expires, plan_id, ord";

pub const LEASES_OF: &str = "SELECT plan_id, id, fence, lease_owner, attempts, max_attempts
     FROM plan_tasks WHERE plan_id = $1 AND status = 'running' AND lease_owner = $2 ORDER BY ord";

/// Running tasks whose lease is still live at `$2`.
pub const LIVE_LEASES: &str = "SELECT t.id, COALESCE(t.lease_owner, (SELECT MIN(u.worker) FROM plan_units u
           WHERE u.plan_id = t.plan_id AND u.task_id = t.id AND u.task_fence = t.fence
             AND u.status = 'running' AND u.lease_expires >= $2)) AS lease_owner
     FROM plan_tasks t
     WHERE t.plan_id = $1 AND t.status = 'running' AND (t.lease_expires >= $2 OR EXISTS (SELECT 1 FROM plan_units u
           WHERE u.plan_id = t.plan_id AND u.task_id = t.id AND u.task_fence = t.fence
             AND u.status = 'running' AND u.lease_expires >= $2))
     ORDER BY t.id";

/// A cost incurred during an attempt, recorded on its task (`$3`) and attempt (fence `$4`).
pub const CHARGE_TASK: &str = "UPDATE plan_tasks SET cost_pico = cost_pico + $3 WHERE plan_id = $1 AND id = $2";
pub const CHARGE_ATTEMPT: &str =
    "UPDATE plan_attempts SET cost_pico = cost_pico + $4 WHERE plan_id = $1 AND task_id = $2 AND fence = $3";

pub const CANCEL_TASKS: &str = "UPDATE plan_tasks SET status = 'cancelled', lease_owner = NULL, lease_expires = NULL,
         reserved_pico = 0, reason = $3, version = version + 1, updated_at = $2
     WHERE plan_id = $1 AND status IN ('blocked', 'ready', 'running')
     RETURNING id";

pub const CANCEL_ATTEMPTS: &str = "UPDATE plan_attempts SET status = 'cancelled', finished_at = $2, reason = $3
     WHERE plan_id = $1 AND status = 'running'";

pub const SET_CANCELLED: &str =
    "UPDATE plans SET cancelled = $2, reserved_pico = 0, updated_at = $3, version = version + 1 WHERE id = $1";

pub const RETRY_TASK: &str = "UPDATE plan_tasks SET status = CASE WHEN deps_left > 0 THEN 'blocked' ELSE 'ready' END,
         attempts = 0, not_before = 0, reason = NULL, version = version + 1, updated_at = $3
     WHERE plan_id = $1 AND id = $2 AND status IN ('failed', 'cancelled', 'skipped')
     RETURNING status";

pub const UNCANCEL_PLAN: &str = "UPDATE plans SET cancelled = false, updated_at = $2 WHERE id = $1";

/// The dependencies of the `plan_tasks` row being updated that were not imported as done.
pub(crate) const UNMET_AT_START: &str =
    "FROM plan_deps d JOIN plan_tasks u ON u.plan_id = d.plan_id AND u.id = d.depends_on
 WHERE d.plan_id = plan_tasks.plan_id AND d.task_id = plan_tasks.id AND COALESCE(u.initial_status, '') <> 'done'";

/// Every task back to how it was imported: the statuses an import or a gate gave
/// (`initial_status`) stay, the rest wait for their dependencies not imported as done.
pub const RESET_TASKS: &str = concatcp!(
    "UPDATE plan_tasks SET
         deps_left = (SELECT COUNT(*) ",
    UNMET_AT_START,
    "),
         status = COALESCE(initial_status, CASE WHEN EXISTS (SELECT 1 ",
    UNMET_AT_START,
    ") THEN 'blocked' ELSE 'ready' END),
         attempts = 0, not_before = 0, lease_owner = NULL, lease_expires = NULL, reserved_pico = 0, run_id = NULL,
         commit_sha = NULL, reason = CASE WHEN initial_status IS NULL THEN NULL ELSE reason END,
         cost_pico = CASE WHEN $2 THEN 0 ELSE cost_pico END,
         version = version + 1, updated_at = $3
     WHERE plan_id = $1
     RETURNING id"
);

pub const RESET_PLAN: &str = "UPDATE plans SET cancelled = false, reserved_pico = 0,
         spent_pico = CASE WHEN $2 THEN 0 ELSE spent_pico END,
         budget_crossed = CASE WHEN $2 THEN false ELSE budget_crossed END,
         updated_at = $3, version = version + 1
     WHERE id = $1";

pub const DELETE_ATTEMPTS: &str = "DELETE FROM plan_attempts WHERE plan_id = $1";

/// The plans a claim without a plan of its own looks at: not cancelled, with a task ready
/// (the partial index `plan_tasks_ready`) or running (whose units may be ready). Cheap
/// whatever the store holds: no counts, no finished plan's tasks read.
pub const CLAIMABLE_PLANS: &str = "SELECT p.id FROM plans p WHERE NOT p.cancelled
       AND (EXISTS (SELECT 1 FROM plan_tasks t WHERE t.plan_id = p.id AND t.status = 'ready')
            OR EXISTS (SELECT 1 FROM plan_tasks t WHERE t.plan_id = p.id AND t.status = 'running'))
     ORDER BY p.id";

pub const LIST_PLANS: &str =
    "SELECT p.id, p.name, p.budget_pico, p.spent_pico, p.reserved_pico, p.budget_crossed, p.cancelled,
         t.status, COUNT(t.id) AS n
     FROM plans p LEFT JOIN plan_tasks t ON t.plan_id = p.id
     GROUP BY p.id, p.name, p.budget_pico, p.spent_pico, p.reserved_pico, p.budget_crossed, p.cancelled, t.status
     ORDER BY p.id";
