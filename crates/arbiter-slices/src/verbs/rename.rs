//! `feature move A/B C/D`: the directory, the registry entry and the branch renamed in one
//! commit (the old path's removal included), then the slice's tests run at its new place.

use serde::Serialize;

use super::{TestRun, Workspace, run_tests};
use crate::names::TargetSpec;
use crate::{Result, SliceError, layout};

/// What `feature move` did.
#[derive(Clone, Debug, Serialize)]
pub struct MoveOutcome {
    pub from: String,
    pub to: String,
    pub from_dir: String,
    pub to_dir: String,
    pub commit: Option<String>,
    /// The slice's branch, renamed (when it had one).
    pub branch_renamed: Option<String>,
    pub tests: TestRun,
}

pub async fn move_slice(
    ws: &Workspace,
    from: &str,
    to: &str,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<MoveOutcome> {
    let repo = &ws.repo;
    let old_spec = TargetSpec::parse(from).map_err(SliceError::refused)?;
    let new_spec = TargetSpec::parse(to).map_err(SliceError::refused)?;
    let mut project = ws.project()?;
    let old = ws.resolve_here(&project, &old_spec)?;
    let domain = new_spec.domain.clone().unwrap_or_else(|| old.domain.clone());
    let new = project.target_for_new(&new_spec.name, Some(&domain), None);
    if new.dir == old.dir {
        return Err(SliceError::refused(format!("{} is already at {}", old.branch(), old.dir)));
    }
    if std::fs::symlink_metadata(ws.root().join(&new.dir)).is_ok() {
        return Err(SliceError::refused(format!(
            "{} already exists; choose another name, or delete that slice first",
            new.dir
        )));
    }
    let (old_branch, new_branch) = (old.branch(), new.branch());
    let rename_branch = repo.branch_exists(&old_branch).await?;
    if rename_branch && repo.branch_exists(&new_branch).await? {
        return Err(SliceError::refused(format!("the branch {new_branch} already exists; delete or merge it first")));
    }
    repo.require_clean(&format!("moving {old_branch}")).await?;
    if let Some(parent) = ws.root().join(&new.dir).parent() {
        std::fs::create_dir_all(parent)?;
    }
    repo.git.run(["mv", "--", old.dir.as_str(), new.dir.as_str()]).await?;
    let mut registry = project.unregister(&old.name);
    if let Some(f) = project.register(&new)
        && !registry.contains(&f)
    {
        registry.push(f);
    }
    layout::save(ws.root(), &project, &registry)?;
    let mut paths = vec![old.dir.clone(), new.dir.clone()];
    paths.extend(registry.iter().cloned());
    let commit = repo.commit(&paths, &format!("move: {old_branch} -> {new_branch}")).await?;
    let branch_renamed = if rename_branch {
        repo.git.run(["branch", "--quiet", "-m", old_branch.as_str(), new_branch.as_str()]).await?;
        Some(new_branch.clone())
    } else {
        None
    };
    let tests = run_tests(ws, &new.dir, &new.branch(), cancel).await?;
    Ok(MoveOutcome {
        from: old_branch,
        to: new_branch,
        from_dir: old.dir,
        to_dir: new.dir,
        commit,
        branch_renamed,
        tests,
    })
}
