//! `arbiter run`, `runs`, `apply` and `config`, and the run settings they share
//! (`SettingsArgs`, as one layer of run options).

use std::path::PathBuf;

use clap::{Args, Subcommand};

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
