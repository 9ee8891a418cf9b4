//! What a candidate's patch may hold: at most so many bytes and files, no single file over a
//! size, and no symbolic link that leads out of the repository (resolved against the whole
//! tree the patch produces: [`crate::links`]). A patch over a limit is rejected with the
//! limit it broke: a candidate that dumps a dependency tree or a huge binary into its
//! patch, or plants a link to `~/.ssh`, is never applied. The capture measures the
//! candidate's files before it writes the patch, so what is over a limit is never written
//! in full.

use crate::text::Untrusted;
use serde::{Deserialize, Serialize};

use crate::links::{self, Escape, Links};

/// The limits of one run (`[run] max_patch_bytes`, `max_patch_files`, `max_file_bytes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
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

/// A file the patch adds, changes or deletes, as git measured it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChangedFile {
    /// Relative to the repository root, with `/` separators.
    pub path: String,
    /// The size of the regular file it leaves; `None` when it leaves none (deleted, a link,
    /// a submodule).
    pub bytes: Option<u64>,
}

/// A limit a patch broke.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(tag = "breach", rename_all = "snake_case")]
pub enum LimitBreach {
    /// `bytes`: as far as it was read (a patch over the limit is not read to its end).
    PatchBytes {
        bytes: u64,
        limit: u64,
    },
    PatchFiles {
        files: u64,
        limit: u64,
    },
    FileBytes {
        path: Untrusted,
        bytes: u64,
        limit: u64,
    },
    LinkOutside {
        path: Untrusted,
        target: Untrusted,
        #[serde(default)]
        escape: Escape,
        /// The other links its resolution went through (`path -> target`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        via: Vec<Untrusted>,
    },
}

impl LimitBreach {
    pub fn describe(&self) -> String {
        match self {
            LimitBreach::PatchBytes { limit, .. } => {
                format!("its patch is over the limit of {limit} bytes (max_patch_bytes)")
            }
            LimitBreach::PatchFiles { files, limit } => {
                format!("its patch changes {files} files, over the limit of {limit} (max_patch_files)")
            }
            LimitBreach::FileBytes { path, bytes, limit } => {
                format!("{path} is {bytes} bytes, over the limit of {limit} for one file (max_file_bytes)")
            }
            LimitBreach::LinkOutside { path, target, escape, via } => {
                let via: Vec<String> = via.iter().map(Untrusted::to_string).collect();
                let through =
                    if via.is_empty() { String::new() } else { format!(" (through {})", via.join(", then ")) };
                format!("{path} is a symbolic link to {target}, which {}{through}", escape.describe())
            }
        }
    }

    /// Whether the limit broken is one on links (resolved against a tree), not on sizes.
    pub fn is_link(&self) -> bool {
        matches!(self, LimitBreach::LinkOutside { .. })
    }
}

/// Every size limit the patch breaks: `patch_bytes` long (when known), changing `files`.
pub fn check(limits: &CandidateLimits, patch_bytes: Option<u64>, files: &[ChangedFile]) -> Vec<LimitBreach> {
    let mut breaches = Vec::new();
    if let Some(bytes) = patch_bytes.filter(|b| *b > limits.max_patch_bytes) {
        breaches.push(LimitBreach::PatchBytes { bytes, limit: limits.max_patch_bytes });
    }
    if files.len() as u64 > limits.max_patch_files {
        breaches.push(LimitBreach::PatchFiles { files: files.len() as u64, limit: limits.max_patch_files });
    }
    for f in files {
        if let Some(bytes) = f.bytes.filter(|b| *b > limits.max_file_bytes) {
            breaches.push(LimitBreach::FileBytes { path: f.path.as_str().into(), bytes, limit: limits.max_file_bytes });
        }
    }
    breaches
}

/// The links of `after` (the tree a patch produces from `before`) that the patch may not
/// leave there (see [`links::escaping`]).
pub fn check_links(before: &Links, after: &Links) -> Vec<LimitBreach> {
    links::escaping(before, after)
        .into_iter()
        .map(|(path, target, e)| LimitBreach::LinkOutside {
            path: path.into(),
            target: target.into(),
            escape: e.escape,
            via: e.via.into_iter().map(Untrusted::from).collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, bytes: u64) -> ChangedFile {
        ChangedFile { path: path.into(), bytes: Some(bytes) }
    }

    #[test]
    fn each_limit_is_reported_with_its_name() {
        let limits = CandidateLimits { max_patch_bytes: 100, max_patch_files: 3, max_file_bytes: 10 };
        let gone = ChangedFile { path: "gone".into(), bytes: None };
        assert!(check(&limits, Some(100), &[file("a", 10), file("b", 1), gone.clone()]).is_empty());
        let breaches = check(&limits, Some(101), &[file("a", 11), file("b", 1), file("c", 1), gone]);
        let texts: Vec<String> = breaches.iter().map(LimitBreach::describe).collect();
        assert_eq!(texts.len(), 3, "{texts:?}");
        assert!(texts[0].contains("limit of 100 bytes") && texts[0].contains("max_patch_bytes"));
        assert!(texts[1].contains("4 files") && texts[1].contains("max_patch_files"));
        assert!(texts[2].starts_with("a is 11 bytes") && texts[2].contains("max_file_bytes"));
        assert!(check(&limits, None, &[file("a", 1)]).is_empty(), "an unknown patch size is not a breach");
    }

    #[test]
    fn a_link_breach_names_the_links_it_went_through() {
        let after: Links = [("sub/u", ".."), ("e", "sub/u/..")].into_iter().collect();
        let breaches = check_links(&Links::new(), &after);
        assert_eq!(breaches.len(), 1, "{breaches:?}");
        let text = breaches[0].describe();
        assert_eq!(text, "e is a symbolic link to sub/u/.., which leads outside the repository (through sub/u -> ..)");
        // Written and read back as evidence.
        let json = serde_json::to_string(&breaches[0]).unwrap();
        assert_eq!(serde_json::from_str::<LimitBreach>(&json).unwrap(), breaches[0]);
        let old: LimitBreach =
            serde_json::from_str(r#"{"breach":"link_outside","path":"up","target":"../.."}"#).unwrap();
        assert!(old.describe().contains("leads outside the repository"), "{}", old.describe());
    }
}
