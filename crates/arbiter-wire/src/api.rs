//! The JSON bodies of the routes, shared by the server and [`crate::client`]: one
//! definition per message, so the two sides cannot drift. Requests refuse unknown fields.

use std::fmt;

use arbiter_core::time::Timestamp;
use arbiter_store::workers::WorkerRecord;
use serde::{Deserialize, Serialize};

/// Every error response: `{"error": "<code>", "message": "<what and how to fix it>"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct ErrorBody {
    pub error: String,
    #[cfg_attr(feature = "arbitrary", proptest(strategy = "arbiter_core::arbitrary::text()"))]
    pub message: String,
}

/// `POST /api/v1/workers/register`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(deny_unknown_fields)]
pub struct RegisterRequest {
    pub name: String,
    #[serde(default)]
    pub runners: Vec<String>,
    #[serde(default)]
    pub backends: Vec<String>,
    /// Units of work taken at once (1 to 1024; default 1).
    #[serde(default = "one")]
    pub slots: u32,
    /// Re-register a name that is taken: the worker keeps its id, gets a new token, and the
    /// old token stops working.
    #[serde(default)]
    pub replace: bool,
}

fn one() -> u32 {
    1
}

/// A worker token handed out once (registration, rotation).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(deny_unknown_fields)]
pub struct WorkerCredentials {
    pub worker_id: String,
    pub name: String,
    pub token: String,
    /// The name was taken and re-registered (or the token rotated).
    #[serde(default)]
    pub replaced: bool,
}

impl fmt::Debug for WorkerCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkerCredentials")
            .field("worker_id", &self.worker_id)
            .field("name", &self.name)
            .field("token", &"<redacted>")
            .field("replaced", &self.replaced)
            .finish()
    }
}

/// A worker in `GET /api/v1/workers` (never its token).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct WorkerView {
    pub name: String,
    pub id: String,
    pub runners: Vec<String>,
    pub backends: Vec<String>,
    pub slots: u32,
    /// What it holds now, as its last heartbeat said (`null`: nothing known).
    #[cfg_attr(feature = "arbitrary", proptest(strategy = "arbiter_core::arbitrary::json()"))]
    pub current_work: serde_json::Value,
    /// RFC 3339; `null` before its first heartbeat.
    pub last_heartbeat: Option<String>,
    pub registered_at: String,
    /// RFC 3339 when revoked; `null` while its token is valid.
    pub revoked_at: Option<String>,
    /// Who revoked it (`admin`, `token:NAME`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_by: Option<String>,
    /// Seen within two lease lengths.
    pub connected: bool,
}

impl WorkerView {
    pub fn new(w: &WorkerRecord, connected_since: Timestamp) -> Self {
        WorkerView {
            name: w.name.clone(),
            id: w.id.clone(),
            runners: w.capabilities.runners.clone(),
            backends: w.capabilities.backends.clone(),
            slots: w.capabilities.slots,
            current_work: w.current_work.clone(),
            last_heartbeat: w.last_seen_at.map(Timestamp::rfc3339),
            registered_at: w.registered_at.rfc3339(),
            revoked_at: w.revoked_at.map(Timestamp::rfc3339),
            revoked_by: w.revoked_by.clone(),
            connected: w.seen_since(connected_since),
        }
    }
}

/// `GET /api/v1/workers`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct WorkerList {
    pub workers: Vec<WorkerView>,
}

/// `PUT /api/v1/artifacts/{sha256}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct ArtifactStored {
    pub sha256: String,
    pub size: u64,
    /// `false`: the server had it already (200), `true`: stored now (201).
    pub created: bool,
}

/// `POST /api/v1/tokens`: a named access token.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(deny_unknown_fields)]
pub struct TokenRequest {
    pub name: String,
    /// `admin` or `read-only`.
    pub role: arbiter_store::tokens::Role,
}

/// The answer of `POST /api/v1/tokens`: the token, shown this once.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct TokenCreated {
    pub name: String,
    pub role: arbiter_store::tokens::Role,
    pub token: String,
}

impl std::fmt::Debug for TokenCreated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenCreated").field("name", &self.name).field("role", &self.role).finish_non_exhaustive()
    }
}

/// A named access token as listed (never its value).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct TokenView {
    pub name: String,
    pub role: arbiter_store::tokens::Role,
    pub created_at: String,
    pub last_used_at: Option<String>,
    pub revoked_at: Option<String>,
}

impl From<&arbiter_store::tokens::AccessTokenRecord> for TokenView {
    fn from(t: &arbiter_store::tokens::AccessTokenRecord) -> Self {
        TokenView {
            name: t.name.clone(),
            role: t.role,
            created_at: t.created_at.rfc3339(),
            last_used_at: t.last_used_at.map(Timestamp::rfc3339),
            revoked_at: t.revoked_at.map(Timestamp::rfc3339),
        }
    }
}

/// `GET /api/v1/tokens`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct TokenList {
    pub tokens: Vec<TokenView>,
}
