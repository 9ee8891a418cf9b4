//! The worker registry: the remote workers a control plane (`arbiter serve`) knows, behind
//! the [`WorkerRegistry`] port, on SQLite and Postgres alike (one generic implementation over [`SqlStore`], the same statements).
//!
//! - A worker registers once with a name; the registry mints its id and a bearer token of
//!   256 bits from the operating system's generator, returns the token once, and keeps only
//!   its SHA-256 ([`token_hash`]). A token is looked up by its hash (deterministic, so a
//!   plain hash: a token with this much entropy needs no salt or slow hash).
//! - Revoking clears the hash (the next request with the old token finds nothing); rotating
//!   replaces it (the old token is dead the moment the new one exists).
//! - A taken name is refused unless the caller asks to re-register explicitly; re-registering
//!   keeps the worker's id and replaces its token and capabilities.
//! - Heartbeats ([`WorkerRegistry::touch`]) record when the worker was last seen, what it
//!   advertises and what it holds now.

use std::fmt;

use arbiter_core::time::Timestamp;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::StoreError;
use crate::db::sql;
use crate::store::{Backend, SqlStore};

/// A secret (a bearer token): never shown by `Debug`, never serialized; read it with
/// [`Secret::expose`] where it must leave the process (an HTTP header, a 0600 file).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// The prefix of every worker token: lets secret scanners (and the tests) recognise one.
pub const TOKEN_PREFIX: &str = "arbw_";

/// The SHA-256 of a token, in lowercase hex: the only form of a token the store keeps.
pub fn token_hash(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

/// `n` random bytes from the operating system, in hex (tokens, ids, session secrets).
pub fn random_hex(n: usize) -> Result<String, StoreError> {
    let mut bytes = vec![0u8; n];
    getrandom::fill(&mut bytes).map_err(|e| StoreError::Random(e.to_string()))?;
    Ok(hex(&bytes))
}

/// A new worker token: the prefix and 256 random bits in hex.
pub fn new_token() -> Result<Secret, StoreError> {
    Ok(Secret(format!("{TOKEN_PREFIX}{}", random_hex(32)?)))
}

/// A new worker id: `w-` and 64 random bits in hex.
fn new_id() -> Result<String, StoreError> {
    Ok(format!("w-{}", random_hex(8)?))
}

/// What a worker advertises: the runners and model backends it has, and how many units of
/// work it takes at once.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    pub runners: Vec<String>,
    pub backends: Vec<String>,
    pub slots: u32,
}

/// A registration: a name and what the worker advertises.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registration {
    pub name: String,
    pub capabilities: Capabilities,
    /// Re-register a name that is taken (a new token; the old one stops working).
    pub replace: bool,
}

/// A worker as the registry knows it (never its token).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkerRecord {
    pub id: String,
    pub name: String,
    pub capabilities: Capabilities,
    pub registered_at: Timestamp,
    /// The last request it authenticated with (a heartbeat, a claim, a fetch).
    pub last_seen_at: Option<Timestamp>,
    /// What it holds now, as its last heartbeat said (`null`: nothing known).
    pub current_work: serde_json::Value,
    /// Revoked workers have no token: every request they make gets 401.
    pub revoked_at: Option<Timestamp>,
    /// Who revoked it (`admin`, `token:NAME`), when it is revoked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_by: Option<String>,
}

impl WorkerRecord {
    pub fn revoked(&self) -> bool {
        self.revoked_at.is_some()
    }

    /// Seen at or after `since`.
    pub fn seen_since(&self, since: Timestamp) -> bool {
        !self.revoked() && self.last_seen_at.is_some_and(|t| t >= since)
    }
}

/// A registration's answer: the worker and its token (shown once, stored nowhere).
#[derive(Debug)]
pub struct Registered {
    pub worker: WorkerRecord,
    pub token: Secret,
    /// The name was taken and re-registered.
    pub replaced: bool,
}

