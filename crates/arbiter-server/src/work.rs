//! The control plane's side of the work protocol: the coordinator remote workers claim
//! from (the same [`LocalCoordinator`] a local `plan run` uses, over the server's store and
//! the repositories it owns), the sweeper that takes back expired leases, the resolver that
//! serves each plan's repository over git, and the run directories that remote workers'
//! results are written into.
//!
//! A worker uploads its files as content-addressed artifacts first; its report lists them
//! (`path` → `sha256`), and the server copies each from the artifact store into the run
//! directory of the plan's repository (`.arbiter/runs/<run>/<path>`), refusing a path that
//! leaves the directory or, for a candidate unit, its candidate's own directory.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arbiter_core::ids::RunId;
use arbiter_runner::coordinator::{Capabilities, Held, LocalCoordinator, PlanRepositories};
use arbiter_runner::workspace::Workspace;
use arbiter_store::units::{UnitKind, UnitQueue};
use async_trait::async_trait;

use crate::state::{AppState, RepoResolver};
use crate::work_api::{RunFile, run_path};

/// The most files one report may carry, and their total size.
pub const MAX_REPORT_FILES: usize = 20_000;
pub const MAX_REPORT_BYTES: u64 = 2 << 30;

/// What the work routes need.
pub struct WorkPlane {
    pub coordinator: Arc<LocalCoordinator>,
    pub queue: Arc<dyn UnitQueue>,
    pub repositories: Arc<dyn PlanRepositories>,
    /// When each worker was last recorded as seen by a claim.
    pub last_seen: std::sync::Mutex<std::collections::HashMap<String, std::time::Instant>>,
}

impl WorkPlane {
    pub fn new(
        coordinator: Arc<LocalCoordinator>,
        queue: Arc<dyn UnitQueue>,
        repositories: Arc<dyn PlanRepositories>,
    ) -> Self {
        WorkPlane { coordinator, queue, repositories, last_seen: Default::default() }
    }

    /// Whether a claim by `worker` should be recorded as a sighting: once a second at most
    /// (a busy worker claims many times a second; its heartbeats are recorded too).
    pub fn seen(&self, worker: &str) -> bool {
        let mut last = self.last_seen.lock().unwrap_or_else(|p| p.into_inner());
        let now = std::time::Instant::now();
        match last.get(worker) {
            Some(at) if now.duration_since(*at) < Duration::from_secs(1) => false,
            _ => {
                last.insert(worker.to_string(), now);
                true
            }
        }
    }
}

/// Serves each plan's repository: the one its `repository` names (as [`PlanRepositories`]
/// finds it), by its git directory.
pub struct PlanRepos {
    pub queue: Arc<dyn UnitQueue>,
    pub repositories: Arc<dyn PlanRepositories>,
}

#[async_trait]
impl RepoResolver for PlanRepos {
    async fn repository(&self, plan_id: &str) -> Option<PathBuf> {
        if !crate::routes::safe_id(plan_id) {
            return None;
        }
        let record = self.queue.plan_record(plan_id).await.ok()??;
        let workspace = self.repositories.workspace_for(&record.header).await.ok()?;
        let facts = arbiter_runner::git::Git::new(workspace.repo_root().to_path_buf()).facts().await.ok()?;
        Some(facts.common_dir)
    }
}

/// What a worker that has these runners and backends can run (`runner:<name>`,
/// `backend:<name>`).
pub fn advertised(runners: &[String], backends: &[String]) -> Capabilities {
    Capabilities::Only(
        runners.iter().map(|r| format!("runner:{r}")).chain(backends.iter().map(|b| format!("backend:{b}"))).collect(),
    )
}

/// Takes back expired leases (of tasks and of units) until the server stops.
pub fn spawn_sweeper(state: AppState) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let Some(plane) = state.work.clone() else { return };
        let every = (state.lease / 3).max(Duration::from_millis(200));
        arbiter_runner::sweeper::sweep_until(
            &*plane.queue,
            every,
            &state.stopping,
            || state.now(),
            |swept| {
                tracing::info!(leases = swept.len(), "took back expired leases");
                state.metrics.leases_expired(swept.len() as u64);
                state.plan_events.notify_waiters();
            },
        )
        .await;
    })
}

/// The run a report's files belong to, and the prefix they must stay under.
pub fn report_scope(held: &Held, verdict_run: Option<&str>) -> Result<(RunId, PathBuf), String> {
    let (run, prefix) = match &held.unit {
        Some(u) if u.kind == UnitKind::Candidate => (u.run_id.clone(), PathBuf::from("candidates").join(&u.name)),
        Some(u) => (u.run_id.clone(), PathBuf::new()),
        None => match verdict_run {
            Some(r) => (r.to_string(), PathBuf::new()),
            None => return Err("files: a whole tournament's files come with the run id of its verdict".into()),
        },
    };
    let run = RunId::parse(&run).map_err(|_| format!("'{run}' is not a run id"))?;
    Ok((run, prefix))
}

/// Copies the reported files from the artifact store into `run_dir`, each under `prefix`;
/// an error (400/422 for the worker) names the first file that cannot be.
pub async fn place_files(state: &AppState, run_dir: &Path, prefix: &Path, files: &[RunFile]) -> Result<(), String> {
    if files.len() > MAX_REPORT_FILES {
        return Err(format!("files: at most {MAX_REPORT_FILES} files in one report"));
    }
    let total: u64 = files.iter().map(|f| f.size).sum();
    if total > MAX_REPORT_BYTES {
        return Err(format!("files: at most {MAX_REPORT_BYTES} bytes in one report"));
    }
    for f in files {
        let rel = run_path(&f.path)?;
        if !rel.starts_with(prefix) {
            return Err(format!("files: {} is outside {}, where this unit's results go", f.path, prefix.display()));
        }
        if !crate::routes::artifacts::valid_digest(&f.sha256) {
            return Err(format!("files: {}: '{}' is not a SHA-256", f.path, f.sha256));
        }
        let source = crate::routes::artifacts::artifact_path(state, &f.sha256);
        let meta = tokio::fs::metadata(&source).await.map_err(|_| {
            format!(
                "files: {}: artifact {} was not uploaded (PUT /api/v1/artifacts/{} first)",
                f.path, f.sha256, f.sha256
            )
        })?;
        if meta.len() != f.size {
            return Err(format!("files: {}: artifact {} holds {} bytes, not {}", f.path, f.sha256, meta.len(), f.size));
        }
        let dest = run_dir.join(&rel);
        if let Some(parent) = dest.parent() {
            tokio::fs::create_dir_all(parent).await.map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        // Written beside, then renamed: a reader never sees half a file.
        let tmp = dest.with_extension(format!("incoming-{}", std::process::id()));
        tokio::fs::copy(&source, &tmp).await.map_err(|e| format!("cannot write {}: {e}", dest.display()))?;
        tokio::fs::rename(&tmp, &dest).await.map_err(|e| format!("cannot write {}: {e}", dest.display()))?;
    }
    Ok(())
}

/// The run directory of `run` in the plan's repository.
pub fn run_dir(workspace: &Workspace, run: &RunId) -> PathBuf {
    workspace.run_dir(run)
}
