//! The dashboard's sessions: who is logged in, with which role, and the CSRF token of each.
//!
//! A login (a token typed on `/login`, or a one-time login URL `arbiter ui` prints) opens a
//! session: 256 random bits in an `HttpOnly; SameSite=Strict` cookie (`Secure` over HTTPS),
//! kept here only as their SHA-256, for [`SESSION_TTL`] at most. Every form that changes
//! something carries the session's CSRF token, compared in constant time. A session opened
//! with a named access token ends when that token is revoked (checked every few seconds).
//! Sessions live in the server's memory: a restart logs everyone out, nothing else is lost.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use arbiter_store::tokens::Role;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use sha2::{Digest, Sha256};

use crate::state::AppState;

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "arbiter_session";
/// How long a session lasts after its login.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// How long a one-time login URL stays valid.
pub const ONE_TIME_TTL: Duration = Duration::from_secs(15 * 60);
/// How often a session of a named token checks that the token still lives.
const RECHECK: Duration = Duration::from_secs(5);
/// The most sessions one token (one `by`) may hold open: the oldest gives way.
const SESSIONS_PER_TOKEN: usize = 64;
/// The most sessions in all.
const SESSIONS: usize = 10_000;
/// The most event streams one session may hold open at once (a page each).
pub const STREAMS_PER_SESSION: usize = 16;

/// A logged-in browser.
#[derive(Clone, Debug)]
pub struct Session {
    pub role: Role,
    /// Who: `admin` or `token:NAME`, as plan events name them.
    pub by: String,
    /// The value every changing form must send back.
    pub csrf: String,
    opened: Instant,
    expires: Instant,
    checked: Instant,
    /// Its open event streams.
    streams: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

/// One of a session's open event streams, given back when dropped.
pub struct StreamSlot(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Every open session and one-time login, by the SHA-256 of its secret.
#[derive(Default)]
pub struct Sessions {
    open: Mutex<HashMap<[u8; 32], Session>>,
    once: Mutex<HashMap<[u8; 32], (Role, String, Instant)>>,
}

fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// `n` random bytes in hex, or `None` when the operating system's generator fails.
fn random_hex(n: usize) -> Option<String> {
    arbiter_store::workers::random_hex(n).ok()
}

impl Sessions {
    /// Opens a session; its cookie value (`None`: no randomness to make one).
    pub fn open(&self, role: Role, by: &str) -> Option<String> {
        let id = random_hex(32)?;
        let csrf = random_hex(16)?;
        let now = Instant::now();
        let session = Session {
            role,
            by: by.to_string(),
            csrf,
            opened: now,
            expires: now + SESSION_TTL,
            checked: now,
            streams: Default::default(),
        };
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.retain(|_, s| s.expires > now);
        // A token that logs in again and again (or a full table) gives up its oldest sessions.
        for (limit, same) in [(SESSIONS_PER_TOKEN, true), (SESSIONS, false)] {
            let mut held: Vec<([u8; 32], Instant)> =
                open.iter().filter(|(_, s)| !same || s.by == by).map(|(k, s)| (*k, s.opened)).collect();
            if held.len() >= limit {
                held.sort_by_key(|(_, opened)| *opened);
                for (key, _) in held.iter().take(held.len() + 1 - limit) {
                    open.remove(key);
                }
            }
        }
        open.insert(digest(&id), session);
        Some(id)
    }

    /// The live session of a cookie value.
    fn get(&self, id: &str) -> Option<Session> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let key = digest(id);
        match open.get(&key) {
            Some(s) if s.expires > Instant::now() => Some(s.clone()),
            Some(_) => {
                open.remove(&key);
                None
            }
            None => None,
        }
    }

    /// Whether the session of a cookie value is still open.
    pub fn is_open(&self, id: &str) -> bool {
        self.get(id).is_some()
    }

    /// A stream slot of the session, unless it holds [`STREAMS_PER_SESSION`] already.
    pub fn stream_slot(&self, id: &str) -> Option<StreamSlot> {
        let counter = self.get(id)?.streams;
        let taken = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let slot = StreamSlot(counter);
        (taken < STREAMS_PER_SESSION).then_some(slot)
    }

    fn mark_checked(&self, id: &str) {
        if let Some(s) = self.open.lock().unwrap_or_else(|p| p.into_inner()).get_mut(&digest(id)) {
            s.checked = Instant::now();
        }
    }

    /// Ends a session (logout).
    pub fn close(&self, id: &str) {
        self.open.lock().unwrap_or_else(|p| p.into_inner()).remove(&digest(id));
    }

    /// Ends every session of `by` (its token was revoked).
    pub fn close_all_of(&self, by: &str) {
        self.open.lock().unwrap_or_else(|p| p.into_inner()).retain(|_, s| s.by != by);
    }

    /// How many sessions are open.
    pub fn count(&self) -> usize {
        let now = Instant::now();
        self.open.lock().unwrap_or_else(|p| p.into_inner()).values().filter(|s| s.expires > now).count()
    }

    /// A code for a one-time login URL (`/login/once?code=…`): one use, within [`ONE_TIME_TTL`].
    pub fn one_time(&self, role: Role, by: &str) -> Option<String> {
        let code = random_hex(32)?;
        let now = Instant::now();
        let mut once = self.once.lock().unwrap_or_else(|p| p.into_inner());
        once.retain(|_, (_, _, until)| *until > now);
        once.insert(digest(&code), (role, by.to_string(), now + ONE_TIME_TTL));
        Some(code)
    }

    /// Spends a one-time code: the role and name it logs in as.
    pub fn redeem(&self, code: &str) -> Option<(Role, String)> {
        let (role, by, until) = self.once.lock().unwrap_or_else(|p| p.into_inner()).remove(&digest(code))?;
        (until > Instant::now()).then_some((role, by))
    }
}

/// The session cookie's value in a request.
pub fn session_cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == SESSION_COOKIE)
        .map(|(_, value)| value.trim())
        .filter(|v| !v.is_empty() && v.len() <= 128)
}

