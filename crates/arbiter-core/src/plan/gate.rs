//! The decision gate: before a plan is applied, each task's definition is judged by pure
//! rules (no model call), arbiter's or Whilly's ([`Rules`]).
//!
//! | | arbiter (default) | Whilly (`--gate whilly`) |
//! |---|---|---|
//! | description | ≥ 20 characters and ≥ 4 words, else REJECT | ≥ 20 characters, else REJECT |
//! | acceptance criterion (a manual check counts) | none: WARN | none: REJECT |
//! | verify command (Whilly: any test step) | none: WARN | none: REJECT |
//! | neither criterion nor verify command | REJECT | REJECT |
//! | verdicts | ALLOW, WARN, REJECT | ALLOW, REJECT |
//!
//! Every verdict names what is missing, every failing rule in a fixed order.

use serde::{Deserialize, Serialize};

use super::spec::{TaskDefaults, TaskSpec};

/// The gate's verdict on one task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "UPPERCASE")]
pub enum Verdict {
    Allow,
    Warn,
    Reject,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Allow => "ALLOW",
            Verdict::Warn => "WARN",
            Verdict::Reject => "REJECT",
        }
    }
}

/// The verdict and what is missing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct GateResult {
    pub task: String,
    pub verdict: Verdict,
    pub missing: Vec<String>,
    #[cfg_attr(feature = "arbitrary", proptest(strategy = "crate::arbitrary::text()"))]
    pub reason: String,
}

/// Whose decision rules judge a plan's tasks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "lowercase")]
pub enum Rules {
    /// Arbiter's: ALLOW, WARN when one way of telling the task is done is missing, REJECT
    /// without substance or without any way at all.
    #[default]
    Arbiter,
    /// Whilly's own (`whilly/core/gates.py`): ALLOW, or REJECT when any rule fails.
    Whilly,
}

impl Rules {
    pub const NAMES: &'static [&'static str] = &["arbiter", "whilly"];

    pub fn parse(name: &str) -> Option<Rules> {
        match name {
            "arbiter" => Some(Rules::Arbiter),
            "whilly" => Some(Rules::Whilly),
            _ => None,
        }
    }

    pub fn is_default(&self) -> bool {
        *self == Rules::Arbiter
    }

    /// Judges one task (its verify commands include the plan's defaults).
    pub fn evaluate(self, task: &TaskSpec, defaults: &TaskDefaults) -> GateResult {
        match self {
            Rules::Arbiter => evaluate(task, defaults),
            Rules::Whilly => evaluate_whilly(task, defaults),
        }
    }
}

/// Whilly's gate: the stripped description at least 20 characters, at least one
/// acceptance criterion, at least one test step (a verify command or a manual check); every
/// failing rule is named, by Whilly's labels, in that order.
pub fn evaluate_whilly(task: &TaskSpec, defaults: &TaskDefaults) -> GateResult {
    let mut missing = Vec::new();
    if task.description.trim().chars().count() < MIN_CHARS {
        missing.push("description".to_string());
    }
    if task.acceptance_criteria.is_empty() {
        missing.push("acceptance_criteria".to_string());
    }
    if task.verify_with(defaults).is_empty() && task.manual_checks.is_empty() {
        missing.push("test_steps".to_string());
    }
    let (verdict, reason) = if missing.is_empty() {
        (Verdict::Allow, "passes Whilly's decision gate".to_string())
    } else {
        (Verdict::Reject, format!("decision gate refused: missing {}", missing.join(", ")))
    };
    GateResult { task: task.id.clone(), verdict, missing, reason }
}

/// A description has substance with at least this many characters and words.
const MIN_CHARS: usize = 20;
const MIN_WORDS: usize = 4;

