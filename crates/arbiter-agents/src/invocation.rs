//! One agent run's invocation: what the runner asks for ([`InvocationSpec`]) and what it
//! must execute ([`Invocation`]): program, arguments, standard input, environment, the
//! variables to copy secrets into, and config files to write first.
//!
//! The per-CLI choices (flags, config files, where the prompt goes) live in `clis`; this
//! module owns the rules they share: how a prompt is delivered, how an endpoint URL is
//! normalized, how a key reaches the agent without appearing anywhere it could be logged,
//! and what makes a spec impossible to honour ([`validate`]).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use arbiter_core::command_line::shell_word;
use serde::{Deserialize, Serialize};

use crate::agent::CliAgent;
pub use crate::agent::EndpointProvider;

/// Everything needed to build one invocation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvocationSpec {
    /// `None` = [`CliAgent::default_binary`].
    pub binary: Option<String>,
    /// The clean task prompt.
    pub prompt: String,
    /// Absolute path where the same prompt is already written (for prompts too long for
    /// the command line).
    pub prompt_file: PathBuf,
    pub model: Option<String>,
    /// Claude Code `--max-turns`, Gemini CLI `maxSessionTurns`; the other CLIs have no
    /// turn limit and ignore it.
    pub max_turns: Option<u32>,
    /// Claude Code permission mode (default `acceptEdits`), Gemini CLI approval mode
    /// (default `yolo`), Codex sandbox (default `workspace-write`); ignored by the others,
    /// which run with their own unattended approval flags.
    pub permission_mode: Option<String>,
    /// Appended verbatim (before the prompt where the prompt is positional). Never put a
    /// secret here: arguments are visible to every process on the machine and are logged.
    pub extra_args: Vec<String>,
    /// Continue this session id (see [`CliAgent::resume_supported`]).
    pub resume_session: Option<String>,
    /// Point the CLI at this model endpoint instead of its own provider.
    pub endpoint: Option<EndpointSpec>,
    /// A fresh per-candidate directory the runner creates: `HOME` and the CLI's config
    /// directory point into it, and [`Invocation::files`] are relative to it.
    pub agent_home: PathBuf,
    /// The CLI already runs in arbiter's sandbox (its files and processes confined): a CLI
    /// whose own sandbox cannot run inside another (Codex's needs to write `/tmp`) is asked
    /// to leave sandboxing to arbiter, unless `permission_mode` says otherwise.
    pub confined: bool,
}

/// A model endpoint to point a CLI at.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointSpec {
    /// The base URL as the provider's own SDK takes it: with `/v1` for OpenAI-style
    /// endpoints (`http://127.0.0.1:8080/v1`), the server root for Anthropic and Gemini
    /// (a trailing `/v1` is tolerated and removed).
    pub base_url: String,
    /// The variable (in the runner's environment) holding the endpoint's key; `None` for
    /// an endpoint that takes no key.
    pub key_env: Option<String>,
    pub provider: EndpointProvider,
}

impl EndpointSpec {
    /// The URL for clients that take an OpenAI-style base and append `/chat/completions`
    /// or `/responses` to it.
    pub fn openai_base_url(&self) -> &str {
        self.base_url.trim_end_matches('/')
    }

    /// The server root, for clients that append `/v1/...` themselves.
    pub fn server_root(&self) -> &str {
        let url = self.openai_base_url();
        url.strip_suffix("/v1").unwrap_or(url)
    }
}

/// What the agent's standard input is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PromptInput {
    /// `/dev/null`: some CLIs wait for input on an open stdin.
    Null,
    Text(String),
    /// The runner opens this file as stdin.
    File(PathBuf),
}

/// What the runner executes for one agent run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Invocation {
    pub program: String,
    /// Never contains a secret.
    pub args: Vec<String>,
    pub stdin: PromptInput,
    /// Non-secret variables to set in the child's environment (on top of the runner's
    /// allowlist), e.g. `HOME` = agent_home.
    pub env: Vec<(String, String)>,
    /// `(target, source)`: the runner sets `target` in the child's environment to the value
    /// of `source` in its own, e.g. `("ANTHROPIC_API_KEY", "MY_KEY_VAR")`.
    pub key_env_aliases: Vec<(String, String)>,
    /// Files to write before the start, paths relative to agent_home (parents created).
    pub files: Vec<(PathBuf, String)>,
}

