//! Evidence integrity: the paths a candidate must not change to pass its gates (the user's
//! `protected_paths`), and glob matching for them.
//!
//! Protected paths are of two kinds ([`Protection`]). *Tests* check the code: a candidate
//! that modifies or deletes one that exists at the base weakens them, but a test file it
//! adds is its own test and stays out of its gates. *CI configuration* ([`CONFIGURATION`])
//! says what the project's CI runs: changing, deleting or adding it counts. What decides how
//! the gates' own test runs go (`conftest.py`, `pytest.ini`, `[tool.pytest]`, Jest's and
//! Cargo's configuration, start-up hooks, ...) is not listed here: it is derived per
//! framework from the frameworks' own discovery (`crate::test_machinery`).
//!
//! A candidate that weakened the checks has its gates run on the base's versions (changed
//! files restored, added configuration removed), is flagged, and is eligible only when the
//! task explicitly allows test changes.

use serde::{Deserialize, Serialize};

/// Protected by default: tests in the common layouts of Python, Rust, Go and JS/TS, and CI
/// configuration.
pub const DEFAULT_PROTECTED: &[&str] = &[
    "tests/**",
    "test/**",
    "**/tests/**",
    "**/test/**",
    "**/__tests__/**",
    "**/test_*.py",
    "**/*_test.py",
    "**/*_test.go",
    "**/*.test.ts",
    "**/*.spec.ts",
    "**/*.test.tsx",
    "**/*.spec.tsx",
    "**/*.test.js",
    "**/*.spec.js",
    ".github/**",
    ".gitlab-ci.yml",
    ".circleci/**",
    ".ci/**",
];

/// Build and cache output by default: what running the tests or a build leaves in a tree
/// (Python, JS/TS, Rust, JVM, coverage). A file a candidate added under one of these never
/// enters its patch; a file the base tracks there is the project's own and still counts.
pub const DEFAULT_BUILD_OUTPUTS: &[&str] = &[
    "**/__pycache__/**",
    "**/*.pyc",
    "**/*.pyo",
    "**/.pytest_cache/**",
    "**/.mypy_cache/**",
    "**/.ruff_cache/**",
    "**/.hypothesis/**",
    "**/.tox/**",
    "**/.nox/**",
    "**/*.egg-info/**",
    "**/.coverage",
    "**/htmlcov/**",
    "**/node_modules/**",
    "**/.next/**",
    "**/.turbo/**",
    "**/.parcel-cache/**",
    "target/**",
    "**/.gradle/**",
    "**/.DS_Store",
];

/// Which protected paths are CI configuration rather than tests: wherever a protected path
/// matches one of these, adding it counts as weakening the checks.
pub const CONFIGURATION: &[&str] = &[".github/**", ".gitlab-ci.yml", ".circleci/**", ".ci/**"];

/// What kind of protected path a path is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Protection {
    /// A test: modifying or deleting it weakens the checks; adding one does not.
    Test,
    /// CI configuration: modifying, deleting or adding it weakens the checks.
    Configuration,
}

/// How a patch touched a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Touch {
    Added,
    Modified,
    Deleted,
}

/// Matches `path` (with `/` separators) against a glob: `*` and `?` stay within one path
/// component, `**` spans any number of components (including none), `[abc]` and `{a,b}`
/// as in `.gitignore`-style globs. The matcher (`globset`) runs in time linear in the path,
/// whatever the pattern; a pattern that is not a valid glob matches nothing (settings and
/// plans refuse one at load, see [`invalid_glob`]).
pub fn glob_match(pattern: &str, path: &str) -> bool {
    thread_local! {
        static COMPILED: std::cell::RefCell<std::collections::HashMap<String, Option<globset::GlobMatcher>>> =
            Default::default();
    }
    COMPILED.with(|cache| {
        let mut cache = cache.borrow_mut();
        // Patterns come from settings and plans: a handful. The bound only keeps a hostile
        // stream of distinct patterns from growing the cache without limit.
        if cache.len() > 512 {
            cache.clear();
        }
        cache
            .entry(pattern.to_string())
            .or_insert_with(|| compile(pattern).ok())
            .as_ref()
            .is_some_and(|m| m.is_match(path))
    })
}

fn parse(pattern: &str) -> Result<globset::Glob, globset::Error> {
    globset::GlobBuilder::new(pattern).literal_separator(true).backslash_escape(true).build()
}

fn compile(pattern: &str) -> Result<globset::GlobMatcher, globset::Error> {
    Ok(parse(pattern)?.compile_matcher())
}

