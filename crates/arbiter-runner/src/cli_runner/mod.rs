//! Agent CLIs as runners: Claude Code, Codex, Gemini CLI, aider, OpenCode and villani-code
//! run unattended in a candidate's worktree.
//!
//! `arbiter-agents` says how to invoke each CLI and how to read its output; this module
//! does the effects. For one candidate it:
//! - fills the candidate's agent home (`HOME`, `CLAUDE_CONFIG_DIR`, `CODEX_HOME`, `TMPDIR`,
//!   ...; a directory of its workspace, outside the worktree so nothing the CLI writes there
//!   can become part of the patch) with the CLI's config files, and empties it afterwards;
//! - builds the child's environment from the allowlist, the invocation's own variables and
//!   the keys (the backend's key, copied into the variable the CLI reads; never on argv,
//!   never in a file arbiter writes);
//! - runs the program in the candidate's sandbox, in its own process group with the run's
//!   timeout and stop token, its
//!   output going to `stdout.log` / `stderr.log`, and tails `stdout.log` while it runs:
//!   every complete line goes through the CLI's parser, its normalized events are appended,
//!   redacted, to `transcript.jsonl`, and the budget is charged as soon as usage arrives;
//! - turns the CLI's own verdict into the candidate's outcome: a CLI that exits 0 after a
//!   failed turn is a failed candidate, a turn limit is `limit_reached`;
//! - costs the run: the CLI's own cost where it reports one, else tokens × the backend's
//!   price, else `unpriced` (never $0), and records all of it in `runner_summary.json`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use arbiter_agents::{CliAgent, EndpointProvider, EndpointSpec, Invocation, InvocationError, InvocationSpec, validate};
use arbiter_core::money::Usd;
use arbiter_core::settings::AgentCliSpec;
use arbiter_llm::{Endpoint, Provider};
use tokio_util::sync::CancellationToken;

pub use arbiter_agents::CliAgent as Cli;

use crate::agent::AgentContext;
use crate::process::{self, ProgramCommand, Stdin};

mod run;

/// The name under which the runner holds the backend's key when it asks `arbiter-agents`
/// for an invocation. It is never set in any environment: the runner resolves it to the
/// key itself when it copies the key into the variable the CLI reads.
const BACKEND_KEY: &str = "ARBITER_BACKEND_KEY";

/// How long `arbiter runners` waits for a CLI to print its version.
pub const VERSION_TIMEOUT: Duration = Duration::from_secs(15);

/// An agent CLI as a runner.
pub struct CliRunner {
    pub(super) name: String,
    pub(super) agent: CliAgent,
    pub(super) spec: AgentCliSpec,
    /// The backend the CLI is pointed at (key resolved), or `None`: its own provider.
    pub(super) endpoint: Option<Endpoint>,
}

impl CliRunner {
    /// The runner `spec` describes, pointed at `endpoint` when there is one; an error with
    /// the fix when the CLI cannot run that way (an unknown CLI, a backend protocol it does
    /// not speak, a required option missing).
    pub fn new(name: &str, spec: &AgentCliSpec, endpoint: Option<Endpoint>) -> Result<Self, String> {
        let agent = CliAgent::parse(&spec.cli).ok_or_else(|| {
            let known: Vec<&str> = CliAgent::ALL.iter().map(|a| a.name()).collect();
            format!("unknown agent CLI '{}': use one of {}", spec.cli, known.join(", "))
        })?;
        let runner = CliRunner { name: name.to_string(), agent, spec: spec.clone(), endpoint };
        // The paths are placeholders: validation only needs them absolute.
        let probe = runner.invocation_spec(String::from("task"), "/prompt.md".into(), "/agent-home".into(), None);
        validate(agent, &probe).map_err(|e| runner.explain(&e))?;
        Ok(runner)
    }

    pub fn agent(&self) -> CliAgent {
        self.agent
    }

    /// The program as configured: `binary`, else the CLI's usual name.
    pub fn program(&self) -> &str {
        self.spec.binary.as_deref().unwrap_or(self.agent.default_binary())
    }

    /// The backend the CLI is pointed at.
    pub fn backend(&self) -> Option<&str> {
        self.endpoint.as_ref().map(|e| e.name.as_str())
    }

    /// The model asked for: the runner's `model`, else the backend's.
    pub fn model(&self) -> Option<String> {
        self.spec.model.clone().or_else(|| self.endpoint.as_ref().map(|e| e.model.clone()))
    }

    fn endpoint_spec(&self) -> Option<EndpointSpec> {
        let e = self.endpoint.as_ref()?;
        Some(EndpointSpec {
            base_url: e.base_url.clone(),
            key_env: e.api_key.as_ref().map(|_| BACKEND_KEY.to_string()),
            provider: endpoint_provider(self.agent, e.provider),
        })
    }