/// The worker registry port.
#[async_trait]
pub trait WorkerRegistry: Send + Sync {
    /// Registers a worker and mints its token. A taken name is refused with
    /// [`StoreError::WorkerExists`] unless `replace` (then the id stays, the token and the
    /// capabilities are new, and a revoked worker is live again).
    async fn register(&self, registration: &Registration, now: Timestamp) -> Result<Registered, StoreError>;
    /// The live (not revoked) worker holding this token.
    async fn authenticate(&self, token: &str) -> Result<Option<WorkerRecord>, StoreError>;
    /// Records that a live worker was seen at `now` holding `current_work`, with new
    /// capabilities when given. `false` when the worker is unknown or revoked.
    async fn touch(
        &self,
        worker_id: &str,
        capabilities: Option<&Capabilities>,
        current_work: &serde_json::Value,
        now: Timestamp,
    ) -> Result<bool, StoreError>;
    /// One worker by name.
    async fn worker(&self, name: &str) -> Result<Option<WorkerRecord>, StoreError>;
    /// Every worker (revoked ones too), by name.
    async fn workers(&self) -> Result<Vec<WorkerRecord>, StoreError>;
    /// Revokes a worker's token ([`StoreError::NoWorker`] for an unknown name), recording
    /// who did it (`by`). Revoking twice keeps the first time and author.
    async fn revoke(&self, name: &str, by: &str, now: Timestamp) -> Result<WorkerRecord, StoreError>;
    /// Replaces a worker's token (a revoked worker is live again with the new one).
    async fn rotate(&self, name: &str, now: Timestamp) -> Result<Registered, StoreError>;
    /// A round trip to the database (readiness).
    async fn ping(&self) -> Result<(), StoreError>;
}

/// A worker name: 1 to 64 of letters, digits, '.', '_', '-', not starting with '.' or '-',
/// and not of the form of a worker id (`w-` and hex digits): dashboards show workers by
/// name, and a name that reads as an id would pass for another worker.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok_chars = name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if name.is_empty() || name.len() > 64 || !ok_chars || name.starts_with(['.', '-']) {
        return Err(format!(
            "worker name '{}' is not valid: use 1 to 64 letters, digits, '.', '_' or '-', not starting with '.' or '-'",
            name.escape_default()
        ));
    }
    let id_shaped =
        name.strip_prefix("w-").is_some_and(|rest| !rest.is_empty() && rest.chars().all(|c| c.is_ascii_hexdigit()));
    if id_shaped {
        return Err(format!(
            "worker name '{name}' has the form of a worker id ('w-' and hex digits) and would pass for another worker; choose a name that says which machine it is (gpu-box-1, say)"
        ));
    }
    Ok(())
}

pub(crate) const INSERT: &str = "INSERT INTO workers (id, name, token_hash, runners, backends, slots, registered_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (name) DO NOTHING RETURNING id";

pub(crate) const REREGISTER: &str = "UPDATE workers SET token_hash = $2, runners = $3, backends = $4, slots = $5,
     registered_at = $6, revoked_at = NULL, revoked_by = NULL, current_work = 'null', version = version + 1 WHERE name = $1 RETURNING id";

pub(crate) const AUTHENTICATE: &str =
    "SELECT id, name, runners, backends, slots, registered_at, last_seen_at, current_work, revoked_at, revoked_by
     FROM workers WHERE token_hash = $1 AND revoked_at IS NULL";

pub(crate) const TOUCH: &str = "UPDATE workers SET last_seen_at = $2, current_work = $3,
     runners = COALESCE($4, runners), backends = COALESCE($5, backends), slots = COALESCE($6, slots),
     version = version + 1
     WHERE id = $1 AND token_hash IS NOT NULL AND revoked_at IS NULL";

pub(crate) const BY_NAME: &str =
    "SELECT id, name, runners, backends, slots, registered_at, last_seen_at, current_work, revoked_at, revoked_by
     FROM workers WHERE name = $1";

