//! `arbiter plan run`: a plan's ready tasks as tournaments with a pool of local workers,
//! and the progress lines it prints.

use std::sync::Arc;
use std::time::Duration;

use arbiter_core::Clock;
use arbiter_core::plan::PlanSpec;
use arbiter_core::plan::event::PlanEntry;
use arbiter_core::plan::settings::{RunOverrides, task_settings};
use arbiter_core::settings::RunSettings;
use arbiter_runner::SystemClock;
use arbiter_runner::coordinator::{CoordinatorError, PlanRepositories};
use arbiter_runner::git::Git;
use arbiter_runner::plan_admin::AdminError;
use arbiter_runner::plan_branch::BranchError;
use arbiter_runner::plan_run::{PlanRunner, Progress, TaskSettings, local_worker_prefix};
use arbiter_runner::verify_detect;
use arbiter_runner::workspace::Workspace;
use arbiter_store::plans::PlanView;
use arbiter_store::units::UnitQueue;
use tokio_util::sync::CancellationToken;

use super::show::{render_table, unknown_beside};
use super::{local_admin, repositories, short};
use crate::commands::plan_output::{PlanDocument, PlanRan};
use crate::context::RepoContext;
use crate::error::{CliError, exit};
use crate::output::{note, out};

/// The repository a plan's tasks run in (for `plan run`).
async fn workspace_for(ctx: &RepoContext, header: &PlanSpec) -> Result<Workspace, CliError> {
    repositories(ctx).workspace_for(header).await.map_err(|e| CliError::from(AdminError::from(e)))
}

/// A branch refusal as the user sees it: exit 2, or 3 when git or the store failed.
fn branch_error(e: BranchError) -> CliError {
    if e.is_usage() { CliError::usage(e) } else { CliError::environment(e) }
}

#[allow(clippy::too_many_arguments)]
pub(super) async fn run(
    ctx: &RepoContext,
    runs: Arc<dyn arbiter_store::Store>,
    plans: Arc<dyn UnitQueue>,
    id: &str,
    workers: usize,
    lease_seconds: u64,
    overrides: &RunOverrides,
    as_json: bool,
) -> Result<u8, CliError> {
    if workers == 0 {
        return Err(CliError::usage("--workers 0: a plan needs at least one worker"));
    }
    if lease_seconds < 3 {
        return Err(CliError::usage("--lease-seconds must be at least 3 (heartbeats renew it every third)"));
    }
    let view = local_admin(ctx, plans.clone()).view(id).await?.view;
    let header = view.plan.header.clone();
    let workspace = workspace_for(ctx, &header).await?;
    let target = RepoContext { git: Git::new(workspace.repo_root().to_path_buf()), workspace: workspace.clone() };
    let config = target.config()?;
    // Every task that may still run must have valid settings and programs that exist, or
    // nothing starts.
    // Tasks without verify commands get the repository's own test command (found at the
    // plan's base), or none would check their winners.
    let base = match view.plan.branch_record() {
        Some(b) => b.base.clone(),
        None => header.base_ref.clone(),
    };
    let detected = verify_detect::at_commit(&target.git, &base).await.unwrap_or(None);
    let mut announced = false;
    for t in view.tasks.iter().filter(|t| !t.status.is_terminal()) {
        let mut settings = task_settings(&config, &header, &t.spec, overrides)
            .map_err(|e| CliError::usage(format!("task {} of plan {id}: {e}", t.spec.id)))?;
        verify_detect::apply(&mut settings, detected.as_ref());
        if !settings.may_apply_unchecked() {
            return Err(CliError::usage(verify_detect::unverified_task(id, &t.spec.id)));
        }
        if settings.verify.origin == arbiter_core::settings::Origin::Detected && !announced {
            announced = true;
            note!("arbiter: {} for tasks that name no verify command", settings.verification());
        }
        crate::commands::run::preflight(&settings, workspace.repo_root())
            .map_err(|e| CliError::usage(format!("task {} of plan {id}: {e}", t.spec.id)))?;
    }
    let overrides = overrides.clone();
    let base_settings = RunSettings::resolve_values(&config, &[])?;
    let (keys, models) = crate::model_access::for_run(&target.secrets_path(), &config, &base_settings)?;
    let analyst = crate::model_access::analyst(&config, models.as_deref())?;
    if !overrides.is_empty() {
        // What this run said over the plan, for whoever reads the plan's history: a key
        // typed into `--command` is masked like everywhere else.
        let redactor = arbiter_core::redact::Redactor::new(keys.clone());
        let said =
            RunOverrides { command: overrides.command.as_deref().map(|c| redactor.redact(c)), ..overrides.clone() };
        plans.note_event(id, PlanEntry::RunOverrides { overrides: said }, SystemClock.now()).await?;
    }

    let cancel = CancellationToken::new();
    let signals = tokio::spawn(crate::commands::run::watch_signals(cancel.clone()));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let printer = tokio::spawn(async move {
        while let Some(p) = rx.recv().await {
            note!("{}", describe(&p));
        }
    });
    let runner = Arc::new(PlanRunner {
        plans: plans.clone(),
        runs,
        clock: Arc::new(SystemClock),
        cancel: cancel.clone(),
        workspace,
        settings: Arc::new(TaskSettings::fixed(config, overrides)),
        process_env: std::env::vars().collect(),
        models,
        secrets: keys,
        sandboxing: crate::context::sandboxing()?,
        worker_prefix: local_worker_prefix(),
        lease: Duration::from_secs(lease_seconds),
        poll: Duration::from_secs(1),
        progress: Some(tx),
        analyst,
    });
    let events_before = plans.events(id).await?.last().map_or(0, |e| e.id);
    note!("Running plan {id} with {workers} worker(s) on {}", header.integration_branch);
    let outcome = runner.run(id, workers).await;
    drop(runner);
    let _ = printer.await;
    signals.abort();
    let outcome = outcome.map_err(|e| match e {
        CoordinatorError::Branch(b) => branch_error(b),
        e => CliError::environment(format!("the plan run stopped: {e}")),
    })?;
    let view = outcome.view;
    if !as_json {
        crate::commands::pr::say_completion(&plans, id, events_before).await;
    }
    let all_ok = view.tasks.iter().all(|t| t.status.is_success());
    let code = if outcome.interrupted {
        exit::INTERRUPTED
    } else if all_ok {
        exit::SUCCESS
    } else {
        exit::NO_RESULT
    };
    // What the run did stands even if the store cannot say more now.
    let attempts = plans.attempts(id).await.unwrap_or_default();
    let uncosted = arbiter_runner::plan_admin::call_costs(&target.workspace.runs_dir(), &attempts).await;
    if as_json {
        crate::output::json(&PlanRan {
            plan: PlanDocument::of(&view, &uncosted),
            interrupted: outcome.interrupted,
            exit_code: code,
        });
    } else {
        let done = view.tasks.iter().filter(|t| t.status.is_success()).count();
        out!();
        out!(
            "Plan {id}: {done} of {} task(s) done or skipped{}",
            view.tasks.len(),
            if outcome.interrupted { " (interrupted)" } else { "" }
        );
        crate::output::text(&render_table(&view, &uncosted, SystemClock.now()));
        out!(
            "Spent {}{} · integration branch {}",
            view.plan.budget.spent,
            unknown_beside(&uncosted),
            header.integration_branch
        );
        if let Some(why) = stopped_because(&view) {
            out!("{why}");
        }
    }
    Ok(code)
}

