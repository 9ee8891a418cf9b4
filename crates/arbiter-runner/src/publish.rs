//! A winner (or a plan's work) as a pull request: the branch that carries it, pushed to the
//! repository's remote, and the pull (merge) request opened with the user's forge CLI.
//!
//! - A run's winner becomes a branch with one commit — the winning patch on the run's base,
//!   the final report as the message body — created only where no branch of that name
//!   exists ([`winner_branch`]); arbiter reuses it on a second `arbiter pr` only when the
//!   run's `pr.json` says arbiter made it at that commit. A plan's pull request carries its
//!   integration branch as it is.
//! - A push is never forced ([`crate::plan_push::push_ref`]): a remote branch that moved
//!   elsewhere is left as it is, and arbiter says so.
//! - Without `gh`/`glab` the branch is still pushed, and the page that opens the pull request
//!   by hand is printed; without a remote, a `git bundle` and a `format-patch` series are
//!   written, with how to send them ([`Published::Offline`]).
//! - The issue a plan came from is told how the plan ended ([`report_issue`]): its labels
//!   move to done or failed, and a comment links the pull request.

use std::path::{Path, PathBuf};

use arbiter_core::artifact::{SelectionArtifact, paths};
use arbiter_core::intake::config::{ForgeSection, IntakeSection};
use arbiter_core::intake::issue::{Forge, Stage};
use arbiter_core::intake::remote::{self, ForgeRepo};
use arbiter_core::intake::report::{self, PlanOutcome, TaskOutcome};
use arbiter_core::plan::event::{ChangeRecord, PlanEntry};
use arbiter_core::plan::state::TaskStatus;
use arbiter_store::plans::{PlanEvent, PlanStore, PlanView};
use serde::{Deserialize, Serialize};

use crate::forge::{ChangeRequest, ForgeCli, ForgeError};
use crate::git::{Git, GitError};
use crate::plan_push::{PushError, Pushed, push_ref};

/// Why a branch or a pull request could not be made; each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error(
        "a branch {branch} exists already and arbiter did not make it for {whose}: arbiter never moves a branch it did not create; name another with --branch NAME"
    )]
    BranchTaken { branch: String, whose: String },
    #[error("'{0}' is not a valid branch name; name another with --branch NAME")]
    BadBranch(String),
    #[error("the winner's patch cannot go on the run's base {base}: {refusal}")]
    Refused { base: String, refusal: crate::materialize::Refusal },
    #[error(transparent)]
    Push(#[from] PushError),
    #[error(transparent)]
    Forge(#[from] ForgeError),
    #[error(transparent)]
    Git(#[from] GitError),
    #[error("{0}")]
    Io(String),
}

impl PublishError {
    /// The user can fix it (exit 2) rather than the environment (exit 3).
    pub fn is_usage(&self) -> bool {
        match self {
            PublishError::BranchTaken { .. } | PublishError::BadBranch(_) | PublishError::Refused { .. } => true,
            PublishError::Push(p) => p.is_usage() || matches!(p, PushError::Rejected { .. }),
            PublishError::Forge(f) => !f.is_environment(),
            _ => false,
        }
    }
}

/// Where branches go: the remote (if the repository has it), and the forge repository it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Destination {
    /// The remote's name, when the repository has it.
    pub remote: Option<String>,
    pub forge: Forge,
    /// The forge repository (host and `OWNER/REPO`), from `[forge]` or the remote's URL.
    pub at: Option<ForgeRepo>,
}

/// The remote `name` of `repo` and the forge repository it is (`[forge] host`/`repository`
/// win over what its URL says).
pub async fn destination(repo: &Git, name: &str, config: &ForgeSection) -> Result<Destination, PublishError> {
    let url = if crate::plan_push::remote_name_ok(name) {
        repo.config_value(&format!("remote.{name}.url")).await?
    } else {
        return Err(PushError::BadRemote(name.chars().take(100).collect()).into());
    };
    let from_url = url.as_deref().and_then(remote::parse_url);
    let at = match (&config.repository, &config.host) {
        (Some(repository), host) => Some(ForgeRepo {
            host: host
                .clone()
                .or_else(|| from_url.as_ref().map(|r| r.host.clone()))
                .unwrap_or_else(|| "github.com".into()),
            repo: repository.clone(),
        }),
        (None, Some(host)) => from_url.map(|r| ForgeRepo { host: host.clone(), repo: r.repo }),
        (None, None) => from_url,
    };
    let forge = match config.kind {
        Some(kind) => kind,
        None => at.as_ref().map_or(Forge::GitHub, |a| remote::forge_of(&a.host)),
    };
    Ok(Destination { remote: url.map(|_| name.to_string()), forge, at })
}

/// What a pull request says and whom it asks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChangeText {
    pub title: String,
    pub body: String,
    /// The branch to merge into (default: the forge repository's default branch).
    pub base: Option<String>,
    pub draft: bool,
    pub labels: Vec<String>,
    pub reviewers: Vec<String>,
}

