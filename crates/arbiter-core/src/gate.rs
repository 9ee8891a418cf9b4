//! Verify commands as gates: what one run of a command showed, and how a candidate's
//! results compare with the baseline on the base commit.
//!
//! A candidate passes when every command that passed on the base still passes (no
//! regression) and every command that failed on the base now passes (the task is done).

use serde::{Deserialize, Serialize};

use crate::canary::CanaryCheck;
use crate::test_output::TestDelta;

/// One verify command run once, in one tree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct CommandOutcome {
    pub command: String,
    /// `None` when the command was killed (timeout or interrupt) or could not start.
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    pub duration_ms: u64,
    /// The last lines of stdout and stderr together, secrets redacted.
    pub output_tail: String,
    /// The canary planted in this run (see [`crate::canary`]), and what became of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary: Option<CanaryCheck>,
    /// The tests the run reported failing, by name (the canary left out), when the command
    /// is a test runner arbiter reads; `None` when it is not, or its output did not tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_tests: Option<Vec<String>>,
    /// The JUnit XML reports the run wrote that `failed_tests` was read from (relative to the
    /// tree); empty when it was read from the output, or not at all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub test_reports: Vec<String>,
}

impl CommandOutcome {
    /// Whether the command passed: its exit code, or — with a canary in the run — whether
    /// the canary failed and nothing else did.
    pub fn passed(&self) -> bool {
        if self.timed_out {
            return false;
        }
        match self.canary.as_ref().and_then(|c| c.verdict.command_passed()) {
            Some(passed) => passed,
            None => self.exit_code == Some(0),
        }
    }

    /// Whether the canary of this run did not fail: the test machinery was neutralised.
    pub fn tampered(&self) -> bool {
        self.canary.as_ref().is_some_and(|c| c.verdict.tampered())
    }
}

/// One verify command on a candidate, next to its baseline result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct GateResult {
    #[serde(flatten)]
    pub outcome: CommandOutcome,
    pub passed: bool,
    /// Whether it passed on the base commit (`None` when the baseline is unknown).
    pub base_passed: Option<bool>,
    pub verdict: GateVerdict,
    /// Test by test against the base's run, when both named their failing tests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tests: Option<TestDelta>,
}

/// The meaning of one gate result against the baseline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum GateVerdict {
    /// Passed before and after.
    KeptPassing,
    /// Failed on the base, passes now.
    Fixed,
    /// Passed on the base, fails now.
    Regressed,
    /// Failed on the base and still fails.
    StillFailing,
}

impl GateVerdict {
    /// The verdict in words.
    pub fn describe(self) -> &'static str {
        match self {
            GateVerdict::KeptPassing => "kept passing",
            GateVerdict::Fixed => "fixed",
            GateVerdict::Regressed => "regressed",
            GateVerdict::StillFailing => "still failing",
        }
    }

    /// Whether the candidate is better off or as good as the base on this check.
    pub fn is_good(self) -> bool {
        matches!(self, GateVerdict::KeptPassing | GateVerdict::Fixed)
    }
}

/// Totals over a candidate's gates.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct GateSummary {
    pub total: usize,
    pub passed: usize,
    /// Commands that passed on the base (the ones that must keep passing).
    pub base_passing: usize,
    pub kept_passing: usize,
    pub regressed: usize,
    /// Commands that failed on the base (the ones the task must fix).
    pub base_failing: usize,
    pub fixed: usize,
    pub still_failing: usize,
    /// Every gate passes: nothing regressed and everything failing was fixed.
    pub all_passed: bool,
    /// Test by test, over the gates whose runs named their failing tests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tests: Option<TestDelta>,
}

