//! Codex CLI (`codex exec --json`): its command line, its per-run `CODEX_HOME`, and its
//! JSONL events.
//!
//! Events: `thread.started` (the session), `turn.started`, `item.completed` (agent
//! messages, commands with exit codes, file changes with absolute paths, tool calls, and
//! non-fatal `error` items), `turn.completed` (the turn's usage), `turn.failed` and a
//! top-level `error`. Its exit code reflects protocol health, not the task: it exits 0
//! after a failed turn too, so success is "the last terminal event is `turn.completed`
//! and nothing failed". It reports no cost.

use serde_json::{Value, json};

use crate::agent::CliAgent;
use crate::event::{AgentEvent, FinalStatus, StreamParser, excerpt};
use crate::invocation::{ENDPOINT_KEY_VAR, Invocation, InvocationSpec, PromptInput, PromptRoute};
use crate::json_lines::{JsonLines, count, exit_code, non_empty_text, text};

/// The exec default sandbox is read-only: edits fail and codex still exits 0.
const DEFAULT_SANDBOX: &str = "workspace-write";

/// Inside arbiter's sandbox: Codex's own (bubblewrap, with a lock file in `/tmp`) cannot set
/// itself up there, and arbiter's confines everything Codex starts anyway.
const CONFINED_SANDBOX: &str = "danger-full-access";

/// The provider id arbiter's endpoint gets in Codex's config (a new id: Codex ignores a
/// changed `base_url` on its built-in `openai` provider).
const PROVIDER_ID: &str = "arbiter";

pub(crate) fn invocation(spec: &InvocationSpec) -> Invocation {
    let mut inv = Invocation::start(CliAgent::Codex, spec);
    // `--skip-git-repo-check`: a worktree's `.git` is a file, and the check is the
    // runner's business. No `--ephemeral`: session files (in the per-run CODEX_HOME) are
    // what `resume` needs.
    inv.args(["exec", "--json", "--skip-git-repo-check"]);
    let default = if spec.confined { CONFINED_SANDBOX } else { DEFAULT_SANDBOX };
    inv.args(["--sandbox", spec.permission_mode_or(default)]);
    inv.option("-m", spec.model.as_deref());
    inv.args(spec.extra_args.iter().cloned());
    if let Some(session) = &spec.resume_session {
        inv.args(["resume", session.as_str()]);
    }
    match spec.prompt_route() {
        PromptRoute::Argument(prompt) => inv.arg(prompt),
        // `-` reads the prompt from stdin.
        PromptRoute::File(file) => {
            inv.arg("-");
            inv.stdin = PromptInput::File(file.to_path_buf());
        }
    }
    // Otherwise stdin stays /dev/null: codex waits on an open stdin for extra input.

    inv.set_env("CODEX_HOME", spec.home_path(".codex"));
    // Written even without an endpoint: Codex refuses a CODEX_HOME that does not exist,
    // and the file makes the runner create it.
    let mut config = String::from("# One candidate's Codex configuration; nothing from the user's own applies.\n");
    if let Some(endpoint) = &spec.endpoint {
        // serde_json's string escapes are all valid TOML basic-string escapes.
        let quoted = |s: &str| json!(s).to_string();
        config.push_str(&format!("model_provider = {}\n\n", quoted(PROVIDER_ID)));
        config.push_str(&format!("[model_providers.{PROVIDER_ID}]\n"));
        config.push_str(&format!("name = {}\n", quoted(PROVIDER_ID)));
        config.push_str(&format!("base_url = {}\n", quoted(endpoint.openai_base_url())));
        if endpoint.key_env.is_some() {
            config.push_str(&format!("env_key = {}\n", quoted(ENDPOINT_KEY_VAR)));
        }
        // "chat" is rejected at startup by current Codex.
        config.push_str("wire_api = \"responses\"\n");
        inv.endpoint_key(endpoint, ENDPOINT_KEY_VAR, false);
    }
    inv.file(".codex/config.toml", config);
    inv
}

#[derive(Default)]
pub(crate) struct Parser {
    lines: JsonLines,
    /// The last `turn.completed` / `turn.failed` seen: `true` for completed.
    last_turn_completed: Option<bool>,
    /// The first failure (`turn.failed` or a top-level `error`).
    failure: Option<String>,
    last_message: Option<String>,
}

