//! Who may move a plan's integration branch, decided before anything moves it.
//!
//! arbiter commits every task's winner onto the plan's integration branch and `plan reset`
//! moves it back, so the branch must be the plan's own: one arbiter created for it, as the
//! store records ([`BranchRecord`]). A branch that already exists, the branch checked out
//! in any worktree, and the repository's default branch are refused at import (and again
//! at run, for plans imported before, or branches made since). `--adopt-branch NAME` hands
//! an existing branch over explicitly: it is recorded as adopted, arbiter commits onto it,
//! and nothing ever moves it back. A checked-out branch is never used, adopted or not:
//! arbiter moves refs without touching working trees, which would leave that checkout
//! showing the reverse of every commit as uncommitted changes.
//!
//! The store is the source of truth, not the repository: a branch arbiter created before
//! its store was reset is, for a new store, a branch like any other (the refusal says so
//! and how to adopt or drop it). A branch the store says arbiter created that is gone (the
//! user deleted it) is created again at the plan's base, and recorded again.

use arbiter_core::time::Timestamp;
use arbiter_store::StoreError;
use arbiter_store::plans::{BranchOrigin, BranchRecord, BranchReset, PlanRecord, PlanStore};

use crate::git::{Git, GitError};
use crate::integration;

/// Why arbiter will not use (or move) a plan's integration branch; each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum BranchError {
    #[error(
        "plan {plan}'s integration branch '{branch}' is not a valid branch name; name another `integration_branch` in the plan file (the default is arbiter/{plan})"
    )]
    InvalidName { plan: String, branch: String },
    #[error(
        "--adopt-branch {given} does not name plan {plan}'s integration branch ({branch}): it only hands over the branch the plan commits onto. Pass --adopt-branch {branch}, or set `integration_branch = \"{given}\"` in the plan file"
    )]
    AdoptMismatch { plan: String, given: String, branch: String },
    #[error(
        "there is no branch {branch} to adopt: leave out --adopt-branch, and arbiter creates {branch} for plan {plan} at its base_ref on the first `arbiter plan run`"
    )]
    NothingToAdopt { plan: String, branch: String },
    #[error(
        "branch {branch} (plan {plan}'s integration branch) is checked out in {worktree}: arbiter {doing} without touching any working tree, which would leave that checkout showing the reverse of every change as uncommitted; {remedy}"
    )]
    CheckedOut { plan: String, branch: String, worktree: String, doing: &'static str, remedy: String },
    #[error(
        "branch {branch} already exists (at {tip}) and arbiter did not create it for plan {plan}{earlier}: arbiter commits each task's winner onto its integration branch and `plan reset` moves it back, so it does not take over a branch unasked. {remedy}"
    )]
    Exists { plan: String, branch: String, tip: String, earlier: String, remedy: String },
    #[error(
        "branch {branch} is the repository's default branch ({why}): arbiter commits each task's winner onto its integration branch and `plan reset` moves it back, so it must be a branch of the plan's own. {remedy}"
    )]
    Default { plan: String, branch: String, why: String, remedy: String },
    #[error(
        "branch {branch} was adopted by plan {plan} (it existed before the plan, at {base}): arbiter never moves an adopted branch back, so nothing was reset. `arbiter plan reset {plan} --keep-branch` resets the tasks and leaves {branch} as it is (the plan's commits stay on it); to drop those commits too, move it yourself first (`git branch -f {branch} {base}`)"
    )]
    ResetAdopted { plan: String, branch: String, base: String },
    #[error(
        "branch {branch} exists but arbiter has no record of creating it for plan {plan}, so it does not move it: nothing was reset. `arbiter plan reset {plan} --keep-branch` resets the tasks and leaves {branch} as it is"
    )]
    ResetNotOwned { plan: String, branch: String },
    #[error(transparent)]
    Git(#[from] GitError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl BranchError {
    /// Whether the user can fix this (exit 2), rather than the environment failing.
    pub fn is_usage(&self) -> bool {
        !matches!(self, BranchError::Git(_) | BranchError::Store(_))
    }
}

