//! Every type that crosses the wire — the work protocol's assignments, reports and refusals,
//! plan administration's requests and answers, the event log, the workers' and tokens'
//! routes, and the core types they carry — comes back from JSON equal to what was sent, for
//! every variant, over generated values: maps keyed by numbers, empty lists and maps, text
//! with control and bidirectional characters, the largest and smallest numbers, floats,
//! `Some(null)`. Each value goes through text (`to_string`, `from_str`) and through a
//! `serde_json::Value` (`to_value`, `from_value`), as the server and its clients do.
//!
//! The values come from `#[derive(Arbitrary)]` beside each type (the `arbitrary` features),
//! so a field added to a type is generated, and tested, at once.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

use std::fmt::Debug;

use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};
use serde::Serialize;
use serde::de::DeserializeOwned;

use arbiter_core::event::{self, Event, EventData, EventKind};
use arbiter_core::ids::{CandidateId, RunId};
use arbiter_core::plan::event::{PlanEntry, PlanLogEntry, TaskEntry, UnitEntry};
use arbiter_core::time::Timestamp;
use arbiter_server::work_api::{ClaimResponse, GrantedLeases, WireAssignment};
use arbiter_store::plans::PlanEvent;

/// Cases per type: enough to meet every variant many times, few enough that the whole file
/// runs in a second or two.
const CASES: u32 = 64;

/// `v` through JSON text and through a `serde_json::Value`, each back to an equal value.
fn round_trip<T>(v: &T) -> Result<(), TestCaseError>
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let text = serde_json::to_string(v).map_err(|e| TestCaseError::fail(format!("to_string: {e}")))?;
    let back: T =
        serde_json::from_str(&text).map_err(|e| TestCaseError::fail(format!("from_str: {e}\n  text: {text}")))?;
    prop_assert_eq!(&back, v, "through text: {}", text);

    let value = serde_json::to_value(v).map_err(|e| TestCaseError::fail(format!("to_value: {e}")))?;
    let back: T = serde_json::from_value(value.clone())
        .map_err(|e| TestCaseError::fail(format!("from_value: {e}\n  value: {value}")))?;
    prop_assert_eq!(&back, v, "through a Value: {}", value);
    Ok(())
}

/// Runs `test` on `CASES` values of `strategy` (made on the same thread), on a thread with
/// a stack deep enough for the generators of the largest types in a debug build.
fn property<S, F>(strategy: impl FnOnce() -> S + Send + 'static, test: F)
where
    S: Strategy,
    F: Fn(S::Value) -> Result<(), TestCaseError> + Send + 'static,
{
    let thread = std::thread::Builder::new().stack_size(64 << 20).spawn(move || {
        let config = ProptestConfig { cases: CASES, failure_persistence: None, ..ProptestConfig::default() };
        if let Err(e) = TestRunner::new(config).run(&strategy(), test) {
            panic!("{e}");
        }
    });
    if let Err(panic) = thread.expect("a thread for the property").join() {
        std::panic::resume_unwind(panic);
    }
}

/// One property test per type, `name: Type`: every value of it round-trips.
macro_rules! round_trips {
    ($($name:ident: $ty:ty,)*) => {
        $(
            #[test]
            fn $name() {
                property(any::<$ty>, |v| round_trip(&v));
            }
        )*
    };
}

// The work protocol (`/api/v1/work/...`): claims and assignments, heartbeats, charges,
// reports (refusals among them), report-and-claim, a run's files.
round_trips! {
    claim_request: arbiter_server::work_api::ClaimRequest,
    claim_response: arbiter_server::work_api::ClaimResponse,
    wire_assignment: arbiter_server::work_api::WireAssignment,
    wire_unit: arbiter_server::work_api::WireUnit,
    wire_work: arbiter_server::work_api::WireWork,
    lost_candidate: arbiter_server::work_api::LostCandidate,
    heartbeat_request: arbiter_server::work_api::HeartbeatRequest,
    heartbeat_response: arbiter_server::work_api::HeartbeatResponse,
    charge_request: arbiter_server::work_api::ChargeRequest,
    wire_retry: arbiter_server::work_api::WireRetry,
    wire_verdict: arbiter_server::work_api::WireVerdict,
    run_file: arbiter_server::work_api::RunFile,
    report_request: arbiter_server::work_api::ReportRequest,
    report_response: arbiter_server::work_api::ReportResponse,
    report_and_claim_request: arbiter_server::work_api::ReportAndClaimRequest,
    report_and_claim_response: arbiter_server::work_api::ReportAndClaimResponse,
    run_files: arbiter_server::work_api::RunFiles,
    lease_ref: arbiter_runner::coordinator::LeaseRef,
    unit_ref: arbiter_runner::coordinator::UnitRef,
    lease: arbiter_store::plans::Lease,
}

/// One property test per request body (`name: Type`): the server's own reading of a body
/// (`ApiJson`: serde_path_to_error over the bytes, then the NUL check) gives back what the
/// client sent, or refuses a NUL character (which no store keeps) by name.
macro_rules! requests {
    ($($name:ident: $ty:ty,)*) => {
        $(
            #[test]
            fn $name() {
                property(any::<$ty>, |v| server_reads(&v));
            }
        )*
    };
}

fn server_reads<T>(v: &T) -> Result<(), TestCaseError>
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let body = serde_json::to_vec(v).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let text = String::from_utf8_lossy(&body);
    match arbiter_server::error::parse_json::<T>(&body) {
        Ok(back) => prop_assert_eq!(&back, v, "{}", text),
        Err(e) => prop_assert!(text.contains("\\u0000") && e.message.contains("NUL"), "{:?}: {}", e, text),
    }
    Ok(())
}

