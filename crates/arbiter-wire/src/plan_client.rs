//! [`RemotePlanAdmin`]: plan administration on a control plane, over [`Client::send_json`]
//! with the admin token — the same port ([`PlanAdmin`]) as the store on this machine, so
//! `arbiter plan … --server URL` prints what `arbiter plan …` prints.
//!
//! The server's answers to what the port refuses (404 `not_found`, 409 `conflict`, 422
//! `invalid_request`) become the same [`AdminError`]s, with the server's message as it is;
//! every other failure (no or a wrong token, a server that cannot be reached or failed)
//! keeps the client's wording, which names the status. A plan id is checked before it goes
//! into a URL.

use arbiter_core::budget::Budget;
use arbiter_core::money::Usd;
use arbiter_core::plan::check::plan_id_ok;
use arbiter_core::plan::state::TaskStatus;
use arbiter_core::plan::worker_names::WorkerNames;
use arbiter_runner::plan_admin::{
    AdminError, Imported, NewPlan, PlanAdmin, PlanDetails, PlanImport, ResetOutcome, ResetPreview,
};
use arbiter_runner::plan_push::Pushed;
use arbiter_store::plans::{PlanEvent, PlanSummary};
use arbiter_store::workers::Secret;
use reqwest::{Method, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::client::{Client, ClientError};
use crate::plan_api::{
    BudgetRequest, Cancelled, CreateRequest, EventList, ImportRequest, PlanList, PushRequest, ResetRequest, Retried,
    RetryRequest,
};

/// Plan administration on a control plane.
pub struct RemotePlanAdmin {
    client: Client,
    admin: Secret,
}

impl RemotePlanAdmin {
    /// Administers the plans of `client`'s server with the admin token.
    pub fn new(client: Client, admin: Secret) -> Self {
        RemotePlanAdmin { client, admin }
    }

    async fn call<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<T, AdminError> {
        self.client.send_json(method, path, &self.admin, body).await.map_err(admin_error)
    }

    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, AdminError> {
        self.call::<(), T>(Method::GET, path, None).await
    }
}

/// A client error as the port's.
pub fn admin_error(e: ClientError) -> AdminError {
    match e {
        ClientError::Api { status, code, message } => match (status, code.as_str()) {
            (StatusCode::NOT_FOUND, "not_found") => AdminError::NotFound(message),
            (StatusCode::CONFLICT, "conflict") => AdminError::Conflict(message),
            (StatusCode::UNPROCESSABLE_ENTITY, "invalid_request") => AdminError::Invalid(message),
            _ => {
                let e = ClientError::Api { status, code, message };
                if e.is_usage() { AdminError::Invalid(e.to_string()) } else { AdminError::Environment(e.to_string()) }
            }
        },
        e if e.is_usage() => AdminError::Invalid(e.to_string()),
        e => AdminError::Environment(e.to_string()),
    }
}

/// `api/v1/plans/<plan>`, for a plan id (anything else names no plan, here as on the server).
fn plan_path(plan: &str) -> Result<String, AdminError> {
    if plan_id_ok(plan) { Ok(format!("api/v1/plans/{plan}")) } else { Err(AdminError::no_plan(plan)) }
}

#[async_trait::async_trait]
impl PlanAdmin for RemotePlanAdmin {
    async fn import(&self, import: &PlanImport) -> Result<Imported, AdminError> {
        self.call(Method::POST, "api/v1/plans", Some(&ImportRequest::of(import))).await
    }

    async fn view(&self, plan: &str) -> Result<PlanDetails, AdminError> {
        self.get(&plan_path(plan)?).await
    }

    async fn list(&self) -> Result<Vec<PlanSummary>, AdminError> {
        Ok(self.get::<PlanList>("api/v1/plans").await?.plans)
    }

    async fn worker_names(&self) -> Result<WorkerNames, AdminError> {
        let workers = self.client.workers(&self.admin).await.map_err(admin_error)?;
        Ok(WorkerNames::new(workers.into_iter().map(|w| (w.id, w.name))))
    }

    async fn events(&self, plan: &str, after: i64, limit: u32) -> Result<Vec<PlanEvent>, AdminError> {
        let path = format!("{}/events?after={}&limit={limit}", plan_path(plan)?, after.max(0));
        Ok(self.get::<EventList>(&path).await?.events)
    }

    async fn create(&self, plan: &NewPlan) -> Result<(), AdminError> {
        // A plan that cannot be created is refused here as on the server, before its id
        // goes into a URL.
        plan.checked_header()?;
        let path = plan_path(&plan.id)?;
        self.call::<_, serde_json::Value>(Method::PUT, &path, Some(&CreateRequest::of(plan))).await?;
        Ok(())
    }

    async fn set_budget(&self, plan: &str, limit: Option<Usd>, _by: &str) -> Result<Budget, AdminError> {
        let path = format!("{}/budget", plan_path(plan)?);
        self.call(Method::POST, &path, Some(&BudgetRequest { limit_usd: limit })).await
    }

    async fn reset_preview(&self, plan: &str, keep_branch: bool) -> Result<ResetPreview, AdminError> {
        self.get(&format!("{}/reset?keep_branch={keep_branch}", plan_path(plan)?)).await
    }

    async fn reset(&self, plan: &str, hard: bool, keep_branch: bool) -> Result<ResetOutcome, AdminError> {
        let path = format!("{}/reset", plan_path(plan)?);
        self.call(Method::POST, &path, Some(&ResetRequest { hard, keep_branch })).await
    }

    async fn cancel(&self, plan: &str, _by: &str) -> Result<usize, AdminError> {
        let path = format!("{}/cancel", plan_path(plan)?);
        Ok(self.call::<(), Cancelled>(Method::POST, &path, None).await?.cancelled)
    }

    async fn retry(&self, plan: &str, task: &str, _by: &str) -> Result<TaskStatus, AdminError> {
        let path = format!("{}/retry", plan_path(plan)?);
        Ok(self.call::<_, Retried>(Method::POST, &path, Some(&RetryRequest { task: task.to_string() })).await?.status)
    }

    async fn push(&self, plan: &str, remote: &str) -> Result<Pushed, AdminError> {
        let path = format!("{}/push", plan_path(plan)?);
        self.call(Method::POST, &path, Some(&PushRequest { remote: Some(remote.to_string()) })).await
    }
}
