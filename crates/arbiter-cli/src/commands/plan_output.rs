//! The `--json` documents of the `plan` commands (schemas in `docs/schemas/plan-*.json`):
//! a plan as `plan show`, `plan status` and `plan run` print it, the list, an import, a
//! push and the event log.

use std::collections::BTreeMap;

use arbiter_core::budget::Budget;
use arbiter_core::money::Usd;
use arbiter_core::plan::dag;
use arbiter_core::plan::gate::GateResult;
use arbiter_runner::plan_admin::CallCosts;
use arbiter_store::plans::{AttemptRecord, BranchRecord, ImportReport, PlanEvent, PlanSummary, PlanView, TaskRecord};
use serde::Serialize;

use crate::output::JsonDocument;

/// A plan, its budget and its tasks where they stand.
#[derive(Serialize)]
pub struct PlanDocument<'a> {
    id: &'a str,
    name: &'a str,
    repository: Option<&'a str>,
    base_ref: &'a str,
    integration_branch: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prd: Option<&'a str>,
    integration_branch_record: Option<BranchLine<'a>>,
    cancelled: bool,
    budget: Budget,
    counts: BTreeMap<&'static str, usize>,
    tasks: Vec<TaskLine<'a>>,
}

#[derive(Serialize)]
struct BranchLine<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    origin: &'static str,
    base: &'a str,
    recorded_at: String,
}

#[derive(Serialize)]
struct TaskLine<'a> {
    id: &'a str,
    title: &'a str,
    status: &'static str,
    priority: &'static str,
    dependencies: &'a [String],
    depth: usize,
    waiting_on: Vec<Waiting>,
    attempts: u32,
    max_attempts: u32,
    cost: Usd,
    /// Calls of its runs whose cost is unknown: `cost` is what is known.
    uncosted_calls: u64,
    lease_owner: Option<&'a str>,
    lease_expires: Option<String>,
    run_id: Option<&'a str>,
    commit: Option<&'a str>,
    reason: Option<&'a str>,
}

#[derive(Serialize)]
struct Waiting {
    task: String,
    status: &'static str,
}

impl<'a> PlanDocument<'a> {
    pub fn of(view: &'a PlanView, uncosted: &BTreeMap<String, CallCosts>) -> Self {
        let p = &view.plan;
        let depths = dag::depths(&view.edges());
        let task = |t: &'a TaskRecord| TaskLine {
            id: &t.spec.id,
            title: &t.spec.title,
            status: t.status.as_str(),
            priority: t.spec.priority.as_str(),
            dependencies: &t.spec.dependencies,
            depth: depths.get(&t.spec.id).copied().unwrap_or(0),
            waiting_on: view.waiting_on(t).into_iter().map(|(task, s)| Waiting { task, status: s.as_str() }).collect(),
            attempts: t.attempts,
            max_attempts: t.max_attempts,
            cost: t.cost,
            uncosted_calls: uncosted.get(&t.spec.id).map_or(0, |c| c.uncosted),
            lease_owner: t.lease_owner.as_deref(),
            lease_expires: t.lease_expires.map(|e| e.rfc3339()),
            run_id: t.run_id.as_deref(),
            commit: t.commit.as_deref(),
            reason: t.reason.as_deref(),
        };
        PlanDocument {
            id: &p.header.id,
            name: &p.header.name,
            repository: p.header.repository.as_deref(),
            base_ref: &p.header.base_ref,
            integration_branch: &p.header.integration_branch,
            source: p.header.source.as_deref(),
            prd: p.header.prd.as_deref(),
            integration_branch_record: p.branch_record().map(branch_line),
            cancelled: p.cancelled,
            budget: p.budget,
            counts: view.counts().iter().map(|(s, n)| (s.as_str(), *n)).collect(),
            tasks: view.tasks.iter().map(task).collect(),
        }
    }
}

fn branch_line(b: &BranchRecord) -> BranchLine<'_> {
    BranchLine { name: None, origin: b.origin.as_str(), base: &b.base, recorded_at: b.recorded_at.rfc3339() }
}

/// `plan show --json`.
#[derive(Serialize)]
pub struct PlanShown<'a> {
    #[serde(flatten)]
    pub plan: PlanDocument<'a>,
}

impl JsonDocument for PlanShown<'_> {
    const SCHEMA: &'static str = "plan-show";
}

