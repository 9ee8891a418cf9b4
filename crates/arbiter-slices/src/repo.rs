//! The git operations of the slice verbs, through arbiter's git wrapper (no hook, fsmonitor
//! or pager a repository names ever runs). Every operation that could lose work checks
//! first and refuses with the reason: a dirty tree, a branch that exists, a default branch
//! that diverged from its remote.

use std::path::{Path, PathBuf};

use arbiter_runner::git::{Git, GitError};

use crate::settings::SliceSettings;
use crate::{Result, SliceError};

/// The repository the verbs work on.
pub struct Repo {
    pub root: PathBuf,
    pub git: Git,
    pub settings: SliceSettings,
}

/// `a, b and 3 more`.
pub fn describe_paths(paths: &[String]) -> String {
    arbiter_runner::materialize::describe_paths(paths)
}

impl Repo {
    pub fn new(root: &Path, settings: SliceSettings) -> Repo {
        Repo { root: root.to_path_buf(), git: Git::new(root), settings }
    }

    /// The integration branch: `[slices] default_branch`, else `main`, else `master`, else
    /// git's `init.defaultBranch` when it exists.
    pub async fn default_branch(&self) -> Result<String> {
        if let Err(arbiter_runner::git::GitError::NoCommits) = self.git.resolve_commit("HEAD").await {
            return Err(SliceError::refused(
                "the repository has no commit yet, so no default branch to start slices from; commit first (e.g. `git commit --allow-empty -m init`)",
            ));
        }
        if let Some(b) = &self.settings.default_branch {
            if !self.branch_exists(b).await? {
                return Err(SliceError::refused(format!(
                    "[slices] default_branch is '{b}', which is not a branch of this repository; fix the setting"
                )));
            }
            return Ok(b.clone());
        }
        for b in ["main", "master"] {
            if self.branch_exists(b).await? {
                return Ok(b.to_string());
            }
        }
        if let Some(b) = self.git.config_value("init.defaultBranch").await?
            && self.branch_exists(&b).await?
        {
            return Ok(b);
        }
        Err(SliceError::refused(
            "this repository has no main or master branch to integrate slices into; set [slices] default_branch in .arbiter/config.toml",
        ))
    }

    pub async fn current_branch(&self) -> Result<Option<String>> {
        Ok(self.git.current_branch().await?)
    }

    pub async fn branch_exists(&self, branch: &str) -> Result<bool> {
        Ok(self.git.branch_exists(branch).await?)
    }

    /// Uncommitted changes (arbiter's own `.arbiter/` aside).
    pub async fn dirty(&self) -> Result<Vec<String>> {
        Ok(self.git.dirty_paths().await?)
    }

    /// Refuses when the working tree has uncommitted changes, saying what `doing` needs.
    pub async fn require_clean(&self, doing: &str) -> Result<()> {
        let dirty = self.dirty().await?;
        if dirty.is_empty() {
            return Ok(());
        }
        Err(SliceError::refused(format!(
            "{doing} needs a clean working tree, and it has uncommitted changes ({}); commit or stash them first",
            describe_paths(&dirty)
        )))
    }

    /// Whether the configured remote exists.
    pub async fn has_remote(&self) -> Result<bool> {
        let out = self.git.run(["remote"]).await?;
        Ok(out.text().lines().any(|r| r.trim() == self.settings.remote))
    }

    /// Whether the remote has `branch` (asked over the network: `git ls-remote`).
    pub async fn remote_has_branch(&self, branch: &str) -> Result<bool> {
        let refname = format!("refs/heads/{branch}");
        let out = self.git.run(["ls-remote", "--heads", self.settings.remote.as_str(), refname.as_str()]).await?;
        Ok(!out.text().trim().is_empty())
    }

    pub async fn switch(&self, branch: &str) -> Result<()> {
        self.git.run(["switch", "--quiet", branch]).await.map_err(|e| match e {
            GitError::Failed { stderr, .. } => {
                SliceError::refused(format!("git cannot switch to {branch}: {}", stderr.trim()))
            }
            other => SliceError::from(other),
        })?;
        Ok(())
    }

