//! `arbiter doctor [--json]`: what this machine and repository give arbiter — git, the
//! sandbox the kernel allows, the store, every agent CLI (installed? logged in the CLI's
//! usual way?) and the configured backends (reachable?) — each with what to do when it is
//! missing. It spends nothing: no model is asked, only a connection is opened.

use std::path::{Path, PathBuf};
use std::time::Duration;

use arbiter_agents::user_setup::{self, Source};
use arbiter_core::settings::{AGENT_CLIS, ConfigFile};
use arbiter_runner::cli_runner::{self, Cli};
use serde::Serialize;

use crate::context::RepoContext;
use crate::error::{CliError, exit};
use crate::output::{JsonDocument, out};

/// How a check came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Status {
    Ok,
    /// Works, with a limit worth knowing.
    Warn,
    /// Missing or broken; `hint` says what to do.
    Fail,
    /// Not used here (an agent CLI that is not installed is not a fault).
    Absent,
}

/// `doctor --json`.
#[derive(Serialize)]
struct Checks<'a> {
    checks: &'a [Check],
}

impl JsonDocument for Checks<'_> {
    const SCHEMA: &'static str = "doctor";
}

#[derive(Debug, Serialize)]
struct Check {
    area: &'static str,
    name: String,
    status: Status,
    detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    hint: Option<String>,
}

fn check(area: &'static str, name: impl Into<String>, status: Status, detail: impl Into<String>) -> Check {
    Check { area, name: name.into(), status, detail: detail.into(), hint: None }
}

impl Check {
    fn hint(mut self, hint: impl Into<String>) -> Check {
        self.hint = Some(hint.into());
        self
    }
}

pub async fn doctor(repo: Option<&Path>, json: bool) -> Result<u8, CliError> {
    let ctx = RepoContext::locate(repo).await;
    if repo.is_some()
        && let Err(e) = ctx
    {
        return Err(e);
    }
    let ctx = ctx.ok();
    let config = match &ctx {
        Some(c) => c.config()?,
        None => ConfigFile::default(),
    };
    let mut checks = vec![git().await, sandbox()?];
    checks.push(store(ctx.as_ref()).await);
    checks.extend(agent_clis(ctx.as_ref()).await);
    checks.extend(backends(&config).await);
    let failed = checks.iter().any(|c| c.status == Status::Fail);
    if json {
        crate::output::json(&Checks { checks: &checks });
    } else {
        print(&checks);
    }
    Ok(if failed { exit::ENVIRONMENT } else { exit::SUCCESS })
}

fn print(checks: &[Check]) {
    let colour = crate::terminal::stdout_colour();
    let mark = |s: Status| {
        let (text, code) = match s {
            Status::Ok => ("ok  ", "32"),
            Status::Warn => ("warn", "33"),
            Status::Fail => ("FAIL", "31"),
            Status::Absent => ("-   ", "2"),
        };
        if colour { crate::output::paint(code, text) } else { text.to_string() }
    };
    let width = checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
    let mut area = "";
    for c in checks {
        if c.area != area {
            area = c.area;
            out!("{area}");
        }
        out!("  {} {:<width$}  {}", mark(c.status), c.name, c.detail);
        if let Some(h) = &c.hint {
            out!("  {:4} {:<width$}  → {h}", "", "");
        }
    }
}

async fn git() -> Check {
    match tokio::process::Command::new("git").arg("--version").output().await {
        Ok(out) if out.status.success() => {
            let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
            let version: Vec<u32> = text
                .split_whitespace()
                .nth(2)
                .unwrap_or_default()
                .split('.')
                .take(2)
                .filter_map(|n| n.parse().ok())
                .collect();
            if version.as_slice() >= [2, 38].as_slice() {
                check("tools", "git", Status::Ok, text)
            } else {
                check("tools", "git", Status::Warn, format!("{text}: arbiter is tested with git 2.38 or newer"))
                    .hint("install a newer git")
            }
        }
        _ => check("tools", "git", Status::Fail, "not found on PATH").hint("install git (apt-get install git)"),
    }
}

fn sandbox() -> Result<Check, CliError> {
    let sandboxing = crate::context::sandboxing()?;
    let caps = sandboxing.capabilities().clone();
    let auto = sandboxing.enforcement(arbiter_core::sandbox::SandboxMode::Auto);
    Ok(match auto {
        Ok(e) if e.filesystem => check("tools", "sandbox", Status::Ok, e.describe()),
        Ok(e) => check("tools", "sandbox", Status::Warn, e.describe()).hint(format!(
            "the kernel offers no Landlock here{}: candidates can read what you can; `--sandbox require` refuses to run",
            caps.detail.map(|d| format!(" ({d})")).unwrap_or_default()
        )),
        Err(e) => check("tools", "sandbox", Status::Fail, e.to_string()),
    })
}

async fn store(ctx: Option<&RepoContext>) -> Check {
    match crate::context::database_url() {
        Some(url) => {
            let shown = arbiter_core::redact::redact_patterns(url);
            match tokio::time::timeout(Duration::from_secs(6), arbiter_store::postgres::PgStore::connect(url)).await {
                Ok(Ok(_)) => check("store", "postgres", Status::Ok, format!("{shown} reachable, migrated")),
                Ok(Err(e)) => check("store", "postgres", Status::Fail, e.to_string())
                    .hint("start the server, or fix ARBITER_DATABASE_URL / --database-url"),
                Err(_) => check("store", "postgres", Status::Fail, format!("{shown}: no answer in 6 s"))
                    .hint("check the host and port, and that the server accepts connections"),
            }
        }
        None => match ctx {
            Some(c) if c.workspace.db_path().exists() => {
                check("store", "sqlite", Status::Ok, c.workspace.db_path().display().to_string())
            }
            Some(c) => check(
                "store",
                "sqlite",
                Status::Ok,
                format!("{} (created by the first run)", c.workspace.db_path().display()),
            ),
            None => check("store", "sqlite", Status::Absent, "not in a git repository")
                .hint("run arbiter in a repository (or pass --repo DIR)"),
        },
    }
}

