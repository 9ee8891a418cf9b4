//! The run settings of a plan's task: the configuration of the repository it runs in, under
//! the plan's defaults, under the task's own values. The winner of a plan's task goes onto
//! the integration branch, never into a working tree.

use crate::plan::{PlanSpec, TaskSpec};
use crate::settings::{ConfigFile, RunOptions, RunSettings};

/// What a `plan run` says for every task, over the plan's defaults (the task's own values
/// still win). A Whilly file names no runner: these flags are how it runs as it is.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(default)]
pub struct RunOverrides {
    /// `--no-verify`: tasks without verify commands run, and their winners are committed
    /// unverified.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub no_verify: bool,
    /// `--runner`: comma-separated, assigned round-robin.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runner: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub candidates: Option<u32>,
    /// `--command`: the `command` runner's command.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strategy: Option<String>,
}

impl RunOverrides {
    /// Whether the run says nothing over the plan.
    pub fn is_empty(&self) -> bool {
        *self == RunOverrides::default()
    }
}

/// The run settings of one task: the repository's configuration under the plan's defaults,
/// under what the run says, under the task's own values; a plan's winner goes onto the
/// integration branch (`apply` is `none`).
pub fn task_settings(
    config: &ConfigFile,
    plan: &PlanSpec,
    task: &TaskSpec,
    run: &RunOverrides,
) -> Result<RunSettings, String> {
    let d = &plan.defaults;
    let verify = task.verify_with(d);
    let unverified = verify.is_empty() && (run.no_verify || d.no_verify == Some(true));
    let own = RunOptions {
        candidates: task.candidates,
        timeout_seconds: task.timeout_seconds,
        runner: (!task.runners.is_empty()).then(|| task.runners.join(",")),
        command: task.command.clone(),
        verify: (!verify.is_empty()).then_some(verify),
        unverified: unverified.then_some(true),
        apply: Some("none".into()),
        ..Default::default()
    };
    let said = RunOptions {
        candidates: run.candidates,
        timeout_seconds: run.timeout_seconds,
        runner: run.runner.clone(),
        command: run.command.clone(),
        backend: run.backend.clone(),
        strategy: run.strategy.clone(),
        ..Default::default()
    };
    let defaults = RunOptions {
        candidates: d.candidates,
        timeout_seconds: d.timeout_seconds,
        runner: (!d.runners.is_empty()).then(|| d.runners.join(",")),
        command: d.command.clone(),
        backend: d.backend.clone(),
        strategy: d.strategy.clone(),
        ..Default::default()
    };
    RunSettings::resolve(config, &[&own, &said, &defaults]).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::file::{Syntax, parse};

    #[test]
    fn the_run_s_flags_go_over_the_plan_s_defaults_and_under_the_task_s_own_values() {
        let config = ConfigFile::parse("[run]\ntimeout_seconds = 99\ncandidates = 7\n", "c").unwrap();
        let plan = parse(
            r#"{"id": "p", "name": "P", "defaults": {"candidates": 2, "command": "./plan.sh", "timeout_seconds": 50},
                "tasks": [{"id": "a", "title": "A", "verify": ["make a"]},
                          {"id": "b", "title": "B", "candidates": 5, "command": "./own.sh", "runners": ["command"], "verify": ["make b"]}]}"#,
            Syntax::Json,
        )
        .unwrap();
        let run = RunOverrides {
            runner: Some("command".into()),
            candidates: Some(3),
            command: Some("./run.sh".into()),
            timeout_seconds: Some(30),
            strategy: Some("escalate".into()),
            ..Default::default()
        };
        let a = task_settings(&config, &plan, &plan.tasks[0], &run).unwrap();
        assert_eq!((a.candidates.value, a.timeout_seconds.value), (3, 30));
        assert_eq!(a.command.value.as_deref(), Some("./run.sh"));
        assert_eq!(a.strategy.value.as_str(), "escalate");
        let b = task_settings(&config, &plan, &plan.tasks[1], &run).unwrap();
        assert_eq!((b.candidates.value, b.timeout_seconds.value), (5, 30));
        assert_eq!(b.command.value.as_deref(), Some("./own.sh"));
        let plain = task_settings(&config, &plan, &plan.tasks[0], &RunOverrides::default()).unwrap();
        assert_eq!((plain.candidates.value, plain.timeout_seconds.value), (2, 50));
        assert!(!run.is_empty() && RunOverrides::default().is_empty());
    }

    #[test]
    fn task_settings_layer_task_over_plan_over_config() {
        let config = ConfigFile::parse("[run]\ntimeout_seconds = 99\n", "c").unwrap();
        let plan = parse(
            r#"{"id": "p", "name": "P", "defaults": {"candidates": 2, "command": "./agent.sh", "verify": ["make test"]},
                "tasks": [{"id": "a", "title": "A", "candidates": 5, "verify": ["make a"]}]}"#,
            Syntax::Json,
        )
        .unwrap();
        let s = task_settings(&config, &plan, &plan.tasks[0], &RunOverrides::default()).unwrap();
        assert_eq!(s.candidates.value, 5);
        assert_eq!(s.timeout_seconds.value, 99);
        assert_eq!(s.verify.value, vec!["make test".to_string(), "make a".to_string()]);
        assert_eq!(s.apply.value, crate::settings::ApplyMode::None);
        let bad = PlanSpec { defaults: Default::default(), ..plan.clone() };
        assert!(
            task_settings(&ConfigFile::default(), &bad, &bad.tasks[0], &RunOverrides::default())
                .unwrap_err()
                .contains("--command")
        );
        // --no-verify applies only to tasks without verify commands of their own.
        let run = RunOverrides { no_verify: true, ..Default::default() };
        assert!(!task_settings(&config, &plan, &plan.tasks[0], &run).unwrap().unverified.value);
        let bare = PlanSpec {
            defaults: crate::plan::TaskDefaults { command: Some("./a.sh".into()), ..Default::default() },
            ..plan.clone()
        };
        let mut task = plan.tasks[0].clone();
        task.verify.clear();
        assert!(task_settings(&config, &bare, &task, &run).unwrap().unverified.value);
        assert!(task_settings(&config, &bare, &task, &RunOverrides::default()).unwrap().wants_detection());
    }
}
