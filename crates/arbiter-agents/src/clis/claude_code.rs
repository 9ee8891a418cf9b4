//! Claude Code (`claude -p`): its headless command line and its `stream-json` output.
//!
//! Output lines: `system` (subtype `init`: session id, model), `assistant` (a full
//! Messages-API message: text and `tool_use` blocks, per-message `usage`), `user`
//! (`tool_result` blocks) and the terminal `result` (subtype, `is_error`, cumulative
//! `usage`, `total_cost_usd`). Success is a `result` with `is_error: false`: an API error
//! ends with `subtype: "success"` *and* `is_error: true`, so the subtype alone proves
//! nothing, and a stream without a `result` line did not finish.
//!
//! Usage is reported as it arrives, so a runner can charge a budget while the agent works:
//! each response's usage once (a response split over several lines repeats it), and at the
//! `result` line whatever its cumulative totals add to what was already reported.

use std::collections::HashMap;

use serde_json::Value;

use crate::agent::CliAgent;
use crate::event::{AgentEvent, FinalStatus, SessionTracker, StreamParser, excerpt};
use crate::invocation::{Invocation, InvocationSpec, PromptInput, PromptRoute};
use crate::json_lines::{JsonLines, content_text, count, flag, non_empty_text, text};
use crate::reported_cost::usd_from_json;
use crate::tool_effects::PendingEffects;

/// The unattended default: edits are allowed, anything else that needs approval is
/// denied (and listed in `permission_denials`), since nobody can answer a prompt.
const DEFAULT_PERMISSION_MODE: &str = "acceptEdits";

pub(crate) fn invocation(spec: &InvocationSpec) -> Invocation {
    let mut inv = Invocation::start(CliAgent::ClaudeCode, spec);
    inv.arg("-p");
    // The prompt comes right after `-p`: list-valued options such as `--allowedTools` in
    // extra_args would swallow a positional that followed them.
    match spec.prompt_route() {
        PromptRoute::Argument(prompt) => inv.arg(prompt),
        // With no prompt argument, `claude -p` reads the prompt from stdin.
        PromptRoute::File(file) => inv.stdin = PromptInput::File(file.to_path_buf()),
    }
    // stream-json in print mode requires --verbose.
    inv.args(["--output-format", "stream-json", "--verbose"]);
    inv.args(["--permission-mode", spec.permission_mode_or(DEFAULT_PERMISSION_MODE)]);
    inv.option("--max-turns", spec.max_turns);
    inv.option("--model", spec.model.as_deref());
    inv.option("--resume", spec.resume_session.as_deref());
    inv.args(spec.extra_args.iter().cloned());

    inv.set_env("CLAUDE_CONFIG_DIR", spec.home_path(".claude"));
    // No telemetry, update checks or title requests: fewer calls to an endpoint, none to
    // the internet.
    inv.set_env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
    inv.set_env("DISABLE_AUTOUPDATER", "1");
    inv.set_env("DISABLE_TELEMETRY", "1");
    if let Some(endpoint) = &spec.endpoint {
        // Claude Code appends `/v1/messages` itself.
        inv.set_env("ANTHROPIC_BASE_URL", endpoint.server_root());
        // Without any key it asks for a login, which headless mode cannot do.
        inv.endpoint_key(endpoint, "ANTHROPIC_API_KEY", true);
    }
    inv
}

/// Token counts of one Messages-API `usage` object, normalized: input counts every
/// prompt token (Anthropic reports cache reads and writes apart from `input_tokens`).
#[derive(Clone, Copy, Default)]
struct Tokens {
    input: u64,
    output: u64,
    cached: u64,
}

impl Tokens {
    fn of(usage: &Value) -> Tokens {
        let cache_read = count(usage, "/cache_read_input_tokens");
        Tokens {
            input: count(usage, "/input_tokens")
                .saturating_add(count(usage, "/cache_creation_input_tokens"))
                .saturating_add(cache_read),
            output: count(usage, "/output_tokens"),
            cached: cache_read,
        }
    }

    /// Saturating: a nonsense count must not panic the parser.
    fn plus(self, other: Tokens) -> Tokens {
        Tokens {
            input: self.input.saturating_add(other.input),
            output: self.output.saturating_add(other.output),
            cached: self.cached.saturating_add(other.cached),
        }
    }

