//! `arbiter worker register|list|revoke|rotate`: a control plane's workers, through
//! [`arbiter_server::client`]. Tokens come from the environment (`ARBITER_BOOTSTRAP_TOKEN`
//! to register, `ARBITER_TOKEN` for the admin's commands) and a worker's own token goes to a
//! file of mode 0600, never to the terminal (except `rotate` without `--token-file`, once,
//! with a warning).

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

use arbiter_server::api::{RegisterRequest, WorkerView};
use arbiter_server::client::{Client, ClientError, ClientOptions};
use arbiter_store::workers::Secret;

use crate::cli::{ServerArgs, WorkerCommand};
use crate::error::CliError;

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
            println!(
                "{verb} worker {} (id {}); its token is in {} (mode 0600)",
                registered.name,
                registered.worker_id,
                token_file.display()
            );
            Ok(0)
        }
        WorkerCommand::List { server, json } => {
            let admin = admin_token()?;
            let workers = client(server)?.workers(&admin).await.map_err(client_error)?;
            if *json {
                let text = serde_json::to_string_pretty(&workers)
                    .map_err(|e| CliError::environment(format!("cannot print the list: {e}")))?;
                println!("{text}");
            } else {
                print!("{}", table(&workers));
            }
            Ok(0)
        }
        WorkerCommand::Revoke { name, server } => {
            let admin = admin_token()?;
            let worker = client(server)?.revoke(&admin, name).await.map_err(client_error)?;
            println!("revoked worker {} (id {}): its token no longer works", worker.name, worker.id);
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
                    println!(
                        "rotated the token of worker {} (id {}): the new one is in {} (mode 0600); the old one no longer works",
                        rotated.name,
                        rotated.worker_id,
                        file.display()
                    );
                }
                None => {
                    eprintln!(
                        "warning: the new token of worker {} is printed below, this once: hand it to the worker over a secure channel (its old token no longer works); --token-file FILE writes it to a 0600 file instead",
                        rotated.name
                    );
                    println!("{}", rotated.token);
                }
            }
            Ok(0)
        }
    }
}

pub(crate) fn client(server: &ServerArgs) -> Result<Client, CliError> {
    let options = ClientOptions { ca_cert: server.ca_cert.clone(), insecure: server.insecure, timeout: None };
    Client::new(&server.server, &options).map_err(client_error)
}

fn client_error(e: ClientError) -> CliError {
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
fn prepare_token_dir(file: &Path) -> Result<(), CliError> {
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
fn write_token_file(file: &Path, token: &str) -> Result<(), CliError> {
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

/// The workers as a table.
fn table(workers: &[WorkerView]) -> String {
    if workers.is_empty() {
        return "no workers; register one with `arbiter worker register`\n".into();
    }
    let rows: Vec<[String; 7]> = workers
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
            let work = if w.current_work.is_null() { "-".to_string() } else { w.current_work.to_string() };
            [
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
    let header = ["NAME", "ID", "STATE", "RUNNERS", "BACKENDS", "LAST HEARTBEAT", "WORK"];
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| -> String {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<w$}  ", w = widths[i]));
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(header.to_vec());
    for r in &rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
    }
    out
}
