//! A plan's integration branch (`arbiter/<plan-id>` by default) as git sees it: where each
//! task's winner is committed, so the tasks that depend on it start from its code, and the
//! refs that record which commit holds which task. (Whether arbiter may move the branch at
//! all is [`plan_branch`](crate::plan_branch)'s question.)
//!
//! A winner is committed on top of the branch as it stands at that moment, as
//! [`materialize::check`](crate::materialize::check) made it of the tip (no working tree is
//! touched): a winner is checked again on every tip it is committed on, since a link
//! another task added there can make one of the winner's lead out of the repository. The branch is moved and the task's commit
//! recorded in one `git update-ref --stdin` transaction — the branch with a compare-and-swap
//! (`update refs/heads/<branch> NEW OLD`, so two workers committing at once never lose a
//! commit) and `refs/arbiter/plans/<plan>/tasks/<task-key>` pointing at the new commit — so
//! a crash can never leave the branch moved without the record, nor the record without the
//! branch. A patch that no longer applies there is a conflict: the attempt fails with git's
//! reason and the task is retried from the new tip.
//!
//! A task counts as committed only through that ref, and only while the commit it names is
//! on the branch after the plan's base: text in a commit message proves nothing (a task
//! title, which a plan file's author writes, could read `Arbiter-Task: T2`). The messages
//! still carry `Arbiter-Plan` / `Arbiter-Task` / `Arbiter-Run` trailers, for people.
//!
//! The commit the branch was created at is also kept in `refs/arbiter/plans/<plan>/base`,
//! for people and for older arbiter versions; the store's branch record is what arbiter
//! trusts.

use arbiter_core::limits::{CandidateLimits, LimitBreach};

use crate::git::{Git, GitError};
use crate::materialize::{self, CheckedPatch, Refusal};

/// Trailer keys written into every integration commit (for people; never trusted).
const PLAN_TRAILER: &str = "Arbiter-Plan";
const TASK_TRAILER: &str = "Arbiter-Task";
const RUN_TRAILER: &str = "Arbiter-Run";

/// How often a compare-and-swap that lost a race is tried again.
const CAS_TRIES: usize = 8;

/// Hex digits of a task id kept in one ref component. Git writes `<component>.lock` while
/// it changes a loose ref, and file names are at most 255 bytes: longer keys are split.
const KEY_COMPONENT: usize = 200;

/// Why a winner could not be committed.
#[derive(Debug, thiserror::Error)]
pub enum IntegrationError {
    #[error("the winner's patch does not apply to the integration branch at {tip}: {detail}")]
    Conflict { tip: String, detail: String },
    #[error("the winner's patch is refused on the integration branch at {tip}: {}", describe(.breaches))]
    Refused { tip: String, breaches: Vec<LimitBreach> },
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

/// `refs/arbiter/plans/<plan>/base`.
pub fn base_ref_name(plan: &str) -> String {
    format!("refs/arbiter/plans/{plan}/base")
}

/// Where the plan's task refs live: `refs/arbiter/plans/<plan>/tasks/`.
pub fn task_refs_prefix(plan: &str) -> String {
    format!("refs/arbiter/plans/{plan}/tasks/")
}

/// A task id as a ref name component: its bytes in hex (task ids may hold `:` and `/`,
/// which ref names cannot, or could, hold), split after 200 digits into `<200>-/<rest>`.
/// Keys of short ids are files of hex digits and split keys directories ending in `-`, so
/// no key is a prefix directory of another.
pub fn task_key(task: &str) -> String {
    let hex: String = task.bytes().map(|b| format!("{b:02x}")).collect();
    if hex.len() <= KEY_COMPONENT {
        hex
    } else {
        let (head, tail) = hex.split_at(KEY_COMPONENT);
        format!("{head}-/{tail}")
    }
}

/// The task id a [`task_key`] was made from.
pub fn task_of_key(key: &str) -> Option<String> {
    let hex = key.replacen("-/", "", 1);
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> =
        (0..hex.len()).step_by(2).map(|i| hex.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok())).collect();
    String::from_utf8(bytes?).ok()
}

