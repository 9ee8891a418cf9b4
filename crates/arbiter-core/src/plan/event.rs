//! The plan event vocabulary: every change of a plan, of one of its tasks or of a unit of
//! work a worker holds is one typed entry, written in the store's `plan_events` log in the
//! same transaction as the change, read back by `plan events`, the server's event stream
//! and the dashboards.
//!
//! Three families, each one serde-tagged enum whose tag is the stored `kind` and whose
//! content is the stored `data` object (the field names are the log's, unchanged):
//! [`PlanEntry`] (the plan: imports, budget, integration branch), [`TaskEntry`] (a task's
//! life: created, claimed, ready, done, failed, reset) and [`UnitEntry`] (the candidate
//! attempts and evaluation jobs workers claim). [`PlanLogEntry`] is any of them.

use serde::{Deserialize, Serialize};

use super::gate::Verdict;
use super::settings::RunOverrides;
use super::spec::Priority;
use super::state::{TaskStatus, UnitKind};
use super::worker_names::WorkerNames;
use crate::money::Usd;

/// A plan-level event.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(tag = "kind", content = "data", rename_all = "snake_case")]
pub enum PlanEntry {
    /// The plan's first import.
    PlanCreated { name: String, budget: Option<Usd>, tasks: usize },
    /// An import (`plan import`) of the plan's file, new or again.
    PlanImported(ImportCounts),
    /// An import through the decision gate (`plan apply`).
    PlanApplied(ImportCounts),
    /// `plan cancel`: the tasks it cancelled.
    PlanCancelled {
        tasks: Vec<String>,
        /// Who did it (`admin`, `token:NAME`, `cli:USER`), when the change was asked for by
        /// someone (not by an import's own budget).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<String>,
    },
    /// `plan reset`, and what happened to the integration branch.
    PlanReset { hard: bool, tasks: usize, branch: Option<BranchReset> },
    /// Money an attempt or a unit spent (the row names its task).
    CostCharged { amount: Usd, spent: Usd },
    /// The budget was reached (once): by a charge, or by a lowered limit.
    BudgetExceeded {
        limit: Option<Usd>,
        spent: Usd,
        crossing_task: Option<String>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        lowered: bool,
    },
    /// `plan budget`: the limit changed.
    BudgetChanged {
        from: Option<Usd>,
        to: Option<Usd>,
        spent: Usd,
        /// Who did it (`admin`, `token:NAME`, `cli:USER`), when the change was asked for by
        /// someone (not by an import's own budget).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<String>,
    },
    /// arbiter created the plan's integration branch.
    IntegrationBranchCreated(BranchRecorded),
    /// The user handed an existing branch over (`--adopt-branch`).
    IntegrationBranchAdopted(BranchRecorded),
    /// The integration branch reached the remote (after a task, or by `plan push`).
    BranchPushed {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<String>,
        pushed: Pushed,
    },
    /// A push after a task failed; the plan goes on.
    BranchPushFailed { task: String, branch: String, remote: String, reason: String },
    /// `plan run` was given run flags over the plan's defaults (`--command` masked).
    RunOverrides { overrides: RunOverrides },
    /// The store was reset but moving the branch back failed.
    BranchResetFailed { branch: BranchReset, error: String },
    /// The plan was drafted by the `planning` role (`arbiter plan new`, `arbiter intake`):
    /// from what, into which PRD, and what the calls cost.
    PlanDrafted(Drafted),
    /// A failed attempt of `task` was analysed (role `analysis`): `analysis.md` in its run.
    FailureAnalyzed { task: String, run_id: String, backend: String, cost: Option<Usd>, contradiction: String },
    /// A failed attempt of `task` was not analysed, and why (the analysis fails open).
    AnalysisSkipped { task: String, run_id: String, reason: String },
    /// The prompt of `task`'s attempt `attempt` carries the analysis of run `from_run`: the
    /// one piece of feedback that crosses attempts.
    AnalysisFed { task: String, attempt: u32, from_run: String },
    /// A pull (merge) request carries the plan's integration branch (or the push and the page
    /// that opens one by hand, without the forge's CLI).
    ChangeOpened(ChangeRecord),
    /// What a finished plan does (its pull request, its issue) went wrong; the plan's work
    /// stands.
    CompletionFailed { reason: String },
    /// The issue the plan came from was told where it is (labels, a comment).
    IssueUpdated {
        url: String,
        stage: String,
        comment: Option<String>,
        /// The pull request the comment links, when there is one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        change: Option<String>,
    },
}