/// The `Set-Cookie` value of a new session.
pub fn set_cookie(id: &str, secure: bool) -> String {
    format!(
        "{SESSION_COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{}",
        SESSION_TTL.as_secs(),
        if secure { "; Secure" } else { "" }
    )
}

/// The `Set-Cookie` value that ends a session in the browser.
pub fn clear_cookie(secure: bool) -> String {
    format!("{SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0{}", if secure { "; Secure" } else { "" })
}

/// Whether two secrets are equal, in time independent of where they differ.
pub fn same_secret(a: &str, b: &str) -> bool {
    crate::state::constant_time_eq(&digest(a), &digest(b))
}

/// The logged-in browser of a request: any role may look.
#[derive(Clone, Debug)]
pub struct Viewer {
    pub role: Role,
    pub by: String,
    pub csrf: String,
    /// The session's cookie value (what logout ends).
    pub session: String,
}

impl Viewer {
    pub fn may_act(&self) -> bool {
        self.role.may_act()
    }
}

/// Why a request has no viewer: a page sends the browser to the login form; anything else
/// (a form post, the event stream, a fragment) answers 401.
#[derive(Debug)]
pub struct LoginRequired {
    /// Where to come back to after the login (a path of this site).
    next: Option<String>,
}

impl IntoResponse for LoginRequired {
    fn into_response(self) -> Response {
        match self.next {
            Some(next) => Redirect::to(&format!("/login?next={}", super::layout::url_encode(&next))).into_response(),
            None => (
                StatusCode::UNAUTHORIZED,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                "log in first: open /login",
            )
                .into_response(),
        }
    }
}

impl FromRequestParts<AppState> for Viewer {
    type Rejection = LoginRequired;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        // A page opened by a person is sent to the login form; what a script fetches (the
        // live regions, the event stream) is told 401.
        let is_page = parts.method == Method::GET
            && !parts.headers.contains_key("x-arbiter-live")
            && !parts.uri.path().starts_with("/ui/");
        let rejection = || LoginRequired {
            next: is_page.then(|| parts.uri.path_and_query().map(|p| p.as_str().to_string()).unwrap_or_default()),
        };
        let Some(id) = session_cookie(&parts.headers).map(str::to_string) else {
            return Err(rejection());
        };
        let Some(session) = state.sessions.get(&id) else {
            return Err(rejection());
        };
        if let Some(name) = session.by.strip_prefix("token:")
            && session.checked.elapsed() >= RECHECK
        {
            if !token_lives(state, name).await {
                state.sessions.close_all_of(&session.by);
                return Err(rejection());
            }
            state.sessions.mark_checked(&id);
        }
        Ok(Viewer { role: session.role, by: session.by, csrf: session.csrf, session: id })
    }
}

/// Whether the access token `name` is still live (a store that does not answer: no).
async fn token_lives(state: &AppState, name: &str) -> bool {
    match state.access.tokens().await {
        Ok(tokens) => tokens.iter().any(|t| t.name == name && t.revoked_at.is_none()),
        Err(_) => false,
    }
}

/// Whether a viewer's session is still good: open, and (for an access token's) its token
/// still live. What a long-lived answer (an event stream) checks as it goes.
pub async fn still_valid(state: &AppState, viewer: &Viewer) -> bool {
    if !state.sessions.is_open(&viewer.session) {
        return false;
    }
    match viewer.by.strip_prefix("token:") {
        Some(name) if !token_lives(state, name).await => {
            state.sessions.close_all_of(&viewer.by);
            false
        }
        _ => true,
    }
}

