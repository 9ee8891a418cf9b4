//! The run settings of a plan's task: the configuration of the repository it runs in, under
//! the plan's defaults, under the task's own values. The winner of a plan's task goes onto
//! the integration branch, never into a working tree.

use crate::plan::{PlanSpec, TaskSpec};
use crate::settings::{ConfigFile, FlagOverrides, RunSettings};

/// The run settings of one task: the repository's configuration under the plan's defaults
/// and the task's own values.
pub fn task_settings(config: &ConfigFile, plan: &PlanSpec, task: &TaskSpec) -> Result<RunSettings, String> {
    let d = &plan.defaults;
    let runners = if task.runners.is_empty() { &d.runners } else { &task.runners };
    let flags = FlagOverrides {
        candidates: task.candidates.or(d.candidates),
        timeout_seconds: task.timeout_seconds.or(d.timeout_seconds),
        verify: task.verify_with(d),
        runner: (!runners.is_empty()).then(|| runners.join(",")),
        command: task.command.clone().or_else(|| d.command.clone()),
        backend: d.backend.clone(),
        apply: Some("none".into()),
        strategy: d.strategy.clone(),
        ..Default::default()
    };
    let settings = RunSettings::resolve(config, flags).map_err(|e| e.to_string())?;
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::file::{Syntax, parse};

    #[test]
    fn task_settings_layer_task_over_plan_over_config() {
        let config = ConfigFile::parse("[run]\ntimeout_seconds = 99\n", "c").unwrap();
        let plan = parse(
            r#"{"id": "p", "name": "P", "defaults": {"candidates": 2, "command": "./agent.sh", "verify": ["make test"]},
                "tasks": [{"id": "a", "title": "A", "candidates": 5, "verify": ["make a"]}]}"#,
            Syntax::Json,
        )
        .unwrap();
        let s = task_settings(&config, &plan, &plan.tasks[0]).unwrap();
        assert_eq!(s.candidates.value, 5);
        assert_eq!(s.timeout_seconds.value, 99);
        assert_eq!(s.verify.value, vec!["make test".to_string(), "make a".to_string()]);
        assert_eq!(s.apply.value, crate::settings::ApplyMode::None);
        let bad = PlanSpec { defaults: Default::default(), ..plan.clone() };
        assert!(task_settings(&ConfigFile::default(), &bad, &bad.tasks[0]).unwrap_err().contains("--command"));
    }
}
