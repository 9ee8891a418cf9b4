//! The server's metrics, exposed at `/metrics` in the Prometheus text format (version
//! 0.0.4), written by hand: counters the work protocol increments ([`Metrics::claimed`],
//! [`Metrics::completed`], [`Metrics::leases_expired`]), a latency histogram per route, and
//! gauges read at scrape time (queue depth by task status, connected workers).
//!
//! Labels take only bounded values: a route is its pattern (`/api/v1/workers/{name}/revoke`,
//! or `unmatched`), never a raw path; completions are one of three outcomes; statuses are
//! the task statuses the store knows.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Upper bounds of the request latency buckets, in seconds.
pub const BUCKETS: &[f64] = &[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

/// How an attempt ended, as a label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Completion {
    Succeeded,
    Failed,
    Released,
}

impl Completion {
    pub fn as_str(self) -> &'static str {
        match self {
            Completion::Succeeded => "succeeded",
            Completion::Failed => "failed",
            Completion::Released => "released",
        }
    }
}

#[derive(Clone, Debug, Default)]
struct Histogram {
    /// Per bucket of [`BUCKETS`] (not cumulative; summed when rendered).
    buckets: Vec<u64>,
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        if self.buckets.is_empty() {
            self.buckets = vec![0; BUCKETS.len()];
        }
        if let Some(i) = BUCKETS.iter().position(|b| seconds <= *b) {
            self.buckets[i] += 1;
        }
        self.count += 1;
        self.sum += seconds;
    }
}

/// Counters and histograms of one server process.
#[derive(Debug, Default)]
pub struct Metrics {
    claims: AtomicU64,
    completions: Mutex<BTreeMap<Completion, u64>>,
    lease_expiries: AtomicU64,
    /// (method, route) → latency.
    latency: Mutex<BTreeMap<(String, String), Histogram>>,
    /// (method, route, status) → requests.
    requests: Mutex<BTreeMap<(String, String, u16), u64>>,
}

/// What a scrape reads from the stores.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Gauges {
    /// (plan, task status) → tasks.
    pub tasks: BTreeMap<(String, String), u64>,
    pub workers_registered: u64,
    pub workers_connected: u64,
}

impl Metrics {
    pub fn new() -> Self {
        Self::default()
    }

    /// A unit of work was claimed.
    pub fn claimed(&self) {
        self.claims.fetch_add(1, Ordering::Relaxed);
    }

    /// An attempt was reported.
    pub fn completed(&self, how: Completion) {
        if let Ok(mut m) = self.completions.lock() {
            *m.entry(how).or_default() += 1;
        }
    }

    /// `n` leases expired and were taken back (a sweep).
    pub fn leases_expired(&self, n: u64) {
        self.lease_expiries.fetch_add(n, Ordering::Relaxed);
    }

    /// One answered request: its method, route pattern, status and time to the response.
    pub fn observe_request(&self, method: &str, route: &str, status: u16, seconds: f64) {
        if let Ok(mut m) = self.latency.lock() {
            m.entry((method.to_string(), route.to_string())).or_default().observe(seconds);
        }
        if let Ok(mut m) = self.requests.lock() {
            *m.entry((method.to_string(), route.to_string(), status)).or_default() += 1;
        }
    }

