//! The units of a task's attempt: how one tournament spreads over several workers.
//!
//! A task whose tournament can spread (several candidates, all at once) is claimed as
//! usual, and its worker's coordinator then starts the attempt's units
//! ([`UnitQueue::start_units`]): one per candidate, ready at once, and the evaluation,
//! ready when every candidate unit is done. From then on the task's own lease no longer
//! expires; each unit has a lease of its own (with its own fencing token) that its worker
//! renews, and a unit whose lease runs out goes back to the queue — up to
//! [`MAX_UNIT_TRIES`] times, after which a candidate counts as lost (the evaluation goes on
//! without it) and a lost evaluation fails the attempt. A worker that cannot run a unit it
//! claimed (its git cannot reach the control plane, its sandbox cannot be set up, it cannot
//! read the assignment) refuses it ([`UnitOutcome::Refused`]): the try counts the same, and
//! that worker is not given the unit again for [`REFUSAL_COOLDOWN`], so another runs it. The evaluation's report ends the
//! attempt with the task's lease ([`PlanWork::finish`]).
//!
//! A worker claims only units whose needs (runners, backends) it has ([`Capabilities`]).

use std::collections::BTreeSet;
use std::time::Duration;

use crate::money::Usd;
use crate::plan::TaskSpec;
use crate::settings::RunSettings;
use crate::time::Timestamp;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::queue::StoreError;
use crate::queue::plans::{ClaimOutcome, Lease, PlanStore};

/// How often a unit's lease may run out before the unit is given up.
pub const MAX_UNIT_TRIES: u32 = 3;

/// How long a worker that refused a unit is not given it again (while other workers may
/// take it; after that, the refusing worker may try once more: what stopped it may have
/// been passing).
pub const REFUSAL_COOLDOWN: Duration = Duration::from_secs(60);

pub use crate::plan::state::UnitResult;

pub use crate::plan::state::UnitKind;

/// Where a unit stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnitStatus {
    /// The evaluation, until every candidate unit is done.
    Waiting,
    Ready,
    Running,
    Done,
}

impl UnitStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            UnitStatus::Waiting => "waiting",
            UnitStatus::Ready => "ready",
            UnitStatus::Running => "running",
            UnitStatus::Done => "done",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "waiting" => Some(UnitStatus::Waiting),
            "ready" => Some(UnitStatus::Ready),
            "running" => Some(UnitStatus::Running),
            "done" => Some(UnitStatus::Done),
            _ => None,
        }
    }
}

/// One unit of an attempt, as its coordinator starts it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnitSpec {
    /// Unique within the attempt: the candidate's id (`c01`), or `evaluation`.
    pub name: String,
    pub kind: UnitKind,
    /// What a worker must have to claim it (`runner:codex`, `backend:openai`).
    pub needs: Vec<String>,
}

/// What a worker has.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Capabilities {
    /// Everything a unit may need (a local worker: it runs what the plan's machine runs).
    Any,
    Only(BTreeSet<String>),
}

impl Capabilities {
    /// Whether a worker with these capabilities can run a unit that needs `needs`.
    pub fn can(&self, needs: &[String]) -> bool {
        match self {
            Capabilities::Any => true,
            Capabilities::Only(have) => needs.iter().all(|n| have.contains(n)),
        }
    }
}

/// A claimed unit: its own lease, and the lease of the attempt it belongs to (with which its
/// evaluation ends the attempt).
#[derive(Clone, Debug, PartialEq)]
pub struct UnitLease {
    /// The attempt's lease (its fencing token is the task's; its worker is this unit's).
    pub attempt: Lease,
    pub name: String,
    pub kind: UnitKind,
    /// The unit's own fencing token: a report carrying an older one is refused.
    pub fence: i64,
    pub expires: Timestamp,
    /// The run every unit of the attempt records into.
    pub run_id: String,
    /// The commit every unit of the attempt starts from.
    pub base: String,
}

/// A claimed unit and the task it belongs to.
#[derive(Clone, Debug, PartialEq)]
pub struct UnitClaim {
    pub lease: UnitLease,
    pub task: TaskSpec,
}

/// A unit as the store keeps it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct UnitRecord {
    pub plan_id: String,
    pub task_id: String,
    pub task_fence: i64,
    pub name: String,
    pub kind: UnitKind,
    pub ord: i64,
    pub needs: Vec<String>,
    pub status: UnitStatus,
    pub fence: i64,
    pub worker: Option<String>,
    pub lease_expires: Option<Timestamp>,
    pub tries: u32,
    pub run_id: String,
    pub base: String,
    /// What its worker reported when it was done, or why it has no result (`None`: not
    /// done yet).
    pub result: Option<UnitResult>,
    pub cost: Usd,
}

/// How a unit ended, as its worker reports it.
#[derive(Clone, Debug, PartialEq)]
pub enum UnitOutcome {
    /// Done: `result` is what the evaluation reads.
    Done { result: UnitResult },
    /// Given back without a result (the worker stops): ready again, the try not counted.
    Released { reason: String },
    /// Its worker could not run it, for a reason outside the unit's work (fetching the
    /// repository, setting up the sandbox, reading the assignment): ready again for other
    /// workers, the try counted; given up (lost, or the attempt failed) after
    /// [`MAX_UNIT_TRIES`].
    Refused { reason: String },
}

