//! `arbiter plan ...`: its verbs, `plan new`'s arguments, and the `--server` options a plan
//! command shares (`PlanServerArgs`).

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::ServerArgs;

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