/// How a branch was published.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Published {
    /// Pushed, and a pull (merge) request is open.
    Opened { branch: String, base: String, url: String, existed: bool, pushed: Pushed },
    /// Pushed; no pull request could be opened from here (`why`): `compare_url` opens one by
    /// hand when the forge repository is known.
    Pushed { branch: String, base: String, compare_url: Option<String>, why: String, pushed: Pushed },
    /// No remote: a bundle and a patch series to send.
    Offline { branch: String, bundle: PathBuf, patches: Vec<PathBuf> },
}

impl Published {
    /// The pull request's page, when one is open.
    pub fn url(&self) -> Option<&str> {
        match self {
            Published::Opened { url, .. } => Some(url),
            _ => None,
        }
    }

    /// The event that records it for a plan (`None` offline: nothing reached a remote).
    pub fn change_record(&self) -> Option<ChangeRecord> {
        match self {
            Published::Opened { branch, base, url, existed, .. } => Some(ChangeRecord {
                branch: branch.clone(),
                base: base.clone(),
                url: Some(url.clone()),
                compare_url: None,
                existed: *existed,
            }),
            Published::Pushed { branch, base, compare_url, .. } => Some(ChangeRecord {
                branch: branch.clone(),
                base: base.clone(),
                url: None,
                compare_url: compare_url.clone(),
                existed: false,
            }),
            Published::Offline { .. } => None,
        }
    }
}

