//! Reading a run's output: whether the canary failed, passed or did not show, and how many
//! other tests (or files, binaries, packages) failed. One pass over the lines, in the
//! default formats of each framework and their quiet and verbose variants; colour codes are
//! ignored.

use super::{CanaryPlan, CanarySeen, Framework, Reading};

/// Reads the full output (stdout and stderr together) of a run of `plan.command`.
pub fn read(framework: Framework, plan: &CanaryPlan, output: &str, exit_code: Option<i32>) -> Reading {
    let mut r = match framework {
        Framework::Unittest => unittest(plan, output),
        Framework::Pytest => pytest(plan, output),
        Framework::Jest => jest(plan, output),
        Framework::Vitest => vitest(plan, output),
        Framework::CargoTest => cargo(plan, output),
        Framework::GoTest => go(plan, output),
    };
    r.exit_code = exit_code;
    r
}

/// Lines with ANSI escape sequences (colours, cursor moves) removed (also what
/// [`crate::test_output`] reads test names from).
pub(crate) fn clean_lines(output: &str) -> impl Iterator<Item = std::borrow::Cow<'_, str>> {
    output.lines().map(|l| {
        if !l.contains('\u{1b}') {
            return std::borrow::Cow::Borrowed(l);
        }
        let mut out = String::with_capacity(l.len());
        let mut chars = l.chars().peekable();
        while let Some(c) = chars.next() {
            if c != '\u{1b}' {
                out.push(c);
                continue;
            }
            if chars.peek() == Some(&'[') {
                chars.next();
                for d in chars.by_ref() {
                    if ('@'..='~').contains(&d) {
                        break;
                    }
                }
            } else {
                chars.next();
            }
        }
        std::borrow::Cow::Owned(out)
    })
}

fn seen(failed: bool, passed: bool) -> CanarySeen {
    if failed {
        CanarySeen::Failed
    } else if passed {
        CanarySeen::Passed
    } else {
        CanarySeen::NotSeen
    }
}

fn reading(canary: CanarySeen, other_failures: Option<u32>, notes: Vec<String>) -> Reading {
    Reading { canary, other_failures, exit_code: None, notes }
}

/// `N word` pairs of a summary such as `1 failed, 2 passed in 0.04s` or `1 failed | 2 passed (3)`.
fn count_of(text: &str, word: &str) -> Option<u32> {
    let mut prev: Option<&str> = None;
    for token in text.split(|c: char| c.is_whitespace() || c == ',' || c == '|' || c == '(' || c == ')') {
        if token.is_empty() {
            continue;
        }
        if let Some(n) = prev.filter(|_| token == word).and_then(|p| p.parse().ok()) {
            return Some(n);
        }
        prev = Some(token);
    }
    None
}

fn unittest(plan: &CanaryPlan, output: &str) -> Reading {
    let method = plan.test.as_str();
    let class = plan.class.as_deref().unwrap_or("");
    let is_canary = |rest: &str| rest.starts_with(&format!("{method} (")) && rest.contains(&format!(".{class}"));
    let (mut canary_failed, mut canary_passed) = (false, false);
    let mut other_headers = 0u32;
    let mut summary: Option<u32> = None;
    for line in clean_lines(output) {
        let line = line.as_ref();
        if let Some(rest) = line.strip_prefix("FAIL: ").or_else(|| line.strip_prefix("ERROR: ")) {
            if is_canary(rest) {
                canary_failed = true;
            } else {
                other_headers += 1;
            }
        } else if is_canary(line) && line.ends_with(" ... ok") {
            canary_passed = true;
        } else if let Some(counts) = line.strip_prefix("FAILED (") {
            let n = |w: &str| {
                counts.split([',', ')']).find_map(|p| p.trim().strip_prefix(w).and_then(|v| v.parse::<u32>().ok()))
            };
            summary =
                Some(n("failures=").unwrap_or(0) + n("errors=").unwrap_or(0) + n("unexpected successes=").unwrap_or(0));
        } else if line == "OK" || line.starts_with("OK (") || line == "NO TESTS RAN" {
            summary = Some(0);
        }
    }
    let other = summary.map(|total| total.saturating_sub(canary_failed as u32).max(other_headers));
    reading(seen(canary_failed, canary_passed), other, Vec::new())
}

