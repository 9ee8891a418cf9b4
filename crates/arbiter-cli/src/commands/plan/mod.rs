//! `arbiter plan …`: import and apply plan files, inspect plans (export, show, status,
//! list, events), change them (create, budget, reset, cancel, retry), and run them with a
//! pool of local workers.
//!
//! Every command but `run` and `schema` goes through the plan administration port
//! ([`PlanAdmin`]): the store and repositories on this machine ([`LocalPlanAdmin`]), or a
//! control plane with `--server URL` ([`RemotePlanAdmin`], the admin token from
//! `ARBITER_TOKEN`). This module reads plan files (resolving a relative `repository`
//! against the file's directory), asks for confirmations and prints: the same output
//! whichever side answers. The port decides whether a plan owns its integration branch
//! ([`plan_branch`](arbiter_runner::plan_branch)); a refusal changes nothing.

mod admin;
mod import;
mod run;
mod show;

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::Arc;

use arbiter_core::plan::gate::Rules;
use arbiter_core::plan::settings::RunOverrides;
use arbiter_runner::plan_admin::{LocalPlanAdmin, PlanAdmin, normalize_lexically};
use arbiter_runner::plan_repos::{ByRepository, is_url};
use arbiter_server::plan_client::RemotePlanAdmin;
use arbiter_store::plans::ImportMode;
use arbiter_store::units::UnitQueue;

use crate::cli::{PlanCommand, PlanServerArgs};
use crate::context::RepoContext;
use crate::error::{CliError, exit};

pub(crate) use import::program_exists;
pub(crate) use show::render_dag;

/// The JSON Schema of plan files (`arbiter plan schema`).
pub const SCHEMA: &str = include_str!("../plan.schema.json");

/// Whose plans a command administers: the local store's or a control plane's.
struct Plans {
    admin: Arc<dyn PlanAdmin>,
    /// The repository the command runs in (`--repo`, else the current directory's): always
    /// there for the local store, where there is one with `--server`.
    ctx: Option<RepoContext>,
    /// The plans are a control plane's (`--server`).
    remote: bool,
}

impl Plans {
    async fn open(repo: Option<&Path>, remote: &PlanServerArgs) -> Result<Self, CliError> {
        if let Some(server) = remote.server() {
            let token = crate::commands::worker::admin_token()?;
            let client = crate::commands::worker::client(&server)?;
            let admin = Arc::new(RemotePlanAdmin::new(client, token));
            // Outside a repository is fine, unless --repo named one.
            let ctx = match repo {
                Some(_) => Some(RepoContext::locate(repo).await?),
                None => RepoContext::locate(None).await.ok(),
            };
            return Ok(Plans { admin, ctx, remote: true });
        }
        let ctx = RepoContext::locate(repo).await?;
        let (_, plans) = ctx.plan_stores().await?;
        Ok(Plans { admin: local_admin(&ctx, plans), ctx: Some(ctx), remote: false })
    }

    /// The `repository` a plan goes with: a git URL as it is; a path made absolute against
    /// `relative_to` (the plan file's directory), else the repository the command runs in;
    /// that repository when none is given. Locally the path must exist. For a control plane
    /// it need only exist on the server's machine, which judges it: resolved when it exists
    /// here, else normalized as text; and outside a repository, none given stays none.
    fn repository(&self, given: Option<&str>, relative_to: Option<&Path>) -> Result<Option<String>, CliError> {
        if let Some(url) = given.filter(|g| is_url(g)) {
            return Ok(Some(url.to_string()));
        }
        let root = self.ctx.as_ref().map(|c| c.workspace.repo_root().to_path_buf());
        let path = match (given, &root) {
            (None, Some(root)) => return Ok(Some(root.display().to_string())),
            (None, None) => return Ok(None),
            (Some(given), _) => {
                let base = match relative_to.map(Path::to_path_buf).or(root) {
                    Some(base) => base,
                    None => std::env::current_dir()?,
                };
                base.join(given)
            }
        };
        match path.canonicalize() {
            Ok(path) => Ok(Some(path.display().to_string())),
            Err(_) if self.remote => Ok(Some(normalize_lexically(&path).display().to_string())),
            Err(e) => Err(CliError::usage(format!(
                "the plan's repository {} does not exist ({e}); fix `repository` in the plan",
                path.display()
            ))),
        }
    }
}

