//! The plan as written: its repository, base, integration branch, budget, the defaults its
//! tasks inherit, and the tasks. [`export`] writes the canonical form: byte-stable, and read
//! back by [`crate::plan::file::parse`] to the same spec.

use serde::{Deserialize, Serialize};

use crate::money::Usd;

/// How urgent a task is; claims take the most urgent ready task first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    Critical,
    High,
    #[default]
    Medium,
    Low,
}

impl Priority {
    pub const NAMES: &'static [&'static str] = &["critical", "high", "medium", "low"];

    /// Case-insensitive, as Whilly files write them in any case.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "critical" => Self::Critical,
            "high" => Self::High,
            "medium" => Self::Medium,
            "low" => Self::Low,
            _ => return None,
        })
    }

    /// 0 for critical … 3 for low: the claim order.
    pub fn rank(self) -> i64 {
        self as i64
    }

    pub fn from_rank(rank: i64) -> Self {
        match rank {
            0 => Self::Critical,
            1 => Self::High,
            2 => Self::Medium,
            _ => Self::Low,
        }
    }

    pub fn as_str(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

/// What tasks inherit unless they say otherwise.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct TaskDefaults {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidates: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runners: Vec<String>,
    /// The `command` runner's command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Backend(s) of model-driven runners, comma-separated for round-robin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// Verify commands every task runs as gates (before its own).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verify: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// What one attempt may spend; a claim reserves it from the plan's budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt_budget_usd: Option<Usd>,
    /// The first retry waits this long; each further retry waits twice as long.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_backoff_seconds: Option<u64>,
    /// `tournament`, `escalate`, `cheap`, `balanced` or `quality`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<String>,
    /// Tasks without verify commands (none given, none found in the repository) run and
    /// their winners are committed unverified, as `plan run --no-verify` does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_verify: Option<bool>,
    /// Whether a retried task's prompt carries the analysis of its failed attempt (when an
    /// `analysis` backend wrote one); default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analysis_feedback: Option<bool>,
}

/// How a task was marked in the file it came from (Whilly files carry a status).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "lowercase")]
pub enum ImportedStatus {
    Done,
    Skipped,
}

/// One task of a plan (the default: a task that overrides none of the plan's defaults).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct TaskSpec {
    pub id: String,
    #[cfg_attr(feature = "arbitrary", proptest(strategy = "crate::arbitrary::text()"))]
    pub title: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[cfg_attr(feature = "arbitrary", proptest(strategy = "crate::arbitrary::text()"))]
    pub description: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acceptance_criteria: Vec<String>,
    /// Run as gates, not only shown to the agent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verify: Vec<String>,
    /// Checks written as sentences (a Whilly test step that is no command): shown to the
    /// agents and the judges with the acceptance criteria, never run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub manual_checks: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<String>,
    /// Files (or directories) the task works on: tasks whose key files overlap never run
    /// at once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub key_files: Vec<String>,
    #[serde(default)]
    pub priority: Priority,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidates: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runners: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt_budget_usd: Option<Usd>,
    /// The requirement it implements (Whilly's `prd_requirement`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requirement: Option<String>,
    /// A status the source file gave it (honoured when the task is first imported; never
    /// exported).
    #[serde(default, skip_serializing)]
    // Never sent (the file format and the wire have no field for it: an import carries it
    // beside the plan), so never generated.
    #[cfg_attr(feature = "arbitrary", proptest(value = "None"))]
    pub imported_status: Option<ImportedStatus>,
}

/// A whole plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct PlanSpec {
    pub id: String,
    pub name: String,
    /// A path (absolute once imported) or a git URL; `None`: the repository holding the
    /// store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
    pub base_ref: String,
    pub integration_branch: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_usd: Option<Usd>,
    /// Push the integration branch to the repository's `origin` after every winner is
    /// committed onto it (never forced: a remote branch that moved elsewhere is left as it is).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub push: bool,
    /// Where the plan came from, when it came from somewhere arbiter tracks: the URL of the
    /// issue it was planned from (`arbiter intake`). The store keeps one plan per source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The product requirements document the plan was decomposed from (a path in the
    /// repository: `docs/PRD-<slug>.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prd: Option<String>,
    #[serde(default, skip_serializing_if = "is_default")]
    pub defaults: TaskDefaults,
    pub tasks: Vec<TaskSpec>,
}

fn is_default(d: &TaskDefaults) -> bool {
    d == &TaskDefaults::default()
}

/// Defaults a task falls back on when neither it nor the plan says.
pub mod fallback {
    pub const MAX_ATTEMPTS: u32 = 2;
    pub const RETRY_BACKOFF_SECONDS: u64 = 5;
    /// The longest a retry waits.
    pub const MAX_BACKOFF_SECONDS: u64 = 300;
    /// What an attempt reserves from a plan budget when nothing says otherwise.
    pub const ATTEMPT_BUDGET_USD: &str = "1";
}

impl TaskDefaults {
    /// The first retry's wait, in seconds.
    pub fn retry_backoff(&self) -> u64 {
        self.retry_backoff_seconds.unwrap_or(fallback::RETRY_BACKOFF_SECONDS)
    }
}

