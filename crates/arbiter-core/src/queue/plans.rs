//! The plan queue: plans, their tasks and dependencies, leased attempts, budgets and an
//! append-only event log, behind the [`PlanStore`] port, on SQLite and Postgres alike.
//!
//! - Readiness is kept, not recomputed: each task counts its unmet dependencies; finishing
//!   a task decrements its dependents' counts and makes those at zero `ready`.
//! - A claim takes the best ready task (priority, then plan order), skipping tasks whose key
//!   files overlap a running task's, reserves its attempt budget from the plan's budget, and
//!   grants a lease with an expiry and a fencing token (a counter that only grows).
//! - Heartbeats renew the lease; a sweep returns expired leases to the queue (or fails the
//!   task when no attempt is left); a report carrying a stale fencing token is refused — but
//!   the money it spent is still charged.
//! - Every state change is guarded (expected status and fence or version) and writes its
//!   events in the same transaction; no reset deletes an event.
//! - Each plan records who owns its integration branch ([`BranchRecord`]): a branch arbiter
//!   created for it, or one the user adopted. Only such a branch is ever moved by arbiter,
//!   and only one it created is moved back by a reset.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::budget::Budget;
use crate::money::Usd;
use crate::plan::event::{PlanEntry, PlanLogEntry};
use crate::plan::gate::GateResult;
use crate::plan::state::{AttemptStatus, TaskStatus};
use crate::plan::{PlanSpec, TaskSpec};
use crate::time::Timestamp;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::queue::StoreError;

/// A plan's own row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct PlanRecord {
    /// The plan-level fields (its `tasks` are empty here; see [`PlanView`]).
    pub header: PlanSpec,
    pub budget: Budget,
    pub cancelled: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// Who owns the integration branch, when arbiter created or adopted one for the plan.
    pub branch: Option<BranchRecord>,
}

impl PlanRecord {
    /// The branch record, if it concerns the plan's integration branch as it is named now
    /// (a record of a branch the plan no longer uses gives no right to move this one).
    pub fn branch_record(&self) -> Option<&BranchRecord> {
        self.branch.as_ref().filter(|b| b.name == self.header.integration_branch)
    }
}

/// How a plan came to own its integration branch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum BranchOrigin {
    /// arbiter created it for the plan (at [`BranchRecord::base`]); a reset may move it back.
    Created,
    /// It existed and the user handed it over with `--adopt-branch`: arbiter commits onto
    /// it but never moves it back.
    Adopted,
}

impl BranchOrigin {
    pub fn as_str(self) -> &'static str {
        match self {
            BranchOrigin::Created => "created",
            BranchOrigin::Adopted => "adopted",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "created" => Some(BranchOrigin::Created),
            "adopted" => Some(BranchOrigin::Adopted),
            _ => None,
        }
    }
}

/// The store's record of a plan's integration branch: the source of truth for whether
/// arbiter may move it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct BranchRecord {
    /// The branch (without `refs/heads/`).
    pub name: String,
    pub origin: BranchOrigin,
    /// The commit it was created at, or its tip when it was adopted: where the plan's own
    /// commits begin.
    pub base: String,
    pub recorded_at: Timestamp,
}

pub use crate::plan::event::BranchReset;

/// One task's row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct TaskRecord {
    pub spec: TaskSpec,
    /// Its place in plan order.
    pub ord: i64,
    pub status: TaskStatus,
    /// Dependencies not done yet.
    pub deps_left: i64,
    /// Attempts started since it was created, retried or reset.
    pub attempts: u32,
    pub max_attempts: u32,
    /// A retry waits until then.
    pub not_before: Timestamp,
    /// The fencing token of its latest claim.
    pub fence: i64,
    pub lease_owner: Option<String>,
    pub lease_expires: Option<Timestamp>,
    pub reserved: Usd,
    /// Spent over all its attempts.
    pub cost: Usd,
    pub run_id: Option<String>,
    pub commit: Option<String>,
    /// Why it failed, was skipped or is waiting.
    #[cfg_attr(feature = "arbitrary", proptest(strategy = "proptest::option::of(crate::arbitrary::text())"))]
    pub reason: Option<String>,
    pub version: i64,
}

/// A plan with its tasks, in plan order.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanView {
    pub plan: PlanRecord,
    pub tasks: Vec<TaskRecord>,
    /// Task id → position in `tasks`.
    positions: BTreeMap<String, usize>,
}