/// The plan administration a command that watches plans reads through (`arbiter
/// dashboard`): the local store's, or a control plane's with `--server`, and what to call it.
pub(crate) async fn open_admin(
    repo: Option<&Path>,
    remote: &PlanServerArgs,
) -> Result<crate::commands::dashboard::Opened, CliError> {
    let plans = Plans::open(repo, remote).await?;
    let source = match (remote.server(), &plans.ctx) {
        (Some(server), _) => server.server,
        (None, Some(ctx)) => format!("the store of {}", ctx.workspace.repo_root().display()),
        (None, None) => "the local store".to_string(),
    };
    Ok(crate::commands::dashboard::Opened { admin: plans.admin, source })
}

/// Plan administration over `plans` and the repositories of this machine.
pub(crate) fn local_admin(ctx: &RepoContext, plans: Arc<dyn UnitQueue>) -> Arc<dyn PlanAdmin> {
    Arc::new(LocalPlanAdmin::new(plans, Arc::new(repositories(ctx))))
}

/// Plans' repositories as a local command sees them: a path, a clone of a URL kept under
/// `.arbiter/plans/<id>/repo`, or (naming none) the repository the command runs in.
pub(crate) fn repositories(ctx: &RepoContext) -> ByRepository {
    ByRepository::new(ctx.workspace.dir().join("plans"), Some(ctx.workspace.clone()))
}

/// The `--server` options of a plan command (`run` and `schema` have none).
fn remote_of(cmd: &PlanCommand) -> Option<&PlanServerArgs> {
    match cmd {
        PlanCommand::Import { remote, .. }
        | PlanCommand::Apply { remote, .. }
        | PlanCommand::Export { remote, .. }
        | PlanCommand::Show { remote, .. }
        | PlanCommand::Status { remote, .. }
        | PlanCommand::List { remote, .. }
        | PlanCommand::Create { remote, .. }
        | PlanCommand::Budget { remote, .. }
        | PlanCommand::Reset { remote, .. }
        | PlanCommand::Cancel { remote, .. }
        | PlanCommand::Retry { remote, .. }
        | PlanCommand::Events { remote, .. }
        | PlanCommand::Push { server: remote, .. } => Some(remote),
        PlanCommand::Run { .. } | PlanCommand::Schema | PlanCommand::New(_) => None,
    }
}

pub async fn plan(repo: Option<&Path>, cmd: &PlanCommand) -> Result<u8, CliError> {
    match cmd {
        PlanCommand::Schema => {
            crate::output::text(SCHEMA);
            return Ok(exit::SUCCESS);
        }
        PlanCommand::New(args) => return crate::commands::plan_new::new(repo, args).await,
        PlanCommand::Run {
            id,
            workers,
            lease_seconds,
            json,
            server,
            no_verify,
            runner,
            candidates,
            command,
            backend,
            timeout_seconds,
            strategy,
        } => {
            if let Some(url) = server {
                return Err(CliError::usage(format!(
                    "`arbiter plan run` runs a plan with workers on this machine, over its own store; a control plane's plans are run by its workers: start one with `arbiter worker run --server {url}` (with its token from `arbiter worker register`)"
                )));
            }
            let ctx = RepoContext::locate(repo).await?;
            let (runs, plans) = ctx.plan_stores().await?;
            let overrides = RunOverrides {
                no_verify: *no_verify,
                runner: runner.clone(),
                candidates: *candidates,
                command: command.clone(),
                backend: backend.clone(),
                timeout_seconds: *timeout_seconds,
                strategy: strategy.clone(),
            };
            return run::run(&ctx, runs, plans, id, *workers, *lease_seconds, &overrides, *json).await;
        }
        _ => {}
    }
    let plans = Plans::open(repo, remote_of(cmd).unwrap_or(&PlanServerArgs::default())).await?;
    let admin = &*plans.admin;
    match cmd {
        PlanCommand::Schema | PlanCommand::Run { .. } | PlanCommand::New(_) => Ok(exit::SUCCESS),
        PlanCommand::Import { file, update, adopt_branch, json, .. } => {
            import::import(&plans, file, mode(*update), None, Rules::Arbiter, adopt_branch.as_deref(), *json).await
        }
        PlanCommand::Apply { file, strict, gate, update, adopt_branch, json, .. } => {
            let rules = Rules::parse(gate).unwrap_or_default();
            import::import(&plans, file, mode(*update), Some(*strict), rules, adopt_branch.as_deref(), *json).await
        }
        PlanCommand::Export { id, output, format, .. } => {
            import::export_plan(admin, id, output.as_deref(), format).await
        }
        PlanCommand::Show { id, json, .. } => show::show(admin, id, *json).await,
        PlanCommand::Status { id, json, .. } => show::status(admin, id, *json).await,
        PlanCommand::List { json, .. } => show::list(admin, *json).await,
        PlanCommand::Create { id, name, budget, repository, .. } => {
            admin::create(&plans, id, name, budget.as_deref(), repository.as_deref()).await
        }
        PlanCommand::Budget { id, usd, .. } => admin::budget(admin, id, usd).await,
        PlanCommand::Reset { id, hard, keep_branch, yes, .. } => {
            admin::reset(admin, id, *hard, *keep_branch, *yes).await
        }
        PlanCommand::Cancel { id, .. } => admin::cancel(admin, id).await,
        PlanCommand::Retry { id, task, .. } => admin::retry(admin, id, task).await,
        PlanCommand::Push { id, remote, json, .. } => admin::push(admin, id, remote, *json).await,
        PlanCommand::Events { id, json, .. } => show::events(admin, id, *json).await,
    }
}

