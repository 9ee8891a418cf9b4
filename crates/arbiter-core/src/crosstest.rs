//! Cross-tests: the tests candidates wrote, run against every surviving candidate and
//! against the base.
//!
//! A candidate that adds or changes a test file (recognized by a rule's glob) contributes
//! that file to a pool. Each pooled test is run, with its rule's command, in the base tree
//! and in the tree of every surviving candidate, the pooled file copied in. A test that
//! fails on the base and passes on at least one candidate *discriminates*: it shows a
//! behaviour the base lacks. A candidate's cross-test score is the number of discriminating
//! tests it passes, its own tests among them (every candidate faces the same set, so counts
//! compare like fractions).
//! A candidate that special-cases the visible test cannot pass a test another candidate
//! wrote for the real behaviour.
//!
//! Everything here is pure: pooling, command templates, the matrix and the scores. Running
//! the commands is the runner's business.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::command_line::shell_word;
use crate::ids::CandidateId;
use crate::protect::glob_match;

/// How tests matching `pattern` are run; `command` is a template (see [`expand`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(deny_unknown_fields)]
pub struct CrossTestRule {
    pub pattern: String,
    pub command: String,
}

/// The Python command when no verify command says how the tests run.
const UNITTEST: &str = "python3 -m unittest {path}";

/// How the verify commands run Python's tests, as a template for one file: the same
/// interpreter and runner (`/venv/bin/python3 -m pytest`, `poetry run pytest`, `pytest`,
/// `python -m unittest`, with any `NAME=value` before them), so that a pooled test runs
/// where its author's verify command found pytest. `None` when no verify command runs
/// pytest or unittest plainly enough to tell (then `python3 -m unittest`).
fn python_template(verify: &[String]) -> Option<String> {
    verify.iter().flat_map(|v| v.split(['&', '|', ';'])).find_map(|part| {
        let part = part.trim();
        if part.contains(['"', '\'', '`', '$', '(', '<', '>']) {
            return None;
        }
        let words: Vec<&str> = part.split_whitespace().collect();
        let name = |w: &str| w.rsplit('/').next().unwrap_or(w).to_string();
        // Only what runs the tests may come before the runner: assignments, a Python
        // interpreter, a wrapper that runs a program (`poetry run`, `uv run`); never
        // `pip install pytest`, whose `pytest` is no runner.
        let leads_up = |before: &[&str]| {
            before.iter().all(|w| {
                let n = name(w);
                w.contains('=') || n.starts_with("python") || WRAPPERS.contains(&n.as_str())
            })
        };
        let (end, pytest) = words.iter().enumerate().find_map(|(i, w)| {
            let n = name(w);
            if (n == "pytest" || n == "py.test") && leads_up(&words[..i]) {
                Some((i, true))
            } else if *w == "-m" && leads_up(&words[..i]) {
                match words.get(i + 1) {
                    Some(&"pytest") => Some((i + 1, true)),
                    Some(&"unittest") => Some((i + 1, false)),
                    _ => None,
                }
            } else {
                None
            }
        })?;
        let prefix = words[..=end].join(" ");
        Some(if pytest { format!("{prefix} -q {{path}}") } else { format!("{prefix} {{path}}") })
    })
}

/// Programs that run the program after them (with `run`): what may come before pytest.
const WRAPPERS: &[&str] = &["poetry", "uv", "pipenv", "hatch", "pdm", "rye", "run", "env", "exec"];

/// The built-in rules, per language, in the order they are tried. Python test files run
/// the way the verify commands run the tests (see [`python_template`]), else with unittest.
pub fn default_rules(verify: &[String]) -> Vec<CrossTestRule> {
    let python = python_template(verify).unwrap_or_else(|| UNITTEST.to_string());
    let rule = |pattern: &str, command: &str| CrossTestRule { pattern: pattern.into(), command: command.into() };
    let mut rules = vec![rule("**/test_*.py", &python), rule("**/*_test.py", &python)];
    rules.push(rule("tests/*.rs", "cargo test --quiet --test {stem}"));
    rules.push(rule("**/*_test.go", "go test ./{dir}"));
    for ext in ["js", "jsx", "ts", "tsx", "mjs", "cjs"] {
        for kind in ["test", "spec"] {
            rules.push(rule(&format!("**/*.{kind}.{ext}"), "npm test --silent -- {path}"));
        }
    }
    rules
}

/// The rule that recognizes `path` as a test, if any.
pub fn rule_for<'a>(rules: &'a [CrossTestRule], path: &str) -> Option<&'a CrossTestRule> {
    rules.iter().find(|r| glob_match(&r.pattern, path))
}