pub(crate) const ALL: &str =
    "SELECT id, name, runners, backends, slots, registered_at, last_seen_at, current_work, revoked_at, revoked_by
     FROM workers ORDER BY name";

pub(crate) const REVOKE: &str = "UPDATE workers SET token_hash = NULL, revoked_at = COALESCE(revoked_at, $2),
     revoked_by = CASE WHEN revoked_at IS NULL THEN $3 ELSE revoked_by END, version = version + 1 WHERE name = $1";

pub(crate) const ROTATE: &str =
    "UPDATE workers SET token_hash = $2, revoked_at = NULL, revoked_by = NULL, version = version + 1 WHERE name = $1";

/// Decodes a `workers` row.
pub(crate) fn record<D: crate::db::Db>(row: &crate::db::Rec<D>) -> Result<WorkerRecord, StoreError> {
    let json = |column: &'static str, text: String| -> Result<serde_json::Value, StoreError> {
        serde_json::from_str(&text).map_err(|_| StoreError::Corrupt { column, value: text })
    };
    let list = |column: &'static str, text: String| -> Result<Vec<String>, StoreError> {
        serde_json::from_str(&text).map_err(|_| StoreError::Corrupt { column, value: text })
    };
    Ok(WorkerRecord {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        capabilities: Capabilities {
            runners: list("workers.runners", row.try_get("runners")?)?,
            backends: list("workers.backends", row.try_get("backends")?)?,
            slots: u32::try_from(row.try_get::<i64, _>("slots")?).unwrap_or(0),
        },
        registered_at: Timestamp(row.try_get("registered_at")?),
        last_seen_at: row.try_get::<Option<i64>, _>("last_seen_at")?.map(Timestamp),
        current_work: json("workers.current_work", row.try_get("current_work")?)?,
        revoked_at: row.try_get::<Option<i64>, _>("revoked_at")?.map(Timestamp),
        revoked_by: row.try_get("revoked_by")?,
    })
}

/// The JSON text of a list (a list of strings always serializes).
pub(crate) fn list_json(items: &[String]) -> String {
    serde_json::to_string(items).unwrap_or_else(|_| "[]".into())
}

pub(crate) fn new_registration_ids() -> Result<(String, Secret), StoreError> {
    Ok((new_id()?, new_token()?))
}

/// The registry of workers over any backend.
#[async_trait::async_trait]
impl<B: Backend> crate::workers::WorkerRegistry for SqlStore<B> {
    async fn register(
        &self,
        r: &crate::workers::Registration,
        now: arbiter_core::time::Timestamp,
    ) -> Result<crate::workers::Registered, crate::StoreError> {
        use crate::workers::*;
        check_name(&r.name).map_err(|reason| crate::StoreError::InvalidWorker { reason })?;
        let (id, token) = crate::workers::new_registration_ids()?;
        let hash = token_hash(token.expose());
        let caps = &r.capabilities;
        let inserted = sql(crate::workers::INSERT)
            .bind(&id)
            .bind(&r.name)
            .bind(&hash)
            .bind(crate::workers::list_json(&caps.runners))
            .bind(crate::workers::list_json(&caps.backends))
            .bind(i64::from(caps.slots))
            .bind(now.0)
            .fetch_optional(&self.pool)
            .await?;
        let replaced = match inserted {
            Some(_) => false,
            None if r.replace => {
                let updated = sql(crate::workers::REREGISTER)
                    .bind(&r.name)
                    .bind(&hash)
                    .bind(crate::workers::list_json(&caps.runners))
                    .bind(crate::workers::list_json(&caps.backends))
                    .bind(i64::from(caps.slots))
                    .bind(now.0)
                    .fetch_optional(&self.pool)
                    .await?;
                if updated.is_none() {
                    // Removed between the two statements: nothing to replace.
                    return Err(crate::StoreError::NoWorker { name: r.name.clone() });
                }
                true
            }
            None => return Err(crate::StoreError::WorkerExists { name: r.name.clone() }),
        };
        let worker = self.worker(&r.name).await?.ok_or_else(|| crate::StoreError::NoWorker { name: r.name.clone() })?;
        Ok(Registered { worker, token, replaced })
    }