/// How a plan was drafted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct Drafted {
    /// `idea` (`plan new`) or the issue's URL.
    pub from: String,
    pub prd: String,
    /// The `planning` calls made, what they cost (known), and how many had no known cost.
    pub calls: usize,
    pub cost: Usd,
    pub uncosted_calls: usize,
    /// Whether the model's plan needed the repair round.
    pub repaired: bool,
    /// What was left out of the model's plan (fields it may not set, verify commands not
    /// grounded in the repository's tests).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<String>,
}

/// A pull request of a plan's (or a run's) branch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct ChangeRecord {
    pub branch: String,
    pub base: String,
    /// The pull request's page; `None` when only pushed.
    pub url: Option<String>,
    /// Where to open it by hand, when it was only pushed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compare_url: Option<String>,
    /// It was open already.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub existed: bool,
}

/// How many tasks an import added, changed, left and skipped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct ImportCounts {
    pub added: usize,
    pub updated: usize,
    pub unchanged: usize,
    pub skipped: usize,
    /// `plan apply`: whether `--strict` skipped the rejected tasks.
    pub strict: Option<bool>,
}

/// The integration branch a plan commits onto, as recorded, and the record it replaced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct BranchRecorded {
    pub branch: String,
    /// `created` or `adopted`.
    pub origin: String,
    pub base: String,
    pub previous: Option<BranchPrevious>,
}

/// The integration branch record a new one replaced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct BranchPrevious {
    pub branch: String,
    pub origin: String,
    pub base: String,
}

/// What a reset did to the integration branch, recorded in its `plan_reset` event.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct BranchReset {
    pub name: String,
    /// Where the branch was before the reset (`None`: it did not exist).
    pub old_tip: Option<String>,
    /// Where the reset points it (`None`: it was not moved).
    pub new_tip: Option<String>,
    /// Why it was not moved, when it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<String>,
}

/// A push that went through.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct Pushed {
    pub remote: String,
    /// The remote's URL, without credentials.
    pub url: String,
    pub branch: String,
    /// The commit the remote's branch now points at.
    pub commit: String,
    /// The remote had it already.
    pub up_to_date: bool,
}

/// A task-level event (the row names the task, and the attempt where there is one).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(tag = "kind", content = "data", rename_all = "snake_case")]
pub enum TaskEntry {
    /// An import added the task.
    TaskCreated { status: TaskStatus, priority: Priority, dependencies: Vec<String> },
    /// A re-import (`--update`) changed a task that had not started.
    TaskUpdated { status: TaskStatus, dependencies: Vec<String> },
    /// `plan apply --strict` skipped a task the gate rejected.
    TaskSkipped { reason: String },
    /// The decision gate's verdict on the task.
    GateVerdict { verdict: Verdict, missing: Vec<String>, reason: String },
    /// A worker claimed the task: its lease and its reservation.
    TaskClaimed { worker: String, fence: i64, lease_expires: i64, reserved: Usd },
    /// Its last dependency is done.
    TaskReady { after: String },
    /// Its winner is on the integration branch.
    TaskDone(AttemptEnded),
    /// Its worker gave it back without counting the attempt (Ctrl-C, SIGTERM).
    TaskReleased(AttemptEnded),
    /// Its lease expired; it runs again after the backoff.
    LeaseExpiredRetry(AttemptEnded),
    /// Its lease expired with no attempts left.
    LeaseExpiredFailed(AttemptEnded),
    /// The attempt failed; it runs again after the backoff.
    AttemptFailedRetry(AttemptEnded),
    /// The attempt failed with no attempts left.
    TaskFailed(AttemptEnded),
    /// A report whose fencing token was stale: refused, its cost kept.
    StaleReportRefused { fence: i64, worker: String, cost: Usd },
    /// `plan cancel`.
    TaskCancelled {},
    /// `plan retry`: from where it went back to where.
    TaskRetried {
        from: TaskStatus,
        status: TaskStatus,
        /// Who did it (`admin`, `token:NAME`, `cli:USER`), when the change was asked for by
        /// someone (not by an import's own budget).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<String>,
    },
    /// `plan reset`.
    TaskReset { hard: bool },
}

/// How an attempt ended and where its task went.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct AttemptEnded {
    pub fence: i64,
    pub status: TaskStatus,
    pub reason: Option<String>,
    pub run_id: Option<String>,
    pub commit: Option<String>,
    pub cost: Usd,
    /// When it may be claimed again (µs since the epoch), when it went back to ready.
    pub not_before: Option<i64>,
}