/// Publishes `branch`: pushes it to the destination's remote and opens a pull request with
/// the forge's CLI (or says how to open one by hand); without a remote, writes a bundle and
/// a patch series of `base_commit..branch` into `offline_dir`. `whose` names the work in
/// messages.
pub async fn publish_branch(
    repo: &Git,
    dest: &Destination,
    whose: &str,
    branch: &str,
    base_commit: &str,
    text: &ChangeText,
    offline_dir: &Path,
) -> Result<Published, PublishError> {
    let Some(remote) = &dest.remote else {
        return offline(repo, branch, base_commit, offline_dir).await;
    };
    let pushed = push_ref(repo, whose, branch, remote).await?;
    let cli = ForgeCli::find(dest.forge, dest.at.as_ref().map(|a| a.host.as_str()));
    let (cli, at) = match (cli, &dest.at) {
        (Ok(cli), Some(at)) => (cli, at),
        (cli, at) => {
            let why = match (&cli, at) {
                (Err(e), _) => e.to_string(),
                (Ok(_), None) => format!(
                    "the remote {remote} ({}) names no forge repository: set `[forge] repository = \"OWNER/REPO\"` (and `host`) in .arbiter/config.toml",
                    pushed.url
                ),
                (Ok(_), Some(_)) => String::new(),
            };
            let base = match &text.base {
                Some(b) => b.clone(),
                None => local_default_branch(repo, remote).await,
            };
            let compare_url = at.as_ref().map(|a| remote::compare_url(dest.forge, a, &base, branch));
            return Ok(Published::Pushed { branch: branch.into(), base, compare_url, why, pushed });
        }
    };
    // A CLI that is not logged in opens nothing: the branch is pushed, and the page that
    // opens the pull request by hand is printed with what to do.
    let logged_out = |e: ForgeError, base: String| Published::Pushed {
        branch: branch.into(),
        compare_url: Some(remote::compare_url(dest.forge, at, &base, branch)),
        base,
        why: e.to_string(),
        pushed: pushed.clone(),
    };
    let base = match &text.base {
        Some(b) => b.clone(),
        None => match cli.default_branch(&at.repo).await {
            Ok(b) => b,
            Err(e @ ForgeError::NotLoggedIn { .. }) => {
                return Ok(logged_out(e, local_default_branch(repo, remote).await));
            }
            Err(e) => return Err(e.into()),
        },
    };
    let request = ChangeRequest {
        head: branch.to_string(),
        base: base.clone(),
        title: text.title.clone(),
        body: text.body.clone(),
        draft: text.draft,
        labels: text.labels.clone(),
        reviewers: text.reviewers.clone(),
    };
    let opened = match cli.open_change(&at.repo, &request).await {
        Ok(o) => o,
        Err(e @ ForgeError::NotLoggedIn { .. }) => return Ok(logged_out(e, base)),
        Err(e) => return Err(e.into()),
    };
    Ok(Published::Opened { branch: branch.into(), base, url: opened.url, existed: opened.existed, pushed })
}

/// The branch a remote's `HEAD` names, else `main` or `master` where it exists, else `main`.
async fn local_default_branch(repo: &Git, remote: &str) -> String {
    if let Ok(out) = repo.run(["symbolic-ref", "--quiet", "--short", &format!("refs/remotes/{remote}/HEAD")]).await
        && let Some(name) = out.text().strip_prefix(&format!("{remote}/"))
    {
        return name.to_string();
    }
    for name in ["main", "master"] {
        if repo.branch_exists(name).await.unwrap_or(false) {
            return name.to_string();
        }
    }
    "main".to_string()
}

/// A bundle of `base..branch` and its `format-patch` series, in `dir`.
async fn offline(repo: &Git, branch: &str, base: &str, dir: &Path) -> Result<Published, PublishError> {
    let io = |e: std::io::Error| PublishError::Io(format!("cannot write into {}: {e}", dir.display()));
    let patches_dir = dir.join("patches");
    if patches_dir.exists() {
        std::fs::remove_dir_all(&patches_dir).map_err(io)?;
    }
    std::fs::create_dir_all(&patches_dir).map_err(io)?;
    let bundle = dir.join(format!("{}.bundle", branch.replace('/', "-")));
    let range = format!("{base}..refs/heads/{branch}");
    repo.run([
        std::ffi::OsStr::new("bundle"),
        std::ffi::OsStr::new("create"),
        bundle.as_os_str(),
        std::ffi::OsStr::new(&format!("refs/heads/{branch}")),
        std::ffi::OsStr::new(&format!("^{base}")),
    ])
    .await?;
    let out = repo
        .run([
            std::ffi::OsStr::new("format-patch"),
            std::ffi::OsStr::new("--quiet"),
            std::ffi::OsStr::new("-o"),
            patches_dir.as_os_str(),
            std::ffi::OsStr::new(&range),
        ])
        .await?;
    let mut patches: Vec<PathBuf> =
        out.text().lines().map(str::trim).filter(|l| !l.is_empty()).map(PathBuf::from).collect();
    if patches.is_empty() {
        patches = std::fs::read_dir(&patches_dir).map_err(io)?.flatten().map(|e| e.path()).collect();
        patches.sort();
    }
    Ok(Published::Offline { branch: branch.into(), bundle, patches })
}

