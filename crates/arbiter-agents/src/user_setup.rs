//! The user's own setup of an agent CLI, for a candidate that runs the CLI on its own
//! provider (no arbiter backend): which of the user's files its agent home gets — the
//! login (Claude Code's credentials, Codex's `auth.json`, Gemini's OAuth files, OpenCode's
//! `auth.json`), and the configuration that names providers, profiles and models — and what
//! is taken out of them first: MCP servers, hooks, plugins, status lines and per-project
//! settings stay out unless the runner table opts in (`inherit = ["mcp", "hooks"]`).
//!
//! Pure: [`user_files`] says what to copy from where to where, [`filtered`] turns a file's
//! text into what the agent home gets, [`key_variables`] names the environment variables a
//! configuration says hold keys (they must reach the CLI). The runner reads and writes.

use std::path::PathBuf;

use serde_json::{Map, Value};

use crate::agent::CliAgent;

pub use arbiter_core::settings::INHERITABLE;

/// Where a user's file is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// Relative to the user's home directory.
    Home(&'static str),
    /// In the directory a variable names (`CODEX_HOME`), else in `default` (relative to
    /// the home directory).
    Dir { var: &'static str, default: &'static str, file: &'static str },
}

/// How a file's text is made ready for the agent home.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Filter {
    /// A login: as it is.
    Verbatim,
    /// JSON without the top-level keys of the kinds not inherited.
    Json(&'static [(&'static str, Kind)]),
    /// TOML without the top-level keys (tables) of the kinds not inherited.
    Toml(&'static [(&'static str, Kind)]),
}

/// Why a key stays out unless the runner inherits it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Mcp,
    Hooks,
    Plugins,
    /// Settings of the user's own projects (trust, history): never inherited.
    Projects,
}

impl Kind {
    fn inherited(self, inherit: &[String]) -> bool {
        let name = match self {
            Kind::Mcp => "mcp",
            Kind::Hooks => "hooks",
            Kind::Plugins => "plugins",
            Kind::Projects => return false,
        };
        inherit.iter().any(|i| i == name)
    }
}

/// One file of the user's setup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserFile {
    pub source: Source,
    /// Relative to the agent home.
    pub target: PathBuf,
    pub filter: Filter,
    /// The invocation writes a file of its own there: the user's goes under it (the
    /// invocation's keys win, except `user_wins`).
    pub merge: bool,
    /// A login (its values are secrets: redacted, never in a patch).
    pub login: bool,
}

const CLAUDE_JSON: &[(&str, Kind)] = &[("mcpServers", Kind::Mcp), ("projects", Kind::Projects)];
const CLAUDE_SETTINGS: &[(&str, Kind)] = &[
    ("hooks", Kind::Hooks),
    ("statusLine", Kind::Hooks),
    ("mcpServers", Kind::Mcp),
    ("enabledMcpjsonServers", Kind::Mcp),
    ("enableAllProjectMcpServers", Kind::Mcp),
    ("enabledPlugins", Kind::Plugins),
    ("plugins", Kind::Plugins),
];
const CODEX_CONFIG: &[(&str, Kind)] =
    &[("mcp_servers", Kind::Mcp), ("notify", Kind::Hooks), ("hooks", Kind::Hooks), ("projects", Kind::Projects)];
const GEMINI_SETTINGS: &[(&str, Kind)] =
    &[("mcpServers", Kind::Mcp), ("hooks", Kind::Hooks), ("extensions", Kind::Plugins)];
const OPENCODE_CONFIG: &[(&str, Kind)] = &[("mcp", Kind::Mcp), ("plugin", Kind::Plugins)];

