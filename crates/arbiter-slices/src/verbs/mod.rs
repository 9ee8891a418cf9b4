//! The slice verbs, one module each, and what they share: the repository, its registry,
//! name resolution that answers instead of asking, and getting onto a slice's branch.
//!
//! Every verb returns what it did (a serializable outcome) or a [`SliceError`] whose kind is
//! the exit code; none prints. Verbs that change a branch check the working tree first.

mod amend;
mod create;
mod discard;
mod implement;
mod inspect;
mod integrate;
mod qa;
mod rename;

pub use amend::{ModifyOutcome, ModifyRequest, modify};
pub use create::{NewOutcome, NewRequest, SpecSource, new_slice};
pub use discard::{DeleteOutcome, UndoOutcome, delete, undo};
pub use implement::{DoFinished, DoPlan, finish_do, prepare_do};
pub use inspect::{BranchRow, ScanOutcome, ScanRow, StatusOutcome, scan, status};
pub use integrate::{MergeOutcome, merge};
pub use qa::{QaOutcome, QaRow, TestRun, qa, run_tests};
pub use rename::{MoveOutcome, move_slice};

use std::path::Path;

use arbiter_core::rules::RuleOptions;

use crate::layout;
use crate::names::{Resolution, Slice, TargetSpec, resolve, target_from_branch};
use crate::registry::{Project, Target};
use crate::repo::Repo;
use crate::{Result, SliceError};

/// The repository the verbs work on, and how.
pub struct Workspace {
    pub repo: Repo,
    pub rule_options: RuleOptions,
}

/// How a verb got onto a slice's branch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BranchMove {
    Stayed,
    Switched,
    Created,
}

impl Workspace {
    pub fn root(&self) -> &Path {
        &self.repo.root
    }

    pub fn project(&self) -> Result<Project> {
        layout::load_project(self.root())
    }

    /// The slice's target (where its registry entry lives).
    pub fn target_of(project: &Project, slice: &Slice) -> Target {
        Target {
            domain: slice.domain.clone(),
            name: slice.name.clone(),
            dir: slice.dir.clone(),
            config: project.config_for_domain(&slice.domain),
        }
    }

    /// The target named on the command line, else the one the current branch names.
    pub async fn named_or_current(&self, given: Option<&str>, verb: &str) -> Result<TargetSpec> {
        if let Some(g) = given {
            return TargetSpec::parse(g).map_err(SliceError::refused);
        }
        let default = self.repo.default_branch().await?;
        let current = self.repo.current_branch().await?.unwrap_or_default();
        target_from_branch(&current, &default).ok_or_else(|| {
            SliceError::refused(format!(
                "no slice named and the current branch ({}) is not a slice's; name one: arbiter feature {verb} <domain>/<Feature>",
                if current.is_empty() { "detached HEAD".to_string() } else { current }
            ))
        })
    }

    /// The slice `spec` names on the current checkout, or a refusal listing candidates.
    pub fn resolve_here(&self, project: &Project, spec: &TargetSpec) -> Result<Slice> {
        let slices = layout::scan(self.root(), project);
        let known = project.known_features();
        match resolve(spec, &slices, known.get(&spec.name).map(String::as_str)) {
            Resolution::Found(s) => Ok(s),
            Resolution::Ambiguous(c) => Err(SliceError::refused(format!(
                "'{spec}' names {} slices: {}; name one as <domain>/{}",
                c.len(),
                list(&c),
                spec.name
            ))),
            Resolution::Unknown { suggestions } => {
                let hint = if suggestions.is_empty() {
                    "`arbiter feature scan` lists the slices".to_string()
                } else {
                    format!("did you mean {}? (`arbiter feature scan` lists the slices)", list(&suggestions))
                };
                Err(SliceError::refused(format!("no slice '{spec}' here ({}); {hint}", project.roots(None).join(", "))))
            }
        }
    }

    /// The slice `spec` names, looking on its branch when the current checkout lacks it
    /// (a slice in progress lives on its branch): switches there first, which needs a clean
    /// tree. Then makes sure the slice's branch is checked out.
    pub async fn locate_and_enter(&self, spec: &TargetSpec, doing: &str) -> Result<(Project, Slice, BranchMove)> {
        let project = self.project()?;
        let here = self.resolve_here(&project, spec);
        let slice = match here {
            Ok(s) => s,
            Err(not_here) => {
                let Some(branch) = self.branch_of(spec).await? else { return Err(not_here) };
                self.repo.require_clean(&format!("{doing} (switching to {branch})")).await?;
                self.repo.switch(&branch).await?;
                let project = self.project()?;
                let slice = self.resolve_here(&project, spec)?;
                return Ok((project, slice, BranchMove::Switched));
            }
        };
        let moved = self.enter_branch(&slice.branch(), doing).await?;
        let project = if moved == BranchMove::Stayed { project } else { self.project()? };
        Ok((project, slice, moved))
    }

    /// The local branch that holds the slice `spec` names, when exactly one does.
    async fn branch_of(&self, spec: &TargetSpec) -> Result<Option<String>> {
        let branches = self.repo.local_branches().await?;
        let found: Vec<String> = branches
            .into_iter()
            .filter(|b| match (b.split_once('/'), &spec.domain) {
                (Some((d, n)), Some(want)) => d == want && n == spec.name,
                (Some((_, n)), None) => n == spec.name,
                _ => false,
            })
            .collect();
        Ok(if found.len() == 1 { found.into_iter().next() } else { None })
    }

    /// Checks out `branch` (creating it from the default branch if needed); anything but
    /// staying where we are needs a clean tree.
    pub async fn enter_branch(&self, branch: &str, doing: &str) -> Result<BranchMove> {
        if self.repo.current_branch().await?.as_deref() == Some(branch) {
            return Ok(BranchMove::Stayed);
        }
        self.repo.require_clean(&format!("{doing} (switching to {branch})")).await?;
        if self.repo.branch_exists(branch).await? {
            self.repo.switch(branch).await?;
            return Ok(BranchMove::Switched);
        }
        let default = self.repo.default_branch().await?;
        self.repo.create_branch(branch, &default).await?;
        Ok(BranchMove::Created)
    }

    /// The slice branch a verb acts on: named (`domain/Feature`, or a bare name whose
    /// domain a branch or the registry tells), or the current branch.
    pub async fn slice_branch(&self, given: Option<&str>, verb: &str) -> Result<(TargetSpec, String)> {
        let spec = self.named_or_current(given, verb).await?;
        if let Some(d) = &spec.domain {
            return Ok((spec.clone(), format!("{d}/{}", spec.name)));
        }
        if let Some(b) = self.branch_of(&spec).await? {
            let (d, _) = b.split_once('/').unwrap_or_default();
            return Ok((TargetSpec { domain: Some(d.to_string()), name: spec.name.clone() }, b));
        }
        let project = self.project()?;
        let slice = self.resolve_here(&project, &spec)?;
        Ok((TargetSpec { domain: Some(slice.domain.clone()), name: slice.name.clone() }, slice.branch()))
    }
}

/// `billing/Invoice (features/billing/Invoice), ...`.
fn list(slices: &[Slice]) -> String {
    slices.iter().map(|s| format!("{} ({})", s.branch(), s.dir)).collect::<Vec<_>>().join(", ")
}