    /// The exposition: the counters, the histograms and `gauges`.
    pub fn render(&self, gauges: &Gauges) -> String {
        let mut out = String::new();
        let w = &mut out;
        header(w, "arbiter_claims_total", "counter", "Units of work claimed.");
        let _ = writeln!(w, "arbiter_claims_total {}", self.claims.load(Ordering::Relaxed));

        header(w, "arbiter_completions_total", "counter", "Attempts reported, by outcome.");
        let completions = self.completions.lock().map(|m| m.clone()).unwrap_or_default();
        for how in [Completion::Succeeded, Completion::Failed, Completion::Released] {
            let n = completions.get(&how).copied().unwrap_or(0);
            let _ = writeln!(w, "arbiter_completions_total{{outcome=\"{}\"}} {n}", how.as_str());
        }

        header(w, "arbiter_lease_expiries_total", "counter", "Leases that expired and were taken back.");
        let _ = writeln!(w, "arbiter_lease_expiries_total {}", self.lease_expiries.load(Ordering::Relaxed));

        header(w, "arbiter_tasks", "gauge", "Tasks by plan and status.");
        let mut depth: BTreeMap<&str, u64> = BTreeMap::new();
        for ((plan, status), n) in &gauges.tasks {
            let _ = writeln!(w, "arbiter_tasks{{plan=\"{}\",status=\"{}\"}} {n}", escape(plan), escape(status));
            *depth.entry(status).or_default() += n;
        }
        header(w, "arbiter_queue_depth", "gauge", "Tasks of every plan by status.");
        for (status, n) in depth {
            let _ = writeln!(w, "arbiter_queue_depth{{status=\"{}\"}} {n}", escape(status));
        }

        header(w, "arbiter_workers_registered", "gauge", "Workers with a valid token.");
        let _ = writeln!(w, "arbiter_workers_registered {}", gauges.workers_registered);
        header(w, "arbiter_workers_connected", "gauge", "Workers seen within two lease lengths.");
        let _ = writeln!(w, "arbiter_workers_connected {}", gauges.workers_connected);

        header(w, "arbiter_http_requests_total", "counter", "HTTP requests answered, by method, route and status.");
        let requests = self.requests.lock().map(|m| m.clone()).unwrap_or_default();
        for ((method, route, status), n) in &requests {
            let _ = writeln!(
                w,
                "arbiter_http_requests_total{{method=\"{}\",route=\"{}\",status=\"{status}\"}} {n}",
                escape(method),
                escape(route)
            );
        }

        header(
            w,
            "arbiter_http_request_duration_seconds",
            "histogram",
            "Time from a request to its response (headers), by method and route.",
        );
        let latency = self.latency.lock().map(|m| m.clone()).unwrap_or_default();
        for ((method, route), h) in &latency {
            let labels = format!("method=\"{}\",route=\"{}\"", escape(method), escape(route));
            let mut cumulative = 0;
            for (i, bound) in BUCKETS.iter().enumerate() {
                cumulative += h.buckets.get(i).copied().unwrap_or(0);
                let _ =
                    writeln!(w, "arbiter_http_request_duration_seconds_bucket{{{labels},le=\"{bound}\"}} {cumulative}");
            }
            let _ = writeln!(w, "arbiter_http_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}", h.count);
            let _ = writeln!(w, "arbiter_http_request_duration_seconds_sum{{{labels}}} {}", h.sum);
            let _ = writeln!(w, "arbiter_http_request_duration_seconds_count{{{labels}}} {}", h.count);
        }
        out
    }
}

fn header(w: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(w, "# HELP {name} {help}");
    let _ = writeln!(w, "# TYPE {name} {kind}");
}

/// A label value as the text format wants it (`\`, `"` and newlines escaped).
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exposition_has_every_family_and_cumulative_buckets() {
        let m = Metrics::new();
        m.claimed();
        m.claimed();
        m.completed(Completion::Succeeded);
        m.leases_expired(3);
        m.observe_request("GET", "/healthz", 200, 0.001);
        m.observe_request("GET", "/healthz", 200, 0.2);
        let mut g = Gauges { workers_registered: 2, workers_connected: 1, ..Gauges::default() };
        g.tasks.insert(("calc".into(), "ready".into()), 2);
        g.tasks.insert(("other".into(), "ready".into()), 1);
        let text = m.render(&g);
        for line in [
            "arbiter_claims_total 2",
            "arbiter_completions_total{outcome=\"succeeded\"} 1",
            "arbiter_completions_total{outcome=\"failed\"} 0",
            "arbiter_lease_expiries_total 3",
            "arbiter_tasks{plan=\"calc\",status=\"ready\"} 2",
            "arbiter_queue_depth{status=\"ready\"} 3",
            "arbiter_workers_connected 1",
            "arbiter_http_requests_total{method=\"GET\",route=\"/healthz\",status=\"200\"} 2",
            "arbiter_http_request_duration_seconds_bucket{method=\"GET\",route=\"/healthz\",le=\"0.005\"} 1",
            "arbiter_http_request_duration_seconds_bucket{method=\"GET\",route=\"/healthz\",le=\"0.25\"} 2",
            "arbiter_http_request_duration_seconds_bucket{method=\"GET\",route=\"/healthz\",le=\"+Inf\"} 2",
            "arbiter_http_request_duration_seconds_count{method=\"GET\",route=\"/healthz\"} 2",
            "# TYPE arbiter_http_request_duration_seconds histogram",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line}\n{text}");
        }
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
