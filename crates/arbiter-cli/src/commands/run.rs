//! `arbiter run`: validate everything, run the tournament, report.

use std::path::Path;
use std::sync::Arc;

use arbiter_core::settings::{ApplyMode, RunSettings, RunnerKind};
use arbiter_core::status::RunStatus;
use arbiter_core::task::Task;
use arbiter_runner::SystemClock;
use arbiter_runner::cli_runner::{Cli, install_hint};
use arbiter_runner::engine::{Engine, EngineError, RunOutcome, RunRequest};
use arbiter_runner::preflight::{CommandSite, check_program, inside_repository, locate_program};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::cli::RunArgs;
use crate::context::RepoContext;
use crate::error::{CliError, exit};
use crate::output::{JsonDocument, note, out, warning};
use crate::progress;

pub async fn run(repo: Option<&Path>, args: &RunArgs) -> Result<u8, CliError> {
    let ctx = RepoContext::locate(repo).await?;
    let task_text = match (&args.task, &args.task_file) {
        (Some(t), _) => t.clone(),
        (None, Some(file)) => std::fs::read_to_string(file)
            .map_err(|e| CliError::usage(format!("cannot read the task file {}: {e}", file.display())))?,
        (None, None) => return Err(CliError::usage("give the task with --task TEXT or --task-file FILE")),
    };
    let config = ctx.config()?;
    let mut settings = RunSettings::resolve(&config, &[&args.settings.options().map_err(CliError::usage)?])?;
    detect_verify(&ctx, &mut settings, &args.base).await?;
    let task =
        Task::new(task_text, args.success_criteria.clone(), settings.verify.value.clone()).map_err(CliError::usage)?;
    run_uncommitted_programs_outside(&ctx, &mut settings, &args.base).await?;
    preflight(&settings, ctx.workspace.repo_root())?;
    check_paths_exist_at_base(&ctx, &settings, &args.base).await?;
    if let ApplyMode::Branch(name) = &settings.apply.value {
        if !ctx.git.valid_branch_name(name).await {
            return Err(CliError::usage(format!("'{name}' is not a valid branch name for --apply branch:NAME")));
        }
        if ctx.git.branch_exists(name).await? {
            return Err(CliError::usage(format!(
                "branch '{name}' already exists; choose another name for --apply branch:NAME"
            )));
        }
    }
    let mut prepared = Prepared::new(&ctx, &config, task, settings, args.base.clone(), args.allow_dirty)?;
    preflight_agents(&mut prepared, ctx.workspace.repo_root())?;
    let outcome = execute(&ctx, prepared).await?;
    report(&outcome, args.json);
    if exit_code(&outcome) == exit::USAGE {
        // What the checks need is the user's to fix (see `exit_code`): said as an error, with
        // the command, the cause and the fix, like any other bad input.
        let log = outcome.run_dir.join("baseline");
        return Err(CliError::usage(format!("{} (the logs: {})", outcome.decision.summary, log.display())));
    }
    Ok(exit_code(&outcome))
}

/// Without verify commands (given or configured) and without `--no-verify`, the repository's
/// own test command checks the candidates: shown before anything starts. When there is none,
/// the run ranks the candidates but applies nothing, and says how to add one.
pub async fn detect_verify(ctx: &RepoContext, settings: &mut RunSettings, base: &str) -> Result<(), CliError> {
    if !settings.wants_detection() {
        if settings.unverified.value {
            warning!("arbiter: --no-verify: no verify command checks the candidates; the winner is applied unverified");
        }
        return Ok(());
    }
    let commit = ctx.git.resolve_commit(base).await?;
    match arbiter_runner::verify_detect::at_commit(&ctx.git, &commit).await? {
        Some(d) => {
            note!(
                "arbiter: no verify command given: checking every candidate with `{}` (detected from {}); pass --verify 'CMD' for another, or --no-verify for none",
                d.command,
                d.from
            );
            settings.use_detected_verify(d.command, d.from);
        }
        None => warning!(
            "arbiter: no verify command given and none found in the repository: the candidates are ranked, but the winner is not applied. Give one with --verify 'CMD' (or `verify = [\"CMD\"]` under [run] in .arbiter/config.toml), or pass --no-verify to apply an unverified winner"
        ),
    }
    Ok(())
}

