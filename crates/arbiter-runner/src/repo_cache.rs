//! A remote worker's copies of the plans' repositories, fetched from the control plane.
//!
//! A remote worker has no write access to any repository, and no working copy of its own:
//! per plan, it keeps a repository without working files (`<data>/repos/<plan>/`) into which
//! it fetches — over git's smart HTTP protocol, authenticated by its token, which git gets
//! in its environment, never on its command line — the plan's integration branch, which
//! holds the commit a unit starts from. Fetches are incremental: only what is new travels.
//! The worker's candidate workspaces borrow the copy's objects, as a local run's borrow the
//! user's repository's, and its runs are recorded in the copy's own `.arbiter/`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::git::{Git, GitError};
use crate::workspace::Workspace;

/// How git reaches the control plane's repositories.
#[derive(Clone)]
pub struct GitRemote {
    /// `https://cp:7878/git` (a plan's repository is `<base>/<plan>`).
    base_url: String,
    /// The worker's bearer token (sent as an HTTP header; never written anywhere).
    token: String,
    /// A CA certificate to trust for the control plane's TLS (a self-signed one).
    ca_file: Option<PathBuf>,
}

impl std::fmt::Debug for GitRemote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitRemote").field("base_url", &self.base_url).field("ca_file", &self.ca_file).finish()
    }
}

impl GitRemote {
    /// How git reaches `base_url` with `token`, trusting `ca_file` (made absolute here: git
    /// runs in the copies' directories, where a path relative to the worker's would miss).
    pub fn new(base_url: String, token: String, ca_file: Option<PathBuf>) -> std::io::Result<Self> {
        let ca_file = ca_file.map(|ca| std::path::absolute(&ca)).transpose()?;
        Ok(GitRemote { base_url, token, ca_file })
    }

    /// What git needs in its environment: the authorization header, the CA to trust.
    ///
    /// The CA goes in `GIT_SSL_CAINFO`, not the `http.sslCAInfo` setting: git lets that
    /// variable override the setting, so one inherited from the worker's environment
    /// (pointing at some other bundle) would make every fetch refuse the control plane.
    fn env(&self) -> Vec<(String, String)> {
        let mut env = vec![
            ("GIT_CONFIG_COUNT".to_string(), "1".to_string()),
            ("GIT_CONFIG_KEY_0".to_string(), "http.extraHeader".to_string()),
            ("GIT_CONFIG_VALUE_0".to_string(), format!("Authorization: Bearer {}", self.token)),
        ];
        if let Some(ca) = &self.ca_file {
            env.push(("GIT_SSL_CAINFO".to_string(), ca.display().to_string()));
        }
        env
    }

    fn url(&self, plan: &str) -> String {
        format!("{}/{plan}", self.base_url.trim_end_matches('/'))
    }
}

/// The worker's repository copies under one directory.
pub struct RepoCache {
    root: PathBuf,
    remote: GitRemote,
    /// One fetch at a time per copy in this process (git locks its refs).
    locks: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// Why a copy could not be brought up to date.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("cannot fetch plan {plan}'s repository from the control plane: {source}")]
    Fetch { plan: String, source: GitError },
    #[error(
        "plan {plan}'s integration branch {branch} on the control plane does not hold commit {commit} (the plan was reset meanwhile)"
    )]
    Missing { plan: String, branch: String, commit: String },
    #[error("{0} is not a plan id a repository copy can be named after")]
    BadPlan(String),
    #[error(transparent)]
    Git(#[from] GitError),
}

impl RepoCache {
    pub fn new(root: PathBuf, remote: GitRemote) -> Self {
        RepoCache { root, remote, locks: Default::default() }
    }

    /// Where the copy of `plan`'s repository is.
    pub fn dir(&self, plan: &str) -> PathBuf {
        self.root.join("repos").join(plan)
    }

    fn lock(&self, plan: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.locks.lock().unwrap_or_else(|p| p.into_inner()).entry(plan.to_string()).or_default().clone()
    }

    /// The copy of `plan`'s repository, holding `commit` (fetched with `branch` when it does
    /// not yet).
    pub async fn checkout(&self, plan: &str, branch: &str, commit: &str) -> Result<Workspace, CacheError> {
        if plan.is_empty() || plan.starts_with('.') || plan.contains(['/', '\\']) {
            return Err(CacheError::BadPlan(plan.to_string()));
        }
        let lock = self.lock(plan);
        let _held = lock.lock().await;
        let dir = self.dir(plan);
        let fetch = |e| CacheError::Fetch { plan: plan.to_string(), source: e };
        let env = self.remote.env();
        if !dir.join(".git").exists() {
            std::fs::create_dir_all(dir.parent().unwrap_or(Path::new("."))).map_err(GitError::Io)?;
            // A clone in the copy's place, moved there once whole: a clone that dies halfway
            // is never taken for a copy.
            let partial = dir.with_extension(format!("partial-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&partial);
            let parent = Git::new(dir.parent().unwrap_or(Path::new(".")).to_path_buf());
            let url = self.remote.url(plan);
            let partial_arg = partial.display().to_string();
            parent
                .run_with_env(
                    ["clone", "--quiet", "--no-checkout", "--no-tags", url.as_str(), partial_arg.as_str()],
                    &env,
                )
                .await
                .map_err(fetch)?;
            std::fs::rename(&partial, &dir).map_err(GitError::Io)?;
        }
        let git = Git::new(dir.clone());
        if !has_commit(&git, commit).await {
            let refspec = format!("+refs/heads/{branch}:refs/remotes/origin/{branch}");
            let url = self.remote.url(plan);
            git.run_with_env(["fetch", "--quiet", "--no-tags", url.as_str(), refspec.as_str()], &env)
                .await
                .map_err(fetch)?;
            if !has_commit(&git, commit).await {
                return Err(CacheError::Missing {
                    plan: plan.to_string(),
                    branch: branch.to_string(),
                    commit: commit.to_string(),
                });
            }
        }
        Ok(Workspace::at(dir))
    }
}

async fn has_commit(git: &Git, commit: &str) -> bool {
    git.run(["cat-file", "-e", &format!("{commit}^{{commit}}")]).await.is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_goes_to_git_s_environment_and_nowhere_else() {
        let remote = GitRemote {
            base_url: "https://cp:7878/git/".into(),
            token: "secret-token".into(),
            ca_file: Some(PathBuf::from("/etc/ca.pem")),
        };
        let env = remote.env();
        assert!(env.contains(&("GIT_CONFIG_COUNT".into(), "1".into())));
        assert!(env.contains(&("GIT_CONFIG_VALUE_0".into(), "Authorization: Bearer secret-token".into())));
        assert!(env.contains(&("GIT_SSL_CAINFO".into(), "/etc/ca.pem".into())), "{env:?}");
        assert_eq!(remote.url("calc"), "https://cp:7878/git/calc");
        assert!(!format!("{remote:?}").contains("secret-token"));
    }

    #[test]
    fn a_relative_ca_file_is_made_absolute_for_git() {
        let remote = GitRemote::new("https://cp/git".into(), "t".into(), Some(PathBuf::from("cert.pem"))).unwrap();
        let ca = remote.ca_file.clone().unwrap();
        assert!(ca.is_absolute() && ca.ends_with("cert.pem"), "{ca:?}");
        let without = GitRemote::new("https://cp/git".into(), "t".into(), None).unwrap();
        assert!(!without.env().iter().any(|(k, _)| k == "GIT_SSL_CAINFO"));
    }
}
