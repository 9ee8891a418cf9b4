//! Named access tokens of a control plane (`arbiter token create|list|revoke`), behind the
//! [`AccessTokens`] port, on SQLite and Postgres alike (one generic implementation over [`SqlStore`], the same statements).
//!
//! The admin token of the environment (`ARBITER_ADMIN_TOKEN`) is one shared secret; these are
//! per person or per use, each with a name and a role ([`Role::Admin`] administers, a
//! [`Role::ReadOnly`] token only reads: the dashboard's pages and the API's `GET` routes).
//! As with workers' tokens, a token is minted from the operating system's generator, shown
//! once, and stored only as its SHA-256; revoking clears the hash.

use std::fmt;

use arbiter_core::time::Timestamp;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::StoreError;
use crate::db::sql;
use crate::store::{Backend, SqlStore};
use crate::workers::Secret;

/// The prefix of every access token (secret scanners, and the tests, recognise one).
pub const ACCESS_TOKEN_PREFIX: &str = "arbt_";

/// What a token may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Everything the admin token may: read, and act (cancel, retry, budgets, workers).
    Admin,
    /// Reading only: every page and `GET` route, no action.
    ReadOnly,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::ReadOnly => "read-only",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "admin" => Some(Role::Admin),
            "read-only" => Some(Role::ReadOnly),
            _ => None,
        }
    }

    pub fn may_act(self) -> bool {
        self == Role::Admin
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A token as the store knows it (never its value).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessTokenRecord {
    pub name: String,
    pub role: Role,
    pub created_at: Timestamp,
    pub last_used_at: Option<Timestamp>,
    pub revoked_at: Option<Timestamp>,
}

/// A new token: its record and its value (shown once, stored nowhere).
#[derive(Debug)]
pub struct CreatedToken {
    pub record: AccessTokenRecord,
    pub token: Secret,
}

/// The access token port.
#[async_trait]
pub trait AccessTokens: Send + Sync {
    /// Mints a token named `name` ([`StoreError::TokenExists`] when the name is taken, even
    /// by a revoked token: a name says who acted in the event log, for good).
    async fn create_token(&self, name: &str, role: Role, now: Timestamp) -> Result<CreatedToken, StoreError>;
    /// The live token with this value, its use recorded at `now`.
    async fn authenticate_token(&self, token: &str, now: Timestamp) -> Result<Option<AccessTokenRecord>, StoreError>;
    /// Every token, revoked ones too, by name.
    async fn tokens(&self) -> Result<Vec<AccessTokenRecord>, StoreError>;
    /// Revokes a token ([`StoreError::NoToken`] for an unknown name); twice keeps the first time.
    async fn revoke_token(&self, name: &str, now: Timestamp) -> Result<AccessTokenRecord, StoreError>;
}

/// A token name: 1 to 64 of letters, digits, '.', '_', '-', '@', not starting with '.' or '-'.
pub fn check_token_name(name: &str) -> Result<(), String> {
    let ok_chars = name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@'));
    if name.is_empty() || name.len() > 64 || !ok_chars || name.starts_with(['.', '-']) {
        return Err(format!(
            "token name '{}' is not valid: use 1 to 64 letters, digits, '.', '_', '-' or '@', not starting with '.' or '-'",
            name.escape_default()
        ));
    }
    Ok(())
}

/// A new access token: the prefix and 256 random bits in hex.
pub fn new_access_token() -> Result<Secret, StoreError> {
    Ok(Secret::new(format!("{ACCESS_TOKEN_PREFIX}{}", crate::workers::random_hex(32)?)))
}

pub(crate) const INSERT: &str = "INSERT INTO access_tokens (name, role, token_hash, created_at)
     VALUES ($1, $2, $3, $4) ON CONFLICT (name) DO NOTHING RETURNING name";

pub(crate) const AUTHENTICATE: &str = "UPDATE access_tokens SET last_used_at = $2
     WHERE token_hash = $1 AND revoked_at IS NULL
     RETURNING name, role, created_at, last_used_at, revoked_at";

pub(crate) const ALL: &str = "SELECT name, role, created_at, last_used_at, revoked_at FROM access_tokens ORDER BY name";

pub(crate) const BY_NAME: &str =
    "SELECT name, role, created_at, last_used_at, revoked_at FROM access_tokens WHERE name = $1";

pub(crate) const REVOKE: &str =
    "UPDATE access_tokens SET token_hash = NULL, revoked_at = COALESCE(revoked_at, $2) WHERE name = $1";

/// Decodes an `access_tokens` row.
pub(crate) fn record<D: crate::db::Db>(row: &crate::db::Rec<D>) -> Result<AccessTokenRecord, StoreError> {
    let role: String = row.try_get("role")?;
    Ok(AccessTokenRecord {
        name: row.try_get("name")?,
        role: Role::parse(&role).ok_or(StoreError::Corrupt { column: "access_tokens.role", value: role })?,
        created_at: Timestamp(row.try_get("created_at")?),
        last_used_at: row.try_get::<Option<i64>, _>("last_used_at")?.map(Timestamp),
        revoked_at: row.try_get::<Option<i64>, _>("revoked_at")?.map(Timestamp),
    })
}

/// The access tokens over any backend.
#[async_trait::async_trait]
impl<B: Backend> crate::tokens::AccessTokens for SqlStore<B> {
    async fn create_token(
        &self,
        name: &str,
        role: crate::tokens::Role,
        now: arbiter_core::time::Timestamp,
    ) -> Result<crate::tokens::CreatedToken, crate::StoreError> {
        crate::tokens::check_token_name(name).map_err(|reason| crate::StoreError::InvalidToken { reason })?;
        let token = crate::tokens::new_access_token()?;
        let inserted = sql(crate::tokens::INSERT)
            .bind(name)
            .bind(role.as_str())
            .bind(crate::workers::token_hash(token.expose()))
            .bind(now.0)
            .fetch_optional(&self.pool)
            .await?;
        if inserted.is_none() {
            return Err(crate::StoreError::TokenExists { name: name.to_string() });
        }
        let record = crate::tokens::AccessTokenRecord {
            name: name.to_string(),
            role,
            created_at: now,
            last_used_at: None,
            revoked_at: None,
        };
        Ok(crate::tokens::CreatedToken { record, token })
    }

    async fn authenticate_token(
        &self,
        token: &str,
        now: arbiter_core::time::Timestamp,
    ) -> Result<Option<crate::tokens::AccessTokenRecord>, crate::StoreError> {
        if !token.starts_with(crate::tokens::ACCESS_TOKEN_PREFIX) {
            return Ok(None);
        }
        let row = sql(crate::tokens::AUTHENTICATE)
            .bind(crate::workers::token_hash(token))
            .bind(now.0)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(crate::tokens::record).transpose()
    }

    async fn tokens(&self) -> Result<Vec<crate::tokens::AccessTokenRecord>, crate::StoreError> {
        let rows = sql(crate::tokens::ALL).fetch_all(&self.pool).await?;
        rows.iter().map(crate::tokens::record).collect()
    }

    async fn revoke_token(
        &self,
        name: &str,
        now: arbiter_core::time::Timestamp,
    ) -> Result<crate::tokens::AccessTokenRecord, crate::StoreError> {
        let done = sql(crate::tokens::REVOKE).bind(name).bind(now.0).execute(&self.pool).await?;
        if done.rows_affected() == 0 {
            return Err(crate::StoreError::NoToken { name: name.to_string() });
        }
        let row = sql(crate::tokens::BY_NAME).bind(name).fetch_one(&self.pool).await?;
        crate::tokens::record(&row)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_tokens_have_their_own_prefix_and_256_random_bits() {
        let a = new_access_token().unwrap();
        assert!(a.expose().starts_with(ACCESS_TOKEN_PREFIX));
        assert_eq!(a.expose().len(), ACCESS_TOKEN_PREFIX.len() + 64);
        assert_ne!(a, new_access_token().unwrap());
    }

    #[test]
    fn token_names_and_roles() {
        for ok in ["alice", "ci.bot", "ops@example"] {
            assert!(check_token_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "-x", ".x", "a/b", "a b", &"x".repeat(65), "<script>"] {
            assert!(check_token_name(bad).is_err(), "{bad}");
        }
        assert_eq!(Role::parse("read-only"), Some(Role::ReadOnly));
        assert_eq!(Role::parse("admin"), Some(Role::Admin));
        assert_eq!(Role::parse("root"), None);
        assert!(Role::Admin.may_act() && !Role::ReadOnly.may_act());
    }
}