/// A validated run, ready to start.
pub struct Prepared {
    pub task: Task,
    pub settings: RunSettings,
    pub base: String,
    pub allow_dirty: bool,
    pub secrets: Vec<String>,
    pub models: Option<Arc<arbiter_runner::runners::ModelAccess>>,
}

impl Prepared {
    /// Adds what the run needs from the configured backends: model access for the built-in
    /// agent (one client shared by every candidate) and the keys to redact.
    pub fn new(
        ctx: &RepoContext,
        config: &arbiter_core::settings::ConfigFile,
        task: Task,
        settings: RunSettings,
        base: String,
        allow_dirty: bool,
    ) -> Result<Self, CliError> {
        let (keys, models) = crate::model_access::for_run(&ctx.secrets_path(), config, &settings)?;
        Ok(Prepared { task, settings, base, allow_dirty, secrets: keys, models })
    }
}

/// Runs a validated tournament with live progress and signal handling.
pub async fn execute(ctx: &RepoContext, p: Prepared) -> Result<RunOutcome, CliError> {
    let request = RunRequest {
        workspace: ctx.workspace.clone(),
        task: p.task,
        settings: p.settings,
        base_ref: p.base,
        allow_dirty: p.allow_dirty,
    };
    drive(ctx, p.models, p.secrets, |engine| async move { engine.run(request).await }).await
}

/// Gives `go` an engine with live progress, Ctrl-C/SIGTERM handling and the repository's
/// store, and turns its errors into exit codes.
pub async fn drive<F, Fut>(
    ctx: &RepoContext,
    models: Option<Arc<arbiter_runner::runners::ModelAccess>>,
    secrets: Vec<String>,
    go: F,
) -> Result<RunOutcome, CliError>
where
    F: FnOnce(Engine) -> Fut,
    Fut: std::future::Future<Output = Result<RunOutcome, EngineError>>,
{
    let store = ctx.store().await?;
    let cancel = CancellationToken::new();
    let signals = tokio::spawn(watch_signals(cancel.clone()));
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let renderer = tokio::spawn(progress::render(rx));
    let engine = Engine {
        store,
        clock: Arc::new(SystemClock),
        observer: Some(tx),
        cancel: cancel.clone(),
        run_suffix: arbiter_runner::random_suffix(),
        process_env: std::env::vars().collect(),
        models,
        secrets,
        spending: None,
        sandboxing: crate::context::sandboxing()?,
    };
    let result = go(engine).await;
    let _ = renderer.await;
    signals.abort();
    result.map_err(|e| match e {
        EngineError::Dirty(_) | EngineError::Include(_) | EngineError::NotResumable { .. } => CliError::usage(e),
        // The kernel lacks what the settings require: the environment, not the input.
        EngineError::Sandbox(_) => CliError::environment(e),
        EngineError::Git(g) => CliError::from(g),
        EngineError::Rules(r) if r.is_usage() => CliError::usage(r),
        other => CliError::environment(other),
    })
}

/// Every program the run will start must exist before anything is spent.
pub fn preflight(settings: &RunSettings, repo: &Path) -> Result<(), CliError> {
    let path = std::env::var("PATH").unwrap_or_default();
    let site = CommandSite { repo, path: &path, repo_hidden: repo_hidden(settings, repo)? };
    let what = match &settings.verify_detected_from {
        Some(from) => {
            format!("the verify command detected from {from} (--verify 'CMD' gives another, --no-verify none)")
        }
        None => "verify command".into(),
    };
    for v in &settings.verify.value {
        check_program(&what, v, &site).map_err(CliError::usage)?;
    }
    if let Some(setup) = &settings.setup.value {
        check_program("setup command", setup, &site).map_err(CliError::usage)?;
    }
    for r in &settings.runners {
        let RunnerKind::Command { command } = &r.kind else { continue };
        check_program(&format!("the {} runner's command", r.name), command, &site).map_err(CliError::usage)?;
    }
    Ok(())
}

/// Whether the run's sandbox will hide the repository from the commands it starts (it does
/// whenever it confines the filesystem, unless the repository holds the home directory).
fn repo_hidden(settings: &RunSettings, repo: &Path) -> Result<bool, CliError> {
    let enforcement =
        crate::context::sandboxing()?.enforcement(settings.sandbox.value).map_err(CliError::environment)?;
    let home_inside = std::env::var_os("HOME").is_some_and(|h| inside_repository(Path::new(&h), repo).is_some());
    Ok(enforcement.filesystem && !home_inside)
}

