//! Which tests a recognised test runner reported failing, read from its default output, and
//! what that means next to the base's run: the per-test evidence of a gate.
//!
//! The verify command's exit code stays authoritative (see [`crate::gate`]); the names only
//! sharpen the reasons ("fixed test_add, broke test_mul" instead of "the command still
//! fails"), the cross-tests and the viewer. [`failed_tests`] answers `None` when the output
//! does not show the runner's closing summary (a crash, a truncated log, an unknown format):
//! then nothing is said test by test.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::canary::Framework;

/// The tests a run reported failing (or erroring), by the names the runner printed; `None`
/// when its output does not tell.
pub fn failed_tests(framework: Framework, output: &str) -> Option<BTreeSet<String>> {
    let lines: Vec<_> = crate::canary::clean_lines(output).collect();
    if matches!(framework, Framework::Jest | Framework::Vitest)
        && let Some(failed) = lines.iter().find_map(|l| js_json_failures(l))
    {
        return Some(failed);
    }
    let mut failed = BTreeSet::new();
    let mut summary = false;
    for line in &lines {
        let t = line.trim_end();
        match framework {
            Framework::Unittest => {
                if let Some(rest) = t.strip_prefix("FAIL: ").or_else(|| t.strip_prefix("ERROR: ")) {
                    failed.insert(unittest_name(rest));
                } else if t == "OK" || t.starts_with("OK (") || t.starts_with("FAILED (") || t == "NO TESTS RAN" {
                    summary = true;
                }
            }
            Framework::Pytest => {
                if let Some(rest) = t.strip_prefix("FAILED ").or_else(|| t.strip_prefix("ERROR ")) {
                    failed.insert(rest.split(" - ").next().unwrap_or(rest).trim().to_string());
                } else if pytest_closing(t) {
                    summary = true;
                }
            }
            Framework::CargoTest => {
                if let Some(name) = t.strip_prefix("test ").and_then(|r| r.strip_suffix(" ... FAILED")) {
                    failed.insert(name.to_string());
                } else if t.starts_with("test result: ") {
                    summary = true;
                } else if t.starts_with('{') {
                    // libtest's `--format json`: `{"type":"test","event":"failed","name":…}`,
                    // and a `suite` event closing each test binary.
                    JsonEvent::apply(libtest_json_event(t), &mut failed, &mut summary);
                }
            }
            Framework::GoTest => {
                let s = t.trim_start();
                if s.starts_with('{') {
                    // `go test -json`: one event per line.
                    JsonEvent::apply(go_json_event(s), &mut failed, &mut summary);
                } else if let Some(rest) = s.strip_prefix("--- FAIL: ") {
                    failed.insert(rest.split(" (").next().unwrap_or(rest).trim().to_string());
                } else if s.starts_with("ok  \t") || s.starts_with("ok \t") || s.starts_with("FAIL\t") || s == "FAIL" {
                    summary = true;
                }
            }
            Framework::Jest => {
                let s = t.trim();
                if let Some(rest) = s.strip_prefix("● ")
                    && !rest.starts_with("Test suite failed to run")
                    && !rest.starts_with("Console")
                {
                    failed.insert(rest.trim().to_string());
                } else if s.starts_with("Tests:") {
                    summary = true;
                }
            }
            Framework::Vitest => {
                let s = t.trim();
                if let Some(rest) = s.strip_prefix("FAIL ")
                    && rest.contains(" > ")
                {
                    failed.insert(rest.trim().to_string());
                } else if s.starts_with("Tests ") && (s.contains("passed") || s.contains("failed")) {
                    summary = true;
                }
            }
        }
    }
    summary.then_some(failed)
}

/// What one line of a runner's JSON event stream (`go test -json`, libtest's `--format json`)
/// says about the result.
enum JsonEvent {
    TestFailed(String),
    /// A package's or a test binary's result: the run got to the end of it.
    Closed,
}

