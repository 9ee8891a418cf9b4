//! Capturing a candidate's work as a patch, within the run's limits, and measuring what a
//! patch changes (for the limits and for [`crate::materialize::check`]).
//!
//! The patch is every change against the base commit, whatever the agent did with git:
//! modified, new (untracked), deleted, renamed and binary files and mode changes; ignored
//! files and arbiter's own `.arbiter/` are left out. Because it is taken against the base
//! commit through the index, an agent that committed its work is captured the same way as
//! one that left it in the working tree.
//!
//! The limits hold while capturing, not after: the changed files are measured (`git diff
//! --raw` and the sizes of their blobs) before any diff text is made; a file over
//! `max_file_bytes` stays out of the text; the text is read from git with a cap of
//! `max_patch_bytes` and cut after `max_patch_files` files. So nothing over a limit is ever
//! written whole — not `patch.diff`, not the viewer — and a cut patch begins with lines
//! saying it was cut.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Mutex, OnceLock};

use arbiter_core::limits::{self, CandidateLimits, ChangedFile, LimitBreach};
use arbiter_core::links::Links;
use arbiter_core::protect::{Touch, glob_match, parse_name_status};

use crate::git::{Git, GitError};

const EXCLUDE_ARBITER: &str = ":(exclude).arbiter";

/// Git's mode of a symbolic link.
const LINK_MODE: &str = "120000";

/// A captured patch.
#[derive(Clone, Debug, Default)]
pub struct Captured {
    /// The diff text; when a limit was broken, cut, and beginning with `#` lines that say so
    /// (git ignores text before the first `diff --git`).
    pub text: String,
    /// The limits the candidate's change broke, as far as they could be measured.
    pub breaches: Vec<LimitBreach>,
    /// The paths the change touches, and how (as [`touched_paths`] says after [`stage`]).
    pub touched: Vec<(String, Touch)>,
}

/// `git diff --binary` of everything in `worktree` against `base`, within `limits`, but for
/// the files the candidate added under `build_outputs` (globs: `__pycache__`,
/// `node_modules`, ...), which are build and cache output, not work. Files the base tracks
/// there still count.
pub async fn capture_patch(
    worktree: &Git,
    base: &str,
    build_outputs: &[String],
    limits: &CandidateLimits,
) -> Result<Captured, GitError> {
    stage(worktree, base, build_outputs).await?;
    let raw = raw_diff(worktree, base, None).await?;
    let touched = raw.touched;
    let changed = sized(worktree, raw.found).await?;
    let mut breaches = limits::check(limits, None, &changed.iter().map(Change::file).collect::<Vec<_>>());
    let mut args: Vec<String> =
        staged_diff(&["--binary", "--no-color", "--no-textconv", "--src-prefix=a/", "--dst-prefix=b/"], base)
            .into_iter()
            .map(str::to_string)
            .collect();
    // A file over its limit is never read into the text at all.
    args.extend(
        changed
            .iter()
            .filter(|c| c.bytes.is_some_and(|b| b > limits.max_file_bytes))
            .map(|c| format!(":(exclude,literal){}", c.path)),
    );
    let (bytes, more) = worktree.run_capped(&args, limits.max_patch_bytes).await?;
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    if more {
        breaches.push(LimitBreach::PatchBytes { bytes: limits.max_patch_bytes + 1, limit: limits.max_patch_bytes });
        // The last line is most likely cut in the middle.
        text.truncate(text.rfind('\n').map_or(0, |i| i + 1));
    }
    if let Some(end) = start_of_file(&text, limits.max_patch_files) {
        text.truncate(end);
    }
    if !breaches.is_empty() {
        let mut note = String::from(
            "# arbiter cut this patch short: it is not the candidate's whole change, and it is never applied.\n",
        );
        for b in &breaches {
            // A path may hold a newline: the note stays comment lines.
            note.push_str(&format!("# - {}\n", b.describe().replace('\n', "\\n")));
        }
        text.insert_str(0, &note);
    }
    Ok(Captured { text, breaches, touched })
}

