//! Bearer tokens and who may do what.
//!
//! Four kinds of token, each accepted only where it belongs:
//! - the bootstrap token (`ARBITER_BOOTSTRAP_TOKEN`) only registers workers ([`BootstrapAuth`]);
//! - the admin token (`ARBITER_ADMIN_TOKEN`) administers: workers, plans, events, metrics,
//!   artifacts ([`AdminAuth`]);
//! - named access tokens (`arbiter token create`, kept by [`AccessTokens`]) of the admin role
//!   administer like the admin token; read-only ones only read ([`ReaderAuth`]: the `GET`
//!   routes of plans, events and workers);
//! - a worker's own token does that worker's work ([`WorkerAuth`], which yields the worker).
//!
//! An action names who did it ([`AdminAuth::by`]): `admin` for the environment's admin
//! token, `token:NAME` for a named token; the dashboard's sessions carry the same names.
//!
//! A missing token, or one that is not valid here at all (unknown, revoked, rotated away),
//! is 401 with `WWW-Authenticate: Bearer`. A valid token of another kind is 403: the caller
//! is known but may not do this (a worker token on an admin route, the admin token on a
//! worker route, the bootstrap token anywhere but registration). A worker acting on work it
//! does not hold is 403 too ([`require_lease_owner`]).
//!
//! The shared tokens are compared in constant time ([`crate::state::Tokens`]); a worker token
//! is looked up by its SHA-256. No token is ever logged or echoed in an error.

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;

use arbiter_store::tokens::{AccessTokenRecord, Role};
use arbiter_store::workers::WorkerRecord;

use crate::error::ApiError;
use crate::state::AppState;

/// The bearer token of a request (`Authorization: Bearer <token>`, the scheme in any case).
pub fn bearer(parts: &Parts) -> Option<&str> {
    let value = parts.headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

fn missing(what: &str) -> ApiError {
    ApiError::unauthorized("missing_token", format!("this route needs {what}: send `Authorization: Bearer <token>`"))
}

fn invalid(what: &str) -> ApiError {
    ApiError::unauthorized(
        "invalid_token",
        format!("the bearer token is not valid here, where {what} is expected; it may be wrong, revoked or rotated"),
    )
}

/// What kind of token a request presented, when it is valid for some route.
enum Kind {
    Admin,
    Bootstrap,
    Access(AccessTokenRecord),
    Worker(Box<WorkerRecord>),
    Unknown,
}

/// Who acts with the environment's admin token.
pub const ENV_ADMIN: &str = "admin";

/// Who acts with a named access token.
pub fn token_actor(name: &str) -> String {
    format!("token:{name}")
}

async fn classify(state: &AppState, token: &str) -> Result<Kind, ApiError> {
    // Both shared tokens are always compared, so the time does not tell which one matched.
    let admin = state.tokens.is_admin(token);
    let bootstrap = state.tokens.is_bootstrap(token);
    if admin {
        return Ok(Kind::Admin);
    }
    if bootstrap {
        return Ok(Kind::Bootstrap);
    }
    if let Some(w) = state.worker_tokens.get(token) {
        return Ok(Kind::Worker(Box::new(w)));
    }
    if let Some(t) = state.access_tokens.get(token) {
        return Ok(Kind::Access(t));
    }
    if let Some(t) = state.access.authenticate_token(token, state.now()).await? {
        state.access_tokens.put(token, &t);
        return Ok(Kind::Access(t));
    }
    Ok(match state.registry.authenticate(token).await? {
        Some(w) => {
            state.worker_tokens.put(token, &w);
            Kind::Worker(Box::new(w))
        }
        None => Kind::Unknown,
    })
}

/// The role and the name of whoever presented `token`, when it is the admin token or a live
/// access token (`None` for any other token, valid elsewhere or not): what a login to the
/// dashboard checks.
pub async fn reader_of(state: &AppState, token: &str) -> Result<Option<(Role, String)>, ApiError> {
    Ok(match classify(state, token).await? {
        Kind::Admin => Some((Role::Admin, ENV_ADMIN.to_string())),
        Kind::Access(t) => Some((t.role, token_actor(&t.name))),
        Kind::Bootstrap | Kind::Worker(_) | Kind::Unknown => None,
    })
}

/// Tokens recently found valid (by their SHA-256) and what they stand for, so that a busy
/// client's every request does not ask the store: forgotten at once when this server
/// revokes, rotates or re-registers what they belong to, and after a few seconds in any
/// case.
pub struct RecentTokens<T> {
    seen: std::sync::Mutex<std::collections::HashMap<[u8; 32], (T, std::time::Instant)>>,
}

/// The tokens of workers recently seen.
pub type WorkerTokens = RecentTokens<WorkerRecord>;

impl<T> Default for RecentTokens<T> {
    fn default() -> Self {
        RecentTokens { seen: Default::default() }
    }
}

/// How long a token found valid is taken as valid without asking the store again.
const FRESH: std::time::Duration = std::time::Duration::from_secs(5);

impl<T: Clone> RecentTokens<T> {
    fn digest(token: &str) -> [u8; 32] {
        use sha2::Digest;
        sha2::Sha256::digest(token.as_bytes()).into()
    }

    fn get(&self, token: &str) -> Option<T> {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.get(&Self::digest(token)).filter(|(_, at)| at.elapsed() < FRESH).map(|(w, _)| w.clone())
    }

    fn put(&self, token: &str, value: &T) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.retain(|_, (_, at)| at.elapsed() < FRESH);
        seen.insert(Self::digest(token), (value.clone(), std::time::Instant::now()));
    }

    /// Every token whose value `stale` picks must be checked again (revoked or replaced).
    pub fn forget_where(&self, stale: impl Fn(&T) -> bool) {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).retain(|_, (v, _)| !stale(v));
    }
}

