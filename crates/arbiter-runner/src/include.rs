//! Copying the include-list (ignored files such as `.env`) from the repository into a fresh
//! worktree. Entries are paths or glob patterns relative to the repository root; symlinks
//! are copied as symlinks; nothing outside the repository is ever read.

use std::fs;
use std::path::{Component, Path, PathBuf};

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
        let pattern = repo.join(entry);
        let pattern_text = pattern.to_string_lossy().into_owned();
        let matches: Vec<PathBuf> = glob::glob(&pattern_text)
            .map_err(|e| IncludeError::Pattern(entry.clone(), e.to_string()))?
            .filter_map(Result::ok)
            .collect();
        if matches.is_empty() {
            report.missing.push(entry.clone());
        }
        for source in matches {
            let rel = source.strip_prefix(repo).unwrap_or(&source).to_path_buf();
            copy_tree(&source, &worktree.join(&rel))
                .map_err(|e| IncludeError::Copy { path: rel.display().to_string(), source: e })?;
            report.copied.push(rel.display().to_string());
        }
    }
    Ok(report)
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
        let r = copy_includes(
            repo.path(),
            wt.path(),
            &[".env".into(), "conf/local".into(), "*.secret".into(), "nope".into()],
        )
        .unwrap();
        assert_eq!(r.missing, vec!["nope".to_string()]);
        assert_eq!(fs::read_to_string(wt.path().join("conf/local/x.toml")).unwrap(), "x");
        assert!(wt.path().join("a.secret").exists());
        assert!(copy_includes(repo.path(), wt.path(), &["../x".into()]).is_err());
        assert!(copy_includes(repo.path(), wt.path(), &["/etc/passwd".into()]).is_err());
    }
}
