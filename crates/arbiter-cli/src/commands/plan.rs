//! `arbiter plan …`: import and apply plan files, inspect plans (export, show, status,
//! list, events), change them (create, budget, reset, cancel, retry), and run them with a
//! pool of local workers.
//!
//! Every command but `run` and `schema` goes through the plan administration port
//! ([`PlanAdmin`]): the store and repositories on this machine ([`LocalPlanAdmin`]), or a
//! control plane with `--server URL` ([`RemotePlanAdmin`], the admin token from
//! `ARBITER_TOKEN`). This module reads plan files (resolving a relative `repository`
//! against the file's directory), asks for confirmations and prints: the same output
//! whichever side answers. The port decides whether a plan owns its integration branch
//! ([`plan_branch`](arbiter_runner::plan_branch)); a refusal changes nothing.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arbiter_core::Clock;
use arbiter_core::money::Usd;
use arbiter_core::plan::PlanSpec;
use arbiter_core::plan::dag;
use arbiter_core::plan::event::PlanEntry;
use arbiter_core::plan::file::{Format, Syntax, read};
use arbiter_core::plan::gate::Rules;
use arbiter_core::plan::settings::{RunOverrides, task_settings};
use arbiter_core::plan::spec::export;
use arbiter_core::plan::state::TaskStatus;
use arbiter_core::settings::RunSettings;
use arbiter_core::task::shorten;
use arbiter_runner::SystemClock;
use arbiter_runner::coordinator::{CoordinatorError, PlanRepositories};
use arbiter_runner::git::Git;
use arbiter_runner::plan_admin::{
    AdminError, CallCosts, Imported, LocalPlanAdmin, NewPlan, PlanAdmin, PlanImport, all_events, normalize_lexically,
};
use arbiter_runner::plan_branch::BranchError;
use arbiter_runner::plan_repos::{ByRepository, is_url};
use arbiter_runner::plan_run::{PlanRunner, Progress, TaskSettings, local_worker_prefix};
use arbiter_runner::verify_detect;
use arbiter_runner::workspace::Workspace;
use arbiter_server::plan_client::RemotePlanAdmin;
use arbiter_store::plans::{BranchOrigin, ImportMode, PlanRecord, PlanView, TaskRecord};
use arbiter_store::units::UnitQueue;
use tokio_util::sync::CancellationToken;

use crate::cli::{PlanCommand, PlanServerArgs};
use crate::commands::plan_output::{
    PlanDocument, PlanEvents, PlanImported, PlanList, PlanPushed, PlanRan, PlanShown, PlanStatus,
};
use crate::context::RepoContext;
use crate::error::{CliError, exit};
use crate::output::{note, out, printable};

/// The JSON Schema of plan files (`arbiter plan schema`).
pub const SCHEMA: &str = include_str!("plan.schema.json");

/// Whose plans a command administers: the local store's or a control plane's.
struct Plans {
    admin: Arc<dyn PlanAdmin>,
    /// The repository the command runs in (`--repo`, else the current directory's): always
    /// there for the local store, where there is one with `--server`.
    ctx: Option<RepoContext>,
    /// The plans are a control plane's (`--server`).
    remote: bool,
}

impl Plans {
    async fn open(repo: Option<&Path>, remote: &PlanServerArgs) -> Result<Self, CliError> {
        if let Some(server) = remote.server() {
            let token = crate::commands::worker::admin_token()?;
            let client = crate::commands::worker::client(&server)?;
            let admin = Arc::new(RemotePlanAdmin::new(client, token));
            // Outside a repository is fine, unless --repo named one.
            let ctx = match repo {
                Some(_) => Some(RepoContext::locate(repo).await?),
                None => RepoContext::locate(None).await.ok(),
            };
            return Ok(Plans { admin, ctx, remote: true });
        }
        let ctx = RepoContext::locate(repo).await?;
        let (_, plans) = ctx.plan_stores().await?;
        Ok(Plans { admin: local_admin(&ctx, plans), ctx: Some(ctx), remote: false })
    }

