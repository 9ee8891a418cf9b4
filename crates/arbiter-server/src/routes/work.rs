//! The work protocol (worker token): claims as long polls, heartbeats renewing every lease
//! a worker names, charges as they are incurred, reports with their files, and the files
//! of a run a worker evaluates.
//!
//! - `POST /api/v1/work/claim` → `{status: assigned, assignment}`, `{status: idle}` (nothing
//!   within `wait_ms`), `{status: finished}` (the plan asked for is finished).
//! - `POST /api/v1/work/heartbeat` → `{renewed: [bool]}`.
//! - `POST /api/v1/work/charge` → 204.
//! - `POST /api/v1/work/report` → what the report did; 409 `stale_lease` when the lease was
//!   lost meanwhile (its cost is charged all the same).
//! - `POST /api/v1/work/report-and-claim` → `{report, claim}`: a report, then the slot's next
//!   claim, in one round trip (409 as a report's, claiming nothing).
//! - `GET /api/v1/work/runs/{run_id}/files?plan=ID` → `{files: [{path, sha256, size}]}`, and
//!   `GET /api/v1/work/runs/{run_id}/file?plan=ID&path=P` → the bytes: only for a worker
//!   holding the run's evaluation.
//!
//! A lease is granted to `<worker id>:<slot>`; a worker naming another worker's lease gets
//! 403 `not_your_lease`.

use std::time::{Duration, Instant};

use axum::Json;
use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::json;

use arbiter_core::ids::RunId;
use arbiter_runner::coordinator::{Capabilities, Claim, Coordinator, CoordinatorError, Held, LeaseRef, Verdict};
use arbiter_store::plans::Retry;
use arbiter_store::units::UnitKind;
use arbiter_store::workers::WorkerRecord;

use crate::auth::WorkerAuth;
use crate::error::{ApiError, ApiJson};
use crate::metrics::Completion;
use crate::state::AppState;
use crate::work::{WorkPlane, place_files, report_scope};
use crate::work_api::*;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/work/claim", post(claim))
        .route("/api/v1/work/heartbeat", post(heartbeat))
        .route("/api/v1/work/charge", post(charge))
        .route("/api/v1/work/report", post(report))
        .route("/api/v1/work/report-and-claim", post(report_and_claim))
        .route("/api/v1/work/runs/{run_id}/files", get(run_files))
        .route("/api/v1/work/runs/{run_id}/file", get(run_file))
}

fn plane(state: &AppState) -> Result<std::sync::Arc<WorkPlane>, ApiError> {
    state.work.clone().ok_or_else(|| {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "not_ready", "this server does not hand out work")
    })
}

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_request", message)
}

fn stale() -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "stale_lease",
        "this lease is no longer held: it expired and the work was handed to another worker, or the plan was cancelled or reset; stop this work (its cost was recorded)",
    )
}

/// A coordinator failure as an answer.
fn coordinator_error(e: CoordinatorError) -> ApiError {
    match e {
        CoordinatorError::Refused(why) => ApiError::new(StatusCode::CONFLICT, "conflict", why),
        CoordinatorError::Branch(b) if b.is_usage() => ApiError::new(StatusCode::CONFLICT, "conflict", b.to_string()),
        other => ApiError::internal("the work protocol", other),
    }
}

/// What a worker may run: what it registered.
fn capabilities(worker: &WorkerRecord) -> Capabilities {
    crate::work::advertised(&worker.capabilities.runners, &worker.capabilities.backends)
}

/// 403 unless the lease was granted to one of this worker's slots.
fn own(worker: &WorkerRecord, lease: &LeaseRef) -> Result<(), ApiError> {
    let ours = lease.worker.strip_prefix(worker.id.as_str()).is_some_and(|rest| rest.starts_with(':'));
    if ours {
        Ok(())
    } else {
        Err(ApiError::forbidden(
            "not_your_lease",
            format!("worker {} does not hold this lease; a worker may act only on work it claimed", worker.name),
        ))
    }
}