/// A unit of work (a candidate attempt or a task's evaluation job) changed hands.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(tag = "kind", content = "data", rename_all = "snake_case")]
pub enum UnitEntry {
    /// The task's tournament was split into units.
    UnitsStarted { fence: i64, run_id: String, base: String, units: Vec<String> },
    /// A worker claimed a unit.
    UnitClaimed { unit: String, kind: UnitKind, fence: i64, worker: String, lease_expires: i64 },
    /// Its candidates finished: the task's evaluation can be claimed.
    EvaluationReady { fence: i64 },
    /// A unit's worker reported it done.
    UnitDone { unit: String, fence: i64, worker: String, cost: Usd },
    /// A unit went back to the queue without counting (its worker stopped).
    UnitReleased(UnitLost),
    /// A unit's lease expired; another worker takes it.
    UnitExpired(UnitLost),
    /// A unit was lost too many times and is recorded as lost.
    UnitGivenUp(UnitLost),
    /// A unit report whose lease was no longer held: refused, its cost kept.
    StaleUnitReportRefused { unit: String, fence: i64, worker: String, cost: Usd },
}

/// A unit its worker no longer holds, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct UnitLost {
    pub unit: String,
    pub fence: i64,
    pub worker: String,
    pub reason: String,
    /// How many times it was lost so far (on an expiry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tries: Option<u32>,
}

/// Any entry of a plan's event log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(untagged)]
pub enum PlanLogEntry {
    Plan(PlanEntry),
    Task(TaskEntry),
    Unit(UnitEntry),
}

impl From<PlanEntry> for PlanLogEntry {
    fn from(e: PlanEntry) -> Self {
        Self::Plan(e)
    }
}

impl From<TaskEntry> for PlanLogEntry {
    fn from(e: TaskEntry) -> Self {
        Self::Task(e)
    }
}

impl From<UnitEntry> for PlanLogEntry {
    fn from(e: UnitEntry) -> Self {
        Self::Unit(e)
    }
}

impl PlanLogEntry {
    /// The stored `kind` and `data` of the entry.
    pub fn to_parts(&self) -> (String, serde_json::Value) {
        let mut tagged = serde_json::to_value(self).unwrap_or_default();
        let kind = tagged.get("kind").and_then(|k| k.as_str()).unwrap_or_default().to_string();
        let data = tagged.get_mut("data").map(serde_json::Value::take).unwrap_or_else(|| serde_json::json!({}));
        (kind, data)
    }

    /// The entry a stored `kind` and `data` are, when they read as one (an event written by
    /// a newer arbiter may not).
    pub fn from_parts(kind: &str, data: &serde_json::Value) -> Option<Self> {
        serde_json::from_value(serde_json::json!({"kind": kind, "data": data})).ok()
    }

    /// One line for people: what happened, without the kind (printed beside it).
    pub fn describe(&self) -> String {
        match self {
            Self::Plan(e) => describe_plan(e),
            Self::Task(e) => describe_task(e),
            Self::Unit(e) => describe_unit(e),
        }
    }

    /// [`Self::describe`] with the worker the entry names (a lease's `<worker id>:<slot>`)
    /// by the name people gave it.
    pub fn describe_naming(&self, names: &WorkerNames) -> String {
        let mut named = self.clone();
        if let Some(worker) = named.worker_mut() {
            *worker = names.label(worker);
        }
        named.describe()
    }

    /// The worker the entry names, when it names one.
    fn worker_mut(&mut self) -> Option<&mut String> {
        match self {
            Self::Plan(_) => None,
            Self::Task(TaskEntry::TaskClaimed { worker, .. } | TaskEntry::StaleReportRefused { worker, .. }) => {
                Some(worker)
            }
            Self::Task(_) => None,
            Self::Unit(
                UnitEntry::UnitClaimed { worker, .. }
                | UnitEntry::UnitDone { worker, .. }
                | UnitEntry::StaleUnitReportRefused { worker, .. }
                | UnitEntry::UnitReleased(UnitLost { worker, .. })
                | UnitEntry::UnitExpired(UnitLost { worker, .. })
                | UnitEntry::UnitGivenUp(UnitLost { worker, .. }),
            ) => Some(worker),
            Self::Unit(UnitEntry::UnitsStarted { .. } | UnitEntry::EvaluationReady { .. }) => None,
        }
    }
}