    /// The `repository` a plan goes with: a git URL as it is; a path made absolute against
    /// `relative_to` (the plan file's directory), else the repository the command runs in;
    /// that repository when none is given. Locally the path must exist. For a control plane
    /// it need only exist on the server's machine, which judges it: resolved when it exists
    /// here, else normalized as text; and outside a repository, none given stays none.
    fn repository(&self, given: Option<&str>, relative_to: Option<&Path>) -> Result<Option<String>, CliError> {
        if let Some(url) = given.filter(|g| is_url(g)) {
            return Ok(Some(url.to_string()));
        }
        let root = self.ctx.as_ref().map(|c| c.workspace.repo_root().to_path_buf());
        let path = match (given, &root) {
            (None, Some(root)) => return Ok(Some(root.display().to_string())),
            (None, None) => return Ok(None),
            (Some(given), _) => {
                let base = match relative_to.map(Path::to_path_buf).or(root) {
                    Some(base) => base,
                    None => std::env::current_dir()?,
                };
                base.join(given)
            }
        };
        match path.canonicalize() {
            Ok(path) => Ok(Some(path.display().to_string())),
            Err(_) if self.remote => Ok(Some(normalize_lexically(&path).display().to_string())),
            Err(e) => Err(CliError::usage(format!(
                "the plan's repository {} does not exist ({e}); fix `repository` in the plan",
                path.display()
            ))),
        }
    }
}

/// The plan administration a command that watches plans reads through (`arbiter
/// dashboard`): the local store's, or a control plane's with `--server`, and what to call it.
pub(crate) async fn open_admin(
    repo: Option<&Path>,
    remote: &PlanServerArgs,
) -> Result<crate::commands::dashboard::Opened, CliError> {
    let plans = Plans::open(repo, remote).await?;
    let source = match (remote.server(), &plans.ctx) {
        (Some(server), _) => server.server,
        (None, Some(ctx)) => format!("the store of {}", ctx.workspace.repo_root().display()),
        (None, None) => "the local store".to_string(),
    };
    Ok(crate::commands::dashboard::Opened { admin: plans.admin, source })
}

/// Plan administration over `plans` and the repositories of this machine.
pub(crate) fn local_admin(ctx: &RepoContext, plans: Arc<dyn UnitQueue>) -> Arc<dyn PlanAdmin> {
    Arc::new(LocalPlanAdmin::new(plans, Arc::new(repositories(ctx))))
}

/// Plans' repositories as a local command sees them: a path, a clone of a URL kept under
/// `.arbiter/plans/<id>/repo`, or (naming none) the repository the command runs in.
pub(crate) fn repositories(ctx: &RepoContext) -> ByRepository {
    ByRepository::new(ctx.workspace.dir().join("plans"), Some(ctx.workspace.clone()))
}

/// The `--server` options of a plan command (`run` and `schema` have none).
fn remote_of(cmd: &PlanCommand) -> Option<&PlanServerArgs> {
    match cmd {
        PlanCommand::Import { remote, .. }
        | PlanCommand::Apply { remote, .. }
        | PlanCommand::Export { remote, .. }
        | PlanCommand::Show { remote, .. }
        | PlanCommand::Status { remote, .. }
        | PlanCommand::List { remote, .. }
        | PlanCommand::Create { remote, .. }
        | PlanCommand::Budget { remote, .. }
        | PlanCommand::Reset { remote, .. }
        | PlanCommand::Cancel { remote, .. }
        | PlanCommand::Retry { remote, .. }
        | PlanCommand::Events { remote, .. }
        | PlanCommand::Push { server: remote, .. } => Some(remote),
        PlanCommand::Run { .. } | PlanCommand::Schema | PlanCommand::New(_) => None,
    }
}

