//! The failure analysis of failed attempts: starting one, and feeding the last one to the
//! task's next attempt.

use std::sync::Arc;

use arbiter_core::plan::{PlanSpec, TaskSpec};

use super::{CoordinatorError, Held, LocalCoordinator};

impl LocalCoordinator {
    /// Analyses every failed attempt with `analyst`, in the background; the task's next
    /// attempt waits for the analysis (other work goes on) and its prompt carries it.
    pub fn with_analyst(mut self, analyst: Option<Arc<crate::failure_analysis::Analyst>>) -> Self {
        self.analyst = analyst;
        self
    }

    /// Waits for the failure analyses still running (before the process exits).
    pub async fn flush_analyses(&self) {
        if let Some(analyst) = &self.analyst {
            analyst.flush().await;
        }
    }

    /// Starts analysing a failed attempt whose tournament left run `run_id` (fails open: an
    /// analysis that cannot start is simply not made).
    pub(super) async fn analyse_failure(&self, held: &Held, run_id: &str, reason: &str) {
        let Some(analyst) = &self.analyst else { return };
        let Ok(workspace) = self.repositories.workspace_for(&held.plan).await else { return };
        let run_dir = workspace.runs_dir().join(run_id);
        if !run_dir.is_dir() {
            return;
        }
        analyst.start(crate::failure_analysis::Request {
            store: self.plans.clone(),
            clock: self.clock.clone(),
            run_dir,
            plan: held.plan.id.clone(),
            task: held.task.id.clone(),
            run_id: run_id.to_string(),
            failure: reason.to_string(),
        });
    }

    /// The task as its attempt sees it: for a retry, with the analysis of the previous
    /// failed attempt appended to its description (unless the plan turns that off) — the
    /// one piece of feedback that crosses attempts. Also the run it came from.
    pub(super) async fn with_feedback(
        &self,
        header: &PlanSpec,
        mut task: TaskSpec,
        attempt: u32,
    ) -> Result<(TaskSpec, Option<String>), CoordinatorError> {
        let wanted = header
            .defaults
            .analysis_feedback
            .unwrap_or_else(|| self.analyst.as_ref().is_none_or(|a| a.limits.feedback));
        if attempt <= 1 || !wanted {
            return Ok((task, None));
        }
        let previous = self
            .plans
            .attempts(&header.id)
            .await?
            .into_iter()
            .filter(|a| {
                a.task_id == task.id
                    && a.attempt < attempt
                    && a.status == arbiter_core::plan::state::AttemptStatus::Failed
            })
            .filter_map(|a| a.run_id.map(|r| (a.attempt, r)))
            .max();
        let Some((_, run_id)) = previous else { return Ok((task, None)) };
        let workspace = self.repositories.workspace_for(header).await?;
        let Some(found) = crate::failure_analysis::feedback_of(&workspace.runs_dir().join(&run_id)) else {
            return Ok((task, None));
        };
        task.description.push_str(&arbiter_core::intake::analysis::feedback_section(&found, &run_id));
        Ok((task, Some(run_id)))
    }
}
