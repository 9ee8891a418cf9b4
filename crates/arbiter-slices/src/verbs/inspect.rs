//! `feature scan` (the slices on disk, by domain, and the registry's view of them) and
//! `feature status` (the slices in progress: every slice branch, however many).

use serde::Serialize;

use super::Workspace;
use crate::names::target_from_branch;
use crate::{Result, layout};

/// One slice found by `scan`.
#[derive(Clone, Debug, Serialize)]
pub struct ScanRow {
    pub domain: String,
    pub name: String,
    pub dir: String,
    pub flat: bool,
    pub registered: bool,
}

/// What `feature scan` found.
#[derive(Clone, Debug, Serialize)]
pub struct ScanOutcome {
    pub registry: String,
    pub slices: Vec<ScanRow>,
    /// Registered names with no directory here (`domain/Feature`).
    pub registered_missing: Vec<String>,
}

pub fn scan(ws: &Workspace) -> Result<ScanOutcome> {
    let project = ws.project()?;
    let known = project.known_features();
    let found = layout::scan(ws.root(), &project);
    let slices: Vec<ScanRow> = found
        .iter()
        .map(|s| ScanRow {
            domain: s.domain.clone(),
            name: s.name.clone(),
            dir: s.dir.clone(),
            flat: s.flat,
            registered: known.get(&s.name).is_some_and(|d| *d == s.domain || s.flat),
        })
        .collect();
    let registered_missing = known
        .iter()
        .filter(|(name, _)| !found.iter().any(|s| &s.name == *name))
        .map(|(name, domain)| format!("{domain}/{name}"))
        .collect();
    Ok(ScanOutcome { registry: project.root.path.clone(), slices, registered_missing })
}

/// One slice branch.
#[derive(Clone, Debug, Serialize)]
pub struct BranchRow {
    pub branch: String,
    pub current: bool,
    /// Commits it has that the default branch does not.
    pub ahead: u32,
    /// Commits the default branch has that it does not.
    pub behind: u32,
    /// Whether the slice's directory is on it.
    pub has_slice: bool,
}

/// What `feature status` found.
#[derive(Clone, Debug, Serialize)]
pub struct StatusOutcome {
    pub default_branch: String,
    pub current_branch: Option<String>,
    pub in_progress: Vec<BranchRow>,
    pub uncommitted: Vec<String>,
}

pub async fn status(ws: &Workspace) -> Result<StatusOutcome> {
    let repo = &ws.repo;
    let default = repo.default_branch().await?;
    let current = repo.current_branch().await?;
    let project = ws.project()?;
    let mut rows = Vec::new();
    for branch in repo.local_branches().await? {
        let Some(t) = target_from_branch(&branch, &default) else { continue };
        let Some(domain) = t.domain.as_deref() else { continue };
        let dir = format!("{}/{domain}/{}", project.root_for_domain(domain), t.name);
        let (ahead, behind) = repo.ahead_behind(&branch, &default).await?;
        rows.push(BranchRow {
            current: current.as_deref() == Some(branch.as_str()),
            has_slice: repo.exists_at(&branch, &dir).await,
            branch,
            ahead,
            behind,
        });
    }
    Ok(StatusOutcome {
        default_branch: default,
        current_branch: current,
        in_progress: rows,
        uncommitted: repo.dirty().await?,
    })
}
