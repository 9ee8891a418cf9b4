//! What every handler shares: the stores, the worker registry, the tokens, the data
//! directory, the metrics, the repositories of plans, the limits and the clock.
//!
//! [`AppState`] is `Clone` (every field is cheap to clone, shared behind `Arc`s) and has
//! public fields: a new area of the API adds the field it needs here and reads it in its
//! handlers, with no request extensions involved.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arbiter_core::Clock;
use arbiter_core::time::Timestamp;
use arbiter_runner::coordinator::PlanRepositories;
use arbiter_runner::plan_admin::PlanAdmin;
use arbiter_store::Store;
use arbiter_store::plans::PlanStore;
use arbiter_store::tokens::{AccessTokenRecord, AccessTokens};
use arbiter_store::units::UnitQueue;
use arbiter_store::workers::{Secret, WorkerRegistry};
use async_trait::async_trait;
use sha2::{Digest, Sha256};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;

/// The state of the control plane's HTTP side.
#[derive(Clone)]
pub struct AppState {
    /// The plan queue.
    pub plans: Arc<dyn PlanStore>,
    /// The same queue's units of work (candidate attempts, evaluations), for the dashboard.
    pub units: Arc<dyn UnitQueue>,
    /// The run index (runs, candidates, their events).
    pub runs: Arc<dyn Store>,
    /// Workers and their token hashes.
    pub registry: Arc<dyn WorkerRegistry>,
    /// Named access tokens (admin and read-only) and their hashes.
    pub access: Arc<dyn AccessTokens>,
    /// The bootstrap and admin tokens.
    pub tokens: Arc<Tokens>,
    /// Where the server keeps what it owns on disk (artifacts, the default repositories,
    /// the SQLite database).
    pub data_dir: Arc<PathBuf>,
    pub metrics: Arc<Metrics>,
    /// Plan id → the repository the server owns for it (served read-only over git).
    pub repos: Arc<dyn RepoResolver>,
    pub limits: Limits,
    /// How long a lease lasts: a worker seen within two lease lengths counts as connected.
    pub lease: Duration,
    pub clock: Arc<dyn Clock>,
    /// Notified by whoever writes plan events in this process: event streams wake at once
    /// (they also poll the store, for writes by other processes).
    pub plan_events: Arc<Notify>,
    /// Cancelled when the server stops: long-lived responses (event streams) end.
    pub stopping: CancellationToken,
    /// The `git` program that serves repositories (`git http-backend`).
    pub git: Arc<PathBuf>,
    /// The work protocol's coordinator (`None`: this server hands out no work).
    pub work: Option<Arc<crate::work::WorkPlane>>,
    /// Worker tokens recently found valid.
    pub worker_tokens: Arc<crate::auth::WorkerTokens>,
    /// Access tokens recently found valid.
    pub access_tokens: Arc<crate::auth::RecentTokens<AccessTokenRecord>>,
    /// The dashboard's logged-in browsers.
    pub sessions: Arc<crate::web::session::Sessions>,
    /// Plan administration (`/api/v1/plans…`); `None`: those routes answer 503.
    pub admin: Option<Arc<dyn PlanAdmin>>,
    /// Where each plan's repository (and so its run directories) is, for the dashboard.
    pub plan_repos: Option<Arc<dyn PlanRepositories>>,
    /// The run directories of the local repository (`arbiter ui`): the dashboard lists its
    /// runs too. `None` on a control plane.
    pub local_runs: Option<PathBuf>,
    /// Session cookies are marked `Secure` (the server speaks HTTPS).
    pub secure_cookies: bool,
    /// The `Host` values requests may carry (`None`: any). `arbiter ui` names its own
    /// loopback address only, so a web page on another name that resolves to 127.0.0.1
    /// (DNS rebinding) reaches nothing.
    pub allowed_hosts: Option<Vec<String>>,
}