/// Whether a request comes from this site: a browser's `Origin` (when it sends one) names
/// the host it was sent to (`Host`, or a proxy's `X-Forwarded-Host`), and its
/// `Sec-Fetch-Site` (when it sends one) does not say `cross-site`.
pub fn same_site(headers: &HeaderMap) -> bool {
    let header = |name| headers.get(name).and_then(|v: &axum::http::HeaderValue| v.to_str().ok());
    if header("sec-fetch-site") == Some("cross-site") {
        return false;
    }
    let Some(origin) = header(header::ORIGIN.as_str()).filter(|o| *o != "null") else { return true };
    let origin_host = origin.split_once("://").map(|(_, rest)| rest);
    [header(header::HOST.as_str()), header("x-forwarded-host")].into_iter().flatten().any(|h| origin_host == Some(h))
}

/// A request that may change something: a logged-in admin whose form carried the session's
/// CSRF token, from this site (a browser's `Origin`, when it sends one, names this host).
pub fn check_action(viewer: &Viewer, headers: &HeaderMap, csrf: Option<&str>) -> Result<(), (StatusCode, String)> {
    let forbidden = |why: &str| (StatusCode::FORBIDDEN, why.to_string());
    match csrf {
        Some(token) if same_secret(token, &viewer.csrf) => {}
        _ => return Err(forbidden("the form's CSRF token is missing or wrong: reload the page and try again")),
    }
    if !same_site(headers) {
        return Err(forbidden("the request came from another site"));
    }
    if !viewer.may_act() {
        return Err(forbidden(
            "this session is read-only: log in with the admin token or an admin access token to change anything",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_open_expire_and_close() {
        let s = Sessions::default();
        let id = s.open(Role::ReadOnly, "token:alice").unwrap();
        assert_eq!(id.len(), 64);
        let got = s.get(&id).unwrap();
        assert_eq!((got.role, got.by.as_str()), (Role::ReadOnly, "token:alice"));
        assert!(s.get("nope").is_none());
        s.close_all_of("token:alice");
        assert!(s.get(&id).is_none());
        let id = s.open(Role::Admin, "admin").unwrap();
        s.close(&id);
        assert!(s.get(&id).is_none());
        assert_eq!(s.count(), 0);
    }

    #[test]
    fn a_token_holds_a_bounded_number_of_sessions_and_streams() {
        let s = Sessions::default();
        let first = s.open(Role::ReadOnly, "token:alice").unwrap();
        for _ in 0..SESSIONS_PER_TOKEN {
            s.open(Role::ReadOnly, "token:alice").unwrap();
        }
        assert!(!s.is_open(&first), "the oldest session gave way");
        assert_eq!(s.count(), SESSIONS_PER_TOKEN);
        let other = s.open(Role::Admin, "admin").unwrap();
        assert!(s.is_open(&other), "another token's sessions are its own");
        let slots: Vec<_> = (0..STREAMS_PER_SESSION).map(|_| s.stream_slot(&other).unwrap()).collect();
        assert!(s.stream_slot(&other).is_none(), "no more streams than the limit");
        drop(slots);
        assert!(s.stream_slot(&other).is_some(), "a closed stream gives its slot back");
        assert!(s.stream_slot("nope").is_none());
    }

    #[test]
    fn one_time_codes_work_once() {
        let s = Sessions::default();
        let code = s.one_time(Role::Admin, "admin").unwrap();
        assert_eq!(s.redeem(&code), Some((Role::Admin, "admin".to_string())));
        assert_eq!(s.redeem(&code), None, "a second use logs nobody in");
        assert_eq!(s.redeem("guess"), None);
    }

    #[test]
    fn cookies_are_read_and_written_strictly() {
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, "a=1; arbiter_session=abc ; b=2".parse().unwrap());
        assert_eq!(session_cookie(&h), Some("abc"));
        h.insert(header::COOKIE, "arbiter_sessionx=abc".parse().unwrap());
        assert_eq!(session_cookie(&h), None);
        let c = set_cookie("abc", true);
        for part in ["HttpOnly", "SameSite=Strict", "Secure", "Path=/"] {
            assert!(c.contains(part), "{c}");
        }
        assert!(!set_cookie("abc", false).contains("Secure"));
    }

    #[test]
    fn actions_need_the_csrf_token_an_admin_and_this_site() {
        let admin = Viewer { role: Role::Admin, by: "admin".into(), csrf: "c".repeat(32), session: "s".into() };
        let reader = Viewer { role: Role::ReadOnly, ..admin.clone() };
        let mut h = HeaderMap::new();
        h.insert(header::HOST, "127.0.0.1:7878".parse().unwrap());
        assert!(check_action(&admin, &h, Some(&"c".repeat(32))).is_ok());
        assert_eq!(check_action(&admin, &h, None).unwrap_err().0, StatusCode::FORBIDDEN);
        assert!(check_action(&admin, &h, Some("wrong")).is_err());
        assert!(check_action(&reader, &h, Some(&"c".repeat(32))).is_err());
        h.insert(header::ORIGIN, "https://evil.example".parse().unwrap());
        assert!(check_action(&admin, &h, Some(&"c".repeat(32))).is_err());
        h.insert(header::ORIGIN, "http://127.0.0.1:7878".parse().unwrap());
        assert!(check_action(&admin, &h, Some(&"c".repeat(32))).is_ok());
    }
}