/// The user's files a CLI on its own provider gets, and where.
pub fn user_files(agent: CliAgent) -> Vec<UserFile> {
    let file = |source: Source, target: &str, filter: Filter, merge: bool, login: bool| UserFile {
        source,
        target: PathBuf::from(target),
        filter,
        merge,
        login,
    };
    use Filter::*;
    match agent {
        CliAgent::ClaudeCode => vec![
            file(
                Source::Dir { var: "CLAUDE_CONFIG_DIR", default: ".claude", file: ".credentials.json" },
                ".claude/.credentials.json",
                Verbatim,
                false,
                true,
            ),
            file(Source::Home(".claude.json"), ".claude/.claude.json", Json(CLAUDE_JSON), false, true),
            file(
                Source::Dir { var: "CLAUDE_CONFIG_DIR", default: ".claude", file: "settings.json" },
                ".claude/settings.json",
                Json(CLAUDE_SETTINGS),
                false,
                false,
            ),
        ],
        CliAgent::Codex => vec![
            file(
                Source::Dir { var: "CODEX_HOME", default: ".codex", file: "auth.json" },
                ".codex/auth.json",
                Verbatim,
                false,
                true,
            ),
            file(
                Source::Dir { var: "CODEX_HOME", default: ".codex", file: "config.toml" },
                ".codex/config.toml",
                Toml(CODEX_CONFIG),
                true,
                false,
            ),
        ],
        CliAgent::Gemini => vec![
            file(Source::Home(".gemini/oauth_creds.json"), ".gemini/oauth_creds.json", Verbatim, false, true),
            file(Source::Home(".gemini/google_accounts.json"), ".gemini/google_accounts.json", Verbatim, false, true),
            file(Source::Home(".gemini/settings.json"), ".gemini/settings.json", Json(GEMINI_SETTINGS), true, false),
        ],
        CliAgent::OpenCode => vec![
            file(
                Source::Home(".local/share/opencode/auth.json"),
                ".local/share/opencode/auth.json",
                Verbatim,
                false,
                true,
            ),
            file(Source::Home(".config/opencode/opencode.json"), "opencode.json", Json(OPENCODE_CONFIG), true, false),
        ],
        CliAgent::Aider => vec![file(Source::Home(".aider.conf.yml"), ".aider.conf.yml", Verbatim, false, false)],
        CliAgent::VillaniCode => Vec::new(),
    }
}

/// Keys of the invocation's own file that give way to the user's when merging: the user's
/// login method (Gemini's `security.auth`) where the CLI runs on its own provider.
fn user_wins(agent: CliAgent) -> &'static [&'static str] {
    match agent {
        CliAgent::Gemini => &["security"],
        _ => &[],
    }
}

/// Why a user file cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct FilterError(pub String);

/// The text the agent home gets for `file`: the user's `text` filtered, then (when the
/// invocation writes a file of its own there, `ours`) merged under it.
pub fn filtered(
    agent: CliAgent,
    file: &UserFile,
    text: &str,
    ours: Option<&str>,
    inherit: &[String],
) -> Result<String, FilterError> {
    let keep = |keys: &[(&str, Kind)], key: &str| {
        keys.iter().find(|(k, _)| *k == key).is_none_or(|(_, kind)| kind.inherited(inherit))
    };
    match file.filter {
        Filter::Verbatim => Ok(text.to_string()),
        Filter::Json(keys) => {
            let mut user: Map<String, Value> = match serde_json::from_str(text) {
                Ok(Value::Object(m)) => m,
                Ok(_) => return Err(FilterError("it is not a JSON object".into())),
                Err(e) => return Err(FilterError(format!("it is not JSON: {e}"))),
            };
            user.retain(|k, _| keep(keys, k));
            if file.merge
                && let Some(Ok(Value::Object(mine))) = ours.map(serde_json::from_str::<Value>)
            {
                for (k, v) in mine {
                    if !(user_wins(agent).contains(&k.as_str()) && user.contains_key(&k)) {
                        user.insert(k, v);
                    }
                }
            }
            Ok(format!("{:#}\n", Value::Object(user)))
        }
        Filter::Toml(keys) => {
            let mut user: toml::Table = text.parse().map_err(|e| FilterError(format!("it is not TOML: {e}")))?;
            user.retain(|k, _| keep(keys, k));
            if file.merge
                && let Some(Ok(mine)) = ours.map(|o| o.parse::<toml::Table>())
            {
                for (k, v) in mine {
                    user.insert(k, v);
                }
            }
            toml::to_string(&user).map_err(|e| FilterError(e.to_string()))
        }
    }
}

/// The environment variables a CLI's configuration says hold its keys (Codex's providers'
/// `env_key`), which must reach the CLI.
pub fn key_variables(agent: CliAgent, config: &str) -> Vec<String> {
    match agent {
        CliAgent::Codex => {
            let Ok(table) = config.parse::<toml::Table>() else { return Vec::new() };
            let mut names: Vec<String> = table
                .get("model_providers")
                .and_then(|p| p.as_table())
                .into_iter()
                .flat_map(|providers| providers.values())
                .filter_map(|p| p.get("env_key")?.as_str().map(str::to_string))
                .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
                .collect();
            names.sort();
            names.dedup();
            names
        }
        _ => Vec::new(),
    }
}

