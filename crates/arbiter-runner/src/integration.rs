//! A plan's integration branch (`arbiter/<plan-id>` by default): where each task's winner
//! is committed, so the tasks that depend on it start from its code.
//!
//! A winner is committed on top of the branch as it stands at that moment, through a
//! private index (no working tree is touched), and the branch is moved with a
//! compare-and-swap (`git update-ref NEW OLD`), so two workers committing at once never lose
//! a commit. A patch that no longer applies there is a conflict: the attempt fails with
//! git's reason and the task is retried from the new tip. Each commit carries trailers
//! naming the plan, the task and the run, which is how a task whose winner was committed
//! just before its worker died is recognized as done instead of being done twice.
//!
//! The commit the branch started from is recorded in `refs/arbiter/plans/<plan>/base` when
//! the branch is created: the plan's `base_ref` (often `HEAD`) may point elsewhere later,
//! and recovery and `plan reset` must still know where the plan's own commits begin.

use std::path::Path;

use crate::capture;
use crate::git::{Git, GitError};

/// Trailer keys written into every integration commit.
const PLAN_TRAILER: &str = "Arbiter-Plan";
const TASK_TRAILER: &str = "Arbiter-Task";
const RUN_TRAILER: &str = "Arbiter-Run";

/// How often a compare-and-swap that lost a race is tried again.
const CAS_TRIES: usize = 8;

/// Why a winner could not be committed.
#[derive(Debug, thiserror::Error)]
pub enum IntegrationError {
    #[error("the winner's patch does not apply to the integration branch at {tip}: {detail}")]
    Conflict { tip: String, detail: String },
    #[error("the integration branch {branch} kept moving while committing; try again")]
    Contended { branch: String },
    #[error(transparent)]
    Git(#[from] GitError),
}

/// The commit a winner became.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Committed {
    pub commit: String,
    /// The tip it was committed on.
    pub parent: String,
}

fn base_ref_name(plan: &str) -> String {
    format!("refs/arbiter/plans/{plan}/base")
}

/// The branch's tip, creating the branch at `base` when it does not exist yet (and
/// recording where it started).
pub async fn ensure_branch(repo: &Git, plan: &str, branch: &str, base: &str) -> Result<String, GitError> {
    if repo.branch_exists(branch).await? {
        return tip(repo, branch).await;
    }
    let base = repo.resolve_commit(base).await?;
    let r = format!("refs/heads/{branch}");
    // The empty old value: created only if nobody created it meanwhile.
    if repo.run(["update-ref", r.as_str(), base.as_str(), ""]).await.is_ok() {
        repo.run(["update-ref", base_ref_name(plan).as_str(), base.as_str()]).await?;
    } else if !repo.branch_exists(branch).await? {
        return Err(GitError::UnknownRevision(branch.to_string()));
    }
    tip(repo, branch).await
}

/// Where the plan's branch started: the recorded base, else `base_ref` as it resolves now.
pub async fn plan_base(repo: &Git, plan: &str, base_ref: &str) -> Result<String, GitError> {
    match repo.resolve_commit(&base_ref_name(plan)).await {
        Ok(commit) => Ok(commit),
        Err(_) => repo.resolve_commit(base_ref).await,
    }
}

/// The commit the branch points at.
pub async fn tip(repo: &Git, branch: &str) -> Result<String, GitError> {
    repo.resolve_commit(&format!("refs/heads/{branch}")).await
}

/// The message of the commit of `task`'s winner.
pub fn message(title: &str, plan: &str, task: &str, run: &str, candidate: &str) -> String {
    format!(
        "{title}\n\nPlan {plan}, task {task}: the winner of arbiter run {run} (candidate {candidate}).\n\n{PLAN_TRAILER}: {plan}\n{TASK_TRAILER}: {task}\n{RUN_TRAILER}: {run}\n"
    )
}

/// Commits `patch` on top of the branch's current tip and moves the branch there.
pub async fn commit_onto(
    repo: &Git,
    branch: &str,
    patch: &Path,
    message: &str,
    scratch_index: &Path,
) -> Result<Committed, IntegrationError> {
    let r = format!("refs/heads/{branch}");
    for _ in 0..CAS_TRIES {
        let parent = tip(repo, branch).await?;
        if let Err(detail) = capture::apply_check(repo, &parent, patch, scratch_index).await? {
            return Err(IntegrationError::Conflict { tip: parent, detail });
        }
        let commit = capture::commit_patch(repo, &parent, patch, scratch_index, message).await?;
        match repo.run(["update-ref", r.as_str(), commit.as_str(), parent.as_str()]).await {
            Ok(_) => return Ok(Committed { commit, parent }),
            // Another worker moved the branch first: build again on its new tip.
            Err(GitError::Failed { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(IntegrationError::Contended { branch: branch.to_string() })
}

/// The commit on the branch (since `base`) that holds `task`'s winner, if there is one.
pub async fn find_task_commit(
    repo: &Git,
    branch: &str,
    base: &str,
    plan: &str,
    task: &str,
) -> Result<Option<String>, GitError> {
    if !repo.branch_exists(branch).await? {
        return Ok(None);
    }
    let range = format!("{base}..refs/heads/{branch}");
    let out = repo.run(["log", "--format=%H%x1f%B%x1e", range.as_str()]).await?;
    let text = String::from_utf8_lossy(&out.stdout);
    for entry in text.split('\x1e') {
        let Some((sha, body)) = entry.trim_start_matches('\n').split_once('\x1f') else { continue };
        let trailer = |key: &str| body.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(": ").map(str::trim));
        if trailer(PLAN_TRAILER) == Some(plan) && trailer(TASK_TRAILER) == Some(task) {
            return Ok(Some(sha.trim().to_string()));
        }
    }
    Ok(None)
}

/// Points the branch back where it started (a plan reset); returns where it was and where
/// it points now.
pub async fn reset_branch(
    repo: &Git,
    plan: &str,
    branch: &str,
    base_ref: &str,
) -> Result<Option<(String, String)>, GitError> {
    if !repo.branch_exists(branch).await? {
        return Ok(None);
    }
    let old = tip(repo, branch).await?;
    let base = plan_base(repo, plan, base_ref).await?;
    let r = format!("refs/heads/{branch}");
    repo.run(["update-ref", r.as_str(), base.as_str(), old.as_str()]).await?;
    Ok(Some((old, base)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_carry_trailers() {
        let m = message("Fix add", "calc", "T1", "20261201T000000Z-abcdef", "c02");
        assert!(m.starts_with("Fix add\n\n"));
        assert!(m.contains("\nArbiter-Plan: calc\nArbiter-Task: T1\nArbiter-Run: 20261201T000000Z-abcdef\n"));
    }
}