    pub(super) fn invocation_spec(
        &self,
        prompt: String,
        prompt_file: PathBuf,
        agent_home: PathBuf,
        resume_session: Option<String>,
    ) -> InvocationSpec {
        InvocationSpec {
            binary: self.spec.binary.clone(),
            prompt,
            prompt_file,
            model: self.model(),
            max_turns: self.spec.max_turns,
            permission_mode: self.spec.permission_mode.clone(),
            extra_args: self.spec.extra_args.clone(),
            resume_session: resume_session.filter(|_| self.agent.resume_supported()),
            endpoint: self.endpoint_spec(),
            agent_home,
            confined: false,
        }
    }

    /// A validation error with the fix, in the runner's terms.
    pub(super) fn explain(&self, e: &InvocationError) -> String {
        let table = format!("[runners.{}]", self.name);
        match e {
            InvocationError::EndpointUnsupported { agent, .. } => {
                let backend = self.endpoint.as_ref().map_or("?", |b| b.name.as_str());
                let provider = self.endpoint.as_ref().map_or("?", |b| b.provider.as_str());
                let speaks = speaks(*agent);
                format!(
                    "{agent} cannot use backend '{backend}' ({provider}): it speaks {speaks}; point it at a backend it can use (`backend = \"NAME\"` in {table}, or --backend), or leave the backend out to run it on its own provider"
                )
            }
            InvocationError::EndpointRequired { agent } => format!(
                "{agent} needs a backend (its base URL and model are required options): add `backend = \"NAME\"` to {table} or pass --backend NAME (see `arbiter backend add`)"
            ),
            InvocationError::ModelRequired { agent } => {
                format!("{agent} needs a model on this backend: set `model = \"NAME\"` in {table}")
            }
            InvocationError::BadValue { what, .. } => format!("{e}: fix `{what}` in {table}"),
            InvocationError::BadBaseUrl(_) | InvocationError::BadKeyEnv(_) => {
                format!("{e}: fix the backend with `arbiter backend add`")
            }
            other => other.to_string(),
        }
    }

    /// The child's environment: the allowlist (with the ARBITER_* variables), the
    /// invocation's variables over it, then the keys.
    pub(super) fn child_env(&self, ctx: &AgentContext, inv: &Invocation) -> Vec<(String, String)> {
        let mut env: BTreeMap<String, String> = ctx.env.iter().cloned().collect();
        for (k, v) in &inv.env {
            env.insert(k.clone(), v.clone());
        }
        for (target, source) in &inv.key_env_aliases {
            let value = if source == BACKEND_KEY {
                self.endpoint.as_ref().and_then(|e| e.api_key.clone())
            } else {
                ctx.env.iter().find(|(k, _)| k == source).map(|(_, v)| v.clone())
            };
            if let Some(value) = value {
                env.insert(target.clone(), value);
            }
        }
        env.into_iter().collect()
    }

    /// The price of the backend's tokens, when it has one.
    pub(super) fn prices(&self) -> Option<(Usd, Usd)> {
        let e = self.endpoint.as_ref()?;
        Some((e.input_price?, e.output_price?))
    }
}

/// The wire protocol a CLI uses on a backend of `provider`: Codex speaks only the
/// Responses API, so an OpenAI-style backend is taken to serve `/v1/responses` for it.
fn endpoint_provider(agent: CliAgent, provider: Provider) -> EndpointProvider {
    match provider {
        Provider::Anthropic => EndpointProvider::Anthropic,
        Provider::OpenAi | Provider::OpenAiCompatible if agent == CliAgent::Codex => EndpointProvider::OpenAiResponses,
        Provider::OpenAi | Provider::OpenAiCompatible => EndpointProvider::OpenAiCompatible,
    }
}

/// The backend providers a CLI can be pointed at, in words.
fn speaks(agent: CliAgent) -> String {
    let names: Vec<&str> = agent
        .endpoint_providers()
        .iter()
        .map(|p| match p {
            EndpointProvider::Anthropic => "anthropic",
            EndpointProvider::OpenAiCompatible => "openai / openai-compatible (Chat Completions)",
            EndpointProvider::OpenAiResponses => "openai / openai-compatible serving the Responses API",
            EndpointProvider::Gemini => "the Gemini API (no arbiter backend provider speaks it)",
        })
        .collect();
    names.join(" or ")
}

/// How to install a CLI, for messages.
pub fn install_hint(agent: CliAgent) -> &'static str {
    match agent {
        CliAgent::ClaudeCode => "install it with `npm install -g @anthropic-ai/claude-code`",
        CliAgent::Codex => "install it with `npm install -g @openai/codex`",
        CliAgent::Gemini => "install it with `npm install -g @google/gemini-cli`",
        CliAgent::Aider => "install it with `python3 -m pip install aider-chat` (or pipx)",
        CliAgent::OpenCode => "install it with `npm install -g opencode-ai`",
        CliAgent::VillaniCode => "install it from its repository (mmprotest/villani-code; it is not on PyPI or npm)",
    }
}