/// What a plan's integration branch is in the repository now.
struct Facts {
    tip: Option<String>,
    /// The worktree that has it checked out.
    checked_out_in: Option<String>,
    /// Why it is a default branch, when it is one.
    default_because: Option<String>,
}

/// The branches that count as the repository's default: the one `refs/remotes/origin/HEAD`
/// points to, else `main` and `master` where they exist; and `init.defaultBranch`. Each
/// with why.
pub async fn default_branches(repo: &Git) -> Result<Vec<(String, String)>, GitError> {
    let mut out: Vec<(String, String)> = Vec::new();
    match repo.run(["symbolic-ref", "--quiet", "refs/remotes/origin/HEAD"]).await {
        Ok(o) => {
            if let Some(b) = o.text().strip_prefix("refs/remotes/origin/") {
                out.push((b.to_string(), "refs/remotes/origin/HEAD points to it".into()));
            }
        }
        Err(GitError::Failed { .. }) => {}
        Err(e) => return Err(e),
    }
    if out.is_empty() {
        for b in ["main", "master"] {
            if repo.branch_exists(b).await? {
                out.push((b.to_string(), format!("there is no refs/remotes/origin/HEAD, and {b} is the main line")));
            }
        }
    }
    if let Some(b) = repo.config_value("init.defaultBranch").await?
        && !out.iter().any(|(o, _)| *o == b)
    {
        out.push((b, "init.defaultBranch names it".into()));
    }
    Ok(out)
}

/// The worktree (main or linked) that has `branch` checked out, if any.
pub async fn checked_out_in(repo: &Git, branch: &str) -> Result<Option<String>, GitError> {
    Ok(repo.worktree_branches().await?.into_iter().find(|(_, b)| b.as_deref() == Some(branch)).map(|(path, _)| path))
}

async fn facts(repo: &Git, branch: &str) -> Result<Facts, GitError> {
    let tip = if repo.branch_exists(branch).await? { Some(integration::tip(repo, branch).await?) } else { None };
    let default_because = default_branches(repo).await?.into_iter().find(|(b, _)| b == branch).map(|(_, why)| why);
    Ok(Facts { tip, checked_out_in: checked_out_in(repo, branch).await?, default_because })
}

fn short(commit: &str) -> &str {
    &commit[..commit.len().min(10)]
}

/// ` (refs/arbiter/plans/<plan>/base shows …)` when arbiter created a branch for a plan of
/// that id here before: the store that recorded it was reset or is another one.
async fn earlier_arbiter(repo: &Git, plan: &str) -> Result<String, GitError> {
    Ok(match repo.run(["rev-parse", "--verify", "--quiet", &integration::base_ref_name(plan)]).await {
        Ok(_) => format!(
            " (arbiter did create a branch for a plan '{plan}' here before — {} shows where it started — but this store has no record of it: the store was reset, is another one, or the plan was imported by an older arbiter)",
            integration::base_ref_name(plan)
        ),
        Err(_) => String::new(),
    })
}

