//! `arbiter worker register|run|list|revoke|rotate`: a control plane's workers, through
//! [`arbiter_server::client`]; `run` is the worker loop of `arbiter_runner::worker` over the
//! work protocol ([`HttpCoordinator`]). Tokens come from the environment (`ARBITER_BOOTSTRAP_TOKEN`
//! to register, `ARBITER_TOKEN` for the admin's commands) and a worker's own token goes to a
//! file of mode 0600, never to the terminal (except `rotate` without `--token-file`, once,
//! with a warning).

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arbiter_runner::SystemClock;
use arbiter_runner::coordinator::Capabilities;
use arbiter_runner::repo_cache::{GitRemote, RepoCache};
use arbiter_runner::worker::{Progress, RunIndexPerRepository, Tournaments, Until, Worker};
use arbiter_server::api::{RegisterRequest, WorkerView};
use arbiter_server::client::{Client, ClientError, ClientOptions};
use arbiter_server::work_client::HttpCoordinator;
use arbiter_store::workers::Secret;
use tokio_util::sync::CancellationToken;

use crate::cli::{ServerArgs, WorkerCommand};
use crate::error::CliError;
use crate::output::{JsonDocument, out, warning};

/// `worker list --json`.
#[derive(serde::Serialize)]
struct Workers<'a> {
    workers: &'a [WorkerView],
}

impl JsonDocument for Workers<'_> {
    const SCHEMA: &'static str = "worker-list";
}

pub async fn worker(cmd: &WorkerCommand) -> Result<u8, CliError> {
    match cmd {
        WorkerCommand::Register { server, name, token_file, runners, backends, slots, replace } => {
            let bootstrap = secret_from_env(
                "ARBITER_BOOTSTRAP_TOKEN",
                "the bootstrap token the server was started with (ask its operator)",
            )?;
            let client = client(server)?;
            if token_file.exists() && !replace {
                return Err(CliError::usage(format!(
                    "{} exists already; choose another --token-file, or pass --replace to re-register this worker (its old token stops working)",
                    token_file.display()
                )));
            }
            // Fail before registering if the token could not be kept.
            prepare_token_dir(token_file)?;
            let request = RegisterRequest {
                name: name.clone(),
                runners: runners.clone(),
                backends: backends.clone(),
                slots: *slots,
                replace: *replace,
            };
            let registered = client.register(&bootstrap, &request).await.map_err(client_error)?;
            write_token_file(token_file, &registered.token)?;
            let verb = if registered.replaced { "re-registered" } else { "registered" };
            out!(
                "{verb} worker {} (id {}); its token is in {} (mode 0600)",
                registered.name,
                registered.worker_id,
                token_file.display()
            );
            Ok(0)
        }
        WorkerCommand::Run { server, token_file, plan, slots, once, data_dir, log_format } => {
            crate::logging::init(log_format);
            let run = RunArgs {
                server,
                token_file,
                plan: plan.as_deref(),
                slots: *slots,
                once: *once,
                data_dir: data_dir.as_deref(),
            };
            run_worker(run).await
        }
        WorkerCommand::List { server, json } => {
            let admin = admin_token()?;
            let workers = client(server)?.workers(&admin).await.map_err(client_error)?;
            if *json {
                crate::output::json(&Workers { workers: &workers });
            } else {
                crate::output::text(&table(&workers));
            }
            Ok(0)
        }
        WorkerCommand::Revoke { name, server } => {
            let admin = admin_token()?;
            let worker = client(server)?.revoke(&admin, name).await.map_err(client_error)?;
            out!("revoked worker {} (id {}): its token no longer works", worker.name, worker.id);
            Ok(0)
        }
        WorkerCommand::Rotate { name, server, token_file } => {
            let admin = admin_token()?;
            let client = client(server)?;
            if let Some(file) = token_file {
                prepare_token_dir(file)?;
            }
            let rotated = client.rotate(&admin, name).await.map_err(client_error)?;
            match token_file {
                Some(file) => {
                    write_token_file(file, &rotated.token)?;
                    out!(
                        "rotated the token of worker {} (id {}): the new one is in {} (mode 0600); the old one no longer works",
                        rotated.name,
                        rotated.worker_id,
                        file.display()
                    );
                }
                None => {
                    warning!(
                        "warning: the new token of worker {} is printed below, this once: hand it to the worker over a secure channel (its old token no longer works); --token-file FILE writes it to a 0600 file instead",
                        rotated.name
                    );
                    out!("{}", rotated.token);
                }
            }
            Ok(0)
        }
    }
}

/// What `arbiter worker run` was given.
struct RunArgs<'a> {
    server: &'a ServerArgs,
    token_file: &'a Path,
    plan: Option<&'a str>,
    slots: u32,
    once: bool,
    data_dir: Option<&'a Path>,
}

