//! `arbiter rules check [PATH...]` and `arbiter rules list`: the rules engine alone, on the
//! repository's rule book (shipped sets, orch.py's `<dir>/<lang>/core.json`,
//! `.arbiter/rules/<lang>/*.json`).

use std::path::{Path, PathBuf};

use arbiter_core::rules::{CheckKind, RuleBook, RuleOptions, Violation};
use arbiter_runner::rules::{CheckRun, RulesError, check_files, files_under, load_book};
use serde::Serialize;

use crate::cli::RulesCommand;
use crate::context::RepoContext;
use crate::error::{CliError, exit};
use crate::output::{JsonDocument, note, out, warning};

pub async fn rules(repo: Option<&Path>, cmd: &RulesCommand) -> Result<u8, CliError> {
    let ctx = RepoContext::locate(repo).await?;
    let options = RuleOptions::from_section(&ctx.config()?.rules);
    let root = ctx.workspace.repo_root().to_path_buf();
    let book = book(&root, &options)?;
    match cmd {
        RulesCommand::Check { paths, group, no_project, json } => {
            check(&root, &book, &options, paths, group, !*no_project, *json).await
        }
        RulesCommand::List { json } => Ok(list(&book, *json)),
    }
}

/// The repository's rule book, its reading warnings said.
pub fn book(root: &Path, options: &RuleOptions) -> Result<RuleBook, CliError> {
    let book = load_book(root, options).map_err(rules_error)?;
    for w in &book.warnings {
        warning!("arbiter: warning: {w}");
    }
    Ok(book)
}

/// A rules error as the user sees it: a rule file or path is their input (exit 2), a
/// missing Python the environment (exit 3).
pub fn rules_error(e: RulesError) -> CliError {
    if e.is_usage() { CliError::usage(e) } else { CliError::environment(e) }
}

/// `rules check --json`.
#[derive(Serialize)]
struct RulesChecked<'a> {
    files_checked: usize,
    violations: &'a [Violation],
    skipped: Vec<String>,
    passed: bool,
}

impl JsonDocument for RulesChecked<'_> {
    const SCHEMA: &'static str = "rules-check";
}

#[allow(clippy::too_many_arguments)]
async fn check(
    root: &Path,
    book: &RuleBook,
    options: &RuleOptions,
    paths: &[String],
    groups: &[String],
    project: bool,
    json: bool,
) -> Result<u8, CliError> {
    let rel = relative_to_root(root, paths)?;
    let files = files_under(root, &rel).map_err(rules_error)?;
    let groups = (!groups.is_empty()).then_some(groups);
    if let Some(g) = groups {
        let known = book.groups();
        if let Some(bad) = g.iter().find(|g| !known.contains(g)) {
            return Err(CliError::usage(format!(
                "no check belongs to the group '{bad}' (groups: {}); `arbiter rules list` shows the checks",
                known.join(", ")
            )));
        }
    }
    let run = CheckRun { root, book, options, groups, project };
    let report = check_files(&run, &files).await.map_err(rules_error)?;
    let skipped: Vec<String> = report.skipped.iter().map(|s| format!("{}: {}", s.path, s.why)).collect();
    if json {
        crate::output::json(&RulesChecked {
            files_checked: report.files_checked,
            violations: &report.violations,
            skipped,
            passed: report.passed(),
        });
    } else {
        for v in &report.violations {
            out!("{v}");
        }
        for s in &skipped {
            note!("arbiter: not checked: {s}");
        }
        note!("arbiter: {} file(s) checked, {} violation(s)", report.files_checked, report.violations.len());
    }
    Ok(if report.passed() { exit::SUCCESS } else { exit::NO_RESULT })
}

/// Paths given on the command line (relative to the current directory) as paths relative to
/// the repository root; one outside it is refused.
fn relative_to_root(root: &Path, paths: &[String]) -> Result<Vec<String>, CliError> {
    let cwd = std::env::current_dir()?;
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    paths
        .iter()
        .map(|p| {
            let abs: PathBuf = cwd.join(p);
            let abs = abs.canonicalize().map_err(|e| CliError::usage(format!("{p}: cannot be read ({e})")))?;
            let rel = abs.strip_prefix(&root).map_err(|_| {
                CliError::usage(format!("{p} is outside the repository ({}); check files inside it", root.display()))
            })?;
            let rel = rel.to_string_lossy().replace('\\', "/");
            Ok(if rel.is_empty() { ".".to_string() } else { rel })
        })
        .collect()
}

/// `rules list --json`.
#[derive(Serialize)]
struct RulesListed {
    sets: Vec<SetLine>,
    warnings: Vec<String>,
}

#[derive(Serialize)]
struct SetLine {
    lang: &'static str,
    source: String,
    checks: Vec<CheckLine>,
}

#[derive(Serialize)]
struct CheckLine {
    id: String,
    group: String,
    kind: &'static str,
    message: String,
}

impl JsonDocument for RulesListed {
    const SCHEMA: &'static str = "rules-list";
}

fn kind_name(kind: &CheckKind) -> &'static str {
    match kind {
        CheckKind::Line { .. } => "line",
        CheckKind::TextRequired { .. } => "text-required",
        CheckKind::Balanced { .. } => "balanced",
        CheckKind::PyAst(_) => "py-ast",
        CheckKind::Project(_) => "project",
    }
}

fn list(book: &RuleBook, json: bool) -> u8 {
    let sets: Vec<SetLine> = book
        .sets
        .iter()
        .map(|s| SetLine {
            lang: s.lang.dir_name(),
            source: s.source.clone(),
            checks: s
                .checks
                .iter()
                .map(|c| CheckLine {
                    id: c.id.clone(),
                    group: c.group.clone(),
                    kind: kind_name(&c.kind),
                    message: c.message.clone(),
                })
                .collect(),
        })
        .collect();
    if json {
        crate::output::json(&RulesListed { sets, warnings: book.warnings.clone() });
        return exit::SUCCESS;
    }
    for s in &sets {
        out!("{} ({}):", s.source, s.lang);
        for c in &s.checks {
            out!("  {:<22} {:<12} {:<13} {}", c.id, c.group, c.kind, c.message);
        }
    }
    exit::SUCCESS
}