/// A test file as one candidate left it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthoredTest {
    pub path: String,
    pub content: Vec<u8>,
}

/// One test of the pool: a path and content, with every candidate that wrote exactly it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct PooledTest {
    /// `t1`, `t2`, … in pool order.
    pub id: String,
    pub path: String,
    /// The sha256 of the content, for telling apart two versions of one path.
    pub content_sha256: String,
    pub authors: Vec<CandidateId>,
    /// The command, expanded for this path.
    pub command: String,
    // Never written (the pool keeps it to run the test), so never generated.
    #[serde(skip)]
    #[cfg_attr(feature = "arbitrary", proptest(value = "Vec::new()"))]
    pub content: Vec<u8>,
}

/// Pools the tests candidates wrote: one entry per distinct (path, content), ordered by
/// path then by first author. Files no rule recognizes are left out.
pub fn pool(
    authored: &[(CandidateId, Vec<AuthoredTest>)],
    rules: &[CrossTestRule],
    verify: &[String],
) -> Vec<PooledTest> {
    let mut tests: Vec<PooledTest> = Vec::new();
    let mut index: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut sorted: Vec<&(CandidateId, Vec<AuthoredTest>)> = authored.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    for (candidate, written) in sorted {
        for t in written {
            let Some(rule) = rule_for(rules, &t.path) else { continue };
            let digest = Sha256::digest(&t.content);
            let sha: String = digest.iter().map(|b| format!("{b:02x}")).collect();
            let at = *index.entry((t.path.clone(), sha.clone())).or_insert_with(|| {
                tests.push(PooledTest {
                    id: String::new(),
                    path: t.path.clone(),
                    content_sha256: sha,
                    authors: Vec::new(),
                    command: expand(&rule.command, &t.path, verify),
                    content: t.content.clone(),
                });
                tests.len() - 1
            });
            if !tests[at].authors.contains(candidate) {
                tests[at].authors.push(candidate.clone());
            }
        }
    }
    tests.sort_by(|a, b| a.path.cmp(&b.path).then_with(|| a.authors.cmp(&b.authors)));
    for (i, t) in tests.iter_mut().enumerate() {
        t.id = format!("t{}", i + 1);
    }
    tests
}

/// Expands a command template for a test at `path`:
///
/// | placeholder | value for `pkg/tests/test_calc.py` |
/// |---|---|
/// | `{path}` | `pkg/tests/test_calc.py` |
/// | `{dir}` | `pkg/tests` (`.` at the root) |
/// | `{stem}` | `test_calc` |
/// | `{module}` | `pkg.tests.test_calc` |
/// | `{verify}` | the first verify command, as written |
///
/// Path values are quoted for the shell when they need it.
pub fn expand(template: &str, path: &str, verify: &[String]) -> String {
    let (dir, file) = path.rsplit_once('/').unwrap_or((".", path));
    let stem = file.split_once('.').map_or(file, |(s, _)| s);
    let module = path.rsplit_once('.').map_or(path, |(m, _)| m).replace('/', ".");
    template
        .replace("{verify}", verify.first().map_or("", String::as_str))
        .replace("{path}", &shell_word(path))
        .replace("{dir}", &shell_word(dir))
        .replace("{stem}", &shell_word(stem))
        .replace("{module}", &shell_word(&module))
}

/// One pooled test run in one tree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct CrossTestResult {
    pub passed: bool,
    /// `None` when the command was killed (timeout, interrupt) or could not start.
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    pub duration_ms: u64,
    /// The log of this run, relative to the run directory.
    pub log: String,
}

/// A pooled test and its result in every tree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct CrossTestRow {
    #[serde(flatten)]
    pub test: PooledTest,
    /// Fails on the base and passes on at least one candidate.
    pub discriminating: bool,
    /// Keyed by [`BASE`] or a candidate id.
    pub results: BTreeMap<String, CrossTestResult>,
}

/// How one pooled test did on one tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CellOutcome {
    Pass,
    Timeout,
    Fail,
    /// Not run there.
    Missing,
}

impl CrossTestRow {
    /// How the test did on `target` ([`BASE`] or a candidate id).
    pub fn outcome(&self, target: &str) -> CellOutcome {
        match self.results.get(target) {
            Some(r) if r.passed => CellOutcome::Pass,
            Some(r) if r.timed_out => CellOutcome::Timeout,
            Some(_) => CellOutcome::Fail,
            None => CellOutcome::Missing,
        }
    }
}