impl PlanSpec {
    /// `arbiter/<plan-id>`.
    pub fn default_branch(id: &str) -> String {
        format!("arbiter/{id}")
    }

    pub fn task(&self, id: &str) -> Option<&TaskSpec> {
        self.tasks.iter().find(|t| t.id == id)
    }

    /// The plan-level fields without the tasks (stored once per plan).
    pub fn header(&self) -> PlanSpec {
        PlanSpec { tasks: Vec::new(), ..self.clone() }
    }
}

impl TaskSpec {
    /// The task's verify commands: the plan's defaults, then its own, each once.
    pub fn verify_with(&self, defaults: &TaskDefaults) -> Vec<String> {
        let mut all: Vec<String> = Vec::new();
        for v in defaults.verify.iter().chain(&self.verify) {
            if !all.contains(v) {
                all.push(v.clone());
            }
        }
        all
    }

    pub fn max_attempts_with(&self, defaults: &TaskDefaults) -> u32 {
        self.max_attempts.or(defaults.max_attempts).unwrap_or(fallback::MAX_ATTEMPTS).max(1)
    }

    /// What one attempt reserves from the plan's budget.
    pub fn attempt_budget_with(&self, defaults: &TaskDefaults) -> Usd {
        self.attempt_budget_usd
            .or(defaults.attempt_budget_usd)
            .or_else(|| Usd::parse(fallback::ATTEMPT_BUDGET_USD))
            .unwrap_or_default()
    }

    /// The prompt of its tournament: title, description, and what done means.
    pub fn prompt(&self, plan: &PlanSpec) -> String {
        let mut p = format!("{}\n", self.title.trim());
        if !self.description.trim().is_empty() {
            p.push('\n');
            p.push_str(self.description.trim());
            p.push('\n');
        }
        if !self.key_files.is_empty() {
            p.push_str(&format!("\nFiles this task is about: {}\n", self.key_files.join(", ")));
        }
        p.push_str(&format!("\n(Task {} of plan {}: {})\n", self.id, plan.id, plan.name));
        p
    }

    /// The success criteria of its tournament: the acceptance criteria and the checks
    /// written as sentences, one per line.
    pub fn success_criteria(&self) -> Option<String> {
        let lines: Vec<String> = self
            .acceptance_criteria
            .iter()
            .map(|c| format!("- {c}"))
            .chain(self.manual_checks.iter().map(|c| format!("- {c} (a check to meet; no command runs it)")))
            .collect();
        (!lines.is_empty()).then(|| lines.join("\n"))
    }

    /// A copy without what only matters the first time (for comparing re-imports).
    pub fn definition(&self) -> TaskSpec {
        TaskSpec { imported_status: None, ..self.clone() }
    }
}

/// The canonical JSON form: fields in a fixed order, empty ones left out, tasks in plan
/// order, two-space indent, a final newline. Byte-stable for the same spec.
pub fn export(spec: &PlanSpec) -> String {
    let mut text = serde_json::to_string_pretty(spec).unwrap_or_else(|_| "{}".into());
    text.push('\n');
    text
}

/// Retry backoff: `base × 2^(attempt-1)` seconds after the `attempt`-th failure, capped.
pub fn backoff_seconds(base: u64, attempt: u32) -> u64 {
    let factor = 1u64.checked_shl(attempt.saturating_sub(1)).unwrap_or(u64::MAX);
    base.saturating_mul(factor).min(fallback::MAX_BACKOFF_SECONDS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priorities_order_and_parse_in_any_case() {
        assert!(Priority::Critical < Priority::Low);
        assert_eq!(Priority::parse("HIGH"), Some(Priority::High));
        assert_eq!(Priority::parse("urgent"), None);
        for p in [Priority::Critical, Priority::High, Priority::Medium, Priority::Low] {
            assert_eq!(Priority::from_rank(p.rank()), p);
            assert_eq!(Priority::parse(p.as_str()), Some(p));
        }
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        assert_eq!(backoff_seconds(5, 1), 5);
        assert_eq!(backoff_seconds(5, 3), 20);
        assert_eq!(backoff_seconds(5, 40), fallback::MAX_BACKOFF_SECONDS);
        assert_eq!(backoff_seconds(0, 3), 0);
    }

    #[test]
    fn verify_commands_combine_defaults_first_without_repeats() {
        let task = TaskSpec {
            id: "a".into(),
            title: "A".into(),
            description: String::new(),
            acceptance_criteria: vec![],
            verify: vec!["make lint".into(), "make test".into()],
            manual_checks: vec![],
            dependencies: vec![],
            key_files: vec![],
            priority: Priority::Medium,
            candidates: None,
            runners: vec![],
            command: None,
            timeout_seconds: None,
            max_attempts: None,
            attempt_budget_usd: None,
            requirement: None,
            imported_status: None,
        };
        let defaults = TaskDefaults { verify: vec!["make test".into()], ..Default::default() };
        assert_eq!(task.verify_with(&defaults), vec!["make test".to_string(), "make lint".to_string()]);
        assert_eq!(task.max_attempts_with(&defaults), fallback::MAX_ATTEMPTS);
        assert_eq!(task.attempt_budget_with(&defaults), Usd::parse("1").unwrap());
    }
}