pub async fn plan(repo: Option<&Path>, cmd: &PlanCommand) -> Result<u8, CliError> {
    match cmd {
        PlanCommand::Schema => {
            crate::output::text(SCHEMA);
            return Ok(exit::SUCCESS);
        }
        PlanCommand::New(args) => return crate::commands::plan_new::new(repo, args).await,
        PlanCommand::Run {
            id,
            workers,
            lease_seconds,
            json,
            server,
            no_verify,
            runner,
            candidates,
            command,
            backend,
            timeout_seconds,
            strategy,
        } => {
            if let Some(url) = server {
                return Err(CliError::usage(format!(
                    "`arbiter plan run` runs a plan with workers on this machine, over its own store; a control plane's plans are run by its workers: start one with `arbiter worker run --server {url}` (with its token from `arbiter worker register`)"
                )));
            }
            let ctx = RepoContext::locate(repo).await?;
            let (runs, plans) = ctx.plan_stores().await?;
            let overrides = RunOverrides {
                no_verify: *no_verify,
                runner: runner.clone(),
                candidates: *candidates,
                command: command.clone(),
                backend: backend.clone(),
                timeout_seconds: *timeout_seconds,
                strategy: strategy.clone(),
            };
            return run(&ctx, runs, plans, id, *workers, *lease_seconds, &overrides, *json).await;
        }
        _ => {}
    }
    let plans = Plans::open(repo, remote_of(cmd).unwrap_or(&PlanServerArgs::default())).await?;
    let admin = &*plans.admin;
    let now = || SystemClock.now();
    match cmd {
        PlanCommand::Schema | PlanCommand::Run { .. } | PlanCommand::New(_) => Ok(exit::SUCCESS),
        PlanCommand::Import { file, update, adopt_branch, json, .. } => {
            import(&plans, file, mode(*update), None, Rules::Arbiter, adopt_branch.as_deref(), *json).await
        }
        PlanCommand::Apply { file, strict, gate, update, adopt_branch, json, .. } => {
            let rules = Rules::parse(gate).unwrap_or_default();
            import(&plans, file, mode(*update), Some(*strict), rules, adopt_branch.as_deref(), *json).await
        }
        PlanCommand::Export { id, output, format, .. } => {
            let view = admin.view(id).await?.view;
            let text = if format == "whilly" {
                let status_of = |task: &str| view.tasks.iter().find(|t| t.spec.id == task).map(|t| t.status);
                arbiter_core::plan::whilly::export(&view.spec(), &status_of)
            } else {
                export(&view.spec())
            };
            match output {
                Some(path) => std::fs::write(path, &text)
                    .map_err(|e| CliError::environment(format!("cannot write {}: {e}", path.display())))?,
                None => crate::output::text(&text),
            }
            Ok(exit::SUCCESS)
        }
        PlanCommand::Show { id, json, .. } => {
            let details = admin.view(id).await?;
            let view = details.view;
            if *json {
                crate::output::json(&PlanShown { plan: PlanDocument::of(&view, &details.call_costs) });
            } else {
                crate::output::text(&render_dag(&view, crate::terminal::stdout_colour()));
            }
            Ok(exit::SUCCESS)
        }
        PlanCommand::Status { id, json, .. } => {
            let details = admin.view(id).await?;
            let (view, attempts) = (&details.view, &details.attempts);
            if *json {
                crate::output::json(&PlanStatus::of(view, attempts, &details.call_costs));
            } else {
                crate::output::text(&render_status(view, &details.call_costs, now()));
            }
            Ok(exit::SUCCESS)
        }
        PlanCommand::List { json, .. } => {
            let all = admin.list().await?;
            if *json {
                crate::output::json(&PlanList::of(&all));
            } else if all.is_empty() {
                out!("No plans yet; add one with `arbiter plan import FILE`.");
            } else {
                out!("{:<24} {:>6} {:>6}  {:<18} NAME", "PLAN", "TASKS", "DONE", "BUDGET");
                for p in &all {
                    let total: usize = p.counts.values().sum();
                    let done = p.counts.get(&TaskStatus::Done).copied().unwrap_or(0);
                    let budget = match p.budget.limit {
                        Some(l) => format!("{} of {l}", p.budget.spent),
                        None => format!("{} (no limit)", p.budget.spent),
                    };
                    let name = printable(&p.name);
                    let name = if p.cancelled { format!("{name} (cancelled)") } else { name };
                    out!("{:<24} {:>6} {:>6}  {:<18} {name}", p.id, total, done, budget);
                }
            }
            Ok(exit::SUCCESS)
        }
        PlanCommand::Create { id, name, budget, repository, .. } => {
            let budget_usd = budget.as_deref().map(parse_usd).transpose()?;
            let repository = plans.repository(repository.as_deref(), None)?.ok_or_else(|| {
                CliError::usage(
                    "outside a repository, `plan create --server` needs --repository PATH_OR_URL: the plan's repository as the server sees it (an absolute path on the server's machine, or a git URL it can clone)",
                )
            })?;
            admin
                .create(&NewPlan { id: id.clone(), name: name.clone(), repository: Some(repository), budget_usd })
                .await?;
            out!("Created plan {id} ({}); add tasks with `arbiter plan import FILE --update`.", printable(name));
            Ok(exit::SUCCESS)
        }
        PlanCommand::Budget { id, usd, .. } => {
            let limit = if usd.eq_ignore_ascii_case("none") { None } else { Some(parse_usd(usd)?) };
            let b = admin.set_budget(id, limit, &local_actor()).await?;
            match b.limit {
                Some(l) if b.exhausted() => {
                    out!("Plan {id}: budget {l}, {} spent — still spent; no task will be claimed", b.spent)
                }
                Some(l) => out!("Plan {id}: budget {l}, {} spent, {} reserved", b.spent, b.reserved),
                None => out!("Plan {id}: no budget limit ({} spent)", b.spent),
            }
            Ok(exit::SUCCESS)
        }
        PlanCommand::Reset { id, hard, keep_branch, yes, .. } => {
            // What happens to the branch is decided before anything changes: a branch the
            // plan does not own (or a checked-out one) refuses the whole reset.
            let preview = admin.reset_preview(id, *keep_branch).await?;
            let branch = &preview.branch;
            let branch_then = match &branch.new_tip {
                Some(base) => format!(
                    "Its integration branch {} goes back to where arbiter created it ({})",
                    branch.name,
                    short(base)
                ),
                None => format!("Its integration branch {} stays where it is", branch.name),
            };
            if !*yes
                && !confirm(&format!(
                    "Reset plan {id} ({} tasks){}? {branch_then}. [y/N] ",
                    preview.tasks,
                    if *hard { ", forgetting attempts and spending" } else { "" }
                ))?
            {
                out!("Not reset.");
                return Ok(exit::SUCCESS);
            }
            let done = admin.reset(id, *hard, *keep_branch).await?;
            let (n, branch) = (done.reset, &done.branch);
            match (&branch.old_tip, &branch.new_tip, &branch.kept) {
                (Some(old), Some(new), _) => out!(
                    "Reset {n} task(s) of plan {id}; {} was at {} and now points where arbiter created it ({})",
                    branch.name,
                    short(old),
                    short(new)
                ),
                (Some(old), None, _) => out!(
                    "Reset {n} task(s) of plan {id}; {} stays at {} (--keep-branch): the plan's commits stay on it",
                    branch.name,
                    short(old)
                ),
                _ => out!("Reset {n} task(s) of plan {id}."),
            }
            Ok(exit::SUCCESS)
        }
        PlanCommand::Cancel { id, .. } => {
            let n = admin.cancel(id, &local_actor()).await?;
            out!("Cancelled plan {id}: {n} unfinished task(s); running attempts are stopped at their next heartbeat.");
            Ok(exit::SUCCESS)
        }
        PlanCommand::Retry { id, task, .. } => {
            let status = admin.retry(id, task, &local_actor()).await?;
            out!("Task {task} of plan {id} is {} again, with new attempts.", status.as_str());
            Ok(exit::SUCCESS)
        }
        PlanCommand::Push { id, remote, json, .. } => {
            let pushed = admin.push(id, remote).await?;
            if *json {
                crate::output::json(&PlanPushed { pushed: &pushed });
            } else if pushed.up_to_date {
                out!("{} ({}) has {} at {} already.", pushed.remote, pushed.url, pushed.branch, short(&pushed.commit));
            } else {
                out!("Pushed {} at {} to {} ({}).", pushed.branch, short(&pushed.commit), pushed.remote, pushed.url);
            }
            Ok(exit::SUCCESS)
        }
        PlanCommand::Events { id, json, .. } => {
            let events = all_events(admin, id).await?;
            if *json {
                crate::output::json(&PlanEvents { events: &events });
            } else {
                for e in &events {
                    out!(
                        "{:>6}  {}  {:<26} {:<10} {}",
                        e.id,
                        e.at.rfc3339(),
                        e.kind,
                        e.task_id.as_deref().unwrap_or("-"),
                        printable(&e.entry().map(|entry| entry.describe()).unwrap_or_else(|| e.data.to_string()))
                    );
                }
            }
            Ok(exit::SUCCESS)
        }
    }
}

