//! Plan administration behind one port, [`PlanAdmin`]: what `arbiter plan import|apply|
//! export|show|status|list|create|budget|reset|cancel|retry|events|push` do to plans, whether the
//! plans live in a store on this machine ([`LocalPlanAdmin`]) or on a control plane (the
//! HTTP client of `arbiter-server`, whose routes serve this very [`LocalPlanAdmin`]).
//!
//! [`LocalPlanAdmin`] owns the rules: the decision gate of `plan apply`, whether a plan may
//! use its integration branch ([`plan_branch`]), and a reset that moves the branch back and
//! forgets the tasks' commits ([`integration::reset_refs`]). Reading plan files, resolving a
//! relative `repository` against the file's directory, prompts and rendering stay with the
//! command line, which is why the port takes an already-parsed [`PlanSpec`].
//!
//! Errors ([`AdminError`]) say whether the user can fix them (exit 2: an unknown plan, a
//! plan or branch that cannot be used, a change the plan's state does not allow) or the
//! environment failed (exit 3: git, the store, the network), with the message to print.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use arbiter_core::Clock;
use arbiter_core::budget::Budget;
use arbiter_core::money::Usd;
use arbiter_core::plan::PlanSpec;
use arbiter_core::plan::event::PlanEntry;
use arbiter_core::plan::gate::{self, GateResult, Verdict};
use arbiter_core::plan::state::TaskStatus;
use arbiter_core::plan::worker_names::WorkerNames;
use arbiter_core::time::Timestamp;
use arbiter_store::StoreError;
use arbiter_store::plans::{
    AttemptRecord, BranchRecord, BranchReset, Import, ImportMode, ImportReport, PlanEvent, PlanSummary, PlanView,
};
use arbiter_store::units::UnitQueue;
use serde::{Deserialize, Serialize};

use crate::coordinator::{CoordinatorError, PlanRepositories};
use crate::git::{Git, GitError};
use crate::integration;
use crate::plan_branch::{self, BranchError};
use crate::plan_push::{self, PushError, Pushed};

/// The most events one call of [`PlanAdmin::events`] answers.
pub const EVENTS_PAGE: u32 = 1000;

/// An import (`plan import`) or an apply (`plan apply`) of a parsed plan file.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanImport {
    /// The plan, its `repository` already absolute (or a git URL).
    pub spec: PlanSpec,
    pub mode: ImportMode,
    /// `None`: a plain import; `Some(strict)`: an apply, the decision gate judging every task
    /// (and, when `strict`, the tasks it rejects skipped).
    pub apply: Option<bool>,
    /// `--adopt-branch`: hand this existing branch (the plan's integration branch) over.
    pub adopt_branch: Option<String>,
    /// Whose decision rules judge the tasks of an apply (`--gate`).
    pub gate: gate::Rules,
}

/// What an import did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct Imported {
    pub report: ImportReport,
    /// The branch `--adopt-branch` handed over, as recorded.
    pub adopted_branch: Option<BranchRecord>,
    /// The gate's verdicts on the tasks this import added or changed (an apply; empty for an
    /// import).
    pub verdicts: Vec<GateResult>,
}

/// A plan with its tasks and every attempt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct PlanDetails {
    #[serde(flatten)]
    pub view: PlanView,
    pub attempts: Vec<AttemptRecord>,
    /// Per task with calls of unknown cost, how many calls its runs made and how many of
    /// them had no known cost (see [`call_costs`]).
    #[serde(default)]
    pub call_costs: BTreeMap<String, CallCosts>,
}

impl PlanDetails {
    /// The task whose attempt made the run `run` (`None`: no task of this plan did).
    pub fn task_of_run(&self, run: &str) -> Option<&str> {
        self.attempts.iter().find(|a| a.run_id.as_deref() == Some(run)).map(|a| a.task_id.as_str())
    }

    /// Whether every model call the task made was of unknown cost (what it spent is then
    /// unknown, not the $0 recorded).
    pub fn spending_unknown(&self, task: &arbiter_store::plans::TaskRecord) -> bool {
        self.call_costs.get(&task.spec.id).is_some_and(|c| c.all_unknown())
    }