fn pytest(plan: &CanaryPlan, output: &str) -> Reading {
    let func = plan.test.as_str();
    let file = plan.files.first().map(|f| f.path.rsplit('/').next().unwrap_or(&f.path)).unwrap_or("");
    let node = format!("{file}::{func}");
    let (mut canary_failed, mut canary_passed) = (false, false);
    let mut other_short = 0u32;
    let mut summary: Option<u32> = None;
    for line in clean_lines(output) {
        let line = line.trim_end();
        let names_canary = line.contains(&node);
        if let Some(rest) = line.strip_prefix("FAILED ").or_else(|| line.strip_prefix("ERROR ")) {
            if rest.contains(&node) {
                canary_failed = true;
            } else {
                other_short += 1;
            }
            continue;
        }
        if names_canary && (line.contains(" FAILED") || line.contains(" ERROR")) {
            canary_failed = true;
        } else if names_canary && line.contains(" PASSED") {
            canary_passed = true;
        } else if line.starts_with('_') && line.trim_matches('_').trim() == func {
            canary_failed = true;
        }
        // The closing line: `==== 1 failed, 2 passed in 0.04s ====` or, quiet, without the rules.
        let bare = line.trim_matches('=').trim();
        let closing = bare.contains(" in ")
            && bare.ends_with('s')
            && bare.split(" in ").next().is_some_and(|counts| {
                counts.split(", ").all(|p| p.split_once(' ').is_some_and(|(n, _)| n.parse::<u32>().is_ok()))
                    || counts == "no tests ran"
            });
        if closing {
            let failed = count_of(bare, "failed").unwrap_or(0);
            let errors = count_of(bare, "error").or_else(|| count_of(bare, "errors")).unwrap_or(0);
            summary = Some(failed + errors);
        }
    }
    let other = summary.map(|total| total.saturating_sub(canary_failed as u32).max(other_short));
    reading(seen(canary_failed, canary_passed), other, Vec::new())
}

fn jest(plan: &CanaryPlan, output: &str) -> Reading {
    let title = plan.test.as_str();
    let file = plan.files.first().map(|f| f.path.as_str()).unwrap_or("");
    let (mut canary_failed, mut canary_passed) = (false, false);
    let (mut tests_failed, mut suites_failed): (Option<u32>, Option<u32>) = (None, None);
    let mut canary_suite_failed = false;
    for line in clean_lines(output) {
        let t = line.trim();
        let header = t.strip_prefix("● ").is_some_and(|rest| rest == title || rest.ends_with(&format!(" › {title}")));
        let verbose_failure =
            t.strip_prefix("✕ ").is_some_and(|rest| rest.starts_with(title) && is_timing_suffix(&rest[title.len()..]));
        if header || verbose_failure {
            canary_failed = true;
        } else if t
            .strip_prefix("✓ ")
            .is_some_and(|rest| rest.starts_with(title) && is_timing_suffix(&rest[title.len()..]))
        {
            canary_passed = true;
        } else if let Some(path) = t.strip_prefix("FAIL ") {
            canary_suite_failed |= path.trim().trim_start_matches("./").ends_with(file);
        } else if let Some(rest) = t.strip_prefix("Tests:") {
            tests_failed = Some(count_of(rest, "failed").unwrap_or(0));
        } else if let Some(rest) = t.strip_prefix("Test Suites:") {
            suites_failed = Some(count_of(rest, "failed").unwrap_or(0));
        }
    }
    let c = canary_failed as u32;
    let other = match (tests_failed, suites_failed) {
        (Some(t), Some(s)) => {
            Some(t.saturating_sub(c).max(s.saturating_sub((canary_failed || canary_suite_failed) as u32)))
        }
        (Some(t), None) => Some(t.saturating_sub(c)),
        _ => None,
    };
    reading(seen(canary_failed, canary_passed), other, Vec::new())
}

/// What may follow a test's title on its line: nothing, or a timing such as ` (10 ms)`
/// (Jest) or ` 12ms` (Vitest) — not more of another title (`walrus harbors`).
fn is_timing_suffix(rest: &str) -> bool {
    if rest.is_empty() {
        return true;
    }
    let Some(t) = rest.strip_prefix(' ').map(str::trim) else { return false };
    let number = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    (t.starts_with('(') && t.ends_with(')'))
        || t.strip_suffix("ms").or_else(|| t.strip_suffix('s')).is_some_and(|n| number(n.trim()))
}

fn vitest(plan: &CanaryPlan, output: &str) -> Reading {
    let title = plan.test.as_str();
    let file = plan.files.first().map(|f| f.path.as_str()).unwrap_or("");
    let (mut canary_failed, mut canary_passed) = (false, false);
    let (mut tests_failed, mut files_failed, mut errors): (Option<u32>, Option<u32>, u32) = (None, None, 0);
    for line in clean_lines(output) {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("FAIL ") {
            let rest = rest.trim();
            if rest.starts_with(file) && rest.ends_with(&format!("> {title}")) {
                canary_failed = true;
            }
        } else if t
            .strip_prefix("× ")
            .is_some_and(|rest| rest.starts_with(title) && is_timing_suffix(&rest[title.len()..]))
        {
            canary_failed = true;
        } else if t
            .strip_prefix("✓ ")
            .is_some_and(|rest| rest.starts_with(title) && is_timing_suffix(&rest[title.len()..]))
        {
            canary_passed = true;
        } else if let Some(rest) = t.strip_prefix("Test Files ") {
            files_failed = Some(count_of(rest, "failed").unwrap_or(0));
        } else if let Some(rest) = t.strip_prefix("Tests ") {
            tests_failed = Some(count_of(rest, "failed").unwrap_or(0));
        } else if let Some(rest) = t.strip_prefix("Errors ") {
            errors += count_of(rest, "error").or_else(|| count_of(rest, "errors")).unwrap_or(0);
        }
    }
    let c = canary_failed as u32;
    let other = match (tests_failed, files_failed) {
        (Some(t), Some(f)) => Some(t.saturating_sub(c).max(f.saturating_sub(c)) + errors),
        (Some(t), None) => Some(t.saturating_sub(c) + errors),
        _ => None,
    };
    reading(seen(canary_failed, canary_passed), other, Vec::new())
}