fn mode(update: bool) -> ImportMode {
    if update { ImportMode::Update } else { ImportMode::Add }
}

fn short(commit: &str) -> &str {
    &commit[..commit.len().min(10)]
}

fn parse_usd(text: &str) -> Result<Usd, CliError> {
    Usd::parse(text).filter(|u| *u >= Usd::ZERO).ok_or_else(|| {
        CliError::usage(format!("'{text}' is not an amount of USD; write it like 5 or 2.50 (at most 12 decimals)"))
    })
}

pub(crate) fn confirm(question: &str) -> Result<bool, CliError> {
    if !std::io::stdin().is_terminal() {
        return Err(CliError::usage("this asks for confirmation and there is no terminal to answer it: pass --yes"));
    }
    crate::output::prompt(question);
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

/// The repository a plan's tasks run in (for `plan run`).
async fn workspace_for(ctx: &RepoContext, header: &PlanSpec) -> Result<Workspace, CliError> {
    repositories(ctx).workspace_for(header).await.map_err(|e| CliError::from(AdminError::from(e)))
}

/// A branch refusal as the user sees it: exit 2, or 3 when git or the store failed.
fn branch_error(e: BranchError) -> CliError {
    if e.is_usage() { CliError::usage(e) } else { CliError::environment(e) }
}

#[allow(clippy::too_many_arguments)]
async fn import(
    plans: &Plans,
    file: &Path,
    mode: ImportMode,
    apply: Option<bool>,
    gate: Rules,
    adopt: Option<&str>,
    as_json: bool,
) -> Result<u8, CliError> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| CliError::usage(format!("cannot read the plan file {}: {e}", file.display())))?;
    let dir: Option<PathBuf> = file.canonicalize().ok().and_then(|p| p.parent().map(Path::to_path_buf));
    // A Whilly test step is a command when its program is there: on PATH, or in the
    // repository (the plan's, else the file's, else this one).
    let repo_root = plans.ctx.as_ref().map(|c| c.workspace.repo_root().to_path_buf());
    let program_exists = |word: &str| program_exists(word, repo_root.as_deref().or(dir.as_deref()));
    let (mut spec, format) = read(&text, Syntax::of_path(&file.display().to_string()), &program_exists)
        .map_err(|e| CliError::usage(format!("{}: {e}", file.display())))?;
    spec.repository = plans.repository(spec.repository.as_deref(), dir.as_deref())?;
    if let (false, Some(ctx)) = (plans.remote, &plans.ctx) {
        let problems = arbiter_core::plan::check::check_names(&spec, &ctx.config()?);
        if !problems.is_empty() {
            return Err(arbiter_store::StoreError::PlanInvalid {
                problems: problems.iter().map(|p| p.to_string()).collect(),
            }
            .into());
        }
    }
    let import = PlanImport { spec, mode, apply, adopt_branch: adopt.map(str::to_string), gate };
    let Imported { report, adopted_branch: adopted, verdicts } = plans.admin.import(&import).await?;
    let spec = &import.spec;
    if as_json {
        crate::output::json(&PlanImported::new(&spec.id, &report, adopted.as_ref(), &verdicts));
        return Ok(exit::SUCCESS);
    }
    if format == Format::Whilly {
        print_step_classes(spec);
    }
    let what = if report.created_plan { "Created" } else { "Updated" };
    out!(
        "{what} plan {} ({}): {} added, {} updated, {} unchanged{}",
        spec.id,
        printable(&spec.name),
        report.added.len(),
        report.updated.len(),
        report.unchanged.len(),
        if report.skipped.is_empty() { String::new() } else { format!(", {} skipped", report.skipped.len()) }
    );
    if let Some(b) = &adopted {
        out!(
            "  integration branch {} adopted at {}: arbiter commits onto it and never moves it back",
            b.name,
            short(&b.base)
        );
    }
    if !report.differing.is_empty() {
        out!(
            "  {} existing task(s) differ from the file ({}); pass --update to change those that have not started",
            report.differing.len(),
            report.differing.join(", ")
        );
    }
    for v in &verdicts {
        let skipped = report.skipped.contains(&v.task);
        out!(
            "  {:<7} {}: {}{}",
            v.verdict.as_str(),
            v.task,
            v.reason,
            if skipped { " — skipped (--strict)" } else { "" }
        );
    }
    Ok(exit::SUCCESS)
}

