//! `feature merge`: the only way a slice reaches the default branch. The default branch is
//! brought up to date first (fetch and fast-forward when there is a remote; a diverged one
//! is refused), the slice is merged with a merge commit naming it, the default branch is
//! pushed, and the slice's branch is deleted locally and remotely. A conflict aborts the
//! merge and leaves everything as it was; so does a push that fails.

use serde::Serialize;

use super::Workspace;
use crate::registry::{RegistryFile, merge_three_way};
use crate::{Result, SliceError};

/// What `feature merge` did.
#[derive(Clone, Debug, Serialize)]
pub struct MergeOutcome {
    pub branch: String,
    pub into: String,
    pub merge_commit: String,
    /// Commits the default branch was fast-forwarded by from the remote first.
    pub fast_forwarded: bool,
    pub pushed: bool,
    pub remote_branch_deleted: bool,
    /// What could not be cleaned up (a remote branch that would not delete).
    pub warnings: Vec<String>,
}

pub async fn merge(ws: &Workspace, target: Option<&str>, no_push: bool) -> Result<MergeOutcome> {
    let repo = &ws.repo;
    let (_, branch) = ws.slice_branch(target, "merge").await?;
    let default = repo.default_branch().await?;
    if !repo.branch_exists(&branch).await? {
        return Err(SliceError::refused(format!(
            "there is no branch {branch} to merge; `arbiter feature status` lists the slices in progress"
        )));
    }
    repo.require_clean(&format!("merging {branch}")).await?;
    let remote = repo.settings.remote.clone();
    let use_remote = !no_push && repo.settings.push && repo.has_remote().await?;
    let mut fast_forwarded = false;
    if use_remote {
        repo.git.run(["fetch", "--quiet", remote.as_str()]).await.map_err(|e| {
            SliceError::environment(format!(
                "cannot fetch {remote} to bring {default} up to date: {e}; fix the remote, or merge with --no-push"
            ))
        })?;
        let upstream = format!("{remote}/{default}");
        if repo.git.resolve_commit(&upstream).await.is_ok() {
            let local_in_remote = repo.git.is_ancestor(&default, &upstream).await?;
            let remote_in_local = repo.git.is_ancestor(&upstream, &default).await?;
            if !local_in_remote && !remote_in_local {
                return Err(SliceError::refused(format!(
                    "{default} and {upstream} have diverged; reconcile them first (`git switch {default} && git pull --rebase`), then merge again"
                )));
            }
            if local_in_remote && !remote_in_local {
                if repo.current_branch().await?.as_deref() == Some(default.as_str()) {
                    repo.git.run(["merge", "--quiet", "--ff-only", upstream.as_str()]).await?;
                } else {
                    repo.git.run(["branch", "--quiet", "-f", default.as_str(), upstream.as_str()]).await?;
                }
                fast_forwarded = true;
            }
        }
    }
    let before = repo.git.resolve_commit(&default).await?;
    repo.switch(&default).await?;
    let message = format!("merge: {branch}");
    if let Err(e) = repo.git.run(["merge", "--no-ff", "--no-edit", "-m", message.as_str(), branch.as_str()]).await {
        let conflicted =
            repo.git.run(["diff", "--name-only", "--diff-filter=U"]).await.map(|o| o.text()).unwrap_or_default();
        if resolve_registry_conflicts(ws, &conflicted).await? {
            repo.git.run(["commit", "--quiet", "--no-verify", "--no-edit"]).await?;
            return finish(ws, branch, default, fast_forwarded, use_remote, before).await;
        }
        let _ = repo.git.run(["merge", "--abort"]).await;
        let back = repo.switch(&branch).await;
        let files: Vec<&str> = conflicted.lines().filter(|l| !l.is_empty()).collect();
        let what =
            if files.is_empty() { format!("git refused: {e}") } else { format!("conflicts in {}", files.join(", ")) };
        let place = if back.is_ok() { format!("you are back on {branch}") } else { format!("you are on {default}") };
        return Err(SliceError::failed(format!(
            "merging {branch} into {default}: {what}; nothing was merged and {place}. Bring {default} into the slice (`git merge {default}` on {branch}), resolve the conflicts, commit, then run `arbiter feature merge` again"
        )));
    }
    finish(ws, branch, default, fast_forwarded, use_remote, before).await
}

/// Resolves a merge whose only conflicts are registry files (two slices registered in the
/// same `.features.json`): each is merged three-way ([`merge_three_way`]) and staged.
/// Returns whether every conflict was resolved so.
async fn resolve_registry_conflicts(ws: &Workspace, conflicted: &str) -> Result<bool> {
    let files: Vec<&str> = conflicted.lines().filter(|l| !l.is_empty()).collect();
    let project = ws.project().ok();
    let is_registry = |f: &str| {
        f.rsplit('/').next() == Some(crate::registry::FILE)
            || project.as_ref().is_some_and(|p| p.root.path == f || p.app_files.contains_key(f))
    };
    if files.is_empty() || !files.iter().all(|f| is_registry(f)) {
        return Ok(false);
    }
    for f in files {
        let stage = |n: u8| async move {
            let spec = format!(":{n}:{f}");
            match ws.repo.git.run(["show", spec.as_str()]).await {
                Ok(o) => RegistryFile::parse(f, &String::from_utf8_lossy(&o.stdout)),
                Err(_) => Ok(RegistryFile::empty(f)),
            }
        };
        let (Ok(base), Ok(ours), Ok(theirs)) = (stage(1).await, stage(2).await, stage(3).await) else {
            return Ok(false);
        };
        let merged = merge_three_way(&base, &ours, &theirs);
        std::fs::write(ws.root().join(f), merged.render())?;
        ws.repo.git.run(["add", "--", f]).await?;
    }
    Ok(true)
}

/// After the merge commit: push the default branch (undoing the merge if that fails), then
/// delete the slice's branch locally and remotely.
async fn finish(
    ws: &Workspace,
    branch: String,
    default: String,
    fast_forwarded: bool,
    use_remote: bool,
    before: String,
) -> Result<MergeOutcome> {
    let repo = &ws.repo;
    let remote = repo.settings.remote.clone();
    let merge_commit = repo.git.resolve_commit("HEAD").await?;
    let mut pushed = false;
    if use_remote {
        if let Err(e) = repo.push(&[remote.as_str(), default.as_str()]).await {
            let _ = repo.git.run(["reset", "--quiet", "--keep", before.as_str()]).await;
            let _ = repo.switch(&branch).await;
            return Err(SliceError::failed(format!(
                "pushing {default} to {remote} failed ({e}); the merge was undone, {default} and {branch} are as they were. Fix the remote, then merge again (or merge locally with --no-push)"
            )));
        }
        pushed = true;
    }
    let mut warnings = Vec::new();
    if let Err(e) = repo.git.run(["branch", "--quiet", "-d", branch.as_str()]).await {
        warnings.push(format!("the branch {branch} was not deleted: {e}"));
    }
    let mut remote_branch_deleted = false;
    if use_remote && repo.remote_has_branch(&branch).await.unwrap_or(false) {
        match repo.push(&[remote.as_str(), "--delete", branch.as_str()]).await {
            Ok(()) => remote_branch_deleted = true,
            Err(e) => warnings.push(format!("{remote}/{branch} was not deleted: {e}")),
        }
    }
    Ok(MergeOutcome { branch, into: default, merge_commit, fast_forwarded, pushed, remote_branch_deleted, warnings })
}