    /// What the task spent, in words: `unknown` when every call it made had no known cost
    /// (a command agent, a model without prices), never `$0.00` then.
    pub fn spent_by(&self, task: &arbiter_store::plans::TaskRecord) -> String {
        if self.spending_unknown(task) { "unknown".into() } else { task.cost.to_string() }
    }

    /// How the plan is drawn: each task's depth and the critical path (the longest chain of
    /// tasks not finished).
    pub fn shape(&self) -> arbiter_core::plan::dag::Shape {
        let edges: Vec<(&str, Vec<&str>)> = self
            .view
            .tasks
            .iter()
            .map(|t| (t.spec.id.as_str(), t.spec.dependencies.iter().map(String::as_str).collect()))
            .collect();
        let finished: BTreeSet<&str> =
            self.view.tasks.iter().filter(|t| t.status.is_terminal()).map(|t| t.spec.id.as_str()).collect();
        arbiter_core::plan::dag::shape(&edges, |id| finished.contains(id))
    }
}

/// How many model calls a task's runs made, and how many of them had no known cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct CallCosts {
    pub calls: u64,
    pub uncosted: u64,
}

impl CallCosts {
    /// Nothing about the task's cost is known: every call it made had none.
    pub fn all_unknown(&self) -> bool {
        self.uncosted > 0 && self.uncosted == self.calls
    }
}

/// The calls of each task's runs, from the runs' `cost_summary.json` in `runs_dir`, for the
/// tasks some of whose calls had no known cost (a runner that reports no usage, a model
/// without a price). The plan's money holds only what is known: this is what it does not
/// know, so that a command agent's task reads "cost unknown", as its run does, not "$0.00".
/// A run id that is not one (a hostile report) names no file; a summary that cannot be read
/// counts nothing.
pub async fn call_costs(runs_dir: &Path, attempts: &[AttemptRecord]) -> BTreeMap<String, CallCosts> {
    /// The part of `cost_summary.json` read here (the rest, every call, is not needed).
    #[derive(Deserialize)]
    struct Summary {
        total: Total,
    }
    #[derive(Deserialize)]
    struct Total {
        calls: u64,
        uncosted_calls: u64,
    }
    let mut runs: BTreeSet<(&str, arbiter_core::ids::RunId)> = BTreeSet::new();
    for a in attempts {
        if let Some(run) = a.run_id.as_deref().and_then(|r| arbiter_core::ids::RunId::parse(r).ok()) {
            runs.insert((a.task_id.as_str(), run));
        }
    }
    let mut by_task: BTreeMap<String, CallCosts> = BTreeMap::new();
    for (task, run) in runs {
        let file = runs_dir.join(run.as_str()).join(arbiter_core::artifact::paths::COST);
        let Some(summary) =
            tokio::fs::read(&file).await.ok().and_then(|bytes| serde_json::from_slice::<Summary>(&bytes).ok())
        else {
            continue;
        };
        let costs = by_task.entry(task.to_string()).or_default();
        costs.calls += summary.total.calls;
        costs.uncosted += summary.total.uncosted_calls;
    }
    by_task.retain(|_, c| c.uncosted > 0);
    by_task
}

/// An empty plan to create (`plan create`); tasks come with `plan import --update`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewPlan {
    pub id: String,
    pub name: String,
    /// A path (absolute) or a git URL.
    pub repository: Option<String>,
    pub budget_usd: Option<Usd>,
}

impl NewPlan {
    /// The plan's header: base `HEAD`, integration branch `arbiter/<id>`, no defaults.
    pub fn header(&self) -> PlanSpec {
        PlanSpec {
            id: self.id.clone(),
            name: self.name.clone(),
            repository: self.repository.clone(),
            base_ref: "HEAD".into(),
            integration_branch: PlanSpec::default_branch(&self.id),
            budget_usd: self.budget_usd,
            push: false,
            source: None,
            prd: None,
            defaults: Default::default(),
            tasks: Vec::new(),
        }
    }

