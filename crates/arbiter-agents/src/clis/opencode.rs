//! OpenCode (`opencode run --format json`): its command line, its per-run config file and
//! directories, and its NDJSON events.
//!
//! Events share an envelope `{type, timestamp, sessionID, part}`: `step_start`, `text`,
//! `tool_use` (once per finished call, with its state and output), `step_finish` (the
//! step's `reason`, `tokens` and `cost`) and `error`. The run succeeded when its last
//! `step_finish` has a reason other than `tool-calls` (the model stopped asking for tools)
//! and no `error` came; a stream without a final step did not finish. The stream names no
//! model.

use serde_json::{Map, Value, json};

use crate::agent::CliAgent;
use crate::event::{AgentEvent, FinalStatus, SessionTracker, StreamParser, excerpt};
use crate::invocation::{ENDPOINT_KEY_VAR, Invocation, InvocationSpec, PromptInput, PromptRoute};
use crate::json_lines::{JsonLines, count, exit_code, non_empty_text, text};
use crate::reported_cost::usd_from_json;
use crate::tool_effects::{effect_events, effect_of};

/// The provider id arbiter's endpoint gets in `opencode.json`.
const PROVIDER_ID: &str = "arbiter";

pub(crate) fn invocation(spec: &InvocationSpec) -> Invocation {
    let mut inv = Invocation::start(CliAgent::OpenCode, spec);
    inv.arg("run");
    match spec.prompt_route() {
        PromptRoute::Argument(prompt) => inv.arg(prompt),
        // `run` appends a piped stdin to the message.
        PromptRoute::File(file) => inv.stdin = PromptInput::File(file.to_path_buf()),
    }
    inv.args(["--format", "json"]);
    let model = match (&spec.endpoint, &spec.model) {
        (Some(_), Some(model)) => Some(format!("{PROVIDER_ID}/{model}")),
        (None, model) => model.clone(),
        (Some(_), None) => None,
    };
    inv.option("-m", model);
    inv.option("--session", spec.resume_session.as_deref());
    inv.args(spec.extra_args.iter().cloned());

    let config_file = "opencode.json";
    inv.set_env("OPENCODE_CONFIG", spec.home_path(config_file));
    // OpenCode keeps config, sessions, auth and caches in the XDG directories; pinning
    // them under agent_home keeps every candidate apart even if the runner passes XDG_*.
    inv.set_env("XDG_CONFIG_HOME", spec.home_path(".config"));
    inv.set_env("XDG_DATA_HOME", spec.home_path(".local/share"));
    inv.set_env("XDG_CACHE_HOME", spec.home_path(".cache"));
    inv.set_env("XDG_STATE_HOME", spec.home_path(".local/state"));
    inv.set_env("OPENCODE_DISABLE_AUTOUPDATE", "1");
    inv.set_env("OPENCODE_DISABLE_LSP_DOWNLOAD", "1");
    // Measured on opencode 1.18.33 against a local endpoint: without these it fetches the
    // models.dev catalogue and installs its default plugins at every start (about 2 s of a
    // 5.5 s run), and could share the session.
    inv.set_env("OPENCODE_DISABLE_MODELS_FETCH", "1");
    inv.set_env("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1");
    inv.set_env("OPENCODE_DISABLE_SHARE", "1");

    // `run` is meant to auto-approve; saying so in the config makes it hold whatever the
    // version's defaults are.
    let mut config = Map::new();
    config.insert("$schema".into(), json!("https://opencode.ai/config.json"));
    config.insert("autoupdate".into(), json!(false));
    config.insert("permission".into(), json!({"edit": "allow", "bash": "allow", "webfetch": "allow"}));
    if let Some(endpoint) = &spec.endpoint {
        let mut options = Map::new();
        options.insert("baseURL".into(), json!(endpoint.openai_base_url()));
        if endpoint.key_env.is_some() {
            // OpenCode substitutes `{env:NAME}` when it loads the config: the file holds
            // only the variable's name.
            options.insert("apiKey".into(), json!(format!("{{env:{ENDPOINT_KEY_VAR}}}")));
            inv.endpoint_key(endpoint, ENDPOINT_KEY_VAR, false);
        }
        let models = spec.model.as_ref().map_or_else(|| json!({}), |m| json!({ m.as_str(): {} }));
        let provider =
            json!({"npm": "@ai-sdk/openai-compatible", "name": PROVIDER_ID, "options": options, "models": models});
        config.insert("provider".into(), json!({ PROVIDER_ID: provider }));
    }
    inv.file(config_file, format!("{:#}\n", Value::Object(config)));
    inv
}