/// `pr.json` in a run directory: the branch arbiter made for the run's winner, and where it
/// went.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PrRecord {
    pub schema_version: u32,
    pub run_id: String,
    pub branch: String,
    /// The commit arbiter made for the branch.
    pub commit: String,
    pub published: Option<Published>,
}

/// The file of [`PrRecord`].
pub const PR_JSON: &str = "pr.json";

/// The one commit a run's winner becomes: its patch, checked on the run's base, with a
/// message.
pub struct WinnerCommit<'a> {
    pub patch: &'a crate::materialize::CheckedPatch,
    pub message: &'a str,
}

/// The branch carrying a run's winner: created at a new commit ([`WinnerCommit`]), or — when
/// `recorded` says arbiter made this very branch for the run before and it still points
/// there — reused. Any other branch of that name is refused.
pub async fn winner_branch(
    repo: &Git,
    whose: &str,
    branch: &str,
    winner: &WinnerCommit<'_>,
    recorded: Option<&PrRecord>,
) -> Result<String, PublishError> {
    let WinnerCommit { patch, message } = *winner;
    if !repo.valid_branch_name(branch).await || branch.starts_with('-') {
        return Err(PublishError::BadBranch(branch.chars().take(100).collect()));
    }
    if let Some(tip) = repo.ref_target(&format!("refs/heads/{branch}")).await? {
        return match recorded {
            Some(r) if r.branch == branch && r.commit == tip => Ok(tip),
            _ => Err(PublishError::BranchTaken { branch: branch.into(), whose: whose.into() }),
        };
    }
    let commit = crate::materialize::commit_checked(repo, patch, message).await?;
    // Created only if it still does not exist (the zero value is git's "must not exist").
    let zero = "0".repeat(commit.len());
    let script = format!("start\nupdate refs/heads/{branch} {commit} {zero}\nprepare\ncommit\n");
    match repo.run_with_input(["update-ref", "--stdin"], script.as_bytes()).await {
        Ok(_) => Ok(commit),
        Err(GitError::Failed { .. }) => Err(PublishError::BranchTaken { branch: branch.into(), whose: whose.into() }),
        Err(e) => Err(e.into()),
    }
}

/// How each task of a plan ended, with its winner and reasons (from its run's
/// `selection.json` in `runs_dir`, when it is there).
pub fn plan_outcome(view: &PlanView, runs_dir: &Path, spent: String) -> PlanOutcome {
    let header = &view.plan.header;
    let tasks = view
        .tasks
        .iter()
        .map(|t| {
            let selection: Option<SelectionArtifact> = t.run_id.as_ref().and_then(|run| {
                let text = std::fs::read_to_string(runs_dir.join(run).join(paths::SELECTION)).ok()?;
                serde_json::from_str(&text).ok()
            });
            let winner = selection.as_ref().and_then(|s| s.winner.as_ref().map(|w| w.to_string()));
            let mut reasons = Vec::new();
            if let Some(s) = &selection {
                if !s.summary.is_blank() {
                    reasons.push(s.summary.to_string());
                }
                for c in s.candidates.iter().filter(|c| !c.reason.is_blank()) {
                    reasons.push(format!("{}{}: {}", c.candidate_id, if c.won { " (won)" } else { "" }, c.reason));
                }
            }
            TaskOutcome {
                id: t.spec.id.clone(),
                title: t.spec.title.clone(),
                status: t.status.as_str().to_string(),
                commit: t.commit.clone(),
                run_id: t.run_id.clone(),
                winner,
                reasons,
            }
        })
        .collect();
    PlanOutcome {
        id: header.id.clone(),
        name: header.name.clone(),
        branch: header.integration_branch.clone(),
        source: header.source.clone(),
        prd: header.prd.clone(),
        tasks,
        spent,
    }
}