/// The first line a CLI prints for its version (`--version`; villani-code has none, so
/// `--help` proves only that it starts, and reports `installed`). Run with an empty home
/// and a short timeout so a probe changes nothing and cannot hang.
pub async fn version(agent: CliAgent, program: &Path) -> Result<String, String> {
    let scratch = tempfile::tempdir().map_err(|e| e.to_string())?;
    let out = scratch.path().join("version.out");
    let err = scratch.path().join("version.err");
    let env = vec![
        ("PATH".to_string(), std::env::var("PATH").unwrap_or_default()),
        ("HOME".to_string(), scratch.path().display().to_string()),
        ("NO_COLOR".to_string(), "1".to_string()),
    ];
    let cmd = ProgramCommand {
        program: program.to_path_buf(),
        args: agent.version_args().iter().map(|a| a.to_string()).collect(),
        stdin: Stdin::Null,
        cwd: scratch.path().to_path_buf(),
        env,
        stdout: out.clone(),
        stderr: err.clone(),
        timeout: VERSION_TIMEOUT,
        jail: None,
    };
    let exit = process::run_program(&cmd, &CancellationToken::new()).await.map_err(|e| e.to_string())?;
    // The version is on stdout; warnings (Codex warns about a temporary home) go to stderr.
    let stdout = std::fs::read_to_string(&out).unwrap_or_default();
    let text = if stdout.trim().is_empty() { std::fs::read_to_string(&err).unwrap_or_default() } else { stdout };
    if exit.timed_out {
        return Err(format!(
            "`{} {}` did not answer within {}s",
            program.display(),
            agent.version_args().join(" "),
            VERSION_TIMEOUT.as_secs()
        ));
    }
    if !exit.success() {
        let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
        return Err(format!("`{} {}` failed ({first})", program.display(), agent.version_args().join(" ")));
    }
    if agent == CliAgent::VillaniCode {
        return Ok("installed (it has no version option)".into());
    }
    Ok(text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("unknown").to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbiter_agents::invocation;

    use crate::agent::AgentRunner;

    fn endpoint(provider: Provider, key: Option<&str>) -> Endpoint {
        let mut e = Endpoint::new("b", provider, "m").with_base_url("http://127.0.0.1:9/v1");
        e.api_key = key.map(str::to_string);
        e
    }

    fn spec(cli: &str) -> AgentCliSpec {
        AgentCliSpec { cli: cli.into(), ..Default::default() }
    }

    #[test]
    fn backends_map_to_the_protocol_each_cli_speaks() {
        assert_eq!(endpoint_provider(CliAgent::Codex, Provider::OpenAiCompatible), EndpointProvider::OpenAiResponses);
        assert_eq!(endpoint_provider(CliAgent::Aider, Provider::OpenAi), EndpointProvider::OpenAiCompatible);
        assert_eq!(endpoint_provider(CliAgent::ClaudeCode, Provider::Anthropic), EndpointProvider::Anthropic);
        assert!(CliRunner::new("claude-code", &spec("claude-code"), Some(endpoint(Provider::Anthropic, None))).is_ok());
        assert!(CliRunner::new("codex", &spec("codex"), Some(endpoint(Provider::OpenAiCompatible, None))).is_ok());
        let e = CliRunner::new("claude-code", &spec("claude-code"), Some(endpoint(Provider::OpenAiCompatible, None)))
            .err()
            .unwrap();
        assert!(e.contains("claude-code cannot use backend 'b' (openai-compatible)"), "{e}");
        assert!(e.contains("it speaks anthropic"), "{e}");
        let e = CliRunner::new("gemini", &spec("gemini"), Some(endpoint(Provider::OpenAi, None))).err().unwrap();
        assert!(e.contains("Gemini API"), "{e}");
        let e = CliRunner::new("villani-code", &spec("villani-code"), None).err().unwrap();
        assert!(e.contains("needs a backend") && e.contains("[runners.villani-code]"), "{e}");
        let e = CliRunner::new("x", &spec("cursor"), None).err().unwrap();
        assert!(e.contains("unknown agent CLI 'cursor'"), "{e}");
        let bad = AgentCliSpec { model: Some("--evil".into()), ..spec("codex") };
        let e = CliRunner::new("codex", &bad, None).err().unwrap();
        assert!(e.contains("fix `model` in [runners.codex]"), "{e}");
    }

    #[test]
    fn the_key_travels_by_alias_never_by_argv() {
        let runner = CliRunner::new(
            "claude-code",
            &spec("claude-code"),
            Some(endpoint(Provider::Anthropic, Some("sk-secret-1"))),
        )
        .unwrap();
        let inv = invocation(CliAgent::ClaudeCode, &runner.invocation_spec("t".into(), "/p".into(), "/h".into(), None));
        assert!(!inv.display_command().contains("sk-secret-1"));
        assert_eq!(inv.key_env_aliases, [("ANTHROPIC_API_KEY".to_string(), BACKEND_KEY.to_string())]);
        assert!(!runner.invocation().contains("sk-secret-1"));
        assert!(runner.invocation().contains("[backend b]"));
        assert_eq!(runner.model().as_deref(), Some("m"), "the backend's model");
        let own =
            CliRunner::new("claude-code", &AgentCliSpec { model: Some("opus".into()), ..spec("claude-code") }, None)
                .unwrap();
        assert_eq!(own.model().as_deref(), Some("opus"));
        assert_eq!(own.program(), "claude");
    }
}
