//! The JSON bodies of the work protocol (`/api/v1/work/...`), shared by the server's routes
//! and the remote worker's coordinator: one definition per message. Requests refuse
//! unknown fields.

use std::path::{Component, Path, PathBuf};

use std::collections::BTreeMap;

use arbiter_core::money::Usd;
use arbiter_core::plan::{PlanSpec, TaskSpec};
use arbiter_core::settings::RunSettings;
use arbiter_core::status::CandidateStatus;
use arbiter_core::text::storable;
use arbiter_core::time::Timestamp;
use arbiter_runner::coordinator::{Assignment, LeaseRef, Reported, UnitRef, Verdict, Work};
use arbiter_store::plans::{Lease, Retry};
use arbiter_store::units::UnitKind;
use serde::{Deserialize, Serialize};

/// The longest a claim waits for work on the server (a long poll).
pub const MAX_CLAIM_WAIT_MS: u64 = 30_000;

/// `POST /api/v1/work/claim`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(deny_unknown_fields)]
pub struct ClaimRequest {
    /// Which of the worker's slots claims (1 to 32 of letters, digits, '.', '_', '-'): the
    /// lease is granted to `<worker id>:<slot>`.
    pub slot: String,
    /// Only this plan's work (default: any plan's).
    #[serde(default)]
    pub plan: Option<String>,
    /// How long to wait for work when there is none (at most [`MAX_CLAIM_WAIT_MS`]).
    #[serde(default)]
    pub wait_ms: u64,
}

/// The answer to a claim.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ClaimResponse {
    Assigned {
        assignment: Box<WireAssignment>,
    },
    /// Nothing for this worker now: claim again.
    Idle,
    /// The plan asked for has nothing left to run.
    Finished,
}

/// A unit's lease on the wire (its attempt's lease is the assignment's).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct WireUnit {
    pub name: String,
    pub kind: UnitKind,
    pub fence: i64,
    pub expires: Timestamp,
    pub run_id: String,
    pub base: String,
}

/// What an assignment asks of the worker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WireWork {
    Tournament,
    Candidate {
        index: usize,
        run_id: String,
    },
    /// `lost` is a list, not a map: an internally tagged enum buffers its content, and a
    /// buffered map's keys reach a number-keyed map as strings it cannot read.
    Evaluation {
        run_id: String,
        lost: Vec<LostCandidate>,
    },
}

/// A candidate of an evaluation that left no result, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(deny_unknown_fields)]
pub struct LostCandidate {
    pub index: usize,
    #[cfg_attr(feature = "arbitrary", proptest(strategy = "arbiter_core::arbitrary::text()"))]
    pub reason: String,
}

/// What a worker can always read of an assignment, whatever else it holds: the leases it
/// grants, so that a worker that cannot read (or run) the rest can refuse it by name
/// instead of leaving it to its lease's expiry.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct GrantedLeases {
    pub assignment: GrantedAssignment,
}

/// See [`GrantedLeases`].
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct GrantedAssignment {
    pub lease: GrantedLease,
    #[serde(default)]
    pub unit: Option<GrantedUnit>,
}

/// See [`GrantedLeases`].
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct GrantedLease {
    pub plan_id: String,
    pub task_id: String,
    pub fence: i64,
    pub worker: String,
}

/// See [`GrantedLeases`]: a [`WireUnit`] read for its name and fence only (a
/// [`UnitRef`], which refuses the unit's other fields, would not read it).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct GrantedUnit {
    pub name: String,
    pub fence: i64,
}

impl GrantedAssignment {
    /// The leases as the worker names them in a report.
    pub fn lease_ref(&self) -> LeaseRef {
        LeaseRef {
            plan_id: self.lease.plan_id.clone(),
            task_id: self.lease.task_id.clone(),
            fence: self.lease.fence,
            worker: self.lease.worker.clone(),
            unit: self.unit.as_ref().map(|u| UnitRef { name: u.name.clone(), fence: u.fence }),
        }
    }

    /// The unit's name (`c02`, `evaluation`), or `tournament` for a whole task.
    pub fn unit_name(&self) -> String {
        self.unit.as_ref().map_or_else(|| "tournament".to_string(), |u| u.name.clone())
    }
}

/// An assignment on the wire.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct WireAssignment {
    pub lease: Lease,
    pub unit: Option<WireUnit>,
    pub work: WireWork,
    pub task: TaskSpec,
    pub plan: PlanSpec,
    pub base: String,
    pub settings: RunSettings,
    /// How long the lease lasts without a heartbeat.
    pub lease_ttl_ms: u64,
}