/// The slot names a claimer: short and safe.
fn check_slot(slot: &str) -> Result<(), ApiError> {
    if slot.len() <= 32 && crate::routes::safe_id(slot) {
        Ok(())
    } else {
        Err(invalid("slot: 1 to 32 of letters, digits, '.', '_', '-' (not starting with '.' or '-')"))
    }
}

async fn claim(
    worker: WorkerAuth,
    State(state): State<AppState>,
    ApiJson(req): ApiJson<ClaimRequest>,
) -> Result<Json<ClaimResponse>, ApiError> {
    let plane = plane(&state)?;
    check_claim(&req)?;
    Ok(Json(claim_for(&state, &plane, worker.worker(), &req).await?))
}

/// 422 unless the claim names a valid slot and plan.
fn check_claim(req: &ClaimRequest) -> Result<(), ApiError> {
    check_slot(&req.slot)?;
    if let Some(plan) = &req.plan
        && !crate::routes::safe_id(plan)
    {
        return Err(invalid("plan: not a plan id"));
    }
    Ok(())
}

/// A checked claim: work for the worker's slot, or nothing within its wait.
async fn claim_for(
    state: &AppState,
    plane: &WorkPlane,
    w: &WorkerRecord,
    req: &ClaimRequest,
) -> Result<ClaimResponse, ApiError> {
    let claimer = format!("{}:{}", w.id, req.slot);
    let caps = capabilities(w);
    if plane.seen(&w.id) {
        let _ = state.registry.touch(&w.id, None, &json!({"claiming": req.slot}), state.now()).await;
    }
    let deadline = Instant::now() + Duration::from_millis(req.wait_ms.min(MAX_CLAIM_WAIT_MS));
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let claimed = tokio::select! {
            c = plane.coordinator.claim(&claimer, &caps, req.plan.as_deref(), remaining) => c,
            _ = state.stopping.cancelled() => return Ok(ClaimResponse::Idle),
        };
        match claimed.map_err(coordinator_error)? {
            Claim::Assigned(a) => {
                state.metrics.claimed();
                state.plan_events.notify_waiters();
                let ttl = plane.coordinator.lease.as_millis() as u64;
                tracing::info!(worker = %w.name, plan = %a.plan.id, task = %a.task.id, unit = %a.work.name(), "claimed");
                return Ok(ClaimResponse::Assigned { assignment: Box::new(WireAssignment::new(&a, ttl)) });
            }
            Claim::Finished => return Ok(ClaimResponse::Finished),
            Claim::Idle | Claim::Refused { .. } if Instant::now() >= deadline => return Ok(ClaimResponse::Idle),
            Claim::Idle | Claim::Refused { .. } => {}
        }
    }
}

/// What a worker's lease holds, found again in the store.
async fn held(plane: &WorkPlane, worker: &WorkerRecord, lease: &LeaseRef) -> Result<Held, ApiError> {
    own(worker, lease)?;
    plane.coordinator.held_of(lease).await.map_err(|e| match e {
        CoordinatorError::Refused(why) => ApiError::not_found(why),
        other => coordinator_error(other),
    })
}

async fn heartbeat(
    worker: WorkerAuth,
    State(state): State<AppState>,
    ApiJson(req): ApiJson<HeartbeatRequest>,
) -> Result<Json<HeartbeatResponse>, ApiError> {
    let plane = plane(&state)?;
    let w = worker.worker();
    if req.leases.len() > 1024 {
        return Err(invalid("leases: at most 1024 in one heartbeat"));
    }
    let mut renewed = Vec::with_capacity(req.leases.len());
    for lease in &req.leases {
        let held = held(&plane, w, lease).await?;
        renewed.push(plane.coordinator.renew(&held.lease, held.unit.as_ref()).await.map_err(coordinator_error)?);
    }
    let work: Vec<_> = req
        .leases
        .iter()
        .map(|l| json!({"plan": l.plan_id, "task": l.task_id, "unit": l.unit.as_ref().map(|u| u.name.clone())}))
        .collect();
    let _ = state.registry.touch(&w.id, None, &json!(work), state.now()).await;
    Ok(Json(HeartbeatResponse { renewed }))
}

