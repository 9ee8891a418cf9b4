//! Gemini CLI (`gemini -p --output-format stream-json`): its command line, settings file
//! and JSONL events.
//!
//! Events: `init` (session id, model), `message` (assistant text arrives as `delta`
//! chunks, concatenated here into one message), `tool_use`, `tool_result`, `error`
//! (non-fatal warnings) and the terminal `result` (`status`, `stats` tokens). Lines that
//! are not JSON (a YOLO banner, rate-limit notices) appear on stdout and are skipped. The
//! exit code adds two verdicts (see `ending`): 53 = turn limit, 42 = input error.

use serde_json::{Map, Value, json};

use crate::agent::CliAgent;
use crate::event::{AgentEvent, FinalStatus, SessionTracker, StreamParser, excerpt};
use crate::invocation::{Invocation, InvocationSpec, PromptInput, PromptRoute};
use crate::json_lines::{JsonLines, count, flag, non_empty_text, text};
use crate::tool_effects::PendingEffects;

/// Approve every tool call: nobody is there to answer.
const DEFAULT_APPROVAL_MODE: &str = "yolo";

pub(crate) fn invocation(spec: &InvocationSpec) -> Invocation {
    let mut inv = Invocation::start(CliAgent::Gemini, spec);
    match spec.prompt_route() {
        PromptRoute::Argument(prompt) => inv.args(["-p", prompt]),
        // With a piped stdin and no -p, gemini runs headless on stdin's text.
        PromptRoute::File(file) => inv.stdin = PromptInput::File(file.to_path_buf()),
    }
    inv.args(["--output-format", "stream-json"]);
    inv.args(["--approval-mode", spec.permission_mode_or(DEFAULT_APPROVAL_MODE)]);
    inv.option("-m", spec.model.as_deref());
    inv.option("--resume", spec.resume_session.as_deref());
    inv.args(spec.extra_args.iter().cloned());

    // In an untrusted folder gemini forces the approval mode back to `default`.
    inv.set_env("GEMINI_CLI_TRUST_WORKSPACE", "true");
    if let Some(endpoint) = &spec.endpoint {
        // Gemini appends `/v1beta/models/...` itself.
        inv.set_env("GOOGLE_GEMINI_BASE_URL", endpoint.server_root());
        inv.endpoint_key(endpoint, "GEMINI_API_KEY", true);
    }
    // `$HOME/.gemini/settings.json`: no usage statistics, API-key authentication, and the
    // turn limit (gemini has no flag for it; exceeding it exits 53). A fresh home has no
    // login, and gemini 0.61 refuses to start without a selected auth type even when
    // GEMINI_API_KEY is set ("Invalid auth method selected", exit 41).
    let mut settings = Map::new();
    settings.insert("privacy".into(), json!({"usageStatisticsEnabled": false}));
    settings.insert("security".into(), json!({"auth": {"selectedType": "gemini-api-key"}}));
    if let Some(turns) = spec.max_turns {
        settings.insert("model".into(), json!({"maxSessionTurns": turns}));
    }
    inv.file(".gemini/settings.json", format!("{:#}\n", Value::Object(settings)));
    inv
}

#[derive(Default)]
pub(crate) struct Parser {
    lines: JsonLines,
    session: SessionTracker,
    pending: PendingEffects,
    model: Option<String>,
    /// Assistant delta chunks not yet emitted as one message.
    assistant_text: String,
    last_message: Option<String>,
}

impl Parser {
    /// Emits the buffered assistant text as one message.
    fn flush_message(&mut self, events: &mut Vec<AgentEvent>) {
        let text = std::mem::take(&mut self.assistant_text);
        if !text.trim().is_empty() {
            self.last_message = Some(text.clone());
            events.push(AgentEvent::Message { text });
        }
    }

    fn result(&mut self, obj: &Value, events: &mut Vec<AgentEvent>) {
        if let Some(stats) = obj.get("stats") {
            // `cached` is the cache-read share of `input_tokens`.
            events.push(AgentEvent::Usage {
                input_tokens: count(stats, "/input_tokens"),
                output_tokens: count(stats, "/output_tokens"),
                cached_tokens: count(stats, "/cached"),
                model: self.model.clone(),
            });
        }
        let status = match text(obj, "/status") {
            Some("success") => FinalStatus::Success,
            other => {
                let message = non_empty_text(obj, "/error/message")
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("gemini ended with status '{}'", other.unwrap_or("none")));
                FinalStatus::Error { message }
            }
        };
        events.push(AgentEvent::Final { status, text: self.last_message.clone() });
    }
}

impl StreamParser for Parser {
    fn line(&mut self, line: &str) -> Vec<AgentEvent> {
        let obj = match self.lines.object(line) {
            Ok(obj) => obj,
            Err(events) => return events,
        };
        let mut events = Vec::new();
        let kind = text(&obj, "/type");
        if kind == Some("message") {
            if text(&obj, "/role") == Some("assistant") {
                let chunk = text(&obj, "/content").unwrap_or_default();
                let is_delta = flag(&obj, "/delta").unwrap_or(false);
                if !is_delta {
                    // A whole message: whatever was buffered belongs to an earlier one.
                    self.flush_message(&mut events);
                }
                self.assistant_text.push_str(chunk);
                if !is_delta {
                    self.flush_message(&mut events);
                }
            }
            return events;
        }
        self.flush_message(&mut events);
        match kind {
            Some("init") => {
                events.extend(self.session.see(text(&obj, "/session_id")));
                self.model = non_empty_text(&obj, "/model").map(str::to_string);
            }
            Some("tool_use") => {
                let id = text(&obj, "/tool_id");
                let name = text(&obj, "/tool_name").unwrap_or_default();
                let input = obj.get("parameters").cloned().unwrap_or(Value::Null);
                self.pending.call(id, name, &input);
                events.push(AgentEvent::ToolCall { id: id.map(str::to_string), name: name.to_string(), input });
            }
            Some("tool_result") => {
                let id = text(&obj, "/tool_id");
                let is_error = text(&obj, "/status") != Some("success");
                let output = non_empty_text(&obj, "/output")
                    .or_else(|| non_empty_text(&obj, "/error/message"))
                    .unwrap_or_default()
                    .to_string();
                events.push(AgentEvent::ToolResult { id: id.map(str::to_string), is_error, excerpt: excerpt(&output) });
                // The shell tool's status says it ran, not how the command exited.
                events.extend(self.pending.result(id, is_error, &output, None));
            }
            Some("error") => {
                let message = non_empty_text(&obj, "/message").unwrap_or("gemini reported an error").to_string();
                events.push(AgentEvent::Error { message, fatal: false });
            }
            Some("result") => self.result(&obj, &mut events),
            _ => {}
        }
        events
    }

    fn finish(&mut self) -> Vec<AgentEvent> {
        let mut events = Vec::new();
        self.flush_message(&mut events);
        events
    }
}
