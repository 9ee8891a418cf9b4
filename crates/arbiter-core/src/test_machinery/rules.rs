//! Which files are machinery, whole, for each family: the frameworks' documented discovery
//! (configuration files, start-up hooks, build scripts, workspaces) and the files the base's
//! own configuration names (plugins, setup files, transformers, build scripts).

use std::collections::BTreeSet;

use serde_json::Value;

use super::python::{self, Python};
use super::settings::{self, SPECS};
use super::{Change, Family, Restore, Sources};
use crate::canary::{basename, parent};
use crate::protect::Touch;

/// Jest's configuration files (`jest.config.{js,ts,mjs,cjs,json}`).
const JEST_CONFIG: &str = "jest.config.";
/// Vitest's configuration files: its own, Vite's (which Vitest reads when it has none) and
/// its workspace files.
const VITEST_CONFIG: &[&str] = &["vitest.config.", "vite.config.", "vitest.workspace.", "vitest.projects."];
/// Babel's configuration files, which babel-jest (Jest's default transformer) reads.
const BABEL_CONFIG: &[&str] = &["babel.config.", ".babelrc."];
/// The package managers' own configuration (`script-shell` decides what runs `npm test`).
const PACKAGE_MANAGER_CONFIG: &[&str] = &[".npmrc", ".yarnrc", ".yarnrc.yml", ".babelrc"];

/// Whether [`super::derive`] may read the base's file at `path`: the runner loads exactly
/// these from the base (configuration files are small and few).
pub fn base_reads(path: &str) -> bool {
    let name = basename(path);
    SPECS.iter().any(|s| s.name == name)
        || python::PYTEST_FILES.contains(&name)
        || name == "conftest.py"
        || name.starts_with(JEST_CONFIG)
        || VITEST_CONFIG.iter().any(|p| name.starts_with(p))
}

pub(super) struct Context<'a> {
    sources: &'a Sources<'a>,
    families: &'a BTreeSet<Family>,
    python: Option<Python>,
    /// Files the base's configuration names (setup files, transformers, build scripts).
    named: Vec<(String, Family, String)>,
}

impl<'a> Context<'a> {
    pub(super) fn new(sources: &'a Sources<'a>, families: &'a BTreeSet<Family>) -> Self {
        let python = families.contains(&Family::Python).then(|| Python::of(sources.base, sources.candidate));
        let mut named = Vec::new();
        if families.contains(&Family::JavaScript) {
            named.extend(
                js_named(sources).into_iter().map(|p| {
                    (p, Family::JavaScript, "a file the base's Jest or Vitest configuration runs".to_string())
                }),
            );
        }
        if families.contains(&Family::Cargo) {
            named.extend(
                cargo_build_scripts(sources)
                    .into_iter()
                    .map(|p| (p, Family::Cargo, "the build script a Cargo.toml names (build =)".to_string())),
            );
        }
        if let Some(py) = &python {
            named.extend(
                py.plugins
                    .iter()
                    .map(|p| (p.clone(), Family::Python, "a pytest plugin the base's configuration loads".into())),
            );
        }
        Context { sources, families, python, named }
    }

    fn in_play(&self, family: Family) -> bool {
        self.families.contains(&family)
    }

    pub(super) fn change(&self, path: &str, how: Touch) -> Option<Change> {
        if let Some((family, what)) = self.whole(path) {
            return Some(Change {
                path: path.to_string(),
                settings: Vec::new(),
                family,
                what,
                restore: Restore::BaseFile,
            });
        }
        let spec = settings::spec_for(path, &|f| self.in_play(f))?;
        settings::change(spec, path, how, self.sources.base, self.sources.candidate)
    }

    /// The family and role of `path` when the whole file is machinery.
    fn whole(&self, path: &str) -> Option<(Family, String)> {
        let name = basename(path);
        let dir = basename(parent(path));
        if let Some((_, family, what)) = self.named.iter().find(|(p, _, _)| p == path) {
            return Some((*family, what.clone()));
        }
        let found = |family: Family, what: &str| self.in_play(family).then(|| (family, what.to_string()));
        if python::PYTEST_FILES.contains(&name) {
            return found(Family::Python, "a pytest configuration file");
        }
        if name == "conftest.py" {
            return found(Family::Python, "a pytest conftest.py (hooks and fixtures loaded before the tests)");
        }
        if name == "sitecustomize.py" || name == "usercustomize.py" {
            return found(Family::Python, "a Python start-up hook (imported by site before any test)");
        }
        if name.ends_with(".pth") {
            return found(Family::Python, "a Python path configuration file (its import lines run at start-up)");
        }
        if let Some(py) = &self.python
            && let Some(module) = py.shadowed(path, &self.sources.python.stdlib_modules)
        {
            return Some((Family::Python, format!("a module that shadows `{module}` where the tests import it")));
        }
        if name.starts_with(JEST_CONFIG) {
            return found(Family::JavaScript, "a Jest configuration file");
        }
        if VITEST_CONFIG.iter().any(|p| name.starts_with(p)) {
            return found(Family::JavaScript, "a Vitest configuration file");
        }
        if BABEL_CONFIG.iter().any(|p| name.starts_with(p)) || PACKAGE_MANAGER_CONFIG.contains(&name) {
            return found(Family::JavaScript, "configuration of the package manager or of babel-jest's transform");
        }
        if dir == ".cargo" && (name == "config" || name == "config.toml") {
            return found(Family::Cargo, "a Cargo configuration file (runner, rustflags, environment)");
        }
        if name == "build.rs" && self.beside(path, "Cargo.toml") {
            return found(Family::Cargo, "a Cargo build script (it runs before the tests compile)");
        }
        if name == "go.work" {
            return found(Family::Go, "a Go workspace file (it replaces the modules the tests build)");
        }
        if path.split('/').any(|c| c == "vendor") && self.vendored(path) {
            return found(Family::Go, "vendored module source the tests build with");
        }
        None
    }