/// Whether the user is logged in `agent`'s usual way: a login file, or a key variable.
fn login(agent: Cli) -> Option<String> {
    let home = std::env::var_os("HOME").map(PathBuf::from)?;
    for file in user_setup::user_files(agent).into_iter().filter(|f| f.login) {
        let path = match &file.source {
            Source::Home(rel) => home.join(rel),
            Source::Dir { var, default, file } => std::env::var_os(var)
                .filter(|d| !d.is_empty())
                .map(PathBuf::from)
                .unwrap_or_else(|| home.join(default))
                .join(file),
        };
        if path.is_file() {
            return Some(format!("logged in ({})", path.display()));
        }
    }
    agent
        .key_env_vars()
        .iter()
        .find(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()))
        .map(|v| format!("API key in ${v}"))
}

fn login_hint(agent: Cli) -> String {
    let how = match agent {
        Cli::ClaudeCode => "run `claude` once and log in, or set ANTHROPIC_API_KEY",
        Cli::Codex => "run `codex login`, or set OPENAI_API_KEY",
        Cli::Gemini => "run `gemini` once and log in, or set GEMINI_API_KEY",
        Cli::OpenCode => "run `opencode auth login`",
        Cli::Aider => "set the provider's key (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...)",
        Cli::VillaniCode => "set its provider's key",
    };
    if agent.endpoint_providers().iter().any(|p| *p != arbiter_agents::agent::EndpointProvider::Gemini) {
        format!("{how} — or point it at a configured backend (`backend = \"NAME\"` in its [runners] table)")
    } else {
        how.to_string()
    }
}

async fn agent_clis(ctx: Option<&RepoContext>) -> Vec<Check> {
    let path = std::env::var("PATH").unwrap_or_default();
    let root = ctx.map(|c| c.workspace.repo_root().to_path_buf());
    let mut out = Vec::new();
    for name in AGENT_CLIS {
        let Some(cli) = Cli::parse(name) else { continue };
        let program = cli.default_binary();
        let found = arbiter_runner::preflight::locate_program(program, root.as_deref(), &path);
        let Ok((_, found)) = found else {
            out.push(
                check("agent CLIs", *name, Status::Absent, format!("`{program}` is not on PATH"))
                    .hint(cli_runner::install_hint(cli)),
            );
            continue;
        };
        let version = cli_runner::version(cli, &found).await.unwrap_or_else(|e| format!("version unknown: {e}"));
        out.push(match login(cli) {
            Some(how) => check("agent CLIs", *name, Status::Ok, format!("{version}; {how}")),
            None => check("agent CLIs", *name, Status::Warn, format!("{version}; not logged in")).hint(login_hint(cli)),
        });
    }
    out
}

/// `host:port` of a base URL.
fn authority(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let host = rest.split(['/', '?', '#']).next()?.rsplit('@').next()?;
    if host.is_empty() {
        return None;
    }
    let has_port =
        host.rsplit_once(':').is_some_and(|(_, p)| p.bytes().all(|b| b.is_ascii_digit()) && !host.ends_with(']'));
    Some(if has_port { host.to_string() } else { format!("{host}:{}", if scheme == "https" { 443 } else { 80 }) })
}

async fn backends(config: &ConfigFile) -> Vec<Check> {
    let mut out = Vec::new();
    for (name, b) in &config.backends {
        if !b.enabled {
            out.push(check("backends", name.as_str(), Status::Absent, "disabled"));
            continue;
        }
        let default = match b.provider.as_str() {
            "openai" => Some("https://api.openai.com/v1"),
            "anthropic" => Some("https://api.anthropic.com"),
            _ => None,
        };
        let Some(base) = b.base_url.clone().or_else(|| default.map(str::to_string)) else {
            out.push(
                check("backends", name.as_str(), Status::Fail, "no base URL").hint(format!(
                    "set base_url in [backends.{name}] (`arbiter backend add {name} --base-url URL ...`)"
                )),
            );
            continue;
        };
        let Some(addr) = authority(&base) else {
            out.push(check("backends", name.as_str(), Status::Fail, format!("{base} is not a URL")));
            continue;
        };
        let detail = format!("{} {} at {base}", b.provider, b.model);
        out.push(match tokio::time::timeout(Duration::from_secs(3), tokio::net::TcpStream::connect(&addr)).await {
            Ok(Ok(_)) => check("backends", name.as_str(), Status::Ok, format!("{detail}: reachable")),
            Ok(Err(e)) => check("backends", name.as_str(), Status::Fail, format!("{detail}: {e}"))
                .hint(format!("start the server or fix base_url; `arbiter backend test {name}` asks it for real")),
            Err(_) => check("backends", name.as_str(), Status::Fail, format!("{detail}: no answer in 3 s"))
                .hint(format!("check the address; `arbiter backend test {name}` asks it for real")),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::authority;

    #[test]
    fn base_urls_give_their_host_and_port() {
        assert_eq!(authority("http://127.0.0.1:8080/v1").as_deref(), Some("127.0.0.1:8080"));
        assert_eq!(authority("https://api.openai.com/v1").as_deref(), Some("api.openai.com:443"));
        assert_eq!(authority("http://user:pw@llm.local/v1").as_deref(), Some("llm.local:80"));
        assert_eq!(authority("not a url"), None);
    }
}