impl JsonEvent {
    fn apply(event: Option<JsonEvent>, failed: &mut BTreeSet<String>, summary: &mut bool) {
        match event {
            Some(JsonEvent::TestFailed(name)) => {
                failed.insert(name);
            }
            Some(JsonEvent::Closed) => *summary = true,
            None => {}
        }
    }
}

fn go_json_event(line: &str) -> Option<JsonEvent> {
    let event: serde_json::Value = serde_json::from_str(line).ok()?;
    let action = event.get("Action")?.as_str()?;
    match (action, event.get("Test").and_then(|t| t.as_str())) {
        ("fail", Some(test)) => Some(JsonEvent::TestFailed(test.to_string())),
        // A package's result (`pass`, `fail` or `skip` without a test).
        ("pass" | "fail" | "skip", None) => Some(JsonEvent::Closed),
        _ => None,
    }
}

fn libtest_json_event(line: &str) -> Option<JsonEvent> {
    let event: serde_json::Value = serde_json::from_str(line).ok()?;
    let field = |k: &str| event.get(k).and_then(|v| v.as_str());
    match (field("type")?, field("event")?) {
        ("test", "failed" | "timeout") => Some(JsonEvent::TestFailed(field("name")?.to_string())),
        ("suite", "ok" | "failed") => Some(JsonEvent::Closed),
        _ => None,
    }
}

/// The failing tests of Jest's `--json` or Vitest's `--reporter=json` result (one line of
/// JSON with `testResults`), named as Jest's default reporter names them (`calc › adds`).
fn js_json_failures(line: &str) -> Option<BTreeSet<String>> {
    let line = line.trim();
    if !line.starts_with('{') || !line.contains("\"testResults\"") {
        return None;
    }
    let result: serde_json::Value = serde_json::from_str(line).ok()?;
    let mut failed = BTreeSet::new();
    for file in result.get("testResults")?.as_array()? {
        for case in file.get("assertionResults").and_then(|a| a.as_array()).into_iter().flatten() {
            if case.get("status").and_then(|s| s.as_str()) != Some("failed") {
                continue;
            }
            let mut parts: Vec<&str> = case
                .get("ancestorTitles")
                .and_then(|a| a.as_array())
                .into_iter()
                .flatten()
                .filter_map(|t| t.as_str())
                .collect();
            parts.extend(case.get("title").and_then(|t| t.as_str()));
            failed.insert(parts.join(" › "));
        }
    }
    Some(failed)
}

/// `test_mul (test_calc.CalcTest.test_mul)` (Python 3.11+) or `test_mul (test_calc.CalcTest)`
/// → `test_calc.CalcTest.test_mul`; the first word alone for anything else.
fn unittest_name(header: &str) -> String {
    let header = header.trim();
    let method = header.split_whitespace().next().unwrap_or(header);
    match header.find(" (").zip(header.rfind(')')) {
        Some((open, close)) if close > open + 2 => {
            let inside = &header[open + 2..close];
            if inside.ends_with(&format!(".{method}")) { inside.to_string() } else { format!("{inside}.{method}") }
        }
        _ => method.to_string(),
    }
}

/// pytest's closing line: `==== 1 failed, 2 passed in 0.04s ====` (or, quiet, without the
/// rules).
fn pytest_closing(line: &str) -> bool {
    let bare = line.trim_matches('=').trim();
    bare.contains(" in ")
        && bare.ends_with('s')
        && bare.split(" in ").next().is_some_and(|counts| {
            counts == "no tests ran"
                || counts.split(", ").all(|p| p.split_once(' ').is_some_and(|(n, _)| n.parse::<u32>().is_ok()))
        })
}

/// One gate's tests next to the base's: what the candidate fixed, broke and left failing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct TestDelta {
    /// Failing on the base, not failing now.
    pub fixed: Vec<String>,
    /// Not failing on the base (passing, or new to the run), failing now.
    pub broke: Vec<String>,
    /// Failing on the base and now.
    pub still_failing: Vec<String>,
}

