//! `arbiter backend add|list|show|remove|enable|disable`.

use std::io::BufRead;
use std::path::Path;

use arbiter_core::backends::{BackendSecret, BackendSection, key_status};
use arbiter_core::money::Usd;
use serde::Serialize;
use serde_json::json;

use crate::cli::{BackendAddArgs, BackendCommand};
use crate::config_file;
use crate::context::RepoContext;
use crate::error::CliError;
use crate::output::{JsonDocument, out};

/// `backend list --json`.
#[derive(Serialize)]
struct Backends<'a> {
    backends: Vec<BackendShown<'a>>,
}

impl JsonDocument for Backends<'_> {
    const SCHEMA: &'static str = "backend-list";
}

/// `backend show --json`, and a line of `backend list --json`.
#[derive(Serialize)]
struct BackendShown<'a> {
    name: &'a str,
    backend: &'a BackendSection,
    key: arbiter_core::backends::KeyStatus,
}

impl JsonDocument for BackendShown<'_> {
    const SCHEMA: &'static str = "backend-show";
}

/// `backend test --json`: a call that went through (one that did not is an error).
#[derive(Serialize)]
struct BackendTested<'a> {
    backend: &'a str,
    ok: bool,
    latency_ms: u64,
    attempts: u32,
    usage: Option<&'a arbiter_llm::Usage>,
    cost: Option<Usd>,
    flags: &'a [String],
    tool_calls_work: bool,
}

impl JsonDocument for BackendTested<'_> {
    const SCHEMA: &'static str = "backend-test";
}

pub async fn backend(repo: Option<&Path>, cmd: &BackendCommand) -> Result<u8, CliError> {
    let ctx = RepoContext::locate(repo).await?;
    match cmd {
        BackendCommand::Add(args) => add(&ctx, args).await,
        BackendCommand::List { json } => list(&ctx, *json),
        BackendCommand::Show { name, json } => show(&ctx, name, *json),
        BackendCommand::Remove { name } => remove(&ctx, name),
        BackendCommand::Enable { name } => enable(&ctx, name, true),
        BackendCommand::Disable { name } => enable(&ctx, name, false),
        BackendCommand::Test { name, json } => test(&ctx, name, *json).await,
    }
}

fn parse_price(flag: &str, text: &Option<String>) -> Result<Option<Usd>, CliError> {
    match text {
        None => Ok(None),
        Some(t) => match Usd::parse(t) {
            Some(p) if p >= Usd::ZERO => Ok(Some(p)),
            _ => Err(CliError::usage(format!("{flag} '{t}' is not a price in USD per million tokens (e.g. 0.15)"))),
        },
    }
}

