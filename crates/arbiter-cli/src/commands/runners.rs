//! `arbiter runners [--json]`: every runner kind and every `[runners.NAME]` table, whether
//! its program is installed (found at its configured path or on `PATH`), its version, and
//! what it is configured to use. Works outside a repository too (then without tables).

use std::path::Path;

use arbiter_core::settings::{AGENT_CLIS, ConfigFile, RunnerSection};
use arbiter_runner::cli_runner::{self, Cli};
use arbiter_runner::preflight::locate_program;
use arbiter_runner::process::find_program;
use serde::Serialize;

use crate::context::RepoContext;
use crate::error::CliError;
use crate::output::{JsonDocument, out};

/// `runners --json`.
#[derive(Serialize)]
struct Runners<'a> {
    runners: &'a [RunnerRow],
}

impl JsonDocument for Runners<'_> {
    const SCHEMA: &'static str = "runners";
}

/// One line of the listing.
#[derive(Debug, Serialize)]
struct RunnerRow {
    /// What `--runner` takes.
    name: String,
    kind: String,
    /// Defined by a `[runners.NAME]` table.
    configured: bool,
    /// The program it starts, as configured.
    program: Option<String>,
    /// Where that program is.
    path: Option<String>,
    installed: bool,
    version: Option<String>,
    /// Why it is not installed, or why its version could not be read.
    problem: Option<String>,
    model: Option<String>,
    backend: Option<String>,
    /// The built-in agent's backends.
    backends: Vec<BackendRow>,
    /// What to do about it.
    hint: Option<String>,
}

#[derive(Debug, Serialize)]
struct BackendRow {
    name: String,
    provider: String,
    model: String,
    enabled: bool,
    prices: String,
}

impl RunnerRow {
    fn new(name: &str, kind: &str, configured: bool) -> Self {
        RunnerRow {
            name: name.to_string(),
            kind: kind.to_string(),
            configured,
            program: None,
            path: None,
            installed: false,
            version: None,
            problem: None,
            model: None,
            backend: None,
            backends: Vec::new(),
            hint: None,
        }
    }
}

pub async fn runners(repo: Option<&Path>, json: bool) -> Result<u8, CliError> {
    let (config, root) = match RepoContext::locate(repo).await {
        Ok(ctx) => (ctx.config()?, Some(ctx.workspace.repo_root().to_path_buf())),
        // Outside a repository the kinds are still worth listing.
        Err(_) if repo.is_none() => (ConfigFile::default(), None),
        Err(e) => return Err(e),
    };
    let path = std::env::var("PATH").unwrap_or_default();
    let mut rows = vec![command_row(&path), builtin_row(&config)];
    let mut probes = tokio::task::JoinSet::new();
    let mut cli_rows: Vec<(String, &RunnerSection, bool)> = Vec::new();
    let defaults: Vec<RunnerSection> =
        AGENT_CLIS.iter().map(|cli| RunnerSection { kind: cli.to_string(), ..Default::default() }).collect();
    for (cli, default) in AGENT_CLIS.iter().zip(&defaults) {
        match config.runners.get(*cli) {
            Some(section) => cli_rows.push((cli.to_string(), section, true)),
            None => cli_rows.push((cli.to_string(), default, false)),
        }
    }
    for (name, section) in &config.runners {
        if !AGENT_CLIS.contains(&name.as_str()) {
            cli_rows.push((name.clone(), section, true));
        }
    }
    for (name, section, configured) in cli_rows {
        let index = rows.len();
        let mut row = RunnerRow::new(&name, &section.kind, configured);
        row.model = section.model.clone();
        row.backend = section.backend.clone();
        if section.kind == "command" {
            row.program = section.command.clone();
            match section.command.as_deref().and_then(|c| c.split_whitespace().next()) {
                Some(program) => locate(&mut row, program, root.as_deref(), &path, "fix `command` in the table"),
                None => row.problem = Some("the table has no `command`".into()),
            }
            rows.push(row);
            continue;
        }
        let Some(cli) = Cli::parse(&section.kind) else {
            row.problem = Some(format!("unknown kind '{}'", section.kind));
            row.hint = Some(format!("use kind = \"command\" or one of {}", AGENT_CLIS.join(", ")));
            rows.push(row);
            continue;
        };
        let program = section.binary.clone().unwrap_or_else(|| cli.default_binary().to_string());
        row.program = Some(program.clone());
        let fix = format!(
            "{}, or set `binary = \"/path/to/{}\"` in [runners.{name}]",
            cli_runner::install_hint(cli),
            cli.default_binary()
        );
        locate(&mut row, &program, root.as_deref(), &path, &fix);
        if let Some(found) = row.path.clone() {
            probes.spawn(async move { (index, cli_runner::version(cli, Path::new(&found)).await) });
        }
        rows.push(row);
    }
    while let Some(done) = probes.join_next().await {
        let Ok((index, version)) = done else { continue };
        match version {
            Ok(v) => rows[index].version = Some(v),
            Err(e) => rows[index].problem = Some(e),
        }
    }
    if json {
        crate::output::json(&Runners { runners: &rows });
    } else {
        print_table(&rows);
    }
    Ok(0)
}

