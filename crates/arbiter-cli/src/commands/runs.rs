//! `arbiter runs list`, `arbiter runs show`, `arbiter runs resume` and `arbiter runs verify`.

use std::path::Path;

use arbiter_core::artifact::{RankingArtifact, RunState, SelectionArtifact, paths};
use arbiter_core::cost::CostSummary;
use arbiter_core::status::RunStatus;
use arbiter_core::task::shorten;
use arbiter_core::time::human_duration;
use arbiter_runner::rundir::RunDir;
use serde::Serialize;

use crate::context::{RepoContext, read_artifact};
use crate::error::{CliError, exit};
use crate::output::{JsonDocument, out};

/// `runs list --json`.
#[derive(Serialize)]
struct RunsList {
    runs: Vec<RunLine>,
}

#[derive(Serialize)]
struct RunLine {
    run_id: String,
    status: RunStatus,
    winner: Option<String>,
    candidates: u32,
    task: String,
    started_at: String,
    finished_at: Option<String>,
    run_dir: String,
}

impl JsonDocument for RunsList {
    const SCHEMA: &'static str = "runs-list";
}

/// `runs show --json`: the run's artifacts as they are in its directory.
#[derive(Serialize)]
struct RunShown {
    run_dir: String,
    state: RunState,
    selection: Option<SelectionArtifact>,
    ranking: Option<RankingArtifact>,
    cost: Option<CostSummary>,
}

impl JsonDocument for RunShown {
    const SCHEMA: &'static str = "runs-show";
}

/// `runs verify --json`.
#[derive(Serialize)]
struct RunVerified<'a> {
    run_id: String,
    run_dir: String,
    sealed: bool,
    holds: bool,
    files: Option<usize>,
    changed: Option<&'a [String]>,
    missing: Option<&'a [String]>,
    unexpected: Option<&'a [String]>,
    message: &'a str,
}

impl JsonDocument for RunVerified<'_> {
    const SCHEMA: &'static str = "runs-verify";
}

