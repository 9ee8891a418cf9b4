//! `feature do`: the slice implemented by arbiter's tournament. [`prepare_do`] gets onto the
//! slice's branch (clean tree), makes sure the slice is registered (committed there), and
//! says what the tournament works on and how its tests run; the caller runs the tournament
//! (the rules gate, the slice's tests and the verify commands as gates, a repair loop per
//! candidate) with the winner applied to the working tree; [`finish_do`] commits it as
//! `feat: <Name>` and pushes when the repository has the remote. Without a winner nothing is
//! applied and the branch stays as it was.

use serde::Serialize;

use super::{BranchMove, Workspace};
use crate::layout;
use crate::names::Slice;
use crate::{Result, SliceError, spec};

/// What the tournament of a slice is made of.
#[derive(Clone, Debug, Serialize)]
pub struct DoPlan {
    pub slice: Slice,
    pub branch: String,
    pub branch_move: BranchMove,
    /// The task every candidate gets (the spec inlined).
    pub task: String,
    /// The slice's test command, a gate.
    pub test_command: String,
    /// The registration committed before the tournament (when the slice was not registered).
    pub registered: Option<String>,
}

/// What happened after the tournament's winner was applied.
#[derive(Clone, Debug, Serialize)]
pub struct DoFinished {
    pub commit: Option<String>,
    pub files: Vec<String>,
    /// `None`: not pushed (no remote, `--no-push`, `[slices] push = false`).
    pub pushed: Option<bool>,
    pub push_error: Option<String>,
}

pub async fn prepare_do(ws: &Workspace, target: Option<&str>) -> Result<DoPlan> {
    let spec_t = ws.named_or_current(target, "do").await?;
    let (mut project, slice, moved) = ws.locate_and_enter(&spec_t, "implementing the slice").await?;
    let spec_path = ws.root().join(&slice.dir).join("spec.md");
    let spec_text = std::fs::read_to_string(&spec_path).map_err(|_| {
        SliceError::refused(format!(
            "{}/spec.md is missing: a slice is implemented from its spec; write one, or create the slice with `arbiter feature new`",
            slice.dir
        ))
    })?;
    let target = Workspace::target_of(&project, &slice);
    let mut registered = None;
    if let Some(file) = project.register(&target) {
        layout::save(ws.root(), &project, std::slice::from_ref(&file))?;
        registered = ws.repo.commit(&[file], &format!("register: {}", slice.branch())).await?;
    }
    ws.repo.require_clean("running the slice's tournament").await?;
    let settings = &ws.repo.settings;
    Ok(DoPlan {
        task: spec::implement_task(&slice.name, &slice.dir, &settings.tests_file, &spec_text),
        test_command: settings.test_command_for(&slice.dir),
        branch: slice.branch(),
        branch_move: moved,
        slice,
        registered,
    })
}

/// Commits the applied winner as `feat: <Name>` on the slice's branch and pushes it when the
/// remote exists (unless `no_push`).
pub async fn finish_do(ws: &Workspace, plan: &DoPlan, no_push: bool) -> Result<DoFinished> {
    let files = ws.repo.dirty().await?;
    let commit =
        if files.is_empty() { None } else { ws.repo.commit(&files, &format!("feat: {}", plan.slice.name)).await? };
    let mut finished = DoFinished { commit, files, pushed: None, push_error: None };
    if !no_push && ws.repo.settings.push && ws.repo.has_remote().await? {
        let remote = ws.repo.settings.remote.clone();
        match ws.repo.push(&["-u", remote.as_str(), plan.branch.as_str()]).await {
            Ok(()) => finished.pushed = Some(true),
            Err(e) => {
                finished.pushed = Some(false);
                finished.push_error = Some(e);
            }
        }
    }
    Ok(finished)
}