/// As `{"plan": …, "tasks": [...]}` (the index of tasks is rebuilt when read back).
impl Serialize for PlanView {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut v = s.serialize_struct("PlanView", 2)?;
        v.serialize_field("plan", &self.plan)?;
        v.serialize_field("tasks", &self.tasks)?;
        v.end()
    }
}

impl<'de> Deserialize<'de> for PlanView {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Parts {
            plan: PlanRecord,
            tasks: Vec<TaskRecord>,
        }
        let parts = Parts::deserialize(d)?;
        Ok(PlanView::new(parts.plan, parts.tasks))
    }
}

impl PlanView {
    pub fn new(plan: PlanRecord, tasks: Vec<TaskRecord>) -> Self {
        let positions = tasks.iter().enumerate().map(|(i, t)| (t.spec.id.clone(), i)).collect();
        PlanView { plan, tasks, positions }
    }

    /// The plan as a spec again (for export).
    pub fn spec(&self) -> PlanSpec {
        PlanSpec { tasks: self.tasks.iter().map(|t| t.spec.definition()).collect(), ..self.plan.header.clone() }
    }

    /// Each task with its dependencies (the plan's DAG, for `crate::plan::dag`).
    pub fn edges(&self) -> Vec<(&str, Vec<&str>)> {
        self.tasks
            .iter()
            .map(|t| (t.spec.id.as_str(), t.spec.dependencies.iter().map(String::as_str).collect()))
            .collect()
    }

    pub fn task(&self, id: &str) -> Option<&TaskRecord> {
        self.positions.get(id).and_then(|&i| self.tasks.get(i))
    }

    /// How many tasks are in each status.
    pub fn counts(&self) -> BTreeMap<TaskStatus, usize> {
        let mut c = BTreeMap::new();
        for t in &self.tasks {
            *c.entry(t.status).or_default() += 1;
        }
        c
    }

    /// The dependencies of `task` that are not done, with their status.
    pub fn waiting_on(&self, task: &TaskRecord) -> Vec<(String, TaskStatus)> {
        task.spec
            .dependencies
            .iter()
            .filter_map(|d| self.task(d).map(|t| (d.clone(), t.status)))
            .filter(|(_, s)| *s != TaskStatus::Done)
            .collect()
    }
}

/// One attempt's row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct AttemptRecord {
    pub task_id: String,
    pub attempt: u32,
    pub fence: i64,
    pub worker: String,
    pub status: AttemptStatus,
    pub started_at: Timestamp,
    pub finished_at: Option<Timestamp>,
    pub reserved: Usd,
    pub cost: Usd,
    pub run_id: Option<String>,
    pub commit: Option<String>,
    #[cfg_attr(feature = "arbitrary", proptest(strategy = "proptest::option::of(crate::arbitrary::text())"))]
    pub reason: Option<String>,
}

/// One entry of a plan's event log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct PlanEvent {
    /// Monotonic over the whole store.
    pub id: i64,
    pub plan_id: String,
    pub task_id: Option<String>,
    pub attempt: Option<u32>,
    pub kind: String,
    pub at: Timestamp,
    #[cfg_attr(feature = "arbitrary", proptest(strategy = "crate::arbitrary::json()"))]
    pub data: serde_json::Value,
}

impl PlanEvent {
    /// The event as its typed entry (`None` for a kind this arbiter does not know, written
    /// by a newer one).
    pub fn entry(&self) -> Option<PlanLogEntry> {
        PlanLogEntry::from_parts(&self.kind, &self.data)
    }
}

/// Which events [`PlanStore::recent_events`] reads: of one plan or of all, of one task, of
/// one kind (`None`: any).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventFilter<'a> {
    pub plan: Option<&'a str>,
    pub task: Option<&'a str>,
    pub kind: Option<&'a str>,
}

impl<'a> EventFilter<'a> {
    /// Every event of one plan (or, `None`, of every plan).
    pub fn plan(plan: Option<&'a str>) -> Self {
        EventFilter { plan, ..Default::default() }
    }
}

/// A line of `plan list`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct PlanSummary {
    pub id: String,
    pub name: String,
    pub counts: BTreeMap<TaskStatus, usize>,
    pub budget: Budget,
    pub cancelled: bool,
}

