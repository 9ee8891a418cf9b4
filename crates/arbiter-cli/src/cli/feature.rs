//! `arbiter feature ...` and `arbiter rules ...`: feature slices and the rules engine.

use std::path::PathBuf;

use clap::Subcommand;

use super::SettingsArgs;

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
