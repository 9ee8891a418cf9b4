//! The task of a run and the clean prompt every candidate receives.
//!
//! The prompt holds the task, the success criteria and the verify commands, and nothing
//! about other candidates, reviews or earlier attempts: candidates stay independent.

use serde::{Deserialize, Serialize};

/// What a run is asked to do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct Task {
    pub prompt: String,
    pub success_criteria: Option<String>,
    pub verify: Vec<String>,
}

/// Why a task cannot run.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TaskError {
    #[error("the task is empty: describe the work with --task TEXT or --task-file FILE")]
    Empty,
}

impl Task {
    pub fn new(prompt: String, success_criteria: Option<String>, verify: Vec<String>) -> Result<Self, TaskError> {
        if prompt.trim().is_empty() {
            return Err(TaskError::Empty);
        }
        let success_criteria = success_criteria.filter(|c| !c.trim().is_empty());
        Ok(Task { prompt, success_criteria, verify })
    }

    /// The first line of the task, shortened for tables.
    pub fn title(&self) -> String {
        let first = self.prompt.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
        shorten(first, 72)
    }

    /// The prompt file given to every candidate.
    pub fn candidate_prompt(&self) -> String {
        let mut out = String::new();
        out.push_str("# Task\n\n");
        out.push_str(self.prompt.trim_end());
        out.push_str("\n\n# Success criteria\n\n");
        match &self.success_criteria {
            Some(c) => out.push_str(c.trim_end()),
            None => out.push_str("Complete the task with a minimal, correct change."),
        }
        out.push('\n');
        if !self.verify.is_empty() {
            out.push_str(
                "\n# Verification\n\nYour work will be checked by running these commands in the repository root:\n\n",
            );
            for v in &self.verify {
                out.push_str("    ");
                out.push_str(v);
                out.push('\n');
            }
        }
        out.push_str("\nWork in the current directory. Leave your changes in the working tree.\n");
        out
    }
}

/// Cuts `s` to at most `max` characters, marking the cut with `…`.
pub fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_is_clean_pass_through() {
        let t = Task::new("Fix calc".into(), Some("Tests pass".into()), vec!["make test".into()]).unwrap();
        let p = t.candidate_prompt();
        assert!(p.contains("Fix calc") && p.contains("Tests pass") && p.contains("make test"));
        for word in ["candidate", "review", "previous attempt", "other"] {
            assert!(!p.to_lowercase().contains(word), "{word} leaked into {p}");
        }
    }

    #[test]
    fn empty_task_is_refused() {
        assert_eq!(Task::new("  \n".into(), None, vec![]), Err(TaskError::Empty));
    }

    #[test]
    fn titles_are_short() {
        let t = Task::new(format!("\n{}", "x".repeat(100)), None, vec![]).unwrap();
        assert_eq!(t.title().chars().count(), 72);
    }
}