/// How a Whilly file's test steps were read: commands run as verify commands, sentences
/// became manual checks (shown to the agents and the judges).
fn print_step_classes(spec: &PlanSpec) {
    let commands: usize = spec.tasks.iter().map(|t| t.verify.len()).sum();
    let checks: usize = spec.tasks.iter().map(|t| t.manual_checks.len()).sum();
    out!(
        "Whilly test steps: {commands} command(s) run as verify commands, {checks} sentence(s) kept as manual checks for the agents and the judges"
    );
    for t in spec.tasks.iter().filter(|t| !t.manual_checks.is_empty()) {
        for c in &t.manual_checks {
            out!("  check   {}: {}", t.id, printable(&shorten(c, 100)));
        }
    }
}

/// Whether a test step's first word names a program: a path (relative to `repo`) that
/// exists, or an executable file in a directory of `PATH`.
pub(crate) fn program_exists(word: &str, repo: Option<&Path>) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if word.contains('/') {
        let path = Path::new(word);
        return if path.is_absolute() { executable(path) } else { repo.is_some_and(|r| executable(&r.join(path))) };
    }
    std::env::var_os("PATH").is_some_and(|paths| std::env::split_paths(&paths).any(|d| executable(&d.join(word))))
}

/// A status badge, coloured on a terminal.
fn badge(status: TaskStatus, colour: bool) -> String {
    let text = format!("[{}]", status.as_str().to_uppercase());
    if !colour {
        return format!("{text:<11}");
    }
    let code = match status {
        TaskStatus::Done => "32",
        TaskStatus::Running => "33",
        TaskStatus::Ready => "36",
        TaskStatus::Failed | TaskStatus::Cancelled => "31",
        TaskStatus::Blocked | TaskStatus::Skipped => "2",
    };
    crate::output::paint(code, &format!("{text:<11}"))
}