/// `git diff --cached ARGS BASE` of everything but `.arbiter/`: the staged capture against
/// `base`, with renames found, as every measure of a capture reads it.
fn staged_diff<'a>(args: &[&'a str], base: &'a str) -> Vec<&'a str> {
    let mut all = vec!["diff", "--cached", "--find-renames", "--no-ext-diff"];
    all.extend_from_slice(args);
    all.extend([base, "--", ".", EXCLUDE_ARBITER]);
    all
}

/// Stages the candidate's work in `worktree` as [`capture_patch`] takes it (everything but
/// `.arbiter/` and the build outputs it added), for [`touched_paths`].
pub async fn stage(worktree: &Git, base: &str, build_outputs: &[String]) -> Result<(), GitError> {
    worktree.run(["add", "--all", "--", ".", EXCLUDE_ARBITER]).await?;
    unstage_added_outputs(worktree, base, build_outputs).await
}

/// Where the diff of file number `n` (from 0) begins in `text`, when it has that many.
fn start_of_file(text: &str, n: u64) -> Option<usize> {
    let mut seen = 0;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if line.starts_with("diff --git ") {
            if seen == n {
                return Some(at);
            }
            seen += 1;
        }
        at += line.len();
    }
    None
}

/// One file a patch changes, as `git diff --raw` and the object database say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub path: String,
    /// The mode it is left with (`000000`: deleted).
    pub mode: String,
    /// The size of the regular file it is left as.
    pub bytes: Option<u64>,
}

impl Change {
    pub fn is_link(&self) -> bool {
        self.mode == LINK_MODE
    }

    pub fn file(&self) -> ChangedFile {
        ChangedFile { path: self.path.clone(), bytes: self.bytes }
    }
}

/// What the index (`index`, or the repository's own) changes against `base`: every file,
/// with the size of the regular files it leaves, measured without reading any diff text.
pub async fn measure(repo: &Git, base: &str, index: Option<&Path>) -> Result<Vec<Change>, GitError> {
    let raw = raw_diff(repo, base, index).await?;
    sized(repo, raw.found).await
}

/// One `git diff --raw` of a staged change: each file's (path, mode, object id), and the
/// paths it touches.
struct RawDiff {
    found: Vec<(String, String, String)>,
    touched: Vec<(String, Touch)>,
}

async fn raw_diff(repo: &Git, base: &str, index: Option<&Path>) -> Result<RawDiff, GitError> {
    let out = repo.run_with_index(staged_diff(&["--raw", "-z", "--no-abbrev"], base), index).await?;
    let raw = String::from_utf8_lossy(&out.stdout);
    let mut fields = raw.split('\0');
    let mut found: Vec<(String, String, String)> = Vec::new();
    // The same records as `--name-status -z` gives: `STATUS\0PATH\0` (two paths for a
    // rename or copy).
    let mut name_status = String::new();
    while let Some(header) = fields.next() {
        let Some(header) = header.strip_prefix(':') else { continue };
        // `:OLDMODE NEWMODE OLDSHA NEWSHA STATUS`, then one path (two for a rename or copy).
        let parts: Vec<&str> = header.split(' ').collect();
        let (Some(mode), Some(sha), Some(status)) = (parts.get(1), parts.get(3), parts.get(4)) else { continue };
        name_status.push_str(status);
        name_status.push('\0');
        if status.starts_with('R') || status.starts_with('C') {
            let Some(from) = fields.next() else { break };
            name_status.push_str(from);
            name_status.push('\0');
        }
        let Some(path) = fields.next() else { break };
        name_status.push_str(path);
        name_status.push('\0');
        found.push((path.to_string(), mode.to_string(), sha.to_string()));
    }
    Ok(RawDiff { found, touched: parse_name_status(&name_status) })
}

