//! The agent CLIs arbiter can run as candidates, and the static facts about each: its
//! name in configuration, its binary, how to ask its version, which environment variables
//! hold its keys and which non-secret ones steer it.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One supported agent CLI.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CliAgent {
    ClaudeCode,
    Codex,
    Gemini,
    Aider,
    #[serde(rename = "opencode")]
    OpenCode,
    VillaniCode,
}

impl CliAgent {
    pub const ALL: &'static [CliAgent] = &[
        CliAgent::ClaudeCode,
        CliAgent::Codex,
        CliAgent::Gemini,
        CliAgent::Aider,
        CliAgent::OpenCode,
        CliAgent::VillaniCode,
    ];

    /// The name used in configuration and reports.
    pub fn name(self) -> &'static str {
        match self {
            CliAgent::ClaudeCode => "claude-code",
            CliAgent::Codex => "codex",
            CliAgent::Gemini => "gemini",
            CliAgent::Aider => "aider",
            CliAgent::OpenCode => "opencode",
            CliAgent::VillaniCode => "villani-code",
        }
    }

    /// The CLI named `name` (exactly as [`CliAgent::name`] spells it).
    pub fn parse(name: &str) -> Option<CliAgent> {
        CliAgent::ALL.iter().copied().find(|a| a.name() == name)
    }

    /// The program looked up on `PATH` when the spec names none.
    pub fn default_binary(self) -> &'static str {
        match self {
            CliAgent::ClaudeCode => "claude",
            CliAgent::Codex => "codex",
            CliAgent::Gemini => "gemini",
            CliAgent::Aider => "aider",
            CliAgent::OpenCode => "opencode",
            CliAgent::VillaniCode => "villani-code",
        }
    }

    /// Arguments that print the version and exit 0. villani-code has no version option, so
    /// its probe is `--help`, which proves only that the program starts.
    pub fn version_args(self) -> &'static [&'static str] {
        match self {
            CliAgent::VillaniCode => &["--help"],
            _ => &["--version"],
        }
    }

    /// Environment variables that may hold this CLI's API keys when it talks to its own
    /// provider. The runner passes them through to the agent's environment (never argv);
    /// with an [`EndpointSpec`](crate::EndpointSpec) the key travels through
    /// [`Invocation::key_env_aliases`](crate::Invocation::key_env_aliases) instead.
    pub fn key_env_vars(self) -> &'static [&'static str] {
        match self {
            CliAgent::ClaudeCode => &["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"],
            CliAgent::Codex => &["OPENAI_API_KEY", "CODEX_API_KEY"],
            CliAgent::Gemini => &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
            CliAgent::Aider => {
                &["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY", "DEEPSEEK_API_KEY"]
            }
            CliAgent::OpenCode => {
                &["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GOOGLE_GENERATIVE_AI_API_KEY", "OPENROUTER_API_KEY"]
            }
            // villani-code reads OPENAI_API_KEY for its openai provider; its anthropic
            // provider reads ANTHROPIC_API_KEY but then sends no key at all (cli.py builds
            // `AnthropicClient(base_url=...)` without it), so that variable is useless.
            CliAgent::VillaniCode => &["OPENAI_API_KEY"],
        }
    }

    /// Non-secret variables the CLI reads: base URLs, model overrides, config locations,
    /// telemetry and update switches. Listed so a runner can pass through the ones a user
    /// sets on purpose; the invocation sets the ones arbiter needs itself.
    pub fn setting_env_vars(self) -> &'static [&'static str] {
        match self {
            CliAgent::ClaudeCode => &[
                "ANTHROPIC_BASE_URL",
                "ANTHROPIC_MODEL",
                "ANTHROPIC_DEFAULT_OPUS_MODEL",
                "ANTHROPIC_DEFAULT_SONNET_MODEL",
                "ANTHROPIC_DEFAULT_HAIKU_MODEL",
                "ANTHROPIC_SMALL_FAST_MODEL",
                "CLAUDE_CONFIG_DIR",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
                "CLAUDE_CODE_USE_BEDROCK",
                "CLAUDE_CODE_USE_VERTEX",
                "DISABLE_AUTOUPDATER",
                "DISABLE_TELEMETRY",
                "IS_SANDBOX",
            ],
            CliAgent::Codex => &["CODEX_HOME", "OPENAI_BASE_URL"],
            CliAgent::Gemini => &[
                "GOOGLE_GEMINI_BASE_URL",
                "GEMINI_MODEL",
                "GEMINI_CLI_TRUST_WORKSPACE",
                "GOOGLE_CLOUD_PROJECT",
                "GOOGLE_CLOUD_LOCATION",
                "GOOGLE_GENAI_USE_VERTEXAI",
            ],
            CliAgent::Aider => &["OPENAI_API_BASE", "AIDER_MODEL", "AIDER_EDIT_FORMAT"],
            CliAgent::OpenCode => &[
                "OPENCODE_CONFIG",
                "OPENCODE_DISABLE_AUTOUPDATE",
                "OPENCODE_DISABLE_LSP_DOWNLOAD",
                "OPENCODE_DISABLE_MODELS_FETCH",
                "OPENCODE_DISABLE_DEFAULT_PLUGINS",
                "OPENCODE_DISABLE_SHARE",
                "XDG_CONFIG_HOME",
                "XDG_DATA_HOME",
                "XDG_CACHE_HOME",
                "XDG_STATE_HOME",
            ],
            // Its base URL and model are required options; it reads no such variables.
            // Rich (its console) honours these two.
            CliAgent::VillaniCode => &["NO_COLOR", "COLUMNS"],
        }
    }

    /// Whether a run can continue an earlier session ([`InvocationSpec::resume_session`](crate::InvocationSpec::resume_session)).
    pub fn resume_supported(self) -> bool {
        match self {
            CliAgent::ClaudeCode | CliAgent::Codex | CliAgent::Gemini | CliAgent::OpenCode => true,
            CliAgent::Aider | CliAgent::VillaniCode => false,
        }
    }

    /// Whether its token usage comes from files it wrote during the run (its debug trace,
    /// see [`crate::telemetry`]) rather than from its output stream.
    pub fn usage_from_trace(self) -> bool {
        self == CliAgent::VillaniCode
    }

    /// The wire protocols of the model endpoints this CLI can be pointed at.
    pub fn endpoint_providers(self) -> &'static [EndpointProvider] {
        match self {
            CliAgent::ClaudeCode => &[EndpointProvider::Anthropic],
            // Chat Completions support (`wire_api = "chat"`) was removed from Codex.
            CliAgent::Codex => &[EndpointProvider::OpenAiResponses],
            CliAgent::Gemini => &[EndpointProvider::Gemini],
            CliAgent::Aider | CliAgent::OpenCode => &[EndpointProvider::OpenAiCompatible],
            CliAgent::VillaniCode => &[EndpointProvider::OpenAiCompatible, EndpointProvider::Anthropic],
        }
    }

    /// Whether the CLI prints a machine-readable event stream (otherwise its output is text
    /// and its exit code is all it says about how the run ended).
    pub fn structured_output(self) -> bool {
        !matches!(self, CliAgent::Aider | CliAgent::VillaniCode)
    }
}

