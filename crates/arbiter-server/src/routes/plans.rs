//! Plan administration (admin token; the `GET` routes of plans and events also take a
//! read-only access token): what `arbiter plan … --server URL` does, over the
//! server's [`PlanAdmin`] ([`AppState::admin`]; 503 `no_plan_admin` when the server has
//! none).
//!
//! - `GET /api/v1/plans` → `{plans: [...]}`.
//! - `POST /api/v1/plans` (an [`ImportRequest`]) → 201 (the plan was created) or 200
//!   `{report, adopted_branch, verdicts}`.
//! - `GET /api/v1/plans/{plan}` → the plan, its tasks and attempts.
//! - `PUT /api/v1/plans/{plan}` (a [`CreateRequest`]) → 201 `{id}`: an empty plan.
//! - `GET /api/v1/plans/{plan}/events?after=N&limit=M` → `{events: [...]}`.
//! - `POST /api/v1/plans/{plan}/budget` `{limit_usd}` → the budget.
//! - `POST /api/v1/plans/{plan}/cancel` → `{cancelled}`.
//! - `GET /api/v1/plans/{plan}/reset?keep_branch=BOOL` → what a reset would do;
//!   `POST /api/v1/plans/{plan}/reset` `{hard, keep_branch}` → what it did.
//! - `POST /api/v1/plans/{plan}/retry` `{task}` → `{task, status}` (the task in the body:
//!   task ids may hold `/`).
//! - `POST /api/v1/plans/{plan}/push` `{remote}` → `{remote, url, branch, commit,
//!   up_to_date}`: the integration branch pushed to a remote of the plan's repository
//!   (`origin` by default; never forced: 409 when the remote's branch went elsewhere).
//!
//! - `GET /api/v1/plans/{plan}/runs/{run}` (read-only tokens too) → the run of one of the
//!   plan's tasks at a glance (`RunOverview`: state, candidates, gates, decision), what
//!   `arbiter dashboard --run` shows.
//!
//! `{plan}` must be a plan id (letters, digits, `.`, `_`, `-`, not starting with `.` or `-`,
//! no `..`): anything else is 404, like a plan that does not exist. The port's errors map
//! to 404 `not_found`, 409 `conflict`, 422 `invalid_request` (a plan or repository that
//! cannot be used: a relative or missing path, a branch that may not be used), and 500.
//! Every change wakes the event streams.

use std::sync::Arc;

use axum::extract::rejection::QueryRejection;
use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;

use arbiter_core::budget::Budget;
use arbiter_core::plan::check::plan_id_ok;
use arbiter_runner::plan_admin::{
    AdminError, EVENTS_PAGE, Imported, PlanAdmin, PlanDetails, ResetOutcome, ResetPreview,
};
use arbiter_runner::plan_push::{self, Pushed};

use crate::auth::{AdminAuth, ReaderAuth};
use crate::error::{ApiError, ApiJson};
use crate::plan_api::{
    BudgetRequest, Cancelled, CreateRequest, EventList, ImportRequest, PlanList, PushRequest, ResetRequest, Retried,
    RetryRequest,
};
use crate::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/plans", get(list).post(import))
        .route("/api/v1/plans/{plan}", get(view).put(create))
        .route("/api/v1/plans/{plan}/events", get(events))
        .route("/api/v1/plans/{plan}/budget", post(budget))
        .route("/api/v1/plans/{plan}/cancel", post(cancel))
        .route("/api/v1/plans/{plan}/reset", get(reset_preview).post(reset))
        .route("/api/v1/plans/{plan}/retry", post(retry))
        .route("/api/v1/plans/{plan}/push", post(push))
        .route("/api/v1/plans/{plan}/runs/{run}", get(run_overview))
}

/// The server's plan administrator, or 503.
fn admin(state: &AppState) -> Result<Arc<dyn PlanAdmin>, ApiError> {
    state.admin.clone().ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "no_plan_admin",
            "this server does not administer plans: it was started without a plan administrator (`arbiter serve` has one)",
        )
    })
}

/// The port's error as an answer.
pub fn admin_error(e: AdminError) -> ApiError {
    match e {
        AdminError::NotFound(m) => ApiError::not_found(m),
        AdminError::Conflict(m) => ApiError::new(StatusCode::CONFLICT, "conflict", m),
        AdminError::Invalid(m) => ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_request", m),
        AdminError::Environment(m) => ApiError::internal("plan administration", m),
    }
}

fn invalid(message: String) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_request", message)
}

/// The `{plan}` of the path: a plan id, else 404 (as for a plan that does not exist).
pub struct PlanId(pub String);

impl FromRequestParts<AppState> for PlanId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let Path(id) = Path::<String>::from_request_parts(parts, state).await.map_err(|e| {
            ApiError::bad_request("invalid_path", format!("{}; a plan id goes in the path", e.body_text()))
        })?;
        if !plan_id_ok(&id) {
            let shown: String = id.chars().take(200).collect();
            return Err(admin_error(AdminError::no_plan(&shown.escape_default().to_string())));
        }
        Ok(PlanId(id))
    }
}

