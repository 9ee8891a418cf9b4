-- Remote workers of a control plane (`arbiter serve`). A worker is known by its id (minted
-- by the server) and its name (unique, chosen by the operator). Its bearer token is stored
-- only as the SHA-256 hex of the token: NULL means revoked (the next request gets 401).
-- Capabilities (runners, backends) and what it holds now are JSON text; times are integer
-- microseconds since the epoch, as everywhere else.
CREATE TABLE workers (
    id            TEXT PRIMARY KEY,
    name          TEXT NOT NULL UNIQUE,
    token_hash    TEXT UNIQUE,
    runners       TEXT NOT NULL DEFAULT '[]',
    backends      TEXT NOT NULL DEFAULT '[]',
    slots         INTEGER NOT NULL,
    registered_at INTEGER NOT NULL,
    last_seen_at  INTEGER,
    current_work  TEXT NOT NULL DEFAULT 'null',
    revoked_at    INTEGER,
    version       INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX workers_last_seen ON workers (last_seen_at);
