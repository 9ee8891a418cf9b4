//! The decision gate: before a plan is applied, each task's definition is judged by pure
//! rules (no model call): a description of substance, at least one acceptance criterion,
//! at least one verify command. ALLOW when all hold; WARN when one way of telling the task
//! is done is missing; REJECT when there is no substance or no way at all to tell it is
//! done. Every verdict names what is missing.

use serde::{Deserialize, Serialize};

use super::spec::{TaskDefaults, TaskSpec};

/// The gate's verdict on one task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
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
pub struct GateResult {
    pub task: String,
    pub verdict: Verdict,
    pub missing: Vec<String>,
    pub reason: String,
}

/// A description has substance with at least this many characters and words.
const MIN_CHARS: usize = 20;
const MIN_WORDS: usize = 4;

/// Judges one task (its verify commands include the plan's defaults).
pub fn evaluate(task: &TaskSpec, defaults: &TaskDefaults) -> GateResult {
    let description = task.description.trim();
    let substance = description.chars().count() >= MIN_CHARS && description.split_whitespace().count() >= MIN_WORDS;
    let criteria = task.acceptance_criteria.iter().any(|c| !c.trim().is_empty());
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
}
