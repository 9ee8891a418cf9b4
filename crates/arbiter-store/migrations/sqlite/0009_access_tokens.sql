-- Named access tokens of a control plane's dashboard and API (`arbiter token create`): an
-- admin token administers, a read-only token only reads. Like a worker's token, a token is
-- stored only as the SHA-256 hex of its value; revoking clears the hash (NULL: the next
-- request with it gets 401). Times are integer microseconds since the epoch.
CREATE TABLE access_tokens (
    name         TEXT PRIMARY KEY,
    role         TEXT NOT NULL CHECK (role IN ('admin', 'read-only')),
    token_hash   TEXT UNIQUE,
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER,
    revoked_at   INTEGER
);
-- Who revoked a worker (the dashboard or `arbiter worker revoke`): an administrator's action
-- names its author.
ALTER TABLE workers ADD COLUMN revoked_by TEXT;
