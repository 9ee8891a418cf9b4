//! The dashboard's stylesheet and script, embedded in the binary (no CDN, nothing fetched
//! from elsewhere), served under paths named by a hash of their content, so browsers may
//! keep them for good and a new build is never served a stale copy.

use std::sync::LazyLock;

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

use crate::state::AppState;

const CSS: &str = include_str!("assets/app.css");
const JS: &str = include_str!("assets/app.js");

/// FNV-1a of a text: a name for a version of a file.
const fn fnv(text: &str) -> u64 {
    let bytes = text.as_bytes();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < bytes.len() {
        hash ^= bytes[i] as u64;
        hash = hash.wrapping_mul(0x0100_0000_01b3);
        i += 1;
    }
    hash
}

/// Where the stylesheet is served.
pub static CSS_PATH: LazyLock<String> = LazyLock::new(|| format!("/assets/app-{:016x}.css", fnv(CSS)));
/// Where the script is served.
pub static JS_PATH: LazyLock<String> = LazyLock::new(|| format!("/assets/app-{:016x}.js", fnv(JS)));

pub fn routes() -> Router<AppState> {
    Router::new().route(&CSS_PATH, get(css)).route(&JS_PATH, get(js))
}

async fn css() -> impl IntoResponse {
    asset("text/css; charset=utf-8", CSS)
}

async fn js() -> impl IntoResponse {
    asset("text/javascript; charset=utf-8", JS)
}

fn asset(kind: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "public, max-age=31536000, immutable"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
}