/// Whether every task is done or skipped, and whether nothing can run any more (no task
/// ready or running: what is blocked stays blocked).
pub fn finished(view: &PlanView) -> (bool, bool) {
    let success = view.tasks.iter().all(|t| t.status.is_success());
    let settled = !view.tasks.iter().any(|t| matches!(t.status, TaskStatus::Ready | TaskStatus::Running));
    (success, settled)
}

/// Tells the issue a plan came from how it ended: its labels moved to done (every task done
/// or skipped) or failed, and a comment with the result and the pull request. Nothing when
/// the plan came from no issue, or when this very outcome was told already. The event that
/// records it is returned.
pub async fn report_issue(
    view: &PlanView,
    events: &[PlanEvent],
    intake: &IntakeSection,
    change_url: Option<&str>,
) -> Result<Option<PlanEntry>, PublishError> {
    let Some(source) = view.plan.header.source.as_deref() else { return Ok(None) };
    let Some((forge, at, number)) = remote::issue_of_url(source) else { return Ok(None) };
    let (success, _) = finished(view);
    let stage = if success { Stage::Done } else { Stage::Failed };
    let stage_name = if success { "done" } else { "failed" };
    let told = events.iter().any(|e| {
        matches!(e.entry(), Some(arbiter_core::plan::event::PlanLogEntry::Plan(PlanEntry::IssueUpdated { stage, change, .. }))
            if stage == stage_name && change.as_deref() == change_url)
    });
    if told {
        return Ok(None);
    }
    let cli = ForgeCli::find(forge, Some(&at.host))?;
    let issue = cli.issue(&at.repo, number).await?;
    let labels = intake.labels();
    cli.relabel(&at.repo, number, &labels.move_to(stage, &issue.labels)).await?;
    let done = view.tasks.iter().filter(|t| t.status.is_success()).count();
    let failed: Vec<(String, String)> = view
        .tasks
        .iter()
        .filter(|t| t.status == TaskStatus::Failed)
        .map(|t| (t.spec.id.clone(), t.reason.clone().unwrap_or_default()))
        .collect();
    let body = report::issue_comment(forge, &view.plan.header.id, success, done, view.tasks.len(), change_url, &failed);
    let comment = cli.comment(&at.repo, number, &body).await?;
    Ok(Some(PlanEntry::IssueUpdated {
        url: source.to_string(),
        stage: stage_name.to_string(),
        comment: Some(comment).filter(|c| !c.is_empty()),
        change: change_url.map(str::to_string),
    }))
}

/// Where a plan's work is: its store, its repository, the runs of its tasks, and where a
/// bundle goes when the repository has no remote.
#[derive(Clone, Copy)]
pub struct PlanPlace<'a> {
    pub store: &'a dyn PlanStore,
    pub repo: &'a Git,
    pub runs_dir: &'a Path,
    pub offline_dir: &'a Path,
}