    /// What `self` has beyond `earlier`, field by field (never negative).
    fn beyond(self, earlier: Tokens) -> Tokens {
        Tokens {
            input: self.input.saturating_sub(earlier.input),
            output: self.output.saturating_sub(earlier.output),
            cached: self.cached.saturating_sub(earlier.cached),
        }
    }

    /// The larger of each field.
    fn max(self, other: Tokens) -> Tokens {
        Tokens {
            input: self.input.max(other.input),
            output: self.output.max(other.output),
            cached: self.cached.max(other.cached),
        }
    }

    fn is_zero(self) -> bool {
        self.input == 0 && self.output == 0 && self.cached == 0
    }
}

#[derive(Default)]
pub(crate) struct Parser {
    lines: JsonLines,
    session: SessionTracker,
    pending: PendingEffects,
    model: Option<String>,
    /// Per-response usage keyed by `message.id`: one response split over several
    /// `assistant` lines repeats its usage, which must count once.
    usage_by_message: HashMap<String, Tokens>,
    /// The usage reported so far (the sum of the `Usage` events emitted).
    reported: Tokens,
}

impl Parser {
    fn usage_event(&self, tokens: Tokens) -> AgentEvent {
        AgentEvent::Usage {
            input_tokens: tokens.input,
            output_tokens: tokens.output,
            cached_tokens: tokens.cached,
            model: self.model.clone(),
        }
    }

    fn assistant(&mut self, line: &Value, events: &mut Vec<AgentEvent>) {
        let Some(message) = line.get("message") else { return };
        if self.model.is_none() {
            self.model = non_empty_text(message, "/model").map(str::to_string);
        }
        if let Some(usage) = message.get("usage") {
            // A response without an id cannot be matched with its other lines: its own key.
            let key =
                text(message, "/id").map_or_else(|| format!("unnamed {}", self.usage_by_message.len()), str::to_string);
            // A later line of the same response carries the same or a more complete count:
            // only what it adds is new.
            let seen = self.usage_by_message.get(&key).copied().unwrap_or_default();
            let now = Tokens::of(usage).max(seen);
            self.usage_by_message.insert(key, now);
            let added = now.beyond(seen);
            if !added.is_zero() {
                self.reported = self.reported.plus(added);
                events.push(self.usage_event(added));
            }
        }
        for block in message.get("content").and_then(Value::as_array).into_iter().flatten() {
            match text(block, "/type") {
                Some("text") => {
                    if let Some(t) = text(block, "/text").filter(|t| !t.trim().is_empty()) {
                        events.push(AgentEvent::Message { text: t.to_string() });
                    }
                }
                Some("tool_use") => {
                    let id = text(block, "/id");
                    let name = text(block, "/name").unwrap_or_default();
                    let input = block.get("input").cloned().unwrap_or(Value::Null);
                    self.pending.call(id, name, &input);
                    events.push(AgentEvent::ToolCall { id: id.map(str::to_string), name: name.to_string(), input });
                }
                _ => {}
            }
        }
    }

    fn user(&mut self, line: &Value, events: &mut Vec<AgentEvent>) {
        let blocks = line.pointer("/message/content").and_then(Value::as_array).into_iter().flatten();
        for block in blocks.filter(|b| text(b, "/type") == Some("tool_result")) {
            let id = text(block, "/tool_use_id");
            let is_error = flag(block, "/is_error").unwrap_or(false);
            let output = content_text(block.get("content").unwrap_or(&Value::Null));
            events.push(AgentEvent::ToolResult { id: id.map(str::to_string), is_error, excerpt: excerpt(&output) });
            events.extend(self.pending.result(id, is_error, &output, bash_exit_code(is_error, &output)));
        }
    }

    fn result(&mut self, line: &Value, events: &mut Vec<AgentEvent>) {
        events.extend(self.session.see(text(line, "/session_id")));
        // The cumulative totals are authoritative: report what they add to the responses'
        // usage already reported (always one event, so a run whose result says 0 tokens
        // has reported its usage).
        let total = line.get("usage").map_or(self.reported, Tokens::of);
        let added = total.beyond(self.reported);
        self.reported = self.reported.plus(added);
        events.push(self.usage_event(added));
        if let Some(usd) = line.get("total_cost_usd").and_then(usd_from_json) {
            events.push(AgentEvent::Cost { usd });
        }
        let final_text = non_empty_text(line, "/result").map(str::to_string);
        events.push(AgentEvent::Final { status: result_status(line), text: final_text });
    }
}

