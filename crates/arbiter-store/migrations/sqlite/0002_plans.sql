-- Plans: tasks with dependencies, leased attempts, budgets and an append-only event log.
-- Money is integer picodollars (1e-12 USD); times are integer microseconds since the epoch.
CREATE TABLE plans (
    id                     TEXT PRIMARY KEY,
    name                   TEXT NOT NULL,
    header                 TEXT NOT NULL,
    budget_pico            INTEGER,
    spent_pico             INTEGER NOT NULL DEFAULT 0,
    reserved_pico          INTEGER NOT NULL DEFAULT 0,
    budget_crossed         INTEGER NOT NULL DEFAULT 0,
    guard_files            INTEGER NOT NULL DEFAULT 0,
    retry_backoff_seconds  INTEGER NOT NULL,
    cancelled              INTEGER NOT NULL DEFAULT 0,
    created_at             INTEGER NOT NULL,
    updated_at             INTEGER NOT NULL,
    version                INTEGER NOT NULL DEFAULT 1
);

CREATE TABLE plan_tasks (
    plan_id              TEXT NOT NULL REFERENCES plans (id) ON DELETE CASCADE,
    id                   TEXT NOT NULL,
    ord                  INTEGER NOT NULL,
    priority             INTEGER NOT NULL,
    spec                 TEXT NOT NULL,
    status               TEXT NOT NULL,
    deps_left            INTEGER NOT NULL,
    attempts             INTEGER NOT NULL DEFAULT 0,
    max_attempts         INTEGER NOT NULL,
    attempt_budget_pico  INTEGER NOT NULL,
    not_before           INTEGER NOT NULL DEFAULT 0,
    fence                INTEGER NOT NULL DEFAULT 0,
    lease_owner          TEXT,
    lease_expires        INTEGER,
    reserved_pico        INTEGER NOT NULL DEFAULT 0,
    cost_pico            INTEGER NOT NULL DEFAULT 0,
    has_files            INTEGER NOT NULL DEFAULT 0,
    run_id               TEXT,
    commit_sha           TEXT,
    reason               TEXT,
    -- The status an import or a gate gave the task ('done', 'skipped'), which a reset keeps.
    initial_status       TEXT,
    -- Marks the row a claim or report just changed, for the statements after it in the
    -- same transaction (one-round-trip paths).
    claim_token          TEXT,
    version              INTEGER NOT NULL DEFAULT 1,
    updated_at           INTEGER NOT NULL,
    PRIMARY KEY (plan_id, id)
);
CREATE INDEX plan_tasks_ready ON plan_tasks (plan_id, priority, ord) WHERE status = 'ready';
CREATE INDEX plan_tasks_running ON plan_tasks (lease_expires) WHERE status = 'running';
CREATE INDEX plan_tasks_token ON plan_tasks (plan_id, claim_token) WHERE claim_token IS NOT NULL;

CREATE TABLE plan_deps (
    plan_id    TEXT NOT NULL,
    task_id    TEXT NOT NULL,
    depends_on TEXT NOT NULL,
    PRIMARY KEY (plan_id, task_id, depends_on),
    FOREIGN KEY (plan_id, task_id) REFERENCES plan_tasks (plan_id, id) ON DELETE CASCADE
);
CREATE INDEX plan_deps_dependents ON plan_deps (plan_id, depends_on, task_id);

CREATE TABLE plan_files (
    plan_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    path    TEXT NOT NULL,
    PRIMARY KEY (plan_id, task_id, path),
    FOREIGN KEY (plan_id, task_id) REFERENCES plan_tasks (plan_id, id) ON DELETE CASCADE
);

CREATE TABLE plan_attempts (
    plan_id       TEXT NOT NULL,
    task_id       TEXT NOT NULL,
    attempt       INTEGER NOT NULL,
    fence         INTEGER NOT NULL,
    worker        TEXT NOT NULL,
    status        TEXT NOT NULL,
    started_at    INTEGER NOT NULL,
    finished_at   INTEGER,
    reserved_pico INTEGER NOT NULL DEFAULT 0,
    cost_pico     INTEGER NOT NULL DEFAULT 0,
    run_id        TEXT,
    commit_sha    TEXT,
    reason        TEXT,
    PRIMARY KEY (plan_id, task_id, fence)
);

-- No foreign key: no reset, cancel or deletion removes an event.
CREATE TABLE plan_events (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    plan_id TEXT NOT NULL,
    task_id TEXT,
    attempt INTEGER,
    kind    TEXT NOT NULL,
    at      INTEGER NOT NULL,
    data    TEXT NOT NULL
);
CREATE INDEX plan_events_plan ON plan_events (plan_id, id);