impl PlanSummary {
    /// Not cancelled, and some task is still to run (blocked, ready or running).
    pub fn has_work_left(&self) -> bool {
        !self.cancelled
            && [TaskStatus::Blocked, TaskStatus::Ready, TaskStatus::Running]
                .iter()
                .any(|s| self.counts.get(s).is_some_and(|n| *n > 0))
    }
}

/// How a re-import treats tasks that exist already.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum ImportMode {
    /// Add new tasks; existing ones stay as they are (reported unchanged).
    #[default]
    Add,
    /// Also change tasks that have not started; refuse to change any other.
    Update,
    /// Create the plan, or write nothing: refused with [`StoreError::PlanExists`] when a plan
    /// of that id exists, and with [`StoreError::SourceTaken`] when one comes from the same
    /// source (how two intakes of one issue at once make one plan).
    New,
}

/// One import (or apply) of a plan file.
pub struct Import<'a> {
    pub spec: &'a PlanSpec,
    pub mode: ImportMode,
    /// Tasks to mark skipped, with why (the decision gate under `--strict`).
    pub skip: &'a [(String, String)],
    /// Decision gate verdicts to record (`plan apply`); empty for a plain import.
    pub verdicts: &'a [GateResult],
    /// `Some(strict)` for `plan apply`.
    pub apply: Option<bool>,
    /// A branch the import hands to the plan (`--adopt-branch`), recorded with it.
    pub branch: Option<&'a BranchRecord>,
    pub now: Timestamp,
}

impl<'a> Import<'a> {
    /// A plain import that adds the spec's new tasks: nothing skipped, no gate verdicts, no
    /// branch handed over.
    pub fn adding(spec: &'a PlanSpec, now: Timestamp) -> Self {
        Import { spec, mode: ImportMode::Add, skip: &[], verdicts: &[], apply: None, branch: None, now }
    }
}

/// What an import did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct ImportReport {
    pub created_plan: bool,
    pub added: Vec<String>,
    pub updated: Vec<String>,
    pub unchanged: Vec<String>,
    /// Existing tasks whose definition in the file differs (an import without `--update`).
    pub differing: Vec<String>,
    pub skipped: Vec<String>,
}

/// A claim's lease: present it to heartbeat and to report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct Lease {
    pub plan_id: String,
    pub task_id: String,
    pub attempt: u32,
    pub max_attempts: u32,
    /// The fencing token: a report carrying an older one is refused.
    pub fence: i64,
    pub worker: String,
    pub expires: Timestamp,
    /// Reserved from the plan's budget for this attempt (its spending cap).
    pub reserved: Usd,
    /// The plan's retry backoff base, in seconds.
    pub retry_backoff_seconds: u64,
}

/// A claimed task.
#[derive(Clone, Debug, PartialEq)]
pub struct Claimed {
    pub lease: Lease,
    pub task: TaskSpec,
}

/// Why a claim found nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Idle {
    pub running: usize,
    pub ready: usize,
    /// The earliest a waiting retry becomes claimable.
    pub next_ready_at: Option<Timestamp>,
    pub budget_exhausted: bool,
    pub cancelled: bool,
}

impl Idle {
    /// Nothing runs and nothing will become claimable by waiting.
    pub fn finished(&self) -> bool {
        self.running == 0 && (self.ready == 0 || self.budget_exhausted || self.cancelled)
    }
}

/// What a claim got.
#[derive(Clone, Debug, PartialEq)]
pub enum ClaimOutcome {
    Claimed(Box<Claimed>),
    Idle(Idle),
}

/// When a failed attempt may be retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// After the plan's backoff (doubling per attempt), if attempts are left.
    AfterBackoff,
    /// At once, if attempts are left (e.g. the integration branch moved under it).
    Now,
    /// Never: the task fails.
    Never,
}

/// How an attempt ended, as its worker reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AttemptResult {
    Succeeded {
        run_id: Option<String>,
        commit: Option<String>,
    },
    Failed {
        reason: String,
        retry: Retry,
        run_id: Option<String>,
    },
    /// The worker gives the task back without a verdict (it was interrupted, or it died):
    /// the task is ready again and the attempt does not count against `max_attempts`.
    Released {
        reason: String,
    },
}

