//! Canary tests: a test arbiter plants next to the base's tests that **must fail**, to detect
//! a candidate that neutralised the test machinery from its source (an assertion method
//! replaced at import, an exit hook that forces exit code 0).
//!
//! The canary runs inside the very gate run it guards (the candidate's code cannot tell a
//! canary run from a normal one), so arbiter reads the run's output to learn whether the
//! canary failed and whether anything else failed. This module owns the three pure steps:
//!
//! 1. [`recognise`] which framework a verify command runs, only when it is one plain
//!    test-runner invocation (no `&&`, `;`, pipes...: with `pytest && flake8` the canary's
//!    failure would keep flake8 from running and a broken flake8 would go unnoticed);
//! 2. [`plan`] where the canary goes and what it says, so that the command collects it, and
//!    the command to run (the same, except `cargo test` gets `--no-fail-fast`);
//! 3. [`read`] the run's output into a [`Reading`], and [`verdict`] it against whether the
//!    canary was seen failing on the base ([`calibrated`]).
//!
//! The caller does every effect: it passes a read-only view of the base ([`RepoView`]) and a
//! [`Nonce`] (random words and numbers, so a hostile module cannot spot the canary by
//! name), writes [`CanaryPlan::files`] into the tree, runs [`CanaryPlan::command`] and hands
//! the *full* output back. Fail-fast options (`pytest -x`, `unittest -f`, `jest --bail`,
//! `vitest --bail`, `go test -failfast`) are refused: the canary failing first would stop
//! the run before the base's tests, and an honest candidate would lose its gate coverage.

mod go;
mod js;
pub(crate) mod parse;
mod planner;
mod python;
mod reader;
mod rust;
mod shell;

use serde::{Deserialize, Serialize};

pub(crate) use planner::{basename, normalize_dir, parent};
pub use planner::{plan, recognise};
pub(crate) use reader::clean_lines;
pub use reader::read;

/// A test framework whose runs arbiter can plant a canary in and read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum Framework {
    /// `python -m unittest` (discovery).
    Unittest,
    /// `pytest`, `python -m pytest`.
    Pytest,
    /// `jest`, `npx jest`, or `npm test` running jest.
    Jest,
    /// `vitest run`, `npx vitest`, or `npm test` running vitest.
    Vitest,
    /// `cargo test`.
    CargoTest,
    /// `go test`.
    GoTest,
}

impl Framework {
    pub fn as_str(self) -> &'static str {
        match self {
            Framework::Unittest => "unittest",
            Framework::Pytest => "pytest",
            Framework::Jest => "jest",
            Framework::Vitest => "vitest",
            Framework::CargoTest => "cargo_test",
            Framework::GoTest => "go_test",
        }
    }
}

impl std::fmt::Display for Framework {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A read-only view of the repository at the base commit, filled by the caller (for
/// instance from the baseline's checkout).
pub trait RepoView {
    /// Every tracked path, relative to the repository root, with `/` separators.
    fn files(&self) -> &[String];
    /// The text of a tracked file (`None` when it is missing or not text). The planner asks
    /// only for small files: `package.json`, `Cargo.toml`s, `go.mod`, `pytest.ini`,
    /// `pyproject.toml`, `setup.cfg`, `tox.ini`, and one `_test.go` of the chosen directory.
    fn read(&self, path: &str) -> Option<String>;
}

/// A [`RepoView`] held in memory: the file list and the contents of whichever files the
/// caller chose to load.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaticRepo {
    pub files: Vec<String>,
    pub contents: std::collections::BTreeMap<String, String>,
}

impl StaticRepo {
    /// Files with their contents (every file listed is tracked).
    pub fn with(files: &[(&str, &str)]) -> Self {
        StaticRepo {
            files: files.iter().map(|(p, _)| p.to_string()).collect(),
            contents: files.iter().map(|(p, c)| (p.to_string(), c.to_string())).collect(),
        }
    }
}

impl RepoView for StaticRepo {
    fn files(&self) -> &[String] {
        &self.files
    }
    fn read(&self, path: &str) -> Option<String> {
        self.contents.get(path).cloned()
    }
}

/// What makes one canary unlike any other: two ordinary words for its names and two distinct
/// numbers for its assertion. Random per run, supplied by the caller.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Nonce {
    /// Lowercase ASCII words (`a`–`z`), distinct.
    pub words: [String; 2],
    /// Distinct numbers; the canary asserts that the first equals the second.
    pub numbers: [i64; 2],
}

