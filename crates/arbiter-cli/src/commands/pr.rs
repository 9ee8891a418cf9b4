//! `arbiter pr latest|RUN_ID` and `arbiter pr --plan ID`: a run's winner (a branch with one
//! commit, the final report as its message body) or a plan's integration branch, pushed to
//! the repository's remote and proposed as a pull (merge) request with the user's `gh` or
//! `glab` — or, without them, pushed with the page that opens one by hand; without a
//! remote, a bundle and a patch series to send. A plan that came from an issue tells the
//! issue (labels, a comment linking the pull request).
//!
//! A finished plan does this by itself (`arbiter_runner::publish::complete_plan`, run by the
//! coordinator when nothing of the plan can run any more): with `push = true` and every task
//! done it opens its pull request, and from an issue it tells the issue; `plan run` says what
//! happened ([`say_completion`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arbiter_core::artifact::{RunState, SelectionArtifact, paths};
use arbiter_core::intake::report;
use arbiter_core::intake::text;
use arbiter_core::plan::event::{PlanEntry, PlanLogEntry};
use arbiter_runner::materialize;
use arbiter_runner::publish::{
    self, ChangeText, Destination, PR_JSON, PrRecord, PublishError, Published, WinnerCommit,
};
use arbiter_runner::rundir::RunDir;
use arbiter_store::plans::PlanView;
use arbiter_store::units::UnitQueue;
use serde::Serialize;

use crate::cli::PrArgs;
use crate::context::{RepoContext, read_artifact};
use crate::error::{CliError, exit};
use crate::output::{JsonDocument, note, out, printable, warning};

/// The most of a final report that goes into a commit message.
const MAX_MESSAGE_REPORT: usize = 48 * 1024;

/// `pr --json`.
#[derive(Serialize)]
struct Proposed<'a> {
    /// `run` or `plan`.
    of: &'static str,
    /// The run's or the plan's id.
    id: &'a str,
    published: &'a Published,
    /// The commit a run's winner became.
    commit: Option<&'a str>,
}

impl JsonDocument for Proposed<'_> {
    const SCHEMA: &'static str = "pr";
}

pub async fn pr(repo: Option<&Path>, args: &PrArgs) -> Result<u8, CliError> {
    let ctx = RepoContext::locate(repo).await?;
    let config = ctx.config()?;
    let remote = args.remote.clone().or_else(|| config.forge.remote.clone()).unwrap_or_else(|| "origin".into());
    let dest = publish::destination(&ctx.git, &remote, &config.forge).await.map_err(publish_error)?;
    let text = ChangeText {
        title: args.title.clone().unwrap_or_default(),
        body: String::new(),
        base: args.base.clone(),
        draft: args.draft,
        labels: args.label.clone(),
        reviewers: args.reviewer.clone(),
    };
    match (&args.plan, &args.run) {
        (Some(plan), _) => {
            let (_, plans) = ctx.plan_stores().await?;
            let view = plans
                .plan(plan)
                .await?
                .ok_or_else(|| CliError::from(arbiter_store::StoreError::NoPlan { id: plan.clone() }))?;
            let published = propose_plan(&ctx, &plans, &view, &dest, text, &config.intake).await?;
            if args.json {
                crate::output::json(&Proposed { of: "plan", id: plan, published: &published, commit: None });
            } else {
                say(&published, &format!("plan {plan}"));
            }
            Ok(exit::SUCCESS)
        }
        (None, Some(run)) => propose_run(&ctx, run, args.branch.as_deref(), &dest, text, args.json).await,
        (None, None) => Err(CliError::usage("name a run (`latest` or a run id) or a plan (--plan ID)")),
    }
}

fn publish_error(e: PublishError) -> CliError {
    if e.is_usage() { CliError::usage(e) } else { CliError::environment(e) }
}

/// Where a bundle and patches go when there is no remote: `.arbiter/pr/<name>/`.
fn offline_dir(ctx: &RepoContext, name: &str) -> PathBuf {
    ctx.workspace.dir().join("pr").join(name)
}

