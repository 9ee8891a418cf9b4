//! aider (`aider --message`): its one-shot command line, the price cache that keeps it
//! offline, and the few text lines it prints that say something.
//!
//! aider has no JSON output. What it did is the worktree's diff (judged elsewhere); from
//! its text this reads `Model: <name> with <format> edit format`, one
//! `Tokens: 2.4k sent, 33 received.` per model call (counts rounded by aider to one
//! decimal of k), `Cost: $0.0087 message, $0.0123 session.` (the session figure is the
//! running total; each line reports what it adds, so a runner can charge as it goes),
//! `Applied edit to <file>`, and `litellm.<Kind>Error: ...` lines. An API
//! error that was neither retried nor followed by a completed call is the run's failure,
//! whatever the exit code; otherwise exit 0 is success.

use arbiter_core::money::Usd;
use serde_json::json;

use crate::agent::CliAgent;
use crate::event::{AgentEvent, FinalStatus, StreamParser};
use crate::invocation::{EndpointProvider, Invocation, InvocationSpec, PromptRoute};

/// Unattended and side-effect free in the worktree: answer yes, never commit, plain
/// output, no update check or analytics, no `.gitignore` edit, no repo map and no history
/// files (both would land in the worktree).
const UNATTENDED_FLAGS: &[&str] = &[
    "--yes-always",
    "--no-auto-commits",
    "--no-pretty",
    "--no-stream",
    "--no-show-model-warnings",
    "--no-check-update",
    "--analytics-disable",
    "--no-gitignore",
    "--map-tokens",
    "0",
    "--chat-history-file",
    "/dev/null",
    "--input-history-file",
    "/dev/null",
    // Unknown models default to `whole`, which writes the edit blocks into the file.
    "--edit-format",
    "diff",
];

/// Where aider caches litellm's model price list; it fetches the list from the internet
/// at startup unless this holds a non-empty JSON object (`{}` is refetched).
const PRICE_CACHE: &str = ".aider/caches/model_prices_and_context_window.json";

pub(crate) fn invocation(spec: &InvocationSpec) -> Invocation {
    let mut inv = Invocation::start(CliAgent::Aider, spec);
    let on_endpoint = spec.endpoint.as_ref().filter(|e| e.provider == EndpointProvider::OpenAiCompatible);
    // `openai/` routes litellm through its OpenAI-compatible client; without it aider
    // looks the name up in its own model list.
    let model = match (on_endpoint, &spec.model) {
        (Some(_), Some(m)) if !m.starts_with("openai/") => Some(format!("openai/{m}")),
        (_, m) => m.clone(),
    };
    inv.option("--model", model.as_deref());
    match spec.prompt_route() {
        PromptRoute::Argument(prompt) => inv.args(["--message", prompt]),
        PromptRoute::File(file) => inv.args(["--message-file".to_string(), file.to_string_lossy().into_owned()]),
    }
    inv.args(UNATTENDED_FLAGS.iter().copied());
    inv.args(spec.extra_args.iter().cloned());

    if let Some(endpoint) = on_endpoint {
        inv.set_env("OPENAI_API_BASE", endpoint.openai_base_url());
        // litellm's OpenAI client refuses to send a request without a key.
        inv.endpoint_key(endpoint, "OPENAI_API_KEY", true);
    }
    // An endpoint's model has no price anywhere: zero, so aider stays quiet about cost
    // (arbiter prices tokens itself). Without an endpoint, a placeholder entry keeps the
    // cache non-empty without overriding a real model's price.
    let entry = match (on_endpoint, &model) {
        (Some(_), Some(m)) => m.clone(),
        _ => "arbiter/placeholder".to_string(),
    };
    let prices = json!({ entry: {
        "max_input_tokens": 128000,
        "max_output_tokens": 8192,
        "input_cost_per_token": 0,
        "output_cost_per_token": 0,
        "litellm_provider": "openai",
        "mode": "chat",
    }});
    inv.file(PRICE_CACHE, format!("{prices:#}\n"));
    inv
}

#[derive(Default)]
pub(crate) struct Parser {
    model: Option<String>,
    /// The session total reported so far.
    session_cost: Usd,
    /// The last API error, until a retry or a completed call shows it was not the end.
    unresolved_error: Option<String>,
}

