-- The units of a task's attempt, when its tournament spreads over workers: one per
-- candidate, and the evaluation (gates across candidates, cross-tests, judges, selection),
-- which becomes ready when every candidate unit is done. A unit belongs to the attempt whose
-- fencing token it records (task_fence): once the attempt ends, its units are never claimed
-- again. Each unit has a lease of its own, with its own fencing token.
CREATE TABLE plan_units (
    plan_id       TEXT NOT NULL,
    task_id       TEXT NOT NULL,
    task_fence    BIGINT NOT NULL,
    name          TEXT NOT NULL,
    kind          TEXT NOT NULL CHECK (kind IN ('candidate', 'evaluation')),
    ord           BIGINT NOT NULL,
    -- JSON array: what a worker must have (runners, backends) to claim the unit.
    needs         TEXT NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('waiting', 'ready', 'running', 'done')),
    fence         BIGINT NOT NULL DEFAULT 0,
    worker        TEXT,
    lease_expires BIGINT,
    tries         BIGINT NOT NULL DEFAULT 0,
    run_id        TEXT NOT NULL,
    -- The commit every unit of the attempt starts from.
    base          TEXT NOT NULL,
    -- JSON: what the unit's worker reported (its artifacts, its summary).
    result        TEXT,
    cost_pico     BIGINT NOT NULL DEFAULT 0,
    updated_at    BIGINT NOT NULL,
    PRIMARY KEY (plan_id, task_id, task_fence, name),
    FOREIGN KEY (plan_id, task_id) REFERENCES plan_tasks (plan_id, id) ON DELETE CASCADE
);
CREATE INDEX plan_units_ready ON plan_units (plan_id, status) WHERE status = 'ready';
CREATE INDEX plan_units_running ON plan_units (lease_expires) WHERE status = 'running';