/// The files of a raw diff with the sizes of the regular files among them.
async fn sized(repo: &Git, found: Vec<(String, String, String)>) -> Result<Vec<Change>, GitError> {
    let regular: Vec<&str> =
        found.iter().filter(|(_, mode, _)| mode.starts_with("100")).map(|(_, _, sha)| sha.as_str()).collect();
    let sizes = blob_sizes(repo, &regular).await?;
    Ok(found
        .into_iter()
        .map(|(path, mode, sha)| {
            let bytes = if mode.starts_with("100") { sizes.get(&sha).copied() } else { None };
            Change { path, mode, bytes }
        })
        .collect())
}

/// The sizes of blobs, by object id. An object id names its content, so a size once read
/// holds in every repository: the sizes read last are remembered (a patch is measured when
/// it is captured and again when it is checked, at the base and at a plan's tip).
async fn blob_sizes(repo: &Git, shas: &[&str]) -> Result<HashMap<String, u64>, GitError> {
    const REMEMBERED: usize = 4096;
    static KNOWN: OnceLock<Mutex<HashMap<String, u64>>> = OnceLock::new();
    let known = KNOWN.get_or_init(Default::default);
    let mut sizes: HashMap<String, u64> = HashMap::new();
    if let Ok(k) = known.lock() {
        sizes.extend(shas.iter().filter_map(|s| Some((s.to_string(), *k.get(*s)?))));
    }
    let unknown: Vec<&str> = shas.iter().copied().filter(|s| !sizes.contains_key(*s)).collect();
    if unknown.is_empty() {
        return Ok(sizes);
    }
    let input: String = unknown.iter().map(|s| format!("{s}\n")).collect();
    let out = repo.run_with_input(["cat-file", "--batch-check=%(objectname) %(objectsize)"], input.as_bytes()).await?;
    let read: HashMap<String, u64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (sha, size) = l.split_once(' ')?;
            Some((sha.to_string(), size.trim().parse().ok()?))
        })
        .collect();
    if let Ok(mut k) = known.lock() {
        if k.len() + read.len() > REMEMBERED {
            k.clear();
        }
        k.extend(read.iter().map(|(sha, size)| (sha.clone(), *size)));
    }
    sizes.extend(read);
    Ok(sizes)
}

/// The symbolic links of the tree of commit `commit`.
pub async fn links_at(repo: &Git, commit: &str) -> Result<Links, GitError> {
    let out = repo.run(["ls-tree", "-r", "-z", "--full-tree", commit]).await?;
    // `MODE TYPE SHA\tPATH`
    let entries = listed_links(&out.stdout, |meta| {
        let mut m = meta.split(' ');
        Some((m.next()?, m.nth(1)?))
    });
    link_targets(repo, entries).await
}

/// The symbolic links of the tree an index file holds.
pub async fn links_in_index(repo: &Git, index: &Path) -> Result<Links, GitError> {
    let out = repo.run_with_index(["ls-files", "--stage", "-z"], Some(index)).await?;
    // `MODE SHA STAGE\tPATH`
    let entries = listed_links(&out.stdout, |meta| {
        let mut m = meta.split(' ');
        Some((m.next()?, m.next()?))
    });
    link_targets(repo, entries).await
}

/// The (path, object id) of every link in a `-z` listing of `META\tPATH` records, where
/// `mode_and_sha` reads the mode and object id from `META`.
fn listed_links(listing: &[u8], mode_and_sha: impl Fn(&str) -> Option<(&str, &str)>) -> Vec<(String, String)> {
    String::from_utf8_lossy(listing)
        .split('\0')
        .filter_map(|record| {
            let (meta, path) = record.split_once('\t')?;
            let (mode, sha) = mode_and_sha(meta)?;
            (mode == LINK_MODE).then(|| (path.to_string(), sha.to_string()))
        })
        .collect()
}

