//! The forge commands: `arbiter intake` (issues into plans) and `arbiter pr` (a run's
//! winner or a plan's branch as a pull request).

use clap::{Args, Subcommand};

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
