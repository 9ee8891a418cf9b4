//! The user's own login and configuration of an agent CLI, copied into a candidate's agent
//! home when the CLI runs on its own provider (the decisions are
//! [`arbiter_agents::user_setup`]'s): files read from the user's home (or the directory
//! `CODEX_HOME` / `CLAUDE_CONFIG_DIR` names), filtered, merged under what the invocation
//! writes, and written with mode 0400 in the agent home — which is removed when the agent
//! exits, before any verify command runs in its tree. The login's values become secrets of
//! the run (redacted from every artifact), and the variables a configuration names as
//! holding keys are passed to the CLI.

use std::path::{Path, PathBuf};

use arbiter_agents::agent::CliAgent;
use arbiter_agents::invocation::Invocation;
use arbiter_agents::user_setup::{self, Source};

/// What was copied in.
#[derive(Debug, Default)]
pub struct Inherited {
    /// Agent-home paths written.
    pub files: Vec<PathBuf>,
    /// Values to redact (the logins').
    pub secrets: Vec<String>,
    /// Variables (and their values) the configuration says hold keys.
    pub env: Vec<(String, String)>,
    /// Files that could not be used, and why (the candidate runs without them).
    pub skipped: Vec<String>,
}

/// Copies the user's setup of `agent` into `home` (after the invocation's own files were
/// written there). `var` looks up the user's environment.
pub fn copy_in(
    agent: CliAgent,
    home: &Path,
    inv: &Invocation,
    inherit: &[String],
    var: &dyn Fn(&str) -> Option<String>,
) -> std::io::Result<Inherited> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Inherited::default();
    let Some(user_home) = var("HOME").filter(|h| !h.is_empty()).map(PathBuf::from) else { return Ok(out) };
    for file in user_setup::user_files(agent) {
        let source = match &file.source {
            Source::Home(rel) => user_home.join(rel),
            Source::Dir { var: name, default, file } => var(name)
                .filter(|d| !d.is_empty())
                .map(PathBuf::from)
                .unwrap_or_else(|| user_home.join(default))
                .join(file),
        };
        let Ok(text) = std::fs::read_to_string(&source) else { continue };
        let target = home.join(&file.target);
        let ours = inv.files.iter().find(|(rel, _)| *rel == file.target).map(|(_, t)| t.as_str());
        let text = match user_setup::filtered(agent, &file, &text, ours, inherit) {
            Ok(t) => t,
            Err(e) => {
                out.skipped.push(format!("{}: {e}", source.display()));
                continue;
            }
        };
        if file.login {
            out.secrets.extend(user_setup::login_secrets(&text));
        }
        for name in user_setup::key_variables(agent, &text) {
            if let Some(value) = var(&name) {
                out.secrets.push(value.clone());
                out.env.push((name, value));
            }
        }
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        if target.exists() {
            // The invocation's own file, replaced by the merge.
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600))?;
        }
        std::fs::write(&target, text)?;
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o400))?;
        out.files.push(file.target.clone());
    }
    Ok(out)
}