/// The verdict of a `result` line.
fn result_status(line: &Value) -> FinalStatus {
    let subtype = text(line, "/subtype").unwrap_or_default();
    if subtype == "error_max_turns" {
        return FinalStatus::MaxTurns;
    }
    if subtype.starts_with("error_max_budget") {
        return FinalStatus::BudgetExceeded;
    }
    // A missing `is_error` is trusted only next to an explicit success subtype.
    let is_error = flag(line, "/is_error").unwrap_or(subtype != "success") || subtype.starts_with("error");
    if !is_error {
        return FinalStatus::Success;
    }
    let errors: Vec<&str> =
        line.get("errors").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let message = if !errors.is_empty() {
        errors.join("; ")
    } else if let Some(result) = non_empty_text(line, "/result") {
        result.to_string()
    } else if let Some(status) = line.get("api_error_status").filter(|s| !s.is_null()) {
        format!("API error {status}")
    } else {
        format!("claude reported an error (subtype '{subtype}')")
    };
    FinalStatus::Error { message }
}

/// Claude Code's Bash tool reports success without a code and a failure as an error
/// result starting `Exit code N` (a denied command has no code).
fn bash_exit_code(is_error: bool, output: &str) -> Option<i32> {
    if !is_error {
        return Some(0);
    }
    let rest = output.trim_start().strip_prefix("Exit code ")?;
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit() || *c == '-').collect();
    digits.parse().ok()
}

impl StreamParser for Parser {
    fn line(&mut self, line: &str) -> Vec<AgentEvent> {
        let obj = match self.lines.object(line) {
            Ok(obj) => obj,
            Err(events) => return events,
        };
        let mut events = Vec::new();
        match text(&obj, "/type") {
            Some("system") if text(&obj, "/subtype") == Some("init") => {
                events.extend(self.session.see(text(&obj, "/session_id")));
                if let Some(model) = non_empty_text(&obj, "/model") {
                    self.model = Some(model.to_string());
                }
            }
            Some("assistant") => self.assistant(&obj, &mut events),
            Some("user") => self.user(&obj, &mut events),
            Some("result") => self.result(&obj, &mut events),
            // An API error surfaced mid-run; the `result` line that follows decides.
            Some("error") => {
                let message = non_empty_text(&obj, "/error/message")
                    .or_else(|| non_empty_text(&obj, "/message"))
                    .map_or_else(|| obj.to_string(), str::to_string);
                events.push(AgentEvent::Error { message, fatal: false });
            }
            _ => {}
        }
        events
    }

    fn finish(&mut self) -> Vec<AgentEvent> {
        // Usage was reported as it arrived; without a result line the deduplicated
        // per-response usage is all there is.
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bash_exit_codes() {
        assert_eq!(bash_exit_code(false, "ok"), Some(0));
        assert_eq!(bash_exit_code(true, "Exit code 2\nboom"), Some(2));
        assert_eq!(bash_exit_code(true, "This command requires approval"), None);
    }

    #[test]
    fn result_subtypes() {
        let status = |v: Value| result_status(&v);
        assert_eq!(status(serde_json::json!({"subtype": "success", "is_error": false})), FinalStatus::Success);
        assert_eq!(status(serde_json::json!({"subtype": "error_max_turns", "is_error": true})), FinalStatus::MaxTurns);
        assert_eq!(status(serde_json::json!({"subtype": "error_max_budget_usd"})), FinalStatus::BudgetExceeded);
        assert_eq!(
            status(serde_json::json!({"subtype": "error_during_execution", "is_error": false})),
            FinalStatus::Error { message: "claude reported an error (subtype 'error_during_execution')".into() }
        );
        assert_eq!(
            status(serde_json::json!({"subtype": "mystery"})),
            FinalStatus::Error { message: "claude reported an error (subtype 'mystery')".into() }
        );
        assert_eq!(
            status(serde_json::json!({"subtype": "success", "is_error": true, "api_error_status": 529})),
            FinalStatus::Error { message: "API error 529".into() }
        );
    }
}