/// Words a canary is named from: ordinary nouns, none a keyword of Python, JS, Go or Rust,
/// none saying "canary" or "arbiter".
const WORDS: &[&str] = &[
    "harbor", "walrus", "lantern", "meadow", "copper", "falcon", "orchard", "ledger", "pebble", "quartz", "ribbon",
    "saddle", "timber", "velvet", "willow", "anchor", "barley", "cobalt", "dune", "ember", "fennel", "garnet",
    "hollow", "indigo", "juniper", "kettle", "lagoon", "marble", "nutmeg", "otter", "parcel", "quill", "raven",
    "summit", "thistle", "umber", "vessel", "wharf", "yarrow", "zephyr", "basalt", "cedar", "delta", "fjord",
    "glacier", "heron", "island", "jasper", "kelp", "lichen", "mosaic", "nectar", "oasis", "prairie", "reef",
    "sparrow", "tundra", "valley", "bramble", "cinder", "drift", "flint", "grove", "hazel",
];

impl Nonce {
    /// A nonce derived from 64 random bits (the caller draws them): two distinct words from a
    /// fixed list and two distinct four-digit numbers.
    pub fn from_seed(seed: u64) -> Nonce {
        let n = WORDS.len() as u64;
        let first = (seed % n) as usize;
        let mut second = ((seed >> 8) % (n - 1)) as usize;
        if second >= first {
            second += 1;
        }
        let a = 1000 + ((seed >> 16) % 9000) as i64;
        let mut b = 1000 + ((seed >> 32) % 9000) as i64;
        if b == a {
            b = if a == 9999 { 1000 } else { a + 1 };
        }
        Nonce { words: [WORDS[first].to_string(), WORDS[second].to_string()], numbers: [a, b] }
    }

    fn valid(&self) -> bool {
        let word_ok = |w: &str| !w.is_empty() && w.len() <= 20 && w.bytes().all(|b| b.is_ascii_lowercase());
        word_ok(&self.words[0])
            && word_ok(&self.words[1])
            && self.words[0] != self.words[1]
            && self.numbers[0] != self.numbers[1]
    }

    /// `walrus_harbor`.
    pub(crate) fn snake(&self) -> String {
        format!("{}_{}", self.words[0], self.words[1])
    }
    /// `walrus-harbor`.
    pub(crate) fn kebab(&self) -> String {
        format!("{}-{}", self.words[0], self.words[1])
    }
    /// `walrus harbor`.
    pub(crate) fn spaced(&self) -> String {
        format!("{} {}", self.words[0], self.words[1])
    }
    /// `WalrusHarbor`.
    pub(crate) fn camel(&self) -> String {
        self.words.iter().map(|w| capitalize(w)).collect()
    }
}

fn capitalize(w: &str) -> String {
    let mut c = w.chars();
    match c.next() {
        Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
        None => String::new(),
    }
}

/// A verify command recognised as one test-runner invocation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Invocation {
    pub framework: Framework,
    /// The runner's own arguments (for `npm test`, the script's arguments and the extra ones).
    pub args: Vec<String>,
}

/// Whether a command was recognised, and why not when it was not.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "result")]
pub enum Recognition {
    Recognised(Invocation),
    NotApplicable { reason: String },
}

/// One file the canary consists of.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CanaryFile {
    /// Relative to the repository root, `/` separators; no tracked file has this path.
    pub path: String,
    pub content: String,
}

/// Where a canary goes, what it says and how the run's output names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CanaryPlan {
    pub framework: Framework,
    /// What to run in place of the verify command: the same command, except that `cargo
    /// test` gets `--no-fail-fast` (cargo otherwise stops at the first failing test binary,
    /// and the canary's would cut the binaries and doc tests after it).
    pub command: String,
    /// Written into the tree before the run and removed after it.
    pub files: Vec<CanaryFile>,
    /// The test's name as the framework reports it: a unittest method, a pytest function, a
    /// Jest or Vitest title, a Rust test function (and its integration test target), a Go
    /// test function.
    pub test: String,
    /// unittest: the test case class; otherwise `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
}