/// Why `pattern` is not a glob [`glob_match`] accepts, or `None` when it is one. Only parsed,
/// not compiled: settings are checked every time they are built (a control plane builds a
/// task's at each claim), and compiling a matcher costs a hundred times more.
pub fn invalid_glob(pattern: &str) -> Option<String> {
    parse(pattern).err().map(|e| e.kind().to_string())
}

/// Whether `path` is protected by any of `patterns`.
pub fn is_protected(patterns: &[String], path: &str) -> bool {
    patterns.iter().any(|p| glob_match(p, path))
}

/// What kind of protected path `path` is under `patterns`, or `None` when it is not protected.
pub fn protection(patterns: &[String], path: &str) -> Option<Protection> {
    if !is_protected(patterns, path) {
        return None;
    }
    Some(if CONFIGURATION.iter().any(|c| glob_match(c, path)) { Protection::Configuration } else { Protection::Test })
}

/// The changes of a patch that weaken the checks, in the patch's order: protected files it
/// modified or deleted, and CI configuration it added (see the module docs). Test files it
/// added are its own tests and are not among them.
pub fn weakened(patterns: &[String], touched: &[(String, Touch)]) -> Vec<(String, Touch)> {
    touched
        .iter()
        .filter(|(path, how)| match how {
            Touch::Modified | Touch::Deleted => protection(patterns, path).is_some(),
            Touch::Added => protection(patterns, path) == Some(Protection::Configuration),
        })
        .cloned()
        .collect()
}