/// Judges one task (its verify commands include the plan's defaults).
pub fn evaluate(task: &TaskSpec, defaults: &TaskDefaults) -> GateResult {
    let description = task.description.trim();
    let substance = description.chars().count() >= MIN_CHARS && description.split_whitespace().count() >= MIN_WORDS;
    let criteria = task.acceptance_criteria.iter().chain(&task.manual_checks).any(|c| !c.trim().is_empty());
    let verify = task.verify_with(defaults).iter().any(|v| !v.trim().is_empty());
    let mut missing = Vec::new();
    if !substance {
        missing.push(format!("a description of substance (at least {MIN_CHARS} characters, {MIN_WORDS} words)"));
    }
    if !criteria {
        missing.push("an acceptance criterion".to_string());
    }
    if !verify {
        missing.push("a verify command".to_string());
    }
    let verdict = if !substance || (!criteria && !verify) {
        Verdict::Reject
    } else if !criteria || !verify {
        Verdict::Warn
    } else {
        Verdict::Allow
    };
    let reason = match verdict {
        Verdict::Allow => "defined well enough to run".to_string(),
        _ => format!("missing {}", missing.join(", ")),
    };
    GateResult { task: task.id.clone(), verdict, missing, reason }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::file::{Syntax, parse};

    fn task(json: &str) -> TaskSpec {
        parse(&format!(r#"{{"id": "p", "name": "P", "tasks": [{json}]}}"#), Syntax::Json).unwrap().tasks.remove(0)
    }

    #[test]
    fn verdicts_name_what_is_missing() {
        let full = task(
            r#"{"id": "a", "title": "A", "description": "Make add() return the sum of its arguments.",
                "acceptance_criteria": ["add(2, 3) == 5"], "verify": ["python3 -m unittest"]}"#,
        );
        assert_eq!(evaluate(&full, &TaskDefaults::default()).verdict, Verdict::Allow);
        let no_verify = TaskSpec { verify: vec![], ..full.clone() };
        let r = evaluate(&no_verify, &TaskDefaults::default());
        assert_eq!((r.verdict, r.missing.clone()), (Verdict::Warn, vec!["a verify command".to_string()]));
        let with_default = TaskDefaults { verify: vec!["make test".into()], ..Default::default() };
        assert_eq!(evaluate(&no_verify, &with_default).verdict, Verdict::Allow, "the plan's verify commands count");
        let nothing = TaskSpec { acceptance_criteria: vec![], ..no_verify.clone() };
        assert_eq!(evaluate(&nothing, &TaskDefaults::default()).verdict, Verdict::Reject);
        let thin = TaskSpec { description: "fix it".into(), ..full };
        let r = evaluate(&thin, &TaskDefaults::default());
        assert_eq!(r.verdict, Verdict::Reject);
        assert!(r.reason.contains("a description of substance"), "{}", r.reason);
    }

    /// The two gates side by side, case by case (the table in the module docs).
    #[test]
    fn arbiter_s_gate_and_whilly_s_compared() {
        let long = "Make add() return the sum of its two arguments.";
        let cases: &[(&str, &str, bool, bool, Verdict, Verdict)] = &[
            // (case, description, criterion, test step, arbiter, whilly)
            ("everything", long, true, true, Verdict::Allow, Verdict::Allow),
            ("no test step", long, true, false, Verdict::Warn, Verdict::Reject),
            ("no criterion", long, false, true, Verdict::Warn, Verdict::Reject),
            ("neither", long, false, false, Verdict::Reject, Verdict::Reject),
            ("short", "fix it", true, true, Verdict::Reject, Verdict::Reject),
            ("20 characters, 3 words", "Refactoring parsers entirely", true, true, Verdict::Reject, Verdict::Allow),
        ];
        for (case, description, criterion, step, arbiter, whilly) in cases {
            let t = TaskSpec {
                id: "t".into(),
                title: "T".into(),
                description: description.to_string(),
                acceptance_criteria: if *criterion { vec!["it works".into()] } else { vec![] },
                verify: if *step { vec!["make test".into()] } else { vec![] },
                ..TaskSpec::default()
            };
            let d = TaskDefaults::default();
            assert_eq!(Rules::Arbiter.evaluate(&t, &d).verdict, *arbiter, "arbiter, {case}");
            assert_eq!(Rules::Whilly.evaluate(&t, &d).verdict, *whilly, "whilly, {case}");
        }
        let bare = TaskSpec { id: "t".into(), title: "T".into(), ..TaskSpec::default() };
        let r = Rules::Whilly.evaluate(&bare, &TaskDefaults::default());
        assert_eq!(r.missing, vec!["description", "acceptance_criteria", "test_steps"]);
        assert_eq!(r.reason, "decision gate refused: missing description, acceptance_criteria, test_steps");
        // A sentence test step is a test step to Whilly, and a criterion to arbiter.
        let prose = TaskSpec { description: long.into(), manual_checks: vec!["Looks right".into()], ..bare };
        assert_eq!(Rules::Whilly.evaluate(&prose, &TaskDefaults::default()).missing, vec!["acceptance_criteria"]);
        assert_eq!(Rules::Arbiter.evaluate(&prose, &TaskDefaults::default()).missing, vec!["a verify command"]);
    }
}
