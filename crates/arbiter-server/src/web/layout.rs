//! The dashboard's page shell (head, navigation, who is logged in, logout) and the small
//! pieces every page draws the same way: status badges, money, times, gauges, links.
//!
//! Every page is whole HTML that reads without JavaScript; `app.js` only keeps it live.
//! Live regions carry an `id` and `data-live`: when the page's event stream says something
//! changed, the script fetches the page again and swaps those regions in place.

use arbiter_core::money::Usd;
use arbiter_core::plan::state::TaskStatus;
use arbiter_core::time::Timestamp;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use maud::{DOCTYPE, Markup, PreEscaped, html};

use super::assets;
use super::session::Viewer;
use crate::state::AppState;

/// Which section of the navigation a page belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Section {
    Plans,
    Runs,
    Workers,
    Events,
    Costs,
    None,
}

/// A page to render.
pub struct Page<'a> {
    pub title: String,
    pub section: Section,
    pub viewer: Option<&'a Viewer>,
    /// The event stream that keeps the page live (`/ui/stream?plan=ID`), if any.
    pub stream: Option<String>,
    /// Whether the local runs page exists (`arbiter ui`).
    pub local_runs: bool,
    /// Refresh the live regions this often too (what no event announces: ages, heartbeats).
    pub refresh_seconds: Option<u32>,
    pub body: Markup,
}

impl<'a> Page<'a> {
    /// A page of the dashboard for a logged-in viewer, with the navigation `state` calls for.
    pub fn new(title: impl Into<String>, section: Section, viewer: &'a Viewer, state: &AppState, body: Markup) -> Self {
        Page {
            title: title.into(),
            section,
            viewer: Some(viewer),
            stream: None,
            local_runs: state.local_runs.is_some(),
            refresh_seconds: None,
            body,
        }
    }

    /// A page shown before (or without) a login: the login form, an error.
    pub fn bare(title: impl Into<String>, body: Markup) -> Self {
        Page {
            title: title.into(),
            section: Section::None,
            viewer: None,
            stream: None,
            local_runs: false,
            refresh_seconds: None,
            body,
        }
    }

    /// Kept live by this event stream (`/ui/stream…`).
    pub fn live(mut self, stream: Option<String>) -> Self {
        self.stream = stream;
        self
    }

    /// Looks again this often too.
    pub fn every(mut self, seconds: Option<u32>) -> Self {
        self.refresh_seconds = seconds;
        self
    }

    pub fn render(self) -> Response {
        let markup = html! {
            (DOCTYPE)
            html lang="en" {
                head {
                    meta charset="utf-8";
                    meta name="viewport" content="width=device-width, initial-scale=1";
                    meta name="referrer" content="no-referrer";
                    title { (self.title) " · arbiter" }
                    link rel="stylesheet" href=(*assets::CSS_PATH);
                    script src=(*assets::JS_PATH) defer {}
                }
                body data-stream=[self.stream.as_deref()] data-refresh=[self.refresh_seconds] {
                    a.skip href="#main" { "Skip to the content" }
                    header.top {
                        a.brand href="/" { "arbiter" }
                        @if let Some(v) = self.viewer {
                            nav aria-label="Sections" {
                                (nav_link("/", "Plans", self.section == Section::Plans))
                                @if self.local_runs { (nav_link("/runs", "Runs", self.section == Section::Runs)) }
                                (nav_link("/workers", "Workers", self.section == Section::Workers))
                                (nav_link("/events", "Events", self.section == Section::Events))
                                (nav_link("/costs", "Costs", self.section == Section::Costs))
                            }
                            div.who {
                                span title="Who you are logged in as" { (v.by) }
                                " "
                                span.badge.role { (v.role.as_str()) }
                                form method="post" action="/logout" {
                                    input type="hidden" name="csrf" value=(v.csrf);
                                    button.link type="submit" { "Log out" }
                                }
                            }
                        }
                    }
                    main #main tabindex="-1" {
                        (self.body)
                    }
                    p #live-status .live-status role="status" aria-live="polite" {}
                }
            }
        };
        html_response(markup)
    }
}

/// A rendered page as a response (never cached: it shows live state). Every page passes
/// here, so whatever text a page quoted without [`printable`], its control, bidirectional
/// and invisible characters are written out all the same (arbiter's own markup has none).
pub fn html_response(markup: Markup) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::X_FRAME_OPTIONS, "DENY"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
            ),
        ],
        arbiter_core::text::visible(&markup.into_string()),
    )
        .into_response()
}

fn nav_link(href: &str, text: &str, current: bool) -> Markup {
    html! {
        @if current { a href=(href) aria-current="page" { (text) } } @else { a href=(href) { (text) } }
    }
}

/// A task status as a coloured badge that also says it in words.
pub fn status_badge(status: TaskStatus) -> Markup {
    html! { span class={ "badge s-" (status.as_str()) } { (status.as_str()) } }
}

/// Any status word (candidates, attempts, units) as a badge.
pub fn word_badge(word: &str, tone: Tone) -> Markup {
    html! { span class={ "badge t-" (tone.as_str()) } { (word) } }
}

/// The colour a word is drawn in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tone {
    Good,
    Bad,
    Busy,
    Quiet,
}

impl Tone {
    fn as_str(self) -> &'static str {
        match self {
            Tone::Good => "good",
            Tone::Bad => "bad",
            Tone::Busy => "busy",
            Tone::Quiet => "quiet",
        }
    }
}