pub async fn list(repo: Option<&Path>, limit: u32, as_json: bool) -> Result<u8, CliError> {
    if limit == 0 {
        return Err(CliError::usage("--limit 0 lists nothing: give at least 1 (the default is 20)"));
    }
    let ctx = RepoContext::locate(repo).await?;
    let store = ctx.store().await?;
    let mut runs = store.list_runs(limit).await?;
    // A run still `running` whose process is gone was interrupted (killed, or the machine
    // went down): said so, and how to continue it. Only a run of this repository, whose
    // state says which process owns it, can be told dead: another machine's run (a shared
    // store), or one that has not written its state yet, stays `running`.
    let mut interrupted = Vec::new();
    let runs_dir = ctx.workspace.runs_dir();
    for r in runs.iter_mut().filter(|r| r.status == RunStatus::Running) {
        let dir = Path::new(&r.run_dir);
        let Ok(state) = read_artifact::<RunState>(dir, paths::STATE) else { continue };
        if dir.starts_with(&runs_dir) && !arbiter_runner::process::process_alive(state.pid as i32) {
            r.status = RunStatus::Interrupted;
            interrupted.push(r.id.to_string());
        }
    }
    if as_json {
        let runs = runs
            .iter()
            .map(|r| RunLine {
                run_id: r.id.to_string(),
                status: r.status,
                winner: r.winner.as_ref().map(|w| w.to_string()),
                candidates: r.candidates,
                task: r.task_title.clone(),
                started_at: r.started_at.rfc3339(),
                finished_at: r.finished_at.map(|t| t.rfc3339()),
                run_dir: r.run_dir.clone(),
            })
            .collect();
        crate::output::json(&RunsList { runs });
        return Ok(0);
    }
    if runs.is_empty() {
        out!("No runs yet. Start one with `arbiter run`.");
        return Ok(0);
    }
    out!("{:<23}  {:<11}  {:<6}  {:>4}  {:<8}  TASK", "RUN", "STATUS", "WINNER", "CAND", "DURATION");
    for r in runs {
        let duration =
            r.finished_at.map(|f| human_duration(f.millis_since(r.started_at))).unwrap_or_else(|| "-".into());
        out!(
            "{:<23}  {:<11}  {:<6}  {:>4}  {:<8}  {}",
            r.id,
            r.status.as_str(),
            r.winner.map(|w| w.to_string()).unwrap_or_else(|| "-".into()),
            r.candidates,
            duration,
            shorten(&r.task_title, 60)
        );
    }
    if let Some(first) = interrupted.first() {
        out!(
            "\n{} run(s) were interrupted: their arbiter is gone. `arbiter runs resume {first}` continues one (finished candidates are kept).",
            interrupted.len()
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
        crate::output::json(&RunShown { run_dir: dir.display().to_string(), state, selection, ranking, cost });
        return Ok(0);
    }
    out!("Run {id}  [{}]", state.status);
    out!("Task:     {}", state.task.title());
    out!("Base:     {} ({})", &state.base_commit[..state.base_commit.len().min(12)], state.base_ref);
    if let Some(done) = state.finished_at {
        out!("Duration: {}", human_duration(done.millis_since(state.started_at)));
    }
    if let Some(c) = &cost {
        out!("Cost:     {}", c.total.describe_cost());
    }
    out!();
    match (&selection, &ranking) {
        (Some(sel), Some(rank)) => {
            for r in &rank.candidates {
                let mark = if sel.winner.as_ref() == Some(&r.candidate_id) { "★" } else { " " };
                out!(
                    "{mark} #{} {} ({})  gates {}/{}  votes {}  lines {}",
                    r.rank,
                    r.candidate_id,
                    r.runner,
                    r.gates_passed,
                    r.gates_total,
                    r.votes,
                    r.patch_weight
                );
                out!("      {}", r.reason);
            }
            out!();
            out!("{}", sel.summary);
        }
        _ => {
            for c in &state.candidates {
                out!("  {} ({})  {}", c.id, c.runner, c.status);
            }
            if let Some(m) = &state.message {
                out!("{m}");
            }
        }
    }
    if let Some(m) = &state.materialization {
        out!("Result:   {}", m.describe());
        if !m.applied {
            out!("          apply with `arbiter apply {id}`");
        }
    }
    out!("Report:   {}", dir.join(paths::REPORT).display());
    out!("Viewer:   {}", dir.join(paths::VIEWER).display());
    out!("Run directory: {}", dir.display());
    Ok(0)
}

/// `arbiter runs resume`: continues an interrupted run with the settings it recorded.
pub async fn resume(repo: Option<&Path>, given: &str, as_json: bool) -> Result<u8, CliError> {
    let ctx = RepoContext::locate(repo).await?;
    let (id, dir) = ctx.resolve_run(given)?;
    // A resume reseals the directory when it finishes: it must not seal over someone
    // else's changes to an interrupted run that was sealed.
    refuse_broken_seal(&id, &dir, "resumed")?;
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

/// Refuses to act on (`what`: "applied", "resumed") a run whose directory no longer matches
/// its seal; a run without a seal (older arbiter, never finished) is not refused.
pub fn refuse_broken_seal(id: &arbiter_core::ids::RunId, dir: &Path, what: &str) -> Result<(), CliError> {
    let broken = match RunDir::open(dir.to_path_buf()).verify() {
        Ok(None) => return Ok(()),
        Ok(Some((_, v))) if v.holds() => return Ok(()),
        Ok(Some((_, v))) => v.describe(),
        Err(e) => e.to_string(),
    };
    Err(CliError::no_result(format!(
        "run {id} was changed after arbiter sealed it ({broken}), so it is not {what}: what it holds cannot be trusted; \
         `arbiter runs verify {id}` lists the differences"
    )))
}

/// `arbiter runs verify`: the run directory against its `manifest.json`.
pub async fn verify(repo: Option<&Path>, given: &str, as_json: bool) -> Result<u8, CliError> {
    let ctx = RepoContext::locate(repo).await?;
    let (id, dir) = ctx.resolve_run(given)?;
    let run_dir = RunDir::open(dir.clone());
    let print_json = |sealed: bool, holds: bool, v: Option<&arbiter_core::manifest::Verification>, message: &str| {
        crate::output::json(&RunVerified {
            run_id: id.to_string(),
            run_dir: dir.display().to_string(),
            sealed,
            holds,
            files: v.map(|v| v.files),
            changed: v.map(|v| v.changed.as_slice()),
            missing: v.map(|v| v.missing.as_slice()),
            unexpected: v.map(|v| v.unexpected.as_slice()),
            message,
        });
    };
    let outcome = match run_dir.verify() {
        Ok(Some(found)) => Ok(found),
        Ok(None) => Err(unsealed_message(&id, &dir)),
        Err(e) => Err(format!(
            "run {id}: {e}; the manifest was changed after arbiter sealed the run, so nothing in it can be checked"
        )),
    };
    let (manifest, v) = match outcome {
        Ok(found) => found,
        Err(message) => {
            if as_json {
                print_json(false, false, None, &message);
                return Ok(exit::NO_RESULT);
            }
            return Err(CliError::no_result(message));
        }
    };
    let foreign = (manifest.run_id != id).then(|| format!("manifest.json is the seal of run {}", manifest.run_id));
    let holds = v.holds() && foreign.is_none();
    let message = match (&foreign, holds) {
        (Some(f), _) => format!("run {id} does not match its seal: {f}"),
        (None, true) => format!("Run {id}: all {} files match manifest.json", v.files),
        (None, false) => format!("run {id} does not match manifest.json: {}", v.describe()),
    };
    if as_json {
        print_json(true, holds, Some(&v), &message);
    } else if holds {
        out!("{message}");
    } else {
        out!("Run {id} was changed after arbiter sealed it:");
        if let Some(f) = &foreign {
            out!("  {f}");
        }
        for (what, list) in [("changed", &v.changed), ("missing", &v.missing), ("unexpected", &v.unexpected)] {
            for path in list {
                out!("  {what:<10}  {path}");
            }
        }
        out!("arbiter writes a finished run's directory only through its own commands, which reseal it.");
    }
    Ok(if holds { exit::SUCCESS } else { exit::NO_RESULT })
}

/// Why a run has no seal, as far as its state tells, and what to do.
fn unsealed_message(id: &arbiter_core::ids::RunId, dir: &Path) -> String {
    let state: Option<RunState> = read_artifact(dir, paths::STATE).ok();
    let why = match state.as_ref().map(|s| s.status) {
        Some(arbiter_core::status::RunStatus::Running) => format!(
            "it is still running, or its process died before the end (`arbiter runs resume {id}` finishes a dead one)"
        ),
        Some(arbiter_core::status::RunStatus::Interrupted) => {
            format!("it was interrupted before it finished; `arbiter runs resume {id}` finishes and seals it")
        }
        Some(_) => "it was recorded by an arbiter older than manifest.json, or its seal was deleted".to_string(),
        None => "its state.json is missing too: it never got far, or the directory was changed".to_string(),
    };
    format!("run {id} has no manifest.json, so it cannot be checked: {why}")
}
