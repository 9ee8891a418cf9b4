//! JUnit XML test reports: which files a verify command writes one to, and which tests a
//! report says failed.
//!
//! Most test runners can write one (pytest `--junitxml`, Maven's surefire, Gradle, Jest with
//! jest-junit, Vitest's `junit` reporter, go-junit-report, ...). A report a gate's run wrote
//! is read in preference to the runner's printed output: it is complete where a log's tail
//! may not be. Like the printed output, it is evidence only — the command's exit code stays
//! authoritative (see [`crate::gate`]).
//!
//! A report is written by the candidate's own code running its tests, so it is as
//! trustworthy as that code's output and no more; [`junit_failed_tests`] reads it as hostile
//! input (no DTDs, so no entity expansion; a size limit is the reader's caller's).

use std::collections::BTreeSet;

/// Bytes of one report read at most; a larger one is not read.
pub const MAX_REPORT_BYTES: u64 = 16 << 20;

/// What one report says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JunitReport {
    /// Test cases in it.
    pub tests: usize,
    /// The ones with a `<failure>` or `<error>`, as `classname.name`.
    pub failed: BTreeSet<String>,
}

/// Reads a JUnit XML report: `<testsuites>` or `<testsuite>` at the root, `<testcase>`s
/// anywhere below. An error says why the text is not one.
pub fn junit_failed_tests(xml: &str) -> Result<JunitReport, String> {
    let options = roxmltree::ParsingOptions { allow_dtd: false, ..Default::default() };
    let doc = roxmltree::Document::parse_with_options(xml, options).map_err(|e| format!("not well-formed XML: {e}"))?;
    let root = doc.root_element();
    if !matches!(root.tag_name().name(), "testsuites" | "testsuite") {
        return Err(format!("its root element is <{}>, not <testsuites> or <testsuite>", root.tag_name().name()));
    }
    let mut report = JunitReport::default();
    for case in root.descendants().filter(|n| n.is_element() && n.tag_name().name() == "testcase") {
        report.tests += 1;
        let failed = case.children().any(|c| c.is_element() && matches!(c.tag_name().name(), "failure" | "error"));
        if failed {
            report.failed.insert(case_name(case.attribute("classname"), case.attribute("name")));
        }
    }
    Ok(report)
}

/// `classname.name`; `name` alone when the class is empty or already leads it.
fn case_name(class: Option<&str>, name: Option<&str>) -> String {
    let name = name.unwrap_or("").trim();
    match class.map(str::trim).filter(|c| !c.is_empty()) {
        Some(class) if !name.starts_with(class) => {
            if name.is_empty() {
                class.to_string()
            } else {
                format!("{class}.{name}")
            }
        }
        _ => name.to_string(),
    }
}

/// The report files a command line names, relative to where it runs: pytest's
/// `--junitxml=PATH` (or `--junit-xml`), Vitest's `--outputFile=PATH` (or
/// `--outputFile.junit=PATH`) beside `--reporter=junit`, and jest-junit's
/// `JEST_JUNIT_OUTPUT_FILE=PATH`. Absolute paths and paths leaving the tree are not reports of
/// this tree (parallel candidates would share them) and are left out.
pub fn reports_named_in(command: &str) -> Vec<String> {
    let words: Vec<&str> = command.split_whitespace().map(unquote).collect();
    let junit_reporter =
        words.contains(&"--reporter=junit") || words.windows(2).any(|p| p[0] == "--reporter" && p[1] == "junit");
    let mut named = Vec::new();
    for (i, word) in words.iter().enumerate() {
        let next = words.get(i + 1).copied();
        let value = match word.split_once('=') {
            Some(("--junitxml" | "--junit-xml" | "--outputFile.junit", path)) => Some(path),
            Some(("--outputFile", path)) if junit_reporter => Some(path),
            Some(("JEST_JUNIT_OUTPUT_FILE", path)) => Some(path),
            None if matches!(*word, "--junitxml" | "--junit-xml") => next,
            None if *word == "--outputFile" && junit_reporter => next,
            _ => None,
        };
        if let Some(path) = value.map(unquote).and_then(inside_tree) {
            named.push(path);
        }
    }
    named.dedup();
    named
}