/// The links (path, object id) with their targets read from the object database.
async fn link_targets(repo: &Git, entries: Vec<(String, String)>) -> Result<Links, GitError> {
    if entries.is_empty() {
        return Ok(Links::new());
    }
    let input: String = entries.iter().map(|(_, sha)| format!("{sha}\n")).collect();
    let out = repo.run_with_input(["cat-file", "--batch"], input.as_bytes()).await?;
    // `SHA TYPE SIZE\nCONTENT\n` per object, in the order asked.
    let mut contents: HashMap<String, String> = HashMap::new();
    let mut rest = out.stdout.as_slice();
    while let Some(newline) = rest.iter().position(|b| *b == b'\n') {
        let header = String::from_utf8_lossy(&rest[..newline]).into_owned();
        rest = &rest[newline + 1..];
        let mut h = header.split(' ');
        let (Some(sha), Some(size)) = (h.next(), h.nth(1).and_then(|s| s.parse::<usize>().ok())) else { continue };
        let size = size.min(rest.len());
        contents.insert(sha.to_string(), String::from_utf8_lossy(&rest[..size]).into_owned());
        rest = rest.get(size + 1..).unwrap_or_default();
    }
    Ok(entries
        .into_iter()
        .map(|(path, sha)| {
            let target = contents.get(&sha).cloned().unwrap_or_default();
            (path, target)
        })
        .collect())
}

/// Takes the files added against `base` that match `build_outputs` back out of the index.
async fn unstage_added_outputs(worktree: &Git, base: &str, build_outputs: &[String]) -> Result<(), GitError> {
    if build_outputs.is_empty() {
        return Ok(());
    }
    let added = worktree
        .run(["diff", "--cached", "--name-only", "-z", "--no-renames", "--diff-filter=A", base, "--", "."])
        .await?;
    let text = String::from_utf8_lossy(&added.stdout);
    let outputs: Vec<&str> =
        text.split('\0').filter(|p| !p.is_empty() && build_outputs.iter().any(|g| glob_match(g, p))).collect();
    if outputs.is_empty() {
        return Ok(());
    }
    let mut list = Vec::new();
    for path in outputs {
        list.extend_from_slice(literal(path).as_bytes());
        list.push(0);
    }
    worktree
        .run_with_input(
            ["rm", "--cached", "--quiet", "--ignore-unmatch", "--pathspec-from-file=-", "--pathspec-file-nul"],
            &list,
        )
        .await
        .map(|_| ())
}

/// The paths the staged capture changed against `base`, and how (call after
/// [`stage`] or [`capture_patch`]).
pub async fn touched_paths(worktree: &Git, base: &str) -> Result<Vec<(String, Touch)>, GitError> {
    let out = worktree.run(staged_diff(&["--name-status", "-z"], base)).await?;
    Ok(parse_name_status(&String::from_utf8_lossy(&out.stdout)))
}

/// Puts the base version of `paths` back in the worktree (the captured patch is unaffected:
/// it was taken before).
pub async fn restore_from_base(worktree: &Git, base: &str, paths: &[String]) -> Result<(), GitError> {
    if paths.is_empty() {
        return Ok(());
    }
    let mut args = vec!["checkout".to_string(), base.to_string(), "--".to_string()];
    args.extend(paths.iter().map(|p| literal(p)));
    worktree.run(args).await.map(|_| ())
}

/// Removes `paths`, files the base does not have, from the worktree and its index: the
/// counterpart of [`restore_from_base`] for additions (the captured patch is unaffected).
/// A path already gone is fine.
pub async fn remove_added(worktree: &Git, paths: &[String]) -> Result<(), GitError> {
    if paths.is_empty() {
        return Ok(());
    }
    let mut args = ["rm", "--quiet", "--force", "--ignore-unmatch", "--"].map(str::to_string).to_vec();
    args.extend(paths.iter().map(|p| literal(p)));
    worktree.run(args).await?;
    // Not in the index (an agent that unstaged it after the capture): still not in the tree.
    for p in paths {
        match std::fs::remove_file(worktree.dir().join(p)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
            _ => {}
        }
    }
    Ok(())
}

