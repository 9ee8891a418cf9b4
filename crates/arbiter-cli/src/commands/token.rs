//! `arbiter token create|list|revoke`: named access tokens for the dashboard and the API —
//! an admin token, or a read-only one (`--read-only`) that looks but never acts. Against a
//! control plane (`--server`, admin token in ARBITER_TOKEN) or the local store (`arbiter ui`).
//! A new token is written to `--token-file` (mode 0600), or printed once on stdout.

use std::path::Path;
use std::sync::Arc;

use arbiter_server::api::{TokenRequest, TokenView};
use arbiter_store::tokens::{AccessTokens, Role};

use crate::cli::TokenCommand;
use crate::context::{OpenedStore, RepoContext};
use crate::error::CliError;
use crate::output::{JsonDocument, out, warning};

/// `token list --json`.
#[derive(serde::Serialize)]
struct Tokens<'a> {
    tokens: &'a [TokenView],
}

impl JsonDocument for Tokens<'_> {
    const SCHEMA: &'static str = "token-list";
}

/// The local store's tokens (`.arbiter/arbiter.db`, or Postgres with --database-url).
pub async fn local_tokens(repo: Option<&Path>) -> Result<Arc<dyn AccessTokens>, CliError> {
    Ok(match RepoContext::locate(repo).await?.open_store().await? {
        OpenedStore::Postgres(pg) => pg,
        OpenedStore::Sqlite(sqlite) => sqlite,
    })
}

fn now() -> arbiter_core::time::Timestamp {
    use arbiter_core::Clock;
    arbiter_runner::SystemClock.now()
}

pub async fn token(repo: Option<&Path>, cmd: &TokenCommand) -> Result<u8, CliError> {
    match cmd {
        TokenCommand::Create { name, read_only, token_file, remote } => {
            arbiter_store::tokens::check_token_name(name).map_err(CliError::usage)?;
            let role = if *read_only { Role::ReadOnly } else { Role::Admin };
            if let Some(file) = token_file {
                if file.exists() {
                    return Err(CliError::usage(format!(
                        "{} exists already: choose another --token-file (a token file is never overwritten)",
                        file.display()
                    )));
                }
                super::worker::prepare_token_dir(file)?;
            }
            let token = match remote.server() {
                Some(server) => {
                    let admin = super::worker::admin_token()?;
                    let request = TokenRequest { name: name.clone(), role };
                    let client = super::worker::client(&server)?;
                    client.create_token(&admin, &request).await.map_err(super::worker::client_error)?.token
                }
                None => local_tokens(repo).await?.create_token(name, role, now()).await?.token.expose().to_string(),
            };
            match token_file {
                Some(file) => match super::worker::write_token_file(file, &token) {
                    Ok(()) => out!("created the {role} token '{name}'; it is in {} (mode 0600)", file.display()),
                    Err(e) => {
                        // The token exists now and its name is taken: it is not lost with the file.
                        warning!(
                            "{e}; the {role} token '{name}' is printed below instead, this once (only its hash is kept)"
                        );
                        out!("{token}");
                    }
                },
                None => {
                    warning!(
                        "the {role} token '{name}' is printed below, this once (only its hash is kept): keep it somewhere safe; --token-file FILE writes it to a 0600 file instead"
                    );
                    out!("{token}");
                }
            }
            Ok(0)
        }
        TokenCommand::List { json, remote } => {
            let tokens: Vec<TokenView> = match remote.server() {
                Some(server) => {
                    let admin = super::worker::admin_token()?;
                    super::worker::client(&server)?.tokens(&admin).await.map_err(super::worker::client_error)?
                }
                None => local_tokens(repo).await?.tokens().await?.iter().map(TokenView::from).collect(),
            };
            if *json {
                crate::output::json(&Tokens { tokens: &tokens });
            } else if tokens.is_empty() {
                crate::output::text("no access tokens; create one with `arbiter token create NAME [--read-only]`\n");
            } else {
                let rows: Vec<Vec<String>> = tokens
                    .iter()
                    .map(|t| {
                        vec![
                            t.name.clone(),
                            t.role.to_string(),
                            if t.revoked_at.is_some() { "revoked".into() } else { "live".into() },
                            t.created_at.clone(),
                            t.last_used_at.clone().unwrap_or_else(|| "never".into()),
                        ]
                    })
                    .collect();
                crate::output::text(&crate::output::columns(&["NAME", "ROLE", "STATE", "CREATED", "LAST USED"], &rows));
            }
            Ok(0)
        }
        TokenCommand::Revoke { name, remote } => {
            match remote.server() {
                Some(server) => {
                    let admin = super::worker::admin_token()?;
                    let client = super::worker::client(&server)?;
                    client.revoke_token(&admin, name).await.map_err(super::worker::client_error)?;
                }
                None => {
                    local_tokens(repo).await?.revoke_token(name, now()).await?;
                }
            }
            out!("revoked the access token '{name}': it no longer works, and its dashboard sessions end");
            Ok(0)
        }
    }
}
