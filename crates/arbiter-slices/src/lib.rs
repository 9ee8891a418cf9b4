//! arbiter-slices: orch.py's feature-slice workflow on arbiter's own machinery.
//!
//! A feature slice is `<features_dir>/<domain>/<Feature>/` (a spec, the code, its tests),
//! registered in `.features.json` and worked on in the branch `<domain>/<Feature>`. The
//! verbs — `new`, `modify`, `do`, `merge`, `undo`, `delete`, `move`, `scan`, `status` and
//! `qa` — keep orch.py's behaviour contract and fix what it got wrong: exit codes that tell
//! the truth, nothing destroyed without being asked, the registry committed with its slice,
//! names resolved without prompting, every slice implemented by a tournament whose gates
//! (the rules engine, the slice's tests, the verify commands) feed a repair loop.
//!
//! Pure decisions (no file system, process or network) live in their own modules and are
//! unit-tested as functions:
//! - [`registry`]: the `.features.json` model (apps, domains, targets, registration);
//! - [`names`]: targets, name validation, resolution over a listing, names from branches
//!   and editor files;
//! - [`spec`]: the spec template, the prompts, spec QA verdicts, amendments;
//! - [`templates`]: template sets and their variables;
//! - [`settings`]: the `[slices]` table resolved.
//!
//! Effects are adapters around them: [`layout`] (reading and writing the registry, scanning
//! the slices on disk, scaffolding), [`repo`] (the git operations of the verbs), [`writer`]
//! (the `spec` role's model calls) and [`verbs`] (one function per verb, returning what
//! happened; this crate never prints).

pub mod layout;
pub mod names;
pub mod registry;
pub mod repo;
pub mod settings;
pub mod spec;
pub mod templates;
pub mod verbs;
pub mod writer;

use std::fmt;

/// How a verb failed, which decides the exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SliceError {
    /// Refused: bad input or a state the user must change first (exit 2).
    Refused(String),
    /// Tried and did not succeed (exit 1).
    Failed(String),
    /// The machine failed: git, the disk (exit 3).
    Environment(String),
}

impl SliceError {
    pub fn refused(m: impl fmt::Display) -> Self {
        SliceError::Refused(m.to_string())
    }
    pub fn failed(m: impl fmt::Display) -> Self {
        SliceError::Failed(m.to_string())
    }
    pub fn environment(m: impl fmt::Display) -> Self {
        SliceError::Environment(m.to_string())
    }

    pub fn message(&self) -> &str {
        match self {
            SliceError::Refused(m) | SliceError::Failed(m) | SliceError::Environment(m) => m,
        }
    }
}

impl fmt::Display for SliceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for SliceError {}

impl From<arbiter_runner::git::GitError> for SliceError {
    fn from(e: arbiter_runner::git::GitError) -> Self {
        use arbiter_runner::git::GitError;
        match e {
            GitError::NotARepository(_) | GitError::UnknownRevision(_) | GitError::NoCommits => {
                SliceError::Refused(e.to_string())
            }
            _ => SliceError::Environment(e.to_string()),
        }
    }
}

impl From<std::io::Error> for SliceError {
    fn from(e: std::io::Error) -> Self {
        SliceError::Environment(format!("i/o error: {e}"))
    }
}

impl From<arbiter_runner::rules::RulesError> for SliceError {
    fn from(e: arbiter_runner::rules::RulesError) -> Self {
        if e.is_usage() { SliceError::Refused(e.to_string()) } else { SliceError::Environment(e.to_string()) }
    }
}

pub type Result<T, E = SliceError> = std::result::Result<T, E>;