/// `plan show`: the tasks by depth (dependencies above their dependents), each with its
/// badge and what it depends on.
pub(crate) fn render_dag(view: &PlanView, colour: bool) -> String {
    let p = &view.plan;
    let mut out = format!("Plan {} — {}\n", p.header.id, printable(&p.header.name));
    out.push_str(&format!("{}\n", "─".repeat(out.chars().count().saturating_sub(1).max(20))));
    let edges = view.edges();
    let depths = dag::depths(&edges);
    let width = view.tasks.iter().map(|t| t.spec.id.chars().count()).max().unwrap_or(0);
    for id in dag::order(&edges) {
        let Some(t) = view.task(&id) else { continue };
        let indent = "  ".repeat(depths.get(&id).copied().unwrap_or(0));
        out.push_str(&format!(
            "{indent}{} {:<width$}  {}\n",
            badge(t.status, colour),
            t.spec.id,
            printable(&t.spec.title)
        ));
        if !t.spec.dependencies.is_empty() {
            let waiting = view.waiting_on(t);
            let mut line = format!("{indent}            └─ depends on: {}", t.spec.dependencies.join(", "));
            if t.status == TaskStatus::Blocked && !waiting.is_empty() {
                let w: Vec<String> = waiting.iter().map(|(d, s)| format!("{d} ({})", s.as_str())).collect();
                line.push_str(&format!(" — waiting on {}", w.join(", ")));
            }
            out.push_str(&line);
            out.push('\n');
        }
    }
    let counts: Vec<String> = view.counts().iter().map(|(s, n)| format!("{} {n}", s.as_str())).collect();
    out.push_str(&format!("Summary: {} task(s) · {}\n", view.tasks.len(), counts.join(" · ")));
    out
}