    /// The header, or every problem with it (an id that is not a safe name, no name, a
    /// budget that cannot work).
    pub fn checked_header(&self) -> Result<PlanSpec, AdminError> {
        let header = self.header();
        let problems = arbiter_core::plan::check::check(&header, &[]);
        if problems.is_empty() {
            Ok(header)
        } else {
            let text: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
            Err(AdminError::Invalid(text.join("; ")))
        }
    }
}

/// What a reset would do, decided before anything changes (for the confirmation).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct ResetPreview {
    /// The plan's tasks.
    pub tasks: usize,
    /// What happens to the integration branch.
    pub branch: BranchReset,
}

/// What a reset did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct ResetOutcome {
    /// Tasks reset.
    pub reset: usize,
    /// What was done to the integration branch.
    pub branch: BranchReset,
}

/// Why an administration request failed, with the message to show.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AdminError {
    /// No plan or task by that name (the user's mistake).
    #[error("{0}")]
    NotFound(String),
    /// What was asked cannot be done as things stand: a plan that exists already, tasks
    /// running under live leases, a branch the plan does not own (the user's to resolve).
    #[error("{0}")]
    Conflict(String),
    /// The input is wrong: the plan, an amount, its repository or branch; or a control plane
    /// refused the request (the user's mistake).
    #[error("{0}")]
    Invalid(String),
    /// The environment failed: git, the store, the disk, the network.
    #[error("{0}")]
    Environment(String),
}

impl AdminError {
    /// Whether the user can fix it (exit 2) rather than the environment (exit 3).
    pub fn is_usage(&self) -> bool {
        !matches!(self, AdminError::Environment(_))
    }

    /// The error of a plan that does not exist.
    pub fn no_plan(id: &str) -> Self {
        StoreError::NoPlan { id: id.to_string() }.into()
    }
}

impl From<StoreError> for AdminError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NoPlan { .. } | StoreError::NoTask { .. } => AdminError::NotFound(e.to_string()),
            StoreError::NotAllowed { .. }
            | StoreError::LeasesHeld { .. }
            | StoreError::ImportRefused { .. }
            | StoreError::PlanExists { .. }
            | StoreError::SourceTaken { .. } => AdminError::Conflict(e.to_string()),
            StoreError::PlanInvalid { .. } => AdminError::Invalid(e.to_string()),
            _ => AdminError::Environment(e.to_string()),
        }
    }
}

impl From<GitError> for AdminError {
    fn from(e: GitError) -> Self {
        match e {
            GitError::NotARepository(_) | GitError::UnknownRevision(_) | GitError::NoCommits => {
                AdminError::Invalid(e.to_string())
            }
            _ => AdminError::Environment(e.to_string()),
        }
    }
}

impl From<BranchError> for AdminError {
    fn from(e: BranchError) -> Self {
        match e {
            BranchError::Git(g) => AdminError::Environment(g.to_string()),
            BranchError::Store(s) => s.into(),
            e @ (BranchError::InvalidName { .. } | BranchError::AdoptMismatch { .. }) => {
                AdminError::Invalid(e.to_string())
            }
            e => AdminError::Conflict(e.to_string()),
        }
    }
}

impl From<PushError> for AdminError {
    fn from(e: PushError) -> Self {
        match e {
            PushError::Git(g) => g.into(),
            e if e.is_usage() => AdminError::Invalid(e.to_string()),
            e @ PushError::Rejected { .. } => AdminError::Conflict(e.to_string()),
            e => AdminError::Environment(e.to_string()),
        }
    }
}

impl From<CoordinatorError> for AdminError {
    fn from(e: CoordinatorError) -> Self {
        match e {
            CoordinatorError::Refused(why) => AdminError::Invalid(why),
            CoordinatorError::Branch(b) => b.into(),
            CoordinatorError::Store(s) => s.into(),
            other => AdminError::Environment(other.to_string()),
        }
    }
}

