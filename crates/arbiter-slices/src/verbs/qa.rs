//! `arbiter qa`: every registered slice checked without a model — the rules engine on its
//! files (every group, and the project checks once) and its tests — with a summary. A failing
//! test fails the command; a rule violation fails it with `--strict`.

use std::time::Duration;

use arbiter_core::rules::CheckKind;
use arbiter_runner::process::{self, ShellCommand};
use arbiter_runner::rules::{CheckRun, check_files, files_under, load_book};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::Workspace;
use crate::{Result, SliceError};

/// How a slice's tests went.
#[derive(Clone, Debug, Serialize)]
pub struct TestRun {
    pub command: String,
    /// `None`: the slice has no test file.
    pub passed: Option<bool>,
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    /// The end of the output (when they failed).
    pub output_tail: String,
    /// The full output.
    pub log: Option<String>,
}

/// One slice's line of the summary.
#[derive(Clone, Debug, Serialize)]
pub struct QaRow {
    pub slice: String,
    pub dir: String,
    /// `false`: registered, but not on this checkout.
    pub present: bool,
    pub files_checked: usize,
    /// `path:line message`.
    pub violations: Vec<String>,
    pub tests: Option<TestRun>,
}

/// What `arbiter qa` found.
#[derive(Clone, Debug, Serialize)]
pub struct QaOutcome {
    pub slices: Vec<QaRow>,
    /// Project checks (the constitution), once for the repository.
    pub project_violations: Vec<String>,
    /// Files the rules could not read (`path: why`).
    pub skipped: Vec<String>,
    pub tests_passed: usize,
    pub tests_failed: usize,
    pub slices_without_tests: usize,
    pub violations: usize,
    pub strict: bool,
    /// Whether the command succeeds: no failing test, and no violation with `--strict`.
    pub passed: bool,
}

/// Runs a slice's test command in the repository root (its own code, with the user's
/// environment, as the user's test runner would), with the configured time limit; the
/// output is kept under `.arbiter/features/qa/`.
pub async fn run_tests(ws: &Workspace, dir: &str, label: &str, cancel: &CancellationToken) -> Result<TestRun> {
    let settings = &ws.repo.settings;
    let command = settings.test_command_for(dir);
    let tests = ws.root().join(dir).join(&settings.tests_file);
    if !tests.is_file() {
        return Ok(TestRun {
            command,
            passed: None,
            exit_code: None,
            timed_out: false,
            output_tail: String::new(),
            log: None,
        });
    }
    let logs = ws.root().join(".arbiter").join("features").join("qa");
    std::fs::create_dir_all(&logs)?;
    let log = logs.join(format!("{}.log", label.replace('/', "-")));
    let exit = process::run_shell(
        &ShellCommand {
            command: command.clone(),
            cwd: ws.root().to_path_buf(),
            env: std::env::vars().collect(),
            stdout: log.clone(),
            stderr: log.clone(),
            timeout: Duration::from_secs(settings.test_timeout_seconds),
            jail: None,
        },
        cancel,
    )
    .await
    .map_err(|e| SliceError::environment(format!("cannot run the test command `{command}`: {e}")))?;
    let passed = exit.success();
    Ok(TestRun {
        command,
        passed: Some(passed),
        exit_code: exit.code,
        timed_out: exit.timed_out,
        output_tail: if passed {
            String::new()
        } else {
            arbiter_core::gate::tail(&process::read_tail(&log, 16_000), 40, 4000)
        },
        log: Some(log.strip_prefix(ws.root()).unwrap_or(&log).display().to_string()),
    })
}

pub async fn qa(ws: &Workspace, strict: bool, cancel: &CancellationToken) -> Result<QaOutcome> {
    let project = ws.project()?;
    let book = load_book(ws.root(), &ws.rule_options)?;
    let slices = crate::layout::scan(ws.root(), &project);
    let mut rows = Vec::new();
    let mut all_files = Vec::new();
    for (name, domain) in project.known_features() {
        let found = slices.iter().find(|s| s.name == name && (s.domain == domain || s.flat));
        let dir = found
            .map(|s| s.dir.clone())
            .unwrap_or_else(|| format!("{}/{domain}/{name}", project.root_for_domain(&domain)));
        let present = found.is_some();
        let files = if present { files_under(ws.root(), std::slice::from_ref(&dir))? } else { Vec::new() };
        all_files.extend(files.iter().cloned());
        rows.push(QaRow {
            slice: format!("{domain}/{name}"),
            dir,
            present,
            files_checked: files.len(),
            violations: Vec::new(),
            tests: None,
        });
    }
    let run = CheckRun { root: ws.root(), book: &book, options: &ws.rule_options, groups: None, project: true };
    let report = check_files(&run, &all_files).await?;
    let project_rules: Vec<String> = book
        .sets
        .iter()
        .flat_map(|s| &s.checks)
        .filter(|c| matches!(c.kind, CheckKind::Project(_)))
        .map(|c| c.id.clone())
        .collect();
    let mut project_violations = Vec::new();
    for v in &report.violations {
        if project_rules.contains(&v.rule) {
            project_violations.push(v.to_string());
        } else if let Some(row) = rows.iter_mut().find(|r| v.path.starts_with(&format!("{}/", r.dir))) {
            row.violations.push(v.to_string());
        }
    }
    for row in rows.iter_mut().filter(|r| r.present) {
        if cancel.is_cancelled() {
            break;
        }
        row.tests = Some(run_tests(ws, &row.dir, &row.slice, cancel).await?);
    }
    let result = |p: Option<bool>| rows.iter().filter(|r| r.tests.as_ref().map(|t| t.passed) == Some(p)).count();
    let (tests_passed, tests_failed) = (result(Some(true)), result(Some(false)));
    let slices_without_tests = rows.iter().filter(|r| r.tests.as_ref().is_none_or(|t| t.passed.is_none())).count();
    let violations = report.violations.len();
    let passed = tests_failed == 0 && !(strict && violations > 0) && !cancel.is_cancelled();
    Ok(QaOutcome {
        slices: rows,
        project_violations,
        skipped: report.skipped.iter().map(|s| format!("{}: {}", s.path, s.why)).collect(),
        tests_passed,
        tests_failed,
        slices_without_tests,
        violations,
        strict,
        passed,
    })
}
