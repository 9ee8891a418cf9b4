//! Capturing a candidate's work as a patch, and checking that it applies to the base.
//!
//! The patch is every change against the base commit, whatever the agent did with git:
//! modified, new (untracked), deleted, renamed and binary files and mode changes; ignored
//! files and arbiter's own `.arbiter/` are left out. Because it is taken against the base
//! commit through the index, an agent that committed its work is captured the same way as
//! one that left it in the working tree.

use std::path::Path;

use arbiter_core::protect::{Touch, glob_match, parse_name_status};

use crate::git::{Git, GitError};

const EXCLUDE_ARBITER: &str = ":(exclude).arbiter";

/// `git diff --binary` of everything in `worktree` against `base`, but for the files the
/// candidate added under `build_outputs` (globs: `__pycache__`, `node_modules`, ...), which
/// are build and cache output, not work. Files the base tracks there still count.
pub async fn capture_patch(worktree: &Git, base: &str, build_outputs: &[String]) -> Result<String, GitError> {
    worktree.run(["add", "--all", "--", ".", EXCLUDE_ARBITER]).await?;
    unstage_added_outputs(worktree, base, build_outputs).await?;
    let out = worktree
        .run([
            "diff",
            "--cached",
            "--binary",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--find-renames",
            "--src-prefix=a/",
            "--dst-prefix=b/",
            base,
            "--",
            ".",
            EXCLUDE_ARBITER,
        ])
        .await?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
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
/// [`capture_patch`], which stages everything).
pub async fn touched_paths(worktree: &Git, base: &str) -> Result<Vec<(String, Touch)>, GitError> {
    let out = worktree
        .run([
            "diff",
            "--cached",
            "--name-status",
            "-z",
            "--find-renames",
            "--no-ext-diff",
            base,
            "--",
            ".",
            EXCLUDE_ARBITER,
        ])
        .await?;
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

/// Checks that `patch_file` applies cleanly to `base`, without touching any working tree:
/// the base is read into a private index and the patch is applied to that index.
/// Returns git's complaint when it does not apply.
pub async fn apply_check(
    repo: &Git,
    base: &str,
    patch_file: &Path,
    scratch_index: &Path,
) -> Result<Result<(), String>, GitError> {
    repo.run_with_index(["read-tree", base], Some(scratch_index)).await?;
    let result = repo
        .run_with_index(
            [
                std::ffi::OsStr::new("apply"),
                std::ffi::OsStr::new("--cached"),
                std::ffi::OsStr::new("--check"),
                patch_file.as_os_str(),
            ],
            Some(scratch_index),
        )
        .await;
    let _ = std::fs::remove_file(scratch_index);
    match result {
        Ok(_) => Ok(Ok(())),
        Err(GitError::Failed { stderr, .. }) => Ok(Err(stderr)),
        Err(e) => Err(e),
    }
}

/// Commits `patch_file` on top of `base` as a new commit, without touching any working
/// tree, and returns the commit id. The caller points a branch at it.
pub async fn commit_patch(
    repo: &Git,
    base: &str,
    patch_file: &Path,
    scratch_index: &Path,
    message: &str,
) -> Result<String, GitError> {
    match try_commit_patch(repo, base, patch_file, scratch_index, message).await? {
        Ok(commit) => Ok(commit),
        Err(stderr) => Err(GitError::Failed {
            args: format!("apply --cached {}", patch_file.display()),
            dir: repo.dir().display().to_string(),
            stderr,
        }),
    }
}

/// [`commit_patch`], with a patch that does not apply to `base` as git's complaint (the
/// check and the commit in one pass: no separate `apply --check`).
pub async fn try_commit_patch(
    repo: &Git,
    base: &str,
    patch_file: &Path,
    scratch_index: &Path,
    message: &str,
) -> Result<Result<String, String>, GitError> {
    let result = async {
        repo.run_with_index(["read-tree", base], Some(scratch_index)).await?;
        let applied = repo
            .run_with_index(
                [std::ffi::OsStr::new("apply"), std::ffi::OsStr::new("--cached"), patch_file.as_os_str()],
                Some(scratch_index),
            )
            .await;
        match applied {
            Ok(_) => {}
            Err(GitError::Failed { stderr, .. }) => return Ok(Err(stderr)),
            Err(e) => return Err(e),
        }
        let tree = repo.run_with_index(["write-tree"], Some(scratch_index)).await?.text();
        let mut args =
            vec!["commit-tree".to_string(), tree, "-p".into(), base.to_string(), "-m".into(), message.to_string()];
        if !repo.facts().await?.has_identity {
            args = [
                vec!["-c".to_string(), "user.name=arbiter".into(), "-c".into(), "user.email=arbiter@localhost".into()],
                args,
            ]
            .concat();
        }
        Ok(Ok(repo.run(args).await?.text()))
    }
    .await;
    let _ = std::fs::remove_file(scratch_index);
    result
}