/// Plan administration.
#[async_trait::async_trait]
pub trait PlanAdmin: Send + Sync {
    /// Imports (or applies) a plan: every problem is found before anything is written, and
    /// nothing is written when there is one (a branch the plan may not use included).
    async fn import(&self, import: &PlanImport) -> Result<Imported, AdminError>;
    /// The plan with its tasks and attempts.
    async fn view(&self, plan: &str) -> Result<PlanDetails, AdminError>;
    /// Every plan with its task counts and budget.
    async fn list(&self) -> Result<Vec<PlanSummary>, AdminError>;
    /// The plan's events after the event `after` (0: from the first), oldest first, at most
    /// `limit` (and at most [`EVENTS_PAGE`]) of them.
    async fn events(&self, plan: &str, after: i64, limit: u32) -> Result<Vec<PlanEvent>, AdminError>;
    /// Creates an empty plan; refused when it exists, or when its integration branch exists
    /// already.
    async fn create(&self, plan: &NewPlan) -> Result<(), AdminError>;
    /// Sets the plan's budget (`None` removes the limit). `by` names who asks, in the event
    /// the change writes (a control plane names its caller itself, from the token: a
    /// client's `by` is not sent).
    async fn set_budget(&self, plan: &str, limit: Option<Usd>, by: &str) -> Result<Budget, AdminError>;
    /// What [`reset`](PlanAdmin::reset) would do to the plan and its branch; refused (like
    /// the reset itself) when the branch is adopted, not the plan's, or checked out.
    async fn reset_preview(&self, plan: &str, keep_branch: bool) -> Result<ResetPreview, AdminError>;
    /// Every task back to how it was imported (`hard`: attempts and spending forgotten too),
    /// the integration branch back to where arbiter created it (unless `keep_branch`), the
    /// tasks' commits forgotten.
    async fn reset(&self, plan: &str, hard: bool, keep_branch: bool) -> Result<ResetOutcome, AdminError>;
    /// Cancels every unfinished task; the number cancelled. `by` as for a budget.
    async fn cancel(&self, plan: &str, by: &str) -> Result<usize, AdminError>;
    /// Gives a failed, cancelled or skipped task new attempts; its status now. `by` as for
    /// a budget.
    async fn retry(&self, plan: &str, task: &str, by: &str) -> Result<TaskStatus, AdminError>;
    /// Pushes the plan's integration branch to `remote` of its repository (never forced).
    async fn push(&self, plan: &str, remote: &str) -> Result<Pushed, AdminError>;
    /// The registered workers' names, for a dashboard to name lease holders by (none here:
    /// only a control plane registers workers).
    async fn worker_names(&self) -> Result<WorkerNames, AdminError> {
        Ok(WorkerNames::default())
    }
}

/// Every event of the plan, oldest first, page by page.
pub async fn all_events(admin: &dyn PlanAdmin, plan: &str) -> Result<Vec<PlanEvent>, AdminError> {
    let mut all: Vec<PlanEvent> = Vec::new();
    loop {
        let after = all.last().map(|e| e.id).unwrap_or(0);
        let page = admin.events(plan, after, EVENTS_PAGE).await?;
        let last_page = page.len() < EVENTS_PAGE as usize;
        // A page that does not move forward would never end.
        if page.first().is_some_and(|e| e.id <= after) {
            return Err(AdminError::Environment(format!(
                "the events of plan {plan} did not come in order (event {} after {after})",
                page[0].id
            )));
        }
        all.extend(page);
        if last_page {
            return Ok(all);
        }
    }
}

/// `path` without `.` and with each `..` taking away the component before it, as text: a
/// path made absolute by joining, for a machine where it may not exist (so it cannot be
/// resolved there).
pub fn normalize_lexically(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => match out.components().next_back() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                // Above the root is the root.
                Some(Component::RootDir | Component::Prefix(_)) => {}
                _ => out.push(c),
            },
            other => out.push(other),
        }
    }
    out
}

