//! The command-line grammar (clap definitions only; behaviour lives in `commands`).

mod backend;
mod feature;
mod intake;
mod plan;
mod run;
mod server;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

pub use backend::{BackendAddArgs, BackendCommand};
pub use feature::{FeatureCommand, RulesCommand};
pub use intake::{IntakeArgs, IntakeCommand, PrArgs};
pub use plan::{PlanCommand, PlanNewArgs, PlanServerArgs};
pub use run::{ApplyArgs, ConfigCommand, RunArgs, RunsCommand, SettingsArgs};
pub use server::{BenchCommand, CacheCommand, ServeArgs, ServerArgs, TokenCommand, WorkerCommand};

/// Run several coding agents on one task in isolated git worktrees, check their work
/// yourself, and apply the best patch with reasons.
#[derive(Debug, Parser)]
#[command(name = "arbiter", version, about, propagate_version = true)]
pub struct Cli {
    /// The git repository to work on (default: the current directory).
    #[arg(long, global = true, value_name = "DIR")]
    pub repo: Option<PathBuf>,
    /// A Postgres database shared by many workers (postgres://user@host/db) instead of
    /// `.arbiter/arbiter.db`. Prefer the environment variable: a password on the command
    /// line is visible to other users.
    #[arg(long, global = true, value_name = "URL", env = "ARBITER_DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// No notes and no live progress on stderr (warnings and errors still print); stdout
    /// keeps the command's result.
    #[arg(long, short = 'q', global = true)]
    pub quiet: bool,
    #[command(subcommand)]
    pub command: Command,
}

impl Command {
    /// The name of a command that uses no store (runs, plans, events), or `None` for one that
    /// does: `--database-url` is refused on the first kind, honoured by the second.
    pub fn without_store(&self) -> Option<&'static str> {
        match self {
            Command::Init
            | Command::Run(_)
            | Command::Runs(_)
            | Command::Apply(_)
            | Command::Plan(_)
            | Command::Intake(_)
            | Command::Pr(_)
            | Command::Dashboard { .. }
            | Command::Ui { .. }
            | Command::Token(_)
            | Command::Serve(_) => None,
            Command::Config(_) => Some("config"),
            Command::Backend(_) => Some("backend"),
            Command::Demo { .. } => Some("demo"),
            Command::MockLlm { .. } => Some("mock-llm"),
            Command::Runners { .. } => Some("runners"),
            Command::Cache(_) => Some("cache"),
            Command::Worker(_) => Some("worker"),
            Command::Bench(_) => Some("bench"),
            Command::Doctor { .. } => None,
            Command::Completions { .. } => Some("completions"),
            Command::Man { .. } => Some("man"),
            Command::Feature(_) => None,
            Command::Qa { .. } => Some("qa"),
            Command::Rules(_) => Some("rules"),
        }
    }
}

