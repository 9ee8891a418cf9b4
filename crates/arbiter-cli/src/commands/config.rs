//! `arbiter config show`: every setting, its value, and where it came from.

use std::path::Path;

use arbiter_core::settings::RunSettings;
use serde_json::json;

use crate::cli::SettingsArgs;
use crate::context::RepoContext;
use crate::error::CliError;

pub async fn show(repo: Option<&Path>, args: &SettingsArgs, as_json: bool) -> Result<u8, CliError> {
    let ctx = RepoContext::locate(repo).await?;
    let config = ctx.config()?;
    let settings = RunSettings::resolve_values(&config, args.overrides().map_err(CliError::usage)?)?;
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
        let rows: Vec<_> =
            settings.rows().into_iter().map(|(k, v, o)| json!({"key": k, "value": v, "origin": o})).collect();
        let value = json!({
            "config_file": config_path.display().to_string(),
            "config_file_exists": config_path.exists(),
            "settings": rows,
            "runners": runners.as_ref().ok(),
            "runners_error": runners.as_ref().err().map(|e| e.to_string()),
        });
        println!("{}", serde_json::to_string_pretty(&value).unwrap_or_default());
        return Ok(0);
    }
    println!(
        "Config file: {}{}",
        config_path.display(),
        if config_path.exists() { "" } else { " (absent: built-in defaults apply)" }
    );
    println!();
    let rows = settings.rows();
    let width = rows.iter().map(|(k, _, _)| k.len()).max().unwrap_or(0);
    let vwidth = rows.iter().map(|(_, v, _)| v.chars().count()).max().unwrap_or(0).min(48);
    for (k, v, origin) in rows {
        println!("{k:<width$}  {v:<vwidth$}  ({origin})");
    }
    println!();
    match runners {
        Ok(list) => {
            for r in list {
                match &r.kind {
                    arbiter_core::settings::RunnerKind::Command { command } => {
                        println!("runner {}: command `{}`", r.name, command)
                    }
                    arbiter_core::settings::RunnerKind::Builtin { backends, round_robin } => println!(
                        "runner {}: built-in agent, backends {}{}",
                        r.name,
                        backends.join(", "),
                        if *round_robin { " (one per candidate, round-robin)" } else { " (a fallback chain)" }
                    ),
                    arbiter_core::settings::RunnerKind::Agent(a) => println!(
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
        Err(e) => println!("runners: not usable yet: {e}"),
    }
    Ok(0)
}
