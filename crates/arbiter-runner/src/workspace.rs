//! The `.arbiter/` directory of a repository: its layout, `arbiter init` and the exclusion
//! from git, and what older arbiters left there.
//!
//! Candidates no longer work in worktrees of the repository (they work in the isolated
//! workspaces of [`crate::pool`]); the `worktrees/` directory an older arbiter used is removed,
//! with git's records of it, when a run finds it.

use std::fs;
use std::path::{Path, PathBuf};

use arbiter_core::artifact::{RunState, paths};
use arbiter_core::ids::RunId;
use arbiter_core::settings::DEFAULT_CONFIG_TOML;
use arbiter_core::status::RunStatus;

use crate::git::{Git, GitError};
use crate::rundir::RunDir;

/// The name of the directory inside the repository.
pub const DIR_NAME: &str = ".arbiter";

/// Paths of `.arbiter/` in one repository.
#[derive(Clone, Debug)]
pub struct Workspace {
    root: PathBuf,
}

/// What `init` did.
#[derive(Debug, Default)]
pub struct InitReport {
    pub created_config: bool,
    pub added_exclude: bool,
}

impl Workspace {
    /// The workspace of the repository whose top level is `root`.
    pub fn at(root: PathBuf) -> Self {
        Workspace { root }
    }

    pub fn repo_root(&self) -> &Path {
        &self.root
    }
    pub fn dir(&self) -> PathBuf {
        self.root.join(DIR_NAME)
    }
    pub fn config_path(&self) -> PathBuf {
        self.dir().join("config.toml")
    }
    pub fn db_path(&self) -> PathBuf {
        self.dir().join("arbiter.db")
    }
    pub fn runs_dir(&self) -> PathBuf {
        self.dir().join("runs")
    }
    pub fn run_dir(&self, id: &RunId) -> PathBuf {
        self.runs_dir().join(id.as_str())
    }
    /// Where an older arbiter kept candidate worktrees.
    fn legacy_worktrees_dir(&self) -> PathBuf {
        self.dir().join("worktrees")
    }
    pub fn scratch_dir(&self) -> PathBuf {
        self.dir().join("tmp")
    }

    /// Creates `.arbiter/` (config.toml with commented defaults, runs/, tmp/) and adds it to
    /// `.git/info/exclude`. Safe to repeat: existing files are kept.
    pub async fn init(&self, git: &Git) -> Result<InitReport, GitError> {
        let mut report = InitReport::default();
        for d in [self.runs_dir(), self.scratch_dir()] {
            fs::create_dir_all(&d)?;
        }
        if !self.config_path().exists() {
            fs::write(self.config_path(), DEFAULT_CONFIG_TOML)?;
            report.created_config = true;
        }
        report.added_exclude = self.exclude_from_git(git).await?;
        Ok(report)
    }

    /// Adds `.arbiter/` to `.git/info/exclude` unless it is there; whether it added it.
    /// Every command that creates `.arbiter/` calls it, `init` or not (a store opened before
    /// `arbiter init` must not show up as untracked work).
    pub async fn exclude_from_git(&self, git: &Git) -> Result<bool, GitError> {
        let common = git.facts().await?.common_dir;
        let exclude = common.join("info").join("exclude");
        let current = fs::read_to_string(&exclude).unwrap_or_default();
        if current.lines().any(|l| l.trim() == "/.arbiter/" || l.trim() == ".arbiter/" || l.trim() == ".arbiter") {
            return Ok(false);
        }
        fs::create_dir_all(exclude.parent().unwrap_or(&common))?;
        let mut text = current;
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str("# arbiter's runs, worktrees and database\n.arbiter/\n");
        fs::write(&exclude, text)?;
        Ok(true)
    }

    /// Removes the worktrees an older arbiter left in `.arbiter/worktrees/` and git's
    /// records of them (best effort: what cannot be removed is left for the next run).
    pub async fn remove_legacy_worktrees(&self, git: &Git) {
        let dir = self.legacy_worktrees_dir();
        if !dir.is_dir() {
            return;
        }
        crate::pool::kill_processes_inside(&dir);
        if fs::remove_dir_all(&dir).is_ok() {
            let _ = git.run(["worktree", "prune"]).await;
        }
    }
}

/// Records a run left `running` by a dead process as interrupted; returns whether it was
/// (a run that had finished is left as it is).
pub fn mark_interrupted(run_dir: &Path) -> bool {
    let dir = RunDir::open(run_dir.to_path_buf());
    let Ok(text) = dir.read_text(paths::STATE) else {
        return false;
    };
    match serde_json::from_str::<RunState>(&text) {
        Ok(mut state) if state.status == RunStatus::Running => {
            state.status = RunStatus::Interrupted;
            state.message = Some("the process running this run died; a later run recovered its workspaces".into());
            dir.write_json(paths::STATE, &state).is_ok()
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn repo() -> (tempfile::TempDir, Workspace, Git) {
        let tmp = tempfile::tempdir().expect("temp dir");
        let git = Git::new(tmp.path().to_path_buf());
        git.run(["init", "--quiet"]).await.expect("git init");
        fs::write(tmp.path().join("a.txt"), "a\n").expect("write a file");
        git.run(["add", "a.txt"]).await.expect("git add");
        git.run(["-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "--quiet", "-m", "base"])
            .await
            .expect("git commit");
        let ws = Workspace::at(tmp.path().to_path_buf());
        ws.init(&git).await.expect("init");
        (tmp, ws, git)
    }

    #[tokio::test]
    async fn worktrees_of_an_older_arbiter_are_removed_with_git_s_records() {
        let (_tmp, ws, git) = repo().await;
        let tree = ws.legacy_worktrees_dir().join("20240101T000000Z-000001").join("c01");
        git.run([
            std::ffi::OsStr::new("worktree"),
            "add".as_ref(),
            "--detach".as_ref(),
            tree.as_os_str(),
            "HEAD".as_ref(),
        ])
        .await
        .expect("worktree add");
        ws.remove_legacy_worktrees(&git).await;
        assert!(!ws.legacy_worktrees_dir().exists());
        let listed = git.run(["worktree", "list", "--porcelain"]).await.expect("list").text();
        assert_eq!(listed.lines().filter(|l| l.starts_with("worktree ")).count(), 1, "{listed}");
    }

    #[test]
    fn only_a_running_run_is_marked_interrupted() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = RunDir::create(tmp.path().join("run")).unwrap();
        assert!(!mark_interrupted(dir.path()), "no state.json");
        dir.write_json(paths::STATE, &serde_json::json!({"status": "succeeded"})).unwrap();
        assert!(!mark_interrupted(dir.path()), "unreadable or finished states are left alone");
    }
}