/// `refs/arbiter/plans/<plan>/tasks/<task-key>`: the commit arbiter recorded for the task.
pub fn task_ref(plan: &str, task: &str) -> String {
    format!("{}{}", task_refs_prefix(plan), task_key(task))
}

/// Every task ref of the plan.
pub async fn task_refs(repo: &Git, plan: &str) -> Result<Vec<String>, GitError> {
    let prefix = task_refs_prefix(plan);
    let out = repo.run(["for-each-ref", "--format=%(refname)", prefix.as_str()]).await?;
    Ok(out.text().lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_string).collect())
}

/// What a ref points at, if it exists.
async fn ref_value(repo: &Git, name: &str) -> Result<Option<String>, GitError> {
    repo.ref_target(name).await
}

/// Creates the branch at `base` (only if it does not exist), records `base` in the plan's
/// base ref and drops task refs left from an earlier branch of the plan, all in one
/// transaction. `Ok(false)`: the branch existed already (someone created it meanwhile).
pub async fn create_branch(repo: &Git, plan: &str, branch: &str, base: &str) -> Result<bool, GitError> {
    let mut script =
        format!("start\ncreate refs/heads/{branch} {base}\nupdate {base_ref} {base}\n", base_ref = base_ref_name(plan));
    for stale in task_refs(repo, plan).await? {
        script.push_str(&format!("delete {stale}\n"));
    }
    script.push_str("prepare\ncommit\n");
    match repo.run_with_input(["update-ref", "--stdin"], script.as_bytes()).await {
        Ok(_) => Ok(true),
        Err(e @ GitError::Failed { .. }) => {
            if repo.branch_exists(branch).await? {
                Ok(false)
            } else {
                Err(e)
            }
        }
        Err(e) => Err(e),
    }
}

/// The commit the branch points at.
pub async fn tip(repo: &Git, branch: &str) -> Result<String, GitError> {
    // A branch points at a commit (git refuses anything else under refs/heads/).
    repo.ref_target(&format!("refs/heads/{branch}")).await?.ok_or_else(|| GitError::UnknownRevision(branch.to_string()))
}

/// A commit on a plan's integration branch, as the dashboard lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BranchCommit {
    pub commit: String,
    pub subject: String,
    /// Seconds since the epoch (the committer's time).
    pub committed_at: i64,
    /// The task whose winner it is (its `Arbiter-Task` trailer), when it is one.
    pub task: Option<String>,
    pub run: Option<String>,
}

/// The latest `limit` commits of `branch` that `base` does not have, newest first.
pub async fn commits_since(repo: &Git, branch: &str, base: &str, limit: usize) -> Result<Vec<BranchCommit>, GitError> {
    let format = format!(
        "--format=%H%x1f%s%x1f%ct%x1f%(trailers:key={TASK_TRAILER},valueonly,separator=%x2c)%x1f%(trailers:key={RUN_TRAILER},valueonly,separator=%x2c)%x1e"
    );
    let range = format!("{base}..refs/heads/{branch}");
    let out = repo.run(["log", "--no-color", &format!("--max-count={limit}"), &format, &range, "--"]).await?;
    Ok(out
        .text()
        .split('\u{1e}')
        .filter_map(|record| {
            let mut f = record.trim_start_matches('\n').split('\u{1f}');
            let commit = f.next()?.trim().to_string();
            if commit.is_empty() {
                return None;
            }
            let subject = f.next().unwrap_or_default().to_string();
            let committed_at = f.next().and_then(|t| t.trim().parse().ok()).unwrap_or(0);
            let named = |v: Option<&str>| v.map(str::trim).filter(|v| !v.is_empty()).map(str::to_string);
            let task = named(f.next());
            let run = named(f.next());
            Some(BranchCommit { commit, subject, committed_at, task, run })
        })
        .collect())
}

/// The message of the commit of `task`'s winner.
pub fn message(title: &str, plan: &str, task: &str, run: &str, candidate: &str) -> String {
    format!(
        "{title}\n\nPlan {plan}, task {task}: the winner of arbiter run {run} (candidate {candidate}).\n\n{PLAN_TRAILER}: {plan}\n{TASK_TRAILER}: {task}\n{RUN_TRAILER}: {run}\n"
    )
}

