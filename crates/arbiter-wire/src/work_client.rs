//! A remote worker's coordinator: the work protocol over HTTP ([`HttpCoordinator`]), so the
//! worker loop of `arbiter_runner::worker` runs against a control plane exactly as a local
//! `plan run` runs against its store.
//!
//! - Claims are long polls (the server answers as soon as work arrives); a server that
//!   cannot be reached is retried with a backoff (0.5 s doubling to 30 s) until it answers
//!   again or the worker stops. A refused token (401) stops the worker: it was revoked or
//!   rotated.
//! - The code comes from the server's git (a [`RepoCache`]); an evaluation's candidates'
//!   results are downloaded from the server into the run directory.
//! - A report first uploads the work's files as content-addressed artifacts (skipping
//!   those the server already holds), then reports; a report that cannot get through is
//!   retried while its lease could still be alive. A lost lease (409) is the worker loop's
//!   `Stale`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use arbiter_core::money::Usd;
use arbiter_runner::coordinator::{
    Assignment, Capabilities, Claim, Coordinator, CoordinatorError, NextClaim, Reported, Verdict, Work,
};
use arbiter_runner::repo_cache::RepoCache;
use arbiter_runner::rundir::digest_file;
use arbiter_runner::workspace::Workspace;
use arbiter_store::workers::Secret;
use reqwest::{Method, StatusCode};
use tokio_util::sync::CancellationToken;

use crate::client::{Client, ClientError, transport};
use crate::work_api::*;

/// Backoff between attempts to reach the server.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// The work protocol of one worker.
pub struct HttpCoordinator {
    client: Client,
    token: Secret,
    cache: RepoCache,
    /// How long a lease lasts, as the last assignment said.
    lease_ttl: Mutex<Duration>,
    /// Files of each run this worker downloaded (path → sha256): not uploaded again.
    downloaded: Mutex<BTreeMap<String, BTreeMap<String, String>>>,
    /// Stops the retry loops when the worker stops.
    stop: CancellationToken,
}

impl HttpCoordinator {
    /// `client` (with its long-poll-friendly timeout) speaks for the worker whose `token`
    /// it carries; `cache` holds its repository copies.
    pub fn new(client: Client, token: Secret, cache: RepoCache, stop: CancellationToken) -> Self {
        HttpCoordinator {
            client,
            token,
            cache,
            lease_ttl: Mutex::new(Duration::from_secs(60)),
            downloaded: Mutex::default(),
            stop,
        }
    }

    async fn post<B: serde::Serialize, T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, ClientError> {
        self.client.send_json(Method::POST, path, &self.token, Some(body)).await
    }