fn cargo(plan: &CanaryPlan, output: &str) -> Reading {
    let name = plan.test.as_str();
    // The canary's integration test target is its file's stem.
    let target = plan.files.first().map(|f| f.path.rsplit('/').next().unwrap_or(&f.path)).unwrap_or("");
    let target = target.strip_suffix(".rs").unwrap_or(target);
    let (mut canary_failed, mut canary_passed) = (false, false);
    let mut failed_tests = 0u32;
    let mut failed_targets = 0u32;
    let mut canary_target_failed = false;
    let mut compile_errors = 0u32;
    let mut results = 0u32;
    // A test binary that announced tests and ended without its result line (it exited in
    // the middle, e.g. from a panic hook calling exit(0)).
    let mut open: Option<u32> = None;
    let mut incomplete = 0u32;
    let mut notes = Vec::new();
    let mut current = String::new();
    for line in clean_lines(output) {
        let t = line.trim_end();
        if let Some(rest) = t.trim_start().strip_prefix("Running ") {
            if let Some(n) = open.take().filter(|n| *n > 0) {
                incomplete += 1;
                notes.push(format!("{current} announced {n} test(s) and ended without a result line"));
            }
            current = rest.split(" (").next().unwrap_or(rest).to_string();
        } else if let Some(rest) = t.strip_prefix("running ") {
            if let Some(n) = open.take().filter(|n| *n > 0) {
                incomplete += 1;
                notes.push(format!("{current} announced {n} test(s) and ended without a result line"));
            }
            open = rest.split(' ').next().and_then(|n| n.parse().ok());
        } else if let Some(rest) = t.strip_prefix("test result: ") {
            open = None;
            results += 1;
            failed_tests += count_of(rest, "failed;").unwrap_or(0);
        } else if t == format!("test {name} ... FAILED") || t == format!("{name} --- FAILED") {
            canary_failed = true;
        } else if t == format!("test {name} ... ok") || t == format!("{name} --- ok") {
            canary_passed = true;
        } else if let Some(rest) = t.strip_prefix("error: test failed, to rerun pass `") {
            failed_targets += 1;
            canary_target_failed |= rest.trim_end_matches('`') == format!("--test {target}");
        } else if t.starts_with("error: doctest failed") {
            failed_targets += 1;
        } else if t.starts_with("error: could not compile") {
            compile_errors += 1;
        }
    }
    if let Some(n) = open.filter(|n| *n > 0) {
        incomplete += 1;
        notes.push(format!("{current} announced {n} test(s) and ended without a result line"));
    }
    let c = canary_failed as u32;
    let other = (results > 0 || compile_errors > 0).then(|| {
        failed_tests.saturating_sub(c).max(failed_targets.saturating_sub(canary_target_failed as u32))
            + compile_errors
            + incomplete
    });
    reading(seen(canary_failed, canary_passed), other, notes)
}

fn go(plan: &CanaryPlan, output: &str) -> Reading {
    let func = plan.test.as_str();
    let (mut canary_failed, mut canary_passed) = (false, false);
    let mut other_tests = 0u32;
    let mut failed_since_package = 0u32;
    let mut packages_without_tests = 0u32;
    let mut any = false;
    let is_name = |rest: &str| rest.strip_prefix(func).is_some_and(|r| r.starts_with(" (") || r.is_empty());
    for line in clean_lines(output) {
        let t = line.trim_end();
        if let Some(rest) = t.strip_prefix("--- FAIL: ") {
            any = true;
            failed_since_package += 1;
            if is_name(rest) {
                canary_failed = true;
            } else {
                other_tests += 1;
            }
        } else if t.strip_prefix("--- PASS: ").is_some_and(is_name) {
            canary_passed = true;
        } else if t.starts_with("FAIL\t") || t.starts_with("FAIL ") && t.len() > 5 {
            any = true;
            if failed_since_package == 0 {
                packages_without_tests += 1;
            }
            failed_since_package = 0;
        } else if t.starts_with("ok  \t") || t.starts_with("ok \t") || t.starts_with("?   \t") {
            any = true;
            failed_since_package = 0;
        }
    }
    let other = any.then_some(other_tests + packages_without_tests);
    reading(seen(canary_failed, canary_passed), other, Vec::new())
}
