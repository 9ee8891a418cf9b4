//! The repair loop's pure half: what a candidate's agent is told when its gates fail, and
//! the record of each round (`candidates/<id>/repair/round-<n>.json`).
//!
//! After the agent ends, the gates (verify commands, and the rules gate when it is on) run
//! in the candidate's tree as the agent left it; every failure — a rule violation as
//! `path:line message`, a failing command with the tests it named and the end of its
//! output — goes back to the same agent, up to `repair_rounds` times. The rounds are
//! advisory: the gates that decide eligibility run afterwards, as for any candidate.

use serde::{Deserialize, Serialize};

use crate::gate::CommandOutcome;

/// The label of the rules gate among a candidate's gate outcomes.
pub const RULES_GATE: &str = "arbiter rules check";

/// One gate as a repair round saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoundGate {
    pub gate: String,
    pub passed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_tests: Option<Vec<String>>,
    /// The end of its output (rule violations, one per line, for the rules gate).
    pub output_tail: String,
}

/// `candidates/<id>/repair/round-<n>.json`: the gates one round ran, and the feedback the
/// agent got (none when every gate passed, which ends the loop).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepairRound {
    pub schema_version: u32,
    /// From 1.
    pub round: u32,
    /// The most rounds the candidate may have (`repair_rounds`).
    pub of: u32,
    pub gates: Vec<RoundGate>,
    /// What the agent was told; `None` when every gate passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<String>,
}

impl RepairRound {
    /// The round's record from the gate runs.
    pub fn from_outcomes(round: u32, of: u32, outcomes: &[CommandOutcome]) -> RepairRound {
        let gates: Vec<RoundGate> = outcomes
            .iter()
            .map(|o| RoundGate {
                gate: o.command.clone(),
                passed: o.passed(),
                exit_code: o.exit_code,
                failed_tests: o.failed_tests.clone(),
                output_tail: o.output_tail.clone(),
            })
            .collect();
        let failing: Vec<&CommandOutcome> = outcomes.iter().filter(|o| !o.passed()).collect();
        let feedback = (!failing.is_empty()).then(|| feedback(&failing));
        RepairRound { schema_version: crate::SCHEMA_VERSION, round, of, gates, feedback }
    }

    /// The gates that failed, by name.
    pub fn failing(&self) -> Vec<String> {
        self.gates.iter().filter(|g| !g.passed).map(|g| g.gate.clone()).collect()
    }
}

/// The failures, as the agent reads them.
pub fn feedback(failing: &[&CommandOutcome]) -> String {
    let mut out = String::new();
    for o in failing {
        if o.command == RULES_GATE {
            let count = o.output_tail.lines().filter(|l| !l.trim().is_empty()).count();
            out.push_str(&format!("### Rule violations ({count})\n\n```\n{}\n```\n\n", o.output_tail.trim_end()));
            continue;
        }
        let how = if o.timed_out {
            "timed out".to_string()
        } else {
            match o.exit_code {
                Some(code) => format!("exit {code}"),
                None => "did not finish".to_string(),
            }
        };
        out.push_str(&format!("### `{}` failed ({how})\n\n", o.command));
        if let Some(tests) = o.failed_tests.as_ref().filter(|t| !t.is_empty()) {
            out.push_str(&format!("Failing tests: {}\n\n", tests.join(", ")));
        }
        out.push_str(&format!("```\n{}\n```\n\n", o.output_tail.trim_end()));
    }
    out.trim_end().to_string()
}

/// The prompt of repair round `round` (of `of`): the task as first given, then the failures.
pub fn repair_prompt(task_prompt: &str, feedback: &str, round: u32, of: u32) -> String {
    format!(
        "{}\n\n## Gate failures (repair round {round} of {of})\n\n\
         Your work is in this checkout as you left it. arbiter ran the checks on it and these failed. \
         Fix every one of them in the code (do not weaken, skip or delete the checks or the tests), \
         then stop.\n\n{feedback}\n",
        task_prompt.trim_end()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(command: &str, code: i32, tail: &str) -> CommandOutcome {
        CommandOutcome {
            command: command.into(),
            exit_code: Some(code),
            timed_out: false,
            duration_ms: 1,
            output_tail: tail.into(),
            canary: None,
            failed_tests: (code != 0 && command != RULES_GATE).then(|| vec!["test_total".to_string()]),
            test_reports: Vec::new(),
        }
    }

    #[test]
    fn failures_become_feedback_and_a_clean_round_has_none() {
        let outcomes = vec![
            outcome("python3 -m unittest", 1, "FAIL: test_total\nAssertionError: 3 != 5"),
            outcome(RULES_GATE, 1, "f/Handler.py:2 comments not allowed\n"),
            outcome("make lint", 0, "ok"),
        ];
        let round = RepairRound::from_outcomes(1, 3, &outcomes);
        assert_eq!(round.failing(), vec!["python3 -m unittest".to_string(), RULES_GATE.to_string()]);
        let fb = round.feedback.expect("feedback");
        assert!(fb.contains("### `python3 -m unittest` failed (exit 1)"), "{fb}");
        assert!(fb.contains("Failing tests: test_total"), "{fb}");
        assert!(fb.contains("AssertionError: 3 != 5"), "{fb}");
        assert!(fb.contains("### Rule violations (1)\n\n```\nf/Handler.py:2 comments not allowed\n```"), "{fb}");
        assert!(!fb.contains("make lint"), "{fb}");
        let prompt = repair_prompt("Implement Invoice.", &fb, 1, 3);
        assert!(prompt.starts_with("Implement Invoice.\n\n## Gate failures (repair round 1 of 3)"), "{prompt}");

        let clean = RepairRound::from_outcomes(2, 3, &[outcome("make lint", 0, "ok")]);
        assert_eq!(clean.feedback, None);
        assert!(clean.failing().is_empty());
    }
}
