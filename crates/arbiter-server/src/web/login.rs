//! Logging in and out of the dashboard.
//!
//! - `GET /login` → the form (a token field); `POST /login` (form `token`, `next`) opens a
//!   session for the admin token or a live access token, and sends the browser on to `next`
//!   (a path of this site only). Worker and bootstrap tokens never open the dashboard.
//! - `GET /login/once?code=…` → the one-time login `arbiter ui` prints: the code works once,
//!   within minutes.
//! - `POST /logout` (form `csrf`) → the session ends.

use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::{Router, routing::post};
use maud::html;
use serde::Deserialize;

use super::layout::{Page, printable};
use super::session::{Viewer, clear_cookie, session_cookie, set_cookie};
use crate::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new().route("/login", get(form).post(login)).route("/login/once", get(once)).route("/logout", post(logout))
}

#[derive(Deserialize)]
struct NextQuery {
    next: Option<String>,
}

/// Only a path of this site (`/…`, not `//host`): a login link cannot send the browser away.
/// Browsers drop tabs and line breaks from URLs and read `\` as `/`, so a `next` holding any
/// of those, any other control character or whitespace, is not followed at all.
fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(n)
            if n.starts_with('/')
                && !n.starts_with("//")
                && !n.chars().any(|c| c.is_control() || c.is_whitespace() || c == '\\') =>
        {
            n.to_string()
        }
        _ => "/".to_string(),
    }
}

fn login_page(next: &str, problem: Option<&str>) -> Response {
    let body = html! {
        section.card.login {
            h1 { "Log in to arbiter" }
            @if let Some(p) = problem { p.error role="alert" { (p) } }
            form method="post" action="/login" {
                input type="hidden" name="next" value=(next);
                p {
                    label for="token" { "Token" }
                    br;
                    input #token type="password" name="token" autocomplete="current-password" required autofocus;
                }
                p.muted {
                    "The admin token (ARBITER_ADMIN_TOKEN) or an access token from "
                    code { "arbiter token create" }
                    " (read-only ones can look but not act). On one machine, "
                    code { "arbiter ui" }
                    " prints a one-time login link instead."
                }
                button type="submit" { "Log in" }
            }
        }
    };
    Page::bare("Log in", body).render()
}

async fn form(Query(q): Query<NextQuery>) -> Response {
    login_page(&safe_next(q.next.as_deref()), None)
}

#[derive(Deserialize)]
struct LoginForm {
    token: String,
    next: Option<String>,
}

async fn login(State(state): State<AppState>, headers: HeaderMap, Form(f): Form<LoginForm>) -> Response {
    let next = safe_next(f.next.as_deref());
    // Another site must not log a browser in (into the other site's own session).
    if !super::session::same_site(&headers) {
        return super::PageError::new(StatusCode::FORBIDDEN, "the login came from another site").into_response();
    }
    let token = f.token.trim();
    let who = match crate::auth::reader_of(&state, token).await {
        Ok(who) => who,
        Err(e) => {
            let mut r = login_page(&next, Some(&printable(&e.message)));
            *r.status_mut() = e.status;
            return r;
        }
    };
    match who {
        Some((role, by)) => open(&state, role, &by, &next),
        None => {
            tracing::info!("dashboard login refused");
            let mut r = login_page(
                &next,
                Some(
                    "That token does not open the dashboard: use the admin token or an access token (`arbiter token create --read-only`); worker and bootstrap tokens cannot log in.",
                ),
            );
            *r.status_mut() = StatusCode::UNAUTHORIZED;
            r
        }
    }
}

fn open(state: &AppState, role: arbiter_store::tokens::Role, by: &str, next: &str) -> Response {
    match state.sessions.open(role, by) {
        Some(id) => {
            tracing::info!(by = %by, role = %role, "dashboard login");
            ([(header::SET_COOKIE, set_cookie(&id, state.secure_cookies))], Redirect::to(next)).into_response()
        }
        None => super::PageError::internal("opening a session", "the random number generator failed").into_response(),
    }
}

#[derive(Deserialize)]
struct OnceQuery {
    code: Option<String>,
}

async fn once(State(state): State<AppState>, Query(q): Query<OnceQuery>) -> Response {
    match q.code.as_deref().and_then(|c| state.sessions.redeem(c)) {
        Some((role, by)) => open(&state, role, &by, "/"),
        None => {
            let mut r = login_page(
                "/",
                Some(
                    "This one-time login link was used already or has expired. Stop `arbiter ui` and start it again for a new one.",
                ),
            );
            *r.status_mut() = StatusCode::UNAUTHORIZED;
            r
        }
    }
}

#[derive(Deserialize)]
struct LogoutForm {
    csrf: Option<String>,
}

async fn logout(
    viewer: Viewer,
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(f): Form<LogoutForm>,
) -> Response {
    // Logging out needs the CSRF token too (another site must not end a session), but any
    // role may.
    let reader = Viewer { role: arbiter_store::tokens::Role::Admin, ..viewer.clone() };
    if let Err((status, why)) = super::session::check_action(&reader, &headers, f.csrf.as_deref()) {
        return super::PageError::new(status, why).into_response();
    }
    if let Some(id) = session_cookie(&headers) {
        state.sessions.close(id);
    }
    tracing::info!(by = %viewer.by, "dashboard logout");
    ([(header::SET_COOKIE, clear_cookie(state.secure_cookies))], Redirect::to("/login")).into_response()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_login_only_sends_the_browser_within_the_site() {
        assert_eq!(super::safe_next(Some("/plans/calc")), "/plans/calc");
        for away in [
            "//evil.example/x",
            "https://evil.example",
            "/\\evil.example",
            "/\t/evil.example",
            "/\u{1}x",
            "/ /evil.example",
            "javascript:alert(1)",
            "",
        ] {
            assert_eq!(super::safe_next(Some(away)), "/", "{away}");
        }
        assert_eq!(super::safe_next(None), "/");
    }
}