/// Every agent CLI the run will start must be installed and able to run as configured
/// (its backend's protocol, its required options), checked for every candidate before
/// anything is spent. A relative `binary` is made absolute against the repository root.
pub fn preflight_agents(p: &mut Prepared, repo: &Path) -> Result<(), CliError> {
    let path = std::env::var("PATH").unwrap_or_default();
    let hidden = repo_hidden(&p.settings, repo)?;
    for spec in &mut p.settings.runners {
        let RunnerKind::Agent(agent) = &mut spec.kind else { continue };
        let Some(cli) = Cli::parse(&agent.cli) else { continue };
        let program = agent.binary.clone().unwrap_or_else(|| cli.default_binary().to_string());
        let located = match locate_program(&program, Some(repo), &path) {
            Ok((_, found)) if hidden && inside_repository(&found, repo).is_some() => {
                return Err(CliError::usage(format!(
                    "the {} runner runs `{program}`, which is inside the repository, which the sandbox hides from every candidate; install it outside the repository and set `binary = \"/path/to/{}\"` in [runners.{}]",
                    spec.name,
                    cli.default_binary(),
                    spec.name
                )));
            }
            Ok((located, _)) => located,
            Err(problem) => {
                return Err(CliError::usage(format!(
                    "the {} runner runs `{program}`, which {problem}; {}, or set `binary = \"/path/to/{}\"` in [runners.{}] (`arbiter runners` lists what is installed)",
                    spec.name,
                    install_hint(cli),
                    cli.default_binary(),
                    spec.name
                )));
            }
        };
        if agent.binary.is_some() {
            agent.binary = Some(located);
        }
    }
    for index in 0..p.settings.candidates.value as usize {
        let spec = p.settings.runner_for(index);
        if !matches!(spec.kind, RunnerKind::Agent(_)) {
            continue;
        }
        let chain = p.settings.backend_chain_for(index);
        if let Err(why) = arbiter_runner::runners::from_spec(spec, &chain, p.models.as_deref()) {
            let id = arbiter_core::ids::CandidateId::from_index(index);
            return Err(CliError::usage(format!("candidate {id} ({}): {why}", p.settings.label_for(index))));
        }
    }
    Ok(())
}

/// An agent command (or a verify or setup command) whose program is a relative path to a
/// file of the user's working tree that the base commit lacks (a script not committed yet)
/// runs from a copy of it outside every workspace, with a note: candidates start at the
/// base, where it does not exist, and the copy never becomes part of a patch.
async fn run_uncommitted_programs_outside(
    ctx: &RepoContext,
    settings: &mut RunSettings,
    base: &str,
) -> Result<(), CliError> {
    let mut outside = OutsidePrograms {
        dirs: arbiter_runner::user_dirs::UserDirs::from_process(),
        root: ctx.workspace.repo_root().to_path_buf(),
        uncommitted: Vec::new(),
        copies: Vec::new(),
    };
    let mut commands: Vec<String> = settings.verify.value.clone();
    commands.extend(settings.setup.value.clone());
    commands.extend(settings.runners.iter().filter_map(|r| match &r.kind {
        RunnerKind::Command { command } => Some(command.clone()),
        _ => None,
    }));
    for command in &commands {
        let Some(program) = outside.relative_program(command) else { continue };
        let included = settings.include.value.iter().any(|i| i.trim_start_matches("./") == program);
        let spec = format!("{base}:{program}");
        if !included && ctx.git.run(["cat-file", "-e", spec.as_str()]).await.is_err() {
            outside.uncommitted.push(program);
        }
    }
    if outside.uncommitted.is_empty() {
        return Ok(());
    }
    for v in settings.verify.value.iter_mut() {
        *v = outside.command(v)?;
    }
    if let Some(setup) = settings.setup.value.as_mut() {
        *setup = outside.command(setup)?;
    }
    if let Some(command) = settings.command.value.as_mut() {
        *command = outside.command(command)?;
    }
    for r in &mut settings.runners {
        if let RunnerKind::Command { command } = &mut r.kind {
            *command = outside.command(command)?;
        }
    }
    for c in &outside.copies {
        warning!(
            "arbiter: {} is not committed at {base}: every candidate runs your working tree's copy of it ({}) from outside its workspace; it is never part of a patch",
            c.path,
            c.copy
        );
    }
    settings.outside_programs = outside.copies;
    Ok(())
}

