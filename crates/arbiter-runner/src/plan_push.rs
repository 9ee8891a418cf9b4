//! Pushing a plan's integration branch to a remote of its repository: after every winner
//! when the plan says `push = true`, or on demand (`arbiter plan push`).
//!
//! A push is never forced. When the remote's branch is not an ancestor of the plan's (someone
//! else moved it), git refuses and arbiter says so: it leaves the remote as it is. The remote
//! is one the repository already has (`origin` unless named); its URL is shown without any
//! password it may hold. Hooks do not run (see [`crate::git`]), prompts are off, and a push
//! that hangs is stopped after [`PUSH_TIMEOUT`].

use std::time::Duration;

use arbiter_core::plan::event::PlanEntry;

use crate::git::{Git, GitError};
use crate::integration;

/// The remote a plan's branch goes to unless another is named.
pub const DEFAULT_REMOTE: &str = "origin";

/// The longest a push may take (a remote that never answers would otherwise hold it).
pub const PUSH_TIMEOUT: Duration = Duration::from_secs(300);

pub use arbiter_core::plan::event::Pushed;

/// Why a push did not happen; each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error(
        "'{0}' is not a remote name (letters, digits, '.', '_' and '-', not starting with '-'); name a remote of the repository (`git remote -v` lists them)"
    )]
    BadRemote(String),
    #[error(
        "{whose}'s repository has no remote '{remote}': add one with `git -C {repo} remote add {remote} URL`, or name another with --remote"
    )]
    NoRemote { whose: String, remote: String, repo: String },
    #[error(
        "plan {plan}'s integration branch {branch} does not exist yet: `arbiter plan run {plan}` creates it with the first winner"
    )]
    NoBranch { plan: String, branch: String },
    #[error(
        "{remote} ({url}) has a {branch} that is not an ancestor of the plan's: arbiter never force-pushes. Look at both (`git fetch {remote}` then `git log {branch} {remote}/{branch}`), and move or delete the remote branch yourself if the plan's should replace it"
    )]
    Rejected { remote: String, url: String, branch: String },
    #[error("pushing {branch} to {remote} ({url}) took longer than {} s and was stopped; check that the remote is reachable without a prompt (credentials in a credential helper or an SSH agent)", PUSH_TIMEOUT.as_secs())]
    TimedOut { remote: String, url: String, branch: String },
    #[error("pushing {branch} to {remote} ({url}) failed: {message}")]
    Failed { remote: String, url: String, branch: String, message: String },
    #[error(transparent)]
    Git(#[from] GitError),
}

impl PushError {
    /// A mistake of the caller's (a remote that does not exist, a name that cannot be one),
    /// rather than the remote's or the network's.
    pub fn is_usage(&self) -> bool {
        matches!(self, PushError::BadRemote(_) | PushError::NoRemote { .. } | PushError::NoBranch { .. })
    }
}

