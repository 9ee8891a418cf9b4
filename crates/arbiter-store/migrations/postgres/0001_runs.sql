-- Runs, their candidates and their events. Times are integer microseconds since the epoch,
-- as in the SQLite schema of the same number, so rows map to the same Rust types.
CREATE TABLE runs (
    id            TEXT PRIMARY KEY,
    repo          TEXT NOT NULL,
    task_title    TEXT NOT NULL,
    status        TEXT NOT NULL,
    base_commit   TEXT NOT NULL,
    run_dir       TEXT NOT NULL,
    candidates    BIGINT NOT NULL,
    winner        TEXT,
    started_at    BIGINT NOT NULL,
    finished_at   BIGINT,
    version       BIGINT NOT NULL DEFAULT 1
);
CREATE INDEX runs_started ON runs (started_at DESC);

CREATE TABLE candidates (
    run_id          TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    id              TEXT NOT NULL,
    idx             BIGINT NOT NULL,
    runner          TEXT NOT NULL,
    status          TEXT NOT NULL,
    exit_code       INTEGER,
    normalized_hash TEXT,
    eligible        BOOLEAN,
    rank            BIGINT,
    PRIMARY KEY (run_id, id)
);

CREATE TABLE events (
    run_id    TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq       BIGINT NOT NULL,
    at        BIGINT NOT NULL,
    kind      TEXT NOT NULL,
    candidate TEXT,
    data      TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