fn mode(update: bool) -> ImportMode {
    if update { ImportMode::Update } else { ImportMode::Add }
}

fn short(commit: &str) -> &str {
    &commit[..commit.len().min(10)]
}

pub(crate) fn confirm(question: &str) -> Result<bool, CliError> {
    if !std::io::stdin().is_terminal() {
        return Err(CliError::usage("this asks for confirmation and there is no terminal to answer it: pass --yes"));
    }
    crate::output::prompt(question);
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

/// Who acts from this command line, as plan events name them: `cli:USER` (`cli` when the
/// user is unknown). A control plane names its callers itself, from their tokens.
pub fn local_actor() -> String {
    match std::env::var("USER").ok().filter(|u| !u.is_empty() && u.chars().all(|c| c.is_ascii_graphic())) {
        Some(user) => format!("cli:{user}"),
        None => "cli".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbiter_core::plan::file::{Syntax, parse};

    /// The field names a parser error lists as expected (`expected one of `a`, `b``).
    fn accepted_fields(json: &str) -> Vec<String> {
        let err = parse(json, Syntax::Json).unwrap_err().0;
        let list = err.split("expected one of").nth(1).unwrap_or_else(|| panic!("{err}"));
        let mut fields: Vec<String> = list.split(',').map(|f| f.trim().trim_matches('`').to_string()).collect();
        fields.sort();
        fields
    }

    fn schema_fields(pointer: &str) -> Vec<String> {
        let schema: serde_json::Value = serde_json::from_str(SCHEMA).expect("the schema is JSON");
        let mut fields: Vec<String> = schema
            .pointer(pointer)
            .and_then(|p| p.as_object())
            .unwrap_or_else(|| panic!("no {pointer} in the schema"))
            .keys()
            .cloned()
            .collect();
        fields.sort();
        fields
    }

    #[test]
    fn the_schema_names_exactly_what_the_parser_accepts() {
        let plan = accepted_fields(r#"{"id": "p", "name": "P", "tasks": [], "zzz": 1}"#);
        assert_eq!(plan, schema_fields("/properties"));
        let defaults = accepted_fields(r#"{"id": "p", "name": "P", "tasks": [], "defaults": {"zzz": 1}}"#);
        assert_eq!(defaults, schema_fields("/$defs/defaults/properties"));
        let task = accepted_fields(r#"{"id": "p", "name": "P", "tasks": [{"id": "a", "zzz": 1}]}"#);
        assert_eq!(task, schema_fields("/$defs/task/properties"));
    }
}