impl TestDelta {
    pub fn between(base: &BTreeSet<String>, candidate: &BTreeSet<String>) -> Self {
        TestDelta {
            fixed: base.difference(candidate).cloned().collect(),
            broke: candidate.difference(base).cloned().collect(),
            still_failing: base.intersection(candidate).cloned().collect(),
        }
    }

    pub fn base_failing(&self) -> usize {
        self.fixed.len() + self.still_failing.len()
    }

    /// Adds another gate's delta.
    pub fn extend(&mut self, other: &TestDelta) {
        self.fixed.extend(other.fixed.iter().cloned());
        self.broke.extend(other.broke.iter().cloned());
        self.still_failing.extend(other.still_failing.iter().cloned());
    }

    pub fn is_empty(&self) -> bool {
        self.fixed.is_empty() && self.broke.is_empty() && self.still_failing.is_empty()
    }

    /// `fixed 1 of 1 failing test (test_add), broke 1 passing test (test_mul)`.
    pub fn describe(&self) -> String {
        let names = |v: &[String]| {
            let shown: Vec<&str> = v.iter().take(5).map(String::as_str).collect();
            let more = if v.len() > 5 { format!(" and {} more", v.len() - 5) } else { String::new() };
            format!("{}{more}", shown.join(", "))
        };
        let plural = |n: usize| if n == 1 { "test" } else { "tests" };
        let mut parts = Vec::new();
        if self.base_failing() > 0 {
            let fixed = if self.fixed.is_empty() { String::new() } else { format!(" ({})", names(&self.fixed)) };
            parts.push(format!(
                "fixed {} of {} failing {}{fixed}",
                self.fixed.len(),
                self.base_failing(),
                plural(self.base_failing())
            ));
        }
        if !self.broke.is_empty() {
            parts.push(format!(
                "broke {} passing {} ({})",
                self.broke.len(),
                plural(self.broke.len()),
                names(&self.broke)
            ));
        }
        if !self.still_failing.is_empty() {
            parts.push(format!("left {} failing ({})", self.still_failing.len(), names(&self.still_failing)));
        }
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn unittest_names_the_failing_methods_in_both_header_styles() {
        let out = "F.E\n======================================================================\nFAIL: test_add (test_calc.CalcTest.test_add)\n----------------------------------------------------------------------\nTraceback...\n======================================================================\nERROR: test_div (test_calc.CalcTest)\n----------------------------------------------------------------------\nRan 3 tests in 0.001s\n\nFAILED (failures=1, errors=1)\n";
        assert_eq!(
            failed_tests(Framework::Unittest, out),
            Some(set(&["test_calc.CalcTest.test_add", "test_calc.CalcTest.test_div"]))
        );
        assert_eq!(failed_tests(Framework::Unittest, "..\nRan 2 tests in 0.0s\n\nOK\n"), Some(set(&[])));
        assert_eq!(failed_tests(Framework::Unittest, "Traceback (most recent call last):\nImportError\n"), None);
    }

    #[test]
    fn pytest_cargo_go_jest_and_vitest_name_their_failures() {
        let pytest = "F.\n=========================== short test summary info ============================\nFAILED test_calc.py::test_mul - assert 5 == 6\nERROR tests/test_io.py::test_read\n1 failed, 1 passed, 1 error in 0.03s\n";
        assert_eq!(
            failed_tests(Framework::Pytest, pytest),
            Some(set(&["test_calc.py::test_mul", "tests/test_io.py::test_read"]))
        );
        let cargo = "running 2 tests\ntest tests::adds ... ok\ntest tests::muls ... FAILED\n\nfailures:\n\ntest result: FAILED. 1 passed; 1 failed; 0 ignored\n";
        assert_eq!(failed_tests(Framework::CargoTest, cargo), Some(set(&["tests::muls"])));
        let go = "=== RUN   TestAdd\n--- FAIL: TestAdd (0.00s)\n    calc_test.go:9: got 1\n    --- FAIL: TestAdd/neg (0.00s)\nFAIL\nFAIL\texample.com/calc\t0.002s\n";
        assert_eq!(failed_tests(Framework::GoTest, go), Some(set(&["TestAdd", "TestAdd/neg"])));
        let jest = " FAIL  ./calc.test.js\n  calc\n    ✕ adds (3 ms)\n\n  ● calc › adds\n\n    expect(received).toBe(expected)\n\nTests:       1 failed, 1 passed, 2 total\n";
        assert_eq!(failed_tests(Framework::Jest, jest), Some(set(&["calc › adds"])));
        let vitest = " FAIL  calc.test.js > calc > adds\nAssertionError: expected 1 to be 5\n Test Files  1 failed (1)\n      Tests  1 failed | 1 passed (2)\n";
        assert_eq!(failed_tests(Framework::Vitest, vitest), Some(set(&["calc.test.js > calc > adds"])));
    }

    #[test]
    fn go_cargo_and_js_runners_json_output_names_their_failures() {
        let go = concat!(
            r#"{"Action":"run","Package":"example.com/calc","Test":"TestAdd"}"#,
            "\n",
            r#"{"Action":"output","Package":"example.com/calc","Test":"TestAdd","Output":"--- FAIL: TestAdd (0.00s)\n"}"#,
            "\n",
            r#"{"Action":"fail","Package":"example.com/calc","Test":"TestAdd/pos","Elapsed":0}"#,
            "\n",
            r#"{"Action":"fail","Package":"example.com/calc","Test":"TestAdd","Elapsed":0}"#,
            "\n",
            r#"{"Action":"pass","Package":"example.com/calc","Test":"TestMul","Elapsed":0}"#,
            "\n"
        );
        assert_eq!(failed_tests(Framework::GoTest, go), None, "no package result yet: cut short");
        let done = format!("{go}{}\n", r#"{"Action":"fail","Package":"example.com/calc","Elapsed":0.003}"#);
        assert_eq!(failed_tests(Framework::GoTest, &done), Some(set(&["TestAdd", "TestAdd/pos"])));
        let cargo = concat!(
            r#"{ "type": "suite", "event": "started", "test_count": 2 }"#,
            "\n",
            r#"{ "type": "test", "event": "ok", "name": "tests::adds" }"#,
            "\n",
            r#"{ "type": "test", "name": "tests::muls", "event": "failed", "stdout": "panicked" }"#,
            "\n",
            r#"{ "type": "suite", "event": "failed", "passed": 1, "failed": 1 }"#,
            "\n"
        );
        assert_eq!(failed_tests(Framework::CargoTest, cargo), Some(set(&["tests::muls"])));
        // Jest --json and Vitest --reporter=json write the same shape, on one line.
        let js = r#"{"numFailedTests":1,"success":false,"testResults":[{"assertionResults":[{"ancestorTitles":["calc"],"fullName":"calc adds","status":"failed","title":"adds"},{"ancestorTitles":["calc"],"status":"passed","title":"multiplies"}],"name":"/tmp/w/calc.test.js"}]}"#;
        for framework in [Framework::Jest, Framework::Vitest] {
            assert_eq!(failed_tests(framework, &format!("some noise\n{js}\n")), Some(set(&["calc › adds"])));
        }
    }

    #[test]
    fn the_delta_says_what_was_fixed_broken_and_left() {
        let base = set(&["a.test_add", "a.test_old"]);
        let now = set(&["a.test_mul", "a.test_old"]);
        let d = TestDelta::between(&base, &now);
        assert_eq!(d.fixed, vec!["a.test_add"]);
        assert_eq!(d.broke, vec!["a.test_mul"]);
        assert_eq!(d.still_failing, vec!["a.test_old"]);
        assert_eq!(
            d.describe(),
            "fixed 1 of 2 failing tests (a.test_add), broke 1 passing test (a.test_mul), left 1 failing (a.test_old)"
        );
        assert_eq!(TestDelta::between(&set(&["x"]), &set(&[])).describe(), "fixed 1 of 1 failing test (x)");
    }
}
