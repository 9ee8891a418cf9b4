//! Run settings: the `.arbiter/config.toml` schema ([`ConfigFile`]), the one type every
//! layer of run settings is written in ([`RunOptions`]: the file's `[run]` table, a plan's
//! defaults, a task's values, the flags), their resolution into [`RunSettings`] (flags over
//! config over the built-in defaults written once in [`defaults`] and
//! `default_config.toml`) with the origin of every value, the runners a run names
//! ([`runners`]), and the table `config show` prints ([`show`]).
//!
//! Reading the file is the caller's business; this module parses text and resolves values.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::crosstest::CrossTestRule;
use crate::limits::CandidateLimits;
use crate::money::Usd;
use crate::sandbox::SandboxMode;
use crate::strategy::{CandidateOption, Strategy};

/// Built-in defaults.
pub mod defaults {
    pub const CANDIDATES: u32 = 3;
    /// The most candidates one run may have: each is a workspace and an agent of its own,
    /// and the evidence between them grows with the square of their number.
    pub const MAX_CANDIDATES: u32 = 64;
    pub const TIMEOUT_SECONDS: u64 = 1800;
    pub const VERIFY_TIMEOUT_SECONDS: u64 = 600;
    pub const SETUP_TIMEOUT_SECONDS: u64 = 600;
    pub const RUNNER: &str = "command";
    pub const MAX_STEPS: u32 = 40;
    pub const MAX_TOKENS: u64 = 400_000;
    /// The most repair rounds a candidate may have.
    pub const MAX_REPAIR_ROUNDS: u32 = 20;
}

/// The text `arbiter init` writes: every setting, commented, at its default.
pub const DEFAULT_CONFIG_TOML: &str = include_str!("default_config.toml");

/// `.arbiter/config.toml` as written by users.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    #[serde(default)]
    pub run: RunOptions,
    #[serde(default)]
    pub runners: BTreeMap<String, RunnerSection>,
    #[serde(default)]
    pub backends: BTreeMap<String, crate::backends::BackendSection>,
    /// Ordered backend chains per role: `coding = ["local-qwen", "gpt"]`.
    #[serde(default)]
    pub roles: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    pub cross_tests: CrossTestSection,
    #[serde(default)]
    pub sandbox: SandboxSection,
    /// Where the rules engine's rule files come from and how it reads files.
    #[serde(default)]
    pub rules: crate::rules::RulesSection,
    /// The feature-slice workflow (`arbiter feature`, `arbiter qa`).
    #[serde(default)]
    pub slices: SlicesSection,
    #[serde(default)]
    pub intake: crate::intake::config::IntakeSection,
    #[serde(default)]
    pub forge: crate::intake::config::ForgeSection,
    #[serde(default)]
    pub analysis: crate::intake::config::AnalysisSection,
}

/// The `[slices]` table: how `arbiter feature` and `arbiter qa` work on feature slices.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SlicesSection {
    /// The command that runs one slice's tests, in the repository root: `{tests}` is the
    /// slice's test file and `{dir}` its directory, both relative to the root (default
    /// `python3 -m pytest -q {tests}`).
    pub test_command: Option<String>,
    /// Seconds the test command may take (default 300).
    pub test_timeout_seconds: Option<u64>,
    /// The file of a slice that holds its tests (default `Tests.py`).
    pub tests_file: Option<String>,
    /// Repair rounds of each `feature do` candidate (default 3).
    pub repair_rounds: Option<u32>,
    /// Spec QA rounds of `feature new` and `feature modify` (default 3).
    pub spec_qa_rounds: Option<u32>,
    /// The template set `feature new` scaffolds (default `python`, orch.py's slice).
    pub template: Option<String>,
    /// The integration branch (default: `main`, else `master`, else git's `init.defaultBranch`).
    pub default_branch: Option<String>,
    /// The remote `do`, `merge`, `undo` and `delete` push to and fetch from (default `origin`).
    pub remote: Option<String>,
    /// Push after `do` and `merge` when the remote exists (default true).
    pub push: Option<bool>,
}

/// The `[sandbox]` table: paths beyond the built-in ones (`~/` is the home directory).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(deny_unknown_fields)]
pub struct SandboxSection {
    /// Paths every candidate process may also write.
    #[serde(default)]
    pub writable: Vec<String>,
    /// Paths no candidate process may read.
    #[serde(default)]
    pub hidden: Vec<String>,
}

/// The `[cross_tests]` table.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CrossTestSection {
    pub enabled: Option<bool>,
    /// Replace the built-in rules.
    pub rules: Option<Vec<CrossTestRule>>,
}