#[derive(Default)]
pub(crate) struct Parser {
    lines: JsonLines,
    session: SessionTracker,
    /// Text of the step in progress: the run's answer is its last step's text.
    step_text: Vec<String>,
    /// Reason and text of the last finished step.
    last_step: Option<(String, String)>,
    error: Option<String>,
}

impl Parser {
    fn tool_use(part: &Value, events: &mut Vec<AgentEvent>) {
        let id = text(part, "/callID").map(str::to_string);
        let name = text(part, "/tool").unwrap_or_default();
        let input = part.pointer("/state/input").cloned().unwrap_or(Value::Null);
        let is_error = text(part, "/state/status") == Some("error");
        let output = non_empty_text(part, "/state/output")
            .or_else(|| non_empty_text(part, "/state/error"))
            .unwrap_or_default()
            .to_string();
        let effect = effect_of(name, &input);
        events.push(AgentEvent::ToolCall { id: id.clone(), name: name.to_string(), input });
        events.push(AgentEvent::ToolResult { id, is_error, excerpt: excerpt(&output) });
        if let Some(effect) = effect {
            events.extend(effect_events(effect, is_error, &output, exit_code(part, "/state/metadata/exit")));
        }
    }

    fn step_finish(&mut self, part: &Value, events: &mut Vec<AgentEvent>) {
        let cache_read = count(part, "/tokens/cache/read");
        // OpenCode's `input` leaves out cache reads and writes; reasoning is billed as output.
        events.push(AgentEvent::Usage {
            input_tokens: count(part, "/tokens/input")
                .saturating_add(cache_read)
                .saturating_add(count(part, "/tokens/cache/write")),
            output_tokens: count(part, "/tokens/output").saturating_add(count(part, "/tokens/reasoning")),
            cached_tokens: cache_read,
            model: None,
        });
        if let Some(usd) = part.get("cost").and_then(usd_from_json) {
            events.push(AgentEvent::Cost { usd });
        }
        let reason = text(part, "/reason").unwrap_or_default().to_string();
        self.last_step = Some((reason, std::mem::take(&mut self.step_text).join("\n")));
    }
}

impl StreamParser for Parser {
    fn line(&mut self, line: &str) -> Vec<AgentEvent> {
        let obj = match self.lines.object(line) {
            Ok(obj) => obj,
            Err(events) => return events,
        };
        let mut events: Vec<AgentEvent> = self.session.see(text(&obj, "/sessionID")).into_iter().collect();
        let part = obj.get("part").unwrap_or(&Value::Null);
        match text(&obj, "/type") {
            Some("step_start") => self.step_text.clear(),
            Some("text") => {
                if let Some(t) = text(part, "/text").filter(|t| !t.trim().is_empty()) {
                    self.step_text.push(t.to_string());
                    events.push(AgentEvent::Message { text: t.to_string() });
                }
            }
            Some("tool_use") => Self::tool_use(part, &mut events),
            Some("step_finish") => self.step_finish(part, &mut events),
            Some("error") => {
                let message = non_empty_text(&obj, "/error/data/message")
                    .or_else(|| non_empty_text(&obj, "/error/message"))
                    .or_else(|| non_empty_text(&obj, "/error/name"))
                    .or_else(|| non_empty_text(&obj, "/message"))
                    .map_or_else(|| obj.get("error").map_or_else(|| obj.to_string(), Value::to_string), str::to_string);
                self.error.get_or_insert_with(|| message.clone());
                events.push(AgentEvent::Error { message, fatal: true });
            }
            _ => {}
        }
        events
    }

    fn finish(&mut self) -> Vec<AgentEvent> {
        let (status, text) = match (&self.error, &self.last_step) {
            (Some(message), _) => (FinalStatus::Error { message: message.clone() }, None),
            // Still asking for tools: the run was cut off between steps.
            (None, Some((reason, _))) if reason == "tool-calls" => return Vec::new(),
            (None, Some((reason, _))) if reason == "error" => {
                (FinalStatus::Error { message: "the last step finished with reason 'error'".into() }, None)
            }
            (None, Some((_, text))) => (FinalStatus::Success, Some(text.clone()).filter(|t| !t.is_empty())),
            (None, None) => return Vec::new(),
        };
        vec![AgentEvent::Final { status, text }]
    }
}
