//! The JUnit XML reports a gate's run wrote in its tree: which files they are, and the
//! failing tests they name (read by `arbiter_core::test_report`).
//!
//! A report counts only when this run wrote it: the files a report path or glob matches are
//! noted before the command starts, and only those new or changed after it are read. A report
//! a candidate left in its tree (or committed) is therefore never taken for its gates'
//! results. Symbolic links are never followed: a report is a regular file inside the tree.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use arbiter_core::protect::glob_match;
use arbiter_core::test_report::{self, MAX_REPORT_BYTES};

/// Files looked at, at most, when walking for one glob (a tree of build output can be large).
const MAX_FILES_WALKED: usize = 200_000;

/// What a report file was when the command started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
}

/// The report files of one gate run, noted before it starts.
#[derive(Debug)]
pub struct ReportWatch {
    /// Paths the command line names (relative to the tree).
    named: Vec<String>,
    /// The `test_reports` globs.
    globs: Vec<String>,
    before: HashMap<String, Stamp>,
}

/// The reports a run wrote, read together.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadReports {
    /// The reports read, relative to the tree.
    pub files: Vec<String>,
    /// The failing tests of all of them.
    pub failed: BTreeSet<String>,
    /// Reports written but not read, with why.
    pub unread: Vec<(String, String)>,
}

impl ReportWatch {
    /// Notes what the reports of `command` (the paths it names, and `globs`) are in `tree` now.
    pub fn start(tree: &Path, command: &str, globs: &[String]) -> Self {
        let mut watch = ReportWatch {
            named: test_report::reports_named_in(command),
            globs: globs.to_vec(),
            before: HashMap::new(),
        };
        watch.before = watch.present(tree);
        watch
    }

    /// Whether the run can have reports at all.
    pub fn is_empty(&self) -> bool {
        self.named.is_empty() && self.globs.is_empty()
    }

    /// Reads the reports written since [`ReportWatch::start`]; `None` when there are none.
    pub fn read(&self, tree: &Path) -> Option<ReadReports> {
        if self.is_empty() {
            return None;
        }
        let mut written: Vec<String> =
            self.present(tree).into_iter().filter(|(p, s)| self.before.get(p) != Some(s)).map(|(p, _)| p).collect();
        written.sort();
        let mut read = ReadReports::default();
        for rel in written {
            match read_one(&tree.join(&rel)) {
                Ok(report) => {
                    read.failed.extend(report.failed);
                    read.files.push(rel);
                }
                Err(why) => read.unread.push((rel, why)),
            }
        }
        (!read.files.is_empty() || !read.unread.is_empty()).then_some(read)
    }

    /// Every report file in `tree` now, with its stamp.
    fn present(&self, tree: &Path) -> HashMap<String, Stamp> {
        let mut found = HashMap::new();
        for rel in &self.named {
            if let Some(stamp) = regular_file_inside(tree, rel) {
                found.insert(rel.clone(), stamp);
            }
        }
        for glob in &self.globs {
            let root = literal_prefix(glob);
            let Some(start) = real_dir_inside(tree, &root) else { continue };
            let walk = ignore::WalkBuilder::new(&start)
                .standard_filters(false)
                .follow_links(false)
                .filter_entry(|e| e.file_name() != ".git")
                .build();
            for entry in walk.take(MAX_FILES_WALKED).flatten() {
                if !entry.file_type().is_some_and(|t| t.is_file()) {
                    continue;
                }
                let Ok(rel) = entry.path().strip_prefix(tree) else { continue };
                let rel = rel.to_string_lossy().into_owned();
                if glob_match(glob, &rel)
                    && let Ok(meta) = entry.metadata()
                {
                    found.insert(rel, Stamp { len: meta.len(), modified: meta.modified().ok() });
                }
            }
        }
        found
    }
}

/// The directories of `glob` before its first wildcard (`target/surefire-reports` of
/// `target/surefire-reports/*.xml`; empty for `**/junit.xml`).
fn literal_prefix(glob: &str) -> String {
    let parts: Vec<&str> = glob.split('/').collect();
    let literal =
        parts[..parts.len().saturating_sub(1)].iter().take_while(|p| !p.contains(['*', '?', '[', '{', '\\'])).count();
    parts[..literal].join("/")
}