impl WireAssignment {
    pub fn new(a: &Assignment, lease_ttl_ms: u64) -> Self {
        let work = match &a.work {
            Work::Tournament => WireWork::Tournament,
            Work::Candidate { index, run_id } => WireWork::Candidate { index: *index, run_id: run_id.to_string() },
            Work::Evaluation { run_id, lost } => WireWork::Evaluation {
                run_id: run_id.to_string(),
                lost: lost
                    .iter()
                    .map(|(index, reason)| LostCandidate { index: *index, reason: reason.clone() })
                    .collect(),
            },
        };
        WireAssignment {
            lease: a.lease.clone(),
            unit: a.unit.as_ref().map(|u| WireUnit {
                name: u.name.clone(),
                kind: u.kind,
                fence: u.fence,
                expires: u.expires,
                run_id: u.run_id.clone(),
                base: u.base.clone(),
            }),
            work,
            task: a.task.clone(),
            plan: a.plan.clone(),
            base: a.base.clone(),
            settings: a.settings.clone(),
            lease_ttl_ms,
        }
    }

    /// The assignment as the worker loop takes it; an error names what does not hold.
    pub fn into_assignment(self) -> Result<Assignment, String> {
        let run_id = |s: &str| arbiter_core::ids::RunId::parse(s).map_err(|_| format!("'{s}' is not a run id"));
        let work = match &self.work {
            WireWork::Tournament => Work::Tournament,
            WireWork::Candidate { index, run_id: r } => Work::Candidate { index: *index, run_id: run_id(r)? },
            WireWork::Evaluation { run_id: r, lost } => Work::Evaluation {
                run_id: run_id(r)?,
                lost: lost.iter().map(|l| (l.index, l.reason.clone())).collect::<BTreeMap<_, _>>(),
            },
        };
        let unit = self.unit.map(|u| arbiter_store::units::UnitLease {
            attempt: self.lease.clone(),
            name: u.name,
            kind: u.kind,
            fence: u.fence,
            expires: u.expires,
            run_id: u.run_id,
            base: u.base,
        });
        Ok(Assignment {
            lease: self.lease,
            unit,
            work,
            task: self.task,
            plan: self.plan,
            base: self.base,
            settings: self.settings,
        })
    }
}

/// `POST /api/v1/work/heartbeat`: renews every lease the worker names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(deny_unknown_fields)]
pub struct HeartbeatRequest {
    pub leases: Vec<LeaseRef>,
}

/// Whether each lease (in the request's order) is still held.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct HeartbeatResponse {
    pub renewed: Vec<bool>,
}

/// `POST /api/v1/work/charge`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(deny_unknown_fields)]
pub struct ChargeRequest {
    pub lease: LeaseRef,
    pub amount: Usd,
}

/// When a failed attempt may be retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum WireRetry {
    AfterBackoff,
    Now,
    Never,
}

impl From<Retry> for WireRetry {
    fn from(r: Retry) -> Self {
        match r {
            Retry::AfterBackoff => WireRetry::AfterBackoff,
            Retry::Now => WireRetry::Now,
            Retry::Never => WireRetry::Never,
        }
    }
}

impl From<WireRetry> for Retry {
    fn from(r: WireRetry) -> Self {
        match r {
            WireRetry::AfterBackoff => Retry::AfterBackoff,
            WireRetry::Now => Retry::Now,
            WireRetry::Never => Retry::Never,
        }
    }
}

/// How the work ended, on the wire.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(tag = "outcome", rename_all = "snake_case", deny_unknown_fields)]
pub enum WireVerdict {
    /// The winner's patch is the uploaded `candidates/<winner>/patch.diff` of run `run_id`.
    Won {
        run_id: String,
        winner: String,
    },
    CandidateDone {
        status: CandidateStatus,
    },
    Failed {
        #[cfg_attr(feature = "arbitrary", proptest(strategy = "arbiter_core::arbitrary::text()"))]
        reason: String,
        retry: WireRetry,
        run_id: Option<String>,
    },
    Released {
        #[cfg_attr(feature = "arbitrary", proptest(strategy = "arbiter_core::arbitrary::text()"))]
        reason: String,
    },
    /// The worker could not run (or read) the work: see `Verdict::Refused`.
    Refused {
        #[cfg_attr(feature = "arbitrary", proptest(strategy = "arbiter_core::arbitrary::text()"))]
        reason: String,
    },
}

impl WireVerdict {
    /// The verdict as it travels.
    pub fn new(v: &Verdict) -> Self {
        match v {
            Verdict::Won { run_id, winner, .. } => WireVerdict::Won { run_id: run_id.clone(), winner: winner.clone() },
            Verdict::CandidateDone { status } => WireVerdict::CandidateDone { status: *status },
            // An agent's text may hold a NUL character, which the protocol refuses (no store
            // keeps one): it travels written out.
            Verdict::Failed { reason, retry, run_id } => {
                WireVerdict::Failed { reason: storable(reason), retry: (*retry).into(), run_id: run_id.clone() }
            }
            Verdict::Released { reason } => WireVerdict::Released { reason: storable(reason) },
            Verdict::Refused { reason } => WireVerdict::Refused { reason: storable(reason) },
        }
    }
}