/// Whether `name` can be a remote's name (and never an option of git's).
pub fn remote_name_ok(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('-')
        && !name.contains("..")
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Pushes `branch` of `repo` (plan `plan`'s integration branch) to `remote`, fast-forward only.
pub async fn push_branch(repo: &Git, plan: &str, branch: &str, remote: &str) -> Result<Pushed, PushError> {
    push_ref(repo, &format!("plan {plan}"), branch, remote).await.map_err(|e| match e {
        PushError::NoBranch { branch, .. } => PushError::NoBranch { plan: plan.into(), branch },
        e => e,
    })
}

/// Pushes `branch` of `repo` to `remote`, fast-forward only; `whose` names what the branch
/// carries in messages (`plan calc`, `run 2026…`).
pub async fn push_ref(repo: &Git, whose: &str, branch: &str, remote: &str) -> Result<Pushed, PushError> {
    if !remote_name_ok(remote) {
        return Err(PushError::BadRemote(remote.chars().take(100).collect()));
    }
    let url = match repo.config_value(&format!("remote.{remote}.url")).await? {
        Some(url) => arbiter_core::redact::redact_patterns(&url),
        None => {
            return Err(PushError::NoRemote {
                whose: whose.into(),
                remote: remote.into(),
                repo: repo.dir().display().to_string(),
            });
        }
    };
    let commit = match integration::tip(repo, branch).await {
        Ok(c) => c,
        Err(GitError::UnknownRevision(_)) => {
            return Err(PushError::NoBranch { plan: whose.into(), branch: branch.into() });
        }
        Err(e) => return Err(e.into()),
    };
    let refspec = format!("refs/heads/{branch}:refs/heads/{branch}");
    let push = repo.run(["push", "--no-verify", "--", remote, refspec.as_str()]);
    let failed =
        |message: String| PushError::Failed { remote: remote.into(), url: url.clone(), branch: branch.into(), message };
    match tokio::time::timeout(PUSH_TIMEOUT, push).await {
        Err(_) => Err(PushError::TimedOut { remote: remote.into(), url: url.clone(), branch: branch.into() }),
        Ok(Ok(out)) => {
            let said = String::from_utf8_lossy(&out.stderr);
            Ok(Pushed {
                up_to_date: said.contains("Everything up-to-date") || said.contains("[up to date]"),
                remote: remote.into(),
                url: url.clone(),
                branch: branch.into(),
                commit,
            })
        }
        Ok(Err(GitError::Failed { stderr, .. })) => {
            if stderr.contains("[rejected]") || stderr.contains("non-fast-forward") || stderr.contains("fetch first") {
                Err(PushError::Rejected { remote: remote.into(), url: url.clone(), branch: branch.into() })
            } else {
                Err(failed(arbiter_core::redact::redact_patterns(stderr.trim())))
            }
        }
        Ok(Err(e)) => Err(e.into()),
    }
}

/// Pushes of integration branches after their winners, for plans with `push = true`: in the
/// background (a report does not wait for the remote), one at a time, each of the branch's
/// tip when it starts, each written as a `branch_pushed` or `branch_push_failed` event. A
/// failed push does not fail the task: the commit is on the branch, and the next winner's
/// push (or `arbiter plan push`) sends it.
#[derive(Default)]
pub struct BranchPushes {
    one_at_a_time: std::sync::Arc<tokio::sync::Mutex<()>>,
    going: std::sync::Mutex<tokio::task::JoinSet<()>>,
}

impl BranchPushes {
    /// Starts pushing `plan`'s integration branch (after `task`'s winner) to its `origin`.
    pub fn start(
        &self,
        store: std::sync::Arc<dyn arbiter_store::plans::PlanStore>,
        clock: std::sync::Arc<dyn arbiter_core::Clock>,
        repo: Git,
        plan: &str,
        branch: &str,
        task: &str,
    ) {
        let lock = self.one_at_a_time.clone();
        let (plan, branch, task) = (plan.to_string(), branch.to_string(), task.to_string());
        let mut going = self.going.lock().unwrap_or_else(|p| p.into_inner());
        // Pushes that ended leave the set as new ones come.
        while going.try_join_next().is_some() {}
        going.spawn(async move {
            let _one = lock.lock().await;
            let entry = match push_branch(&repo, &plan, &branch, DEFAULT_REMOTE).await {
                Ok(pushed) => PlanEntry::BranchPushed { task: Some(task), by: None, pushed },
                Err(e) => PlanEntry::BranchPushFailed {
                    task,
                    branch,
                    remote: DEFAULT_REMOTE.to_string(),
                    reason: e.to_string(),
                },
            };
            if let Err(e) = store.note_event(&plan, entry, clock.now()).await {
                tracing::warn!(plan = %plan, error = %e, "the push of the integration branch could not be recorded");
            }
        });
    }

    /// Runs `work` after the pushes started before it (what needs the remote as the plan
    /// left it: its pull request), one at a time with them.
    pub fn after_pushes(&self, work: impl std::future::Future<Output = ()> + Send + 'static) {
        let lock = self.one_at_a_time.clone();
        let mut going = self.going.lock().unwrap_or_else(|p| p.into_inner());
        while going.try_join_next().is_some() {}
        going.spawn(async move {
            let _one = lock.lock().await;
            work.await;
        });
    }

    /// Waits for the pushes still going (before the process exits).
    pub async fn flush(&self) {
        let mut going = std::mem::take(&mut *self.going.lock().unwrap_or_else(|p| p.into_inner()));
        while going.join_next().await.is_some() {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_names_never_read_as_options() {
        for ok in ["origin", "up-stream", "my.remote", "a_b"] {
            assert!(remote_name_ok(ok), "{ok}");
        }
        for bad in ["", "-u", "--force", "a b", "../x", "a..b", "x;y", "ext::sh"] {
            assert!(!remote_name_ok(bad), "{bad}");
        }
    }
}