impl AttemptResult {
    /// How the attempt ends when its worker reports this.
    pub fn attempt_status(&self) -> crate::plan::state::AttemptStatus {
        use crate::plan::state::AttemptStatus;
        match self {
            AttemptResult::Succeeded { .. } => AttemptStatus::Succeeded,
            AttemptResult::Failed { .. } => AttemptStatus::Failed,
            AttemptResult::Released { .. } => AttemptStatus::Cancelled,
        }
    }
}

/// What a report did to its task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finished {
    pub status: TaskStatus,
    /// Dependents that became ready.
    pub newly_ready: Vec<String>,
    /// A retry waits until then.
    pub not_before: Option<Timestamp>,
    /// This report's cost crossed the plan's budget.
    pub budget_crossed: bool,
}

/// What one charge did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Charged {
    pub spent: Usd,
    pub limit: Option<Usd>,
    pub crossed: bool,
}

/// A lease taken back from a worker that stopped renewing it (or died).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reclaimed {
    pub plan_id: String,
    pub task_id: String,
    pub fence: i64,
    pub worker: String,
    pub status: TaskStatus,
}

/// Whether a waiting claimer was woken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// Something happened in the store that may have made work.
    Notified,
    TimedOut,
}

/// The worker half of the plan queue: what a worker loop and the sweeper do — find plans
/// with work, claim a task under a lease, renew it, report and charge, give back what
/// expired or whose worker died, and wait for work.
#[async_trait]
pub trait PlanWork: Send + Sync {
    /// The plan without its tasks (a header, a budget, a branch record): what a claim needs.
    async fn plan_record(&self, id: &str) -> Result<Option<PlanRecord>, StoreError>;
    /// One task of a plan.
    async fn task_record(&self, plan_id: &str, task_id: &str) -> Result<Option<TaskRecord>, StoreError>;
    /// The ids of the plans with work a claim could take now or soon (not cancelled, a task
    /// ready or running), in id order: what a worker without a plan of its own looks at, at
    /// every claim, without the counts of [`PlanAdmin::plans`].
    async fn claimable_plans(&self) -> Result<Vec<String>, StoreError>;
    /// Takes the best ready task of the plan under a lease of `lease` from `now`.
    async fn claim(
        &self,
        plan_id: &str,
        worker: &str,
        lease: Duration,
        now: Timestamp,
    ) -> Result<ClaimOutcome, StoreError>;
    /// Renews a lease; `None` when it is no longer held (the worker must stop).
    async fn heartbeat(&self, lease: &Lease, ttl: Duration, now: Timestamp) -> Result<Option<Timestamp>, StoreError>;
    /// Reports an attempt and charges its cost. A stale fencing token is refused with
    /// [`StoreError::StaleLease`] after its cost is charged.
    async fn finish(
        &self,
        lease: &Lease,
        result: AttemptResult,
        cost: Usd,
        now: Timestamp,
    ) -> Result<Finished, StoreError>;
    /// Charges a cost to a plan the moment it is incurred: for an attempt (its task and
    /// fence) it is recorded on the task and the attempt too, and is not reported again at
    /// [`finish`](PlanWork::finish).
    async fn charge(
        &self,
        plan_id: &str,
        attempt: Option<(&str, i64)>,
        amount: Usd,
        now: Timestamp,
    ) -> Result<Charged, StoreError>;
    /// Returns expired leases to the queue (or fails their task when no attempt is left).
    async fn sweep_expired(&self, now: Timestamp) -> Result<Vec<Reclaimed>, StoreError>;
    /// Takes back at once the leases `workers` hold in the plan (they are known to be dead);
    /// like a release, their attempts do not count.
    async fn release_workers(
        &self,
        plan_id: &str,
        workers: &[String],
        reason: &str,
        now: Timestamp,
    ) -> Result<Vec<Reclaimed>, StoreError>;
    /// Appends a plan-level event (something that happened outside the store, such as a
    /// git step that failed after the store's part was done).
    async fn note_event(&self, plan_id: &str, entry: PlanEntry, now: Timestamp) -> Result<(), StoreError>;
    /// Waits until the store may have work for `plan_id`, or `timeout`.
    async fn wait_for_work(&self, plan_id: &str, timeout: Duration) -> Wake;
    /// Notified whenever the store may have work (in this process, or in another through
    /// Postgres `LISTEN`). A claimer arms `notified()` before it looks, so a wake-up that
    /// comes between its look and its wait is not lost.
    async fn work_signal(&self) -> std::sync::Arc<tokio::sync::Notify>;
}