    /// Retries what failed for want of the server (not what the server refused) with a
    /// backoff, until it succeeds, the server refuses, `deadline` passes or the worker stops.
    async fn with_retries<T, F, Fut>(&self, deadline: Option<tokio::time::Instant>, call: F) -> Result<T, ClientError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T, ClientError>>,
    {
        let mut backoff = FIRST_BACKOFF;
        loop {
            match call().await {
                Err(e) if transient(&e) => {
                    let late = deadline.is_some_and(|d| tokio::time::Instant::now() + backoff > d);
                    if late || self.stop.is_cancelled() {
                        return Err(e);
                    }
                    tracing::warn!(error = %e, retry_in_ms = backoff.as_millis() as u64, "the control plane cannot be reached");
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = self.stop.cancelled() => return Err(e),
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
                other => return other,
            }
        }
    }

    /// Uploads `file` as an artifact; its digest.
    async fn upload(&self, file: &Path) -> Result<RunFile, CoordinatorError> {
        let (sha256, size) =
            digest_file(file).map_err(|e| unreachable_(format!("cannot read {}: {e}", file.display())))?;
        let url = self.client.url(&format!("api/v1/artifacts/{sha256}")).map_err(refused)?;
        let deadline = Some(tokio::time::Instant::now() + self.lease());
        self.with_retries(deadline, || async {
            let body = tokio::fs::read(file)
                .await
                .map_err(|e| ClientError::Transport { url: url.to_string(), reason: e.to_string() })?;
            let response = self
                .client
                .http()
                .put(url.clone())
                .bearer_auth(self.token.expose())
                .body(body)
                .send()
                .await
                .map_err(|e| transport(&url, &e))?;
            let status = response.status();
            if status.is_success() {
                Ok(())
            } else {
                let text = response.text().await.unwrap_or_default();
                let body: Option<crate::api::ErrorBody> = serde_json::from_str(&text).ok();
                Err(ClientError::Api {
                    status,
                    code: body.as_ref().map(|b| b.error.clone()).unwrap_or_default(),
                    message: body.map(|b| b.message).unwrap_or(text),
                })
            }
        })
        .await
        .map_err(coordinator_error)?;
        Ok(RunFile { path: String::new(), sha256, size })
    }

    fn lease(&self) -> Duration {
        *self.lease_ttl.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The files under `dir` to report, with paths relative to the run directory
    /// (`prefix` + their path under `dir`), uploaded unless the server has them.
    async fn upload_dir(&self, run_id: &str, dir: &Path, prefix: &str) -> Result<Vec<RunFile>, CoordinatorError> {
        let known = self.downloaded.lock().unwrap_or_else(|p| p.into_inner()).get(run_id).cloned().unwrap_or_default();
        let mut files = Vec::new();
        for (rel, full) in
            crate::work_api::list_files(dir).map_err(|e| unreachable_(format!("cannot list {}: {e}", dir.display())))?
        {
            let path = if prefix.is_empty() { rel } else { format!("{prefix}/{rel}") };
            let (sha256, size) =
                digest_file(&full).map_err(|e| unreachable_(format!("cannot read {}: {e}", full.display())))?;
            if known.get(&path) != Some(&sha256) {
                self.upload(&full).await?;
            }
            files.push(RunFile { path, sha256, size });
        }
        Ok(files)
    }

    /// Brings the candidates' results of run `run_id` from the server into `run_dir`.
    async fn download_run(&self, plan: &str, run_id: &str, run_dir: &Path) -> Result<(), CoordinatorError> {
        let path = format!("api/v1/work/runs/{run_id}/files?plan={plan}");
        let listing: RunFiles = self
            .with_retries(Some(tokio::time::Instant::now() + self.lease()), || {
                self.client.send_json::<(), _>(Method::GET, &path, &self.token, None)
            })
            .await
            .map_err(coordinator_error)?;
        let mut got = BTreeMap::new();
        for f in listing.files.iter().filter(|f| f.path.starts_with("candidates/")) {
            let rel = crate::work_api::run_path(&f.path).map_err(refused_)?;
            let dest = run_dir.join(rel);
            if digest_file(&dest).ok().is_some_and(|(sha, _)| sha == f.sha256) {
                got.insert(f.path.clone(), f.sha256.clone());
                continue;
            }
            let mut url = self.client.url(&format!("api/v1/work/runs/{run_id}/file")).map_err(refused)?;
            url.query_pairs_mut().append_pair("plan", plan).append_pair("path", &f.path);
            let bytes = self
                .with_retries(Some(tokio::time::Instant::now() + self.lease()), || async {
                    let response = self
                        .client
                        .http()
                        .get(url.clone())
                        .bearer_auth(self.token.expose())
                        .send()
                        .await
                        .map_err(|e| transport(&url, &e))?;
                    let status = response.status();
                    if !status.is_success() {
                        return Err(ClientError::Api { status, code: "download".into(), message: f.path.clone() });
                    }
                    response.bytes().await.map_err(|e| transport(&url, &e))
                })
                .await
                .map_err(coordinator_error)?;
            let sha = {
                use sha2::Digest;
                sha2::Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect::<String>()
            };
            if sha != f.sha256 {
                return Err(unreachable_(format!(
                    "{} of run {run_id} arrived damaged (SHA-256 {sha}, not {})",
                    f.path, f.sha256
                )));
            }
            if let Some(parent) = dest.parent() {
                std::fs::create_dir_all(parent).map_err(|e| unreachable_(e.to_string()))?;
            }
            std::fs::write(&dest, &bytes).map_err(|e| unreachable_(format!("cannot write {}: {e}", dest.display())))?;
            got.insert(f.path.clone(), f.sha256.clone());
        }
        self.downloaded.lock().unwrap_or_else(|p| p.into_inner()).insert(run_id.to_string(), got);
        Ok(())
    }
}

/// A failure that waiting may cure: the server could not be reached, or failed.
fn transient(e: &ClientError) -> bool {
    match e {
        ClientError::Transport { .. } => true,
        ClientError::Api { status, .. } => status.is_server_error(),
        _ => false,
    }
}

fn refused(e: ClientError) -> CoordinatorError {
    CoordinatorError::Refused(e.to_string())
}

fn refused_(why: String) -> CoordinatorError {
    CoordinatorError::Refused(why)
}

fn unreachable_(why: String) -> CoordinatorError {
    CoordinatorError::Unreachable(why)
}

/// A failed call as the worker loop sees it.
fn coordinator_error(e: ClientError) -> CoordinatorError {
    match &e {
        ClientError::Api { status, .. } if *status == StatusCode::UNAUTHORIZED => CoordinatorError::Refused(format!(
            "{e}; this worker's token was revoked or replaced: register the worker again (`arbiter worker register --replace`) or use its new token"
        )),
        _ if transient(&e) => CoordinatorError::Unreachable(e.to_string()),
        _ => CoordinatorError::Refused(e.to_string()),
    }
}

#[async_trait::async_trait]
impl Coordinator for HttpCoordinator {
    fn lease_ttl(&self) -> Duration {
        self.lease()
    }

    async fn claim(
        &self,
        worker: &str,
        _caps: &Capabilities,
        plan: Option<&str>,
        wait: Duration,
    ) -> Result<Claim, CoordinatorError> {
        let request = claim_request(worker, plan, wait);
        let answer: Result<serde_json::Value, _> =
            self.with_retries(None, || self.post("api/v1/work/claim", &request)).await;
        match answer {
            Ok(answer) => self.claimed(answer).await,
            // Stopping while the server was away.
            Err(e) if transient(&e) && self.stop.is_cancelled() => Ok(Claim::Idle),
            Err(e) => Err(coordinator_error(e)),
        }
    }

    async fn heartbeat(&self, assignment: &Assignment) -> Result<bool, CoordinatorError> {
        let request = HeartbeatRequest { leases: vec![assignment.lease_ref()] };
        match self.post::<_, HeartbeatResponse>("api/v1/work/heartbeat", &request).await {
            Ok(answer) => Ok(answer.renewed.first().copied().unwrap_or(false)),
            // The task or its plan is gone: so is the lease.
            Err(ClientError::Api { status, .. }) if status == StatusCode::NOT_FOUND => Ok(false),
            Err(e) => Err(coordinator_error(e)),
        }
    }

    async fn charge(&self, assignment: &Assignment, amount: Usd) -> Result<(), CoordinatorError> {
        let request = ChargeRequest { lease: assignment.lease_ref(), amount };
        let url = self.client.url("api/v1/work/charge").map_err(refused)?;
        self.with_retries(Some(tokio::time::Instant::now() + Duration::from_secs(10)), || async {
            let response = self
                .client
                .http()
                .post(url.clone())
                .bearer_auth(self.token.expose())
                .json(&request)
                .send()
                .await
                .map_err(|e| transport(&url, &e))?;
            let status = response.status();
            if status.is_success() {
                Ok(())
            } else {
                Err(ClientError::Api {
                    status,
                    code: "charge".into(),
                    message: response.text().await.unwrap_or_default(),
                })
            }
        })
        .await
        .map_err(coordinator_error)
    }

    async fn checkout(&self, assignment: &Assignment) -> Result<Workspace, CoordinatorError> {
        let plan = &assignment.plan;
        let workspace = self
            .cache
            .checkout(&plan.id, &plan.integration_branch, &assignment.base)
            .await
            .map_err(|e| CoordinatorError::Unreachable(e.to_string()))?;
        if let Work::Evaluation { run_id, .. } = &assignment.work {
            let dir = workspace.run_dir(run_id);
            std::fs::create_dir_all(&dir).map_err(|e| unreachable_(e.to_string()))?;
            self.download_run(&plan.id, run_id.as_str(), &dir).await?;
        }
        Ok(workspace)
    }

    async fn report(
        &self,
        assignment: &Assignment,
        verdict: Verdict,
        cost: Usd,
        run_dir: Option<&Path>,
    ) -> Result<Reported, CoordinatorError> {
        let request = self.report_request(assignment, &verdict, cost, run_dir).await?;
        self.send_report(&request).await
    }

    async fn report_then_claim(
        &self,
        assignment: &Assignment,
        report: (Verdict, Usd, Option<&Path>),
        next: NextClaim<'_>,
        told: &(dyn for<'r> Fn(&'r Reported) + Send + Sync),
    ) -> Result<(Reported, Option<Claim>), CoordinatorError> {
        let (verdict, cost, run_dir) = report;
        let request = ReportAndClaimRequest {
            report: self.report_request(assignment, &verdict, cost, run_dir).await?,
            claim: claim_request(next.worker, next.plan, next.wait),
        };
        // One try: a report that did not get through is sent again on its own (the server
        // refuses it as stale when the first one did arrive).
        let (reported, claim) =
            match self.post::<_, ReportAndClaimAnswer>("api/v1/work/report-and-claim", &request).await {
                Ok(answer) => (answer.report.into_reported(), Some(answer.claim)),
                Err(ClientError::Api { status, .. }) if status == StatusCode::CONFLICT => (Reported::Stale, None),
                Err(e) if transient(&e) => (self.send_report(&request.report).await?, None),
                Err(e) => return Err(coordinator_error(e)),
            };
        told(&reported);
        let claim = match claim {
            Some(c) => Some(self.claimed(c).await?),
            None => None,
        };
        Ok((reported, claim))
    }
}

impl HttpCoordinator {
    /// Sends a report, retrying while the lease could still be alive (and a little past:
    /// the server records a late report's cost).
    async fn send_report(&self, request: &ReportRequest) -> Result<Reported, CoordinatorError> {
        let deadline = tokio::time::Instant::now() + self.lease() * 2;
        let answer: Result<ReportResponse, _> =
            self.with_retries(Some(deadline), || self.post("api/v1/work/report", request)).await;
        match answer {
            Ok(r) => Ok(r.into_reported()),
            Err(ClientError::Api { status, .. }) if status == StatusCode::CONFLICT => Ok(Reported::Stale),
            Err(e) => Err(coordinator_error(e)),
        }
    }