/// What planning decided for one verify command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "result")]
pub enum Planned {
    Plant(CanaryPlan),
    /// No canary for this command; its plain exit code decides, as without canaries.
    NotApplicable {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        framework: Option<Framework>,
        reason: String,
    },
}

/// Whether the canary showed up in a run, and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum CanarySeen {
    /// Reported failing: the test machinery works.
    Failed,
    /// Reported passing: its assertion was neutralised.
    Passed,
    /// Not in the output (not collected, not run, or the output does not name passing tests).
    NotSeen,
}

/// What a run's output says about the canary and the other tests.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct Reading {
    pub canary: CanarySeen,
    /// Tests (or test files, binaries, packages) other than the canary that failed or
    /// errored; `None` when the output does not tell.
    pub other_failures: Option<u32>,
    pub exit_code: Option<i32>,
    /// What else the reader noticed (a test binary that ended without its result line...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// Whether the base's run showed the canary failing and could count the other failures: only
/// then does a candidate's run say anything about tampering.
pub fn calibrated(base: &Reading) -> bool {
    base.canary == CanarySeen::Failed && base.other_failures.is_some()
}

/// The meaning of a gate run with a canary in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The canary failed and nothing else did: the command counts as passed.
    Held,
    /// The canary failed and other tests failed too (or the run could not be seen to be
    /// otherwise clean): the command failed.
    HeldWithFailures,
    /// The canary did not run but other things failed (a build or collection error stops
    /// every test, the canary's too): the command failed; not counted as tampering.
    CanaryNotRun,
    /// The canary did not fail although the base showed it failing, or the run exited 0 with
    /// the canary in it: the candidate neutralised the checks and is rejected.
    Tampered,
    /// The base did not show the canary failing (the command does not collect it, e.g. it
    /// names one test module): the plain exit code decides, as without canaries.
    NotApplicable,
}

impl Verdict {
    /// Whether the command passed, when the canary decides it (`None`: the exit code decides).
    pub fn command_passed(self) -> Option<bool> {
        match self {
            Verdict::Held => Some(true),
            Verdict::HeldWithFailures | Verdict::CanaryNotRun | Verdict::Tampered => Some(false),
            Verdict::NotApplicable => None,
        }
    }

    pub fn tampered(self) -> bool {
        self == Verdict::Tampered
    }

    /// One sentence for reports.
    pub fn describe(self) -> &'static str {
        match self {
            Verdict::Held => "the canary failed as it must and nothing else failed",
            Verdict::HeldWithFailures => "the canary failed as it must, and other tests failed too",
            Verdict::CanaryNotRun => "the run failed before the canary ran (a build or collection error)",
            Verdict::Tampered => "the canary test that must fail did not: the candidate neutralised the test machinery",
            Verdict::NotApplicable => "no canary: the command's exit code decides",
        }
    }
}

/// Decides what a run with the canary in it means, given whether the base's run was
/// [`calibrated`].
pub fn verdict(reading: &Reading, calibrated: bool) -> Verdict {
    if !calibrated {
        return Verdict::NotApplicable;
    }
    match reading.canary {
        CanarySeen::Passed => Verdict::Tampered,
        _ if reading.exit_code == Some(0) => Verdict::Tampered,
        CanarySeen::Failed => match (reading.other_failures, reading.exit_code) {
            (Some(0), Some(_)) => Verdict::Held,
            _ => Verdict::HeldWithFailures,
        },
        CanarySeen::NotSeen => match reading.other_failures {
            Some(0) => Verdict::Tampered,
            _ => Verdict::CanaryNotRun,
        },
    }
}

/// What arbiter records about the canary of one verify command (in `evidence.json` and
/// `baseline.json`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct CanaryCheck {
    pub framework: Option<Framework>,
    /// The canary's files, relative to the tree (empty when none was planted).
    pub files: Vec<String>,
    /// Why no canary was planted, when none was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_planted: Option<String>,
    pub reading: Option<Reading>,
    pub verdict: Verdict,
}

#[cfg(test)]
mod tests;