impl fmt::Display for CliAgent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The wire protocol an endpoint serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EndpointProvider {
    /// Anthropic Messages (`POST /v1/messages`).
    Anthropic,
    /// OpenAI Chat Completions (`POST /v1/chat/completions`).
    #[serde(rename = "openai-compatible")]
    OpenAiCompatible,
    /// OpenAI Responses (`POST /v1/responses`), the only protocol current Codex speaks.
    #[serde(rename = "openai-responses")]
    OpenAiResponses,
    /// Gemini API (`POST /v1beta/models/{model}:streamGenerateContent`).
    Gemini,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        for agent in CliAgent::ALL {
            assert_eq!(CliAgent::parse(agent.name()), Some(*agent));
            assert_eq!(agent.to_string(), agent.name());
        }
        assert_eq!(CliAgent::parse("claude"), None);
        assert_eq!(CliAgent::parse("Codex"), None);
        let json = serde_json::to_string(&CliAgent::VillaniCode).unwrap();
        assert_eq!(json, "\"villani-code\"");
        assert_eq!(serde_json::from_str::<CliAgent>("\"opencode\"").unwrap(), CliAgent::OpenCode);
    }

    #[test]
    fn binaries_and_resume_support() {
        let bins: Vec<&str> = CliAgent::ALL.iter().map(|a| a.default_binary()).collect();
        assert_eq!(bins, ["claude", "codex", "gemini", "aider", "opencode", "villani-code"]);
        assert!(CliAgent::ClaudeCode.resume_supported());
        assert!(!CliAgent::Aider.resume_supported());
        assert!(!CliAgent::VillaniCode.resume_supported());
        assert_eq!(CliAgent::VillaniCode.version_args(), ["--help"]);
        assert_eq!(CliAgent::Codex.version_args(), ["--version"]);
    }

    #[test]
    fn key_variables_are_never_setting_variables() {
        for agent in CliAgent::ALL {
            assert!(!agent.key_env_vars().is_empty(), "{agent}");
            for key in agent.key_env_vars() {
                assert!(!agent.setting_env_vars().contains(key), "{agent}: {key}");
            }
        }
    }
}
