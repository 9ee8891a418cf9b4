//! `arbiter pr latest|RUN_ID` and `arbiter pr --plan ID`: a run's winner (a branch with one
//! commit, the final report as its message body) or a plan's integration branch, pushed to
//! the repository's remote and proposed as a pull (merge) request with the user's `gh` or
//! `glab` — or, without them, pushed with the page that opens one by hand; without a
//! remote, a bundle and a patch series to send. A plan that came from an issue tells the
//! issue (labels, a comment linking the pull request).
//!
//! Also what a finished `plan run` does ([`on_plan_finished`]): a plan with `push = true`
//! whose tasks are all done opens its pull request, and a plan from an issue reports to it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arbiter_core::artifact::{RunState, SelectionArtifact, paths};
use arbiter_core::intake::report;
use arbiter_core::intake::text;
use arbiter_core::plan::event::PlanEntry;
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
use crate::output::{JsonDocument, note, out, warning};

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
    let report_text = std::fs::read_to_string(dir.join(paths::REPORT)).unwrap_or_else(|_| selection.summary.clone());
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
    let scratch = ctx.workspace.scratch_dir();
    std::fs::create_dir_all(&scratch)?;
    let winner_commit = WinnerCommit {
        base: &state.base_commit,
        patch: &dir.join(&rel),
        message: &message,
        scratch_index: &scratch.join(format!("index-pr-{id}")),
    };
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
    mut text: ChangeText,
    intake: &arbiter_core::intake::config::IntakeSection,
) -> Result<Published, CliError> {
    let header = &view.plan.header;
    let id = &header.id;
    let branch = &header.integration_branch;
    let Some(tip) = ctx.git.ref_target(&format!("refs/heads/{branch}")).await? else {
        return Err(CliError::usage(format!(
            "plan {id}'s integration branch {branch} does not exist yet: `arbiter plan run {id}` creates it with the first winner"
        )));
    };
    let base_commit = match view.plan.branch_record() {
        Some(b) => b.base.clone(),
        None => ctx.git.resolve_commit(&header.base_ref).await.unwrap_or(tip),
    };
    if text.base.is_none()
        && header.base_ref != "HEAD"
        && ctx.git.branch_exists(&header.base_ref).await.unwrap_or(false)
    {
        text.base = Some(header.base_ref.clone());
    }
    if text.title.trim().is_empty() {
        text.title = format!("{} (plan {id})", text::one_line(&header.name, 150));
    }
    let attempts = plans.attempts(id).await.unwrap_or_default();
    let uncosted = arbiter_runner::plan_admin::call_costs(&ctx.workspace.runs_dir(), &attempts).await;
    let unknown: u64 = uncosted.values().map(|c| c.uncosted).sum();
    let spent = if unknown > 0 {
        format!("{} plus {unknown} call(s) of unknown cost", view.plan.budget.spent)
    } else {
        view.plan.budget.spent.to_string()
    };
    text.body = report::plan_body(&publish::plan_outcome(view, &ctx.workspace.runs_dir(), spent));
    let published = publish::publish_branch(
        &ctx.git,
        dest,
        &format!("plan {id}"),
        branch,
        &base_commit,
        &text,
        &offline_dir(ctx, &format!("plan-{id}")),
    )
    .await
    .map_err(publish_error)?;
    let now = || arbiter_core::Clock::now(&arbiter_runner::SystemClock);
    if let Some(change) = published.change_record() {
        plans.note_event(id, PlanEntry::ChangeOpened(change), now()).await?;
    }
    if header.source.is_some() && !matches!(published, Published::Offline { .. }) {
        let events = plans.events(id).await?;
        match publish::report_issue(view, &events, intake, published.url()).await {
            Ok(Some(entry)) => plans.note_event(id, entry, now()).await?,
            Ok(None) => {}
            Err(e) => warning!("arbiter: the issue of plan {id} could not be told: {e}"),
        }
    }
    Ok(published)
}

/// What a finished `plan run` does: a plan with `push = true` whose tasks are all done or
/// skipped opens its pull request; a plan that came from an issue tells the issue how it
/// ended. Failures are warnings: the plan's work stands.
pub async fn on_plan_finished(ctx: &RepoContext, plans: &Arc<dyn UnitQueue>, view: &PlanView) {
    let (success, settled) = publish::finished(view);
    let header = &view.plan.header;
    if !settled || (!header.push && header.source.is_none()) {
        return;
    }
    let config = match ctx.config() {
        Ok(c) => c,
        Err(e) => return warning!("arbiter: plan {} finished, but it was not proposed: {e}", header.id),
    };
    if header.push && success {
        let remote = config.forge.remote.clone().unwrap_or_else(|| "origin".into());
        let proposed = match publish::destination(&ctx.git, &remote, &config.forge).await {
            Ok(dest) => propose_plan(ctx, plans, view, &dest, ChangeText::default(), &config.intake).await,
            Err(e) => Err(publish_error(e)),
        };
        match proposed {
            Ok(published) => say(&published, &format!("plan {}", header.id)),
            Err(e) => warning!(
                "arbiter: plan {} finished, but its pull request was not opened: {}; `arbiter pr --plan {}` tries again",
                header.id,
                e.message,
                header.id
            ),
        }
        return;
    }
    if header.source.is_some() {
        let events = plans.events(&header.id).await.unwrap_or_default();
        match publish::report_issue(view, &events, &config.intake, None).await {
            Ok(Some(entry)) => {
                let now = arbiter_core::Clock::now(&arbiter_runner::SystemClock);
                if let Err(e) = plans.note_event(&header.id, entry, now).await {
                    warning!("arbiter: the report to the issue of plan {} could not be recorded: {e}", header.id);
                }
                note!("arbiter: told {} how plan {} ended", header.source.as_deref().unwrap_or("-"), header.id);
            }
            Ok(None) => {}
            Err(e) => warning!("arbiter: the issue of plan {} could not be told how it ended: {e}", header.id),
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