async fn charge(
    worker: WorkerAuth,
    State(state): State<AppState>,
    ApiJson(req): ApiJson<ChargeRequest>,
) -> Result<StatusCode, ApiError> {
    let plane = plane(&state)?;
    if req.amount < arbiter_core::money::Usd::ZERO {
        return Err(invalid("amount: a cost is not negative"));
    }
    let held = held(&plane, worker.worker(), &req.lease).await?;
    plane.coordinator.charge_to(&held.lease, req.amount).await.map_err(coordinator_error)?;
    state.plan_events.notify_waiters();
    Ok(StatusCode::NO_CONTENT)
}

async fn report(
    worker: WorkerAuth,
    State(state): State<AppState>,
    ApiJson(req): ApiJson<ReportRequest>,
) -> Result<Json<ReportResponse>, ApiError> {
    let plane = plane(&state)?;
    Ok(Json(report_for(&state, &plane, worker.worker(), req).await?))
}

/// A report, then the slot's next claim (one round trip for a busy worker). The claim is
/// checked before the report is taken; a stale report is 409 and claims nothing.
async fn report_and_claim(
    worker: WorkerAuth,
    State(state): State<AppState>,
    ApiJson(req): ApiJson<ReportAndClaimRequest>,
) -> Result<Json<ReportAndClaimResponse>, ApiError> {
    let plane = plane(&state)?;
    check_claim(&req.claim)?;
    let w = worker.worker();
    let report = report_for(&state, &plane, w, req.report).await?;
    let claim = claim_for(&state, &plane, w, &req.claim).await?;
    Ok(Json(ReportAndClaimResponse { report, claim }))
}