impl RecentTokens<WorkerRecord> {
    /// Every token of the worker `id` must be checked again (it was revoked or replaced).
    pub fn forget(&self, id: &str) {
        self.forget_where(|w| w.id == id);
    }
}

/// The request carries the admin token, or a named access token of the admin role.
#[derive(Clone, Debug)]
pub struct AdminAuth {
    /// Who acts: `admin` (the environment's token) or `token:NAME`.
    pub by: String,
}

impl FromRequestParts<AppState> for AdminAuth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        const WHAT: &str = "the admin token (ARBITER_ADMIN_TOKEN)";
        let token = bearer(parts).ok_or_else(|| missing(WHAT))?;
        match classify(state, token).await? {
            Kind::Admin => Ok(AdminAuth { by: ENV_ADMIN.to_string() }),
            Kind::Access(t) if t.role.may_act() => Ok(AdminAuth { by: token_actor(&t.name) }),
            Kind::Access(t) => Err(ApiError::forbidden(
                "read_only",
                format!(
                    "the access token '{}' is read-only: it reads plans, events and workers but cannot change them; use the admin token or an admin access token",
                    t.name
                ),
            )),
            Kind::Worker(_) => Err(ApiError::forbidden(
                "admin_only",
                "a worker token cannot administer the server; use the admin token (ARBITER_ADMIN_TOKEN)",
            )),
            Kind::Bootstrap => Err(ApiError::forbidden(
                "admin_only",
                "the bootstrap token only registers workers; use the admin token (ARBITER_ADMIN_TOKEN)",
            )),
            Kind::Unknown => Err(invalid(WHAT)),
        }
    }
}

/// The request carries a token that may read: the admin token or any live access token (a
/// read-only one too).
#[derive(Clone, Debug)]
pub struct ReaderAuth {
    pub role: Role,
    /// Who reads: `admin` or `token:NAME`.
    pub by: String,
}

