//! What a captured patch (`git diff --binary` text) contains, and its normalized hash.
//!
//! Two candidates that made the same change produce the same normalized hash even when
//! their diffs differ in blob ids, hunk line numbers or whitespace; that is what votes are
//! counted on. File paths stay in the hash, so the same edit to two different files differs.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Counts taken from a patch.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct PatchStats {
    pub files_changed: usize,
    pub lines_added: usize,
    pub lines_removed: usize,
    pub binary_files: usize,
    /// Paths touched (the new path of a rename).
    pub files: Vec<String>,
}

impl PatchStats {
    /// The size used to prefer smaller patches: changed lines, a binary file counting 10.
    pub fn weight(&self) -> usize {
        self.lines_added + self.lines_removed + 10 * self.binary_files
    }
}

/// Reads counts from a unified git diff.
pub fn stats(diff: &str) -> PatchStats {
    let mut s = PatchStats::default();
    let mut in_hunk = false;
    for line in diff.lines() {
        if let Some(rest) = line.strip_prefix("diff --git ") {
            s.files_changed += 1;
            in_hunk = false;
            if let Some(path) = new_path_of(rest) {
                s.files.push(path);
            }
        } else if line.starts_with("@@") {
            in_hunk = true;
        } else if line.starts_with("GIT binary patch")
            || (line.starts_with("Binary files ") && line.ends_with(" differ"))
        {
            s.binary_files += 1;
            in_hunk = false;
        } else if in_hunk {
            if line.starts_with('+') {
                s.lines_added += 1;
            } else if line.starts_with('-') {
                s.lines_removed += 1;
            }
        }
    }
    s
}

/// `a/x b/y` → `y` (paths with spaces are handled by splitting at ` b/`).
fn new_path_of(header: &str) -> Option<String> {
    let idx = header.rfind(" b/")?;
    Some(header[idx + 3..].to_string())
}

/// The sha256 (hex) of the patch with headers, blob ids, hunk positions and all whitespace
/// removed. Returns `None` for an empty patch.
pub fn normalized_hash(diff: &str) -> Option<String> {
    if diff.trim().is_empty() {
        return None;
    }
    let mut hasher = Sha256::new();
    let mut in_hunk = false;
    for line in diff.lines() {
        if let Some(rest) = line.strip_prefix("diff --git ") {
            in_hunk = false;
            hasher.update(b"F:");
            hasher.update(new_path_of(rest).unwrap_or_default().as_bytes());
            hasher.update(b"\n");
            continue;
        }
        if line.starts_with("@@") {
            in_hunk = true;
            continue;
        }
        let keep = if in_hunk {
            line.starts_with('+') || line.starts_with('-')
        } else {
            // Outside hunks only what changes meaning is kept: file creation/deletion,
            // renames' old paths, mode changes and binary payloads. Blob ids are dropped.
            line.starts_with("new file mode")
                || line.starts_with("deleted file mode")
                || line.starts_with("rename from")
                || line.starts_with("old mode")
                || line.starts_with("new mode")
                || line.starts_with("literal ")
                || line.starts_with("delta ")
                || (!line.starts_with("index ")
                    && !line.starts_with("--- ")
                    && !line.starts_with("+++ ")
                    && !line.starts_with("similarity index")
                    && !line.starts_with("dissimilarity index")
                    && !line.starts_with("rename to")
                    && !line.starts_with("GIT binary patch"))
        };
        if !keep {
            continue;
        }
        let squeezed: String = line.chars().filter(|c| !c.is_whitespace()).collect();
        if squeezed.len() <= 1 && in_hunk {
            // a blank line added or removed
            continue;
        }
        hasher.update(squeezed.as_bytes());
        hasher.update(b"\n");
    }
    let digest = hasher.finalize();
    Some(digest.iter().map(|b| format!("{b:02x}")).collect())
}

/// The patch as a reviewer should read it: file sections in path order and blob ids
/// dropped, so two candidates' diffs differ only where their changes differ (nothing about
/// how or in what order a candidate produced them shows through).
pub fn normalized_for_review(diff: &str) -> String {
    let mut sections: Vec<(String, String)> = Vec::new();
    for line in diff.split_inclusive('\n') {
        if let Some(rest) = line.strip_prefix("diff --git ") {
            sections.push((new_path_of(rest.trim_end()).unwrap_or_default(), String::new()));
        }
        if line.starts_with("index ") && is_blob_ids(line) {
            continue;
        }
        if let Some((_, text)) = sections.last_mut() {
            text.push_str(line);
        }
    }
    sections.sort_by(|a, b| a.0.cmp(&b.0));
    sections.into_iter().map(|(_, text)| text).collect()
}

/// `index 1a2b3c4..5d6e7f8 100644`: blob ids, not content.
fn is_blob_ids(line: &str) -> bool {
    line.split_whitespace().nth(1).is_some_and(|ids| ids.contains(".."))
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "diff --git a/calc.py b/calc.py\nindex 1111111..2222222 100644\n--- a/calc.py\n+++ b/calc.py\n@@ -1,3 +1,3 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n";

    #[test]
    fn counts_lines_and_files() {
        let s = stats(A);
        assert_eq!((s.files_changed, s.lines_added, s.lines_removed), (1, 1, 1));
        assert_eq!(s.files, vec!["calc.py".to_string()]);
    }

    #[test]
    fn hash_ignores_blob_ids_positions_and_whitespace() {
        let b = A
            .replace("1111111..2222222", "aaaaaaa..bbbbbbb")
            .replace("@@ -1,3 +1,3 @@", "@@ -7,3 +7,3 @@")
            .replace("a + b", "a  +  b");
        assert_eq!(normalized_hash(A), normalized_hash(&b));
    }

    #[test]
    fn hash_distinguishes_files_and_content() {
        let other_file = A.replace("calc.py", "other.py");
        let other_fix = A.replace("a + b", "b + a");
        assert_ne!(normalized_hash(A), normalized_hash(&other_file));
        assert_ne!(normalized_hash(A), normalized_hash(&other_fix));
        assert_eq!(normalized_hash("  \n"), None);
    }

    #[test]
    fn review_form_sorts_files_and_drops_blob_ids() {
        let two = format!("{}{}", A.replace("calc.py", "z.py"), A);
        let shown = normalized_for_review(&two);
        assert!(shown.starts_with("diff --git a/calc.py b/calc.py\n--- a/calc.py"), "{shown}");
        assert!(!shown.contains("index 1111111"), "{shown}");
        assert!(shown.contains("diff --git a/z.py b/z.py"));
        assert!(shown.contains("+    return a + b\n"));
    }

    #[test]
    fn binary_files_count() {
        let d = "diff --git a/x.bin b/x.bin\nnew file mode 100644\nindex 0000000..1111111\nGIT binary patch\nliteral 3\nKcmZQzU|;|Q00aO5\n\nliteral 0\nHcmV?d00001\n\n";
        let s = stats(d);
        assert_eq!(s.binary_files, 1);
        assert_eq!(s.weight(), 10);
    }
}