/// How the work of the worker's lease ended: recorded, with its files placed.
async fn report_for(
    state: &AppState,
    plane: &WorkPlane,
    worker: &WorkerRecord,
    req: ReportRequest,
) -> Result<ReportResponse, ApiError> {
    if req.cost < arbiter_core::money::Usd::ZERO {
        return Err(invalid("cost: a cost is not negative"));
    }
    let held = held(plane, worker, &req.lease).await?;
    let verdict_run = match &req.verdict {
        WireVerdict::Won { run_id, .. } => Some(run_id.as_str()),
        WireVerdict::Failed { run_id, .. } => run_id.as_deref(),
        _ => None,
    };
    // A lost lease's files are not written: they could overwrite the newer holder's. (A
    // report without files is refused by the store itself when its lease was lost.)
    let with_files = !req.files.is_empty() || matches!(req.verdict, WireVerdict::Won { .. });
    let mut patch = None;
    if with_files && plane.coordinator.renew(&held.lease, held.unit.as_ref()).await.map_err(coordinator_error)? {
        let (run, prefix) = report_scope(&held, verdict_run).map_err(invalid)?;
        let workspace = plane.repositories.workspace_for(&held.plan).await.map_err(coordinator_error)?;
        let dir = workspace.run_dir(&run);
        place_files(state, &dir, &prefix, &req.files).await.map_err(invalid)?;
        if let WireVerdict::Won { winner, .. } = &req.verdict {
            let file = run_path(&format!("candidates/{winner}/patch.diff")).map_err(invalid)?;
            let path = dir.join(file);
            if !path.is_file() {
                return Err(invalid(format!(
                    "files: the winner's patch candidates/{winner}/patch.diff is not among the run's files"
                )));
            }
            patch = Some(path);
        }
    }
    let verdict = match req.verdict {
        WireVerdict::Won { run_id, winner } => match patch {
            Some(patch) => Verdict::Won { run_id, winner, patch },
            // Not held any more: reported so the store records the refusal and the cost.
            None => Verdict::Failed {
                reason: "its lease was lost".into(),
                retry: Retry::AfterBackoff,
                run_id: Some(run_id),
            },
        },
        WireVerdict::CandidateDone { status } => Verdict::CandidateDone { status },
        WireVerdict::Failed { reason, retry, run_id } => Verdict::Failed { reason, retry: retry.into(), run_id },
        WireVerdict::Released { reason } => Verdict::Released { reason },
        WireVerdict::Refused { reason } => {
            tracing::warn!(
                worker = %worker.name, plan = %held.plan.id, task = %held.task.id,
                unit = %held.unit.as_ref().map_or("tournament", |u| u.name.as_str()), reason = %reason,
                "refused: the worker could not run its work"
            );
            Verdict::Refused { reason }
        }
    };
    let completion = match &verdict {
        Verdict::Won { .. } | Verdict::CandidateDone { .. } => Completion::Succeeded,
        Verdict::Failed { .. } | Verdict::Refused { .. } => Completion::Failed,
        Verdict::Released { .. } => Completion::Released,
    };
    let reported = plane.coordinator.report_held(&held, verdict, req.cost).await.map_err(coordinator_error)?;
    state.plan_events.notify_waiters();
    match ReportResponse::new(reported) {
        Some(answer) => {
            state.metrics.completed(completion);
            Ok(answer)
        }
        None => Err(stale()),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RunQuery {
    plan: String,
    #[serde(default)]
    path: Option<String>,
}

/// The run directory a worker evaluates (it must hold the run's evaluation).
async fn evaluated_run(
    state: &AppState,
    worker: &WorkerRecord,
    run_id: &str,
    plan: &str,
) -> Result<std::path::PathBuf, ApiError> {
    let plane = plane(state)?;
    let run = RunId::parse(run_id).map_err(|_| invalid(format!("'{run_id}' is not a run id")))?;
    if !crate::routes::safe_id(plan) {
        return Err(invalid("plan: not a plan id"));
    }
    let units = plane.queue.running_units(plan).await?;
    let holds = units.iter().any(|u| {
        u.run_id == run_id
            && u.kind == UnitKind::Evaluation
            && u.worker
                .as_deref()
                .is_some_and(|w| w.strip_prefix(worker.id.as_str()).is_some_and(|r| r.starts_with(':')))
    });
    if !holds {
        return Err(ApiError::forbidden(
            "not_your_lease",
            format!("worker {} does not hold the evaluation of run {run_id}", worker.name),
        ));
    }
    let record =
        plane.queue.plan_record(plan).await?.ok_or_else(|| ApiError::not_found(format!("no plan named '{plan}'")))?;
    let workspace = plane.repositories.workspace_for(&record.header).await.map_err(coordinator_error)?;
    Ok(workspace.run_dir(&run))
}

async fn run_files(
    worker: WorkerAuth,
    State(state): State<AppState>,
    Path(run_id): Path<String>,
    Query(q): Query<RunQuery>,
) -> Result<Json<RunFiles>, ApiError> {
    let dir = evaluated_run(&state, worker.worker(), &run_id, &q.plan).await?;
    let listed = tokio::task::spawn_blocking(move || {
        list_files(&dir).map(|files| {
            files
                .into_iter()
                .filter_map(|(path, full)| {
                    let (sha256, size) = arbiter_runner::rundir::digest_file(&full).ok()?;
                    Some(RunFile { path, sha256, size })
                })
                .collect::<Vec<_>>()
        })
    })
    .await
    .map_err(|e| ApiError::internal("listing a run's files", e))?;
    let files = match listed {
        Ok(files) => files,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(ApiError::internal("listing a run's files", e)),
    };
    Ok(Json(RunFiles { files }))
}

async fn run_file(
    worker: WorkerAuth,
    State(state): State<AppState>,
    Path(run_id): Path<String>,
    Query(q): Query<RunQuery>,
) -> Result<Response, ApiError> {
    let dir = evaluated_run(&state, worker.worker(), &run_id, &q.plan).await?;
    let rel = run_path(q.path.as_deref().unwrap_or_default()).map_err(invalid)?;
    let file =
        tokio::fs::File::open(dir.join(rel)).await.map_err(|_| ApiError::not_found("no such file in the run"))?;
    let stream = tokio_util::io::ReaderStream::new(file);
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], Body::from_stream(stream)).into_response())
}