    async fn authenticate(&self, token: &str) -> Result<Option<crate::workers::WorkerRecord>, crate::StoreError> {
        let row = sql(crate::workers::AUTHENTICATE)
            .bind(crate::workers::token_hash(token))
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(crate::workers::record).transpose()
    }

    async fn touch(
        &self,
        worker_id: &str,
        capabilities: Option<&crate::workers::Capabilities>,
        current_work: &serde_json::Value,
        now: arbiter_core::time::Timestamp,
    ) -> Result<bool, crate::StoreError> {
        let done = sql(crate::workers::TOUCH)
            .bind(worker_id)
            .bind(now.0)
            .bind(current_work.to_string())
            .bind(capabilities.map(|c| crate::workers::list_json(&c.runners)))
            .bind(capabilities.map(|c| crate::workers::list_json(&c.backends)))
            .bind(capabilities.map(|c| i64::from(c.slots)))
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn worker(&self, name: &str) -> Result<Option<crate::workers::WorkerRecord>, crate::StoreError> {
        let row = sql(crate::workers::BY_NAME).bind(name).fetch_optional(&self.pool).await?;
        row.as_ref().map(crate::workers::record).transpose()
    }

    async fn workers(&self) -> Result<Vec<crate::workers::WorkerRecord>, crate::StoreError> {
        let rows = sql(crate::workers::ALL).fetch_all(&self.pool).await?;
        rows.iter().map(crate::workers::record).collect()
    }

    async fn revoke(
        &self,
        name: &str,
        by: &str,
        now: arbiter_core::time::Timestamp,
    ) -> Result<crate::workers::WorkerRecord, crate::StoreError> {
        let done = sql(crate::workers::REVOKE).bind(name).bind(now.0).bind(by).execute(&self.pool).await?;
        if done.rows_affected() == 0 {
            return Err(crate::StoreError::NoWorker { name: name.to_string() });
        }
        self.worker(name).await?.ok_or_else(|| crate::StoreError::NoWorker { name: name.to_string() })
    }

    async fn rotate(
        &self,
        name: &str,
        _now: arbiter_core::time::Timestamp,
    ) -> Result<crate::workers::Registered, crate::StoreError> {
        let token = crate::workers::new_token()?;
        let done = sql(crate::workers::ROTATE)
            .bind(name)
            .bind(crate::workers::token_hash(token.expose()))
            .execute(&self.pool)
            .await?;
        if done.rows_affected() == 0 {
            return Err(crate::StoreError::NoWorker { name: name.to_string() });
        }
        let worker = self.worker(name).await?.ok_or_else(|| crate::StoreError::NoWorker { name: name.to_string() })?;
        Ok(crate::workers::Registered { worker, token, replaced: true })
    }

    async fn ping(&self) -> Result<(), crate::StoreError> {
        sql("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_256_random_bits_and_hashes_are_sha256_hex() {
        let a = new_token().unwrap();
        let b = new_token().unwrap();
        assert_ne!(a, b);
        assert!(a.expose().starts_with(TOKEN_PREFIX));
        assert_eq!(a.expose().len(), TOKEN_PREFIX.len() + 64);
        assert_eq!(token_hash("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(format!("{a:?}"), "Secret(<redacted>)");
    }

    #[test]
    fn worker_names() {
        for ok in ["w1", "build-box.eu_1", "A"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "-x", ".x", "a/b", "a b", &"x".repeat(65), "é", "w-047ac778ecf47b04", "w-0", "w-ABCdef"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        // Ids are refused as names, not names that merely begin as one does.
        for ok in ["w-box", "w-1x", "w-"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        let id = new_id().unwrap();
        assert!(check_name(&id).unwrap_err().contains("form of a worker id"), "{id}");
    }
}