/// A file of the work's results, uploaded as an artifact first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(deny_unknown_fields)]
pub struct RunFile {
    /// Relative to the run directory (`candidates/c02/patch.diff`).
    pub path: String,
    pub sha256: String,
    pub size: u64,
}

/// `POST /api/v1/work/report`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(deny_unknown_fields)]
pub struct ReportRequest {
    pub lease: LeaseRef,
    pub verdict: WireVerdict,
    /// What the work spent that could not be charged as it was spent.
    pub cost: Usd,
    /// Its files in the run directory: a candidate unit's (under `candidates/<id>/`), or the
    /// whole run's.
    #[serde(default)]
    pub files: Vec<RunFile>,
}

/// What a report did (a stale lease is a 409 instead).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(tag = "reported", rename_all = "snake_case")]
pub enum ReportResponse {
    Done { commit: String, recovered: bool },
    Failed { reason: String, retry_at: Option<Timestamp> },
    Released,
    UnitDone { evaluation_ready: bool },
    Refused { given_up: bool },
}

impl ReportResponse {
    /// `None` for a stale report.
    pub fn new(r: Reported) -> Option<Self> {
        Some(match r {
            Reported::Done { commit, recovered } => ReportResponse::Done { commit, recovered },
            Reported::Failed { reason, retry_at } => ReportResponse::Failed { reason, retry_at },
            Reported::Released => ReportResponse::Released,
            Reported::UnitDone { evaluation_ready } => ReportResponse::UnitDone { evaluation_ready },
            Reported::Refused { given_up } => ReportResponse::Refused { given_up },
            Reported::Stale => return None,
        })
    }

    pub fn into_reported(self) -> Reported {
        match self {
            ReportResponse::Done { commit, recovered } => Reported::Done { commit, recovered },
            ReportResponse::Failed { reason, retry_at } => Reported::Failed { reason, retry_at },
            ReportResponse::Released => Reported::Released,
            ReportResponse::UnitDone { evaluation_ready } => Reported::UnitDone { evaluation_ready },
            ReportResponse::Refused { given_up } => Reported::Refused { given_up },
        }
    }
}

/// `POST /api/v1/work/report-and-claim`: a report, then the next claim of a slot (a busy
/// worker's one round trip per unit).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(deny_unknown_fields)]
pub struct ReportAndClaimRequest {
    pub report: ReportRequest,
    pub claim: ClaimRequest,
}

/// What the report did, and what the claim found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct ReportAndClaimResponse {
    pub report: ReportResponse,
    pub claim: ClaimResponse,
}

/// `GET /api/v1/work/runs/{run_id}/files?plan=ID`: the files of a run the server holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct RunFiles {
    pub files: Vec<RunFile>,
}

/// A relative path inside a run directory, or why not.
pub fn run_path(path: &str) -> Result<PathBuf, String> {
    let p = Path::new(path);
    let normal = !path.is_empty()
        && path.len() <= 1024
        && !path.contains('\0')
        && p.components().all(|c| matches!(c, Component::Normal(_)));
    if normal {
        Ok(p.to_path_buf())
    } else {
        Err(format!("files: '{}' is not a path inside a run directory", path.escape_default()))
    }
}

/// Every file under `dir` (relative paths), for a worker that evaluates the run.
pub fn list_files(dir: &Path) -> std::io::Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)?.flatten() {
            let path = entry.path();
            let ft = entry.file_type()?;
            if ft.is_dir() {
                stack.push(path);
            } else if ft.is_file()
                && let Ok(rel) = path.strip_prefix(dir)
            {
                out.push((rel.to_string_lossy().into_owned(), path));
            }
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_paths_stay_inside() {
        assert!(run_path("candidates/c01/patch.diff").is_ok());
        for bad in ["", "/etc/passwd", "../x", "candidates/../../x", "./x", "a\0b"] {
            assert!(run_path(bad).is_err(), "{bad:?}");
        }
    }

    /// A worker that cannot read a unit's assignment refuses the unit by name and fence: the
    /// unit on the wire has more fields than the refusal names it by.
    #[test]
    fn an_unreadable_unit_is_refused_by_its_name_and_fence() {
        let answer = serde_json::json!({"status": "assigned", "assignment": {
            "lease": {"plan_id": "p", "task_id": "t", "attempt": 1, "max_attempts": 2, "fence": 3,
                      "worker": "w:1", "expires": 0, "reserved": "1", "retry_backoff_seconds": 5},
            "unit": {"name": "c02", "kind": "candidate", "fence": 7, "expires": 0, "run_id": "r", "base": "b"},
            "work": {"kind": "from_a_newer_server"}}});
        assert!(serde_json::from_value::<ClaimResponse>(answer.clone()).is_err());
        let granted = serde_json::from_value::<GrantedLeases>(answer).unwrap().assignment;
        assert_eq!(granted.unit_name(), "c02");
        let named = granted.lease_ref();
        assert_eq!((named.fence, named.unit), (3, Some(UnitRef { name: "c02".into(), fence: 7 })));
    }
}
