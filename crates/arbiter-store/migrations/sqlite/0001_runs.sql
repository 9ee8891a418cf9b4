-- Runs, their candidates and their events. Times are integer microseconds since the epoch.
CREATE TABLE runs (
    id            TEXT PRIMARY KEY,
    repo          TEXT NOT NULL,
    task_title    TEXT NOT NULL,
    status        TEXT NOT NULL,
    base_commit   TEXT NOT NULL,
    run_dir       TEXT NOT NULL,
    candidates    INTEGER NOT NULL,
    winner        TEXT,
    started_at    INTEGER NOT NULL,
    finished_at   INTEGER,
    version       INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX runs_started ON runs (started_at DESC);

CREATE TABLE candidates (
    run_id          TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    id              TEXT NOT NULL,
    idx             INTEGER NOT NULL,
    runner          TEXT NOT NULL,
    status          TEXT NOT NULL,
    exit_code       INTEGER,
    normalized_hash TEXT,
    eligible        INTEGER,
    rank            INTEGER,
    PRIMARY KEY (run_id, id)
);

CREATE TABLE events (
    run_id    TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq       INTEGER NOT NULL,
    at        INTEGER NOT NULL,
    kind      TEXT NOT NULL,
    candidate TEXT,
    data      TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