/// Plan administration over a store and the plans' repositories on this machine.
pub struct LocalPlanAdmin {
    plans: Arc<dyn UnitQueue>,
    repositories: Arc<dyn PlanRepositories>,
    clock: Arc<dyn Clock>,
}

impl LocalPlanAdmin {
    pub fn new(plans: Arc<dyn UnitQueue>, repositories: Arc<dyn PlanRepositories>) -> Self {
        LocalPlanAdmin { plans, repositories, clock: Arc::new(crate::SystemClock) }
    }

    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    async fn plan_view(&self, plan: &str) -> Result<PlanView, AdminError> {
        self.plans.plan(plan).await?.ok_or_else(|| AdminError::no_plan(plan))
    }

    /// The repository the plan's tasks run in.
    async fn git_for(&self, header: &PlanSpec) -> Result<Git, AdminError> {
        let workspace = self.repositories.workspace_for(header).await?;
        Ok(Git::new(workspace.repo_root().to_path_buf()))
    }

    /// Whether the plan may use its integration branch, checked before an import writes
    /// anything; the record an `--adopt-branch` makes. A plan with other problems is left to
    /// the store's check, which names them all.
    async fn check_branch(
        &self,
        spec: &PlanSpec,
        mode: ImportMode,
        adopt: Option<&str>,
    ) -> Result<Option<BranchRecord>, AdminError> {
        if !arbiter_core::plan::check::check(spec, &[]).is_empty() {
            return Ok(None);
        }
        let stored = self.plans.plan(&spec.id).await?;
        if mode == ImportMode::New && stored.is_some() {
            return Err(StoreError::PlanExists { id: spec.id.clone() }.into());
        }
        // A re-import without --update keeps the stored header, its branch included.
        let header = match (&stored, mode) {
            (Some(v), ImportMode::Add) => v.plan.header.clone(),
            _ => spec.header(),
        };
        let git = self.git_for(&header).await?;
        let record = stored.as_ref().and_then(|v| v.plan.branch.as_ref());
        Ok(plan_branch::check_import(&git, &spec.id, &header.integration_branch, record, adopt, self.now()).await?)
    }
}

#[async_trait::async_trait]
impl PlanAdmin for LocalPlanAdmin {
    async fn import(&self, import: &PlanImport) -> Result<Imported, AdminError> {
        let spec = &import.spec;
        let verdicts: Vec<GateResult> = match import.apply {
            Some(_) => spec.tasks.iter().map(|t| import.gate.evaluate(t, &spec.defaults)).collect(),
            None => Vec::new(),
        };
        let skip: Vec<(String, String)> = if import.apply == Some(true) {
            verdicts
                .iter()
                .filter(|v| v.verdict == Verdict::Reject)
                .map(|v| (v.task.clone(), format!("the decision gate rejected it: {}", v.reason)))
                .collect()
        } else {
            Vec::new()
        };
        let adopted = self.check_branch(spec, import.mode, import.adopt_branch.as_deref()).await?;
        let report = self
            .plans
            .import_plan(Import {
                spec,
                mode: import.mode,
                skip: &skip,
                verdicts: &verdicts,
                apply: import.apply,
                branch: adopted.as_ref(),
                now: self.now(),
            })
            .await?;
        // The gate judged the tasks this import added or changed; the others were there already.
        let judged: BTreeSet<&String> = report.added.iter().chain(&report.updated).collect();
        let verdicts = verdicts.into_iter().filter(|v| judged.contains(&v.task)).collect();
        Ok(Imported { report, adopted_branch: adopted, verdicts })
    }

    async fn view(&self, plan: &str) -> Result<PlanDetails, AdminError> {
        let view = self.plan_view(plan).await?;
        let attempts = self.plans.attempts(plan).await?;
        let call_costs = match self.repositories.workspace_for(&view.plan.header).await {
            Ok(workspace) => call_costs(&workspace.runs_dir(), &attempts).await,
            // A repository that is gone has no runs to read: its costs stay as known.
            Err(_) => BTreeMap::new(),
        };
        Ok(PlanDetails { view, attempts, call_costs })
    }

