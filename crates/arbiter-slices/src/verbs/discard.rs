//! `feature undo` and `feature delete`: throwing a slice away without touching anything
//! else. `undo` discards the slice's branch only — never a reset of the default branch, never
//! a clean of the repository — and refuses uncommitted changes unless `--yes` (then only
//! those inside the slice are discarded; the others stay in the working tree). `delete`
//! removes the slice and its registry entry as a commit and deletes its branch, refusing to
//! drop unmerged commits without `--yes`.

use serde::Serialize;

use super::Workspace;
use crate::names::{Resolution, TargetSpec, resolve};
use crate::repo::describe_paths;
use crate::{Result, SliceError, layout};

/// What `feature undo` did.
#[derive(Clone, Debug, Serialize)]
pub struct UndoOutcome {
    pub branch: String,
    pub now_on: String,
    /// The slice's commits that no other branch has, now gone.
    pub discarded_commits: Vec<String>,
    /// Uncommitted changes inside the slice, discarded (`--yes`).
    pub discarded_changes: Vec<String>,
    /// Uncommitted changes elsewhere, kept in the working tree.
    pub kept_changes: Vec<String>,
    pub remote_branch_deleted: bool,
}

pub async fn undo(ws: &Workspace, target: Option<&str>, yes: bool) -> Result<UndoOutcome> {
    let repo = &ws.repo;
    let (spec, branch) = ws.slice_branch(target, "undo").await?;
    let default = repo.default_branch().await?;
    if branch == default {
        return Err(SliceError::refused(format!(
            "{default} is the default branch, not a slice's; undo discards slice branches only"
        )));
    }
    if !repo.branch_exists(&branch).await? {
        return Err(SliceError::refused(format!(
            "there is no branch {branch} to undo; `arbiter feature status` lists the slices in progress"
        )));
    }
    let dirty = repo.dirty().await?;
    let on_branch = repo.current_branch().await?.as_deref() == Some(branch.as_str());
    let slice_dir = if on_branch { slice_dir_here(ws, &spec) } else { None };
    let (inside, outside): (Vec<String>, Vec<String>) = dirty
        .into_iter()
        .partition(|p| slice_dir.as_deref().is_some_and(|d| p == d || p.starts_with(&format!("{d}/"))));
    let dirty = !inside.is_empty() || !outside.is_empty();
    if dirty && !yes {
        let all: Vec<String> = inside.iter().chain(&outside).cloned().collect();
        return Err(SliceError::refused(format!(
            "there are uncommitted changes ({}); commit or stash them, or pass --yes: changes inside the slice are then discarded with it, and changes elsewhere stay in the working tree",
            describe_paths(&all)
        )));
    }
    let discarded_commits = repo.commits_not_in(&branch, &default).await?;
    if on_branch {
        if let Some(dir) = slice_dir.as_deref().filter(|_| !inside.is_empty()) {
            if repo.exists_at("HEAD", dir).await {
                repo.git.run(["checkout", "--quiet", "HEAD", "--", dir]).await?;
            }
            repo.git.run(["clean", "--quiet", "-f", "-d", "--", dir]).await?;
        }
        repo.switch(&default).await.map_err(|e| {
            SliceError::refused(format!(
                "{e}; the branch {branch} is kept: commit or stash the changes elsewhere ({}), then undo again",
                describe_paths(&outside)
            ))
        })?;
    }
    repo.git.run(["branch", "--quiet", "-D", branch.as_str()]).await?;
    let remote = repo.settings.remote.clone();
    let mut remote_branch_deleted = false;
    if repo.has_remote().await? && repo.remote_has_branch(&branch).await.unwrap_or(false) {
        remote_branch_deleted = repo.push(&[remote.as_str(), "--delete", branch.as_str()]).await.is_ok();
    }
    Ok(UndoOutcome {
        branch,
        now_on: repo.current_branch().await?.unwrap_or(default),
        discarded_commits,
        discarded_changes: inside,
        kept_changes: outside,
        remote_branch_deleted,
    })
}