fn limit_text(limit: Option<Usd>) -> String {
    limit.map_or_else(|| "no limit".to_string(), |l| l.to_string())
}

fn describe_plan(e: &PlanEntry) -> String {
    match e {
        PlanEntry::PlanCreated { name, budget, tasks } => {
            format!("\"{name}\": {tasks} task(s), budget {}", limit_text(*budget))
        }
        PlanEntry::PlanImported(c) | PlanEntry::PlanApplied(c) => format!(
            "{} added, {} updated, {} unchanged, {} skipped{}",
            c.added,
            c.updated,
            c.unchanged,
            c.skipped,
            if c.strict == Some(true) { " (strict)" } else { "" }
        ),
        PlanEntry::PlanCancelled { tasks, by } => format!("{} task(s) cancelled{}", tasks.len(), by_whom(by)),
        PlanEntry::PlanReset { hard, tasks, branch } => {
            let how = if *hard { "hard reset" } else { "reset" };
            let branch = match branch {
                Some(b) if b.new_tip.is_some() => format!("; {} moved back", b.name),
                Some(b) => {
                    format!("; {} kept{}", b.name, b.kept.as_deref().map(|k| format!(" ({k})")).unwrap_or_default())
                }
                None => String::new(),
            };
            format!("{how} of {tasks} task(s){branch}")
        }
        PlanEntry::CostCharged { amount, spent } => format!("{amount} charged, {spent} spent"),
        PlanEntry::BudgetExceeded { limit, spent, crossing_task, lowered } => {
            let by = match (crossing_task, lowered) {
                (Some(t), _) => format!(" by {t}"),
                (None, true) => " by lowering the limit".to_string(),
                (None, false) => String::new(),
            };
            format!("{spent} spent reached the budget of {}{by}", limit_text(*limit))
        }
        PlanEntry::BudgetChanged { from, to, spent, by } => {
            format!("budget {} → {} ({spent} spent){}", limit_text(*from), limit_text(*to), by_whom(by))
        }
        PlanEntry::IntegrationBranchCreated(b) | PlanEntry::IntegrationBranchAdopted(b) => {
            let previous =
                b.previous.as_ref().map(|p| format!(" (was {}, {})", p.branch, p.origin)).unwrap_or_default();
            format!("{} at {}{previous}", b.branch, short(&b.base))
        }
        PlanEntry::BranchPushed { pushed, .. } => format!(
            "{} → {} {}{}",
            pushed.branch,
            pushed.remote,
            short(&pushed.commit),
            if pushed.up_to_date { " (up to date)" } else { "" }
        ),
        PlanEntry::BranchPushFailed { branch, remote, reason, .. } => format!("{branch} → {remote}: {reason}"),
        PlanEntry::RunOverrides { overrides } => serde_json::to_string(overrides).unwrap_or_default(),
        PlanEntry::BranchResetFailed { branch, error } => format!("{}: {error}", branch.name),
        PlanEntry::PlanDrafted(d) => format!(
            "from {}: {}, {} planning call(s), {}{}{}",
            d.from,
            d.prd,
            d.calls,
            d.cost,
            if d.uncosted_calls > 0 { format!(" plus {} of unknown cost", d.uncosted_calls) } else { String::new() },
            if d.repaired { ", repaired once" } else { "" }
        ),
        PlanEntry::FailureAnalyzed { task, run_id, backend, cost, contradiction } => format!(
            "{task}, run {run_id}, by {backend} ({}){}",
            cost.map_or_else(|| "cost unknown".to_string(), |c| c.to_string()),
            if contradiction.is_empty() { String::new() } else { format!(": {contradiction}") }
        ),
        PlanEntry::AnalysisSkipped { task, run_id, reason } => format!("{task}, run {run_id}: {reason}"),
        PlanEntry::AnalysisFed { task, attempt, from_run } => {
            format!("{task} attempt {attempt} carries the analysis of run {from_run}")
        }
        PlanEntry::ChangeOpened(c) => match (&c.url, &c.compare_url) {
            (Some(url), _) => {
                format!("{} → {}: {url}{}", c.branch, c.base, if c.existed { " (open already)" } else { "" })
            }
            (None, Some(compare)) => format!("{} → {}: pushed; open it at {compare}", c.branch, c.base),
            (None, None) => format!("{} → {}", c.branch, c.base),
        },
        PlanEntry::CompletionFailed { reason } => reason.clone(),
        PlanEntry::IssueUpdated { url, stage, comment, .. } => {
            format!("{url}: {stage}{}", comment.as_deref().map(|c| format!(", comment {c}")).unwrap_or_default())
        }
    }
}