/// A budget's spent, reserved and limit cells of a table row.
pub fn budget_cells(b: &arbiter_core::budget::Budget) -> Markup {
    html! {
        td.num { (money(b.spent)) }
        td.num { (money(b.reserved)) }
        td.num { @match b.limit { Some(l) => (money(l)), None => span.muted { "no limit" } } }
    }
}

/// `$1.23`.
pub fn money(u: Usd) -> String {
    u.to_string()
}

/// `2026-12-03 10:20:31 UTC`.
pub fn when(t: Timestamp) -> String {
    let s = t.rfc3339();
    let s = s.split('.').next().unwrap_or(&s).trim_end_matches('Z');
    format!("{} UTC", s.replacen('T', " ", 1))
}

/// `42 s ago`, `3 min ago`, `in 12 s`.
pub fn ago(t: Timestamp, now: Timestamp) -> String {
    let secs = (now.0 - t.0) / 1_000_000;
    let (n, future) = if secs < 0 { (-secs, true) } else { (secs, false) };
    let text = if n < 60 {
        format!("{n} s")
    } else if n < 3600 {
        format!("{} min", n / 60)
    } else if n < 86_400 {
        format!("{} h", n / 3600)
    } else {
        format!("{} d", n / 86_400)
    };
    if future { format!("in {text}") } else { format!("{text} ago") }
}

/// A time with its age in a tooltip.
pub fn time_cell(t: Timestamp, now: Timestamp) -> Markup {
    html! { time datetime=(t.rfc3339()) title=(when(t)) { (ago(t, now)) } }
}

/// A budget as a gauge: spent and reserved against the limit.
pub fn budget_gauge(id: &str, limit: Option<Usd>, spent: Usd, reserved: Usd) -> Markup {
    let label = match limit {
        Some(l) => format!("{} spent and {} reserved of {}", money(spent), money(reserved), money(l)),
        None => format!("{} spent, {} reserved, no limit", money(spent), money(reserved)),
    };
    let (value, max) = match limit {
        Some(l) if l.pico() > 0 => ((spent.pico() + reserved.pico()).min(l.pico()), l.pico()),
        _ => (0, 1),
    };
    let exhausted = limit.is_some_and(|l| spent >= l);
    html! {
        div.gauge #(id) data-live {
            @if limit.is_some() {
                meter min="0" max=(max) value=(value) high=(max * 9 / 10) optimum="0" aria-label=(label) class=[exhausted.then_some("over")] {}
            }
            span.gauge-text { (label) }
        }
    }
}

/// Percent-encodes a query value.
pub fn url_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Percent-encodes a path segment (a `/` too).
pub fn segment(s: &str) -> String {
    url_encode(s).replace('/', "%2F")
}

/// The link to a plan's page.
pub fn plan_href(plan: &str) -> String {
    format!("/plans/{}", segment(plan))
}

/// The link to a task's page (task ids may hold `/`: it goes in the query).
pub fn task_href(plan: &str, task: &str) -> String {
    format!("/plans/{}/task?id={}", segment(plan), url_encode(task))
}

/// The link to a plan run's page.
pub fn run_href(plan: &str, run: &str) -> String {
    format!("/plans/{}/runs/{}", segment(plan), segment(run))
}

/// Text shown in a page, its control and invisible characters made visible (a hostile
/// title, reason or diff cannot fake or hide anything; HTML escaping is maud's).
pub fn printable(s: &str) -> String {
    arbiter_core::text::visible(s)
}

/// A short commit id.
pub fn short(commit: &str) -> &str {
    &commit[..commit.len().min(10)]
}

/// An empty-state line.
pub fn empty(text: &str) -> Markup {
    html! { p.empty { (text) } }
}

/// Raw, already-escaped HTML.
pub fn raw(s: String) -> Markup {
    PreEscaped(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_encode_what_they_carry() {
        assert_eq!(task_href("calc", "api/T1 x"), "/plans/calc/task?id=api/T1%20x");
        assert_eq!(plan_href("a.b"), "/plans/a.b");
        assert_eq!(segment("a/b"), "a%2Fb");
        assert_eq!(url_encode("<script>&"), "%3Cscript%3E%26");
    }

    #[test]
    fn times_and_text() {
        let now = Timestamp(10_000_000_000);
        assert_eq!(ago(Timestamp(now.0 - 5_000_000), now), "5 s ago");
        assert_eq!(ago(Timestamp(now.0 + 120_000_000), now), "in 2 min");
        assert_eq!(printable("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
    }

    #[test]
    fn html_in_data_is_escaped() {
        let m = html! { p { (printable("<img src=x onerror=alert(1)>")) } };
        assert_eq!(m.into_string(), "<p>&lt;img src=x onerror=alert(1)&gt;</p>");
    }

    /// A page that quoted outside text as it is (no `printable`) still shows it escaped.
    #[tokio::test]
    async fn every_page_is_shown_with_its_hidden_characters_written_out() {
        let name = "lnk\u{1b}]0;pwned\u{7}\r\u{202e}gpj";
        let response = html_response(html! { p { (name) } });
        let body = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
        let body = String::from_utf8(body.to_vec()).unwrap();
        assert_eq!(body, "<p>lnk\\u{1b}]0;pwned\\u{7}\\r\\u{202e}gpj</p>");
    }
}