/// Finds `program` (relative paths against the repository root) and records the result.
fn locate(row: &mut RunnerRow, program: &str, root: Option<&Path>, path: &str, fix: &str) {
    match locate_program(program, root, path) {
        Ok((_, found)) => {
            row.installed = true;
            row.path = Some(found.display().to_string());
        }
        Err(problem) => {
            row.problem = Some(format!("`{program}` {problem}"));
            row.hint = Some(fix.to_string());
        }
    }
}

fn command_row(path: &str) -> RunnerRow {
    let mut row = RunnerRow::new("command", "command", false);
    row.program = Some("sh".into());
    row.path = find_program("sh", path).map(|p| p.display().to_string());
    row.installed = row.path.is_some();
    row.hint = Some("runs `sh -c COMMAND` in the worktree: give --command or [run] command".into());
    row
}

fn builtin_row(config: &ConfigFile) -> RunnerRow {
    let mut row = RunnerRow::new("builtin", "builtin", false);
    row.installed = true;
    row.version = Some(format!("arbiter {}", env!("CARGO_PKG_VERSION")));
    row.backends = config
        .backends
        .iter()
        .map(|(name, b)| BackendRow {
            name: name.clone(),
            provider: b.provider.clone(),
            model: b.model.clone(),
            enabled: b.enabled,
            prices: b.describe_prices(),
        })
        .collect();
    if row.backends.is_empty() {
        row.hint =
            Some("no backend configured: add one with `arbiter backend add NAME --provider ... --model ...`".into());
    }
    row
}

fn print_table(rows: &[RunnerRow]) {
    let notes: Vec<String> = rows.iter().map(notes).collect();
    let installed = |r: &RunnerRow| if r.installed { "yes" } else { "no" };
    let version = |r: &RunnerRow| r.version.clone().unwrap_or_else(|| "-".into());
    let w_name = rows.iter().map(|r| r.name.len()).max().unwrap_or(0).max(4);
    let w_kind = rows.iter().map(|r| r.kind.len()).max().unwrap_or(0).max(4);
    let w_version = rows.iter().map(|r| version(r).chars().count()).max().unwrap_or(0).clamp(7, 40);
    out!("{:<w_name$}  {:<w_kind$}  {:<9}  {:<w_version$}  DETAILS", "NAME", "KIND", "INSTALLED", "VERSION");
    for (r, note) in rows.iter().zip(notes) {
        let v: String = version(r).chars().take(w_version).collect();
        out!("{:<w_name$}  {:<w_kind$}  {:<9}  {:<w_version$}  {note}", r.name, r.kind, installed(r), v);
    }
    out!();
    out!(
        "Use a name with `arbiter run --runner NAME[,NAME...]`; configure one with a [runners.NAME] table (docs/runners.md)."
    );
}

/// The DETAILS column.
fn notes(r: &RunnerRow) -> String {
    let mut parts: Vec<String> = Vec::new();
    if r.kind == "builtin" {
        if r.backends.is_empty() {
            parts.extend(r.hint.clone());
        } else {
            let list: Vec<String> = r
                .backends
                .iter()
                .map(|b| {
                    let state = if b.enabled { "" } else { ", disabled" };
                    format!("{} ({}, {}, {}{state})", b.name, b.provider, b.model, b.prices)
                })
                .collect();
            parts.push(format!("backends: {}", list.join("; ")));
        }
        return parts.join("; ");
    }
    if let Some(path) = &r.path {
        parts.push(path.clone());
    }
    if r.configured {
        parts.push(format!("[runners.{}]", r.name));
    }
    if let Some(m) = &r.model {
        parts.push(format!("model {m}"));
    }
    if let Some(b) = &r.backend {
        parts.push(format!("backend {b}"));
    }
    if let Some(p) = &r.problem {
        parts.push(p.clone());
    }
    if let Some(h) = r.hint.as_ref().filter(|_| !r.installed || r.kind == "command") {
        parts.push(h.clone());
    }
    parts.join("; ")
}
