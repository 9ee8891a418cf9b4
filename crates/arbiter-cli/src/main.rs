//! The `arbiter` binary: parse, dispatch, turn errors into messages and exit codes.

mod cli;
mod commands;
mod config_file;
mod console;
mod context;
mod error;
mod invocation;
mod logging;
mod model_access;
mod output;
mod progress;
mod terminal;

use std::process::ExitCode;

use crate::cli::{CacheCommand, Cli, Command, ConfigCommand, RunsCommand};
use crate::error::CliError;

fn main() -> ExitCode {
    // The sandbox re-enters this binary; it must run before anything starts a thread.
    let mut args = std::env::args_os().skip(1);
    if args.next().is_some_and(|a| a == arbiter_sandbox::ENTRY) {
        let code = arbiter_sandbox::entry(args.collect());
        return ExitCode::from(u8::try_from(code).unwrap_or(u8::MAX));
    }
    let argv: Vec<String> = std::env::args().collect();
    if let Err(message) = cli::refuse_password_in_argv(&argv) {
        output::write_warning(&format!("arbiter: error: {message}"));
        return ExitCode::from(error::exit::USAGE);
    }
    let matches = <Cli as clap::CommandFactory>::command().get_matches();
    let cli = match <Cli as clap::FromArgMatches>::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let url_on_command_line = matches.value_source("database_url") == Some(clap::parser::ValueSource::CommandLine);
    if url_on_command_line && let Some(name) = cli.command.without_store() {
        output::write_warning(&format!(
            "arbiter: error: `arbiter {name}` does not use a database: --database-url is for init, run, runs, apply, plan and serve"
        ));
        return ExitCode::from(error::exit::USAGE);
    }
    output::set_quiet(cli.quiet);
    // The long-running commands set up their own logging.
    let logs_itself = matches!(&cli.command, Command::Serve(_) | Command::Worker(cli::WorkerCommand::Run { .. }));
    if !logs_itself {
        logging::init_notes();
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            output::write_warning(&format!("arbiter: cannot start the async runtime: {e}"));
            return ExitCode::from(error::exit::ENVIRONMENT);
        }
    };
    let result = runtime.block_on(dispatch(cli));
    // Whatever is still blocked in a thread (a name lookup, a read) is not waited for: the
    // command is done (a worker stopped by SIGTERM exits at once).
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            output::write_warning(&format!("arbiter: error: {e}"));
            ExitCode::from(e.code)
        }
    }
}

async fn dispatch(cli: Cli) -> Result<u8, CliError> {
    let repo = cli.repo.as_deref();
    if cli.command.without_store().is_none() {
        context::use_database(cli.database_url.as_deref());
    }
    match &cli.command {
        Command::Init => commands::init::init(repo).await,
        Command::Run(args) => commands::run::run(repo, args).await,
        Command::Runs(RunsCommand::List { limit, json }) => commands::runs::list(repo, *limit, *json).await,
        Command::Runs(RunsCommand::Show { run, json }) => commands::runs::show(repo, run, *json).await,
        Command::Runs(RunsCommand::Resume { run, json }) => commands::runs::resume(repo, run, *json).await,
        Command::Runs(RunsCommand::Verify { run, json }) => commands::runs::verify(repo, run, *json).await,
        Command::Apply(args) => commands::apply::apply(repo, args).await,
        Command::Config(ConfigCommand::Show { settings, json }) => commands::config::show(repo, settings, *json).await,
        Command::Backend(cmd) => commands::backend::backend(repo, cmd).await,
        Command::Demo { dir, json } => commands::demo::demo(dir.as_deref(), *json).await,
        Command::MockLlm { script, bind } => commands::mock_llm::mock_llm(script, bind).await,
        Command::Plan(cmd) => commands::plan::plan(repo, cmd).await,
        Command::Intake(cmd) => commands::intake::intake(repo, cmd).await,
        Command::Pr(args) => commands::pr::pr(repo, args).await,
        Command::Runners { json } => commands::runners::runners(repo, *json).await,
        Command::Cache(CacheCommand::Prune { keep, kept, json }) => commands::cache::prune(*keep, *kept, *json),
        Command::Serve(args) => commands::serve::serve(cli.database_url.as_deref(), args).await,
        Command::Worker(cmd) => commands::worker::worker(cmd).await,
        Command::Doctor { json } => commands::doctor::doctor(repo, *json).await,
        Command::Dashboard { plan, run, remote } => {
            let args = commands::dashboard::DashboardArgs { plan: plan.as_deref(), run: run.as_deref(), repo, remote };
            commands::dashboard::dashboard(args).await
        }
        Command::Ui { bind, no_open } => commands::ui::ui(commands::ui::UiArgs { repo, bind, open: !*no_open }).await,
        Command::Token(cmd) => commands::token::token(repo, cmd).await,
        Command::Feature(cmd) => commands::feature::feature(repo, cmd).await,
        Command::Qa { strict, json } => commands::qa::qa(repo, *strict, *json).await,
        Command::Rules(cmd) => commands::rules::rules(repo, cmd).await,
        Command::Completions { shell } => commands::reference::completions(*shell),
        Command::Man { dir } => commands::reference::man(dir.as_deref()),
        Command::Bench(crate::cli::BenchCommand::Queue { server, workers, tasks, wakeups, repository, json }) => {
            commands::bench::queue(commands::bench::QueueBench {
                server,
                workers: *workers,
                tasks: *tasks,
                wakeups: *wakeups,
                repository: repository.as_deref(),
                json: *json,
            })
            .await
        }
    }
}