/// `plan status --json`: the plan, and every attempt of its tasks.
#[derive(Serialize)]
pub struct PlanStatus<'a> {
    #[serde(flatten)]
    plan: PlanDocument<'a>,
    attempts: Vec<AttemptLine<'a>>,
}

#[derive(Serialize)]
struct AttemptLine<'a> {
    task: &'a str,
    attempt: u32,
    fence: i64,
    worker: &'a str,
    status: &'static str,
    started_at: String,
    finished_at: Option<String>,
    cost: Usd,
    reserved: Usd,
    run_id: Option<&'a str>,
    commit: Option<&'a str>,
    reason: Option<&'a str>,
}

impl<'a> PlanStatus<'a> {
    pub fn of(view: &'a PlanView, attempts: &'a [AttemptRecord], uncosted: &BTreeMap<String, CallCosts>) -> Self {
        let attempts = attempts
            .iter()
            .map(|a| AttemptLine {
                task: &a.task_id,
                attempt: a.attempt,
                fence: a.fence,
                worker: &a.worker,
                status: a.status.as_str(),
                started_at: a.started_at.rfc3339(),
                finished_at: a.finished_at.map(|t| t.rfc3339()),
                cost: a.cost,
                reserved: a.reserved,
                run_id: a.run_id.as_deref(),
                commit: a.commit.as_deref(),
                reason: a.reason.as_deref(),
            })
            .collect();
        PlanStatus { plan: PlanDocument::of(view, uncosted), attempts }
    }
}

impl JsonDocument for PlanStatus<'_> {
    const SCHEMA: &'static str = "plan-status";
}

/// `plan run --json`: the plan as the run left it.
#[derive(Serialize)]
pub struct PlanRan<'a> {
    #[serde(flatten)]
    pub plan: PlanDocument<'a>,
    pub interrupted: bool,
    pub exit_code: u8,
}

impl JsonDocument for PlanRan<'_> {
    const SCHEMA: &'static str = "plan-run";
}

/// `plan list --json`.
#[derive(Serialize)]
pub struct PlanList {
    plans: Vec<PlanLine>,
}

#[derive(Serialize)]
struct PlanLine {
    id: String,
    name: String,
    cancelled: bool,
    counts: BTreeMap<&'static str, usize>,
    budget: Budget,
}

impl PlanList {
    pub fn of(all: &[PlanSummary]) -> Self {
        let plans = all
            .iter()
            .map(|p| PlanLine {
                id: p.id.clone(),
                name: p.name.clone(),
                cancelled: p.cancelled,
                counts: p.counts.iter().map(|(s, n)| (s.as_str(), *n)).collect(),
                budget: p.budget,
            })
            .collect();
        PlanList { plans }
    }
}

impl JsonDocument for PlanList {
    const SCHEMA: &'static str = "plan-list";
}

/// `plan import --json`, `plan apply --json`.
#[derive(Serialize)]
pub struct PlanImported<'a> {
    plan: &'a str,
    report: &'a ImportReport,
    /// The branch `--adopt-branch` handed over, recorded as `plan show` shows it.
    adopted_branch: Option<BranchLine<'a>>,
    verdicts: &'a [GateResult],
}

impl<'a> PlanImported<'a> {
    pub fn new(
        plan: &'a str,
        report: &'a ImportReport,
        adopted: Option<&'a BranchRecord>,
        verdicts: &'a [GateResult],
    ) -> Self {
        let adopted_branch = adopted.map(|b| BranchLine { name: Some(&b.name), ..branch_line(b) });
        PlanImported { plan, report, adopted_branch, verdicts }
    }
}

impl JsonDocument for PlanImported<'_> {
    const SCHEMA: &'static str = "plan-import";
}

/// `plan push --json`.
#[derive(Serialize)]
pub struct PlanPushed<'a> {
    #[serde(flatten)]
    pub pushed: &'a arbiter_core::plan::event::Pushed,
}

impl JsonDocument for PlanPushed<'_> {
    const SCHEMA: &'static str = "plan-push";
}

/// `plan events --json`: the log as stored, each event's `data` as its kind has it.
#[derive(Serialize)]
pub struct PlanEvents<'a> {
    pub events: &'a [PlanEvent],
}

impl JsonDocument for PlanEvents<'_> {
    const SCHEMA: &'static str = "plan-events";
}