requests! {
    server_reads_claim_request: arbiter_server::work_api::ClaimRequest,
    server_reads_heartbeat_request: arbiter_server::work_api::HeartbeatRequest,
    server_reads_charge_request: arbiter_server::work_api::ChargeRequest,
    server_reads_report_request: arbiter_server::work_api::ReportRequest,
    server_reads_report_and_claim_request: arbiter_server::work_api::ReportAndClaimRequest,
    server_reads_import_request: arbiter_server::plan_api::ImportRequest,
    server_reads_create_request: arbiter_server::plan_api::CreateRequest,
    server_reads_budget_request: arbiter_server::plan_api::BudgetRequest,
    server_reads_reset_request: arbiter_server::plan_api::ResetRequest,
    server_reads_retry_request: arbiter_server::plan_api::RetryRequest,
    server_reads_push_request: arbiter_server::plan_api::PushRequest,
    server_reads_register_request: arbiter_server::api::RegisterRequest,
    server_reads_token_request: arbiter_server::api::TokenRequest,
}

// What an assignment carries: the task, the plan's header and the run settings.
round_trips! {
    task_spec: arbiter_core::plan::TaskSpec,
    plan_spec: arbiter_core::plan::PlanSpec,
    run_settings: arbiter_core::settings::RunSettings,
    runner_spec: arbiter_core::settings::RunnerSpec,
    apply_mode: arbiter_core::settings::ApplyMode,
    candidate_option: arbiter_core::strategy::CandidateOption,
    usd: arbiter_core::money::Usd,
    timestamp: arbiter_core::time::Timestamp,
}

// Plan administration (`/api/v1/plans...`): requests and answers.
round_trips! {
    import_request: arbiter_server::plan_api::ImportRequest,
    create_request: arbiter_server::plan_api::CreateRequest,
    budget_request: arbiter_server::plan_api::BudgetRequest,
    reset_request: arbiter_server::plan_api::ResetRequest,
    retry_request: arbiter_server::plan_api::RetryRequest,
    retried: arbiter_server::plan_api::Retried,
    push_request: arbiter_server::plan_api::PushRequest,
    cancelled: arbiter_server::plan_api::Cancelled,
    plan_list: arbiter_server::plan_api::PlanList,
    event_list: arbiter_server::plan_api::EventList,
    imported: arbiter_runner::plan_admin::Imported,
    plan_details: arbiter_runner::plan_admin::PlanDetails,
    plan_view: arbiter_store::plans::PlanView,
    plan_summary: arbiter_store::plans::PlanSummary,
    reset_preview: arbiter_runner::plan_admin::ResetPreview,
    reset_outcome: arbiter_runner::plan_admin::ResetOutcome,
    budget: arbiter_core::budget::Budget,
    pushed: arbiter_core::plan::event::Pushed,
    run_overview: arbiter_runner::run_record::RunOverview,
}

// The event log (`/api/v1/plans/{plan}/events`, the event stream's frames): the stored
// events and every typed entry.
round_trips! {
    plan_event: arbiter_store::plans::PlanEvent,
    plan_log_entry: arbiter_core::plan::event::PlanLogEntry,
    plan_entry: arbiter_core::plan::event::PlanEntry,
    task_entry: arbiter_core::plan::event::TaskEntry,
    unit_entry: arbiter_core::plan::event::UnitEntry,
}