/// The worker part of a claimer's name (`w-1a2b:3` → `w-1a2b`): what a refusal avoids.
pub fn worker_of(claimer: &str) -> &str {
    claimer.rsplit_once(':').map_or(claimer, |(worker, _)| worker)
}

/// What a unit report did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnitFinished {
    /// The attempt's evaluation became ready (this was its last candidate).
    pub evaluation_ready: bool,
    /// A refused unit was given up (see [`UnitOutcome::Refused`]).
    pub given_up: bool,
}

/// A unit lease taken back from a worker that stopped renewing it (or died).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReclaimedUnit {
    pub plan_id: String,
    pub task_id: String,
    pub name: String,
    pub worker: String,
    /// It ran out [`MAX_UNIT_TRIES`] times: given up (a lost candidate, or a failed attempt).
    pub given_up: bool,
    /// Giving it up made its attempt's evaluation ready (it was the last candidate left).
    pub evaluation_ready: bool,
}

/// The unit queue port (implemented by both stores, on top of their plan queue).
#[async_trait]
pub trait UnitQueue: PlanStore {
    /// Whether an unfinished task of the plan (ready or blocked) names its own `runners` or
    /// `candidates`, so that its tasks may need different workers; when none does, each
    /// needs what the plan's defaults give it.
    async fn tasks_choose_runners(&self, plan_id: &str) -> Result<bool, StoreError>;
    /// The best ready tasks of the plan, `limit` of them after the first `skip`, without
    /// claiming any: a worker that cannot run every runner looks before it claims.
    async fn ready_tasks(
        &self,
        plan_id: &str,
        now: Timestamp,
        skip: u32,
        limit: u32,
    ) -> Result<Vec<TaskSpec>, StoreError>;
    /// Claims the best of these tasks that is ready (as [`PlanWork::claim`] claims the best
    /// of all), in one round trip where the plan allows; `Idle` (with the plan's counts) when
    /// none of them is claimable (any more), or none is given.
    async fn claim_among(
        &self,
        plan_id: &str,
        task_ids: &[String],
        worker: &str,
        ttl: Duration,
        now: Timestamp,
    ) -> Result<ClaimOutcome, StoreError>;
    /// Spreads a claimed attempt over units: the task's lease stops expiring (and is no
    /// longer its claimer's); the candidate units are ready, the evaluation waits for them.
    /// Every unit records into run `run_id`, starts from commit `base` and runs with the
    /// attempt's `settings` (frozen here: [`UnitQueue::attempt_settings`]). Refused with
    /// [`StoreError::StaleLease`] when the attempt is no longer running.
    async fn start_units(
        &self,
        lease: &Lease,
        run_id: &str,
        base: &str,
        settings: &RunSettings,
        units: &[UnitSpec],
        now: Timestamp,
    ) -> Result<(), StoreError>;
    /// The run settings the attempt with fencing token `task_fence` spread with (`None`: it
    /// did not spread, or it spread before they were kept).
    async fn attempt_settings(
        &self,
        plan_id: &str,
        task_id: &str,
        task_fence: i64,
    ) -> Result<Option<RunSettings>, StoreError>;
    /// Claims the best ready unit `caps` can run, of `plan_id` (or of any plan):
    /// evaluations first, then candidates, in task order.
    async fn claim_unit(
        &self,
        plan_id: Option<&str>,
        worker: &str,
        caps: &Capabilities,
        ttl: Duration,
        now: Timestamp,
    ) -> Result<Option<UnitClaim>, StoreError>;
    /// Renews a unit's lease; `None` when it is no longer held.
    async fn heartbeat_unit(
        &self,
        lease: &UnitLease,
        ttl: Duration,
        now: Timestamp,
    ) -> Result<Option<Timestamp>, StoreError>;
    /// Reports a unit and charges its cost to the attempt. A stale fencing token (the unit's
    /// or the attempt's) is refused with [`StoreError::StaleUnit`] after the cost is charged.
    async fn finish_unit(
        &self,
        lease: &UnitLease,
        outcome: UnitOutcome,
        cost: Usd,
        now: Timestamp,
    ) -> Result<UnitFinished, StoreError>;
    /// The units of one attempt, in order.
    async fn units_of(&self, plan_id: &str, task_id: &str, task_fence: i64) -> Result<Vec<UnitRecord>, StoreError>;
    /// The units of the plan's running attempts, in task and unit order.
    async fn running_units(&self, plan_id: &str) -> Result<Vec<UnitRecord>, StoreError>;
    /// Returns expired unit leases to the queue; gives up a unit whose lease ran out
    /// [`MAX_UNIT_TRIES`] times.
    async fn sweep_expired_units(&self, now: Timestamp) -> Result<Vec<ReclaimedUnit>, StoreError>;
    /// Takes back at once the unit leases `workers` hold in the plan (they are known to be
    /// dead); the tries do not count.
    async fn release_unit_workers(
        &self,
        plan_id: &str,
        workers: &[String],
        now: Timestamp,
    ) -> Result<Vec<ReclaimedUnit>, StoreError>;
}
