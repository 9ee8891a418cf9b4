//! Putting a winning patch into the user's repository: the working tree, a new branch
//! (with one commit, working tree untouched), or — for `arbiter apply` — a new checked-out
//! branch, optionally committed. Every path checks `git apply --check` first and leaves the
//! repository as it was when anything fails.

use std::path::Path;

use crate::capture;
use crate::git::{Git, GitError};

/// Why a patch could not be materialized. Nothing was changed when this is returned.
#[derive(Debug, thiserror::Error)]
pub enum MaterializeError {
    #[error(
        "the working tree has uncommitted changes ({0}); commit or stash them, or pass --force to apply on top of them"
    )]
    Dirty(String),
    #[error("the patch does not apply to the working tree: {0}")]
    DoesNotApply(String),
    #[error("'{0}' is not a valid branch name")]
    BadBranch(String),
    #[error("branch '{0}' already exists; choose another name or delete it first")]
    BranchExists(String),
    #[error(transparent)]
    Git(#[from] GitError),
}

impl From<std::io::Error> for MaterializeError {
    fn from(e: std::io::Error) -> Self {
        MaterializeError::Git(GitError::Io(e))
    }
}

/// Summarizes dirty paths for an error message.
pub fn describe_paths(paths: &[String]) -> String {
    let shown: Vec<&str> = paths.iter().take(5).map(String::as_str).collect();
    let more = paths.len().saturating_sub(shown.len());
    if more > 0 { format!("{} and {more} more", shown.join(", ")) } else { shown.join(", ") }
}

/// Applies `patch` to the working tree of `repo` (its top level).
pub async fn apply_to_worktree(repo: &Git, patch: &Path) -> Result<(), MaterializeError> {
    let p = patch.as_os_str();
    if let Err(GitError::Failed { stderr, .. }) =
        repo.run([std::ffi::OsStr::new("apply"), std::ffi::OsStr::new("--check"), p]).await
    {
        return Err(MaterializeError::DoesNotApply(stderr));
    }
    repo.run([std::ffi::OsStr::new("apply"), p]).await?;
    Ok(())
}

/// Creates branch `name` at a new commit holding `patch` on top of `base`; the working
/// tree and the current branch are untouched. Returns the commit.
pub async fn commit_to_new_branch(
    repo: &Git,
    base: &str,
    patch: &Path,
    name: &str,
    scratch_index: &Path,
    message: &str,
) -> Result<String, MaterializeError> {
    if !repo.valid_branch_name(name).await {
        return Err(MaterializeError::BadBranch(name.to_string()));
    }
    if repo.branch_exists(name).await? {
        return Err(MaterializeError::BranchExists(name.to_string()));
    }
    if let Err(why) = capture::apply_check(repo, base, patch, scratch_index).await? {
        return Err(MaterializeError::DoesNotApply(why));
    }
    let commit = capture::commit_patch(repo, base, patch, scratch_index, message).await?;
    let r = format!("refs/heads/{name}");
    // The empty old value makes the update fail if the branch appeared meanwhile.
    repo.run(["update-ref", r.as_str(), commit.as_str(), ""]).await?;
    Ok(commit)
}

/// What `arbiter apply` did.
#[derive(Debug, Default)]
pub struct ApplyResult {
    pub created_branch: bool,
    pub commit: Option<String>,
    /// The working tree held the patch already (applied before, or committed): nothing
    /// was changed.
    pub already_applied: bool,
}

/// Whether the working tree of `repo` holds `patch` already: it does not apply, and
/// reversed it does.
async fn holds_already(repo: &Git, patch: &Path) -> bool {
    let check = |reverse: bool| async move {
        let mut args = vec![std::ffi::OsStr::new("apply"), std::ffi::OsStr::new("--check")];
        if reverse {
            args.push(std::ffi::OsStr::new("--reverse"));
        }
        args.push(patch.as_os_str());
        repo.run(args).await.is_ok()
    };
    !check(false).await && check(true).await
}

/// A failed `arbiter apply`, after rollback.
#[derive(Debug)]
pub struct ApplyFailure {
    pub error: MaterializeError,
    pub rolled_back: bool,
}