impl AppState {
    /// A state over one store that is the plan queue, the run index and the worker
    /// registry at once (what `arbiter serve` opens), with default limits, a 60-second
    /// lease, the system clock and repositories under `data_dir/repos`.
    pub fn new<S>(store: Arc<S>, tokens: Tokens, data_dir: impl Into<PathBuf>) -> Self
    where
        S: UnitQueue + Store + WorkerRegistry + AccessTokens + 'static,
    {
        let data_dir = data_dir.into();
        AppState {
            plans: store.clone(),
            units: store.clone(),
            runs: store.clone(),
            registry: store.clone(),
            access: store,
            tokens: Arc::new(tokens),
            repos: Arc::new(DataDirRepos::new(data_dir.join("repos"))),
            data_dir: Arc::new(data_dir),
            metrics: Arc::new(Metrics::new()),
            limits: Limits::default(),
            lease: Duration::from_secs(60),
            clock: Arc::new(SystemClock),
            plan_events: Arc::new(Notify::new()),
            stopping: CancellationToken::new(),
            git: Arc::new(PathBuf::from("git")),
            work: None,
            worker_tokens: Arc::default(),
            access_tokens: Arc::default(),
            sessions: Arc::default(),
            admin: None,
            plan_repos: None,
            local_runs: None,
            secure_cookies: false,
            allowed_hosts: None,
        }
    }

    /// Hands out work: claims, heartbeats, charges and reports go to `plane`, and plans'
    /// repositories are served as it finds them.
    pub fn with_work(mut self, plane: Arc<crate::work::WorkPlane>) -> Self {
        self.repos =
            Arc::new(crate::work::PlanRepos { queue: plane.queue.clone(), repositories: plane.repositories.clone() });
        self.plan_repos = Some(plane.repositories.clone());
        self.work = Some(plane);
        self
    }

    /// Administers plans with `admin`.
    pub fn with_admin(mut self, admin: Arc<dyn PlanAdmin>) -> Self {
        self.admin = Some(admin);
        self
    }

    /// Finds plans' repositories (their run directories, their integration branches) for
    /// the dashboard with `repositories`, without handing out work (`arbiter ui`).
    pub fn with_plan_repositories(mut self, repositories: Arc<dyn PlanRepositories>) -> Self {
        self.plan_repos = Some(repositories);
        self
    }

    /// The dashboard lists the runs of this local run directory too (`arbiter ui`).
    pub fn with_local_runs(mut self, runs_dir: PathBuf) -> Self {
        self.local_runs = Some(runs_dir);
        self
    }

    /// Answers only requests whose `Host` is one of `hosts`.
    pub fn with_allowed_hosts(mut self, hosts: Vec<String>) -> Self {
        self.allowed_hosts = Some(hosts);
        self
    }

    /// Marks session cookies `Secure` (an HTTPS server).
    pub fn with_secure_cookies(mut self, secure: bool) -> Self {
        self.secure_cookies = secure;
        self
    }

    /// Serves plans' repositories from `repos` instead.
    pub fn with_repos(mut self, repos: Arc<dyn RepoResolver>) -> Self {
        self.repos = repos;
        self
    }

    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    pub fn with_lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// Workers seen at or after this instant count as connected: two lease lengths ago.
    pub fn connected_since(&self) -> Timestamp {
        let two_leases = self.lease.saturating_mul(2).as_micros().min(i64::MAX as u128) as i64;
        Timestamp(self.now().0.saturating_sub(two_leases))
    }

    /// Where content-addressed artifacts live.
    pub fn artifacts_dir(&self) -> PathBuf {
        self.data_dir.join("artifacts")
    }
}

/// Size limits of request bodies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// JSON (and every other body not listed below): 1 MiB by default.
    pub json_body: usize,
    /// One artifact upload: 256 MiB by default.
    pub artifact: u64,
    /// One `git-upload-pack` request (what a fetch says it has and wants): 64 MiB by default.
    pub git_request: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { json_body: 1 << 20, artifact: 256 << 20, git_request: 64 << 20 }
    }
}

/// The two shared secrets of a control plane. Compared in constant time: both sides are
/// hashed to 32 bytes first, so neither the content nor the length of a guess leaks through
/// timing.
pub struct Tokens {
    bootstrap: [u8; 32],
    admin: [u8; 32],
}

