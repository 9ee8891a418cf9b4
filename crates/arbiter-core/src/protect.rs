//! Evidence integrity: the paths a candidate must not change to pass its gates (tests,
//! CI and build configuration), and glob matching for them.
//!
//! A candidate that modified or deleted a protected file that exists at the base has its
//! gates run with the base version of those files restored, is flagged, and is eligible only
//! when the task explicitly allows test changes. Protected files it adds are its own tests
//! and stay.

use serde::{Deserialize, Serialize};

/// Protected by default: tests in the common layouts of Python, Rust, Go and JS/TS, CI
/// configuration, and the files that decide how tests run.
pub const DEFAULT_PROTECTED: &[&str] = &[
    "tests/**",
    "test/**",
    "**/tests/**",
    "**/test/**",
    "**/__tests__/**",
    "**/test_*.py",
    "**/*_test.py",
    "**/conftest.py",
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
    "pytest.ini",
    "tox.ini",
    "jest.config.*",
    "vitest.config.*",
];

/// How a patch touched a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Touch {
    Added,
    Modified,
    Deleted,
}

/// Matches `path` (with `/` separators) against a glob: `*` and `?` stay within one path
/// component, `**` spans any number of components (including none).
pub fn glob_match(pattern: &str, path: &str) -> bool {
    let pat: Vec<&str> = pattern.split('/').collect();
    let parts: Vec<&str> = path.split('/').collect();
    match_components(&pat, &parts)
}

fn match_components(pat: &[&str], parts: &[&str]) -> bool {
    match pat.split_first() {
        None => parts.is_empty(),
        Some((&"**", rest)) => (0..=parts.len()).any(|i| match_components(rest, &parts[i..])),
        Some((first, rest)) => match parts.split_first() {
            Some((p, more)) => match_component(first.as_bytes(), p.as_bytes()) && match_components(rest, more),
            None => false,
        },
    }
}

fn match_component(pat: &[u8], s: &[u8]) -> bool {
    match pat.split_first() {
        None => s.is_empty(),
        Some((b'*', rest)) => (0..=s.len()).any(|i| match_component(rest, &s[i..])),
        Some((b'?', rest)) => !s.is_empty() && match_component(rest, &s[1..]),
        Some((c, rest)) => s.first() == Some(c) && match_component(rest, &s[1..]),
    }
}

/// Whether `path` is protected by any of `patterns`.
pub fn is_protected(patterns: &[String], path: &str) -> bool {
    patterns.iter().any(|p| glob_match(p, path))
}

/// The protected files a patch modified or deleted (additions are the candidate's own tests).
pub fn weakened(patterns: &[String], touched: &[(String, Touch)]) -> Vec<String> {
    touched
        .iter()
        .filter(|(path, how)| *how != Touch::Added && is_protected(patterns, path))
        .map(|(path, _)| path.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults() -> Vec<String> {
        DEFAULT_PROTECTED.iter().map(|s| s.to_string()).collect()
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
    }

    #[test]
    fn only_changes_to_existing_protected_files_count() {
        let touched = vec![
            ("test_calc.py".to_string(), Touch::Modified),
            ("tests/test_new.py".to_string(), Touch::Added),
            ("calc.py".to_string(), Touch::Modified),
            (".github/workflows/ci.yml".to_string(), Touch::Deleted),
        ];
        assert_eq!(
            weakened(&defaults(), &touched),
            vec!["test_calc.py".to_string(), ".github/workflows/ci.yml".to_string()]
        );
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