/// Proposes a plan's integration branch (as `arbiter pr --plan` does): pushed and proposed
/// with `text` (its body the plan's tasks with their winners, its base the plan's base branch
/// unless given), recorded (`change_opened`); and the issue the plan came from told
/// (`issue_updated`; a failure to tell it is returned beside the publication, not instead).
pub async fn propose_plan(
    at: &PlanPlace<'_>,
    view: &PlanView,
    dest: &Destination,
    mut text: ChangeText,
    intake: &IntakeSection,
) -> Result<(Published, Option<PublishError>), PublishError> {
    let PlanPlace { store, repo, runs_dir, offline_dir } = *at;
    let header = &view.plan.header;
    let id = &header.id;
    let branch = &header.integration_branch;
    let Some(tip) = repo.ref_target(&format!("refs/heads/{branch}")).await? else {
        return Err(PushError::NoBranch { plan: id.clone(), branch: branch.clone() }.into());
    };
    let base_commit = match view.plan.branch_record() {
        Some(b) => b.base.clone(),
        None => repo.resolve_commit(&header.base_ref).await.unwrap_or(tip),
    };
    if text.base.is_none() && header.base_ref != "HEAD" && repo.branch_exists(&header.base_ref).await.unwrap_or(false) {
        text.base = Some(header.base_ref.clone());
    }
    if text.title.trim().is_empty() {
        text.title = format!("{} (plan {id})", arbiter_core::intake::text::one_line(&header.name, 150));
    }
    let attempts = store.attempts(id).await.unwrap_or_default();
    let uncosted: u64 = crate::plan_admin::call_costs(runs_dir, &attempts).await.values().map(|c| c.uncosted).sum();
    let spent = if uncosted > 0 {
        format!("{} plus {uncosted} call(s) of unknown cost", view.plan.budget.spent)
    } else {
        view.plan.budget.spent.to_string()
    };
    text.body = report::plan_body(&plan_outcome(view, runs_dir, spent));
    let published = publish_branch(repo, dest, &format!("plan {id}"), branch, &base_commit, &text, offline_dir).await?;
    let now = || arbiter_core::Clock::now(&crate::SystemClock);
    if let Some(change) = published.change_record() {
        store
            .note_event(id, PlanEntry::ChangeOpened(change), now())
            .await
            .map_err(|e| PublishError::Io(e.to_string()))?;
    }
    let mut untold = None;
    if header.source.is_some() && !matches!(published, Published::Offline { .. }) {
        let events = store.events(id).await.map_err(|e| PublishError::Io(e.to_string()))?;
        match report_issue(view, &events, intake, published.url()).await {
            Ok(Some(entry)) => {
                store.note_event(id, entry, now()).await.map_err(|e| PublishError::Io(e.to_string()))?;
            }
            Ok(None) => {}
            Err(e) => untold = Some(e),
        }
    }
    Ok((published, untold))
}

/// What a plan does when nothing of it can run any more: with `push = true` and every task
/// done or skipped, it proposes its integration branch; from an issue, it tells the issue how
/// it ended. What went wrong is recorded in the plan's log, never raised: the plan's work
/// stands.
pub async fn complete_plan(at: &PlanPlace<'_>, config: &arbiter_core::settings::ConfigFile, plan_id: &str) {
    let PlanPlace { store, repo, .. } = *at;
    let Ok(Some(view)) = store.plan(plan_id).await else { return };
    let (success, settled) = finished(&view);
    let header = &view.plan.header;
    if !settled || view.plan.cancelled {
        return;
    }
    let now = arbiter_core::Clock::now(&crate::SystemClock);
    let failed = |why: String| PlanEntry::CompletionFailed { reason: why };
    if header.push && success {
        let remote = config.forge.remote.clone().unwrap_or_else(|| crate::plan_push::DEFAULT_REMOTE.into());
        let proposed = match destination(repo, &remote, &config.forge).await {
            Ok(dest) => propose_plan(at, &view, &dest, ChangeText::default(), &config.intake).await,
            Err(e) => Err(e),
        };
        let problem = match proposed {
            Ok((_, None)) => None,
            Ok((_, Some(untold))) => Some(format!("the issue could not be told: {untold}")),
            Err(e) => Some(format!("its pull request was not opened: {e}; `arbiter pr --plan {plan_id}` tries again")),
        };
        if let Some(why) = problem {
            let _ = store.note_event(plan_id, failed(why), now).await;
        }
        return;
    }
    if header.source.is_some() {
        let events = store.events(plan_id).await.unwrap_or_default();
        match report_issue(&view, &events, &config.intake, None).await {
            Ok(Some(entry)) => {
                let _ = store.note_event(plan_id, entry, now).await;
            }
            Ok(None) => {}
            Err(e) => {
                let _ = store.note_event(plan_id, failed(format!("the issue could not be told: {e}")), now).await;
            }
        }
    }
}