/// The key of the base tree in a row's results.
pub const BASE: &str = "base";

/// A candidate's standing on the discriminating tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct CrossScore {
    /// Discriminating tests it passes.
    pub passed: usize,
    /// Discriminating tests in the pool.
    pub discriminating: usize,
}

impl CrossScore {
    /// `2/3 discriminating cross-tests`.
    pub fn describe(&self) -> String {
        format!("{}/{} discriminating cross-test(s)", self.passed, self.discriminating)
    }
}

/// `comparisons/cross_tests.json`: the test × tree matrix, or why it was not built.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct CrossTestMatrix {
    pub schema_version: u32,
    pub ran: bool,
    pub skip_reason: Option<String>,
    /// `base` then the candidates tested, in order.
    pub targets: Vec<String>,
    pub tests: Vec<CrossTestRow>,
    pub scores: BTreeMap<CandidateId, CrossScore>,
}

impl CrossTestMatrix {
    /// A matrix that was not built, and why.
    pub fn skipped(reason: impl Into<String>) -> Self {
        CrossTestMatrix {
            schema_version: crate::SCHEMA_VERSION,
            skip_reason: Some(reason.into()),
            ..Default::default()
        }
    }

    /// Builds the matrix from each test's results, marking discriminating tests and scoring
    /// every tested candidate.
    pub fn build(
        candidates: &[CandidateId],
        tests: Vec<PooledTest>,
        mut results: BTreeMap<String, BTreeMap<String, CrossTestResult>>,
    ) -> Self {
        let mut candidates = candidates.to_vec();
        candidates.sort();
        let rows: Vec<CrossTestRow> = tests
            .into_iter()
            .map(|test| {
                let results = results.remove(&test.id).unwrap_or_default();
                let base_fails = results.get(BASE).is_some_and(|r| !r.passed);
                let some_candidate_passes =
                    candidates.iter().any(|c| results.get(c.as_str()).is_some_and(|r| r.passed));
                CrossTestRow { discriminating: base_fails && some_candidate_passes, test, results }
            })
            .collect();
        let discriminating = rows.iter().filter(|r| r.discriminating).count();
        let scores = candidates
            .iter()
            .map(|c| {
                let passed = rows
                    .iter()
                    .filter(|r| r.discriminating && r.results.get(c.as_str()).is_some_and(|x| x.passed))
                    .count();
                (c.clone(), CrossScore { passed, discriminating })
            })
            .collect();
        let mut targets = vec![BASE.to_string()];
        targets.extend(candidates.iter().map(|c| c.to_string()));
        CrossTestMatrix {
            schema_version: crate::SCHEMA_VERSION,
            ran: true,
            skip_reason: None,
            targets,
            tests: rows,
            scores,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Settings take the built-in rules without checking their patterns.
    #[test]
    fn the_built_in_rules_patterns_are_globs() {
        for rule in default_rules(&["pytest -q".to_string()]) {
            assert_eq!(crate::protect::invalid_glob(&rule.pattern), None, "{}", rule.pattern);
        }
    }

    fn id(i: usize) -> CandidateId {
        CandidateId::from_index(i)
    }

    fn test(path: &str, content: &str) -> AuthoredTest {
        AuthoredTest { path: path.into(), content: content.as_bytes().to_vec() }
    }

    fn result(passed: bool) -> CrossTestResult {
        CrossTestResult {
            passed,
            exit_code: Some(if passed { 0 } else { 1 }),
            timed_out: false,
            duration_ms: 1,
            log: String::new(),
        }
    }

    #[test]
    fn rules_recognize_tests_per_language() {
        let rules = default_rules(&[]);
        for (path, expected) in [
            ("test_calc.py", Some(UNITTEST)),
            ("pkg/tests/test_x.py", Some(UNITTEST)),
            ("calc_test.py", Some(UNITTEST)),
            ("tests/cli.rs", Some("cargo test --quiet --test {stem}")),
            ("internal/a_test.go", Some("go test ./{dir}")),
            ("src/a.spec.ts", Some("npm test --silent -- {path}")),
            ("calc.py", None),
            ("src/lib.rs", None),
        ] {
            assert_eq!(rule_for(&rules, path).map(|r| r.command.as_str()), expected, "{path}");
        }
        let pytest = default_rules(&["python3 -m pytest -q".into()]);
        assert_eq!(rule_for(&pytest, "test_a.py").map(|r| r.command.as_str()), Some("python3 -m pytest -q {path}"));
    }

    /// Cross-tests ran `python3 -m pytest` whatever the verify commands named: with
    /// `--verify '/venv/bin/python3 -m pytest …'` every pooled test failed everywhere with
    /// "No module named pytest". They run the way the verify commands do now.
    #[test]
    fn python_tests_run_with_the_verify_command_s_interpreter_and_runner() {
        let template = |v: &str| rule_for(&default_rules(&[v.to_string()]), "tests/test_x.py").unwrap().command.clone();
        for (verify, expected) in [
            ("/venv/bin/python3 -m pytest -x tests/", "/venv/bin/python3 -m pytest -q {path}"),
            (".venv/bin/pytest tests", ".venv/bin/pytest -q {path}"),
            ("poetry run pytest -x", "poetry run pytest -q {path}"),
            ("PYTHONPATH=src pytest", "PYTHONPATH=src pytest -q {path}"),
            ("cd . && uv run python -m pytest", "uv run python -m pytest -q {path}"),
            ("python3.12 -m unittest discover -s tests", "python3.12 -m unittest {path}"),
            ("make test", "python3 -m unittest {path}"),
            ("pip install pytest && pytest tests", "pytest -q {path}"),
            ("uv run --with pytest pytest", "python3 -m unittest {path}"),
            ("\"$PY\" -m pytest", "python3 -m unittest {path}"),
        ] {
            assert_eq!(template(verify), expected, "{verify}");
        }
    }

    #[test]
    fn templates_expand_and_quote() {
        let v = vec!["make check".to_string()];
        assert_eq!(expand("python3 -m unittest {path}", "tests/test_a.py", &v), "python3 -m unittest tests/test_a.py");
        assert_eq!(expand("{verify} {module}", "pkg/test_a.py", &v), "make check pkg.test_a");
        assert_eq!(expand("go test ./{dir}", "a_test.go", &v), "go test ./.");
        assert_eq!(expand("cargo test --test {stem}", "tests/cli.rs", &v), "cargo test --test cli");
        assert_eq!(expand("run {path}", "it's here/test_a.py", &v), "run 'it'\\''s here/test_a.py'");
    }

    #[test]
    fn pooling_merges_identical_tests_and_keeps_versions_apart() {
        let rules = default_rules(&[]);
        let authored = vec![
            (id(2), vec![test("test_neg.py", "A"), test("calc.py", "not a test")]),
            (id(0), vec![test("test_neg.py", "A")]),
            (id(1), vec![test("test_neg.py", "B"), test("test_add.py", "C")]),
        ];
        let pool = pool(&authored, &rules, &[]);
        let summary: Vec<(&str, &str, Vec<CandidateId>)> =
            pool.iter().map(|t| (t.id.as_str(), t.path.as_str(), t.authors.clone())).collect();
        assert_eq!(
            summary,
            vec![
                ("t1", "test_add.py", vec![id(1)]),
                ("t2", "test_neg.py", vec![id(0), id(2)]),
                ("t3", "test_neg.py", vec![id(1)]),
            ]
        );
        assert_eq!(pool[0].command, "python3 -m unittest test_add.py");
    }

    #[test]
    fn only_tests_failing_on_the_base_and_passing_somewhere_discriminate() {
        let rules = default_rules(&[]);
        let authored = vec![(id(0), vec![test("test_a.py", "a"), test("test_b.py", "b"), test("test_c.py", "c")])];
        let tests = pool(&authored, &rules, &[]);
        let row = |base: bool, c1: bool, c2: bool| {
            BTreeMap::from([(BASE.to_string(), result(base)), ("c01".into(), result(c1)), ("c02".into(), result(c2))])
        };
        let results = BTreeMap::from([
            ("t1".to_string(), row(false, true, false)), // discriminating: only c01 has the behaviour
            ("t2".to_string(), row(true, true, true)),   // passes on the base: says nothing
            ("t3".to_string(), row(false, false, false)), // nobody passes: says nothing
        ]);
        let m = CrossTestMatrix::build(&[id(0), id(1)], tests, results);
        assert_eq!(m.tests.iter().map(|r| r.discriminating).collect::<Vec<_>>(), vec![true, false, false]);
        assert_eq!(m.scores[&id(0)], CrossScore { passed: 1, discriminating: 1 });
        assert_eq!(m.scores[&id(1)], CrossScore { passed: 0, discriminating: 1 });
        assert_eq!(m.targets, vec!["base", "c01", "c02"]);
    }
}
