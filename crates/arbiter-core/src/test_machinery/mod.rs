//! The gate tree's test machinery: the files and settings that decide which tests a verify
//! command runs and how, derived per framework from that framework's own documented
//! discovery (not from a list of file names kept by hand), and what the gates do when a
//! candidate changed any of it.
//!
//! One pure function, [`derive`], reads the base and the candidate's tree (read-only
//! [`RepoView`]s) with the paths the candidate touched, and returns, for the frameworks in
//! play, each piece of machinery the candidate changed and how the gate tree gets the base's
//! version back: the whole file from the base (or the file taken out, when the base has
//! none), the candidate's file with only the setting put back (`pyproject.toml`'s
//! `[tool.pytest]`, `package.json`'s `scripts.test`, ... — an honest change elsewhere in the
//! file stays), or, where neither is possible, the candidate rejected. The engine's gate step
//! calls it once and applies the result; the caller supplies what only an effect can learn
//! (the interpreter's standard-library module names, [`PythonFacts`]).
//!
//! Frameworks in play: those the verify commands run ([`canary::recognise`]), and those
//! whose project files the base has (Python sources, `package.json`, `Cargo.toml`,
//! `go.mod`): a verify command such as `python3 run_tests.py` runs a framework arbiter
//! cannot name, and its machinery is still the project's.

mod python;
mod rules;
mod settings;

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::canary::{self, Framework, RepoView};
use crate::protect::Touch;

pub use rules::base_reads;

/// A family of frameworks that share their machinery.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// unittest and pytest, and the interpreter's own start-up.
    Python,
    /// Jest and Vitest, and the package manager that starts them.
    JavaScript,
    /// `cargo test`.
    Cargo,
    /// `go test`.
    Go,
}

impl Family {
    fn of(framework: Framework) -> Family {
        match framework {
            Framework::Unittest | Framework::Pytest => Family::Python,
            Framework::Jest | Framework::Vitest => Family::JavaScript,
            Framework::CargoTest => Family::Cargo,
            Framework::GoTest => Family::Go,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Family::Python => "python",
            Family::JavaScript => "javascript",
            Family::Cargo => "cargo",
            Family::Go => "go",
        }
    }
}

/// What the interpreter the gates run says about itself (learnt by the caller, once per run).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PythonFacts {
    /// `sys.stdlib_module_names`; empty when no interpreter could be asked (then a module
    /// shadowing the standard library is not recognised as such).
    pub stdlib_modules: BTreeSet<String>,
}

/// How the gate tree gets the base's machinery back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "how")]
pub enum Restore {
    /// The base's version of the file; the file taken out when the base has none.
    BaseFile,
    /// The candidate's file with the settings put back as the base has them.
    Settings { content: String },
    /// It cannot be put back: the candidate is rejected.
    Reject { why: String },
}

/// One piece of test machinery a candidate changed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// The file, relative to the repository root.
    pub path: String,
    /// The settings within it that changed (`[tool.pytest.ini_options] addopts`,
    /// `scripts.test`); empty when the whole file is machinery.
    pub settings: Vec<String>,
    pub family: Family,
    /// What the file or setting decides, in a few words.
    pub what: String,
    pub restore: Restore,
}

impl Change {
    /// The file and its settings: `pyproject.toml [tool.pytest.ini_options] addopts`, or the
    /// path alone.
    pub fn describe(&self) -> String {
        if self.settings.is_empty() { self.path.clone() } else { format!("{} {}", self.path, self.settings.join(", ")) }
    }
}

/// What [`derive`] reads.
pub struct Sources<'a> {
    /// The base commit's tree.
    pub base: &'a dyn RepoView,
    /// The candidate's tree: the base's paths less those it deleted, plus those it added.
    pub candidate: &'a dyn RepoView,
    /// The paths the candidate's patch touched, and how.
    pub touched: &'a [(String, Touch)],
    /// The verify commands.
    pub commands: &'a [String],
    pub python: &'a PythonFacts,
}

/// The frameworks in play: those the commands run and those whose project files the base has.
pub fn families(base: &dyn RepoView, commands: &[String]) -> BTreeSet<Family> {
    let mut out: BTreeSet<Family> = commands
        .iter()
        .filter_map(|c| match canary::recognise(c, base) {
            canary::Recognition::Recognised(inv) => Some(Family::of(inv.framework)),
            canary::Recognition::NotApplicable { .. } => None,
        })
        .collect();
    for f in base.files() {
        let name = f.rsplit('/').next().unwrap_or(f);
        if name.ends_with(".py") {
            out.insert(Family::Python);
        } else if name == "package.json" {
            out.insert(Family::JavaScript);
        } else if name == "Cargo.toml" {
            out.insert(Family::Cargo);
        } else if name == "go.mod" || name.ends_with(".go") {
            out.insert(Family::Go);
        }
    }
    out
}

/// The test machinery the candidate changed, in the order of `touched`, each with how the
/// gate tree gets the base's version back.
pub fn derive(sources: &Sources<'_>) -> Vec<Change> {
    let families = families(sources.base, sources.commands);
    let context = rules::Context::new(sources, &families);
    sources.touched.iter().filter_map(|(path, how)| context.change(path, *how)).collect()
}

#[cfg(test)]
mod tests;