/// The shortest bootstrap or admin token accepted (e.g. `openssl rand -hex 32` gives 64).
pub const MIN_TOKEN_LEN: usize = 32;

impl Tokens {
    /// Refuses tokens shorter than [`MIN_TOKEN_LEN`] or equal to each other; the message
    /// names the variable (`ARBITER_BOOTSTRAP_TOKEN`, `ARBITER_ADMIN_TOKEN`) and how to make one.
    pub fn new(bootstrap: &Secret, admin: &Secret) -> Result<Self, String> {
        for (name, token) in [("ARBITER_BOOTSTRAP_TOKEN", bootstrap), ("ARBITER_ADMIN_TOKEN", admin)] {
            let t = token.expose();
            if t.trim() != t || t.chars().count() < MIN_TOKEN_LEN || t.chars().any(|c| c.is_control()) {
                return Err(format!(
                    "{name} must be at least {MIN_TOKEN_LEN} printable characters without surrounding spaces; make one with `openssl rand -hex 32`"
                ));
            }
        }
        if bootstrap.expose() == admin.expose() {
            return Err(
                "ARBITER_BOOTSTRAP_TOKEN and ARBITER_ADMIN_TOKEN must differ: the bootstrap token is handed to machines that join, the admin token is not"
                    .into(),
            );
        }
        Ok(Tokens { bootstrap: digest(bootstrap.expose()), admin: digest(admin.expose()) })
    }

    pub fn is_admin(&self, presented: &str) -> bool {
        constant_time_eq(&digest(presented), &self.admin)
    }

    pub fn is_bootstrap(&self, presented: &str) -> bool {
        constant_time_eq(&digest(presented), &self.bootstrap)
    }
}

fn digest(s: &str) -> [u8; 32] {
    Sha256::digest(s.as_bytes()).into()
}

/// Equal without an early exit: the time taken does not depend on where the inputs differ.
pub fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let mut diff = 0u8;
    for (x, y) in a.iter().zip(b.iter()) {
        diff |= x ^ y;
    }
    std::hint::black_box(diff) == 0
}

/// Plan id → the repository the server owns for that plan (a bare repository, or a
/// repository's `.git` directory), which `git http-backend` serves read-only.
#[async_trait]
pub trait RepoResolver: Send + Sync {
    /// `None` when the plan has no repository here.
    async fn repository(&self, plan_id: &str) -> Option<PathBuf>;
}

/// Repositories at `ROOT/<plan-id>.git` (the default of `arbiter serve`: `DATA_DIR/repos`).
pub struct DataDirRepos {
    root: PathBuf,
}

impl DataDirRepos {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        DataDirRepos { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
}

#[async_trait]
impl RepoResolver for DataDirRepos {
    async fn repository(&self, plan_id: &str) -> Option<PathBuf> {
        if !crate::routes::safe_id(plan_id) {
            return None;
        }
        let path = self.root.join(format!("{plan_id}.git"));
        tokio::fs::metadata(&path).await.ok().filter(|m| m.is_dir()).map(|_| path)
    }
}

/// The wall clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let micros = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros() as i64)
            .unwrap_or(0);
        Timestamp(micros)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole_values_and_refuse_weak_ones() {
        let b = Secret::new("b".repeat(40));
        let a = Secret::new("a".repeat(40));
        let t = Tokens::new(&b, &a).unwrap();
        assert!(t.is_admin(&"a".repeat(40)));
        assert!(!t.is_admin(&"a".repeat(39)));
        assert!(!t.is_admin(&"b".repeat(40)));
        assert!(t.is_bootstrap(&"b".repeat(40)));
        assert!(!t.is_bootstrap(""));
        let err = Tokens::new(&Secret::new("short"), &a).err().unwrap();
        assert!(err.contains("ARBITER_BOOTSTRAP_TOKEN") && err.contains("openssl rand -hex 32"), "{err}");
        assert!(Tokens::new(&a, &a).err().unwrap().contains("must differ"));
        assert!(Tokens::new(&b, &Secret::new(format!(" {}", "a".repeat(40)))).is_err());
    }
}
