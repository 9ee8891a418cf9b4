//! `manifest.json`: the seal of a finished run directory. arbiter alone writes
//! `.arbiter/runs/<run-id>/`; at the end of a run it records every file there with its
//! SHA-256 and size, and every later write it makes itself (`arbiter apply`, a resume)
//! updates the record. Anyone can then check the directory against it
//! (`arbiter runs verify`): a forged event, an edited patch, a deleted report or an added
//! file shows up as changed, missing or unexpected.
//!
//! This module owns the format and the comparison; hashing the files on disk is the
//! runner's (`RunDir::seal`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::SCHEMA_VERSION;
use crate::ids::RunId;

/// The manifest's own name in the run directory.
pub const MANIFEST: &str = "manifest.json";

/// Whether a file of the run directory (relative path, `/` separators) belongs in the
/// manifest: everything but the manifest itself and temporary files of atomic writes.
pub fn is_sealed(rel: &str) -> bool {
    rel != MANIFEST && !rel.ends_with(".tmp")
}

/// One file as it was sealed (or as it is found).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct FileDigest {
    /// Relative to the run directory, `/` separators.
    pub path: String,
    /// Lowercase hex SHA-256 of the content (of a symlink: of `symlink:` and its target).
    pub sha256: String,
    pub bytes: u64,
}

/// `manifest.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct Manifest {
    pub schema_version: u32,
    pub run_id: RunId,
    /// Sorted by path.
    pub files: Vec<FileDigest>,
}

impl Manifest {
    /// A manifest of `files` (sorted here; files that are not sealed are left out).
    pub fn new(run_id: RunId, mut files: Vec<FileDigest>) -> Self {
        files.retain(|f| is_sealed(&f.path));
        files.sort_by(|a, b| a.path.cmp(&b.path));
        files.dedup_by(|a, b| a.path == b.path);
        Manifest { schema_version: SCHEMA_VERSION, run_id, files }
    }

    /// Records new versions of files arbiter itself just wrote (added when new), leaving
    /// every other entry as it was sealed: a change someone else made stays visible.
    pub fn update(&mut self, written: Vec<FileDigest>) {
        let mut by_path: BTreeMap<String, FileDigest> =
            std::mem::take(&mut self.files).into_iter().map(|f| (f.path.clone(), f)).collect();
        for f in written.into_iter().filter(|f| is_sealed(&f.path)) {
            by_path.insert(f.path.clone(), f);
        }
        self.files = by_path.into_values().collect();
    }

    /// Compares the sealed files with the files `found` in the directory now.
    pub fn verify(&self, found: &[FileDigest]) -> Verification {
        let now: BTreeMap<&str, &FileDigest> =
            found.iter().filter(|f| is_sealed(&f.path)).map(|f| (f.path.as_str(), f)).collect();
        let mut v = Verification { files: self.files.len(), ..Verification::default() };
        for sealed in &self.files {
            match now.get(sealed.path.as_str()) {
                None => v.missing.push(sealed.path.clone()),
                Some(f) if f.sha256 != sealed.sha256 || f.bytes != sealed.bytes => v.changed.push(sealed.path.clone()),
                Some(_) => {}
            }
        }
        let sealed: BTreeMap<&str, ()> = self.files.iter().map(|f| (f.path.as_str(), ())).collect();
        v.unexpected = now.keys().filter(|p| !sealed.contains_key(*p)).map(|p| p.to_string()).collect();
        v
    }
}

/// What a check of a run directory against its manifest found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verification {
    /// Files the manifest records.
    pub files: usize,
    /// Recorded files whose content or size differ.
    pub changed: Vec<String>,
    /// Recorded files that are gone.
    pub missing: Vec<String>,
    /// Files the manifest does not record.
    pub unexpected: Vec<String>,
}

impl Verification {
    /// Every recorded file is there unchanged, and nothing else is.
    pub fn holds(&self) -> bool {
        self.changed.is_empty() && self.missing.is_empty() && self.unexpected.is_empty()
    }

    /// `changed: a, b; missing: c; unexpected: d` (the parts that are not empty).
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        for (what, list) in [("changed", &self.changed), ("missing", &self.missing), ("unexpected", &self.unexpected)] {
            if !list.is_empty() {
                parts.push(format!("{what}: {}", list.join(", ")));
            }
        }
        if parts.is_empty() { format!("all {} files match", self.files) } else { parts.join("; ") }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Timestamp;

    fn d(path: &str, sha: &str, bytes: u64) -> FileDigest {
        FileDigest { path: path.into(), sha256: sha.into(), bytes }
    }

    fn run() -> RunId {
        RunId::new(Timestamp(1_700_000_000_000_000), 0xabc)
    }

    #[test]
    fn a_sealed_directory_verifies_and_every_difference_is_named() {
        let m = Manifest::new(
            run(),
            vec![
                d("state.json", "a", 1),
                d("final_report.md", "b", 2),
                d("manifest.json", "x", 1),
                d("state.json.tmp", "y", 1),
                d("candidates/c1/patch.diff", "c", 3),
            ],
        );
        assert_eq!(
            m.files.iter().map(|f| f.path.as_str()).collect::<Vec<_>>(),
            ["candidates/c1/patch.diff", "final_report.md", "state.json"]
        );
        assert!(m.verify(&m.files).holds());
        // The manifest itself and temporary files are never unexpected.
        let mut found = m.files.clone();
        found.push(d("manifest.json", "z", 9));
        found.push(d("viewer/index.html.tmp", "z", 9));
        assert!(m.verify(&found).holds());

        let found = vec![d("candidates/c1/patch.diff", "C", 3), d("state.json", "a", 2), d("extra.txt", "e", 1)];
        let v = m.verify(&found);
        assert_eq!(v.changed, ["candidates/c1/patch.diff", "state.json"]);
        assert_eq!(v.missing, ["final_report.md"]);
        assert_eq!(v.unexpected, ["extra.txt"]);
        assert!(!v.holds());
        assert_eq!(
            v.describe(),
            "changed: candidates/c1/patch.diff, state.json; missing: final_report.md; unexpected: extra.txt"
        );
    }

    #[test]
    fn an_update_records_only_what_arbiter_wrote() {
        let mut m = Manifest::new(run(), vec![d("state.json", "a", 1), d("final_report.md", "b", 2)]);
        m.update(vec![d("apply.json", "p", 5), d("state.json", "a2", 1)]);
        assert_eq!(
            m.files.iter().map(|f| (f.path.as_str(), f.sha256.as_str())).collect::<Vec<_>>(),
            [("apply.json", "p"), ("final_report.md", "b"), ("state.json", "a2")]
        );
        let json = serde_json::to_value(&m).unwrap_or_default();
        assert_eq!(json["schema_version"], 1);
        assert_eq!(json["files"][0]["path"], "apply.json");
    }
}