/// The admin half of the plan queue: what people and the control plane's administration do
/// — create and import plans, read them and their events, set budgets, cancel, retry,
/// reset, and record the integration branch.
#[async_trait]
pub trait PlanAdmin: Send + Sync {
    /// Creates an empty plan; `false` when it exists (nothing changes then).
    async fn create_plan(&self, header: &PlanSpec, now: Timestamp) -> Result<bool, StoreError>;
    /// Imports a plan file: everything is checked first (against the stored tasks too) and
    /// nothing is written when anything is wrong.
    async fn import_plan(&self, import: Import<'_>) -> Result<ImportReport, StoreError>;
    async fn plan(&self, id: &str) -> Result<Option<PlanView>, StoreError>;
    /// The id of the plan that came from `source` (an issue's URL), if one did.
    async fn plan_by_source(&self, source: &str) -> Result<Option<String>, StoreError>;
    async fn plans(&self) -> Result<Vec<PlanSummary>, StoreError>;
    async fn attempts(&self, plan_id: &str) -> Result<Vec<AttemptRecord>, StoreError>;
    async fn events(&self, plan_id: &str) -> Result<Vec<PlanEvent>, StoreError>;
    /// The plan's events after the event `after` (exclusive; 0 for all), oldest first, at
    /// most `limit` of them: how a stream of events resumes where it stopped.
    async fn events_after(&self, plan_id: &str, after: i64, limit: u32) -> Result<Vec<PlanEvent>, StoreError> {
        let mut events = self.events(plan_id).await?;
        events.retain(|e| e.id > after);
        events.truncate(limit as usize);
        Ok(events)
    }
    /// Every plan's events after the event `after`, oldest first, at most `limit`: a stream
    /// of the whole store (the dashboard's plans page).
    async fn all_events_after(&self, after: i64, limit: u32) -> Result<Vec<PlanEvent>, StoreError>;
    /// The latest events `filter` picks before the event `before` (`None`: the newest),
    /// newest first, at most `limit`.
    async fn recent_events(
        &self,
        filter: &EventFilter<'_>,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Vec<PlanEvent>, StoreError>;
    /// Sets (or removes) the budget; a limit above what was spent makes claims possible again.
    /// `by` names who asked (recorded in the `budget_changed` event).
    async fn set_budget(
        &self,
        plan_id: &str,
        limit: Option<Usd>,
        by: &str,
        now: Timestamp,
    ) -> Result<Budget, StoreError>;
    /// Cancels the plan; `by` names who asked (recorded in the `plan_cancelled` event).
    async fn cancel_plan(&self, plan_id: &str, by: &str, now: Timestamp) -> Result<usize, StoreError>;
    /// Gives a failed, cancelled or skipped task new attempts; `by` names who asked.
    async fn retry_task(
        &self,
        plan_id: &str,
        task_id: &str,
        by: &str,
        now: Timestamp,
    ) -> Result<TaskStatus, StoreError>;
    /// Every task back to how it was imported (statuses the import or a gate gave stay);
    /// `hard` also forgets attempts and spending, a soft reset keeps both (and the attempt
    /// counters restart). Events stay; `branch` (what the reset does to the integration
    /// branch) goes into the `plan_reset` event. Refused with [`StoreError::LeasesHeld`]
    /// while a task runs under a live lease.
    async fn reset_plan(
        &self,
        plan_id: &str,
        hard: bool,
        branch: Option<&BranchReset>,
        now: Timestamp,
    ) -> Result<usize, StoreError>;
    /// Records who owns the plan's integration branch (replacing any earlier record) and
    /// writes an `integration_branch_created` or `integration_branch_adopted` event naming
    /// the record it replaced. Returns that earlier record.
    async fn record_branch(
        &self,
        plan_id: &str,
        branch: &BranchRecord,
        now: Timestamp,
    ) -> Result<Option<BranchRecord>, StoreError>;
}

/// The whole plan queue: both halves, as every store implements them.
pub trait PlanStore: PlanWork + PlanAdmin {}

impl<T: PlanWork + PlanAdmin + ?Sized> PlanStore for T {}