/// At import (`plan import`, `plan apply`, `plan create`): refuses a branch the plan does not
/// own, or returns the record an `--adopt-branch` makes. `record` is what the store holds
/// for the plan (if it exists), `adopt` the flag's value.
pub async fn check_import(
    repo: &Git,
    plan: &str,
    branch: &str,
    record: Option<&BranchRecord>,
    adopt: Option<&str>,
    now: Timestamp,
) -> Result<Option<BranchRecord>, BranchError> {
    if let Some(given) = adopt.filter(|a| *a != branch) {
        return Err(BranchError::AdoptMismatch { plan: plan.into(), given: given.into(), branch: branch.into() });
    }
    if !repo.valid_branch_name(branch).await {
        return Err(BranchError::InvalidName { plan: plan.into(), branch: branch.into() });
    }
    // The plan owns it already (a re-import): nothing to check, and adopting a branch
    // arbiter created changes nothing (it stays arbiter's, which a reset may move back).
    if record.is_some_and(|r| r.name == branch) {
        return Ok(None);
    }
    let f = facts(repo, branch).await?;
    if let Some(worktree) = f.checked_out_in {
        return Err(BranchError::CheckedOut {
            plan: plan.into(),
            branch: branch.into(),
            worktree: worktree.clone(),
            doing: "would commit onto it",
            remedy: format!(
                "name another `integration_branch` in the plan file (the default is arbiter/{plan}), or switch that worktree to another branch first (`git -C {worktree} switch OTHER`) and import again with --adopt-branch {branch}"
            ),
        });
    }
    let adopt_hint = format!(
        "Name another `integration_branch` in the plan file (the default is arbiter/{plan}), or pass --adopt-branch {branch} to let arbiter commit onto {branch} as it is (an adopted branch is never moved back)"
    );
    match (f.tip, f.default_because) {
        (Some(tip), _) if adopt.is_some() => {
            Ok(Some(BranchRecord { name: branch.into(), origin: BranchOrigin::Adopted, base: tip, recorded_at: now }))
        }
        (Some(_), Some(why)) => {
            Err(BranchError::Default { plan: plan.into(), branch: branch.into(), why, remedy: adopt_hint })
        }
        (Some(tip), None) => Err(BranchError::Exists {
            plan: plan.into(),
            branch: branch.into(),
            tip: short(&tip).into(),
            earlier: earlier_arbiter(repo, plan).await?,
            remedy: adopt_hint,
        }),
        (None, Some(why)) => Err(BranchError::Default {
            plan: plan.into(),
            branch: branch.into(),
            why,
            remedy: format!("Name another `integration_branch` in the plan file (the default is arbiter/{plan})"),
        }),
        (None, None) if adopt.is_some() => {
            Err(BranchError::NothingToAdopt { plan: plan.into(), branch: branch.into() })
        }
        (None, None) => Ok(None),
    }
}

/// At `plan run`: the plan's own branch, created (and recorded) if it does not exist yet;
/// refused when it is checked out, or exists without the store's record, or is a default
/// branch arbiter would create. Returns the record (whose `base` is where the plan's own
/// commits begin).
pub async fn ensure_for_run(
    repo: &Git,
    store: &dyn PlanStore,
    plan: &PlanRecord,
    now: Timestamp,
) -> Result<BranchRecord, BranchError> {
    let header = &plan.header;
    let (id, branch) = (header.id.as_str(), header.integration_branch.as_str());
    if !repo.valid_branch_name(branch).await {
        return Err(BranchError::InvalidName { plan: id.into(), branch: branch.into() });
    }
    let f = facts(repo, branch).await?;
    if let Some(worktree) = f.checked_out_in {
        return Err(BranchError::CheckedOut {
            plan: id.into(),
            branch: branch.into(),
            worktree: worktree.clone(),
            doing: "commits each task's winner onto it",
            remedy: format!(
                "switch that worktree to another branch (`git -C {worktree} switch OTHER`) and run the plan again"
            ),
        });
    }
    let record = plan.branch_record();
    match (record, f.tip) {
        (Some(r), Some(_)) => Ok(r.clone()),
        // Another claimer of this plan may have created it since `plan` was read (it records
        // the branch before creating it): the store says so now.
        (None, Some(tip)) => match recorded_now(store, id).await? {
            Some(r) => Ok(r),
            None => Err(BranchError::Exists {
                plan: id.into(),
                branch: branch.into(),
                tip: short(&tip).into(),
                earlier: earlier_arbiter(repo, id).await?,
                remedy: format!(
                    "To let arbiter commit onto it as it is, import the plan's file again with --adopt-branch {branch} (`arbiter plan export {id} -o {id}.json` writes it); or rename the branch (`git branch -m {branch} {branch}-mine`), and arbiter creates its own"
                ),
            }),
        },
        // Gone: arbiter created it once (or it was adopted and the user deleted it).
        // arbiter may create it, unless the name is a default branch's.
        (_, None) => {
            if let Some(why) = f.default_because {
                return Err(BranchError::Default {
                    plan: id.into(),
                    branch: branch.into(),
                    why,
                    remedy: format!(
                        "Name another `integration_branch` in the plan file and import it again with --update (`arbiter plan export {id} -o {id}.json` writes it)"
                    ),
                });
            }
            create(repo, store, plan, now).await
        }
    }
}

