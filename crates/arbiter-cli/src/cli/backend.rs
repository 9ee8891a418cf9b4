//! `arbiter backend ...`: managing model backends.

use clap::{Args, Subcommand};

#[derive(Debug, Subcommand)]
pub enum BackendCommand {
    /// Add (or replace) a backend in .arbiter/config.toml.
    Add(Box<BackendAddArgs>),
    /// Every backend, its roles, prices, state and where its key comes from (never the key).
    List {
        /// Print one JSON value on stdout instead of text.
        #[arg(long)]
        json: bool,
    },
    /// One backend (never its key).
    Show {
        /// The backend's name.
        name: String,
        /// Print one JSON value on stdout instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Remove a backend and its stored key.
    Remove {
        /// The backend's name.
        name: String,
    },
    /// Enable a backend.
    Enable {
        /// The backend's name.
        name: String,
    },
    /// Disable a backend (it stays configured but is skipped in role chains).
    Disable {
        /// The backend's name.
        name: String,
    },
    /// Make one small real call: latency, tokens, and whether tool calls work.
    Test {
        /// The backend's name.
        name: String,
        /// Print one JSON value on stdout instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub struct BackendAddArgs {
    /// Backend name (letters, digits, '-' and '_').
    pub name: String,
    /// openai-compatible (llama.cpp, vLLM, Ollama, LM Studio, OpenRouter...), openai or anthropic.
    #[arg(long)]
    pub provider: String,
    /// The model the backend serves, as its API names it.
    #[arg(long)]
    pub model: String,
    /// e.g. http://127.0.0.1:8080/v1 (required for openai-compatible).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// The environment variable holding the key.
    #[arg(long, value_name = "VAR", conflicts_with = "api_key_stdin")]
    pub api_key_env: Option<String>,
    /// Read the key from stdin and keep it in the repository's secrets file (mode 0600, in
    /// ~/.config/arbiter/secrets/, outside the repository).
    #[arg(long)]
    pub api_key_stdin: bool,
    /// USD per million input tokens.
    #[arg(long, value_name = "USD_PER_MTOK")]
    pub input_cost: Option<String>,
    /// USD per million output tokens.
    #[arg(long, value_name = "USD_PER_MTOK")]
    pub output_cost: Option<String>,
    /// Comma-separated: coding, review, selection, spec, planning, analysis.
    #[arg(long, value_name = "ROLES", default_value = "coding")]
    pub roles: String,
    /// Relative capability (higher is stronger); orders role chains without [roles].
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub capability: u32,
    /// Concurrent requests to this backend, shared by everything in one arbiter process.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub max_parallel: u32,
    /// Output token cap per request.
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u32>,
    /// Request timeout.
    #[arg(long, value_name = "S")]
    pub timeout_seconds: Option<u64>,
}