/// `arbiter worker run`: the worker loop against the control plane, until stopped.
async fn run_worker(args: RunArgs<'_>) -> Result<u8, CliError> {
    if args.slots == 0 || args.slots > 1024 {
        return Err(CliError::usage("--slots takes 1 to 1024 units of work at once"));
    }
    let token = read_token_file(args.token_file)?;
    let options = ClientOptions {
        ca_cert: args.server.ca_cert.clone(),
        insecure: args.server.insecure,
        // Long enough for a long poll, and a report's upload.
        timeout: Some(Duration::from_secs(120)),
    };
    let client = Client::new(&args.server.server, &options).map_err(client_error)?;
    let data_dir = match args.data_dir {
        Some(d) => d.to_path_buf(),
        None => default_data_dir()?,
    };
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&data_dir).map_err(|e| {
        CliError::usage(format!(
            "cannot create the worker's data directory {}: {e}; pass --data-dir DIR",
            data_dir.display()
        ))
    })?;
    let git_base = client.url("git").map_err(client_error)?.to_string();
    let remote = GitRemote::new(git_base, token.expose().to_string(), args.server.ca_cert.clone()).map_err(|e| {
        CliError::usage(format!("--ca-cert: cannot make its path absolute: {e}; give an absolute path"))
    })?;
    let stop = CancellationToken::new();
    let coordinator =
        Arc::new(HttpCoordinator::new(client, token, RepoCache::new(data_dir.clone(), remote), stop.clone()));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let logger = tokio::spawn(async move {
        while let Some(p) = rx.recv().await {
            log_progress(&p);
        }
    });
    let worker = Arc::new(Worker {
        coordinator,
        tournaments: Arc::new(Tournaments {
            runs: Arc::new(RunIndexPerRepository::default()),
            clock: Arc::new(SystemClock),
            process_env: std::env::vars().collect(),
            models: None,
            secrets: Vec::new(),
            sandboxing: crate::context::sandboxing()?,
        }),
        id: "remote".into(),
        plan: args.plan.map(str::to_string),
        // What the worker may run is what it registered: the server filters the claims.
        capabilities: Capabilities::Any,
        slots: if args.once { 1 } else { args.slots as usize },
        until: if args.once { Until::OneUnit } else { Until::Stopped },
        cancel: stop.clone(),
        claim_wait: Duration::from_secs(20),
        progress: Some(tx),
    });
    let signals = tokio::spawn(crate::commands::serve::stop_on_signal(stop.clone()));
    tracing::info!(server = %args.server.server, slots = worker.slots, data_dir = %data_dir.display(), "worker started");
    let result = worker.run().await;
    drop(worker);
    let _ = logger.await;
    signals.abort();
    match result {
        Ok(()) => {
            tracing::info!("worker stopped");
            Ok(0)
        }
        Err(e) if e.is_usage() => Err(CliError::usage(e)),
        Err(e) => Err(CliError::environment(e)),
    }
}

/// One log line per thing the worker did.
fn log_progress(p: &Progress) {
    match p {
        Progress::Claimed { task, unit, attempt, worker, base, .. } => {
            tracing::info!(task = %task, unit = %unit, attempt, slot = %worker, base = %base, "claimed")
        }
        Progress::Spread { task, run, units } => tracing::info!(task = %task, run = %run, units, "spread"),
        Progress::UnitDone { task, unit, evaluation_ready, failed: None } => {
            tracing::info!(task = %task, unit = %unit, evaluation_ready, "unit done")
        }
        Progress::UnitDone { task, unit, evaluation_ready, failed: Some(reason) } => {
            tracing::warn!(task = %task, unit = %unit, evaluation_ready, reason = %reason, "unit failed: its candidate could not run")
        }
        Progress::Done { task, run, commit } => {
            tracing::info!(task = %task, run = run.as_deref().unwrap_or("-"), commit = %commit, "task done")
        }
        Progress::Recovered { task, commit } => tracing::info!(task = %task, commit = %commit, "already done"),
        Progress::Failed { task, reason, .. } => tracing::warn!(task = %task, reason = %reason, "attempt failed"),
        Progress::Released { task, reason } => tracing::info!(task = %task, reason = %reason, "given back"),
        Progress::LeaseLost { task } => tracing::warn!(task = %task, "lease lost: its result was not recorded"),
        Progress::Refused { task, unit, reason } => {
            tracing::warn!(task = %task, unit = %unit, reason = %reason, "refused: this worker could not run it")
        }
        Progress::Abandoned { task, reason } => {
            tracing::warn!(task = %task, reason = %reason, "report abandoned: the server stayed away; the work goes back when its lease runs out")
        }
        Progress::Reclaimed { task, worker, .. } => tracing::info!(task = %task, worker = %worker, "taken back"),
    }
}

