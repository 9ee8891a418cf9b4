//! `arbiter serve`: the control plane over HTTP(S). Reads the bootstrap and admin tokens from
//! the environment (refusing to start without them), opens the store (SQLite in the data
//! directory, or Postgres with `ARBITER_DATABASE_URL`), logs with `tracing` on stderr,
//! prints the URL it listens on to stdout, and stops gracefully on SIGTERM or Ctrl-C
//! (exit 0).

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use arbiter_runner::coordinator::{LocalCoordinator, PlanRepositories};
use arbiter_runner::plan_admin::LocalPlanAdmin;
use arbiter_runner::plan_repos::ByRepository;
use arbiter_runner::task_settings::TaskSettings;
use arbiter_server::serve::{ServeConfig, TlsFiles, bind};
use arbiter_server::state::{AppState, Limits, Tokens};
use arbiter_server::work::WorkPlane;
use arbiter_store::postgres::PgStore;
use arbiter_store::sqlite::SqliteStore;
use arbiter_store::units::UnitQueue;
use arbiter_store::workers::Secret;
use tokio_util::sync::CancellationToken;

use crate::cli::ServeArgs;
use crate::error::CliError;
use crate::output::out;

const HOW_TO_MAKE: &str = "make one with `openssl rand -hex 32` (or `head -c 32 /dev/urandom | xxd -p -c 64`)";

pub async fn serve(database_url: Option<&str>, args: &ServeArgs) -> Result<u8, CliError> {
    let tokens = tokens_from_env()?;
    let addr: SocketAddr = args.bind.parse().map_err(|_| {
        CliError::usage(format!("--bind '{}' is not an address such as 127.0.0.1:7878 or [::1]:7878", args.bind))
    })?;
    if args.lease_seconds == 0 {
        return Err(CliError::usage("--lease-seconds must be at least 1"));
    }
    crate::logging::init(&args.log_format);
    let data_dir = match &args.data_dir {
        Some(d) => d.clone(),
        None => default_data_dir()?,
    };
    create_private_dir(&data_dir)?;

    let limits = Limits { artifact: args.max_artifact_mib.saturating_mul(1 << 20), ..Limits::default() };
    let lease = Duration::from_secs(args.lease_seconds);
    // A plan served here names its repository: a path on this machine, or a URL cloned
    // into DATA_DIR/repos/<plan>/repo.
    let repos: Arc<dyn PlanRepositories> = Arc::new(ByRepository::new(data_dir.join("repos"), None));
    let (state, store_kind) = match database_url.filter(|u| !u.trim().is_empty()) {
        Some(url) => {
            let store = Arc::new(PgStore::connect(url).await?);
            let admin = Arc::new(LocalPlanAdmin::new(store.clone(), repos.clone()));
            let state = AppState::new(store.clone(), tokens, &data_dir).with_admin(admin);
            (state.with_work(work_plane(store, repos, lease)), "postgres")
        }
        None => {
            let store = Arc::new(SqliteStore::open(&data_dir.join("arbiter.db")).await?);
            let admin = Arc::new(LocalPlanAdmin::new(store.clone(), repos.clone()));
            let state = AppState::new(store.clone(), tokens, &data_dir).with_admin(admin);
            (state.with_work(work_plane(store, repos, lease)), "sqlite")
        }
    };
    let state =
        state.with_limits(limits).with_lease(lease).with_secure_cookies(args.tls_cert.is_some() || args.secure_cookies);

    let mut config = ServeConfig::new(addr);
    config.insecure = args.insecure;
    config.tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(TlsFiles { cert: cert.clone(), key: key.clone() }),
        _ => None,
    };
    let bound =
        bind(config).await.map_err(|e| if e.is_usage() { CliError::usage(e) } else { CliError::environment(e) })?;
    let url = bound.url();
    tracing::info!(url = %url, data_dir = %data_dir.display(), store = store_kind, "listening");
    // Scripts (and the tests) read the address from here, the port too when 0 was asked for.
    out!("arbiter serve: listening on {url}");
    let _ = std::io::stdout().flush();

    let shutdown = CancellationToken::new();
    tokio::spawn(stop_on_signal(shutdown.clone()));
    let sweeper = arbiter_server::work::spawn_sweeper(state.clone());
    let work = state.work.clone();
    bound.run(state, shutdown).await.map_err(CliError::environment)?;
    sweeper.abort();
    if let Some(work) = work {
        work.coordinator.flush_pushes().await;
    }
    tracing::info!("stopped");
    Ok(0)
}

/// The coordinator remote workers claim from: the server's store, the repositories its
/// plans name (a path on this host, or a URL cloned into `DATA_DIR/repos`), each task's
/// settings from its repository's `.arbiter/config.toml` under the plan's defaults.
fn work_plane<S: UnitQueue + 'static>(
    store: Arc<S>,
    repositories: Arc<dyn PlanRepositories>,
    lease: Duration,
) -> Arc<WorkPlane> {
    let coordinator = Arc::new(LocalCoordinator::new(
        store.clone(),
        Arc::new(arbiter_runner::SystemClock),
        repositories.clone(),
        Arc::new(TaskSettings::per_repository()),
        lease,
        Duration::from_secs(1),
        None,
    ));
    Arc::new(WorkPlane::new(coordinator, store, repositories))
}

/// The bootstrap and admin tokens from the environment, or why not.
fn tokens_from_env() -> Result<Tokens, CliError> {
    let read = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty()).map(Secret::new);
    let bootstrap = read("ARBITER_BOOTSTRAP_TOKEN");
    let admin = read("ARBITER_ADMIN_TOKEN");
    let missing: Vec<&str> =
        [("ARBITER_BOOTSTRAP_TOKEN", bootstrap.is_none()), ("ARBITER_ADMIN_TOKEN", admin.is_none())]
            .into_iter()
            .filter_map(|(name, absent)| absent.then_some(name))
            .collect();
    match (bootstrap, admin) {
        (Some(b), Some(a)) => Tokens::new(&b, &a).map_err(CliError::usage),
        _ => Err(CliError::usage(format!(
            "arbiter serve needs {} in its environment: ARBITER_BOOTSTRAP_TOKEN lets machines register as workers, ARBITER_ADMIN_TOKEN administers the server; {HOW_TO_MAKE}, e.g. export ARBITER_ADMIN_TOKEN=$(openssl rand -hex 32)",
            missing.join(" and ")
        ))),
    }
}

/// `$XDG_DATA_HOME/arbiter/server`, else `~/.local/share/arbiter/server`.
fn default_data_dir() -> Result<PathBuf, CliError> {
    if let Some(xdg) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(xdg).join("arbiter").join("server"));
    }
    match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(".local/share/arbiter/server")),
        None => Err(CliError::usage("no data directory: pass --data-dir DIR (or set ARBITER_DATA_DIR or HOME)")),
    }
}

/// Creates `dir` (and missing parents) readable by its owner only.
fn create_private_dir(dir: &std::path::Path) -> Result<(), CliError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| CliError::environment(format!("cannot create the data directory {}: {e}", dir.display())))
}

/// Cancels `token` on SIGTERM or Ctrl-C.
pub async fn stop_on_signal(token: CancellationToken) {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = term => tracing::info!("SIGTERM: shutting down"),
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupted: shutting down"),
    }
    token.cancel();
}