    async fn list(&self) -> Result<Vec<PlanSummary>, AdminError> {
        Ok(self.plans.plans().await?)
    }

    async fn events(&self, plan: &str, after: i64, limit: u32) -> Result<Vec<PlanEvent>, AdminError> {
        if self.plans.plan(plan).await?.is_none() {
            return Err(AdminError::no_plan(plan));
        }
        Ok(self.plans.events_after(plan, after.max(0), limit.clamp(1, EVENTS_PAGE)).await?)
    }

    async fn create(&self, plan: &NewPlan) -> Result<(), AdminError> {
        let header = plan.checked_header()?;
        let id = &plan.id;
        // Its branch (arbiter/<id>) must be free for arbiter to create, as at an import; an
        // existing plan keeps what it has (and is refused just below).
        if self.plans.plan(id).await?.is_none() {
            let git = self.git_for(&header).await?;
            plan_branch::check_import(&git, id, &header.integration_branch, None, None, self.now()).await.map_err(
                |e| match e {
                    e @ (BranchError::Exists { .. } | BranchError::Default { .. }) => AdminError::Conflict(format!(
                        "{e} (`plan create` has no --adopt-branch: create the plan with `arbiter plan import FILE --adopt-branch {}`)",
                        header.integration_branch
                    )),
                    e => e.into(),
                },
            )?;
        }
        if self.plans.create_plan(&header, self.now()).await? {
            Ok(())
        } else {
            Err(AdminError::Conflict(format!(
                "plan {id} exists already; `arbiter plan budget {id} USD` changes its budget, `arbiter plan import FILE --update` its tasks"
            )))
        }
    }

    async fn set_budget(&self, plan: &str, limit: Option<Usd>, by: &str) -> Result<Budget, AdminError> {
        if let Some(l) = limit.filter(|l| *l < Usd::ZERO) {
            return Err(AdminError::Invalid(format!("a budget cannot be negative ({l})")));
        }
        Ok(self.plans.set_budget(plan, limit, by, self.now()).await?)
    }

    async fn reset_preview(&self, plan: &str, keep_branch: bool) -> Result<ResetPreview, AdminError> {
        let view = self.plan_view(plan).await?;
        let git = self.git_for(&view.plan.header).await?;
        let branch = plan_branch::plan_reset(&git, &view.plan, keep_branch).await?;
        Ok(ResetPreview { tasks: view.tasks.len(), branch })
    }

    async fn reset(&self, plan: &str, hard: bool, keep_branch: bool) -> Result<ResetOutcome, AdminError> {
        let view = self.plan_view(plan).await?;
        let git = self.git_for(&view.plan.header).await?;
        // What happens to the branch is decided before anything changes: a branch the plan
        // does not own (or a checked-out one) refuses the whole reset.
        let branch = plan_branch::plan_reset(&git, &view.plan, keep_branch).await?;
        let now = self.now();
        let n = self.plans.reset_plan(plan, hard, Some(&branch), now).await?;
        let moving = match (&branch.old_tip, &branch.new_tip) {
            (Some(old), Some(new)) => Some((old.as_str(), new.as_str())),
            _ => None,
        };
        if let Err(e) = integration::reset_refs(&git, plan, &branch.name, moving).await {
            let _ = self
                .plans
                .note_event(plan, PlanEntry::BranchResetFailed { branch: branch.clone(), error: e.to_string() }, now)
                .await;
            return Err(AdminError::Environment(format!(
                "reset {n} task(s) of plan {plan}, but moving {} back (and forgetting its tasks' commits) failed: {e}; the branch is where it was. Run `arbiter plan reset {plan} --yes` again",
                branch.name
            )));
        }
        Ok(ResetOutcome { reset: n, branch })
    }

    async fn cancel(&self, plan: &str, by: &str) -> Result<usize, AdminError> {
        Ok(self.plans.cancel_plan(plan, by, self.now()).await?)
    }