/// `path` as a pathspec that means exactly that path (no glob or magic).
fn literal(path: &str) -> String {
    format!(":(literal){path}")
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn repo() -> (tempfile::TempDir, Git, String) {
        let tmp = tempfile::tempdir().expect("temp dir");
        let (git, base) = crate::testing::committed_repo(tmp.path(), &[("a.txt", "a\n")]).await;
        (tmp, git, base)
    }

    fn kinds(breaches: &[LimitBreach]) -> Vec<String> {
        breaches.iter().map(|b| serde_json::to_value(b).unwrap()["breach"].as_str().unwrap().to_string()).collect()
    }

    #[tokio::test]
    async fn a_capture_says_what_it_touched_as_git_name_status_does() {
        let tmp = tempfile::tempdir().unwrap();
        let moved = "a line long enough for git to see a rename\n".repeat(20);
        let (git, base) = crate::testing::committed_repo(
            tmp.path(),
            &[("keep.txt", "k\n"), ("gone.txt", "g\n"), ("old.txt", moved.as_str())],
        )
        .await;
        std::fs::write(tmp.path().join("keep.txt"), "changed\n").unwrap();
        std::fs::remove_file(tmp.path().join("gone.txt")).unwrap();
        std::fs::rename(tmp.path().join("old.txt"), tmp.path().join("new.txt")).unwrap();
        std::fs::write(tmp.path().join("added.txt"), "a\n").unwrap();
        let captured = capture_patch(&git, &base, &[], &CandidateLimits::default()).await.unwrap();
        let listed = touched_paths(&git, &base).await.unwrap();
        assert_eq!(captured.touched, listed);
        let mut touched = captured.touched.clone();
        touched.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            touched,
            vec![
                ("added.txt".to_string(), Touch::Added),
                ("gone.txt".to_string(), Touch::Deleted),
                ("keep.txt".to_string(), Touch::Modified),
                ("new.txt".to_string(), Touch::Added),
                ("old.txt".to_string(), Touch::Deleted),
            ]
        );
    }

    #[tokio::test]
    async fn what_is_over_a_limit_is_never_read_into_the_patch_whole() {
        let (tmp, git, base) = repo().await;
        let limits = CandidateLimits { max_patch_bytes: 4000, max_patch_files: 3, max_file_bytes: 1000 };
        // 300 MB, sparse: measured, never diffed.
        std::fs::File::create(tmp.path().join("big.bin")).unwrap().set_len(300 << 20).unwrap();
        for i in 0..4 {
            std::fs::write(tmp.path().join(format!("f{i}.txt")), format!("{i}\n")).unwrap();
        }
        let captured = capture_patch(&git, &base, &[], &limits).await.unwrap();
        assert_eq!(kinds(&captured.breaches), vec!["patch_files", "file_bytes"]);
        let text = &captured.text;
        assert!(text.starts_with("# arbiter cut this patch short"), "{text}");
        assert!(text.contains("# - big.bin is 314572800 bytes"), "{text}");
        assert!(!text.contains("diff --git a/big.bin"), "{text}");
        assert_eq!(text.matches("\ndiff --git ").count(), 3, "cut after max_patch_files: {text}");

        // Under every file limit, over the patch's: read from git up to the cap only.
        let (tmp, git, base) = repo().await;
        for i in 0..6 {
            std::fs::write(tmp.path().join(format!("w{i}.txt")), format!("{}\n", "w".repeat(900))).unwrap();
        }
        let limits = CandidateLimits { max_patch_files: 10, ..limits };
        let captured = capture_patch(&git, &base, &[], &limits).await.unwrap();
        assert_eq!(kinds(&captured.breaches), vec!["patch_bytes"]);
        let note = captured.text.find("diff --git").expect("some of the diff");
        assert!(captured.text.len() - note <= 4000, "{} bytes", captured.text.len());
        assert!(captured.text.ends_with('\n'));

        // Within the limits: the whole patch, nothing added.
        let (tmp, git, base) = repo().await;
        std::fs::write(tmp.path().join("a.txt"), "b\n").unwrap();
        let captured = capture_patch(&git, &base, &[], &limits).await.unwrap();
        assert!(captured.breaches.is_empty());
        assert!(captured.text.starts_with("diff --git a/a.txt b/a.txt\n"), "{}", captured.text);
    }
}