/// The slice's directory on the current checkout, if it is there.
fn slice_dir_here(ws: &Workspace, spec: &TargetSpec) -> Option<String> {
    let project = ws.project().ok()?;
    match resolve(spec, &layout::scan(ws.root(), &project), None) {
        Resolution::Found(s) => Some(s.dir),
        _ => None,
    }
}

/// What `feature delete` did.
#[derive(Clone, Debug, Serialize)]
pub struct DeleteOutcome {
    pub slice: String,
    /// The commit removing the slice and its registry entry (when it was on this branch).
    pub commit: Option<String>,
    pub removed_dir: Option<String>,
    pub registry: Vec<String>,
    pub branch_deleted: bool,
    pub discarded_commits: Vec<String>,
    pub remote_branch_deleted: bool,
}

pub async fn delete(ws: &Workspace, target: Option<&str>, yes: bool) -> Result<DeleteOutcome> {
    let repo = &ws.repo;
    let (spec, branch) = ws.slice_branch(target, "delete").await?;
    let default = repo.default_branch().await?;
    repo.require_clean(&format!("deleting {branch}")).await?;
    let branch_exists = branch != default && repo.branch_exists(&branch).await?;
    let current = repo.current_branch().await?;
    let home = if current.as_deref() == Some(branch.as_str()) {
        default.clone()
    } else {
        current.clone().unwrap_or(default.clone())
    };
    let unmerged = if branch_exists { repo.commits_not_in(&branch, &home).await? } else { Vec::new() };
    if !unmerged.is_empty() && !yes {
        return Err(SliceError::refused(format!(
            "the branch {branch} has {} commit(s) that {home} does not have ({}); delete discards them: pass --yes, or merge the slice first",
            unmerged.len(),
            unmerged.iter().take(3).cloned().collect::<Vec<_>>().join("; ")
        )));
    }
    if current.as_deref() == Some(branch.as_str()) {
        repo.switch(&default).await?;
    }
    let mut project = ws.project()?;
    let here = resolve(&spec, &layout::scan(ws.root(), &project), None);
    let mut outcome = DeleteOutcome {
        slice: branch.clone(),
        commit: None,
        removed_dir: None,
        registry: Vec::new(),
        branch_deleted: false,
        discarded_commits: unmerged,
        remote_branch_deleted: false,
    };
    if let Resolution::Found(slice) = here {
        repo.git.run(["rm", "-r", "--quiet", "--", slice.dir.as_str()]).await?;
        let _ = std::fs::remove_dir_all(ws.root().join(&slice.dir));
        let registry = project.unregister(&slice.name);
        layout::save(ws.root(), &project, &registry)?;
        let mut paths = vec![slice.dir.clone()];
        paths.extend(registry.iter().cloned());
        outcome.commit = repo.commit(&paths, &format!("delete: {branch}")).await?;
        outcome.removed_dir = Some(slice.dir);
        outcome.registry = registry;
    } else {
        let registry = project.unregister(&spec.name);
        if !registry.is_empty() {
            layout::save(ws.root(), &project, &registry)?;
            outcome.commit = repo.commit(&registry, &format!("delete: {branch} (registry entry)")).await?;
            outcome.registry = registry;
        }
    }
    if branch_exists {
        repo.git.run(["branch", "--quiet", "-D", branch.as_str()]).await?;
        outcome.branch_deleted = true;
        let remote = repo.settings.remote.clone();
        if repo.has_remote().await? && repo.remote_has_branch(&branch).await.unwrap_or(false) {
            outcome.remote_branch_deleted = repo.push(&[remote.as_str(), "--delete", branch.as_str()]).await.is_ok();
        }
    }
    if outcome.commit.is_none() && !outcome.branch_deleted {
        return Err(SliceError::refused(format!(
            "there is no slice {branch} to delete (no directory here, no branch, no registry entry); `arbiter feature scan` lists the slices"
        )));
    }
    Ok(outcome)
}