impl Parser {
    fn item(&mut self, item: &Value, events: &mut Vec<AgentEvent>) {
        let id = text(item, "/id").map(str::to_string);
        let status = text(item, "/status").unwrap_or("completed");
        match text(item, "/type") {
            Some("agent_message") => {
                if let Some(t) = non_empty_text(item, "/text") {
                    self.last_message = Some(t.to_string());
                    events.push(AgentEvent::Message { text: t.to_string() });
                }
            }
            Some("command_execution") => {
                let command = text(item, "/command").unwrap_or_default().to_string();
                let code = exit_code(item, "/exit_code");
                let output = excerpt(text(item, "/aggregated_output").unwrap_or_default());
                let is_error = status != "completed" || code.is_some_and(|c| c != 0);
                events.push(AgentEvent::ToolCall {
                    id: id.clone(),
                    name: "command_execution".into(),
                    input: json!({"command": command}),
                });
                events.push(AgentEvent::ToolResult { id, is_error, excerpt: output.clone() });
                events.push(AgentEvent::Command { command, exit_code: code, output_excerpt: output });
            }
            Some("file_change") => {
                let changes = item.get("changes").cloned().unwrap_or(Value::Null);
                let failed = status == "failed";
                events.push(AgentEvent::ToolCall {
                    id: id.clone(),
                    name: "file_change".into(),
                    input: json!({"changes": changes}),
                });
                events.push(AgentEvent::ToolResult { id, is_error: failed, excerpt: String::new() });
                if !failed {
                    for change in changes.as_array().into_iter().flatten() {
                        if let Some(path) = non_empty_text(change, "/path") {
                            let kind = text(change, "/kind").unwrap_or("update").to_string();
                            events.push(AgentEvent::FileChange { path: path.to_string(), kind });
                        }
                    }
                }
            }
            Some("mcp_tool_call") => {
                let name = format!("{}.{}", text(item, "/server").unwrap_or("mcp"), text(item, "/tool").unwrap_or("?"));
                let input = item.get("arguments").cloned().unwrap_or(Value::Null);
                let error = non_empty_text(item, "/error/message").or_else(|| non_empty_text(item, "/error"));
                let result = item.get("result").map(Value::to_string).unwrap_or_default();
                events.push(AgentEvent::ToolCall { id: id.clone(), name, input });
                events.push(AgentEvent::ToolResult {
                    id,
                    is_error: status == "failed" || error.is_some(),
                    excerpt: excerpt(error.unwrap_or(&result)),
                });
            }
            Some("web_search") => {
                let input = json!({"query": text(item, "/query").unwrap_or_default()});
                events.push(AgentEvent::ToolCall { id, name: "web_search".into(), input });
            }
            // Error items are warnings (e.g. "Model metadata for `x` not found"); the run
            // goes on.
            Some("error") => {
                let message = text(item, "/message").unwrap_or("codex reported an error item").to_string();
                events.push(AgentEvent::Error { message, fatal: false });
            }
            _ => {}
        }
    }

    fn fail(&mut self, message: String, events: &mut Vec<AgentEvent>) {
        self.failure.get_or_insert_with(|| message.clone());
        events.push(AgentEvent::Error { message, fatal: true });
    }
}

impl StreamParser for Parser {
    fn line(&mut self, line: &str) -> Vec<AgentEvent> {
        let obj = match self.lines.object(line) {
            Ok(obj) => obj,
            Err(events) => return events,
        };
        let mut events = Vec::new();
        match text(&obj, "/type") {
            Some("thread.started") => {
                if let Some(id) = non_empty_text(&obj, "/thread_id") {
                    events.push(AgentEvent::Session { id: id.to_string() });
                }
            }
            Some("item.completed") => {
                if let Some(item) = obj.get("item") {
                    self.item(item, &mut events);
                }
            }
            Some("turn.completed") => {
                self.last_turn_completed = Some(true);
                let usage = obj.get("usage").unwrap_or(&Value::Null);
                // Cached input is part of input_tokens in the Responses API.
                events.push(AgentEvent::Usage {
                    input_tokens: count(usage, "/input_tokens"),
                    output_tokens: count(usage, "/output_tokens"),
                    cached_tokens: count(usage, "/cached_input_tokens"),
                    model: None,
                });
            }
            Some("turn.failed") => {
                self.last_turn_completed = Some(false);
                let message = non_empty_text(&obj, "/error/message").unwrap_or("the turn failed").to_string();
                self.fail(message, &mut events);
            }
            Some("error") => {
                let message = non_empty_text(&obj, "/message").unwrap_or("codex reported an error").to_string();
                self.fail(message, &mut events);
            }
            _ => {}
        }
        events
    }

    fn finish(&mut self) -> Vec<AgentEvent> {
        let status = match (&self.failure, self.last_turn_completed) {
            (Some(message), _) => FinalStatus::Error { message: message.clone() },
            (None, Some(true)) => FinalStatus::Success,
            // No turn ended: the stream was cut short; no verdict to report.
            _ => return Vec::new(),
        };
        vec![AgentEvent::Final { status, text: self.last_message.clone() }]
    }
}