/// One task's note: why it waits, failed or was skipped, or what it produced.
fn note(view: &PlanView, t: &TaskRecord, now: arbiter_core::time::Timestamp) -> String {
    match t.status {
        TaskStatus::Blocked => {
            let w: Vec<String> = view.waiting_on(t).iter().map(|(d, s)| format!("{d} ({})", s.as_str())).collect();
            format!("blocked by {}", w.join(", "))
        }
        TaskStatus::Running => match (&t.lease_owner, t.lease_expires) {
            (Some(w), Some(e)) => format!("held by {w}, lease for {}s more", e.seconds_after(now)),
            // Spread over units: what holds it up, when something does (a refused unit).
            _ => t.reason.clone().unwrap_or_default(),
        },
        TaskStatus::Ready if t.not_before > now => {
            format!("retry in {}s: {}", t.not_before.seconds_after(now), t.reason.clone().unwrap_or_default())
        }
        TaskStatus::Done => t.run_id.as_ref().map(|r| format!("run {r}")).unwrap_or_default(),
        _ => t.reason.clone().unwrap_or_default(),
    }
}

/// A task's cost as far as it is known: "unknown" when none of its calls had one, "≥$0.12"
/// when some had none (as `runs show` says "unknown" or "partial" of the same run).
fn cost_cell(cost: Usd, calls: Option<&CallCosts>) -> String {
    match calls {
        None => cost.to_string(),
        Some(c) if c.all_unknown() => "unknown".to_string(),
        Some(_) => format!("≥{cost}"),
    }
}

/// The line under a table whose tasks had calls of unknown cost, saying what that means.
/// The calls of unknown cost of every task.
fn uncosted_total(uncosted: &BTreeMap<String, CallCosts>) -> u64 {
    uncosted.values().map(|c| c.uncosted).sum()
}

fn uncosted_note(uncosted: &BTreeMap<String, CallCosts>) -> String {
    let calls = uncosted_total(uncosted);
    if calls == 0 {
        return String::new();
    }
    format!(
        "Cost unknown for {calls} call(s) of {} task(s): their runner reports no usage or price (a command agent, a model without prices); the amounts spent count only what is known.\n",
        uncosted.len()
    )
}

fn render_table(view: &PlanView, uncosted: &BTreeMap<String, CallCosts>, now: arbiter_core::time::Timestamp) -> String {
    let width = view.tasks.iter().map(|t| t.spec.id.chars().count()).max().unwrap_or(4).max(4);
    let mut out =
        format!("{:<width$}  {:<9} {:>8}  {:<10} {:<10} NOTE\n", "TASK", "STATUS", "ATTEMPTS", "COST", "COMMIT");
    for t in &view.tasks {
        out.push_str(&format!(
            "{:<width$}  {:<9} {:>8}  {:<10} {:<10} {}\n",
            t.spec.id,
            t.status.as_str(),
            format!("{}/{}", t.attempts, t.max_attempts),
            cost_cell(t.cost, uncosted.get(&t.spec.id)),
            t.commit.as_deref().map(short).unwrap_or("-"),
            printable(&note(view, t, now))
        ));
    }
    out.push_str(&uncosted_note(uncosted));
    out
}

/// Whose the integration branch is, in a few words.
fn branch_owner(p: &PlanRecord) -> String {
    match p.branch_record() {
        Some(b) if b.origin == BranchOrigin::Created => format!("created by arbiter at {}", short(&b.base)),
        Some(b) => format!("adopted at {}; never moved back", short(&b.base)),
        None => "not created yet: the first run creates it".into(),
    }
}