/// The working tree's programs the base lacks, and their copies outside the workspaces.
struct OutsidePrograms {
    dirs: arbiter_runner::user_dirs::UserDirs,
    root: std::path::PathBuf,
    /// Relative to the repository root, without `./`.
    uncommitted: Vec<String>,
    copies: Vec<arbiter_core::settings::OutsideProgram>,
}

impl OutsidePrograms {
    /// The program of `command` when it is a relative path to an executable file of the
    /// working tree (without `./`).
    fn relative_program(&self, command: &str) -> Option<String> {
        use arbiter_core::command_line::{Program, first_program};
        let Some(Program::Path(program)) = first_program(command) else { return None };
        let rel = program.trim_start_matches("./");
        let here = self.root.join(rel);
        let runnable = !Path::new(program).is_absolute() && arbiter_runner::process::is_executable_file(&here);
        runnable.then(|| rel.to_string())
    }

    /// `command`, running its program from the copy when the base lacks it.
    fn command(&mut self, command: &str) -> Result<String, CliError> {
        use arbiter_core::command_line::{Program, first_program};
        let Some(rel) = self.relative_program(command).filter(|r| self.uncommitted.contains(r)) else {
            return Ok(command.to_string());
        };
        let copy = match self.copies.iter().find(|c| c.path == rel) {
            Some(c) => std::path::PathBuf::from(&c.copy),
            None => {
                let copy =
                    arbiter_runner::outside_copy::copy_outside(&self.dirs, &self.root.join(&rel)).map_err(|e| {
                        CliError::environment(format!("cannot copy {rel} out of the working tree to run it: {e}"))
                    })?;
                let record = arbiter_core::settings::OutsideProgram { path: rel, copy: copy.display().to_string() };
                self.copies.push(record);
                copy
            }
        };
        let Some(Program::Path(program)) = first_program(command) else { return Ok(command.to_string()) };
        Ok(arbiter_runner::outside_copy::with_program(command, program, &copy))
    }
}

/// Commands run inside worktrees checked out at the base commit: a relative program path
/// must exist there (committed) or be copied in through `include`, or every candidate fails.
async fn check_paths_exist_at_base(ctx: &RepoContext, settings: &RunSettings, base: &str) -> Result<(), CliError> {
    use arbiter_core::command_line::{Program, first_program};
    let mut commands: Vec<(String, &str)> =
        settings.verify.value.iter().map(|v| ("verify command".to_string(), v.as_str())).collect();
    if let Some(setup) = &settings.setup.value {
        commands.push(("setup command".into(), setup));
    }
    for r in &settings.runners {
        let RunnerKind::Command { command } = &r.kind else { continue };
        commands.push((format!("the {} runner's command", r.name), command));
    }
    for (what, command) in commands {
        let Some(Program::Path(p)) = first_program(command) else { continue };
        if Path::new(p).is_absolute() {
            continue;
        }
        let rel = p.trim_start_matches("./");
        let spec = format!("{base}:{rel}");
        let committed = ctx.git.run(["cat-file", "-e", spec.as_str()]).await.is_ok();
        let included = settings.include.value.iter().any(|i| i.trim_start_matches("./") == rel);
        if !committed && !included {
            return Err(CliError::usage(format!(
                "{what} `{command}` runs `{p}`, which is not committed at {base}: candidates run in worktrees checked out at the base commit, where it does not exist; commit it, use an absolute path, or copy it in with --include {rel}"
            )));
        }
    }
    Ok(())
}

/// Ctrl-C or SIGTERM cancels the run (every candidate's process group is killed and the
/// artifacts are written); a second signal exits at once.
pub(crate) async fn watch_signals(cancel: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) else {
        return;
    };
    tokio::select! { _ = int.recv() => {}, _ = term.recv() => {} }
    warning!(
        "\narbiter: interrupted; stopping candidates and writing what was gathered (press Ctrl-C again to quit at once)"
    );
    cancel.cancel();
    tokio::select! { _ = int.recv() => {}, _ = term.recv() => {} }
    warning!("arbiter: quitting; leftover worktrees are pruned by the next run");
    std::process::exit(exit::INTERRUPTED as i32);
}

