//! `arbiter runs list`, `arbiter runs show` and `arbiter runs resume`.

use std::path::Path;

use arbiter_core::artifact::{RankingArtifact, RunState, SelectionArtifact, paths};
use arbiter_core::cost::CostSummary;
use arbiter_core::task::shorten;
use arbiter_core::time::human_duration;
use serde_json::json;

use crate::context::{RepoContext, read_artifact};
use crate::error::CliError;

pub async fn list(repo: Option<&Path>, limit: u32, as_json: bool) -> Result<u8, CliError> {
    let ctx = RepoContext::locate(repo).await?;
    let store = ctx.store().await?;
    let runs = store.list_runs(limit).await?;
    if as_json {
        let rows: Vec<_> = runs
            .iter()
            .map(|r| {
                json!({
                    "run_id": r.id, "status": r.status, "winner": r.winner, "candidates": r.candidates,
                    "task": r.task_title, "started_at": r.started_at.rfc3339(),
                    "finished_at": r.finished_at.map(|t| t.rfc3339()), "run_dir": r.run_dir,
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&rows).unwrap_or_default());
        return Ok(0);
    }
    if runs.is_empty() {
        println!("No runs yet. Start one with `arbiter run`.");
        return Ok(0);
    }
    println!("{:<23}  {:<11}  {:<6}  {:>4}  {:<8}  TASK", "RUN", "STATUS", "WINNER", "CAND", "DURATION");
    for r in runs {
        let duration =
            r.finished_at.map(|f| human_duration(f.millis_since(r.started_at))).unwrap_or_else(|| "-".into());
        println!(
            "{:<23}  {:<11}  {:<6}  {:>4}  {:<8}  {}",
            r.id,
            r.status.as_str(),
            r.winner.map(|w| w.to_string()).unwrap_or_else(|| "-".into()),
            r.candidates,
            duration,
            shorten(&r.task_title, 60)
        );
    }
    Ok(0)
}

pub async fn show(repo: Option<&Path>, run: &str, as_json: bool) -> Result<u8, CliError> {
    let ctx = RepoContext::locate(repo).await?;
    let (id, dir) = ctx.resolve_run(run)?;
    let state: RunState = read_artifact(&dir, paths::STATE)?;
    let selection: Option<SelectionArtifact> = read_artifact(&dir, paths::SELECTION).ok();
    let ranking: Option<RankingArtifact> = read_artifact(&dir, paths::RANKING).ok();
    let cost: Option<CostSummary> = read_artifact(&dir, paths::COST).ok();
    if as_json {
        let value = json!({"run_dir": dir.display().to_string(), "state": state, "selection": selection, "ranking": ranking, "cost": cost});
        println!("{}", serde_json::to_string_pretty(&value).unwrap_or_default());
        return Ok(0);
    }
    println!("Run {id}  [{}]", state.status);
    println!("Task:     {}", state.task.title());
    println!("Base:     {} ({})", &state.base_commit[..state.base_commit.len().min(12)], state.base_ref);
    if let Some(done) = state.finished_at {
        println!("Duration: {}", human_duration(done.millis_since(state.started_at)));
    }
    if let Some(c) = &cost {
        println!("Cost:     {}", c.total.describe_cost());
    }
    println!();
    match (&selection, &ranking) {
        (Some(sel), Some(rank)) => {
            for r in &rank.candidates {
                let mark = if sel.winner.as_ref() == Some(&r.candidate_id) { "★" } else { " " };
                println!(
                    "{mark} #{} {} ({})  gates {}/{}  votes {}  lines {}",
                    r.rank, r.candidate_id, r.runner, r.gates_passed, r.gates_total, r.votes, r.patch_weight
                );
                println!("      {}", r.reason);
            }
            println!();
            println!("{}", sel.summary);
        }
        _ => {
            for c in &state.candidates {
                println!("  {} ({})  {}", c.id, c.runner, c.status);
            }
            if let Some(m) = &state.message {
                println!("{m}");
            }
        }
    }
    if let Some(m) = &state.materialization {
        println!("Result:   {}", m.describe());
        if !m.applied {
            println!("          apply with `arbiter apply {id}`");
        }
    }
    println!("Report:   {}", dir.join(paths::REPORT).display());
    println!("Viewer:   {}", dir.join(paths::VIEWER).display());
    println!("Run directory: {}", dir.display());
    Ok(0)
}

/// `arbiter runs resume`: continues an interrupted run with the settings it recorded.
pub async fn resume(repo: Option<&Path>, given: &str, as_json: bool) -> Result<u8, CliError> {
    let ctx = RepoContext::locate(repo).await?;
    let (id, dir) = ctx.resolve_run(given)?;
    let artifact: arbiter_core::artifact::SettingsArtifact = read_artifact(&dir, paths::SETTINGS).map_err(|_| {
        CliError::usage(format!(
            "run {id} has no settings.json (it was recorded by an older arbiter) and cannot be resumed; start it again with `arbiter run`"
        ))
    })?;
    let settings = artifact.settings;
    let config = ctx.config()?;
    let (keys, models) = crate::model_access::for_run(&ctx.secrets_path(), &config, &settings)?;
    let workspace = ctx.workspace.clone();
    let outcome =
        crate::commands::run::drive(&ctx, models, keys, |engine| async move { engine.resume(workspace, &id).await })
            .await?;
    crate::commands::run::report(&outcome, as_json);
    Ok(crate::commands::run::exit_code(&outcome))
}
