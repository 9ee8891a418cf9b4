//! Where a plan's tasks run: the repository its `repository` names — an absolute path on
//! this machine, or a git URL cloned once into a directory of arbiter's — or, when it names
//! none, a default one (the repository a local command runs in).

use std::path::{Component, Path, PathBuf};

use arbiter_core::plan::PlanSpec;

use crate::coordinator::{CoordinatorError, PlanRepositories};
use crate::git::Git;
use crate::workspace::Workspace;

/// Whether a plan's `repository` is a git URL rather than a path.
pub fn is_url(repository: &str) -> bool {
    repository.contains("://") || repository.starts_with("git@")
}

/// Plans' repositories on this machine.
pub struct ByRepository {
    /// Where a URL's clone goes: `<clones>/<plan>/repo`.
    pub clones: PathBuf,
    /// A plan that names no repository runs here (`None`: it is refused).
    pub default: Option<Workspace>,
    /// What each `repository` was found to be (looked up once per process).
    found: std::sync::Mutex<std::collections::HashMap<(String, Option<String>), Workspace>>,
}

impl ByRepository {
    pub fn new(clones: PathBuf, default: Option<Workspace>) -> Self {
        ByRepository { clones, default, found: Default::default() }
    }
}

/// Why a plan's repository cannot be used.
fn unusable(message: String) -> CoordinatorError {
    CoordinatorError::Refused(message)
}

#[async_trait::async_trait]
impl PlanRepositories for ByRepository {
    async fn existing_workspace_for(&self, plan: &PlanSpec) -> Option<Workspace> {
        match plan.repository.as_deref() {
            Some(url) if is_url(url) && !self.clones.join(&plan.id).join("repo").join(".git").exists() => None,
            _ => self.workspace_for(plan).await.ok(),
        }
    }

    async fn workspace_for(&self, plan: &PlanSpec) -> Result<Workspace, CoordinatorError> {
        let key = (plan.id.clone(), plan.repository.clone());
        if let Some(w) = self.found.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return Ok(w.clone());
        }
        let root = match plan.repository.as_deref() {
            None => {
                return self.default.clone().ok_or_else(|| {
                    unusable(format!(
                        "plan {} names no repository: give `repository` (a path or a git URL) in its file",
                        plan.id
                    ))
                });
            }
            Some(url) if is_url(url) => {
                let dir = self.clones.join(&plan.id).join("repo");
                if !dir.join(".git").exists() {
                    let parent = dir.parent().unwrap_or(&self.clones).to_path_buf();
                    std::fs::create_dir_all(&parent).map_err(crate::git::GitError::Io)?;
                    let partial = dir.with_extension("partial");
                    let _ = std::fs::remove_dir_all(&partial);
                    let target = partial.display().to_string();
                    Git::new(parent)
                        .run(["clone", "--quiet", "--", url, target.as_str()])
                        .await
                        .map_err(|e| unusable(format!("cannot clone plan {}'s repository {url}: {e}", plan.id)))?;
                    std::fs::rename(&partial, &dir).map_err(crate::git::GitError::Io)?;
                }
                dir
            }
            Some(path) => {
                let path = Path::new(path);
                // A relative path would be taken from wherever this process happens to run.
                if !path.is_absolute() || path.components().any(|c| c == Component::ParentDir) {
                    return Err(unusable(format!(
                        "plan {}'s repository '{}' is not a plain absolute path (it is relative, or goes through '..'): name the repository by its absolute path on the machine that runs the plan (the control plane's, for a plan sent with --server) or by a git URL",
                        plan.id,
                        path.display()
                    )));
                }
                if !path.exists() {
                    return Err(unusable(format!(
                        "plan {}'s repository {} does not exist on this machine; fix `repository` in the plan (a path on the machine that runs the plan, or a git URL)",
                        plan.id,
                        path.display()
                    )));
                }
                path.to_path_buf()
            }
        };
        let top = Git::new(root.clone()).toplevel().await.map_err(|e| {
            unusable(format!(
                "plan {}'s repository {} is not a git repository ({e}); fix `repository` in the plan",
                plan.id,
                root.display()
            ))
        })?;
        let workspace = Workspace::at(top);
        self.found.lock().unwrap_or_else(|p| p.into_inner()).insert(key, workspace.clone());
        Ok(workspace)
    }
}