// Workers, tokens, artifacts and errors (`/api/v1/workers`, `/api/v1/tokens`, ...).
round_trips! {
    error_body: arbiter_server::api::ErrorBody,
    register_request: arbiter_server::api::RegisterRequest,
    worker_credentials: arbiter_server::api::WorkerCredentials,
    worker_view: arbiter_server::api::WorkerView,
    worker_list: arbiter_server::api::WorkerList,
    artifact_stored: arbiter_server::api::ArtifactStored,
    token_request: arbiter_server::api::TokenRequest,
    token_created: arbiter_server::api::TokenCreated,
    token_view: arbiter_server::api::TokenView,
    token_list: arbiter_server::api::TokenList,
}

// The run directory's files, which cross the wire as artifacts: a candidate unit's results
// go to the worker that evaluates them, a whole run's to the server that shows it.
round_trips! {
    run_state: arbiter_core::artifact::RunState,
    settings_artifact: arbiter_core::artifact::SettingsArtifact,
    baseline_artifact: arbiter_core::artifact::Baseline,
    evidence: arbiter_core::artifact::Evidence,
    runner_summary: arbiter_core::artifact::RunnerSummary,
    ranking_artifact: arbiter_core::artifact::RankingArtifact,
    agreement_artifact: arbiter_core::artifact::AgreementArtifact,
    selection_artifact: arbiter_core::artifact::SelectionArtifact,
    apply_record: arbiter_core::artifact::ApplyRecord,
    agent_outcome: arbiter_core::artifact::AgentOutcome,
    patch_evidence: arbiter_core::artifact::PatchEvidence,
    command_outcome: arbiter_core::gate::CommandOutcome,
    gate_result: arbiter_core::gate::GateResult,
    gate_summary: arbiter_core::gate::GateSummary,
    violation: arbiter_core::selection::Violation,
    ranked_candidate: arbiter_core::selection::RankedCandidate,
    cost_summary: arbiter_core::cost::CostSummary,
    call_record: arbiter_core::cost::CallRecord,
    cross_test_matrix: arbiter_core::crosstest::CrossTestMatrix,
    pair_record: arbiter_core::pairwise::PairRecord,
    review_artifact: arbiter_core::review::ReviewArtifact,
    manifest: arbiter_core::manifest::Manifest,
    run_event: arbiter_core::event::Event,
}

/// One property test per payload of a run event (`name: Type`): the event that carries it
/// round-trips, and reads back as the same payload.
macro_rules! run_event_payloads {
    ($($name:ident: $ty:ident,)*) => {
        $(
            #[test]
            fn $name() {
                property(any::<event::$ty>, |payload| run_event_payload(&payload));
            }
        )*

        /// The kinds whose payload is tested above.
        const PAYLOADS_TESTED: &[EventKind] = &[$(<event::$ty as EventData>::KIND,)*];
    };
}

/// `payload` in an event of its kind: the event round-trips, and its payload reads back.
fn run_event_payload<T: EventData + PartialEq + Debug>(payload: &T) -> Result<(), TestCaseError> {
    let event = Event {
        seq: u64::MAX,
        run_id: RunId::new(Timestamp(0), 0),
        at: Timestamp(i64::MIN),
        kind: T::KIND,
        candidate: Some(CandidateId::from_index(0)),
        data: serde_json::to_value(payload).map_err(|e| TestCaseError::fail(e.to_string()))?,
    };
    round_trip(&event)?;
    let text = serde_json::to_string(&event).unwrap();
    let back: Event = serde_json::from_str(&text).unwrap();
    let read = back.data_as::<T>();
    prop_assert_eq!(read.as_ref(), Some(payload), "{}", text);
    Ok(())
}

run_event_payloads! {
    run_started: RunStarted,
    run_resumed: RunResumed,
    leftovers_pruned: LeftoversPruned,
    baseline_started: BaselineStarted,
    baseline_finished: BaselineFinished,
    candidate_queued: CandidateQueued,
    candidate_preparing: CandidatePreparing,
    worktree_created: WorktreeCreated,
    include_copied: IncludeCopied,
    setup_finished: SetupFinished,
    agent_started: AgentStarted,
    agent_finished: AgentFinished,
    model_fallback: ModelFallback,
    patch_captured: PatchCaptured,
    gate_finished: GateFinished,
    gates_sealed: GatesSealed,
    repair_round: RepairRound,
    candidate_finished: CandidateFinished,
    judge_decision: JudgeDecision,
    review_decision: ReviewDecision,
    cross_tests: CrossTests,
    escalation_stopped: EscalationStopped,
    budget_exceeded: BudgetExceeded,
    selection_made: SelectionMade,
    materialized: Materialized,
    materialize_failed: MaterializeFailed,
    worktrees_removed: WorktreesRemoved,
    warning: Warning,
    run_interrupted: RunInterrupted,
    run_finished: RunFinished,
}