async fn propose_run(
    ctx: &RepoContext,
    run: &str,
    branch: Option<&str>,
    dest: &Destination,
    mut text: ChangeText,
    as_json: bool,
) -> Result<u8, CliError> {
    let (id, dir) = ctx.resolve_run(run)?;
    crate::commands::runs::refuse_broken_seal(&id, &dir, "proposed")?;
    let selection: SelectionArtifact = read_artifact(&dir, paths::SELECTION)?;
    let state: RunState = read_artifact(&dir, paths::STATE)?;
    let (Some(winner), Some(rel)) = (selection.winner.clone(), selection.winner_patch.clone()) else {
        return Err(CliError::no_result(format!("run {id} has no winner to propose: {}", selection.summary)));
    };
    let report_text =
        std::fs::read_to_string(dir.join(paths::REPORT)).unwrap_or_else(|_| selection.summary.to_string());
    if text.title.trim().is_empty() {
        text.title = state.task.title();
    }
    let title = text::one_line(&text.title, 200);
    let message = format!(
        "{title}\n\n{}\n\narbiter run {id} (candidate {winner})\n",
        text::cap(&text::clean(&report_text), MAX_MESSAGE_REPORT).trim()
    );
    let recorded: Option<PrRecord> =
        std::fs::read_to_string(dir.join(PR_JSON)).ok().and_then(|t| serde_json::from_str(&t).ok());
    let branch = branch.map(str::to_string).unwrap_or_else(|| format!("arbiter/run-{id}"));
    // The run directory is on disk and could have been edited: the patch is checked again.
    let limits = ctx.config()?.run.limits()?.value;
    let checked = materialize::check_file(&ctx.git, &state.base_commit, &dir.join(&rel), &limits)
        .await
        .map_err(|e| publish_error(e.into()))?
        .map_err(|refusal| publish_error(PublishError::Refused { base: state.base_commit.clone(), refusal }))?;
    let winner_commit = WinnerCommit { patch: &checked, message: &message };
    let whose = format!("run {id}");
    let commit = publish::winner_branch(&ctx.git, &whose, &branch, &winner_commit, recorded.as_ref())
        .await
        .map_err(publish_error)?;
    text.title = title;
    text.body = report::run_body(&report_text);
    let mut record = PrRecord {
        schema_version: arbiter_core::SCHEMA_VERSION,
        run_id: id.to_string(),
        branch: branch.clone(),
        commit: commit.clone(),
        published: None,
    };
    let run_dir = RunDir::open(dir.clone());
    let write_record = |record: &PrRecord| -> Result<(), CliError> {
        run_dir.write_json(PR_JSON, record)?;
        run_dir.reseal(&[PR_JSON])?;
        Ok(())
    };
    // The branch is arbiter's from now on: recorded before anything can fail.
    write_record(&record)?;
    let published = publish::publish_branch(
        &ctx.git,
        dest,
        &whose,
        &branch,
        &state.base_commit,
        &text,
        &offline_dir(ctx, id.as_str()),
    )
    .await
    .map_err(publish_error)?;
    record.published = Some(published.clone());
    write_record(&record)?;
    if as_json {
        crate::output::json(&Proposed { of: "run", id: id.as_str(), published: &published, commit: Some(&commit) });
    } else {
        out!("The winner of run {id} ({winner}) is on {branch} as {}.", &commit[..commit.len().min(10)]);
        say(&published, &whose);
    }
    Ok(exit::SUCCESS)
}

/// Proposes a plan's integration branch, records it (`change_opened`), and tells the issue
/// the plan came from.
async fn propose_plan(
    ctx: &RepoContext,
    plans: &Arc<dyn UnitQueue>,
    view: &PlanView,
    dest: &Destination,
    text: ChangeText,
    intake: &arbiter_core::intake::config::IntakeSection,
) -> Result<Published, CliError> {
    let id = &view.plan.header.id;
    let (runs_dir, offline) = (ctx.workspace.runs_dir(), offline_dir(ctx, &format!("plan-{id}")));
    let store: &dyn arbiter_store::plans::PlanStore = &**plans;
    let place = publish::PlanPlace { store, repo: &ctx.git, runs_dir: &runs_dir, offline_dir: &offline };
    let (published, untold) = publish::propose_plan(&place, view, dest, text, intake).await.map_err(publish_error)?;
    if let Some(e) = untold {
        warning!("arbiter: the issue of plan {id} could not be told: {e}");
    }
    Ok(published)
}

/// What a `plan run` set off when its plan finished (a pull request, the issue told, or what
/// went wrong), from the events after `after`.
pub async fn say_completion(plans: &Arc<dyn UnitQueue>, plan: &str, after: i64) {
    let Ok(events) = plans.events_after(plan, after, 1000).await else { return };
    for e in events {
        match e.entry() {
            Some(PlanLogEntry::Plan(PlanEntry::ChangeOpened(c))) => match (&c.url, &c.compare_url) {
                (Some(url), _) => {
                    out!("Plan {plan} finished: its pull request of {} into {} is {}", c.branch, c.base, printable(url))
                }
                (None, Some(compare)) => {
                    out!(
                        "Plan {plan} finished: {} is pushed; open its pull request into {} at {}",
                        c.branch,
                        c.base,
                        printable(compare)
                    )
                }
                (None, None) => {}
            },
            Some(PlanLogEntry::Plan(PlanEntry::IssueUpdated { url, stage, .. })) => {
                note!("arbiter: told {} that plan {plan} is {stage}", printable(&url))
            }
            Some(PlanLogEntry::Plan(PlanEntry::CompletionFailed { reason })) => {
                warning!("arbiter: plan {plan} finished, but {}", printable(&reason))
            }
            _ => {}
        }
    }
}

/// What was published, in words, with what to do next.
fn say(published: &Published, whose: &str) {
    match published {
        Published::Opened { url, existed, branch, base, .. } => {
            if *existed {
                out!("The pull request of {branch} into {base} for {whose} was open already: {url}");
            } else {
                out!("Opened a pull request of {branch} into {base} for {whose}: {url}");
            }
        }
        Published::Pushed { branch, base, compare_url, why, pushed } => {
            out!("Pushed {branch} to {} ({}).", pushed.remote, pushed.url);
            match compare_url {
                Some(url) => out!("Open the pull request into {base} at: {url}"),
                None => out!("Open a pull request of {branch} into {base} on the forge."),
            }
            if !why.is_empty() {
                note!("arbiter: no pull request was opened from here: {why}");
            }
        }
        Published::Offline { branch, bundle, patches } => {
            out!("The repository has no remote to push to; {branch} is written for sending:");
            out!("  bundle:  {}", bundle.display());
            out!(
                "  patches: {} file(s) in {}",
                patches.len(),
                patches.first().and_then(|p| p.parent()).map(|p| p.display().to_string()).unwrap_or_default()
            );
            out!(
                "Whoever receives them: `git fetch BUNDLE {branch}:{branch}` (then merge or push it), or `git am PATCHES...`;"
            );
            out!(
                "to send the patches by mail: `git send-email --to=ADDRESS PATCHES...`. Add a remote (`git remote add origin URL`) and run this again to push instead."
            );
        }
    }
}