/// ` by WHO` when someone is named.
fn by_whom(by: &Option<String>) -> String {
    by.as_deref().map(|b| format!(" by {b}")).unwrap_or_default()
}

fn describe_task(e: &TaskEntry) -> String {
    match e {
        TaskEntry::TaskCreated { status, priority, dependencies } => {
            format!("{}, {}{}", status.as_str(), priority.as_str(), after(dependencies))
        }
        TaskEntry::TaskUpdated { status, dependencies } => format!("{}{}", status.as_str(), after(dependencies)),
        TaskEntry::TaskSkipped { reason } => reason.clone(),
        TaskEntry::GateVerdict { verdict, reason, .. } => format!("{}: {reason}", verdict.as_str()),
        TaskEntry::TaskClaimed { worker, fence, .. } => format!("by {worker} (fence {fence})"),
        TaskEntry::TaskReady { after } => format!("after {after}"),
        TaskEntry::TaskDone(a)
        | TaskEntry::TaskReleased(a)
        | TaskEntry::LeaseExpiredRetry(a)
        | TaskEntry::LeaseExpiredFailed(a)
        | TaskEntry::AttemptFailedRetry(a)
        | TaskEntry::TaskFailed(a) => {
            let mut text = format!("{} (fence {}{})", a.status.as_str(), a.fence, charged(a.cost));
            if let Some(c) = &a.commit {
                text.push_str(&format!(", commit {}", short(c)));
            }
            if let Some(r) = &a.reason {
                text.push_str(&format!(": {r}"));
            }
            text
        }
        TaskEntry::StaleReportRefused { fence, worker, cost } => {
            format!("from {worker} (fence {fence}); its {cost} is kept")
        }
        TaskEntry::TaskCancelled {} => "cancelled".to_string(),
        TaskEntry::TaskRetried { from, status, by } => {
            format!("{} → {}{}", from.as_str(), status.as_str(), by_whom(by))
        }
        TaskEntry::TaskReset { hard } => if *hard { "hard" } else { "soft" }.to_string(),
    }
}

fn describe_unit(e: &UnitEntry) -> String {
    match e {
        UnitEntry::UnitsStarted { units, run_id, .. } => format!("run {run_id}: {}", units.join(", ")),
        UnitEntry::UnitClaimed { unit, kind, worker, fence, .. } if unit == kind.as_str() => {
            format!("{unit} by {worker} (fence {fence})")
        }
        UnitEntry::UnitClaimed { unit, kind, worker, fence, .. } => {
            format!("{unit} ({}) by {worker} (fence {fence})", kind.as_str())
        }
        UnitEntry::EvaluationReady { fence } => format!("fence {fence}"),
        UnitEntry::UnitDone { unit, worker, cost, .. } => {
            format!(
                "{unit} by {worker}{}",
                if *cost == Usd::ZERO { String::new() } else { format!(" ({cost} charged)") }
            )
        }
        UnitEntry::UnitReleased(l) | UnitEntry::UnitExpired(l) | UnitEntry::UnitGivenUp(l) => {
            format!("{} from {}: {}", l.unit, l.worker, l.reason)
        }
        UnitEntry::StaleUnitReportRefused { unit, fence, worker, cost } => {
            format!("{unit} from {worker} (fence {fence}); its {cost} is kept")
        }
    }
}

/// ", $0.12 charged" for a cost, nothing for none (which may be a cost unknown: a report
/// carries only what could be charged).
fn charged(cost: Usd) -> String {
    if cost == Usd::ZERO { String::new() } else { format!(", {cost} charged") }
}