/// Why unfinished tasks did not run, when the plan itself stopped them.
fn stopped_because(view: &PlanView) -> Option<String> {
    let p = &view.plan;
    let unfinished = view.tasks.iter().any(|t| !t.status.is_terminal());
    if p.cancelled {
        Some(format!("The plan was cancelled; `arbiter plan retry {} TASK` runs a task again.", p.header.id))
    } else if unfinished && p.budget.exhausted() {
        Some(format!(
            "The plan's budget ({}) is spent, so no more tasks were claimed; `arbiter plan budget {} USD` raises it.",
            p.budget.limit.unwrap_or_default(),
            p.header.id
        ))
    } else {
        None
    }
}

/// One progress line of `plan run`.
fn describe(p: &Progress) -> String {
    match p {
        Progress::Claimed { task, unit, attempt, max_attempts, worker, base } => match unit.as_str() {
            "tournament" => format!("{task}: attempt {attempt}/{max_attempts} by {worker}, from {}", short(base)),
            unit => format!("{task}: {unit} of attempt {attempt}/{max_attempts} by {worker}, from {}", short(base)),
        },
        Progress::Spread { task, run, units } => {
            format!(
                "{task}: its tournament (run {run}) spreads over {units} units: each candidate, then the evaluation"
            )
        }
        Progress::UnitDone { task, unit, evaluation_ready, failed } => format!(
            "{task}: {unit} {}{}",
            failed.as_ref().map_or_else(|| "finished".to_string(), |why| format!("could not run its candidate: {why}")),
            if *evaluation_ready { "; every candidate is in, the evaluation is ready" } else { "" }
        ),
        Progress::Done { task, run, commit } => format!(
            "{task}: done — the winner of run {} is committed as {}",
            run.as_deref().unwrap_or("-"),
            short(commit)
        ),
        Progress::Recovered { task, commit } => format!(
            "{task}: its winner was already committed as {} (its previous worker stopped before reporting); done",
            short(commit)
        ),
        Progress::Failed { task, reason, retry_at: Some(at) } => {
            let wait = at.seconds_after(SystemClock.now());
            format!("{task}: attempt failed: {reason}; retrying in {wait}s")
        }
        Progress::Failed { task, reason, retry_at: None } => format!("{task}: failed: {reason}"),
        Progress::Released { task, reason } => format!("{task}: given back ({reason})"),
        Progress::Abandoned { task, reason } => format!("{task}: its report was abandoned ({reason})"),
        Progress::Refused { task, unit, reason } => format!("{task}: {unit} could not run on this worker: {reason}"),
        Progress::LeaseLost { task } => {
            format!("{task}: its lease was lost (taken over or the plan was cancelled); its result is not recorded")
        }
        Progress::Reclaimed { task, unit: None, worker } => {
            format!("{task}: taken back from {worker}, which stopped renewing its lease")
        }
        Progress::Reclaimed { task, unit: Some(unit), worker } => {
            format!("{task}: {unit} taken back from {worker}, which stopped renewing its lease")
        }
    }
}
