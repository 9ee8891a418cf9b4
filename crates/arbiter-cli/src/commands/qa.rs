//! `arbiter qa [--strict]`: every registered feature slice's rules and tests, a summary
//! table, no model. Exit 1 when a test fails (and, with `--strict`, when a rule does).

use std::path::Path;

use arbiter_slices::verbs::QaOutcome;
use tokio_util::sync::CancellationToken;

use super::feature::{slice_error, workspace};
use crate::error::{CliError, exit};
use crate::output::{JsonDocument, out, printable};

impl JsonDocument for QaOutcome {
    const SCHEMA: &'static str = "qa";
}

pub async fn qa(repo: Option<&Path>, strict: bool, json: bool) -> Result<u8, CliError> {
    let (_, ws) = workspace(repo).await?;
    let cancel = CancellationToken::new();
    let watcher = tokio::spawn(super::run::watch_signals(cancel.clone()));
    let outcome = arbiter_slices::verbs::qa(&ws, strict, &cancel).await.map_err(slice_error);
    watcher.abort();
    let outcome = outcome?;
    if json {
        crate::output::json(&outcome);
    } else {
        print(&outcome);
    }
    Ok(if cancel.is_cancelled() {
        exit::INTERRUPTED
    } else if outcome.passed {
        exit::SUCCESS
    } else {
        exit::NO_RESULT
    })
}

fn print(o: &QaOutcome) {
    if o.slices.is_empty() {
        out!(
            "0 feature slices registered (.features.json); `arbiter feature new <domain>/<Feature> \"...\"` creates one"
        );
        return;
    }
    let violations: Vec<&String> = o.slices.iter().flat_map(|s| &s.violations).chain(&o.project_violations).collect();
    if !violations.is_empty() {
        out!("Code standards violations ({}):", violations.len());
        for v in &violations {
            out!("  {}", printable(&v.to_string()));
        }
        out!();
    }
    for s in &o.skipped {
        out!("Not checked: {s}");
    }
    let width = o.slices.iter().map(|s| s.slice.chars().count()).max().unwrap_or(5).max(5);
    out!("{:<width$}  {:<10}  tests", "slice", "rules");
    for s in &o.slices {
        let rules = if !s.present {
            "-".to_string()
        } else if s.violations.is_empty() {
            "ok".into()
        } else {
            format!("{} issue(s)", s.violations.len())
        };
        let tests = match (&s.tests, s.present) {
            (_, false) => format!("not on this branch ({})", s.dir),
            (Some(t), _) if t.passed == Some(true) => "passed".into(),
            (Some(t), _) if t.passed == Some(false) && t.timed_out => format!("FAILED (timed out; {})", t.command),
            (Some(t), _) if t.passed == Some(false) => format!("FAILED (`{}`)", t.command),
            _ => "no tests".into(),
        };
        out!("{:<width$}  {rules:<10}  {tests}", s.slice);
    }
    for s in o.slices.iter().filter(|s| s.tests.as_ref().is_some_and(|t| t.passed == Some(false))) {
        if let Some(t) = &s.tests {
            out!();
            out!("--- {} tests failed (full output: {}) ---", s.slice, t.log.as_deref().unwrap_or("-"));
            out!("{}", arbiter_core::text::visible(t.output_tail.trim_end()));
        }
    }
    out!();
    out!(
        "Summary: {} passed, {} failed, {} without tests, {} violation(s){}, {} feature slices",
        o.tests_passed,
        o.tests_failed,
        o.slices_without_tests,
        o.violations,
        if o.strict { " (--strict: they fail qa)" } else { "" },
        o.slices.len()
    );
}