/// The secret values of a login file (every string of 16 characters or more in it): what
/// is redacted from every artifact and refused in a patch.
pub fn login_secrets(text: &str) -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) if s.len() >= 16 => out.push(s.clone()),
            Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
            Value::Object(m) => m.values().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let Ok(v) = serde_json::from_str::<Value>(text) {
        walk(&v, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(agent: CliAgent, target: &str) -> UserFile {
        user_files(agent).into_iter().find(|f| f.target == std::path::Path::new(target)).unwrap()
    }

    #[test]
    fn mcp_servers_hooks_and_projects_stay_out_unless_inherited() {
        let settings = find(CliAgent::ClaudeCode, ".claude/settings.json");
        let user = r#"{"model": "opus", "env": {"ANTHROPIC_BASE_URL": "http://llm"}, "hooks": {"PostToolUse": []}, "enabledMcpjsonServers": ["db"]}"#;
        let out: Value =
            serde_json::from_str(&filtered(CliAgent::ClaudeCode, &settings, user, None, &[]).unwrap()).unwrap();
        assert_eq!(out, serde_json::json!({"model": "opus", "env": {"ANTHROPIC_BASE_URL": "http://llm"}}));
        let with = filtered(CliAgent::ClaudeCode, &settings, user, None, &["hooks".into()]).unwrap();
        assert!(with.contains("PostToolUse") && !with.contains("enabledMcpjsonServers"), "{with}");
        let claude_json = find(CliAgent::ClaudeCode, ".claude/.claude.json");
        let user =
            r#"{"oauthAccount": {"emailAddress": "a@b"}, "projects": {"/home/u/x": {}}, "mcpServers": {"db": {}}}"#;
        let all: Vec<String> = INHERITABLE.iter().map(|s| s.to_string()).collect();
        let out = filtered(CliAgent::ClaudeCode, &claude_json, user, None, &all).unwrap();
        assert!(out.contains("oauthAccount") && out.contains("mcpServers") && !out.contains("/home/u/x"), "{out}");
    }

    #[test]
    fn codex_keeps_providers_and_profiles_and_names_their_key_variables() {
        let config = find(CliAgent::Codex, ".codex/config.toml");
        let user = "model = \"gpt-5\"\nmodel_provider = \"corp\"\nnotify = [\"notify-send\"]\n\n[model_providers.corp]\nname = \"Corp\"\nbase_url = \"http://llm/v1\"\nenv_key = \"CORP_KEY\"\nwire_api = \"responses\"\n\n[profiles.fast]\nmodel = \"gpt-5-mini\"\n\n[mcp_servers.db]\ncommand = \"db-mcp\"\n\n[projects.\"/home/u/x\"]\ntrust_level = \"trusted\"\n";
        let ours = "# One candidate's Codex configuration\n";
        let out: toml::Table = filtered(CliAgent::Codex, &config, user, Some(ours), &[]).unwrap().parse().unwrap();
        assert_eq!(out["model_provider"].as_str(), Some("corp"));
        assert!(out.contains_key("model_providers") && out.contains_key("profiles"));
        assert!(!out.contains_key("mcp_servers") && !out.contains_key("notify") && !out.contains_key("projects"));
        assert_eq!(key_variables(CliAgent::Codex, user), vec!["CORP_KEY".to_string()]);
        assert!(key_variables(CliAgent::Codex, "[model_providers.x]\nenv_key = \"A; rm -rf /\"\n").is_empty());
    }

    #[test]
    fn gemini_keeps_the_user_s_login_method_over_the_api_key_default() {
        let settings = find(CliAgent::Gemini, ".gemini/settings.json");
        let user = r#"{"security": {"auth": {"selectedType": "oauth-personal"}}, "mcpServers": {"x": {}}}"#;
        let ours = r#"{"privacy": {"usageStatisticsEnabled": false}, "security": {"auth": {"selectedType": "gemini-api-key"}}}"#;
        let out: Value =
            serde_json::from_str(&filtered(CliAgent::Gemini, &settings, user, Some(ours), &[]).unwrap()).unwrap();
        assert_eq!(out["security"]["auth"]["selectedType"], "oauth-personal");
        assert_eq!(out["privacy"]["usageStatisticsEnabled"], false);
        assert!(out.get("mcpServers").is_none());
    }

    #[test]
    fn login_values_are_secrets_and_bad_files_are_named() {
        let secrets =
            login_secrets(r#"{"tokens": {"access_token": "eyJhbGciOiJSUzI1NiJ9.payload.sig", "id": "short"}}"#);
        assert_eq!(secrets, vec!["eyJhbGciOiJSUzI1NiJ9.payload.sig".to_string()]);
        let settings = find(CliAgent::ClaudeCode, ".claude/settings.json");
        assert!(
            filtered(CliAgent::ClaudeCode, &settings, "[1]", None, &[]).unwrap_err().0.contains("not a JSON object")
        );
    }
}