impl Parser {
    fn tokens(&self, report: &str) -> Option<AgentEvent> {
        // `2.4k sent, 1.0k cache write, 2.3k cache hit, 33 received.`, maybe followed by
        // the cost on the same line.
        let report = report.split(" Cost:").next().unwrap_or(report);
        let (mut sent, mut received, mut cache_hit) = (None, None, 0);
        for piece in report.split(", ") {
            let (number, label) = piece.trim().split_once(' ')?;
            match label.trim_end_matches('.') {
                "sent" => sent = Some(aider_count(number)?),
                "received" => received = Some(aider_count(number)?),
                "cache hit" => cache_hit = aider_count(number)?,
                _ => {}
            }
        }
        Some(AgentEvent::Usage {
            input_tokens: sent?,
            output_tokens: received?,
            cached_tokens: cache_hit,
            model: self.model.clone(),
        })
    }
}

/// aider's rounded counts: `33`, `2.4k`, `12k`, `1.5M`, read without floating point.
fn aider_count(text: &str) -> Option<u64> {
    let (digits, scale) = match text.strip_suffix(['k', 'K']) {
        Some(d) => (d, 1_000),
        None => match text.strip_suffix('M') {
            Some(d) => (d, 1_000_000),
            None => (text, 1),
        },
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    if whole.is_empty() || !whole.bytes().all(|b| b.is_ascii_digit()) || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut value = whole.parse::<u64>().ok()?.checked_mul(scale)?;
    let mut unit = scale;
    for digit in fraction.bytes() {
        unit /= 10;
        value = value.checked_add(u64::from(digit - b'0') * unit)?;
    }
    Some(value)
}

/// The session total of `$0.0087 message, $0.0123 session.`.
fn session_cost(report: &str) -> Option<Usd> {
    let piece = report.split(", ").find(|p| p.trim_end_matches('.').ends_with(" session"))?;
    let amount = piece.trim().strip_prefix('$')?.split(' ').next()?;
    Usd::parse(amount)
}

impl StreamParser for Parser {
    fn line(&mut self, line: &str) -> Vec<AgentEvent> {
        let line = line.trim();
        let mut events = Vec::new();
        if let Some(rest) = line.strip_prefix("Model: ").or_else(|| line.strip_prefix("Main model: ")) {
            self.model = rest.split(" with ").next().map(str::to_string).filter(|m| !m.is_empty());
        }
        if let Some(usage) = line.split_once("Tokens: ").and_then(|(_, report)| self.tokens(report)) {
            self.unresolved_error = None;
            events.push(usage);
        }
        if let Some(total) = line.split_once("Cost: ").and_then(|(_, report)| session_cost(report))
            && total > self.session_cost
        {
            events.push(AgentEvent::Cost { usd: Usd::from_pico(total.pico() - self.session_cost.pico()) });
            self.session_cost = total;
        }
        if let Some(path) = line.strip_prefix("Applied edit to ").filter(|p| !p.is_empty()) {
            self.unresolved_error = None;
            events.push(AgentEvent::FileChange { path: path.to_string(), kind: "update".into() });
        }
        if line.starts_with("litellm.") && line.contains("Error") {
            self.unresolved_error = Some(line.to_string());
            events.push(AgentEvent::Error { message: line.to_string(), fatal: false });
        }
        if line.starts_with("Retrying in ") {
            self.unresolved_error = None;
        }
        events
    }

    fn finish(&mut self) -> Vec<AgentEvent> {
        match self.unresolved_error.take() {
            Some(message) => vec![AgentEvent::Final { status: FinalStatus::Error { message }, text: None }],
            None => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_with_suffixes() {
        assert_eq!(aider_count("33"), Some(33));
        assert_eq!(aider_count("2.4k"), Some(2400));
        assert_eq!(aider_count("12k"), Some(12_000));
        assert_eq!(aider_count("1.25M"), Some(1_250_000));
        assert_eq!(aider_count("k"), None);
        assert_eq!(aider_count("2.x"), None);
        assert_eq!(aider_count("-3"), None);
    }

    #[test]
    fn session_cost_is_the_total() {
        assert_eq!(session_cost("$0.0087 message, $0.0123 session."), Usd::parse("0.0123"));
        assert_eq!(session_cost("$0.0087 message"), None);
    }
}
