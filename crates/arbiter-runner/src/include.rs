//! Copying the include-list (ignored files such as `.env`) from the repository into a fresh
//! worktree. Entries are paths or glob patterns relative to the repository root; symlinks
//! are copied as symlinks; nothing outside the repository is ever read.

use std::fs;
use std::path::{Component, Path, PathBuf};

use arbiter_core::protect::{glob_match, invalid_glob};

/// What the copy did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct IncludeReport {
    pub copied: Vec<String>,
    /// Entries that matched nothing (reported, not fatal).
    pub missing: Vec<String>,
}

/// Why an include entry was refused.
#[derive(Debug, thiserror::Error)]
pub enum IncludeError {
    #[error("include entry '{0}' leaves the repository; use a path relative to the repository root")]
    Escapes(String),
    #[error("include entry '{0}' is not a valid pattern: {1}")]
    Pattern(String, String),
    #[error("cannot copy {path} into the worktree: {source}")]
    Copy { path: String, source: std::io::Error },
}

fn is_confined(entry: &str) -> bool {
    let p = Path::new(entry);
    !p.is_absolute() && p.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

/// Copies every entry from `repo` into `worktree`.
pub fn copy_includes(repo: &Path, worktree: &Path, entries: &[String]) -> Result<IncludeReport, IncludeError> {
    let mut report = IncludeReport::default();
    for entry in entries {
        if !is_confined(entry) {
            return Err(IncludeError::Escapes(entry.clone()));
        }
        let components: Vec<&str> = entry.split('/').filter(|c| !c.is_empty() && *c != ".").collect();
        let matches = if components.iter().any(|c| is_pattern(c)) {
            matching(repo, &components).map_err(|why| IncludeError::Pattern(entry.clone(), why))?
        } else {
            let rel = PathBuf::from(components.join("/"));
            if fs::symlink_metadata(repo.join(&rel)).is_ok() { vec![rel] } else { Vec::new() }
        };
        if matches.is_empty() {
            report.missing.push(entry.clone());
        }
        for rel in matches {
            // A broad pattern (`*`, `.*`) never copies git's directory or arbiter's: the
            // workspace has a git of its own, and `.arbiter/` holds the workspaces themselves.
            if arbiter_core::settings::names_private_dir(&rel.to_string_lossy()) {
                continue;
            }
            copy_tree(&repo.join(&rel), &worktree.join(&rel))
                .map_err(|e| IncludeError::Copy { path: rel.display().to_string(), source: e })?;
            report.copied.push(rel.display().to_string());
        }
    }
    Ok(report)
}

/// Whether a path component holds glob syntax (the dialect of [`glob_match`], the one every
/// list of paths in arbiter's settings uses).
fn is_pattern(component: &str) -> bool {
    component.contains(['*', '?', '[', '{'])
}

/// The paths under `repo` (relative to it, sorted) that the glob made of `components`
/// matches. The walk starts at the literal directories before the first pattern component
/// and goes no deeper than the pattern can reach; a matching directory is taken whole, and
/// `.git/` and `.arbiter/` are never entered. Symlinks are matched, never followed.
fn matching(repo: &Path, components: &[&str]) -> Result<Vec<PathBuf>, String> {
    let pattern = components.join("/");
    if let Some(why) = invalid_glob(&pattern) {
        return Err(why);
    }
    let literal = components.iter().take_while(|c| !is_pattern(c)).count();
    let reach = (!components[literal..].contains(&"**")).then_some(components.len() - literal);
    let mut found = Vec::new();
    walk(repo, &PathBuf::from(components[..literal].join("/")), reach, &pattern, &mut found);
    found.sort();
    Ok(found)
}

fn walk(repo: &Path, dir: &Path, reach: Option<usize>, pattern: &str, found: &mut Vec<PathBuf>) {
    let Ok(items) = fs::read_dir(repo.join(dir)) else { return };
    for item in items.flatten() {
        let rel = dir.join(item.file_name());
        let text = rel.to_string_lossy();
        if arbiter_core::settings::names_private_dir(&text) {
            continue;
        }
        if glob_match(pattern, &text) {
            found.push(rel);
        } else if reach != Some(1) && item.file_type().is_ok_and(|t| t.is_dir()) {
            walk(repo, &rel, reach.map(|r| r - 1), pattern, found);
        }
    }
}

fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    let meta = fs::symlink_metadata(from)?;
    if let Some(parent) = to.parent() {
        fs::create_dir_all(parent)?;
    }
    if meta.file_type().is_symlink() {
        let target = fs::read_link(from)?;
        let _ = fs::remove_file(to);
        std::os::unix::fs::symlink(target, to)
    } else if meta.is_dir() {
        fs::create_dir_all(to)?;
        for item in fs::read_dir(from)? {
            let item = item?;
            copy_tree(&item.path(), &to.join(item.file_name()))?;
        }
        Ok(())
    } else {
        fs::copy(from, to).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_files_dirs_and_globs_and_refuses_escapes() {
        let repo = tempfile::tempdir().unwrap();
        let wt = tempfile::tempdir().unwrap();
        fs::write(repo.path().join(".env"), "A=1").unwrap();
        fs::create_dir_all(repo.path().join("conf/local")).unwrap();
        fs::write(repo.path().join("conf/local/x.toml"), "x").unwrap();
        fs::write(repo.path().join("a.secret"), "s").unwrap();
        fs::write(repo.path().join("conf/local/y.key"), "y").unwrap();
        fs::create_dir_all(repo.path().join("deep/a/b")).unwrap();
        fs::write(repo.path().join("deep/a/b/z.key"), "z").unwrap();
        let r = copy_includes(
            repo.path(),
            wt.path(),
            &[".env".into(), "conf/local".into(), "*.secret".into(), "nope".into(), "**/*.key".into()],
        )
        .unwrap();
        assert_eq!(r.missing, vec!["nope".to_string()]);
        assert!(wt.path().join("deep/a/b/z.key").exists() && wt.path().join("conf/local/y.key").exists());
        assert_eq!(fs::read_to_string(wt.path().join("conf/local/x.toml")).unwrap(), "x");
        assert!(wt.path().join("a.secret").exists());
        assert!(copy_includes(repo.path(), wt.path(), &["../x".into()]).is_err());
        assert!(matches!(
            copy_includes(repo.path(), wt.path(), &["conf/[local".into()]),
            Err(IncludeError::Pattern(..))
        ));
        assert!(copy_includes(repo.path(), wt.path(), &["/etc/passwd".into()]).is_err());
    }
}