/// The plan's branch record as the store holds it now.
async fn recorded_now(store: &dyn PlanStore, id: &str) -> Result<Option<BranchRecord>, BranchError> {
    let view = store.plan(id).await?.ok_or_else(|| StoreError::NoPlan { id: id.to_string() })?;
    Ok(view.plan.branch_record().cloned())
}

/// Creates the branch at the plan's `base_ref` and records it. The record is written
/// first: a crash in between leaves a record of a branch that does not exist, which the
/// next run creates — never a branch arbiter made without a record.
async fn create(
    repo: &Git,
    store: &dyn PlanStore,
    plan: &PlanRecord,
    now: Timestamp,
) -> Result<BranchRecord, BranchError> {
    let header = &plan.header;
    let base = repo.resolve_commit(&header.base_ref).await?;
    let record = BranchRecord {
        name: header.integration_branch.clone(),
        origin: BranchOrigin::Created,
        base: base.clone(),
        recorded_at: now,
    };
    store.record_branch(&header.id, &record, now).await?;
    if integration::create_branch(repo, &header.id, &header.integration_branch, &base).await? {
        return Ok(record);
    }
    // Another `plan run` of this plan created it in the meantime (and recorded it): use
    // what the store says now.
    Ok(recorded_now(store, &header.id).await?.unwrap_or(record))
}

/// What `plan reset` does to the integration branch: move a branch arbiter created back to
/// where it was created (returned as `new_tip`), keep it when asked (`keep_branch`) or when
/// it does not exist; refuse an adopted branch, one without a record and a checked-out one.
pub async fn plan_reset(repo: &Git, plan: &PlanRecord, keep_branch: bool) -> Result<BranchReset, BranchError> {
    let header = &plan.header;
    let (id, branch) = (header.id.as_str(), header.integration_branch.as_str());
    let exists = repo.branch_exists(branch).await?;
    let old_tip = if exists { Some(integration::tip(repo, branch).await?) } else { None };
    let kept = |why: &str| BranchReset {
        name: branch.into(),
        old_tip: old_tip.clone(),
        new_tip: None,
        kept: Some(why.into()),
    };
    if keep_branch {
        return Ok(kept("--keep-branch"));
    }
    if !exists {
        return Ok(kept("it does not exist"));
    }
    let record = match plan.branch_record() {
        None => return Err(BranchError::ResetNotOwned { plan: id.into(), branch: branch.into() }),
        Some(r) if r.origin == BranchOrigin::Adopted => {
            return Err(BranchError::ResetAdopted {
                plan: id.into(),
                branch: branch.into(),
                base: short(&r.base).into(),
            });
        }
        Some(r) => r,
    };
    if let Some(worktree) = checked_out_in(repo, branch).await? {
        return Err(BranchError::CheckedOut {
            plan: id.into(),
            branch: branch.into(),
            worktree: worktree.clone(),
            doing: "would move it back",
            remedy: format!(
                "nothing was reset. Switch that worktree to another branch (`git -C {worktree} switch OTHER`) and reset again, or pass --keep-branch to reset the tasks and leave {branch} where it is"
            ),
        });
    }
    Ok(BranchReset { name: branch.into(), old_tip, new_tip: Some(record.base.clone()), kept: None })
}