    /// A report of the assignment's work, its files uploaded first.
    async fn report_request(
        &self,
        assignment: &Assignment,
        verdict: &Verdict,
        cost: Usd,
        run_dir: Option<&Path>,
    ) -> Result<ReportRequest, CoordinatorError> {
        let files = match (&assignment.work, run_dir, verdict) {
            (_, _, Verdict::Released { .. } | Verdict::Refused { .. }) | (_, None, _) => Vec::new(),
            (Work::Candidate { index, run_id }, Some(dir), _) => {
                let id = arbiter_core::ids::CandidateId::from_index(*index);
                self.upload_dir(run_id.as_str(), dir, &format!("candidates/{id}")).await?
            }
            (_, Some(dir), _) => {
                let run_id = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                self.upload_dir(&run_id, dir, "").await?
            }
        };
        Ok(ReportRequest { lease: assignment.lease_ref(), verdict: WireVerdict::new(verdict), cost, files })
    }

    /// A claim's answer as the worker loop takes it. Work this worker cannot read is
    /// refused at once, by the leases it grants (which any answer names in the same few
    /// fields): the server gives it to another worker, and this worker goes on.
    async fn claimed(&self, answer: serde_json::Value) -> Result<Claim, CoordinatorError> {
        let unreadable = match serde_json::from_value::<ClaimResponse>(answer.clone()) {
            Ok(ClaimResponse::Assigned { assignment }) => {
                *self.lease_ttl.lock().unwrap_or_else(|p| p.into_inner()) =
                    Duration::from_millis(assignment.lease_ttl_ms.max(1000));
                match assignment.into_assignment() {
                    Ok(a) => return Ok(Claim::Assigned(Box::new(a))),
                    Err(e) => e,
                }
            }
            Ok(ClaimResponse::Idle) => return Ok(Claim::Idle),
            Ok(ClaimResponse::Finished) => return Ok(Claim::Finished),
            Err(e) => e.to_string(),
        };
        let reason =
            format!("this worker (arbiter {}) cannot read its assignment: {unreadable}", env!("CARGO_PKG_VERSION"));
        let Ok(granted) = serde_json::from_value::<GrantedLeases>(answer) else {
            // Nothing to name it by: its lease runs out on the server, which counts the try.
            tracing::warn!(reason = %reason, "an assignment that names no lease this worker can read");
            return Ok(Claim::Refused { task: "(unknown)".into(), unit: "(unknown)".into(), reason });
        };
        let granted = granted.assignment;
        let request = ReportRequest {
            lease: granted.lease_ref(),
            verdict: WireVerdict::new(&Verdict::Refused { reason: reason.clone() }),
            cost: Usd::ZERO,
            files: Vec::new(),
        };
        match self.send_report(&request).await {
            // Refused, or no longer held: either way not this worker's any more.
            Ok(_) | Err(CoordinatorError::Unreachable(_)) => {}
            Err(e) => return Err(e),
        }
        Ok(Claim::Refused { task: granted.lease.task_id.clone(), unit: granted.unit_name(), reason })
    }
}

/// A report-and-claim's answer, its claim read as [`HttpCoordinator::claimed`] reads one.
#[derive(serde::Deserialize)]
struct ReportAndClaimAnswer {
    report: ReportResponse,
    claim: serde_json::Value,
}

/// The claim of slot `worker` (`<worker id>:<slot>`): the server knows what the worker
/// registered.
fn claim_request(worker: &str, plan: Option<&str>, wait: Duration) -> ClaimRequest {
    ClaimRequest {
        slot: worker.rsplit(':').next().unwrap_or("1").to_string(),
        plan: plan.map(str::to_string),
        wait_ms: wait.as_millis().min(u128::from(MAX_CLAIM_WAIT_MS)) as u64,
    }
}