/// Every kind of run event has its payload tested above, but `applied` (a kind no run writes).
/// The kinds are serde's own list (its error for an unknown kind names them all), so a new
/// kind fails here until its payload is tested.
#[test]
fn every_run_event_kind_is_tested() {
    let unknown = serde_json::from_value::<EventKind>(serde_json::json!("?")).unwrap_err().to_string();
    let (_, names) = unknown.split_once("expected one of ").expect(&unknown);
    let kinds: Vec<EventKind> = names
        .split(", ")
        .map(|name| serde_json::from_value(serde_json::json!(name.trim_matches('`'))).expect(name))
        .collect();
    assert!(kinds.len() > 20, "{unknown}");
    for kind in kinds {
        assert!(kind == EventKind::Applied || PAYLOADS_TESTED.contains(&kind), "no payload test for {kind:?}");
    }
}

/// An event as the store keeps it (its entry's `kind` and `data`) and as the event routes
/// send it: read back, it is the same entry, whichever family.
fn stored(entry: &PlanLogEntry) -> PlanEvent {
    let (kind, data) = entry.to_parts();
    PlanEvent { id: 1, plan_id: "p".into(), task_id: None, attempt: None, kind, at: Timestamp(0), data }
}

#[test]
fn every_entry_survives_the_event_log() {
    let entries = || {
        prop_oneof![
            any::<PlanEntry>().prop_map(PlanLogEntry::from),
            any::<TaskEntry>().prop_map(PlanLogEntry::from),
            any::<UnitEntry>().prop_map(PlanLogEntry::from),
        ]
    };
    property(entries, |entry| {
        let event = stored(&entry);
        round_trip(&event)?;
        let text = serde_json::to_string(&event).unwrap();
        let back: PlanEvent = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(back.entry(), Some(entry), "{}", text);
        Ok(())
    });
}

/// A worker that cannot read an assignment refuses it by the leases it grants: whatever
/// else the assignment holds, they read, and they name the unit with its fence.
#[test]
fn an_unreadable_assignment_names_its_leases() {
    property(any::<WireAssignment>, |assignment| {
        let lease = assignment.lease.clone();
        let unit = assignment.unit.clone();
        let mut answer = serde_json::to_value(ClaimResponse::Assigned { assignment: Box::new(assignment) }).unwrap();
        // What a newer server may send that this worker cannot read.
        answer["assignment"]["work"] = serde_json::json!({"kind": "from_a_newer_server"});
        answer["assignment"]["settings"] = serde_json::json!(42);
        prop_assert!(serde_json::from_value::<ClaimResponse>(answer.clone()).is_err());

        let granted = serde_json::from_value::<GrantedLeases>(answer.clone())
            .map_err(|e| TestCaseError::fail(format!("{e}\n  answer: {answer}")))?
            .assignment;
        let named = granted.lease_ref();
        prop_assert_eq!(&named.plan_id, &lease.plan_id);
        prop_assert_eq!(&named.task_id, &lease.task_id);
        prop_assert_eq!(named.fence, lease.fence);
        prop_assert_eq!(&named.worker, &lease.worker);
        prop_assert_eq!(named.unit.map(|u| (u.name, u.fence)), unit.as_ref().map(|u| (u.name.clone(), u.fence)));
        prop_assert_eq!(granted.unit_name(), unit.map_or_else(|| "tournament".to_string(), |u| u.name));
        Ok(())
    });
}

/// The class of bug these tests are for is caught: an internally tagged enum holding a map
/// keyed by numbers (as `WireWork` once did) writes the keys as text, and its buffered
/// content cannot read them back.
#[test]
fn a_number_keyed_map_in_a_tagged_enum_is_caught() {
    #[derive(Debug, PartialEq, Serialize, serde::Deserialize)]
    #[serde(tag = "kind", rename_all = "snake_case")]
    enum Work {
        Evaluation { lost: std::collections::BTreeMap<usize, String> },
    }
    let strategy = || proptest::collection::btree_map(any::<usize>(), arbiter_core::arbitrary::text(), 1..4);
    let thread = std::thread::spawn(move || {
        let mut runner = TestRunner::new(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() });
        runner.run(&strategy(), |lost| round_trip(&Work::Evaluation { lost })).unwrap_err().to_string()
    });
    let failure = thread.join().unwrap();
    assert!(failure.contains("invalid type: string"), "{failure}");
}