impl FromRequestParts<AppState> for ReaderAuth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        const WHAT: &str = "the admin token (ARBITER_ADMIN_TOKEN) or an access token (`arbiter token create`)";
        let token = bearer(parts).ok_or_else(|| missing(WHAT))?;
        match classify(state, token).await? {
            Kind::Admin => Ok(ReaderAuth { role: Role::Admin, by: ENV_ADMIN.to_string() }),
            Kind::Access(t) => Ok(ReaderAuth { role: t.role, by: token_actor(&t.name) }),
            Kind::Worker(_) => Err(ApiError::forbidden(
                "admin_only",
                "a worker token cannot read the server's plans; use the admin token (ARBITER_ADMIN_TOKEN) or an access token (`arbiter token create`)",
            )),
            Kind::Bootstrap => Err(ApiError::forbidden(
                "admin_only",
                "the bootstrap token only registers workers; use the admin token (ARBITER_ADMIN_TOKEN) or an access token (`arbiter token create`)",
            )),
            Kind::Unknown => Err(invalid(WHAT)),
        }
    }
}

/// The request carries the bootstrap token (registration).
#[derive(Clone, Copy, Debug)]
pub struct BootstrapAuth;

impl FromRequestParts<AppState> for BootstrapAuth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        const WHAT: &str = "the bootstrap token (ARBITER_BOOTSTRAP_TOKEN)";
        let token = bearer(parts).ok_or_else(|| missing(WHAT))?;
        if state.tokens.is_bootstrap(token) {
            return Ok(BootstrapAuth);
        }
        // No other token registers: say so for known ones, 401 for the rest.
        match classify(state, token).await? {
            Kind::Admin | Kind::Access(_) | Kind::Worker(_) => Err(ApiError::forbidden(
                "bootstrap_only",
                "workers register with the bootstrap token (ARBITER_BOOTSTRAP_TOKEN), not this one",
            )),
            Kind::Bootstrap | Kind::Unknown => Err(invalid(WHAT)),
        }
    }
}

/// The request carries a live worker's token; yields that worker.
#[derive(Clone, Debug)]
pub struct WorkerAuth(pub WorkerRecord);

impl WorkerAuth {
    pub fn worker(&self) -> &WorkerRecord {
        &self.0
    }

    /// 403 unless this worker holds the lease (`lease_worker` is the worker id the lease
    /// was granted to).
    pub fn require_lease_owner(&self, lease_worker: &str) -> Result<(), ApiError> {
        require_lease_owner(&self.0, lease_worker)
    }
}

impl FromRequestParts<AppState> for WorkerAuth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        const WHAT: &str = "a worker token (from `arbiter worker register`)";
        let token = bearer(parts).ok_or_else(|| missing(WHAT))?;
        match classify(state, token).await? {
            Kind::Worker(w) => Ok(WorkerAuth(*w)),
            Kind::Admin | Kind::Access(_) | Kind::Bootstrap => Err(ApiError::forbidden(
                "worker_only",
                "this route is for workers: send the worker's own token (from `arbiter worker register`)",
            )),
            Kind::Unknown => Err(invalid(WHAT)),
        }
    }
}

/// "This worker must own that lease": 403 when `worker` is not the one the lease (or any
/// piece of work) was granted to. Leases name workers by id ([`WorkerRecord::id`]).
pub fn require_lease_owner(worker: &WorkerRecord, lease_worker: &str) -> Result<(), ApiError> {
    if worker.id == lease_worker {
        Ok(())
    } else {
        Err(ApiError::forbidden(
            "not_your_lease",
            format!("worker {} does not hold this lease; a worker may act only on work it claimed", worker.name),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Request;

    fn parts(auth: Option<&str>) -> Parts {
        let mut b = Request::builder().uri("/");
        if let Some(a) = auth {
            b = b.header(AUTHORIZATION, a);
        }
        b.body(()).unwrap().into_parts().0
    }

    #[test]
    fn bearer_tokens_are_read_from_the_authorization_header() {
        assert_eq!(bearer(&parts(Some("Bearer abc"))), Some("abc"));
        assert_eq!(bearer(&parts(Some("bearer   abc  "))), Some("abc"));
        assert_eq!(bearer(&parts(Some("Basic abc"))), None);
        assert_eq!(bearer(&parts(Some("Bearer "))), None);
        assert_eq!(bearer(&parts(None)), None);
    }
}