pub fn exit_code(o: &RunOutcome) -> u8 {
    match o.status {
        RunStatus::Interrupted => exit::INTERRUPTED,
        // The checks cannot run on this machine: nothing was judged, and the fix is the
        // user's (install what they run, or name another command), as with bad input.
        _ if !o.baseline.cannot_run.is_empty() => exit::USAGE,
        RunStatus::Succeeded if o.materialization.as_ref().is_some_and(|m| m.error.is_some()) => exit::NO_RESULT,
        RunStatus::Succeeded => exit::SUCCESS,
        RunStatus::NotApplied | RunStatus::Failed => exit::NO_RESULT,
        RunStatus::Running | RunStatus::Error => exit::ENVIRONMENT,
    }
}

/// `run --json`, `runs resume --json`, `demo --json`: how the tournament ended.
#[derive(Serialize)]
struct RunReport<'a> {
    run_id: String,
    status: RunStatus,
    winner: Option<String>,
    summary: &'a arbiter_core::text::Untrusted,
    materialization: Option<&'a arbiter_core::artifact::Materialization>,
    candidates: Vec<CandidateLine<'a>>,
    cost: CostLine,
    spending: &'a arbiter_core::artifact::SpendingReport,
    run_dir: String,
    verification: &'a str,
    exit_code: u8,
}

#[derive(Serialize)]
struct CandidateLine<'a> {
    candidate_id: String,
    rank: usize,
    runner: &'a str,
    eligible: bool,
    gates_passed: usize,
    gates_total: usize,
    votes: usize,
    reason: &'a arbiter_core::text::Untrusted,
}

#[derive(Serialize)]
struct CostLine {
    known_usd: arbiter_core::money::Usd,
    complete: bool,
    description: String,
}

impl JsonDocument for RunReport<'_> {
    const SCHEMA: &'static str = "run";
}

pub fn report(o: &RunOutcome, as_json: bool) {
    if as_json {
        crate::output::json(&RunReport {
            run_id: o.run_id.to_string(),
            status: o.status,
            winner: o.decision.winner.as_ref().map(|w| w.to_string()),
            summary: &o.decision.summary,
            materialization: o.materialization.as_ref(),
            candidates: o
                .decision
                .ranking
                .iter()
                .map(|r| CandidateLine {
                    candidate_id: r.candidate_id.to_string(),
                    rank: r.rank,
                    runner: &r.runner,
                    eligible: r.eligible,
                    gates_passed: r.gates_passed,
                    gates_total: r.gates_total,
                    votes: r.votes,
                    reason: &r.reason,
                })
                .collect(),
            cost: CostLine {
                known_usd: o.cost.total.known_cost,
                complete: o.cost.complete,
                description: o.cost.total.describe_cost(),
            },
            spending: &o.spending,
            run_dir: o.run_dir.display().to_string(),
            verification: &o.verification,
            exit_code: exit_code(o),
        });
        return;
    }
    out!();
    out!("{}", o.verification);
    for r in &o.decision.ranking {
        let mark = if o.decision.winner.as_ref() == Some(&r.candidate_id) { "★" } else { " " };
        out!("{mark} {} ({}): {}", r.candidate_id, r.runner, r.reason);
    }
    out!();
    let t = &o.cost.total;
    out!("Tokens: {} in / {} out; cost {}", t.input_tokens, t.output_tokens, t.describe_cost());
    if o.spending.noteworthy() {
        out!("Spending: {}", o.spending.describe());
    }
    match &o.materialization {
        Some(m) if m.applied => match &m.commit {
            Some(c) => out!("Applied: {} (commit {c})", m.mode),
            None => out!("Applied: the winner's patch is in the working tree"),
        },
        Some(m) if m.error.is_some() => out!("Not applied: {}", m.error.clone().unwrap_or_default()),
        Some(_) => out!("Not applied (--apply none); apply with `arbiter apply {}`", o.run_id),
        None => {}
    }
    match (&o.decision.winner, o.status) {
        (Some(w), _) => out!("Winner: {w}"),
        (None, RunStatus::Interrupted) => out!("Interrupted: no winner"),
        (None, _) => out!("No acceptable candidate: {}", o.decision.summary),
    }
    out!("Run directory: {}", o.run_dir.display());
}