/// The worker's token from its file, which only its owner may read.
fn read_token_file(file: &Path) -> Result<Secret, CliError> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(file).map_err(|e| {
        CliError::usage(format!(
            "cannot read the token file {}: {e}; `arbiter worker register --token-file {}` writes it",
            file.display(),
            file.display()
        ))
    })?;
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(CliError::usage(format!(
            "the token file {} can be read by other users; run `chmod 600 {}` (and rotate the token if others may have read it)",
            file.display(),
            file.display()
        )));
    }
    let text = std::fs::read_to_string(file)
        .map_err(|e| CliError::usage(format!("cannot read the token file {}: {e}", file.display())))?;
    let token = text.trim();
    if token.is_empty() {
        return Err(CliError::usage(format!("the token file {} is empty; register the worker again", file.display())));
    }
    Ok(Secret::new(token))
}

/// `$XDG_DATA_HOME/arbiter/worker`, else `~/.local/share/arbiter/worker`.
fn default_data_dir() -> Result<PathBuf, CliError> {
    if let Some(xdg) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(xdg).join("arbiter").join("worker"));
    }
    match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(".local/share/arbiter/worker")),
        None => Err(CliError::usage("no data directory: pass --data-dir DIR (or set HOME)")),
    }
}

pub(crate) fn client(server: &ServerArgs) -> Result<Client, CliError> {
    let options = ClientOptions { ca_cert: server.ca_cert.clone(), insecure: server.insecure, timeout: None };
    Client::new(&server.server, &options).map_err(client_error)
}

pub(crate) fn client_error(e: ClientError) -> CliError {
    if e.is_usage() { CliError::usage(e) } else { CliError::environment(e) }
}

fn secret_from_env(name: &str, what: &str) -> Result<Secret, CliError> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => Ok(Secret::new(v.trim())),
        _ => Err(CliError::usage(format!("set {name} to {what}; tokens are never taken from the command line"))),
    }
}

pub(crate) fn admin_token() -> Result<Secret, CliError> {
    secret_from_env("ARBITER_TOKEN", "the server's admin token (its ARBITER_ADMIN_TOKEN)")
}

/// Creates the token file's directory (mode 0700 for what is created) and checks it can be
/// written.
pub(crate) fn prepare_token_dir(file: &Path) -> Result<(), CliError> {
    let dir = match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| CliError::usage(format!("cannot create {} for the token file: {e}", dir.display())))?;
    if file.is_dir() {
        return Err(CliError::usage(format!("--token-file {} is a directory; name a file", file.display())));
    }
    Ok(())
}

/// Writes `token` to `file` with mode 0600: to a new file beside it, renamed over it, so a
/// reader never sees half a token and the file is never readable by others, not even briefly.
pub(crate) fn write_token_file(file: &Path, token: &str) -> Result<(), CliError> {
    let dir = file.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "token".into());
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = (|| -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
        f.write_all(token.as_bytes())?;
        f.write_all(b"\n")?;
        f.sync_all()?;
        std::fs::rename(&tmp, file)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(CliError::environment(format!(
            "the server issued a token but it could not be written to {}: {e}; fix that, then run the command again with --replace (or `arbiter worker rotate`)",
            file.display()
        )));
    }
    Ok(())
}

/// A worker's current work in words: what it holds (`plan/task/unit`), or that it waits
/// for work.
fn describe_work(work: &serde_json::Value) -> String {
    match work {
        serde_json::Value::Null => "-".into(),
        serde_json::Value::Object(o) if o.contains_key("claiming") => "waiting for work".into(),
        serde_json::Value::Array(held) if held.is_empty() => "waiting for work".into(),
        serde_json::Value::Array(held) => held
            .iter()
            .map(|h| ["plan", "task", "unit"].iter().filter_map(|k| h[*k].as_str()).collect::<Vec<_>>().join("/"))
            .collect::<Vec<_>>()
            .join(", "),
        other => other.to_string(),
    }
}

/// The workers as a table.
fn table(workers: &[WorkerView]) -> String {
    if workers.is_empty() {
        return "no workers; register one with `arbiter worker register`\n".into();
    }
    let rows: Vec<Vec<String>> = workers
        .iter()
        .map(|w| {
            let state = if w.revoked_at.is_some() {
                "revoked"
            } else if w.connected {
                "connected"
            } else {
                "idle"
            };
            let list = |v: &[String]| if v.is_empty() { "-".to_string() } else { v.join(",") };
            let work = describe_work(&w.current_work);
            vec![
                w.name.clone(),
                w.id.clone(),
                state.to_string(),
                list(&w.runners),
                list(&w.backends),
                w.last_heartbeat.clone().unwrap_or_else(|| "never".into()),
                work,
            ]
        })
        .collect();
    crate::output::columns(&["NAME", "ID", "STATE", "RUNNERS", "BACKENDS", "LAST HEARTBEAT", "WORK"], &rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn current_work_reads_as_words() {
        assert_eq!(describe_work(&serde_json::json!({"claiming": "2"})), "waiting for work");
        let held = serde_json::json!([{"plan": "calc", "task": "fix-add", "unit": "c01"}, {"plan": "calc", "task": "fix-mul", "unit": null}]);
        assert_eq!(describe_work(&held), "calc/fix-add/c01, calc/fix-mul");
        assert_eq!(describe_work(&serde_json::Value::Null), "-");
    }
}