fn query<T>(q: Result<Query<T>, QueryRejection>, takes: &str) -> Result<T, ApiError> {
    q.map(|Query(q)| q)
        .map_err(|e| ApiError::bad_request("invalid_query", format!("{}; this route takes {takes}", e.body_text())))
}

/// Event streams wake at once.
fn changed(state: &AppState) {
    state.plan_events.notify_waiters();
}

async fn list(_: ReaderAuth, State(state): State<AppState>) -> Result<Json<PlanList>, ApiError> {
    let plans = admin(&state)?.list().await.map_err(admin_error)?;
    Ok(Json(PlanList { plans }))
}

async fn import(
    _: AdminAuth,
    State(state): State<AppState>,
    ApiJson(req): ApiJson<ImportRequest>,
) -> Result<(StatusCode, Json<Imported>), ApiError> {
    let admin = admin(&state)?;
    let import = req.into_import().map_err(invalid)?;
    let imported = admin.import(&import).await.map_err(admin_error)?;
    changed(&state);
    let r = &imported.report;
    tracing::info!(
        plan = %import.spec.id, added = r.added.len(), updated = r.updated.len(), skipped = r.skipped.len(),
        apply = import.apply.is_some(), "plan imported"
    );
    let status = if r.created_plan { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(imported)))
}

async fn view(_: ReaderAuth, State(state): State<AppState>, PlanId(id): PlanId) -> Result<Json<PlanDetails>, ApiError> {
    Ok(Json(admin(&state)?.view(&id).await.map_err(admin_error)?))
}