/// `tree/rel` when every component of `rel` is a real directory (no symbolic link on the way
/// out of the tree); `tree` itself for an empty `rel`.
fn real_dir_inside(tree: &Path, rel: &str) -> Option<PathBuf> {
    let mut at = PathBuf::from(tree);
    for dir in rel.split('/').filter(|p| !p.is_empty()) {
        at.push(dir);
        if !std::fs::symlink_metadata(&at).ok()?.file_type().is_dir() {
            return None;
        }
    }
    Some(at)
}

/// The stamp of `rel` when it is a regular file in a real directory of `tree`.
fn regular_file_inside(tree: &Path, rel: &str) -> Option<Stamp> {
    let (dirs, file) = rel.rsplit_once('/').unwrap_or(("", rel));
    let at = real_dir_inside(tree, dirs)?.join(file);
    let meta = std::fs::symlink_metadata(&at).ok()?;
    meta.file_type().is_file().then(|| Stamp { len: meta.len(), modified: meta.modified().ok() })
}

fn read_one(path: &Path) -> Result<test_report::JunitReport, String> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| e.to_string())?;
    if meta.len() > MAX_REPORT_BYTES {
        return Err(format!("{} bytes, more than the {MAX_REPORT_BYTES} read", meta.len()));
    }
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let text = String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())?;
    test_report::junit_failed_tests(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FAILING_ADD: &str = r#"<testsuite><testcase classname="t.CalcTest" name="test_add"><failure/></testcase><testcase classname="t.CalcTest" name="test_mul"/></testsuite>"#;

    #[test]
    fn prefixes_stop_at_the_first_wildcard() {
        assert_eq!(literal_prefix("target/surefire-reports/*.xml"), "target/surefire-reports");
        assert_eq!(literal_prefix("build/test-results/**/*.xml"), "build/test-results");
        assert_eq!(literal_prefix("**/junit.xml"), "");
        assert_eq!(literal_prefix("junit.xml"), "");
    }

    #[test]
    fn only_reports_written_during_the_run_are_read() {
        let tree = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tree.path().join("reports")).unwrap();
        // Left by the candidate before its gates: says everything passes.
        let stale = r#"<testsuite><testcase classname="t.CalcTest" name="test_add"/></testsuite>"#;
        std::fs::write(tree.path().join("reports/old.xml"), stale).unwrap();
        let watch = ReportWatch::start(tree.path(), "pytest --junitxml=junit.xml", &["reports/*.xml".into()]);
        assert!(watch.read(tree.path()).is_none(), "nothing written yet");
        std::fs::write(tree.path().join("junit.xml"), FAILING_ADD).unwrap();
        std::fs::write(tree.path().join("reports/new.xml"), "<html/>").unwrap();
        let read = watch.read(tree.path()).unwrap();
        assert_eq!(read.files, ["junit.xml"]);
        assert_eq!(read.failed.into_iter().collect::<Vec<_>>(), ["t.CalcTest.test_add"]);
        assert_eq!(read.unread.len(), 1);
        assert!(read.unread[0].1.contains("<html>"), "{:?}", read.unread);
    }

    #[test]
    fn a_report_that_is_a_link_out_of_the_tree_is_never_read() {
        let tree = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.xml"), FAILING_ADD).unwrap();
        std::fs::create_dir_all(outside.path().join("dir")).unwrap();
        std::fs::write(outside.path().join("dir/r.xml"), FAILING_ADD).unwrap();
        let watch = ReportWatch::start(
            tree.path(),
            "pytest --junitxml=junit.xml --junitxml=out/r.xml",
            &["build/reports/*.xml".into()],
        );
        std::os::unix::fs::symlink(outside.path().join("secret.xml"), tree.path().join("junit.xml")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("dir"), tree.path().join("out")).unwrap();
        // A glob's directory that is a link out of the tree is not walked either.
        std::fs::create_dir_all(tree.path().join("build")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("dir"), tree.path().join("build/reports")).unwrap();
        assert!(watch.read(tree.path()).is_none());
    }
}
