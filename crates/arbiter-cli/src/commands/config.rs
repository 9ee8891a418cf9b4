//! `arbiter config show`: every setting, its value, and where it came from.

use std::path::Path;

use arbiter_core::settings::RunSettings;
use serde::Serialize;

use crate::cli::SettingsArgs;
use crate::context::RepoContext;
use crate::error::CliError;
use crate::output::{JsonDocument, out};

/// `config show --json`.
#[derive(Serialize)]
struct ConfigShown<'a> {
    config_file: String,
    config_file_exists: bool,
    settings: Vec<arbiter_core::settings::Row>,
    runners: Option<&'a Vec<arbiter_core::settings::RunnerSpec>>,
    runners_error: Option<String>,
}

impl JsonDocument for ConfigShown<'_> {
    const SCHEMA: &'static str = "config-show";
}

pub async fn show(repo: Option<&Path>, args: &SettingsArgs, as_json: bool) -> Result<u8, CliError> {
    let ctx = RepoContext::locate(repo).await?;
    let config = ctx.config()?;
    let settings = RunSettings::resolve_values(&config, &[&args.options().map_err(CliError::usage)?])?;
    let runners = settings.resolve_runners(&config);
    let config_path = ctx.workspace.config_path();
    // A runner table that cannot work is an error of the file, used or not.
    let invalid: Vec<String> = config.runner_table_errors().iter().map(|e| e.to_string()).collect();
    if !invalid.is_empty() {
        return Err(CliError::usage(format!(
            "{} has invalid runner tables:\n{}",
            config_path.display(),
            invalid.iter().map(|e| format!("  - {e}")).collect::<Vec<_>>().join("\n")
        )));
    }
    if as_json {
        crate::output::json(&ConfigShown {
            config_file: config_path.display().to_string(),
            config_file_exists: config_path.exists(),
            settings: settings.rows(),
            runners: runners.as_ref().ok(),
            runners_error: runners.as_ref().err().map(|e| e.to_string()),
        });
        return Ok(0);
    }
    out!(
        "Config file: {}{}",
        config_path.display(),
        if config_path.exists() { "" } else { " (absent: built-in defaults apply)" }
    );
    out!();
    let rows = settings.rows();
    let width = rows.iter().map(|r| r.key.len()).max().unwrap_or(0);
    let vwidth = rows.iter().map(|r| r.value.chars().count()).max().unwrap_or(0).min(48);
    for r in rows {
        out!("{:<width$}  {:<vwidth$}  ({})", r.key, r.value, r.origin);
    }
    out!();
    match runners {
        Ok(list) => {
            for r in list {
                match &r.kind {
                    arbiter_core::settings::RunnerKind::Command { command } => {
                        out!("runner {}: command `{}`", r.name, command)
                    }
                    arbiter_core::settings::RunnerKind::Builtin { backends, round_robin } => out!(
                        "runner {}: built-in agent, backends {}{}",
                        r.name,
                        backends.join(", "),
                        if *round_robin { " (one per candidate, round-robin)" } else { " (a fallback chain)" }
                    ),
                    arbiter_core::settings::RunnerKind::Agent(a) => out!(
                        "runner {}: agent CLI {}{}{}",
                        r.name,
                        a.cli,
                        a.model.as_ref().map(|m| format!(", model {m}")).unwrap_or_default(),
                        if a.backends.is_empty() {
                            ", its own provider".to_string()
                        } else {
                            format!(", backends {} (one per candidate, round-robin)", a.backends.join(", "))
                        }
                    ),
                }
            }
        }
        Err(e) => out!("runners: not usable yet: {e}"),
    }
    Ok(0)
}