/// Why a spec cannot be honoured by a CLI.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvocationError {
    #[error("{agent} cannot resume a session")]
    ResumeUnsupported { agent: CliAgent },
    #[error("{agent} cannot talk to an endpoint speaking {provider:?}")]
    EndpointUnsupported { agent: CliAgent, provider: EndpointProvider },
    #[error("{agent} needs an endpoint (its base URL is a required option)")]
    EndpointRequired { agent: CliAgent },
    #[error("{agent} needs a model name for this run")]
    ModelRequired { agent: CliAgent },
    #[error("the endpoint base URL '{0}' is not an http:// or https:// URL")]
    BadBaseUrl(String),
    #[error("'{0}' is not an environment variable name")]
    BadKeyEnv(String),
    #[error("{what} '{value}' would be read as an option or is empty")]
    BadValue { what: &'static str, value: String },
    #[error("{what} must be an absolute path, not '{path}'")]
    RelativePath { what: &'static str, path: String },
    #[error(
        "villani-code sends no API key to Anthropic endpoints; use an endpoint without a key or an OpenAI-compatible one"
    )]
    KeyNotDeliverable,
}

/// Checks that `agent` can run `spec` as asked. [`invocation`] never fails and does its
/// best with any spec; call this first to turn a spec the CLI cannot honour into an error
/// instead of a run that fails on its own.
pub fn validate(agent: CliAgent, spec: &InvocationSpec) -> Result<(), InvocationError> {
    for (what, path) in [("prompt_file", &spec.prompt_file), ("agent_home", &spec.agent_home)] {
        if !path.is_absolute() {
            return Err(InvocationError::RelativePath { what, path: path.display().to_string() });
        }
    }
    if let Some(session) = &spec.resume_session {
        if !agent.resume_supported() {
            return Err(InvocationError::ResumeUnsupported { agent });
        }
        check_option_value("resume_session", session)?;
    }
    if let Some(model) = &spec.model {
        check_option_value("model", model)?;
    }
    let Some(endpoint) = &spec.endpoint else {
        return match agent {
            CliAgent::VillaniCode => Err(InvocationError::EndpointRequired { agent }),
            _ => Ok(()),
        };
    };
    if !agent.endpoint_providers().contains(&endpoint.provider) {
        return Err(InvocationError::EndpointUnsupported { agent, provider: endpoint.provider });
    }
    if !(endpoint.base_url.starts_with("http://") || endpoint.base_url.starts_with("https://")) {
        return Err(InvocationError::BadBaseUrl(endpoint.base_url.clone()));
    }
    if let Some(var) = &endpoint.key_env
        && !is_env_name(var)
    {
        return Err(InvocationError::BadKeyEnv(var.clone()));
    }
    // These name the model in their endpoint configuration (`openai/<model>`, the
    // provider's model table, a required `--model`).
    let needs_model = matches!(agent, CliAgent::Aider | CliAgent::OpenCode | CliAgent::VillaniCode);
    if needs_model && spec.model.is_none() {
        return Err(InvocationError::ModelRequired { agent });
    }
    if agent == CliAgent::VillaniCode && endpoint.provider == EndpointProvider::Anthropic && endpoint.key_env.is_some()
    {
        return Err(InvocationError::KeyNotDeliverable);
    }
    Ok(())
}

/// Prompts up to this many bytes may go on the command line; longer ones go through
/// stdin or a file (Linux caps one argument at 128 KiB, and long argv lines are unwieldy
/// in process listings and logs).
pub const INLINE_PROMPT_LIMIT: usize = 16 * 1024;

/// A key value for CLIs that refuse to start without one when the endpoint takes none.
/// It is a constant, not a secret.
pub const PLACEHOLDER_KEY: &str = "arbiter-endpoint-takes-no-key";

/// The variable arbiter names in the config files of CLIs that let the config say which
/// variable holds the key (Codex `env_key`, OpenCode `{env:...}`), so those files never
/// depend on the user's own variable names.
pub const ENDPOINT_KEY_VAR: &str = "ARBITER_ENDPOINT_API_KEY";