fn unquote(word: &str) -> &str {
    word.trim_matches(|c| c == '"' || c == '\'')
}

/// `path` as a relative path that stays inside the tree, `./` taken off.
fn inside_tree(path: &str) -> Option<String> {
    let path = path.trim_start_matches("./");
    let escapes = path.starts_with('/') || path.split('/').any(|c| c == "..");
    (!path.is_empty() && !escapes && !path.contains('$')).then(|| path.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PYTEST: &str = r#"<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" failures="1" skipped="1" tests="3" time="0.03"><testcase classname="test_calc.CalcTest" name="test_add" time="0.001"><failure message="AssertionError: -1 != 5">self.assertEqual(add(2, 3), 5)</failure></testcase><testcase classname="test_calc.CalcTest" name="test_mul" time="0.000" /><testcase classname="test_calc.CalcTest" name="test_div" time="0.000"><skipped type="pytest.skip" message="later" /></testcase></testsuite></testsuites>"#;

    #[test]
    fn a_pytest_report_names_its_failures_by_class_and_name() {
        let report = junit_failed_tests(PYTEST).unwrap();
        assert_eq!(report.tests, 3);
        assert_eq!(report.failed.into_iter().collect::<Vec<_>>(), ["test_calc.CalcTest.test_add"]);
    }

    #[test]
    fn surefire_s_single_suite_with_an_error_counts_it_failed() {
        let xml = r#"<testsuite name="com.acme.CalcTest" tests="2"><testcase name="adds" classname="com.acme.CalcTest"><error type="java.lang.NullPointerException"/></testcase><testcase name="multiplies" classname="com.acme.CalcTest"/></testsuite>"#;
        let report = junit_failed_tests(xml).unwrap();
        assert_eq!(report.failed.into_iter().collect::<Vec<_>>(), ["com.acme.CalcTest.adds"]);
    }

    #[test]
    fn nested_suites_and_names_that_already_carry_their_class_read_once() {
        let xml = r#"<testsuites><testsuite name="outer"><testsuite name="inner"><testcase classname="calc.test.js" name="calc.test.js adds"><failure/></testcase></testsuite></testsuite></testsuites>"#;
        let report = junit_failed_tests(xml).unwrap();
        assert_eq!(report.failed.into_iter().collect::<Vec<_>>(), ["calc.test.js adds"]);
    }

    #[test]
    fn what_is_not_a_report_says_why() {
        assert!(junit_failed_tests("FAILED test_add").unwrap_err().contains("not well-formed XML"));
        assert!(junit_failed_tests("<html><body/></html>").unwrap_err().contains("<html>"));
        // An entity bomb is refused before anything expands.
        let bomb = r#"<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;">]><testsuite><testcase name="&lol2;"/></testsuite>"#;
        assert!(junit_failed_tests(bomb).is_err());
    }

    #[test]
    fn command_lines_name_their_reports_inside_the_tree_only() {
        assert_eq!(reports_named_in("python3 -m pytest -q --junitxml=reports/junit.xml"), ["reports/junit.xml"]);
        assert_eq!(reports_named_in("pytest --junit-xml ./out.xml tests/"), ["out.xml"]);
        assert_eq!(reports_named_in("npx vitest run --reporter=junit --outputFile=junit.xml"), ["junit.xml"]);
        assert_eq!(reports_named_in("JEST_JUNIT_OUTPUT_FILE=r.xml npx jest --reporters=jest-junit"), ["r.xml"]);
        // Vitest's --outputFile without the junit reporter is some other format.
        assert!(reports_named_in("npx vitest run --reporter=json --outputFile=out.json").is_empty());
        for outside in ["pytest --junitxml=/tmp/r.xml", "pytest --junitxml=../r.xml", "pytest --junitxml=$OUT/r.xml"] {
            assert!(reports_named_in(outside).is_empty(), "{outside}");
        }
    }
}
