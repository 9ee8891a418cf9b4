//! Errors as the user sees them: a message, a kind that decides the exit code.

use std::fmt;

/// Exit codes (see docs/cli.md).
pub mod exit {
    pub const SUCCESS: u8 = 0;
    /// The run finished without an acceptable result (or it could not be applied).
    pub const NO_RESULT: u8 = 1;
    /// Bad input: usage, configuration, task, repository state.
    pub const USAGE: u8 = 2;
    /// The environment failed: git, the database, the disk.
    pub const ENVIRONMENT: u8 = 3;
    pub const INTERRUPTED: u8 = 130;
}

/// A failure to report, with its exit code.
#[derive(Debug)]
pub struct CliError {
    pub code: u8,
    pub message: String,
}

impl CliError {
    pub fn usage(message: impl fmt::Display) -> Self {
        CliError { code: exit::USAGE, message: message.to_string() }
    }
    pub fn environment(message: impl fmt::Display) -> Self {
        CliError { code: exit::ENVIRONMENT, message: message.to_string() }
    }
    pub fn no_result(message: impl fmt::Display) -> Self {
        CliError { code: exit::NO_RESULT, message: message.to_string() }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<arbiter_runner::git::GitError> for CliError {
    fn from(e: arbiter_runner::git::GitError) -> Self {
        use arbiter_runner::git::GitError;
        match e {
            GitError::NotARepository(_) | GitError::UnknownRevision(_) | GitError::NoCommits => CliError::usage(e),
            _ => CliError::environment(e),
        }
    }
}

impl From<arbiter_store::StoreError> for CliError {
    fn from(e: arbiter_store::StoreError) -> Self {
        use arbiter_store::StoreError;
        match e {
            // What the user asked for cannot be done: bad input, not a broken environment.
            StoreError::NoPlan { .. }
            | StoreError::NoTask { .. }
            | StoreError::PlanInvalid { .. }
            | StoreError::ImportRefused { .. }
            | StoreError::PlanExists { .. }
            | StoreError::SourceTaken { .. }
            | StoreError::NotAllowed { .. }
            | StoreError::LeasesHeld { .. }
            | StoreError::NoToken { .. }
            | StoreError::TokenExists { .. }
            | StoreError::InvalidToken { .. }
            | StoreError::UnsupportedDatabase { .. } => CliError::usage(e),
            _ => CliError::environment(e),
        }
    }
}

impl From<arbiter_runner::plan_admin::AdminError> for CliError {
    fn from(e: arbiter_runner::plan_admin::AdminError) -> Self {
        if e.is_usage() { CliError::usage(e) } else { CliError::environment(e) }
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::environment(format!("i/o error: {e}"))
    }
}

impl From<arbiter_core::settings::SettingsError> for CliError {
    fn from(e: arbiter_core::settings::SettingsError) -> Self {
        CliError::usage(e)
    }
}