/// Where the prompt goes.
pub(crate) enum PromptRoute<'a> {
    Argument(&'a str),
    File(&'a Path),
}

impl InvocationSpec {
    /// A short prompt that cannot be mistaken for an option goes on the command line;
    /// anything else is read from the prompt file.
    pub(crate) fn prompt_route(&self) -> PromptRoute<'_> {
        self.route(false)
    }

    /// [`Self::prompt_route`] for a command line that ends its options with `--` before
    /// the prompt, where a leading dash is harmless.
    pub(crate) fn prompt_route_after_options_end(&self) -> PromptRoute<'_> {
        self.route(true)
    }

    fn route(&self, after_options_end: bool) -> PromptRoute<'_> {
        let p = self.prompt.as_str();
        let option_like = p.starts_with('-') && !after_options_end;
        if !p.is_empty() && p.len() <= INLINE_PROMPT_LIMIT && !option_like && !p.contains('\0') {
            PromptRoute::Argument(p)
        } else {
            PromptRoute::File(&self.prompt_file)
        }
    }

    /// An absolute path inside agent_home, as an environment or config value.
    pub(crate) fn home_path(&self, relative: &str) -> String {
        self.agent_home.join(relative).to_string_lossy().into_owned()
    }

    /// The permission mode asked for, or the CLI's unattended default.
    pub(crate) fn permission_mode_or<'a>(&'a self, default: &'a str) -> &'a str {
        self.permission_mode.as_deref().unwrap_or(default)
    }
}

impl Invocation {
    /// The program of `agent` with `HOME` set to agent_home, so nothing from the user's
    /// own configuration (settings, hooks, logins, MCP servers) leaks into a candidate.
    pub(crate) fn start(agent: CliAgent, spec: &InvocationSpec) -> Invocation {
        Invocation {
            program: spec.binary.clone().unwrap_or_else(|| agent.default_binary().to_string()),
            args: Vec::new(),
            stdin: PromptInput::Null,
            env: vec![("HOME".into(), spec.agent_home.to_string_lossy().into_owned())],
            key_env_aliases: Vec::new(),
            files: Vec::new(),
        }
    }

    pub(crate) fn arg(&mut self, arg: impl Into<String>) {
        self.args.push(arg.into());
    }

    pub(crate) fn args<I, S>(&mut self, args: I)
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
    }

    /// `flag value` when there is a value.
    pub(crate) fn option(&mut self, flag: &str, value: Option<impl ToString>) {
        if let Some(value) = value {
            self.args.push(flag.to_string());
            self.args.push(value.to_string());
        }
    }

    pub(crate) fn set_env(&mut self, name: &str, value: impl Into<String>) {
        self.env.push((name.to_string(), value.into()));
    }

    pub(crate) fn file(&mut self, relative: &str, content: String) {
        self.files.push((PathBuf::from(relative), content));
    }

    /// Delivers the endpoint's key in `target`: copied by the runner from the spec's
    /// variable, or, when the endpoint takes no key and the CLI insists on one, the
    /// placeholder.
    pub(crate) fn endpoint_key(&mut self, endpoint: &EndpointSpec, target: &str, placeholder_when_keyless: bool) {
        match &endpoint.key_env {
            Some(source) => self.key_env_aliases.push((target.to_string(), source.clone())),
            None if placeholder_when_keyless => self.set_env(target, PLACEHOLDER_KEY),
            None => {}
        }
    }

    /// The command line for people (each argument shell-quoted when it needs it), e.g. for
    /// a runner summary. It holds no secret because `args` never does.
    pub fn display_command(&self) -> String {
        let mut line = shell_word(&self.program);
        for arg in &self.args {
            let _ = write!(line, " {}", shell_word(arg));
        }
        line
    }
}

fn check_option_value(what: &'static str, value: &str) -> Result<(), InvocationError> {
    if value.trim().is_empty() || value.starts_with('-') || value.contains('\0') {
        return Err(InvocationError::BadValue { what, value: value.to_string() });
    }
    Ok(())
}