/// Compares a candidate's outcomes with the baseline, command by command.
pub fn compare(candidate: &[CommandOutcome], baseline: &[CommandOutcome]) -> (Vec<GateResult>, GateSummary) {
    let mut results = Vec::with_capacity(candidate.len());
    let mut s = GateSummary { total: candidate.len(), ..Default::default() };
    for (i, outcome) in candidate.iter().enumerate() {
        let passed = outcome.passed();
        let base_passed = baseline.get(i).map(CommandOutcome::passed);
        // An unknown baseline is treated as failing: the command must pass now.
        let verdict = match (base_passed.unwrap_or(false), passed) {
            (true, true) => GateVerdict::KeptPassing,
            (true, false) => GateVerdict::Regressed,
            (false, true) => GateVerdict::Fixed,
            (false, false) => GateVerdict::StillFailing,
        };
        if passed {
            s.passed += 1;
        }
        match verdict {
            GateVerdict::KeptPassing => {
                s.base_passing += 1;
                s.kept_passing += 1;
            }
            GateVerdict::Regressed => {
                s.base_passing += 1;
                s.regressed += 1;
            }
            GateVerdict::Fixed => {
                s.base_failing += 1;
                s.fixed += 1;
            }
            GateVerdict::StillFailing => {
                s.base_failing += 1;
                s.still_failing += 1;
            }
        }
        let tests = match (baseline.get(i).and_then(|b| b.failed_tests.as_ref()), outcome.failed_tests.as_ref()) {
            (Some(base), Some(now)) => {
                let set = |v: &[String]| v.iter().cloned().collect::<std::collections::BTreeSet<String>>();
                Some(TestDelta::between(&set(base), &set(now)))
            }
            _ => None,
        };
        if let Some(t) = &tests {
            s.tests.get_or_insert_with(TestDelta::default).extend(t);
        }
        results.push(GateResult { outcome: outcome.clone(), passed, base_passed, verdict, tests });
    }
    s.all_passed = s.regressed == 0 && s.still_failing == 0;
    (results, s)
}

impl GateSummary {
    /// `kept 2/2 passing, fixed 1/1 failing` (a part with nothing to count is left out).
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.base_passing > 0 {
            parts.push(format!("kept {}/{} passing", self.kept_passing, self.base_passing));
        }
        if self.base_failing > 0 {
            parts.push(format!("fixed {}/{} failing", self.fixed, self.base_failing));
        }
        let commands = if parts.is_empty() { "no verify commands".to_string() } else { parts.join(", ") };
        match self.tests.as_ref().filter(|t| !t.is_empty()) {
            Some(t) => format!("{commands}; by test: {}", t.describe()),
            None => commands,
        }
    }
}

/// Keeps the last `max_lines` lines and at most `max_bytes` bytes of `text`.
pub fn tail(text: &str, max_lines: usize, max_bytes: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(max_lines);
    let mut out = lines[start..].join("\n");
    if out.len() > max_bytes {
        let mut cut = out.len() - max_bytes;
        while !out.is_char_boundary(cut) {
            cut += 1;
        }
        out = format!("…{}", &out[cut..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(cmd: &str, code: i32) -> CommandOutcome {
        CommandOutcome {
            command: cmd.into(),
            exit_code: Some(code),
            timed_out: false,
            duration_ms: 1,
            output_tail: String::new(),
            canary: None,
            failed_tests: None,
            test_reports: Vec::new(),
        }
    }

    #[test]
    fn fixing_without_regressing_passes() {
        let base = [run("lint", 0), run("test", 1)];
        let (r, s) = compare(&[run("lint", 0), run("test", 0)], &base);
        assert!(s.all_passed);
        assert_eq!((s.kept_passing, s.fixed), (1, 1));
        assert_eq!(r[1].verdict, GateVerdict::Fixed);
    }

    #[test]
    fn regression_fails_even_when_the_target_is_fixed() {
        let base = [run("lint", 0), run("test", 1)];
        let (_, s) = compare(&[run("lint", 2), run("test", 0)], &base);
        assert!(!s.all_passed);
        assert_eq!(s.regressed, 1);
        assert_eq!(s.describe(), "kept 0/1 passing, fixed 1/1 failing");
    }

    #[test]
    fn one_whole_suite_command_is_explained_test_by_test() {
        let names = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let mut base = run("python3 -m unittest -q", 1);
        base.failed_tests = names(&["t.CalcTest.test_add"]);
        let mut now = run("python3 -m unittest -q", 1);
        now.failed_tests = names(&["t.CalcTest.test_mul"]);
        let (r, s) = compare(&[now], &[base]);
        assert_eq!(r[0].verdict, GateVerdict::StillFailing);
        assert_eq!(
            s.describe(),
            "fixed 0/1 failing; by test: fixed 1 of 1 failing test (t.CalcTest.test_add), broke 1 passing test (t.CalcTest.test_mul)"
        );
    }

    #[test]
    fn timeouts_fail() {
        let mut o = run("test", 0);
        o.timed_out = true;
        let (_, s) = compare(&[o], &[run("test", 0)]);
        assert_eq!(s.regressed, 1);
    }

    #[test]
    fn tail_keeps_the_end() {
        assert_eq!(tail("a\nb\nc\n", 2, 100), "b\nc");
        assert_eq!(tail("abcdef", 10, 3), "…def");
    }
}
