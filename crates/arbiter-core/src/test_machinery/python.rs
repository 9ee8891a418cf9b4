//! Python's machinery beyond its configuration files: what the interpreter runs at start-up,
//! the plugins pytest's configuration names, and modules that would be imported in place of
//! the standard library's or the test runner's.

use std::collections::BTreeSet;

use crate::canary::{RepoView, basename, normalize_dir, parent, parse};

/// pytest's configuration files: every one of them is pytest's alone.
pub(super) const PYTEST_FILES: &[&str] = &["pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml"];

/// Modules of the test runners themselves (outside the standard library): a module of this
/// name where tests are imported from is imported in its place.
const RUNNER_MODULES: &[&str] = &["pytest", "_pytest", "pluggy", "py", "iniconfig"];

/// What Python's own discovery says about one tree.
pub(super) struct Python {
    /// Module files named as pytest plugins by the base's configuration (`-p NAME` in
    /// `addopts`, `pytest_plugins` in a `conftest.py`).
    pub(super) plugins: BTreeSet<String>,
    /// Directories put on `sys.path` before the standard library when the tests run: the
    /// root (`python -m`, unittest's discovery), every directory of tests or `conftest.py`
    /// that is not a package (pytest's default `prepend` import mode), and `pythonpath`.
    pub(super) roots: BTreeSet<String>,
}

impl Python {
    pub(super) fn of(base: &dyn RepoView, candidate: &dyn RepoView) -> Python {
        let config = parse::pytest_config(|p| base.read(p)).unwrap_or_default();
        let mut plugins = BTreeSet::new();
        let mut words = config.addopts.iter();
        while let Some(w) = words.next() {
            let name = match w.strip_prefix("-p") {
                Some("") => words.next().map(String::as_str),
                Some(n) => Some(n),
                None => None,
            };
            if let Some(n) = name.filter(|n| !n.starts_with("no:")) {
                plugins.extend(module_files(n));
            }
        }
        for f in base.files().iter().filter(|f| basename(f) == "conftest.py") {
            for n in base.read(f).map(|t| pytest_plugins(&t)).unwrap_or_default() {
                plugins.extend(module_files(&n));
            }
        }
        let mut roots: BTreeSet<String> = BTreeSet::from([String::new()]);
        roots.extend(config.pythonpath.iter().map(|d| normalize_dir(d)));
        let packages: std::collections::HashSet<&str> = [base, candidate]
            .iter()
            .flat_map(|v| v.files())
            .filter(|f| basename(f) == "__init__.py")
            .map(|f| parent(f))
            .collect();
        for view in [base, candidate] {
            for f in view.files() {
                let name = basename(f);
                let tests = name == "conftest.py"
                    || (name.ends_with(".py") && (name.starts_with("test") || name.ends_with("_test.py")));
                if tests && !packages.contains(parent(f)) {
                    roots.insert(parent(f).to_string());
                }
            }
        }
        Python { plugins, roots }
    }

    /// The module `path` would shadow, when it is a module or package directly in a
    /// directory on `sys.path` and named as one of the standard library's or a runner's.
    pub(super) fn shadowed(&self, path: &str, stdlib: &BTreeSet<String>) -> Option<String> {
        let (dir, module) = match path.strip_suffix("/__init__.py") {
            Some(package) => (parent(package), basename(package)),
            None => (parent(path), basename(path).strip_suffix(".py")?),
        };
        let named = stdlib.contains(module) || RUNNER_MODULES.contains(&module);
        (named && self.roots.contains(dir)).then(|| module.to_string())
    }
}

/// The files a module name can be (`a.b` → `a/b.py`, `a/b/__init__.py`).
fn module_files(name: &str) -> [String; 2] {
    let path = name.replace('.', "/");
    [format!("{path}.py"), format!("{path}/__init__.py")]
}

/// The names in a `pytest_plugins = ...` assignment of a `conftest.py` (a string, a list or a
/// tuple of strings, on one or more lines).
fn pytest_plugins(source: &str) -> Vec<String> {
    let Some(start) = source.find("pytest_plugins") else { return Vec::new() };
    let rest = &source[start + "pytest_plugins".len()..];
    let Some(rest) = rest.trim_start().strip_prefix('=') else { return Vec::new() };
    let rest = rest.trim_start();
    let value = match rest.chars().next() {
        Some('[') => rest.split(']').next().unwrap_or(""),
        Some('(') => rest.split(')').next().unwrap_or(""),
        _ => rest.lines().next().unwrap_or(""),
    };
    value
        .split(['"', '\''])
        .skip(1)
        .step_by(2)
        .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '.'))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_pytest_plugins() {
        assert_eq!(pytest_plugins("pytest_plugins = ['a.b', \"c\"]\n"), ["a.b", "c"]);
        assert_eq!(pytest_plugins("pytest_plugins = (\n  'x',\n)\n"), ["x"]);
        assert_eq!(pytest_plugins("pytest_plugins = 'one'\nother = 'no'\n"), ["one"]);
        assert!(pytest_plugins("import os\n").is_empty());
    }
}