async fn add(ctx: &RepoContext, a: &BackendAddArgs) -> Result<u8, CliError> {
    let section = BackendSection {
        provider: a.provider.clone(),
        model: a.model.clone(),
        base_url: a.base_url.clone(),
        api_key_env: a.api_key_env.clone(),
        input_cost: parse_price("--input-cost", &a.input_cost)?,
        output_cost: parse_price("--output-cost", &a.output_cost)?,
        roles: a.roles.split(',').map(|r| r.trim().to_string()).filter(|r| !r.is_empty()).collect(),
        capability: a.capability,
        max_parallel: a.max_parallel,
        max_tokens: a.max_tokens,
        timeout_seconds: a.timeout_seconds,
        enabled: true,
    };
    section.validate(&a.name).map_err(CliError::usage)?;
    if let Some(var) = &a.api_key_env
        && (var.is_empty() || !var.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
    {
        return Err(CliError::usage(format!("--api-key-env '{var}' is not an environment variable name")));
    }
    // Read the key before writing anything, so a failed read leaves both files untouched.
    let key = if a.api_key_stdin {
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        let key = line.trim().to_string();
        if key.is_empty() {
            return Err(CliError::usage(
                "--api-key-stdin read an empty key; pipe the key in: `printf %s \"$KEY\" | arbiter backend add ...`",
            ));
        }
        Some(key)
    } else {
        None
    };
    // .arbiter/config.toml is never something `git add -A` picks up, even before `arbiter init`.
    ctx.workspace.exclude_from_git(&ctx.git).await?;
    config_file::put_backend(&ctx.workspace.config_path(), &a.name, &section)?;
    let secrets_path = ctx.secrets_path();
    let mut secrets = config_file::read_secrets(&secrets_path)?;
    let had_secret = secrets.backends.contains_key(&a.name);
    match key {
        Some(api_key) => {
            secrets.backends.insert(a.name.clone(), BackendSecret { api_key });
            config_file::write_secrets(&secrets_path, &secrets)?;
        }
        None if had_secret && a.api_key_env.is_some() => {
            secrets.backends.remove(&a.name);
            config_file::write_secrets(&secrets_path, &secrets)?;
        }
        None => {}
    }
    out!("Backend {} saved in {}", a.name, ctx.workspace.config_path().display());
    if a.api_key_stdin {
        out!("  key stored in {} (mode 0600)", secrets_path.display());
    }
    out!("  check it with `arbiter backend test {}`", a.name);
    Ok(0)
}

fn load(
    ctx: &RepoContext,
) -> Result<(arbiter_core::settings::ConfigFile, arbiter_core::backends::SecretsFile), CliError> {
    Ok((ctx.config()?, config_file::read_secrets(&ctx.secrets_path())?))
}

fn status_of(
    b: &BackendSection,
    name: &str,
    secrets: &arbiter_core::backends::SecretsFile,
) -> arbiter_core::backends::KeyStatus {
    key_status(b, |v| std::env::var_os(v).is_some_and(|x| !x.is_empty()), secrets.backends.contains_key(name))
}

fn list(ctx: &RepoContext, as_json: bool) -> Result<u8, CliError> {
    let (config, secrets) = load(ctx)?;
    if as_json {
        let backends = config
            .backends
            .iter()
            .map(|(name, backend)| BackendShown { name, backend, key: status_of(backend, name, &secrets) })
            .collect();
        crate::output::json(&Backends { backends });
        return Ok(0);
    }
    if config.backends.is_empty() {
        out!("No backends. Add one: arbiter backend add NAME --provider openai-compatible --model M --base-url URL");
        return Ok(0);
    }
    out!(
        "{:<16} {:<18} {:<28} {:<22} {:>4} {:>3} {:<14} {:<8} KEY",
        "NAME",
        "PROVIDER",
        "MODEL",
        "ROLES",
        "CAP",
        "PAR",
        "$/MTOK IN/OUT",
        "STATE"
    );
    for (n, b) in &config.backends {
        out!(
            "{:<16} {:<18} {:<28} {:<22} {:>4} {:>3} {:<14} {:<8} {}",
            n,
            b.provider,
            b.model,
            b.roles.join(","),
            b.capability,
            b.max_parallel,
            b.describe_prices(),
            if b.enabled { "enabled" } else { "disabled" },
            status_of(b, n, &secrets)
        );
    }
    Ok(0)
}

fn show(ctx: &RepoContext, name: &str, as_json: bool) -> Result<u8, CliError> {
    let (config, secrets) = load(ctx)?;
    let b = config
        .backends
        .get(name)
        .ok_or_else(|| CliError::usage(format!("no backend named '{name}'; `arbiter backend list` shows them")))?;
    let key = status_of(b, name, &secrets);
    if as_json {
        crate::output::json(&BackendShown { name, backend: b, key });
        return Ok(0);
    }
    out!("name:            {name}");
    out!("provider:        {}", b.provider);
    out!("model:           {}", b.model);
    out!("base_url:        {}", b.base_url.as_deref().unwrap_or("(provider default)"));
    out!("key:             {key}");
    out!("prices:          {} USD per million tokens (input/output)", b.describe_prices());
    out!("roles:           {}", b.roles.join(", "));
    out!("capability:      {}", b.capability);
    out!("max_parallel:    {}", b.max_parallel);
    out!("max_tokens:      {}", b.max_tokens.map_or("(default)".into(), |m| m.to_string()));
    out!("timeout_seconds: {}", b.timeout_seconds.map_or("(default)".into(), |m| m.to_string()));
    out!("state:           {}", if b.enabled { "enabled" } else { "disabled" });
    Ok(0)
}

fn remove(ctx: &RepoContext, name: &str) -> Result<u8, CliError> {
    let (config, _) = load(ctx)?;
    if !config.backends.contains_key(name) {
        return Err(CliError::usage(format!("no backend named '{name}'; `arbiter backend list` shows them")));
    }
    config_file::remove_backend(&ctx.workspace.config_path(), name)?;
    let path = ctx.secrets_path();
    let mut secrets = config_file::read_secrets(&path)?;
    if secrets.backends.remove(name).is_some() {
        config_file::write_secrets(&path, &secrets)?;
    }
    out!("Removed backend {name}");
    for (role, chain) in &config.roles {
        if chain.iter().any(|n| n == name) {
            out!("  note: [roles] {role} still names {name}; edit {}", ctx.workspace.config_path().display());
        }
    }
    Ok(0)
}

fn enable(ctx: &RepoContext, name: &str, on: bool) -> Result<u8, CliError> {
    config_file::set_enabled(&ctx.workspace.config_path(), name, on)?;
    out!("Backend {name} {}", if on { "enabled" } else { "disabled" });
    Ok(0)
}

/// One small real call with one tool offered: does the backend answer, how fast, at what
/// token count, and does it call tools natively?
async fn test(ctx: &RepoContext, name: &str, as_json: bool) -> Result<u8, CliError> {
    let (config, secrets) = load(ctx)?;
    if !config.backends.contains_key(name) {
        return Err(CliError::usage(format!("no backend named '{name}'; `arbiter backend list` shows them")));
    }
    let endpoints = crate::model_access::endpoints(&config, &secrets)?;
    let endpoint = endpoints.get(name).cloned().ok_or_else(|| CliError::usage(format!("no backend named '{name}'")))?;
    let client = arbiter_llm::LlmClient::new()
        .map_err(|e| CliError::environment(format!("cannot start the HTTP client: {e}")))?;
    let request = arbiter_llm::ChatRequest {
        system: Some("You are a connectivity check. Call the echo tool exactly once.".into()),
        messages: vec![arbiter_llm::Message::User("Call the echo tool with text \"ping\".".into())],
        tools: vec![arbiter_llm::ToolSpec {
            name: "echo".into(),
            description: "Echo a text back.".into(),
            parameters: json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        }],
        temperature: Some(0.0),
        max_tokens: Some(64),
    };
    let redactor = arbiter_core::redact::Redactor::new(endpoint.api_key.clone());
    match client.chat(&endpoint, &request).await {
        Ok(r) => {
            let tools_work = r.tool_calls.iter().any(|c| c.name == "echo");
            let record = arbiter_llm::call_record("analysis", &endpoint, None, r.usage.as_ref());
            if as_json {
                crate::output::json(&BackendTested {
                    backend: name,
                    ok: true,
                    latency_ms: r.latency.as_millis() as u64,
                    attempts: r.attempts,
                    usage: r.usage.as_ref(),
                    cost: record.cost,
                    flags: &record.flags,
                    tool_calls_work: tools_work,
                });
            } else {
                out!(
                    "Backend {name} ({} {}) answered in {} ms ({} attempt(s))",
                    endpoint.provider,
                    endpoint.model,
                    r.latency.as_millis(),
                    r.attempts
                );
                match &r.usage {
                    Some(u) => {
                        out!("  tokens: {} in, {} out, {} cached", u.input_tokens, u.output_tokens, u.cached_tokens)
                    }
                    None => out!("  tokens: not reported by the backend (calls will be flagged usage_unavailable)"),
                }
                out!(
                    "  cost: {}",
                    record
                        .cost
                        .map(|c| c.to_string())
                        .unwrap_or_else(|| format!("unknown ({})", record.flags.join(", ")))
                );
                if tools_work {
                    out!("  tool calls: work (native)");
                } else {
                    out!(
                        "  tool calls: NOT used natively; the built-in agent will rely on its text protocol (see docs/builtin-agent.md)"
                    );
                }
            }
            Ok(0)
        }
        Err(e) => Err(CliError::environment(format!("backend {name} failed: {}", redactor.redact(&e.to_string())))),
    }
}