fn after(dependencies: &[String]) -> String {
    if dependencies.is_empty() { String::new() } else { format!(", after {}", dependencies.join(", ")) }
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_entry_is_its_stored_kind_and_data_with_the_logs_field_names() {
        let e: PlanLogEntry =
            TaskEntry::TaskClaimed { worker: "w1".into(), fence: 3, lease_expires: 9, reserved: Usd::ZERO }.into();
        let (kind, data) = e.to_parts();
        assert_eq!(kind, "task_claimed");
        assert_eq!(data, json!({"worker": "w1", "fence": 3, "lease_expires": 9, "reserved": "0"}));
        assert_eq!(PlanLogEntry::from_parts(&kind, &data), Some(e));
        let cancelled: PlanLogEntry = TaskEntry::TaskCancelled {}.into();
        assert_eq!(cancelled.to_parts(), ("task_cancelled".to_string(), json!({})));
    }

    /// Events as an earlier arbiter wrote them (the SQL fast paths build some of them in
    /// SQL) read as their entries.
    #[test]
    fn events_written_before_the_types_read_back() {
        let cases = [
            ("task_ready", json!({"after": "A"})),
            ("task_claimed", json!({"worker": "w", "fence": 1, "lease_expires": 5, "reserved": "0"})),
            (
                "task_done",
                json!({"fence": 1, "status": "done", "reason": null, "run_id": "r", "commit": "abc", "cost": "0.01", "not_before": null}),
            ),
            ("budget_exceeded", json!({"limit": "1", "spent": "1.5", "crossing_task": "A"})),
            ("budget_exceeded", json!({"limit": "1", "spent": "1.5", "crossing_task": null, "lowered": true})),
            ("plan_imported", json!({"added": 2, "updated": 0, "unchanged": 0, "skipped": 0, "strict": null})),
            ("unit_released", json!({"unit": "c01", "fence": 2, "worker": "w", "reason": "stopped"})),
            ("unit_expired", json!({"unit": "c01", "fence": 2, "worker": "w", "reason": "lease", "tries": 1})),
            ("task_cancelled", json!({})),
            ("gate_verdict", json!({"verdict": "WARN", "missing": ["test_steps"], "reason": "no tests"})),
        ];
        for (kind, data) in cases {
            let entry = PlanLogEntry::from_parts(kind, &data).unwrap_or_else(|| panic!("{kind} {data} does not read"));
            assert_eq!(entry.to_parts(), (kind.to_string(), data), "{kind} does not write back the same");
        }
        assert_eq!(PlanLogEntry::from_parts("from_the_future", &json!({})), None);
        assert_eq!(PlanLogEntry::from_parts("task_ready", &json!({"after": 3})), None);
    }

    #[test]
    fn each_entry_describes_itself_for_people() {
        let done = PlanLogEntry::from(TaskEntry::TaskDone(AttemptEnded {
            fence: 2,
            status: TaskStatus::Done,
            reason: None,
            run_id: Some("r".into()),
            commit: Some("0123456789abcdef".into()),
            cost: Usd::ZERO,
            not_before: None,
        }));
        assert_eq!(done.describe(), "done (fence 2), commit 0123456789ab");
        let exceeded = PlanLogEntry::from(PlanEntry::BudgetExceeded {
            limit: None,
            spent: Usd::ZERO,
            crossing_task: None,
            lowered: true,
        });
        assert_eq!(exceeded.describe(), "$0.00 spent reached the budget of no limit by lowering the limit");
    }

    #[test]
    fn a_description_can_name_the_worker_as_people_know_it() {
        let label = &WorkerNames::new([("w-0123".to_string(), "gpu-box-1".to_string())]);
        let claimed = PlanLogEntry::from(TaskEntry::TaskClaimed {
            worker: "w-0123:2".into(),
            fence: 3,
            lease_expires: 9,
            reserved: Usd::ZERO,
        });
        assert_eq!(claimed.describe(), "by w-0123:2 (fence 3)");
        assert_eq!(claimed.describe_naming(label), "by gpu-box-1:2 (fence 3)");
        let lost =
            UnitLost { unit: "c01".into(), fence: 2, worker: "w-0123:1".into(), reason: "stopped".into(), tries: None };
        for entry in
            [UnitEntry::UnitReleased(lost.clone()), UnitEntry::UnitExpired(lost.clone()), UnitEntry::UnitGivenUp(lost)]
        {
            assert_eq!(PlanLogEntry::from(entry).describe_naming(label), "c01 from gpu-box-1:1: stopped");
        }
        let done = UnitEntry::UnitDone { unit: "c02".into(), fence: 2, worker: "w-0123:1".into(), cost: Usd::ZERO };
        assert_eq!(PlanLogEntry::from(done).describe_naming(label), "c02 by gpu-box-1:1");
        let stale = TaskEntry::StaleReportRefused { fence: 1, worker: "w-0123:1".into(), cost: Usd::ZERO };
        assert_eq!(PlanLogEntry::from(stale).describe_naming(label), "from gpu-box-1:1 (fence 1); its $0.00 is kept");
        // An entry that names no worker reads as it does.
        let ready = PlanLogEntry::from(TaskEntry::TaskReady { after: "w-0123".into() });
        assert_eq!(ready.describe_naming(label), "after w-0123");
    }
}
