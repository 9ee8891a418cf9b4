//! What follows a winner: pushing the plan's integration branch, and, once nothing of the
//! plan can run any more, what a finished plan does.

use arbiter_core::plan::PlanSpec;

use super::LocalCoordinator;
use crate::git::Git;

impl LocalCoordinator {
    /// Starts pushing the plan's integration branch after `task`'s winner, when the plan
    /// says `push = true`.
    pub(super) fn push_after(&self, header: &PlanSpec, repo: Git, task: &str) {
        if header.push {
            let (plans, clock) = (self.plans.clone(), self.clock.clone());
            self.pushes.start(plans, clock, repo, &header.id, &header.integration_branch, task);
        }
    }

    /// When nothing of `header`'s plan can run any more (no task ready or running), what a
    /// finished plan does, after its pushes: a plan with `push = true` proposes its branch, a
    /// plan from an issue tells the issue ([`crate::publish::complete_plan`]).
    pub(super) async fn complete_if_settled(&self, header: &PlanSpec) {
        if !header.push && header.source.is_none() {
            return;
        }
        match self.plans.claimable_plans().await {
            Ok(open) if !open.contains(&header.id) => {}
            _ => return,
        }
        let Ok(workspace) = self.repositories.workspace_for(header).await else { return };
        let (plans, id) = (self.plans.clone(), header.id.clone());
        self.pushes.after_pushes(async move {
            let config = std::fs::read_to_string(workspace.config_path())
                .ok()
                .and_then(|text| arbiter_core::settings::ConfigFile::parse(&text, "config.toml").ok())
                .unwrap_or_default();
            let repo = Git::new(workspace.repo_root().to_path_buf());
            let (runs_dir, offline_dir) = (workspace.runs_dir(), workspace.dir().join("pr").join(format!("plan-{id}")));
            let store: &dyn arbiter_store::plans::PlanStore = &*plans;
            let place =
                crate::publish::PlanPlace { store, repo: &repo, runs_dir: &runs_dir, offline_dir: &offline_dir };
            crate::publish::complete_plan(&place, &config, &id).await;
        });
    }

    /// Waits for the pushes of integration branches still going (before the process exits).
    pub async fn flush_pushes(&self) {
        self.pushes.flush().await;
    }
}