fn render_status(
    view: &PlanView,
    uncosted: &BTreeMap<String, CallCosts>,
    now: arbiter_core::time::Timestamp,
) -> String {
    let p = &view.plan;
    let mut out = format!(
        "Plan {} — {}{}\n",
        p.header.id,
        printable(&p.header.name),
        if p.cancelled { " (cancelled)" } else { "" }
    );
    out.push_str(&format!(
        "Repository {} · base {} · integration branch {} ({})\n",
        p.header.repository.as_deref().unwrap_or("-"),
        p.header.base_ref,
        p.header.integration_branch,
        branch_owner(p)
    ));
    if let Some(source) = &p.header.source {
        out.push_str(&format!("From {}\n", printable(source)));
    }
    if let Some(prd) = &p.header.prd {
        out.push_str(&format!("Requirements {}\n", printable(prd)));
    }
    out.push_str(&match p.budget.limit {
        Some(l) => format!(
            "Budget {l}: {} spent{}, {} reserved{}\n",
            p.budget.spent,
            unknown_beside(uncosted),
            p.budget.reserved,
            if p.budget.exhausted() {
                " — spent: no task will be claimed until `arbiter plan budget` raises it"
            } else {
                ""
            }
        ),
        None => format!("No budget limit: {} spent{}\n", p.budget.spent, unknown_beside(uncosted)),
    });
    let counts: Vec<String> = view.counts().iter().map(|(s, n)| format!("{} {n}", s.as_str())).collect();
    out.push_str(&format!("{} task(s): {}\n\n", view.tasks.len(), counts.join(", ")));
    out.push_str(&render_table(view, uncosted, now));
    out
}

/// ", plus N call(s) of unknown cost" after an amount spent, when there are such calls.
fn unknown_beside(uncosted: &BTreeMap<String, CallCosts>) -> String {
    match uncosted_total(uncosted) {
        0 => String::new(),
        calls => format!(", plus {calls} call(s) of unknown cost"),
    }
}

#[allow(clippy::too_many_arguments)]
async fn run(
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

/// Who acts from this command line, as plan events name them: `cli:USER` (`cli` when the
/// user is unknown). A control plane names its callers itself, from their tokens.
pub fn local_actor() -> String {
    match std::env::var("USER").ok().filter(|u| !u.is_empty() && u.chars().all(|c| c.is_ascii_graphic())) {
        Some(user) => format!("cli:{user}"),
        None => "cli".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbiter_core::plan::file::parse;

    /// The field names a parser error lists as expected (`expected one of `a`, `b``).
    fn accepted_fields(json: &str) -> Vec<String> {
        let err = parse(json, Syntax::Json).unwrap_err().0;
        let list = err.split("expected one of").nth(1).unwrap_or_else(|| panic!("{err}"));
        let mut fields: Vec<String> = list.split(',').map(|f| f.trim().trim_matches('`').to_string()).collect();
        fields.sort();
        fields
    }

    fn schema_fields(pointer: &str) -> Vec<String> {
        let schema: serde_json::Value = serde_json::from_str(SCHEMA).expect("the schema is JSON");
        let mut fields: Vec<String> = schema
            .pointer(pointer)
            .and_then(|p| p.as_object())
            .unwrap_or_else(|| panic!("no {pointer} in the schema"))
            .keys()
            .cloned()
            .collect();
        fields.sort();
        fields
    }

    #[test]
    fn the_schema_names_exactly_what_the_parser_accepts() {
        let plan = accepted_fields(r#"{"id": "p", "name": "P", "tasks": [], "zzz": 1}"#);
        assert_eq!(plan, schema_fields("/properties"));
        let defaults = accepted_fields(r#"{"id": "p", "name": "P", "tasks": [], "defaults": {"zzz": 1}}"#);
        assert_eq!(defaults, schema_fields("/$defs/defaults/properties"));
        let task = accepted_fields(r#"{"id": "p", "name": "P", "tasks": [{"id": "a", "zzz": 1}]}"#);
        assert_eq!(task, schema_fields("/$defs/task/properties"));
    }
}
