//! `arbiter ui`: the web dashboard of this machine — the local store's plans and the
//! repository's runs — served on loopback, with a one-time login link printed on the
//! terminal (and opened in the browser when there is one).
//!
//! Nothing here hands out work or accepts workers: the server's bootstrap and admin tokens
//! are random, used nowhere and never shown. The only way in is the one-time link (or an
//! access token made with `arbiter token create`). The link is never put on a command line:
//! the browser is opened on a private file (mode 0600) that forwards to it, as Jupyter does.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arbiter_runner::plan_admin::LocalPlanAdmin;
use arbiter_server::serve::{ServeConfig, bind, is_loopback};
use arbiter_server::state::{AppState, Tokens};
use arbiter_store::tokens::Role;
use arbiter_store::units::UnitQueue;
use arbiter_store::workers::Secret;
use tokio_util::sync::CancellationToken;

use crate::context::{OpenedStore, RepoContext};
use crate::error::CliError;
use crate::output::{note, out};

/// What `arbiter ui` was given.
pub struct UiArgs<'a> {
    pub repo: Option<&'a Path>,
    pub bind: &'a str,
    pub open: bool,
}

pub async fn ui(args: UiArgs<'_>) -> Result<u8, CliError> {
    let addr: SocketAddr = args
        .bind
        .parse()
        .map_err(|_| CliError::usage(format!("--bind '{}' is not an address such as 127.0.0.1:7979", args.bind)))?;
    if !is_loopback(&addr) {
        return Err(CliError::usage(format!(
            "arbiter ui serves this machine only: bind a loopback address (127.0.0.1 or [::1]), not {addr}; for a dashboard other machines reach, run `arbiter serve` with TLS"
        )));
    }
    let ctx = RepoContext::locate(args.repo).await?;
    let state = match ctx.open_store().await? {
        OpenedStore::Postgres(pg) => state_over(pg, &ctx)?,
        OpenedStore::Sqlite(sqlite) => state_over(sqlite, &ctx)?,
    };
    let bound = bind(ServeConfig::new(addr))
        .await
        .map_err(|e| if e.is_usage() { CliError::usage(e) } else { CliError::environment(e) })?;
    let port = bound.local_addr().port();
    let state =
        state.with_allowed_hosts([bound.local_addr().to_string(), format!("localhost:{port}")].into_iter().collect());
    let code = state
        .sessions
        .one_time(Role::Admin, &crate::commands::plan::local_actor())
        .ok_or_else(|| CliError::environment("the operating system's random number generator failed"))?;
    let login = format!("{}/login/once?code={code}", bound.url());
    out!("arbiter ui: the dashboard of {} is at {}", ctx.workspace.repo_root().display(), bound.url());
    out!("Open this link to log in (it works once, within 15 minutes):");
    out!("  {login}");
    let _ = std::io::stdout().flush();
    let forwarder = if args.open { open_browser(&ctx.workspace.scratch_dir(), &login) } else { None };
    note!("arbiter ui: Ctrl-C stops it");

    let shutdown = CancellationToken::new();
    tokio::spawn(crate::commands::serve::stop_on_signal(shutdown.clone()));
    let served = bound.run(state, shutdown).await;
    if let Some(file) = forwarder {
        let _ = std::fs::remove_file(file);
    }
    served.map_err(CliError::environment)?;
    Ok(0)
}

/// The dashboard's state over the local store: plans administered here, their repositories
/// as local commands find them, this repository's runs.
fn state_over<S>(store: Arc<S>, ctx: &RepoContext) -> Result<AppState, CliError>
where
    S: UnitQueue
        + arbiter_store::Store
        + arbiter_store::workers::WorkerRegistry
        + arbiter_store::tokens::AccessTokens
        + 'static,
{
    let repositories = Arc::new(crate::commands::plan::repositories(ctx));
    let admin = Arc::new(LocalPlanAdmin::new(store.clone(), repositories.clone()));
    Ok(AppState::new(store, unused_tokens()?, ctx.workspace.dir())
        .with_admin(admin)
        .with_plan_repositories(repositories)
        .with_local_runs(ctx.workspace.runs_dir()))
}

/// Random bootstrap and admin tokens nobody learns: `arbiter ui` takes no workers, and
/// logs in through its one-time link.
fn unused_tokens() -> Result<Tokens, CliError> {
    let random = || arbiter_store::workers::random_hex(32).map(Secret::new).map_err(CliError::environment);
    Tokens::new(&random()?, &random()?).map_err(CliError::environment)
}

/// Opens the browser on a private page that forwards to `url`, when there is a display and
/// a way to open one (`xdg-open`, `open`); the page's path, not the link, is on the command
/// line. The page's path, to delete when the dashboard stops.
fn open_browser(scratch: &Path, url: &str) -> Option<PathBuf> {
    use std::os::unix::fs::OpenOptionsExt;
    let has_display = ["DISPLAY", "WAYLAND_DISPLAY"].iter().any(|v| std::env::var_os(v).is_some_and(|d| !d.is_empty()))
        || cfg!(target_os = "macos");
    let path = std::env::var("PATH").unwrap_or_default();
    let opener = ["xdg-open", "open"].into_iter().find_map(|p| arbiter_runner::process::find_program(p, &path))?;
    if !has_display {
        return None;
    }
    std::fs::create_dir_all(scratch).ok()?;
    let file = scratch.join(format!("ui-login-{}.html", std::process::id()));
    let page = format!(
        "<!doctype html><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"0; url={url}\"><title>arbiter ui</title><a href=\"{url}\">Open the arbiter dashboard</a>"
    );
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&file).ok()?;
    f.write_all(page.as_bytes()).ok()?;
    drop(f);
    let spawned = std::process::Command::new(opener)
        .arg(&file)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    match spawned {
        Ok(_) => Some(file),
        Err(_) => {
            let _ = std::fs::remove_file(&file);
            None
        }
    }
}