/// The test files a patch added: its own tests. They are evidence (cross-tests), not gates:
/// the gates run the base's own tests, in a tree these are taken out of.
pub fn added_tests(patterns: &[String], touched: &[(String, Touch)]) -> Vec<String> {
    touched
        .iter()
        .filter(|(path, how)| *how == Touch::Added && protection(patterns, path) == Some(Protection::Test))
        .map(|(path, _)| path.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn added_tests_are_the_new_files_protected_as_tests() {
        let touched = vec![
            ("test_zzz.py".to_string(), Touch::Added),
            (".github/workflows/x.yml".to_string(), Touch::Added),
            ("test_calc.py".to_string(), Touch::Modified),
            ("src/new.py".to_string(), Touch::Added),
        ];
        assert_eq!(added_tests(&defaults(), &touched), vec!["test_zzz.py".to_string()]);
        assert!(added_tests(&[], &touched).is_empty());
    }

    fn defaults() -> Vec<String> {
        DEFAULT_PROTECTED.iter().map(|s| s.to_string()).collect()
    }

    /// Settings take the built-in lists without checking them (see `RunSettings::resolve`).
    #[test]
    fn the_built_in_lists_are_globs() {
        for g in DEFAULT_PROTECTED.iter().chain(DEFAULT_BUILD_OUTPUTS).chain(CONFIGURATION) {
            assert_eq!(invalid_glob(g), None, "{g}");
        }
    }

    #[test]
    fn globs_match_components() {
        assert!(glob_match("tests/**", "tests/a/b.py"));
        assert!(glob_match("**/test_*.py", "test_calc.py"));
        assert!(glob_match("**/test_*.py", "pkg/sub/test_x.py"));
        assert!(!glob_match("**/test_*.py", "pkg/contest_x.py"));
        assert!(glob_match("**/*_test.go", "internal/a_test.go"));
        assert!(glob_match("jest.config.*", "jest.config.ts"));
        assert!(!glob_match("tests/**", "src/tests.rs"));
        assert!(glob_match("a/?.txt", "a/b.txt") && !glob_match("a/?.txt", "a/bc.txt"));
        assert!(glob_match("**", "a/b/c") && glob_match("a/**/c.py", "a/c.py") && !glob_match("*.py", "a/b.py"));
        assert!(glob_match("{src,lib}/*.rs", "lib/x.rs") && glob_match("[ab].py", "b.py"));
        assert!(!glob_match("[unclosed", "[unclosed"));
        assert!(invalid_glob("[unclosed").is_some() && invalid_glob("tests/**").is_none());
    }

    /// The hand-written matcher this replaced backtracked exponentially: a 60-character
    /// name against `*a*a*a*a*a*a*b` took seconds. Linear now, whatever the pattern.
    #[test]
    fn a_pathological_pattern_does_not_backtrack() {
        let name = "a".repeat(60);
        assert!(!glob_match("*a*a*a*a*a*a*b", &name));
        let deep = vec!["a"; 200].join("/");
        assert!(!glob_match("**/a/**/a/**/a/**/a/**/b", &deep));
        assert!(glob_match("**/a/**/a/**/a", &deep));
    }

    #[test]
    fn changes_to_existing_protected_files_count_and_new_tests_do_not() {
        let touched = vec![
            ("test_calc.py".to_string(), Touch::Modified),
            ("tests/test_new.py".to_string(), Touch::Added),
            ("pkg/calc_test.go".to_string(), Touch::Added),
            ("calc.py".to_string(), Touch::Modified),
            (".github/workflows/ci.yml".to_string(), Touch::Deleted),
        ];
        assert_eq!(
            weakened(&defaults(), &touched),
            vec![
                ("test_calc.py".to_string(), Touch::Modified),
                (".github/workflows/ci.yml".to_string(), Touch::Deleted)
            ]
        );
    }

    #[test]
    fn added_ci_configuration_counts() {
        let added = |p: &str| (p.to_string(), Touch::Added);
        let touched = vec![
            added(".github/workflows/skip.yml"),
            added(".gitlab-ci.yml"),
            added(".circleci/config.yml"),
            added(".ci/run.sh"),
            // Tests, and files that are not protected (the test machinery is derived, see
            // `crate::test_machinery`).
            added("tests/test_more.py"),
            added("test_extra.py"),
            added("src/feature.py"),
            added("pyproject.toml"),
            added("conftest.py"),
        ];
        let flagged: Vec<String> = weakened(&defaults(), &touched).into_iter().map(|(p, _)| p).collect();
        assert_eq!(flagged, [".github/workflows/skip.yml", ".gitlab-ci.yml", ".circleci/config.yml", ".ci/run.sh"]);
        assert!(weakened(&defaults(), &[("pyproject.toml".to_string(), Touch::Modified)]).is_empty());
    }

    #[test]
    fn protection_kinds_follow_the_patterns() {
        let d = defaults();
        assert_eq!(protection(&d, "tests/test_a.py"), Some(Protection::Test));
        assert_eq!(protection(&d, "tests/conftest.py"), Some(Protection::Test));
        assert_eq!(protection(&d, ".github/workflows/ci.yml"), Some(Protection::Configuration));
        assert_eq!(protection(&d, "calc.py"), None);
        // Configuration that the patterns leave unprotected is not protected: adding it is fine.
        let only_tests = vec!["tests/**".to_string()];
        assert_eq!(protection(&only_tests, ".ci/x"), None);
        assert_eq!(weakened(&only_tests, &[(".ci/x".to_string(), Touch::Added)]), Vec::new());
        // No patterns: protection is off, added project files included.
        assert!(weakened(&[], &[("pyproject.toml".to_string(), Touch::Added)]).is_empty());
    }

    #[test]
    fn every_configuration_pattern_names_protected_files() {
        // A representative of each configuration pattern is protected by default, so its
        // addition is caught without changing `protected_paths`.
        for path in [".github/x", ".gitlab-ci.yml", ".circleci/x", ".ci/x"] {
            assert_eq!(protection(&defaults(), path), Some(Protection::Configuration), "{path}");
        }
    }
}

/// Reads `git diff --name-status -z --find-renames` output: a rename is the deletion of
/// its old path and the addition of its new one; a copy adds its new path.
pub fn parse_name_status(raw: &str) -> Vec<(String, Touch)> {
    let mut out = Vec::new();
    let mut fields = raw.split('\0').filter(|f| !f.is_empty());
    while let Some(status) = fields.next() {
        match status.as_bytes().first() {
            Some(b'R') => {
                if let (Some(old), Some(new)) = (fields.next(), fields.next()) {
                    out.push((old.to_string(), Touch::Deleted));
                    out.push((new.to_string(), Touch::Added));
                }
            }
            Some(b'C') => {
                let _old = fields.next();
                if let Some(new) = fields.next() {
                    out.push((new.to_string(), Touch::Added));
                }
            }
            Some(b'A') => out.extend(fields.next().map(|p| (p.to_string(), Touch::Added))),
            Some(b'D') => out.extend(fields.next().map(|p| (p.to_string(), Touch::Deleted))),
            Some(_) => out.extend(fields.next().map(|p| (p.to_string(), Touch::Modified))),
            None => {}
        }
    }
    out
}

#[cfg(test)]
mod name_status_tests {
    use super::*;

    #[test]
    fn renames_delete_the_old_path() {
        let raw = "M\0calc.py\0R100\0test_a.py\0tests/test_a.py\0A\0new.py\0D\0gone.py\0T\0link\0";
        assert_eq!(
            parse_name_status(raw),
            vec![
                ("calc.py".to_string(), Touch::Modified),
                ("test_a.py".to_string(), Touch::Deleted),
                ("tests/test_a.py".to_string(), Touch::Added),
                ("new.py".to_string(), Touch::Added),
                ("gone.py".to_string(), Touch::Deleted),
                ("link".to_string(), Touch::Modified),
            ]
        );
    }
}