/// Commits `patch` on top of `head` (the checked-out commit, whose working tree and index
/// hold the patch already) and moves the checked-out branch to that commit.
async fn commit_patch_only(repo: &Git, head: &str, patch: &Path, message: &str) -> Result<String, MaterializeError> {
    let scratch = tempfile::tempdir()?;
    let commit = capture::commit_patch(repo, head, patch, &scratch.path().join("index"), message).await?;
    // The old value makes the update fail if HEAD moved meanwhile.
    repo.run(["update-ref", "-m", "arbiter apply", "HEAD", commit.as_str(), head]).await?;
    Ok(commit)
}

/// `arbiter apply`: optionally switches to a new branch, applies the patch to the working
/// tree and optionally commits. `tooling`: working-tree files the run ran programs from
/// (not counted as uncommitted work). On failure the new branch is removed and the original
/// branch checked out again.
pub async fn apply_run_patch(
    repo: &Git,
    patch: &Path,
    tooling: &[String],
    branch: Option<&str>,
    commit_message: Option<&str>,
    force: bool,
) -> Result<ApplyResult, ApplyFailure> {
    let fail = |error: MaterializeError| ApplyFailure { error, rolled_back: false };
    // Applied before (`arbiter apply` twice, or a run that applied it): said, not refused
    // as a patch that does not apply, nor as uncommitted changes (they are its own).
    if branch.is_none() && holds_already(repo, patch).await {
        return Ok(ApplyResult { already_applied: true, ..Default::default() });
    }
    if !force {
        let mut dirty = repo.dirty_paths().await.map_err(|e| fail(e.into()))?;
        dirty.retain(|d| !tooling.contains(d));
        if !dirty.is_empty() {
            return Err(fail(MaterializeError::Dirty(describe_paths(&dirty))));
        }
    }
    let p = patch.as_os_str();
    if let Err(GitError::Failed { stderr, .. }) =
        repo.run([std::ffi::OsStr::new("apply"), std::ffi::OsStr::new("--check"), p]).await
    {
        return Err(fail(MaterializeError::DoesNotApply(stderr)));
    }
    let original = repo.current_branch().await.map_err(|e| fail(e.into()))?;
    let original_head = repo.resolve_commit("HEAD").await.map_err(|e| fail(e.into()))?;
    let mut result = ApplyResult::default();
    if let Some(name) = branch {
        if !repo.valid_branch_name(name).await {
            return Err(fail(MaterializeError::BadBranch(name.to_string())));
        }
        if repo.branch_exists(name).await.map_err(|e| fail(e.into()))? {
            return Err(fail(MaterializeError::BranchExists(name.to_string())));
        }
        repo.run(["switch", "--quiet", "-c", name]).await.map_err(|e| fail(e.into()))?;
        result.created_branch = true;
    }
    let applied: Result<Option<String>, MaterializeError> = async {
        let index_flag = if commit_message.is_some() { Some(std::ffi::OsStr::new("--index")) } else { None };
        let mut args = vec![std::ffi::OsStr::new("apply")];
        args.extend(index_flag);
        args.push(p);
        repo.run(args).await?;
        match commit_message {
            // The commit holds the patch and nothing else: files the user staged for
            // something of their own (allowed with --force) stay staged, uncommitted.
            Some(message) => match commit_patch_only(repo, &original_head, patch, message).await {
                Ok(commit) => Ok(Some(commit)),
                Err(e) => {
                    let _ = repo
                        .run([
                            std::ffi::OsStr::new("apply"),
                            std::ffi::OsStr::new("--index"),
                            std::ffi::OsStr::new("--reverse"),
                            p,
                        ])
                        .await;
                    Err(e)
                }
            },
            None => Ok(None),
        }
    }
    .await;
    match applied {
        Ok(commit) => {
            result.commit = commit;
            Ok(result)
        }
        Err(error) => {
            let mut rolled_back = false;
            if let Some(name) = branch.filter(|_| result.created_branch) {
                let back = match &original {
                    Some(b) => repo.run(["switch", "--quiet", "--discard-changes", b.as_str()]).await,
                    None => {
                        repo.run(["switch", "--quiet", "--discard-changes", "--detach", original_head.as_str()]).await
                    }
                };
                rolled_back = back.is_ok() && repo.run(["branch", "-D", name]).await.is_ok();
            }
            Err(ApplyFailure { error, rolled_back })
        }
    }
}