    /// Creates `branch` at `from` and switches to it.
    pub async fn create_branch(&self, branch: &str, from: &str) -> Result<()> {
        self.git.run(["switch", "--quiet", "-c", branch, from]).await?;
        Ok(())
    }

    /// Stages `paths` (additions, changes, deletions) and commits exactly them with
    /// `message`; `None` when there was nothing to commit.
    pub async fn commit(&self, paths: &[String], message: &str) -> Result<Option<String>> {
        // A path gone from the disk and the index (moved or removed with git) is still
        // committed (its removal), but `git add` would not know it.
        let mut known = Vec::new();
        for p in paths {
            let listed = self.git.run(["ls-files", "--", p.as_str()]).await.is_ok_and(|o| !o.stdout.is_empty());
            if self.root.join(p).exists() || listed || self.exists_at("HEAD", p).await {
                known.push(p.clone());
            }
        }
        let paths = &known;
        let on_disk: Vec<String> = paths.iter().filter(|p| self.root.join(p).exists()).cloned().collect();
        if !on_disk.is_empty() {
            let mut add = vec!["add".to_string(), "--all".into(), "--".into()];
            add.extend(on_disk);
            self.git.run(add).await?;
        }
        let mut staged = vec!["diff".to_string(), "--cached".into(), "--quiet".into(), "--".into()];
        staged.extend(paths.iter().cloned());
        if self.git.run(staged).await.is_ok() {
            return Ok(None);
        }
        let mut commit = vec![
            "commit".to_string(),
            "--quiet".into(),
            "--no-verify".into(),
            "-m".into(),
            message.into(),
            "--".into(),
        ];
        commit.extend(paths.iter().cloned());
        self.git.run(commit).await.map_err(|e| match e {
            GitError::Failed { stderr, .. } => SliceError::environment(format!(
                "git could not commit \"{message}\": {} (is user.name/user.email configured?)",
                stderr.trim()
            )),
            other => SliceError::from(other),
        })?;
        Ok(Some(self.git.resolve_commit("HEAD").await?))
    }

    /// Pushes `refspec` to the remote (`-u` sets the upstream of a branch).
    pub async fn push(&self, args: &[&str]) -> std::result::Result<(), String> {
        let mut all = vec!["push", "--quiet"];
        all.extend_from_slice(args);
        self.git.run(all).await.map(|_| ()).map_err(|e| match e {
            GitError::Failed { stderr, .. } => stderr.trim().to_string(),
            other => other.to_string(),
        })
    }

    /// Commits on `branch` that `onto` does not have.
    pub async fn commits_not_in(&self, branch: &str, onto: &str) -> Result<Vec<String>> {
        let range = format!("{onto}..{branch}");
        let out = self.git.run(["log", "--format=%h %s", range.as_str()]).await?;
        Ok(out.text().lines().map(str::to_string).filter(|l| !l.is_empty()).collect())
    }

    /// `(ahead, behind)` of `branch` against `onto`.
    pub async fn ahead_behind(&self, branch: &str, onto: &str) -> Result<(u32, u32)> {
        let range = format!("{onto}...{branch}");
        let out = self.git.run(["rev-list", "--left-right", "--count", range.as_str()]).await?;
        let text = out.text();
        let mut it = text.split_whitespace().map(|n| n.parse::<u32>().unwrap_or(0));
        let behind = it.next().unwrap_or(0);
        let ahead = it.next().unwrap_or(0);
        Ok((ahead, behind))
    }

    /// Local branches, sorted.
    pub async fn local_branches(&self) -> Result<Vec<String>> {
        let out = self.git.run(["for-each-ref", "--format=%(refname:short)", "refs/heads"]).await?;
        let mut b: Vec<String> = out.text().lines().map(str::to_string).collect();
        b.sort();
        Ok(b)
    }

    /// Whether `path` exists in the tree of `rev`.
    pub async fn exists_at(&self, rev: &str, path: &str) -> bool {
        let spec = format!("{rev}:{path}");
        self.git.run(["cat-file", "-e", spec.as_str()]).await.is_ok()
    }
}