fn is_env_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> InvocationSpec {
        InvocationSpec {
            prompt: "Fix add in calc.py".into(),
            prompt_file: "/run/c1/prompt.md".into(),
            agent_home: "/run/c1/home".into(),
            confined: false,
            ..Default::default()
        }
    }

    fn endpoint(provider: EndpointProvider, url: &str) -> EndpointSpec {
        EndpointSpec { base_url: url.into(), key_env: Some("MY_KEY".into()), provider }
    }

    #[test]
    fn prompts_go_inline_only_when_short_and_not_option_like() {
        let mut s = spec();
        assert!(matches!(s.prompt_route(), PromptRoute::Argument("Fix add in calc.py")));
        s.prompt = "x".repeat(INLINE_PROMPT_LIMIT);
        assert!(matches!(s.prompt_route(), PromptRoute::Argument(_)));
        s.prompt.push('x');
        assert!(matches!(s.prompt_route(), PromptRoute::File(p) if p == Path::new("/run/c1/prompt.md")));
        s.prompt = "--help me".into();
        assert!(matches!(s.prompt_route(), PromptRoute::File(_)));
        s.prompt = String::new();
        assert!(matches!(s.prompt_route(), PromptRoute::File(_)));
    }

    #[test]
    fn endpoint_urls_normalize() {
        let e = endpoint(EndpointProvider::Anthropic, "http://127.0.0.1:9/v1/");
        assert_eq!(e.server_root(), "http://127.0.0.1:9");
        assert_eq!(e.openai_base_url(), "http://127.0.0.1:9/v1");
        let e = endpoint(EndpointProvider::OpenAiCompatible, "https://openrouter.ai/api/v1");
        assert_eq!(e.openai_base_url(), "https://openrouter.ai/api/v1");
        assert_eq!(e.server_root(), "https://openrouter.ai/api");
    }

    #[test]
    fn validation_rejects_what_a_cli_cannot_do() {
        let mut s = spec();
        assert_eq!(validate(CliAgent::ClaudeCode, &s), Ok(()));
        assert_eq!(
            validate(CliAgent::VillaniCode, &s),
            Err(InvocationError::EndpointRequired { agent: CliAgent::VillaniCode })
        );

        s.resume_session = Some("abc".into());
        assert_eq!(validate(CliAgent::Aider, &s), Err(InvocationError::ResumeUnsupported { agent: CliAgent::Aider }));
        assert_eq!(validate(CliAgent::Codex, &s), Ok(()));
        s.resume_session = Some("--last".into());
        assert!(matches!(validate(CliAgent::Codex, &s), Err(InvocationError::BadValue { what: "resume_session", .. })));
        s.resume_session = None;

        s.endpoint = Some(endpoint(EndpointProvider::OpenAiCompatible, "http://127.0.0.1:9/v1"));
        assert_eq!(
            validate(CliAgent::Codex, &s),
            Err(InvocationError::EndpointUnsupported {
                agent: CliAgent::Codex,
                provider: EndpointProvider::OpenAiCompatible
            })
        );
        assert_eq!(validate(CliAgent::Aider, &s), Err(InvocationError::ModelRequired { agent: CliAgent::Aider }));
        s.model = Some("mock".into());
        assert_eq!(validate(CliAgent::Aider, &s), Ok(()));
        assert_eq!(validate(CliAgent::VillaniCode, &s), Ok(()));

        s.endpoint = Some(endpoint(EndpointProvider::Anthropic, "http://127.0.0.1:9"));
        assert_eq!(validate(CliAgent::VillaniCode, &s), Err(InvocationError::KeyNotDeliverable));
        s.endpoint =
            Some(EndpointSpec { key_env: None, ..endpoint(EndpointProvider::Anthropic, "http://127.0.0.1:9") });
        assert_eq!(validate(CliAgent::VillaniCode, &s), Ok(()));

        s.endpoint = Some(endpoint(EndpointProvider::Anthropic, "127.0.0.1:9"));
        assert!(matches!(validate(CliAgent::ClaudeCode, &s), Err(InvocationError::BadBaseUrl(_))));
        s.endpoint =
            Some(EndpointSpec { key_env: Some("MY-KEY".into()), ..endpoint(EndpointProvider::Anthropic, "http://h") });
        assert!(matches!(validate(CliAgent::ClaudeCode, &s), Err(InvocationError::BadKeyEnv(_))));

        s.endpoint = None;
        s.agent_home = "home".into();
        assert!(matches!(
            validate(CliAgent::ClaudeCode, &s),
            Err(InvocationError::RelativePath { what: "agent_home", .. })
        ));
    }

    #[test]
    fn providers_serialize_like_the_backend_configuration() {
        let names: Vec<String> = [
            EndpointProvider::Anthropic,
            EndpointProvider::OpenAiCompatible,
            EndpointProvider::OpenAiResponses,
            EndpointProvider::Gemini,
        ]
        .iter()
        .map(|p| serde_json::to_string(p).unwrap())
        .collect();
        assert_eq!(names, ["\"anthropic\"", "\"openai-compatible\"", "\"openai-responses\"", "\"gemini\""]);
    }

    #[test]
    fn display_command_quotes_what_needs_it() {
        let inv = Invocation {
            program: "claude".into(),
            args: vec!["-p".into(), "it's fixed".into(), "--max-turns".into(), "5".into(), String::new()],
            stdin: PromptInput::Null,
            env: vec![],
            key_env_aliases: vec![],
            files: vec![],
        };
        assert_eq!(inv.display_command(), r"claude -p 'it'\''s fixed' --max-turns 5 ''");
    }
}