/// Where a resolved value came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    Default,
    Config,
    Flag,
    /// Found in the repository's files (its test command, when none was given).
    Detected,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Origin::Default => "default",
            Origin::Config => "config",
            Origin::Flag => "flag",
            Origin::Detected => "detected",
        })
    }
}

/// A value and its origin.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct Sourced<T> {
    pub value: T,
    pub origin: Origin,
}

impl<T> Sourced<T> {
    /// What a section of the configuration file gives (`None`: nothing), else `default`.
    pub fn from_file(given: Option<T>, default: T) -> Self {
        match given {
            Some(value) => Sourced { value, origin: Origin::Config },
            None => Sourced { value: default, origin: Origin::Default },
        }
    }
}

/// The default value (settings recorded before the setting existed read as its default).
impl<T: Default> Default for Sourced<T> {
    fn default() -> Self {
        Sourced { value: T::default(), origin: Origin::Default }
    }
}

/// Where the winning patch goes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(tag = "mode", content = "branch", rename_all = "snake_case")]
pub enum ApplyMode {
    /// Apply to the repository's working tree.
    Worktree,
    /// Create a new branch holding one commit; the working tree is untouched.
    Branch(String),
    /// Leave the repository alone.
    None,
}

impl ApplyMode {
    pub fn parse(s: &str) -> Result<Self, SettingsError> {
        match s {
            "worktree" => Ok(ApplyMode::Worktree),
            "none" => Ok(ApplyMode::None),
            other => match other.strip_prefix("branch:") {
                Some(name) if !name.trim().is_empty() => Ok(ApplyMode::Branch(name.trim().to_string())),
                _ => Err(SettingsError::Invalid {
                    key: "apply",
                    problem: format!("'{s}' is not an apply mode"),
                    fix: "use `worktree`, `none` or `branch:NAME`".into(),
                }),
            },
        }
    }
}

impl fmt::Display for ApplyMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApplyMode::Worktree => f.write_str("worktree"),
            ApplyMode::None => f.write_str("none"),
            ApplyMode::Branch(b) => write!(f, "branch:{b}"),
        }
    }
}

/// The first of `globs` that is not a glob, with why.
fn first_invalid_glob<'a>(globs: impl IntoIterator<Item = &'a String>) -> Option<(&'a String, String)> {
    globs.into_iter().find_map(|g| crate::protect::invalid_glob(g).map(|why| (g, why)))
}

/// How to write a glob, for a setting that holds one that is not.
const GLOB_FIX: &str = "write globs like \"tests/**\" or \"**/test_*.py\" (`*` within a name, `**` across directories, `[ab]`, `{a,b}`; escape a literal character with a backslash)";

/// Whether an include entry names `.git` or `.arbiter` (or something inside them).
pub fn names_private_dir(entry: &str) -> bool {
    let first = entry.trim().trim_start_matches("./").split('/').next().unwrap_or("");
    first == ".git" || first == ".arbiter"
}

/// A setting that cannot be used, with the fix.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SettingsError {
    #[error("invalid {key}: {problem}; {fix}")]
    Invalid { key: &'static str, problem: String, fix: String },
    #[error(
        "unknown runner '{name}': known runners are {known}; add a [runners.{name}] table to .arbiter/config.toml to define it"
    )]
    UnknownRunner { name: String, known: String },
    #[error("the {runner} runner needs a command: pass --command 'PROGRAM ARGS' or set `command` in {where_}")]
    MissingCommand { runner: String, where_: String },
    #[error("cannot parse {path}: {message}")]
    Parse { path: String, message: String },
    #[error(
        "the builtin runner needs a model backend: add one with `arbiter backend add NAME --provider ... --model ...` (role coding), or pass --backend NAME"
    )]
    NoBackend,
}

impl ConfigFile {
    /// Parses the text of a configuration file; `path` names it in errors.
    pub fn parse(text: &str, path: &str) -> Result<Self, SettingsError> {
        toml::from_str(text)
            .map_err(|e| SettingsError::Parse { path: path.to_string(), message: e.to_string().trim().to_string() })
    }
}

mod options;
mod resolve;
mod runners;
mod show;
#[cfg(test)]
mod tests;

use options::Layers;
pub use options::RunOptions;
pub use resolve::{OutsideProgram, RunSettings};
pub use runners::{AGENT_CLIS, AgentCliSpec, INHERITABLE, RUNNER_KINDS, RunnerKind, RunnerSection, RunnerSpec};
pub use show::Row;