async fn create(
    _: AdminAuth,
    State(state): State<AppState>,
    PlanId(id): PlanId,
    ApiJson(req): ApiJson<CreateRequest>,
) -> Result<(StatusCode, Json<serde_json::Value>), ApiError> {
    let admin = admin(&state)?;
    admin.create(&req.into_plan(id.clone())).await.map_err(admin_error)?;
    changed(&state);
    tracing::info!(plan = %id, "plan created");
    Ok((StatusCode::CREATED, Json(serde_json::json!({"id": id}))))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EventsQuery {
    after: Option<i64>,
    limit: Option<u32>,
}

async fn events(
    _: ReaderAuth,
    State(state): State<AppState>,
    PlanId(id): PlanId,
    q: Result<Query<EventsQuery>, QueryRejection>,
) -> Result<Json<EventList>, ApiError> {
    const TAKES: &str = "?after=EVENT_ID (default 0) and &limit=N (1 to 1000, default 1000)";
    let q = query(q, TAKES)?;
    let limit = q.limit.unwrap_or(EVENTS_PAGE);
    if !(1..=EVENTS_PAGE).contains(&limit) {
        return Err(ApiError::bad_request(
            "invalid_query",
            format!("limit {limit} is out of range; this route takes {TAKES}"),
        ));
    }
    let events = admin(&state)?.events(&id, q.after.unwrap_or(0).max(0), limit).await.map_err(admin_error)?;
    Ok(Json(EventList { events }))
}

async fn budget(
    who: AdminAuth,
    State(state): State<AppState>,
    PlanId(id): PlanId,
    ApiJson(req): ApiJson<BudgetRequest>,
) -> Result<Json<Budget>, ApiError> {
    let budget = admin(&state)?.set_budget(&id, req.limit_usd, &who.by).await.map_err(admin_error)?;
    changed(&state);
    tracing::info!(plan = %id, limit = ?req.limit_usd.map(|l| l.decimal()), by = %who.by, "plan budget set");
    Ok(Json(budget))
}

async fn cancel(
    who: AdminAuth,
    State(state): State<AppState>,
    PlanId(id): PlanId,
) -> Result<Json<Cancelled>, ApiError> {
    let cancelled = admin(&state)?.cancel(&id, &who.by).await.map_err(admin_error)?;
    changed(&state);
    tracing::info!(plan = %id, cancelled, by = %who.by, "plan cancelled");
    Ok(Json(Cancelled { cancelled }))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResetQuery {
    keep_branch: Option<bool>,
}

async fn reset_preview(
    _: AdminAuth,
    State(state): State<AppState>,
    PlanId(id): PlanId,
    q: Result<Query<ResetQuery>, QueryRejection>,
) -> Result<Json<ResetPreview>, ApiError> {
    let q = query(q, "?keep_branch=true|false")?;
    Ok(Json(admin(&state)?.reset_preview(&id, q.keep_branch.unwrap_or(false)).await.map_err(admin_error)?))
}

async fn reset(
    _: AdminAuth,
    State(state): State<AppState>,
    PlanId(id): PlanId,
    ApiJson(req): ApiJson<ResetRequest>,
) -> Result<Json<ResetOutcome>, ApiError> {
    let outcome = admin(&state)?.reset(&id, req.hard, req.keep_branch).await;
    changed(&state);
    let outcome = outcome.map_err(admin_error)?;
    tracing::info!(plan = %id, tasks = outcome.reset, hard = req.hard, moved = outcome.branch.new_tip.is_some(), "plan reset");
    Ok(Json(outcome))
}

async fn retry(
    who: AdminAuth,
    State(state): State<AppState>,
    PlanId(id): PlanId,
    ApiJson(req): ApiJson<RetryRequest>,
) -> Result<Json<Retried>, ApiError> {
    let status = admin(&state)?.retry(&id, &req.task, &who.by).await.map_err(admin_error)?;
    changed(&state);
    tracing::info!(plan = %id, task = %req.task.escape_default(), by = %who.by, "task retried");
    Ok(Json(Retried { task: req.task, status }))
}

async fn push(
    _: AdminAuth,
    State(state): State<AppState>,
    PlanId(id): PlanId,
    ApiJson(req): ApiJson<PushRequest>,
) -> Result<Json<Pushed>, ApiError> {
    let remote = req.remote.as_deref().unwrap_or(plan_push::DEFAULT_REMOTE);
    let pushed = admin(&state)?.push(&id, remote).await;
    changed(&state);
    let pushed = pushed.map_err(admin_error)?;
    tracing::info!(plan = %id, remote = %pushed.remote, commit = %pushed.commit, "integration branch pushed");
    Ok(Json(pushed))
}

async fn run_overview(
    _: ReaderAuth,
    State(state): State<AppState>,
    Path((plan, run)): Path<(String, String)>,
) -> Result<Json<arbiter_runner::run_record::RunOverview>, ApiError> {
    if !plan_id_ok(&plan) {
        return Err(admin_error(AdminError::no_plan(
            &plan.chars().take(100).collect::<String>().escape_default().to_string(),
        )));
    }
    let id = arbiter_core::ids::RunId::parse(&run)
        .map_err(|_| ApiError::not_found(format!("'{}' is not a run id", run.escape_default())))?;
    let details = admin(&state)?.view(&plan).await.map_err(admin_error)?;
    if details.task_of_run(id.as_str()).is_none() {
        return Err(ApiError::not_found(format!("no task of plan {plan} made a run {run}")));
    }
    let header = details.view.plan.header;
    let Some(ws) = crate::web::workspace_of(&state, &header).await else {
        return Err(ApiError::not_found(format!("the repository of plan {plan} is not on this server")));
    };
    let dir = ws.run_dir(&id);
    let read = tokio::task::spawn_blocking(move || arbiter_runner::run_record::RunRecord::read(&dir))
        .await
        .map_err(|e| ApiError::internal("reading a run", e))?;
    match read {
        Ok(record) => Ok(Json(record.overview())),
        Err(arbiter_runner::run_record::RunRecordError::NotARun(_)) => {
            Err(ApiError::not_found(format!("plan {plan} has no run {run}")))
        }
        Err(e) => Err(ApiError::internal("reading a run", e)),
    }
}

#[cfg(test)]
mod tests {
    use arbiter_store::sqlite::SqliteStore;
    use arbiter_store::workers::Secret;
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    use crate::state::{AppState, Tokens};

    const ADMIN: &str = "admin-token-0123456789abcdef0123456789abcdef";

    async fn call(state: AppState, method: &str, path: &str) -> (StatusCode, serde_json::Value) {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header("authorization", format!("Bearer {ADMIN}"))
            .body(Body::empty())
            .unwrap();
        let response = crate::routes::router(state).oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
        (status, serde_json::from_slice(&bytes).unwrap())
    }

    use axum::http::StatusCode;

    #[tokio::test]
    async fn without_an_administrator_plans_are_503_and_bad_ids_404() {
        let dir = tempfile::tempdir().unwrap();
        let store = std::sync::Arc::new(SqliteStore::open(&dir.path().join("a.db")).await.unwrap());
        let tokens = Tokens::new(&Secret::new("b".repeat(40)), &Secret::new(ADMIN)).unwrap();
        let state = AppState::new(store, tokens, dir.path());
        let (status, body) = call(state.clone(), "GET", "/api/v1/plans").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body["error"], "no_plan_admin");
        assert!(body["message"].as_str().unwrap().contains("does not administer plans"), "{body}");
        // A path that is no plan id is refused before anything is asked of anyone.
        for bad in ["/api/v1/plans/a%2Fb", "/api/v1/plans/..", "/api/v1/plans/%2E%2E", "/api/v1/plans/-x/events"] {
            let (status, body) = call(state.clone(), "GET", bad).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{bad}: {body}");
            assert!(body["message"].as_str().unwrap().starts_with("no plan named"), "{bad}: {body}");
        }
    }
}
