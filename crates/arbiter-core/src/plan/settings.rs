//! The run settings of a plan's task: the configuration of the repository it runs in, under
//! the plan's defaults, under the task's own values. The winner of a plan's task goes onto
//! the integration branch, never into a working tree.

use crate::plan::{PlanSpec, TaskSpec};
use crate::settings::{ConfigFile, FlagOverrides, RunSettings};

/// What a `plan run` says for every task, over the plan's defaults (the task's own values
/// still win).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunOverrides {
    /// `--no-verify`: tasks without verify commands run, and their winners are committed
    /// unverified.
    pub no_verify: bool,
}

/// The run settings of one task: the repository's configuration under the plan's defaults
/// (under what the run says) and the task's own values.
pub fn task_settings(
    config: &ConfigFile,
    plan: &PlanSpec,
    task: &TaskSpec,
    run: &RunOverrides,
) -> Result<RunSettings, String> {
    let d = &plan.defaults;
    let verify = task.verify_with(d);
    let no_verify = verify.is_empty() && (run.no_verify || d.no_verify == Some(true));
    let runners = if task.runners.is_empty() { &d.runners } else { &task.runners };
    let flags = FlagOverrides {
        candidates: task.candidates.or(d.candidates),
        timeout_seconds: task.timeout_seconds.or(d.timeout_seconds),
        verify,
        no_verify,
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
        let run = RunOverrides { no_verify: true };
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