/// Refuses a database URL with a password on the command line: argv is readable by every
/// process on the machine (`/proc/<pid>/cmdline`), candidates included, so a password there is
/// a password given away. The environment variable is not readable by them.
pub fn refuse_password_in_argv(args: &[String]) -> Result<(), String> {
    let given = args.iter().enumerate().find_map(|(i, a)| match a.strip_prefix("--database-url") {
        Some("") => args.get(i + 1).cloned(),
        Some(rest) => rest.strip_prefix('=').map(str::to_string),
        None => None,
    });
    let Some(url) = given else { return Ok(()) };
    let Some(after) = url.split_once("://").map(|(_, a)| a) else { return Ok(()) };
    let auth = &after[..after.find('/').unwrap_or(after.len())];
    let has_password = auth.rfind('@').is_some_and(|at| auth[..at].split_once(':').is_some_and(|(_, p)| !p.is_empty()));
    if has_password {
        return Err(
            "--database-url holds a password, and the command line is readable by every process on this machine (candidates included): put the URL in ARBITER_DATABASE_URL instead"
                .into(),
        );
    }
    Ok(())
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create .arbiter/ (config.toml, runs/, arbiter.db) and exclude it from git.
    Init,
    /// Run a task as a tournament of independent candidates.
    Run(RunArgs),
    /// List and inspect runs.
    #[command(subcommand)]
    Runs(RunsCommand),
    /// Apply the winning patch of a finished run to the repository.
    Apply(ApplyArgs),
    /// Show the resolved configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Run a real 4-candidate tournament on a throwaway repository with a scripted model.
    Demo {
        /// Create the demo repository here (a new or empty directory) instead of a temp dir.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// Print one JSON value on stdout instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Serve scripted model responses (OpenAI and Anthropic formats) on loopback.
    MockLlm {
        /// The script: JSON or TOML with a `responses` list (see docs/mock-llm.md).
        #[arg(long, value_name = "FILE")]
        script: PathBuf,
        /// The address to listen on.
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8089")]
        bind: String,
    },
    /// Manage model backends (OpenAI-compatible servers, OpenAI, Anthropic).
    #[command(subcommand)]
    Backend(BackendCommand),
    /// Every runner (command, builtin, the agent CLIs, the [runners] tables): whether it is
    /// installed, its version, and what it is configured to use.
    Runners {
        /// Print one JSON value on stdout instead of text.
        #[arg(long)]
        json: bool,
    },
    /// arbiter's cache of candidate workspaces (the warm pool of each repository).
    #[command(subcommand)]
    Cache(CacheCommand),
    /// Plans: many tasks with dependencies, run as tournaments by a pool of workers.
    #[command(subcommand)]
    Plan(PlanCommand),
    /// Turn issues into plans (a PRD and a plan linked to the issue) through your own `gh`
    /// or `glab` login; the labels say where it is.
    #[command(subcommand)]
    Intake(IntakeCommand),
    /// Open a pull request: a run's winner as a branch with one commit (RUN: latest or an
    /// id), or a plan's integration branch (--plan ID).
    Pr(PrArgs),
    /// Serve the control plane over HTTP(S): remote workers register, fetch code over git,
    /// upload results; the admin lists and revokes workers, follows events, scrapes metrics.
    /// Needs ARBITER_BOOTSTRAP_TOKEN and ARBITER_ADMIN_TOKEN in its environment.
    Serve(ServeArgs),
    /// Remote workers of a control plane: register one, list them, revoke or rotate a token.
    #[command(subcommand)]
    Worker(WorkerCommand),
    /// Measure arbiter (see docs/BENCHMARKS.md).
    #[command(subcommand)]
    Bench(BenchCommand),
    /// What this machine and repository give arbiter: git, the sandbox, the store, every
    /// agent CLI (installed, logged in) and the configured backends (reachable), each with
    /// what to do. Asks no model. Exit 3 when something is broken.
    Doctor {
        /// Print one JSON value on stdout instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Watch a plan live in the terminal: its tasks by status and depth, who runs what, the
    /// budget, the events; Enter opens a task, `c` cancels the plan, `r` retries a task (each
    /// confirmed), `q` quits. Locally from the store, or from a control plane with --server.
    Dashboard {
        /// The plan to watch (default: the only plan, or the only one with work left).
        #[arg(long, value_name = "ID")]
        plan: Option<String>,
        /// Watch one run's tournament instead: a run id, or `latest` (with --server, the
        /// run of a task of --plan).
        #[arg(long, value_name = "ID")]
        run: Option<String>,
        #[command(flatten)]
        remote: PlanServerArgs,
    },
    /// The web dashboard of this machine on loopback: the local store's plans, the
    /// repository's runs, live. Prints a one-time login link (and opens the browser when
    /// there is one); Ctrl-C stops it. For many machines, `arbiter serve` serves the same
    /// pages.
    Ui {
        /// The address to listen on (loopback only; port 0 picks a free one).
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7979")]
        bind: String,
        /// Print the login link without opening a browser.
        #[arg(long)]
        no_open: bool,
    },
    /// Access tokens for the dashboard and the API: admin ones, or read-only ones that look
    /// but never act. On a control plane with --server (admin token: ARBITER_TOKEN), else in
    /// the local store.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Shell completions for bash, zsh, fish, elvish or powershell, on stdout (e.g.
    /// `arbiter completions bash > ~/.local/share/bash-completion/completions/arbiter`).
    Completions {
        /// The shell: bash, zsh, fish, elvish or powershell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// The man page, generated from these definitions, on stdout (`arbiter man | man -l -`),
    /// or one page per command written to DIR.
    Man {
        /// Write arbiter.1, arbiter-run.1, arbiter-plan-run.1, ... here instead.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Feature slices: orch.py's spec-driven workflow (new, modify, do, merge, undo, delete,
    /// move, scan, status), each slice implemented by a tournament (see docs/slices.md).
    #[command(subcommand)]
    Feature(FeatureCommand),
    /// Check every registered feature slice without a model: the rules on its files and its
    /// tests, with a summary. Exit 1 when a test fails (or, with --strict, a rule).
    Qa {
        /// A rule violation fails the command too.
        #[arg(long)]
        strict: bool,
        /// Print one JSON value on stdout instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The rules engine: declarative code-standard checks (orch.py's rule files).
    #[command(subcommand)]
    Rules(RulesCommand),
}

#[cfg(test)]
mod tests {
    use super::refuse_password_in_argv;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_password_in_a_database_url_on_the_command_line_is_refused() {
        for bad in [
            &["arbiter", "--database-url", "postgres://u:pw@db/x", "plan", "list"][..],
            &["arbiter", "plan", "list", "--database-url=postgres://u:pw@db:5432/x"],
        ] {
            let err = refuse_password_in_argv(&args(bad)).expect_err("a password on argv");
            assert!(err.contains("ARBITER_DATABASE_URL"), "{err}");
        }
        for fine in [
            &["arbiter", "--database-url", "postgres://u@db/x", "plan", "list"][..],
            &["arbiter", "--database-url", "postgres://u:@db/x"],
            &["arbiter", "run", "--task", "postgres://u:pw@db/x"],
            &["arbiter", "plan", "list"],
        ] {
            assert_eq!(refuse_password_in_argv(&args(fine)), Ok(()), "{fine:?}");
        }
    }
}
