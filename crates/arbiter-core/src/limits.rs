//! What a candidate's patch may hold: at most so many bytes and files, no single file over a
//! size, and no symbolic link that points outside the repository. A patch over a limit is
//! rejected with the limit it broke, before any gate runs: a candidate that dumps a
//! dependency tree or a huge binary into its patch, or plants a link to `~/.ssh`, is never
//! applied.

use serde::{Deserialize, Serialize};

/// The limits of one run (`[run] max_patch_bytes`, `max_patch_files`, `max_file_bytes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CandidateLimits {
    pub max_patch_bytes: u64,
    pub max_patch_files: u64,
    pub max_file_bytes: u64,
}

impl Default for CandidateLimits {
    fn default() -> Self {
        CandidateLimits { max_patch_bytes: 10 << 20, max_patch_files: 1000, max_file_bytes: 5 << 20 }
    }
}

/// A file the patch adds or changes, as the candidate left it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChangedFile {
    /// Relative to the repository root, with `/` separators.
    pub path: String,
    pub bytes: u64,
    /// Where it points, when it is a symbolic link.
    pub link_target: Option<String>,
}

/// A limit a patch broke.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "breach", rename_all = "snake_case")]
pub enum LimitBreach {
    PatchBytes { bytes: u64, limit: u64 },
    PatchFiles { files: u64, limit: u64 },
    FileBytes { path: String, bytes: u64, limit: u64 },
    LinkOutside { path: String, target: String },
}

impl LimitBreach {
    pub fn describe(&self) -> String {
        match self {
            LimitBreach::PatchBytes { bytes, limit } => {
                format!("its patch is {bytes} bytes, over the limit of {limit} (max_patch_bytes)")
            }
            LimitBreach::PatchFiles { files, limit } => {
                format!("its patch changes {files} files, over the limit of {limit} (max_patch_files)")
            }
            LimitBreach::FileBytes { path, bytes, limit } => {
                format!("{path} is {bytes} bytes, over the limit of {limit} for one file (max_file_bytes)")
            }
            LimitBreach::LinkOutside { path, target } => {
                format!("{path} is a symbolic link pointing outside the repository ({target})")
            }
        }
    }
}

/// Every limit the patch (`patch_bytes` long, changing `files`) breaks.
pub fn check(limits: &CandidateLimits, patch_bytes: u64, files: &[ChangedFile]) -> Vec<LimitBreach> {
    let mut breaches = Vec::new();
    if patch_bytes > limits.max_patch_bytes {
        breaches.push(LimitBreach::PatchBytes { bytes: patch_bytes, limit: limits.max_patch_bytes });
    }
    if files.len() as u64 > limits.max_patch_files {
        breaches.push(LimitBreach::PatchFiles { files: files.len() as u64, limit: limits.max_patch_files });
    }
    for f in files {
        match &f.link_target {
            Some(target) if escapes(&f.path, target) => {
                breaches.push(LimitBreach::LinkOutside { path: f.path.clone(), target: target.clone() });
            }
            Some(_) => {}
            None if f.bytes > limits.max_file_bytes => breaches.push(LimitBreach::FileBytes {
                path: f.path.clone(),
                bytes: f.bytes,
                limit: limits.max_file_bytes,
            }),
            None => {}
        }
    }
    breaches
}

/// Whether a link at `path` (relative to the root) to `target` leads outside the root:
/// absolute targets always do; relative ones are resolved lexically from the link's
/// directory.
fn escapes(path: &str, target: &str) -> bool {
    if target.starts_with('/') || target.is_empty() {
        return true;
    }
    let mut depth: i64 = path.split('/').count() as i64 - 1;
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                depth -= 1;
                if depth < 0 {
                    return true;
                }
            }
            _ => depth += 1,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, bytes: u64) -> ChangedFile {
        ChangedFile { path: path.into(), bytes, link_target: None }
    }

    fn link(path: &str, target: &str) -> ChangedFile {
        ChangedFile { path: path.into(), bytes: 0, link_target: Some(target.into()) }
    }

    #[test]
    fn each_limit_is_reported_with_its_name() {
        let limits = CandidateLimits { max_patch_bytes: 100, max_patch_files: 2, max_file_bytes: 10 };
        assert!(check(&limits, 100, &[file("a", 10), file("b", 1)]).is_empty());
        let breaches = check(&limits, 101, &[file("a", 11), file("b", 1), file("c", 1)]);
        let texts: Vec<String> = breaches.iter().map(LimitBreach::describe).collect();
        assert_eq!(texts.len(), 3, "{texts:?}");
        assert!(texts[0].contains("101 bytes") && texts[0].contains("max_patch_bytes"));
        assert!(texts[1].contains("3 files") && texts[1].contains("max_patch_files"));
        assert!(texts[2].starts_with("a is 11 bytes") && texts[2].contains("max_file_bytes"));
    }

    #[test]
    fn links_may_point_anywhere_inside_the_repository_only() {
        let limits = CandidateLimits::default();
        let ok = [link("a", "b"), link("dir/a", "../b"), link("d/e/f", "../../g/./h"), link("x", "./y")];
        assert!(check(&limits, 1, &ok).is_empty());
        for (path, target) in
            [("a", "/etc/passwd"), ("a", "../outside"), ("d/a", "../../x"), ("d/a", "e/../../../x"), ("a", "")]
        {
            let breaches = check(&limits, 1, &[link(path, target)]);
            assert_eq!(
                breaches,
                vec![LimitBreach::LinkOutside { path: path.into(), target: target.into() }],
                "{path} -> {target}"
            );
        }
    }
}