    async fn retry(&self, plan: &str, task: &str, by: &str) -> Result<TaskStatus, AdminError> {
        Ok(self.plans.retry_task(plan, task, by, self.now()).await?)
    }

    async fn push(&self, plan: &str, remote: &str) -> Result<Pushed, AdminError> {
        let record = self.plans.plan_record(plan).await?.ok_or_else(|| AdminError::no_plan(plan))?;
        let header = &record.header;
        let git = self.git_for(header).await?;
        let pushed = plan_push::push_branch(&git, plan, &header.integration_branch, remote).await?;
        let entry = PlanEntry::BranchPushed { task: None, by: Some("plan push".to_string()), pushed: pushed.clone() };
        self.plans.note_event(plan, entry, self.now()).await?;
        Ok(pushed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_normalize_without_the_filesystem() {
        assert_eq!(normalize_lexically(Path::new("/a/b/../c/./d")), PathBuf::from("/a/c/d"));
        assert_eq!(normalize_lexically(Path::new("/a/../../etc")), PathBuf::from("/etc"));
        assert_eq!(normalize_lexically(Path::new("a/../../b")), PathBuf::from("../b"));
        assert_eq!(normalize_lexically(Path::new("../../x")), PathBuf::from("../../x"));
    }

    #[test]
    fn errors_say_whose_they_are() {
        assert!(AdminError::no_plan("x").is_usage());
        assert!(AdminError::no_plan("x").to_string().starts_with("no plan named 'x'; `arbiter plan list`"));
        assert!(!AdminError::from(StoreError::Random("r".into())).is_usage());
        assert!(matches!(
            AdminError::from(StoreError::LeasesHeld { plan: "p".into(), tasks: vec![] }),
            AdminError::Conflict(_)
        ));
        assert!(matches!(AdminError::from(CoordinatorError::Refused("no".into())), AdminError::Invalid(_)));
    }

    fn attempt(task: &str, run: &str) -> AttemptRecord {
        AttemptRecord {
            task_id: task.into(),
            attempt: 1,
            fence: 1,
            worker: "w".into(),
            status: arbiter_core::plan::state::AttemptStatus::Succeeded,
            started_at: Timestamp(0),
            finished_at: None,
            reserved: Usd::ZERO,
            cost: Usd::ZERO,
            run_id: Some(run.into()),
            commit: None,
            reason: None,
        }
    }

    /// Each task's calls of unknown cost come from its runs' summaries, each run once; a
    /// run id a hostile worker reported (`../elsewhere`) names no file.
    #[test]
    fn call_costs_are_read_from_the_tasks_runs_and_only_theirs() {
        let dir = tempfile::tempdir().unwrap();
        let runs = dir.path().join("runs");
        let summary = |uncosted: u64| {
            let mut s = arbiter_core::cost::summarize(Vec::new());
            s.total.uncosted_calls = uncosted;
            s.total.calls = uncosted + 1;
            serde_json::to_vec(&s).unwrap()
        };
        let (one, two) = ("20261202T040000Z-000001", "20261202T040100Z-000002");
        for (id, calls) in [(one, 2), (two, 3)] {
            std::fs::create_dir_all(runs.join(id)).unwrap();
            std::fs::write(runs.join(id).join(arbiter_core::artifact::paths::COST), summary(calls)).unwrap();
        }
        std::fs::create_dir_all(dir.path().join("elsewhere")).unwrap();
        std::fs::write(dir.path().join("elsewhere").join(arbiter_core::artifact::paths::COST), summary(99)).unwrap();
        let attempts = [attempt("A", one), attempt("A", one), attempt("B", two), attempt("C", "../elsewhere")];
        let got = tokio::runtime::Runtime::new().unwrap().block_on(call_costs(&runs, &attempts));
        let costs = |calls, uncosted| CallCosts { calls, uncosted };
        assert_eq!(got, BTreeMap::from([("A".to_string(), costs(3, 2)), ("B".to_string(), costs(4, 3))]));
        assert!(!got["A"].all_unknown() && costs(2, 2).all_unknown() && !costs(0, 0).all_unknown());
    }
}