/// Where a winner goes: the plan, the task and the branch.
pub struct Destination<'a> {
    pub plan: &'a str,
    pub task: &'a str,
    pub branch: &'a str,
}

fn describe(breaches: &[LimitBreach]) -> String {
    breaches.iter().map(LimitBreach::describe).collect::<Vec<_>>().join("; ")
}

/// What [`materialize::check`] said of a patch on the tip `tip`, as an integration error.
fn refused_at(tip: &str, refusal: Refusal) -> IntegrationError {
    match refusal {
        Refusal::DoesNotApply(detail) => IntegrationError::Conflict { tip: tip.to_string(), detail },
        Refusal::Breaks(breaches) => IntegrationError::Refused { tip: tip.to_string(), breaches },
    }
}

/// The winner's patch (the file `patch`) checked on the branch's current tip.
pub async fn check_at_tip(
    repo: &Git,
    branch: &str,
    patch: &std::path::Path,
    limits: &CandidateLimits,
) -> Result<CheckedPatch, IntegrationError> {
    let tip = tip(repo, branch).await?;
    materialize::check_file(repo, &tip, patch, limits).await?.map_err(|r| refused_at(&tip, r))
}

/// Commits `patch` on top of the branch's current tip (checked again there when the branch
/// moved since it was checked), and moves the branch there and records the commit as the
/// task's in one transaction.
pub async fn commit_onto(
    repo: &Git,
    to: &Destination<'_>,
    patch: &CheckedPatch,
    message: &str,
) -> Result<Committed, IntegrationError> {
    let branch_ref = format!("refs/heads/{}", to.branch);
    let task_ref = task_ref(to.plan, to.task);
    for _ in 0..CAS_TRIES {
        let parent = tip(repo, to.branch).await?;
        let moved;
        let checked = if patch.onto() == parent {
            patch
        } else {
            moved = patch.check_onto(repo, &parent).await?.map_err(|r| refused_at(&parent, r))?;
            &moved
        };
        let commit = materialize::commit_checked(repo, checked, message).await?;
        // The task's ref is compare-and-swapped too: a value left from an earlier commit
        // that is no longer on the branch is replaced, never one written meanwhile.
        let record = match ref_value(repo, &task_ref).await? {
            Some(old) => format!("update {task_ref} {commit} {old}"),
            None => format!("create {task_ref} {commit}"),
        };
        let script = format!("start\nupdate {branch_ref} {commit} {parent}\n{record}\nprepare\ncommit\n");
        match repo.run_with_input(["update-ref", "--stdin"], script.as_bytes()).await {
            Ok(_) => return Ok(Committed { commit, parent }),
            // Another worker moved the branch first: build again on its new tip.
            Err(GitError::Failed { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(IntegrationError::Contended { branch: to.branch.to_string() })
}

/// The commit arbiter recorded for `task`, if it is on the branch after `base` (reachable
/// from the tip, not from the base). A recorded commit that is not there any more (the
/// branch was reset or rewritten) does not count.
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
    let Some(commit) = ref_value(repo, &task_ref(plan, task)).await? else {
        return Ok(None);
    };
    let tip = tip(repo, branch).await?;
    if repo.is_ancestor(&commit, &tip).await? && !repo.is_ancestor(&commit, base).await? {
        Ok(Some(commit))
    } else {
        Ok(None)
    }
}

/// Deletes the plan's task refs and, when `to` is `Some((old, new))`, moves the branch from
/// `old` to `new` (a compare-and-swap), in one transaction (a plan reset).
pub async fn reset_refs(repo: &Git, plan: &str, branch: &str, to: Option<(&str, &str)>) -> Result<usize, GitError> {
    let refs = task_refs(repo, plan).await?;
    if refs.is_empty() && to.is_none() {
        return Ok(0);
    }
    let mut script = String::from("start\n");
    if let Some((old, new)) = to {
        script.push_str(&format!("update refs/heads/{branch} {new} {old}\n"));
    }
    for r in &refs {
        script.push_str(&format!("delete {r}\n"));
    }
    script.push_str("prepare\ncommit\n");
    repo.run_with_input(["update-ref", "--stdin"], script.as_bytes()).await?;
    Ok(refs.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file of `text` (a patch) in `dir`.
    fn patch_file(dir: &std::path::Path, name: &str, text: &str) -> std::path::PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    const LINK_UP: &str = "diff --git a/sub/u b/sub/u\nnew file mode 120000\n--- /dev/null\n+++ b/sub/u\n@@ -0,0 +1 @@\n+..\n\\ No newline at end of file\n";
    const LINK_E: &str = "diff --git a/e b/e\nnew file mode 120000\n--- /dev/null\n+++ b/e\n@@ -0,0 +1 @@\n+sub/u/..\n\\ No newline at end of file\n";

    /// Two tasks' winners, each harmless on the base: one adds `sub/u -> ..` (the root),
    /// the other `e -> sub/u/..` (`sub` on the base). Together `e` is the directory above
    /// the repository: the second is refused on the tip the first made, and the branch
    /// keeps only the first.
    #[tokio::test]
    async fn a_winner_is_checked_again_on_the_tip_it_goes_on() {
        let tmp = tempfile::tempdir().unwrap();
        let (git, base) = crate::testing::committed_repo(&tmp.path().join("repo"), &[("a.txt", "a\n")]).await;
        assert!(create_branch(&git, "p", "arbiter/p", &base).await.unwrap());
        let limits = CandidateLimits::default();
        let up = patch_file(tmp.path(), "up.diff", LINK_UP);
        let e = patch_file(tmp.path(), "e.diff", LINK_E);
        // Both pass on the base, each on its own.
        let checked_e = materialize::check_file(&git, &base, &e, &limits).await.unwrap().expect("e alone is inside");
        let a = Destination { plan: "p", task: "A", branch: "arbiter/p" };
        let checked_up = check_at_tip(&git, "arbiter/p", &up, &limits).await.expect("sub/u alone is inside");
        let first = commit_onto(&git, &a, &checked_up, "A").await.expect("A committed");
        let b = Destination { plan: "p", task: "B", branch: "arbiter/p" };
        let refused = commit_onto(&git, &b, &checked_e, "B").await.expect_err("e escapes on the new tip");
        let IntegrationError::Refused { tip, breaches } = &refused else { panic!("{refused}") };
        assert_eq!(tip, &first.commit);
        assert!(refused.to_string().contains("e is a symbolic link to sub/u/.., which leads outside"), "{refused}");
        assert!(matches!(&breaches[..], [LimitBreach::LinkOutside { path, .. }] if path == "e"), "{breaches:?}");
        assert_eq!(tip_of(&git).await, first.commit);
        // The same from the file, checked at the tip first (as the control plane does).
        assert!(matches!(check_at_tip(&git, "arbiter/p", &e, &limits).await, Err(IntegrationError::Refused { .. })));
    }

    async fn tip_of(git: &Git) -> String {
        tip(git, "arbiter/p").await.unwrap()
    }

    #[test]
    fn messages_carry_trailers() {
        let m = message("Fix add", "calc", "T1", "20261201T000000Z-abcdef", "c02");
        assert!(m.starts_with("Fix add\n\n"));
        assert!(m.contains("\nArbiter-Plan: calc\nArbiter-Task: T1\nArbiter-Run: 20261201T000000Z-abcdef\n"));
    }

    #[test]
    fn task_keys_are_ref_safe_and_reversible() {
        assert_eq!(task_key("T1"), "5431");
        assert_eq!(task_ref("calc", "a/b:c"), "refs/arbiter/plans/calc/tasks/612f623a63");
        for id in ["T1", "a/b:c", "x.y_z-1", &"k".repeat(100), &"k".repeat(101), &"é/".repeat(40)] {
            let key = task_key(id);
            assert!(key.split('/').all(|c| !c.is_empty() && c.len() <= KEY_COMPONENT + 1), "{key}");
            assert_eq!(task_of_key(&key).as_deref(), Some(id));
        }
        // A split key's directory never collides with the file of a shorter id.
        let short = task_key(&"k".repeat(100));
        let long = task_key(&"k".repeat(101));
        assert_eq!(long.split('/').next(), Some(format!("{short}-").as_str()));
    }
}
