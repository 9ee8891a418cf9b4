//! `arbiter apply RUN`: put a finished run's winning patch into the repository.

use std::path::Path;

use arbiter_core::artifact::{ApplyRecord, RunState, SCHEMA_VERSION, SelectionArtifact, SettingsArtifact, paths};
use arbiter_runner::materialize::apply_run_patch;
use arbiter_runner::rundir::RunDir;
use serde::Serialize;

use crate::cli::ApplyArgs;
use crate::context::{RepoContext, read_artifact};
use crate::error::{CliError, exit};
use crate::output::{JsonDocument, out};

/// `apply --json`: the run's `apply.json` as written.
#[derive(Serialize)]
struct Applied<'a> {
    apply: &'a ApplyRecord,
}

impl JsonDocument for Applied<'_> {
    const SCHEMA: &'static str = "apply";
}

pub async fn apply(repo: Option<&Path>, args: &ApplyArgs) -> Result<u8, CliError> {
    let ctx = RepoContext::locate(repo).await?;
    let (id, dir) = ctx.resolve_run(&args.run)?;
    // The patch applied comes from the run directory: not from one changed behind arbiter's back.
    crate::commands::runs::refuse_broken_seal(&id, &dir, "applied")?;
    let selection: SelectionArtifact = read_artifact(&dir, paths::SELECTION)?;
    let state: RunState = read_artifact(&dir, paths::STATE)?;
    let (Some(winner), Some(rel)) = (selection.winner.clone(), selection.winner_patch.clone()) else {
        return Err(CliError::no_result(format!("run {id} has no winner to apply: {}", selection.summary)));
    };
    let patch = dir.join(&rel);
    if !patch.is_file() {
        return Err(CliError::environment(format!(
            "the winner's patch {} is missing from the run directory",
            patch.display()
        )));
    }
    let message = format!("{}\n\narbiter run {id} (candidate {winner})", state.task.title());
    // Programs the run ran from copies of the working tree are not uncommitted work.
    let tooling: Vec<String> = read_artifact::<SettingsArtifact>(&dir, paths::SETTINGS)
        .map(|s| s.settings.outside_programs.into_iter().map(|p| p.path).collect())
        .unwrap_or_default();
    let commit = args.commit.then_some(message.as_str());
    // The run directory is on disk and could have been edited: the patch is checked again,
    // against this repository's limits, on what it is applied to.
    let limits = ctx.config()?.run.limits()?.value;
    let result = apply_run_patch(&ctx.git, &patch, &limits, &tooling, args.branch.as_deref(), commit, args.force).await;
    let clock = arbiter_runner::SystemClock;
    let record = ApplyRecord {
        schema_version: SCHEMA_VERSION,
        run_id: id.clone(),
        candidate_id: winner.clone(),
        at: arbiter_core::Clock::now(&clock),
        branch: args.branch.clone(),
        created_branch: result.as_ref().map(|r| r.created_branch).unwrap_or(false),
        commit: result.as_ref().ok().and_then(|r| r.commit.clone()),
        applied: result.is_ok(),
        already_applied: result.as_ref().is_ok_and(|r| r.already_applied),
        rolled_back: result.as_ref().err().map(|f| f.rolled_back).unwrap_or(false),
        error: result.as_ref().err().map(|f| f.error.to_string()),
    };
    let run_dir = RunDir::open(dir.clone());
    run_dir.write_json(paths::APPLY, &record)?;
    run_dir.reseal(&[paths::APPLY])?;
    if args.json {
        crate::output::json(&Applied { apply: &record });
    }
    match result {
        Ok(r) if r.already_applied => {
            if !args.json {
                out!(
                    "{winner} of run {id} is applied already: the working tree holds its changes{}; nothing was changed",
                    if args.commit { " (commit them yourself if they are not committed)" } else { "" }
                );
            }
            Ok(exit::SUCCESS)
        }
        Ok(r) => {
            if !args.json {
                out!(
                    "Applied {winner} of run {id}{}",
                    args.branch.as_ref().map(|b| format!(" on new branch {b}")).unwrap_or_default()
                );
                if let Some(c) = r.commit {
                    out!("Committed {c}");
                }
            }
            Ok(exit::SUCCESS)
        }
        Err(f) => {
            let mut msg = f.error.to_string();
            if f.rolled_back {
                msg.push_str("; the new branch was removed and the original branch checked out again");
            }
            Err(match f.error {
                arbiter_runner::materialize::MaterializeError::Git(_) => CliError::environment(msg),
                arbiter_runner::materialize::MaterializeError::DoesNotApply(_)
                | arbiter_runner::materialize::MaterializeError::Refused(_) => CliError::no_result(msg),
                _ => CliError::usage(msg),
            })
        }
    }
}
