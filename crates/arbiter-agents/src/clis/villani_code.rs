//! villani-code (`villani-code run`): its command line and its text output.
//!
//! From `villani_code/cli.py` (mmprotest/villani-code): `run INSTRUCTION --base-url URL
//! --model M [--provider anthropic|openai] [--api-key K] [--auto-approve] [--no-stream]`.
//! Limits this module works around, and documents:
//! - Keys: the `openai` provider falls back to `OPENAI_API_KEY` when `--api-key` is absent,
//!   so the key travels in the environment, never on argv (villani-ops passed it on argv,
//!   visible in every process listing). The `anthropic` provider reads no key at all (its
//!   client is built from the base URL alone), so it only works with keyless endpoints;
//!   `validate` rejects an Anthropic endpoint with a key.
//! - Base URL and model are required options; there is no variable for either.
//! - The instruction is positional only (no task-file option), so a prompt too long for
//!   the command line is replaced by a short instruction to read the prompt file.
//! - No resume and no turn limit.
//!
//! Output: with `--auto-approve` a first line `Auto-approval: ON`, then the text blocks of
//! the final response printed through Rich. Nothing structured; the exit code (0 unless an
//! exception escaped) is the verdict, and the printed text is the final message. What it
//! did comes from its own debug trace (`--debug trace`, into the agent home), read once it
//! exits (see `villani_trace`).

use crate::agent::CliAgent;
use crate::event::{AgentEvent, StreamParser};
use crate::invocation::{EndpointProvider, Invocation, InvocationSpec, PromptRoute};

/// Rich wraps at 80 columns when stdout is not a terminal; a wide console keeps the
/// final text's lines intact.
const CONSOLE_COLUMNS: &str = "10000";

const AUTO_APPROVAL_BANNER: &str = "Auto-approval: ON";

pub(crate) fn invocation(spec: &InvocationSpec) -> Invocation {
    let mut inv = Invocation::start(CliAgent::VillaniCode, spec);
    inv.arg("run");
    if let Some(endpoint) = &spec.endpoint {
        let (provider, base_url) = match endpoint.provider {
            // Its Anthropic client appends `/v1/messages` to the base URL.
            EndpointProvider::Anthropic => ("anthropic", endpoint.server_root()),
            _ => ("openai", endpoint.openai_base_url()),
        };
        inv.args(["--base-url", base_url, "--provider", provider]);
        if endpoint.provider != EndpointProvider::Anthropic {
            inv.endpoint_key(endpoint, "OPENAI_API_KEY", false);
        }
    }
    inv.option("--model", spec.model.as_deref());
    inv.args(["--auto-approve", "--no-stream"]);
    let debug_dir = spec.home_path(super::villani_trace::DEBUG_DIR);
    inv.args(["--debug", "trace", "--debug-dir", debug_dir.as_str()]);
    inv.args(spec.extra_args.iter().cloned());
    // After `--` the instruction is positional even if it starts with a dash.
    inv.arg("--");
    match spec.prompt_route_after_options_end() {
        PromptRoute::Argument(prompt) => inv.arg(prompt),
        PromptRoute::File(file) => inv.arg(format!(
            "Your task is described in the file {}. Read that file first, then carry out the task it describes.",
            file.display()
        )),
    }

    inv.set_env("NO_COLOR", "1");
    inv.set_env("TERM", "dumb");
    inv.set_env("COLUMNS", CONSOLE_COLUMNS);
    inv
}

#[derive(Default)]
pub(crate) struct Parser {
    text: Vec<String>,
}

impl StreamParser for Parser {
    fn line(&mut self, line: &str) -> Vec<AgentEvent> {
        let line = line.trim_end();
        if !(self.text.is_empty() && line == AUTO_APPROVAL_BANNER) {
            self.text.push(line.to_string());
        }
        Vec::new()
    }

    fn finish(&mut self) -> Vec<AgentEvent> {
        let text = std::mem::take(&mut self.text).join("\n");
        let text = text.trim();
        if text.is_empty() { Vec::new() } else { vec![AgentEvent::Message { text: text.to_string() }] }
    }
}