    /// Whether the directory of `path` holds `name`, in the base or in the candidate's tree.
    fn beside(&self, path: &str, name: &str) -> bool {
        let wanted = match parent(path) {
            "" => name.to_string(),
            d => format!("{d}/{name}"),
        };
        [self.sources.base, self.sources.candidate].iter().any(|v| v.files().contains(&wanted))
    }

    /// Whether `path` is under the `vendor` directory of a Go module.
    fn vendored(&self, path: &str) -> bool {
        let mut prefix = String::new();
        for component in path.split('/') {
            if component == "vendor" {
                let go_mod = format!("{prefix}go.mod");
                return [self.sources.base, self.sources.candidate].iter().any(|v| v.files().contains(&go_mod));
            }
            prefix.push_str(component);
            prefix.push('/');
        }
        false
    }
}

/// The keys of a Jest configuration that name files Jest loads (setup, environments,
/// transformers, runners, reporters, resolvers).
const JEST_FILE_KEYS: &[&str] = &[
    "setupFiles",
    "setupFilesAfterEnv",
    "globalSetup",
    "globalTeardown",
    "testEnvironment",
    "transform",
    "testRunner",
    "runner",
    "reporters",
    "resolver",
    "snapshotResolver",
    "testSequencer",
    "moduleNameMapper",
    "watchPlugins",
];

/// Files the base's Jest and Vitest configuration names, as base paths: the values of
/// [`JEST_FILE_KEYS`] in `package.json` (`jest`) and `jest.config.json`, and every relative
/// path written in a JS or TS configuration file (`./setup.js`, `<rootDir>/x`), that the base
/// has (with the extensions Node resolves).
fn js_named(sources: &Sources<'_>) -> BTreeSet<String> {
    let base = sources.base;
    let mut strings: Vec<(String, String)> = Vec::new();
    for f in base.files() {
        let name = basename(f);
        let dir = parent(f).to_string();
        if name == "package.json" || name == "jest.config.json" {
            let Some(v) = base.read(f).and_then(|t| serde_json::from_str::<Value>(&t).ok()) else { continue };
            let config = if name == "package.json" { v.get("jest").cloned() } else { Some(v) };
            for key in JEST_FILE_KEYS {
                if let Some(value) = config.as_ref().and_then(|c| c.get(key)) {
                    collect_strings(value, &mut |s| strings.push((dir.clone(), s.to_string())));
                }
            }
        } else if name.starts_with(JEST_CONFIG) || VITEST_CONFIG.iter().any(|p| name.starts_with(p)) {
            let text = base.read(f).unwrap_or_default();
            for s in text.split(['"', '\'', '`']).skip(1).step_by(2) {
                strings.push((dir.clone(), s.to_string()));
            }
        }
    }
    let mut out = BTreeSet::new();
    for (dir, s) in strings {
        let rel = if let Some(r) = s.strip_prefix("<rootDir>/") {
            r.to_string()
        } else if s.starts_with("./") || s.starts_with("../") {
            s.clone()
        } else {
            continue;
        };
        let Some(path) = resolve(&dir, &rel) else { continue };
        for ext in ["", ".js", ".ts", ".mjs", ".cjs", ".jsx", ".tsx", "/index.js", "/index.ts"] {
            let p = format!("{path}{ext}");
            if base.files().contains(&p) {
                out.insert(p);
            }
        }
    }
    out
}

fn collect_strings(v: &Value, f: &mut dyn FnMut(&str)) {
    match v {
        Value::String(s) => f(s),
        Value::Array(a) => a.iter().for_each(|x| collect_strings(x, f)),
        Value::Object(o) => o.values().for_each(|x| collect_strings(x, f)),
        _ => {}
    }
}

/// `dir/rel` with `.` and `..` resolved, when it stays in the repository.
fn resolve(dir: &str, rel: &str) -> Option<String> {
    let mut parts: Vec<&str> = dir.split('/').filter(|c| !c.is_empty()).collect();
    for c in rel.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            c => parts.push(c),
        }
    }
    Some(parts.join("/"))
}

/// The build scripts the base's `Cargo.toml`s name with `build = "..."`.
fn cargo_build_scripts(sources: &Sources<'_>) -> BTreeSet<String> {
    let base = sources.base;
    base.files()
        .iter()
        .filter(|f| basename(f) == "Cargo.toml")
        .filter_map(|f| {
            let table: toml::Table = toml::from_str(&base.read(f)?).ok()?;
            let build = table.get("package")?.get("build")?.as_str()?.to_string();
            resolve(parent(f), &build)
        })
        .collect()
}
