//! The command-line grammar (clap definitions only; behaviour lives in `commands`).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

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

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Mint a named token, written to --token-file (mode 0600) or printed once.
    Create {
        /// The token's name: who or what uses it (it names them in the event log).
        name: String,
        /// It may read every page and GET route, and change nothing.
        #[arg(long)]
        read_only: bool,
        /// Write the token to this file (mode 0600; never overwritten) instead of stdout.
        #[arg(long, value_name = "FILE")]
        token_file: Option<PathBuf>,
        #[command(flatten)]
        remote: PlanServerArgs,
    },
    /// Every named token: role, state, when it was made and last used (never its value).
    List {
        /// Print one JSON value on stdout instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        remote: PlanServerArgs,
    },
    /// Revoke a token at once (its dashboard sessions end too).
    Revoke {
        /// The token's name (`arbiter token list` shows them).
        name: String,
        #[command(flatten)]
        remote: PlanServerArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// The control plane's work protocol over real HTTP with no-op workers: claim+complete
    /// cycles per second, claim latency, wake-up latency. Needs ARBITER_TOKEN (admin) and
    /// ARBITER_BOOTSTRAP_TOKEN; leaves its plans cancelled and its workers revoked.
    Queue {
        #[command(flatten)]
        server: ServerArgs,
        /// No-op workers claiming at once.
        #[arg(long, default_value_t = 16, value_name = "N")]
        workers: usize,
        /// Tasks pending when the workers start.
        #[arg(long, default_value_t = 20_000, value_name = "M")]
        tasks: usize,
        /// Imports into an empty plan whose wake-up is measured.
        #[arg(long, default_value_t = 50, value_name = "K")]
        wakeups: usize,
        /// A git repository on the server's host for the bench plans (default: the current
        /// directory's).
        #[arg(long, value_name = "PATH")]
        repository: Option<PathBuf>,
        /// Print one JSON value on stdout instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The address to listen on. Plain HTTP only on loopback (127.0.0.0/8, ::1) unless
    /// --insecure; serve HTTPS with --tls-cert and --tls-key.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7878")]
    pub bind: String,
    /// The server's certificate chain (PEM); with --tls-key, the server speaks HTTPS.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Serve plain HTTP on an address that is not loopback (tokens cross the network
    /// unencrypted: only on a network you trust).
    #[arg(long)]
    pub insecure: bool,
    /// Where the server keeps its SQLite database, artifacts and repositories (default:
    /// $XDG_DATA_HOME/arbiter/server, else ~/.local/share/arbiter/server). With
    /// ARBITER_DATABASE_URL the store is Postgres instead of DIR/arbiter.db.
    #[arg(long, value_name = "DIR", env = "ARBITER_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Log lines on stderr: human (coloured on a terminal) or json (one object a line).
    #[arg(long, value_name = "FORMAT", default_value = "human", value_parser = ["human", "json"])]
    pub log_format: String,
    /// Lease length: a worker seen within two lease lengths counts as connected.
    #[arg(long, default_value_t = 60, value_name = "SECONDS")]
    pub lease_seconds: u64,
    /// The largest artifact a worker may upload, in MiB.
    #[arg(long, default_value_t = 256, value_name = "MIB")]
    pub max_artifact_mib: u64,
    /// Mark the dashboard's session cookies `Secure` although this server speaks plain HTTP:
    /// a TLS proxy in front of it serves the dashboard over HTTPS (with --tls-cert they are
    /// always `Secure`).
    #[arg(long)]
    pub secure_cookies: bool,
}

/// How to reach a control plane.
#[derive(Debug, Args, Clone)]
pub struct ServerArgs {
    /// The control plane's URL, e.g. https://arbiter.example:7878 (plain http:// only to
    /// loopback unless --insecure).
    #[arg(long, value_name = "URL", env = "ARBITER_SERVER")]
    pub server: String,
    /// Trust this CA certificate (PEM) besides the system's roots: for a server with a
    /// self-signed certificate.
    #[arg(long, value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,
    /// Allow plain http:// to a host that is not loopback.
    #[arg(long)]
    pub insecure: bool,
}

/// Where a plan command's plans live: a control plane (`--server`) instead of the local
/// store.
#[derive(Debug, Args, Clone, Default)]
pub struct PlanServerArgs {
    /// Administer the plans of this control plane (admin token: ARBITER_TOKEN) instead of
    /// the local store, e.g. https://arbiter.example:7878.
    #[arg(long, value_name = "URL", env = "ARBITER_SERVER")]
    pub server: Option<String>,
    /// With --server: trust this CA certificate (PEM) besides the system's roots.
    #[arg(long, value_name = "FILE", requires = "server")]
    pub ca_cert: Option<PathBuf>,
    /// With --server: allow plain http:// to a host that is not loopback.
    #[arg(long, requires = "server")]
    pub insecure: bool,
}

impl PlanServerArgs {
    /// The control plane to reach, when one was named.
    pub fn server(&self) -> Option<ServerArgs> {
        self.server.as_ref().map(|s| ServerArgs {
            server: s.clone(),
            ca_cert: self.ca_cert.clone(),
            insecure: self.insecure,
        })
    }
}

#[derive(Debug, Subcommand)]
pub enum WorkerCommand {
    /// Register this machine as a worker with the bootstrap token (ARBITER_BOOTSTRAP_TOKEN)
    /// and write its own token to --token-file (mode 0600); the token is never printed.
    Register {
        #[command(flatten)]
        server: ServerArgs,
        /// The worker's name (unique on the server).
        #[arg(long)]
        name: String,
        /// Where to write the worker's token (its directory is created with mode 0700).
        #[arg(long, value_name = "FILE")]
        token_file: PathBuf,
        /// A runner this worker has (repeatable), e.g. command, claude-code.
        #[arg(long = "runner", value_name = "NAME")]
        runners: Vec<String>,
        /// A model backend this worker has (repeatable).
        #[arg(long = "backend", value_name = "NAME")]
        backends: Vec<String>,
        /// Units of work it takes at once.
        #[arg(long, default_value_t = 1, value_name = "N")]
        slots: u32,
        /// Re-register a name that is taken (its old token stops working) and overwrite
        /// --token-file if it exists.
        #[arg(long)]
        replace: bool,
    },
    /// Run as a worker: claim units of work from the control plane (candidates, evaluations,
    /// whole tournaments) and run them, until stopped (SIGTERM or Ctrl-C gives back what it
    /// holds at once).
    Run {
        #[command(flatten)]
        server: ServerArgs,
        /// The worker's token, as `arbiter worker register` wrote it (mode 0600).
        #[arg(long, value_name = "FILE")]
        token_file: PathBuf,
        /// Only this plan's work (default: any plan's).
        #[arg(long, value_name = "ID")]
        plan: Option<String>,
        /// Units of work run at once.
        #[arg(long, default_value_t = 1, value_name = "N")]
        slots: u32,
        /// Take one unit of work, run it, report it and exit.
        #[arg(long)]
        once: bool,
        /// Where the worker keeps its repository copies and their runs (default:
        /// $XDG_DATA_HOME/arbiter/worker, else ~/.local/share/arbiter/worker).
        #[arg(long, value_name = "DIR", env = "ARBITER_WORKER_DATA_DIR")]
        data_dir: Option<PathBuf>,
        /// Log lines as human text or JSON objects.
        #[arg(long, value_name = "FORMAT", default_value = "human", value_parser = ["human", "json"])]
        log_format: String,
    },
    /// Every worker: capabilities, last heartbeat, what it holds (admin token: ARBITER_TOKEN).
    List {
        #[command(flatten)]
        server: ServerArgs,
        /// Print one JSON value on stdout instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a worker's token at once (admin token: ARBITER_TOKEN).
    Revoke {
        /// The worker's name, as it registered.
        name: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Give a worker a new token; the old one stops working (admin token: ARBITER_TOKEN).
    Rotate {
        /// The worker's name, as it registered.
        name: String,
        #[command(flatten)]
        server: ServerArgs,
        /// Write the new token here (mode 0600) instead of printing it.
        #[arg(long, value_name = "FILE")]
        token_file: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum CacheCommand {
    /// Remove idle workspaces (and the pools of repositories that no longer exist); a
    /// workspace in use is never touched.
    Prune {
        /// Keep this many idle workspaces per repository (the most recently used).
        #[arg(long, value_name = "N", default_value_t = 0)]
        keep: usize,
        /// Also remove workspaces kept with --keep-worktrees.
        #[arg(long)]
        kept: bool,
        /// Print one JSON value on stdout instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// `arbiter intake github|gitlab ...`.
#[derive(Debug, Subcommand)]
pub enum IntakeCommand {
    /// GitHub issues, through your own `gh` login.
    Github(IntakeArgs),
    /// GitLab issues, through your own `glab` login.
    Gitlab(IntakeArgs),
}

/// One issue, or every open issue carrying a label, into a PRD and a plan.
#[derive(Debug, Args)]
pub struct IntakeArgs {
    /// OWNER/REPO#NUMBER for one issue; OWNER/REPO for every open issue carrying --label
    /// (default: the pending label, `arbiter:pending`).
    pub reference: String,
    /// With OWNER/REPO: take every open issue carrying this label.
    #[arg(long, value_name = "LABEL")]
    pub label: Option<String>,
    /// Print one JSON value on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `arbiter pr`.
#[derive(Debug, Args)]
pub struct PrArgs {
    /// The run whose winner to propose: `latest` or a run id (not with --plan).
    #[arg(value_name = "RUN", conflicts_with = "plan", required_unless_present = "plan")]
    pub run: Option<String>,
    /// Propose the plan's integration branch instead of a run's winner.
    #[arg(long, value_name = "ID")]
    pub plan: Option<String>,
    /// The pull request's title (default: the task's first line, or the plan's name).
    #[arg(long, value_name = "TEXT")]
    pub title: Option<String>,
    /// Open it as a draft.
    #[arg(long)]
    pub draft: bool,
    /// The branch to merge into (default: the forge repository's default branch).
    #[arg(long, value_name = "BRANCH")]
    pub base: Option<String>,
    /// A label for the pull request (repeatable).
    #[arg(long, value_name = "LABEL")]
    pub label: Vec<String>,
    /// A reviewer to ask (a login; repeatable).
    #[arg(long, value_name = "LOGIN")]
    pub reviewer: Vec<String>,
    /// The branch a run's winner goes on (default arbiter/run-<RUN_ID>; never one arbiter
    /// did not create).
    #[arg(long, value_name = "NAME", conflicts_with = "plan")]
    pub branch: Option<String>,
    /// The remote to push to (default: `[forge] remote`, else origin).
    #[arg(long, value_name = "NAME")]
    pub remote: Option<String>,
    /// Print one JSON value on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `arbiter plan new`: an idea into a PRD and a plan.
#[derive(Debug, Args)]
pub struct PlanNewArgs {
    /// The idea, in a sentence or a paragraph.
    pub idea: String,
    /// The plan's id and file names (`docs/PRD-<slug>.md`); default: from the idea's words.
    #[arg(long, value_name = "SLUG")]
    pub slug: Option<String>,
    /// Answers to the clarifying questions, from this file (no questions are asked).
    #[arg(long, value_name = "FILE", conflicts_with = "no_questions")]
    pub answers: Option<PathBuf>,
    /// Ask no clarifying questions.
    #[arg(long)]
    pub no_questions: bool,
    /// Import the plan without asking.
    #[arg(long, conflicts_with = "no_import")]
    pub yes: bool,
    /// Write the PRD and the plan file only; import them later with `arbiter plan apply`.
    #[arg(long)]
    pub no_import: bool,
    /// Overwrite an existing PRD and plan file of that slug.
    #[arg(long)]
    pub force: bool,
    /// Print one JSON value on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum PlanCommand {
    /// Draft a plan from an idea with the `planning` role: clarifying questions, a PRD
    /// (docs/PRD-<slug>.md), a plan file checked against the schema, the decision gate, the
    /// DAG; imported after confirmation (--yes).
    New(PlanNewArgs),
    /// Check a plan file (JSON or TOML, ours or Whilly's tasks.json) and store it; nothing is
    /// written when anything is wrong.
    Import {
        /// The plan file: JSON or TOML (by its extension), ours or Whilly's tasks.json.
        file: PathBuf,
        /// Also change tasks that have not started (finished ones are never changed).
        #[arg(long)]
        update: bool,
        /// Let the plan use this existing branch (it must be the plan's integration_branch)
        /// as its integration branch: arbiter commits onto it but never moves it back.
        #[arg(long, value_name = "NAME")]
        adopt_branch: Option<String>,
        /// Print one JSON value on stdout instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        remote: PlanServerArgs,
    },
    /// Import, then judge every task with the decision gate (ALLOW / WARN / REJECT).
    Apply {
        /// The plan file: JSON or TOML (by its extension), ours or Whilly's tasks.json.
        file: PathBuf,
        /// Skip the tasks the gate rejects (the events record why).
        #[arg(long)]
        strict: bool,
        /// Whose decision rules judge the tasks: arbiter (ALLOW, WARN, REJECT) or whilly
        /// (Whilly's own: ALLOW or REJECT); see docs/plans.md.
        #[arg(long, default_value = "arbiter", value_name = "RULES", value_parser = ["arbiter", "whilly"])]
        gate: String,
        /// Also change tasks the file changes (not only add new ones), and the plan's header.
        #[arg(long)]
        update: bool,
        /// Let the plan use this existing branch as its integration branch (see `import`).
        #[arg(long, value_name = "NAME")]
        adopt_branch: Option<String>,
        /// Print one JSON value on stdout instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        remote: PlanServerArgs,
    },
    /// The plan in the canonical file format (byte-stable; imports back to the same plan).
    Export {
        /// The plan's id.
        id: String,
        /// arbiter (the canonical file, byte-stable) or whilly (a tasks.json Whilly imports,
        /// with each task's status).
        #[arg(long, default_value = "arbiter", value_name = "FORMAT", value_parser = ["arbiter", "whilly"])]
        format: String,
        /// Write to this file instead of standard output.
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
        #[command(flatten)]
        remote: PlanServerArgs,
    },
    /// The dependency graph with each task's status.
    Show {
        /// The plan's id.
        id: String,
        /// Print one JSON value on stdout instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        remote: PlanServerArgs,
    },
    /// Progress, budget, leases and every task's state.
    Status {
        /// The plan's id.
        id: String,
        /// Print one JSON value on stdout instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        remote: PlanServerArgs,
    },
    /// Every plan with its task counts and budget.
    List {
        /// Print one JSON value on stdout instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        remote: PlanServerArgs,
    },
    /// Create an empty plan (tasks come with `plan import --update`).
    Create {
        /// The new plan's id: letters, digits, '.', '_', '-'.
        #[arg(long)]
        id: String,
        /// The plan's name, for people.
        #[arg(long)]
        name: String,
        /// Budget in USD (claims stop once it is spent).
        #[arg(long, value_name = "USD")]
        budget: Option<String>,
        /// The repository its tasks run in (default: this one; with --server, a path on the
        /// server's machine, or a git URL).
        #[arg(long, value_name = "PATH_OR_URL")]
        repository: Option<String>,
        #[command(flatten)]
        remote: PlanServerArgs,
    },
    /// Set the plan's budget in USD (`none` removes it); raising it lets claims resume.
    Budget {
        /// The plan's id.
        id: String,
        /// The budget in USD (e.g. 2.50), or `none` for no limit.
        usd: String,
        #[command(flatten)]
        remote: PlanServerArgs,
    },
    /// Every task back to its start, the integration branch (if arbiter created it) back to
    /// where it was created. Events stay.
    Reset {
        /// The plan's id.
        id: String,
        /// Also forget attempts and what was spent.
        #[arg(long)]
        hard: bool,
        /// Leave the integration branch where it is (the only way to reset a plan whose
        /// branch was adopted).
        #[arg(long)]
        keep_branch: bool,
        /// Do not ask for confirmation.
        #[arg(long)]
        yes: bool,
        #[command(flatten)]
        remote: PlanServerArgs,
    },
    /// Cancel every task that has not finished; running attempts are stopped.
    Cancel {
        /// The plan's id.
        id: String,
        #[command(flatten)]
        remote: PlanServerArgs,
    },
    /// Give a failed, cancelled or skipped task new attempts.
    Retry {
        /// The plan's id.
        id: String,
        /// The task's id.
        task: String,
        #[command(flatten)]
        remote: PlanServerArgs,
    },
    /// Push the plan's integration branch to a remote of its repository (fast-forward
    /// only: arbiter never force-pushes). A plan with `push = true` is pushed after every
    /// winner without this.
    Push {
        /// The plan's id.
        id: String,
        /// The remote of the plan's repository to push to.
        #[arg(long, default_value = "origin", value_name = "NAME")]
        remote: String,
        /// Print one JSON value on stdout instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        server: PlanServerArgs,
    },
    /// Run the plan's ready tasks as tournaments with N local workers until nothing more
    /// can run; exit 0 only if every task is done or skipped. (Every other plan command
    /// takes --server URL to act on a control plane's plans.)
    Run {
        /// The plan's id.
        id: String,
        /// Tasks run at once on this machine.
        #[arg(long, default_value_t = 1, value_name = "N")]
        workers: usize,
        /// Lease length: a worker that stops renewing its lease for this long loses the task.
        #[arg(long, default_value_t = 60, value_name = "SECONDS")]
        lease_seconds: u64,
        /// Print one JSON value on stdout instead of text.
        #[arg(long)]
        json: bool,
        /// Refused: a control plane's plans are run by its workers (`arbiter worker run`).
        #[arg(long, value_name = "URL")]
        server: Option<String>,
        /// Tasks without verify commands (none given, none found in the repository) run,
        /// and their winners are committed unverified.
        #[arg(long)]
        no_verify: bool,
        /// Runner(s) for every task that names none, over the plan's defaults
        /// (comma-separated, round-robin).
        #[arg(long, value_name = "NAMES")]
        runner: Option<String>,
        /// Candidates per task, over the plan's defaults (a task's own value wins).
        #[arg(long, value_name = "N")]
        candidates: Option<u32>,
        /// The `command` runner's command for every task that names none.
        #[arg(long, value_name = "COMMAND")]
        command: Option<String>,
        /// Backend(s) of model-driven runners, over the plan's defaults.
        #[arg(long, value_name = "NAMES")]
        backend: Option<String>,
        /// Per-agent time limit, over the plan's defaults (a task's own value wins).
        #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
        timeout_seconds: Option<u64>,
        /// tournament, escalate, cheap, balanced or quality, over the plan's defaults.
        #[arg(long, value_name = "STRATEGY")]
        strategy: Option<String>,
    },
    /// The plan's event log, oldest first.
    Events {
        /// The plan's id.
        id: String,
        /// Print one JSON value on stdout instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        remote: PlanServerArgs,
    },
    /// The JSON Schema of plan files.
    Schema,
}

#[derive(Debug, Subcommand)]
pub enum BackendCommand {
    /// Add (or replace) a backend in .arbiter/config.toml.
    Add(Box<BackendAddArgs>),
    /// Every backend, its roles, prices, state and where its key comes from (never the key).
    List {
        /// Print one JSON value on stdout instead of text.
        #[arg(long)]
        json: bool,
    },
    /// One backend (never its key).
    Show {
        /// The backend's name.
        name: String,
        /// Print one JSON value on stdout instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Remove a backend and its stored key.
    Remove {
        /// The backend's name.
        name: String,
    },
    /// Enable a backend.
    Enable {
        /// The backend's name.
        name: String,
    },
    /// Disable a backend (it stays configured but is skipped in role chains).
    Disable {
        /// The backend's name.
        name: String,
    },
    /// Make one small real call: latency, tokens, and whether tool calls work.
    Test {
        /// The backend's name.
        name: String,
        /// Print one JSON value on stdout instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub struct BackendAddArgs {
    /// Backend name (letters, digits, '-' and '_').
    pub name: String,
    /// openai-compatible (llama.cpp, vLLM, Ollama, LM Studio, OpenRouter...), openai or anthropic.
    #[arg(long)]
    pub provider: String,
    /// The model the backend serves, as its API names it.
    #[arg(long)]
    pub model: String,
    /// e.g. http://127.0.0.1:8080/v1 (required for openai-compatible).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// The environment variable holding the key.
    #[arg(long, value_name = "VAR", conflicts_with = "api_key_stdin")]
    pub api_key_env: Option<String>,
    /// Read the key from stdin and keep it in the repository's secrets file (mode 0600, in
    /// ~/.config/arbiter/secrets/, outside the repository).
    #[arg(long)]
    pub api_key_stdin: bool,
    /// USD per million input tokens.
    #[arg(long, value_name = "USD_PER_MTOK")]
    pub input_cost: Option<String>,
    /// USD per million output tokens.
    #[arg(long, value_name = "USD_PER_MTOK")]
    pub output_cost: Option<String>,
    /// Comma-separated: coding, review, selection, spec, planning, analysis.
    #[arg(long, value_name = "ROLES", default_value = "coding")]
    pub roles: String,
    /// Relative capability (higher is stronger); orders role chains without [roles].
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub capability: u32,
    /// Concurrent requests to this backend, shared by everything in one arbiter process.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub max_parallel: u32,
    /// Output token cap per request.
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u32>,
    /// Request timeout.
    #[arg(long, value_name = "S")]
    pub timeout_seconds: Option<u64>,
}

/// Settings shared by `run` and `config show`; each overrides .arbiter/config.toml.
#[derive(Debug, Args, Clone, Default)]
pub struct SettingsArgs {
    /// Number of independent candidates [default: 3, or `candidates` under [run] in
    /// .arbiter/config.toml].
    #[arg(long, value_name = "N")]
    pub candidates: Option<u32>,
    /// Candidates running at once (default: all of them).
    #[arg(long, value_name = "N")]
    pub parallel: Option<u32>,
    /// Wall-clock limit of each candidate's agent [default: 1800, or [run]
    /// timeout_seconds].
    #[arg(long, value_name = "SECONDS")]
    pub timeout_seconds: Option<u64>,
    /// A command arbiter runs itself on the base and on every candidate (repeatable).
    /// Without one (here or in the configuration), arbiter uses the repository's own test
    /// command (cargo test, pytest, npm test, go test, make test, ...), shown before the run.
    #[arg(long, value_name = "COMMAND")]
    pub verify: Vec<String>,
    /// Accept a winner no verify command checked: nothing is detected, and the winner is
    /// applied on its patch, votes and any judge alone (the report says so first).
    #[arg(long, conflicts_with = "verify")]
    pub no_verify: bool,
    /// Wall-clock limit of each verify command [default: 600, or [run]
    /// verify_timeout_seconds].
    #[arg(long, value_name = "SECONDS")]
    pub verify_timeout_seconds: Option<u64>,
    /// An ignored file or glob to copy into each worktree, e.g. .env (repeatable).
    #[arg(long, value_name = "PATH")]
    pub include: Vec<String>,
    /// A command run in each fresh worktree before the agent.
    #[arg(long, value_name = "COMMAND")]
    pub setup: Option<String>,
    /// Runner name, or comma-separated names assigned round-robin [default: command, or
    /// [run] runner].
    #[arg(long, value_name = "NAME")]
    pub runner: Option<String>,
    /// The command of the `command` runner (run with `sh -c` in the worktree).
    #[arg(long, value_name = "COMMAND")]
    pub command: Option<String>,
    /// Backend(s) of the builtin runner; several are assigned round-robin to candidates.
    #[arg(long, value_name = "NAME[,NAME]")]
    pub backend: Option<String>,
    /// The built-in agent's step limit per candidate [default: 40].
    #[arg(long, value_name = "N")]
    pub max_steps: Option<u32>,
    /// The built-in agent's token limit (input + output) per candidate [default: 400000].
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u64>,
    /// What to do with the winner: worktree, none, or branch:NAME [default: worktree, or
    /// [run] apply].
    #[arg(long, value_name = "MODE")]
    pub apply: Option<String>,
    /// Keep the candidates' workspaces after the run (their paths are in the report).
    #[arg(long)]
    pub keep_worktrees: bool,
    /// The sandbox of every process a candidate starts: auto (what the kernel offers; the
    /// report says what was enforced), require (refuse to run without Landlock), or off
    /// [default: auto].
    #[arg(long, value_name = "MODE")]
    pub sandbox: Option<String>,
    /// The task may change tests and other protected files (otherwise such a candidate is
    /// flagged and not eligible; its gates always run with the base versions restored, and
    /// without configuration it added, unless this is given).
    #[arg(long)]
    pub allow_test_changes: bool,
    /// Never ask a judge model (the evidence and the deterministic ranking decide).
    #[arg(long)]
    pub no_judge: bool,
    /// How candidates are spent: tournament (all at once), escalate (one at a time, cheapest
    /// capable backend first, stop at the first that passes), or a preset: cheap, balanced,
    /// quality [default: tournament].
    #[arg(long, value_name = "STRATEGY")]
    pub strategy: Option<String>,
    /// Leave out backends whose configured capability is below N.
    #[arg(long, value_name = "N")]
    pub min_capability: Option<u32>,
    /// Stop candidates and judges once the run has spent this many USD.
    #[arg(long, value_name = "USD")]
    pub budget_usd: Option<String>,
    /// Do not run the tests candidates wrote against each other.
    #[arg(long)]
    pub no_cross_tests: bool,
    /// Run the rules engine as a gate on the files each candidate changes (see [rules]).
    #[arg(long)]
    pub rules: bool,
    /// After a candidate's agent ends, give its gate failures back to it up to N times
    /// [default: 0, or [run] repair_rounds].
    #[arg(long, value_name = "N")]
    pub repair_rounds: Option<u32>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The task, in words.
    #[arg(long, value_name = "TEXT", conflicts_with = "task_file", required_unless_present = "task_file")]
    pub task: Option<String>,
    /// A file holding the task.
    #[arg(long, value_name = "FILE")]
    pub task_file: Option<PathBuf>,
    /// What a good result looks like (shown to every candidate).
    #[arg(long, value_name = "TEXT")]
    pub success_criteria: Option<String>,
    /// The revision candidates start from.
    #[arg(long, value_name = "REF", default_value = "HEAD")]
    pub base: String,
    /// Run even though the working tree has uncommitted changes (they are not part of the base).
    #[arg(long)]
    pub allow_dirty: bool,
    /// Print one JSON summary on stdout at the end.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub settings: SettingsArgs,
}

#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// The newest runs first.
    List {
        /// How many runs to list (newest first).
        #[arg(long, default_value_t = 20)]
        limit: u32,
        /// Print one JSON value on stdout instead of text.
        #[arg(long)]
        json: bool,
    },
    /// One run: decision, candidates, reasons, where its files are.
    Show {
        /// A run id, or `latest`.
        run: String,
        /// Print one JSON value on stdout instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Check the run directory against the manifest.json arbiter sealed it with: exit 0 when
    /// every file is as arbiter wrote it, 1 naming each changed, missing or unexpected file.
    Verify {
        /// A run id, or `latest`.
        run: String,
        /// Print one JSON value on stdout instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Continue a run interrupted by a crash, SIGKILL or Ctrl-C: finished candidates are
    /// kept, the others start again (continuing their agent's session where the CLI can),
    /// then evaluation runs.
    Resume {
        /// A run id, or `latest`.
        run: String,
        /// Print one JSON value on stdout instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// A run id, or `latest`.
    pub run: String,
    /// Create and switch to this new branch before applying.
    #[arg(long, value_name = "NAME")]
    pub branch: Option<String>,
    /// Commit the applied patch.
    #[arg(long)]
    pub commit: bool,
    /// Apply even though the working tree has uncommitted changes.
    #[arg(long)]
    pub force: bool,
    /// Print one JSON value on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Every setting with its value and where it came from (flag, config or default).
    Show {
        #[command(flatten)]
        settings: SettingsArgs,
        /// Print one JSON value on stdout instead of text.
        #[arg(long)]
        json: bool,
    },
}

impl SettingsArgs {
    /// The flags as one layer of run settings (a flag not given says nothing).
    pub fn options(&self) -> Result<arbiter_core::settings::RunOptions, String> {
        let list = |v: &Vec<String>| (!v.is_empty()).then(|| v.clone());
        let budget_usd = match &self.budget_usd {
            None => None,
            Some(text) => match arbiter_core::money::Usd::parse(text) {
                Some(b) if b > arbiter_core::money::Usd::ZERO => Some(b),
                _ => {
                    return Err(format!(
                        "--budget-usd '{text}' is not a positive amount of USD; write it like 2.50 (at most 12 decimals)"
                    ));
                }
            },
        };
        Ok(arbiter_core::settings::RunOptions {
            candidates: self.candidates,
            parallel: self.parallel,
            timeout_seconds: self.timeout_seconds,
            verify: list(&self.verify),
            verify_timeout_seconds: self.verify_timeout_seconds,
            include: list(&self.include),
            setup: self.setup.clone(),
            runner: self.runner.clone(),
            command: self.command.clone(),
            backend: self.backend.clone(),
            max_steps: self.max_steps,
            max_tokens: self.max_tokens,
            apply: self.apply.clone(),
            keep_worktrees: self.keep_worktrees.then_some(true),
            sandbox: self.sandbox.clone(),
            allow_test_changes: self.allow_test_changes.then_some(true),
            judge: self.no_judge.then_some(false),
            strategy: self.strategy.clone(),
            min_capability: self.min_capability,
            budget_usd,
            cross_tests: self.no_cross_tests.then_some(false),
            unverified: self.no_verify.then_some(true),
            rules: self.rules.then_some(true),
            repair_rounds: self.repair_rounds,
            ..Default::default()
        })
    }
}

/// `arbiter feature ...` (see docs/slices.md).
#[derive(Debug, Subcommand)]
pub enum FeatureCommand {
    /// Create a slice: its branch <domain>/<Feature> from the default branch, spec.md (the
    /// spec role and spec QA, or orch.py's template), the scaffold and the registry entry, in
    /// one commit.
    New {
        /// <domain>/<Feature>, or <Feature> (the domain from .features.json, else nodomain).
        target: String,
        /// What the slice does.
        prompt: Vec<String>,
        /// Read the prompt from this file instead.
        #[arg(long, value_name = "FILE")]
        prompt_file: Option<PathBuf>,
        /// The template set: `python` (orch.py's slice), or .arbiter/templates/<SET>/
        /// [default: [slices] template, or python].
        #[arg(long, value_name = "SET")]
        template: Option<String>,
        /// The app of .features.json whose features directory and registry the slice joins.
        #[arg(long, short = 'a', value_name = "APP")]
        app: Option<String>,
        /// Leave Controller.py out (a background worker).
        #[arg(long)]
        no_controller: bool,
        /// Write the scaffold over an existing slice or onto an existing branch.
        #[arg(long)]
        force: bool,
    },
    /// Amend a slice's spec: a dated amendment (request, resolution, QA verdict) recorded in
    /// spec.md and committed on the slice's branch. Without a target: the current branch's
    /// slice, else the editor's file ($ARBITER_CURRENT_FILE, or the $NVIM server's).
    Modify {
        /// [<domain>/]<Feature>, then the change (a first word with spaces is the change).
        words: Vec<String>,
        /// Read the change from this file instead.
        #[arg(long, value_name = "FILE")]
        prompt_file: Option<PathBuf>,
    },
    /// Implement a slice as a tournament: candidates gated by the rules, the slice's tests
    /// and the verify commands, each with a repair loop; the winner committed as
    /// `feat: <Name>` on the slice's branch and pushed when there is a remote.
    Do {
        /// [<domain>/]<Feature> [default: the current branch's slice].
        target: Option<String>,
        /// Do not push the slice's branch.
        #[arg(long)]
        no_push: bool,
        /// Leave the rules gate out.
        #[arg(long)]
        no_rules: bool,
        /// Print one JSON value on stdout instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        settings: Box<SettingsArgs>,
    },
    /// Merge a slice into the default branch (brought up to date from the remote first) with a
    /// merge commit, push it, and delete the slice's branch locally and remotely.
    Merge {
        /// [<domain>/]<Feature> [default: the current branch's slice].
        target: Option<String>,
        /// Merge locally only: no fetch, no push.
        #[arg(long)]
        no_push: bool,
    },
    /// Discard a slice's branch (locally and remotely), and nothing else.
    Undo {
        /// [<domain>/]<Feature> [default: the current branch's slice].
        target: Option<String>,
        /// With uncommitted changes: discard those inside the slice and keep the others.
        #[arg(long)]
        yes: bool,
    },
    /// Remove a slice and its registry entry as a commit, and delete its branch.
    Delete {
        /// [<domain>/]<Feature> [default: the current branch's slice].
        target: Option<String>,
        /// Also when its branch has commits the default branch lacks.
        #[arg(long)]
        yes: bool,
    },
    /// Rename a slice (directory, registry entry and branch) in one commit, then run its tests.
    Move {
        /// <domain>/<Feature> as it is.
        from: String,
        /// [<domain>/]<Feature> it becomes (without a domain: the same domain).
        to: String,
    },
    /// The slices on disk, by domain, and whether .features.json registers them.
    Scan {
        /// Print one JSON value on stdout instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The slices in progress: every slice branch, ahead and behind the default branch.
    Status {
        /// Print one JSON value on stdout instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// `arbiter rules ...`.
#[derive(Debug, Subcommand)]
pub enum RulesCommand {
    /// Check files against the rules: `path:line message` per violation; exit 1 when there is one.
    Check {
        /// Files or directories (relative to the repository root) [default: the whole repository].
        paths: Vec<String>,
        /// Only checks of this group (repeatable) [default: [rules] groups, or all].
        #[arg(long, value_name = "GROUP")]
        group: Vec<String>,
        /// Leave out the project checks.
        #[arg(long)]
        no_project: bool,
        /// Print one JSON value on stdout instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The rule sets in force: where each came from and its checks.
    List {
        /// Print one JSON value on stdout instead of text.
        #[arg(long)]
        json: bool,
    },
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
