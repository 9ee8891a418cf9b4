//! The repository's own test command at a commit (the decision is
//! [`arbiter_core::test_command`]'s): the commit's tracked paths and the few small files the
//! decision reads, taken from git's objects, so the user's working tree (or an uncommitted
//! file in it) never decides what checks the candidates.

use arbiter_core::canary::StaticRepo;
use arbiter_core::test_command::{self, Detected};

use crate::git::{Git, GitError};

/// Files the decision may read, when the commit has them.
const READ: &[&str] = &[
    "Cargo.toml",
    "package.json",
    "Makefile",
    "makefile",
    "GNUmakefile",
    "pyproject.toml",
    "setup.cfg",
    "tox.ini",
    "setup.py",
    "requirements.txt",
    "requirements-dev.txt",
];

/// The largest file read (configuration files are small; anything larger is not one).
const MAX_READ: usize = 1 << 20;

/// The test command the repository's files at `commit` name, if any.
pub async fn at_commit(repo: &Git, commit: &str) -> Result<Option<Detected>, GitError> {
    let listing = repo.run(["ls-tree", "-r", "-z", "--name-only", commit]).await?;
    let files: Vec<String> =
        String::from_utf8_lossy(&listing.stdout).split('\0').filter(|f| !f.is_empty()).map(str::to_string).collect();
    let mut contents = std::collections::BTreeMap::new();
    for name in READ.iter().filter(|n| files.iter().any(|f| f == *n)) {
        let spec = format!("{commit}:{name}");
        if let Ok(out) = repo.run(["cat-file", "blob", spec.as_str()]).await
            && out.stdout.len() <= MAX_READ
            && let Ok(text) = String::from_utf8(out.stdout)
        {
            contents.insert(name.to_string(), text);
        }
    }
    Ok(test_command::detect(&StaticRepo { files, contents }))
}

/// Gives settings that still want verify commands (none given, no `--no-verify`) the
/// repository's test command, when one was found.
pub fn apply(settings: &mut arbiter_core::settings::RunSettings, detected: Option<&Detected>) {
    if let Some(d) = detected
        && settings.wants_detection()
    {
        settings.use_detected_verify(d.command.clone(), d.from.clone());
    }
}

/// Why a task of a plan cannot run unverified, with the fixes.
pub fn unverified_task(plan: &str, task: &str) -> String {
    format!(
        "task {task} has no verify command and none was found in the repository, so nothing would check its winner before it is committed: give the task (or the plan's defaults) `verify = [\"CMD\"]`, set `no_verify = true` in the plan's defaults, or run the plan with `arbiter plan run {plan} --no-verify`"
    )
}
