//! Path confinement: where the file tools may read, write and walk.
//!
//! A path argument is relative to the worktree root. It is normalized lexically first (`.`
//! dropped, `..` applied), so the operating system never sees a `..`; an absolute path, or a
//! `..` that would climb above the root, is refused. Then symbolic links are resolved: the
//! real location of an existing path, or for a path still to be created the real location of
//! its nearest existing ancestor, must lie inside the (canonical) root. Writes are refused
//! inside any `.git`. The tools then operate on the resolved path, so a symlink is followed
//! only after it was found to stay inside.
//!
//! Walks (list_files, search) never follow symbolic links, skip `.git` and respect
//! `.gitignore`, `.ignore` and `.git/info/exclude`; ignore files above the root are not read.

use std::fs;
use std::io;
use std::ops::ControlFlow;
use std::path::{Component, Path, PathBuf};

use ignore::{DirEntry, WalkBuilder};

/// A path argument, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Resolved {
    /// Relative to the root, normalized: how the model should refer to it.
    pub rel: PathBuf,
    /// The real location, symlinks resolved (for a path that does not exist yet: the real
    /// location of its nearest existing ancestor joined with the rest).
    pub real: PathBuf,
    /// The path exists (after following symlinks).
    pub exists: bool,
}

impl Resolved {
    /// `rel` for messages (`.` for the root).
    pub fn shown(&self) -> String {
        shown(&self.rel)
    }
}

/// A path relative to the root, for messages (`.` for the root).
pub(super) fn shown(rel: &Path) -> String {
    if rel.as_os_str().is_empty() { ".".to_string() } else { rel.display().to_string() }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Access {
    /// The path must exist.
    Read,
    /// The path may not exist yet; it must not be inside `.git`.
    Write,
}

const OUTSIDE: &str = "Only files inside the worktree can be accessed; use a path relative to the worktree root, \
    such as `src/main.rs`.";

/// Checks `arg` against the canonical `root`; the error is a message for the model.
pub(super) fn resolve(root: &Path, arg: &str, access: Access) -> Result<Resolved, String> {
    let arg = arg.trim();
    if arg.contains('\0') {
        return Err(format!("the path {arg:?} contains a NUL character."));
    }
    let mut rel = PathBuf::new();
    for component in Path::new(arg).components() {
        match component {
            Component::Normal(name) => rel.push(name),
            Component::CurDir => {}
            Component::ParentDir => {
                if !rel.pop() {
                    return Err(format!("`{arg}` leaves the worktree (through `..`). {OUTSIDE}"));
                }
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(format!("`{arg}` is an absolute path. {OUTSIDE}"));
            }
        }
    }
    if access == Access::Write {
        if rel.as_os_str().is_empty() {
            return Err(
                "the path is empty (or the worktree root itself); give a file path such as `src/main.rs`.".to_string()
            );
        }
        check_not_git(&rel, arg)?;
    }

    let abs = root.join(&rel);
    let (real, exists) = match fs::symlink_metadata(&abs) {
        Ok(_) => match fs::canonicalize(&abs) {
            Ok(real) => (real, true),
            // It exists but cannot be resolved: a dangling symlink (or a loop).
            Err(e) => return Err(unresolvable(arg, &e)),
        },
        Err(e) if access == Access::Read => {
            return Err(match e.kind() {
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory => {
                    format!("`{arg}` does not exist. Use list_files to see what is there.")
                }
                _ => format!("cannot access `{arg}`: {e}."),
            });
        }
        Err(_) => (real_of_new_path(root, &rel, arg)?, false),
    };
    let Ok(inside) = real.strip_prefix(root) else {
        return Err(format!(
            "`{arg}` resolves (through a symbolic link) to a location outside the worktree. {OUTSIDE}"
        ));
    };
    if access == Access::Write {
        check_not_git(inside, arg)?;
    }
    Ok(Resolved { rel, real, exists })
}

/// For a path that does not exist: its nearest existing ancestor, resolved, joined with the
/// rest. The ancestor must be a directory (once resolved).
fn real_of_new_path(root: &Path, rel: &Path, arg: &str) -> Result<PathBuf, String> {
    let parts: Vec<_> = rel.components().collect();
    for keep in (0..parts.len()).rev() {
        let ancestor: PathBuf = parts[..keep].iter().collect();
        let abs = root.join(&ancestor);
        if fs::symlink_metadata(&abs).is_err() {
            continue;
        }
        let real = fs::canonicalize(&abs).map_err(|e| unresolvable(arg, &e))?;
        if !real.starts_with(root) {
            return Err(format!(
                "`{arg}` is under `{}`, which resolves (through a symbolic link) to a location outside the worktree. \
                 {OUTSIDE}",
                shown(&ancestor)
            ));
        }
        if !real.is_dir() {
            return Err(format!("cannot create `{arg}`: `{}` is a file, not a directory.", shown(&ancestor)));
        }
        let rest: PathBuf = parts[keep..].iter().collect();
        return Ok(real.join(rest));
    }
    Err(format!("cannot access `{arg}`: the worktree root is gone."))
}

fn unresolvable(arg: &str, e: &io::Error) -> String {
    format!(
        "`{arg}` is a symbolic link whose target cannot be resolved ({e}); it may point outside the worktree or \
         nowhere. {OUTSIDE}"
    )
}

fn check_not_git(rel: &Path, arg: &str) -> Result<(), String> {
    if rel.components().any(|c| c.as_os_str() == ".git") {
        return Err(format!(
            "`{arg}` is inside `.git`; git's own files cannot be written. Change the working files only."
        ));
    }
    Ok(())
}

/// How a walk went.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct WalkInfo {
    /// The target is itself ignored (by .gitignore or similar) and was walked anyway.
    pub target_ignored: bool,
}

fn walk_builder(base: &Path) -> WalkBuilder {
    let mut b = WalkBuilder::new(base);
    b.hidden(false)
        .parents(false)
        .require_git(false)
        .git_global(false)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b));
    b
}

/// Visits every entry under `target` (itself included), which is inside the canonical
/// `root`, depth-first in name order, until `visit` breaks. Ignore rules apply from the root
/// down; a target that is itself ignored is walked anyway, with the rules inside it.
pub(super) fn walk(root: &Path, target: &Path, mut visit: impl FnMut(&DirEntry) -> ControlFlow<()>) -> WalkInfo {
    let mut reached = false;
    let mut b = walk_builder(root);
    let t = target.to_path_buf();
    b.filter_entry(move |e| e.file_name() != ".git" && (e.path().starts_with(&t) || t.starts_with(e.path())));
    for entry in b.build().flatten() {
        if !entry.path().starts_with(target) {
            continue;
        }
        reached = true;
        if visit(&entry).is_break() {
            return WalkInfo::default();
        }
    }
    if reached {
        return WalkInfo::default();
    }
    let mut b = walk_builder(target);
    b.filter_entry(|e| e.file_name() != ".git");
    for entry in b.build().flatten() {
        if visit(&entry).is_break() {
            break;
        }
    }
    WalkInfo { target_ignored: true }
}

/// `path` (under the canonical `root`) relative to the root, for output.
pub(super) fn relative(root: &Path, path: &Path) -> String {
    shown(path.strip_prefix(root).unwrap_or(path))
}

#[cfg(test)]
mod tests {
    //! The security core: every way out of the worktree, through every tool.

    use std::os::unix::fs::symlink;

    use serde_json::json;

    use super::super::test_support::Fixture;
    use super::*;

    const SECRET: &str = "TOP-SECRET-CONTENT";

    /// `<tmp>/secret.txt` (outside the worktree), `<tmp>/elsewhere/` with a secret file.
    fn outside_files(f: &Fixture) -> (PathBuf, PathBuf) {
        let secret = f.outside().join("secret.txt");
        fs::write(&secret, SECRET).unwrap();
        let elsewhere = f.outside().join("elsewhere");
        fs::create_dir(&elsewhere).unwrap();
        fs::write(elsewhere.join("file"), SECRET).unwrap();
        (secret, elsewhere)
    }

    #[test]
    fn resolve_normalizes_inside_paths() {
        let f = Fixture::new();
        let root = f.wt();
        f.put("a/b.txt", "x");
        let r = resolve(&root, "./a/../a/b.txt", Access::Read).unwrap();
        assert_eq!(r.rel, Path::new("a/b.txt"));
        assert_eq!(r.real, root.join("a/b.txt"));
        assert!(r.exists);
        let r = resolve(&root, "new/dir/c.txt", Access::Write).unwrap();
        assert_eq!(r.real, root.join("new/dir/c.txt"));
        assert!(!r.exists);
        let r = resolve(&root, ".", Access::Read).unwrap();
        assert_eq!(r.shown(), ".");
        assert_eq!(r.real, root);
    }

    #[test]
    fn resolve_refuses_every_escape() {
        let f = Fixture::new();
        let root = f.wt();
        let (secret, elsewhere) = outside_files(&f);
        symlink(&elsewhere, root.join("out")).unwrap();
        symlink(&secret, root.join("link.txt")).unwrap();
        symlink(f.outside().join("not-yet"), root.join("dangling")).unwrap();
        symlink(".git", root.join("g")).unwrap();
        fs::create_dir(root.join(".git")).unwrap();
        for access in [Access::Read, Access::Write] {
            for bad in
                ["/etc/passwd", "../secret.txt", "a/../../secret.txt", "..", "out/file", "out", "link.txt", "dangling"]
            {
                assert!(resolve(&root, bad, access).is_err(), "{bad} {access:?}");
            }
        }
        for bad in ["out/new", "out/a/b/c", "dangling/x", ".git/config", "sub/.git/x", "g/hooks/x", "", "."] {
            assert!(resolve(&root, bad, Access::Write).is_err(), "{bad}");
        }
        let msg = resolve(&root, "/etc/passwd", Access::Read).unwrap_err();
        assert!(msg.contains("absolute path"), "{msg}");
        let msg = resolve(&root, "a/../../x", Access::Write).unwrap_err();
        assert!(msg.contains("leaves the worktree"), "{msg}");
        let msg = resolve(&root, "out/file", Access::Read).unwrap_err();
        assert!(msg.contains("outside the worktree"), "{msg}");
        let msg = resolve(&root, "out/new/file", Access::Write).unwrap_err();
        assert!(msg.contains("outside the worktree"), "{msg}");
    }

    #[tokio::test]
    async fn absolute_and_parent_paths_are_refused_by_every_tool() {
        let f = Fixture::new();
        let (secret, _) = outside_files(&f);
        let abs_new = f.outside().join("created-abs.txt");
        for path in ["/etc/passwd", "../secret.txt", "a/../../secret.txt", secret.to_str().unwrap()] {
            let out = f.err("read_file", json!({"path": path})).await;
            assert!(!out.content.contains(SECRET) && !out.content.contains("root:"), "{}", out.content);
            f.err("list_files", json!({"path": path})).await;
            let out = f.err("search", json!({"pattern": "SECRET|root", "path": path})).await;
            assert!(!out.content.contains(SECRET), "{}", out.content);
            f.err("edit_file", json!({"path": path, "old": SECRET, "new": "pwned"})).await;
            f.err("write_file", json!({"path": path, "content": "pwned"})).await;
        }
        for path in ["../x", "a/../../x", "../../x", abs_new.to_str().unwrap()] {
            let out = f.err("write_file", json!({"path": path, "content": "pwned"})).await;
            assert!(out.touched.is_none());
        }
        assert_eq!(fs::read_to_string(&secret).unwrap(), SECRET);
        assert!(!f.outside().join("x").exists());
        assert!(!abs_new.exists());
        assert!(!f.wt().join("a").exists());
    }

    #[tokio::test]
    async fn a_symlinked_directory_pointing_outside_is_refused() {
        let f = Fixture::new();
        let (_, elsewhere) = outside_files(&f);
        symlink(&elsewhere, f.wt().join("out")).unwrap();

        let out = f.err("write_file", json!({"path": "out/file", "content": "pwned"})).await;
        assert!(out.content.contains("outside the worktree"), "{}", out.content);
        f.err("write_file", json!({"path": "out/new.txt", "content": "pwned"})).await;
        f.err("write_file", json!({"path": "out/sub/deep/new.txt", "content": "pwned"})).await;
        f.err("edit_file", json!({"path": "out/file", "old": SECRET, "new": "pwned"})).await;
        let out = f.err("read_file", json!({"path": "out/file"})).await;
        assert!(!out.content.contains(SECRET));
        f.err("list_files", json!({"path": "out"})).await;
        f.err("search", json!({"pattern": "SECRET", "path": "out"})).await;

        assert_eq!(fs::read_to_string(elsewhere.join("file")).unwrap(), SECRET);
        assert!(!elsewhere.join("new.txt").exists());
        assert!(!elsewhere.join("sub").exists());

        // Walks from the root do not follow it either.
        let out = f.ok("search", json!({"pattern": "SECRET"})).await;
        assert!(!out.content.contains(SECRET), "{}", out.content);
        let out = f.ok("list_files", json!({})).await;
        assert!(!out.content.contains("out/file"), "{}", out.content);
    }

    #[tokio::test]
    async fn a_symlinked_file_pointing_outside_is_refused() {
        let f = Fixture::new();
        let (secret, _) = outside_files(&f);
        symlink(&secret, f.wt().join("link.txt")).unwrap();
        let out = f.err("read_file", json!({"path": "link.txt"})).await;
        assert!(!out.content.contains(SECRET));
        f.err("write_file", json!({"path": "link.txt", "content": "pwned"})).await;
        f.err("edit_file", json!({"path": "link.txt", "old": SECRET, "new": "pwned"})).await;
        assert_eq!(fs::read_to_string(&secret).unwrap(), SECRET);

        // A dangling link to outside must not create its target.
        let target = f.outside().join("not-yet.txt");
        symlink(&target, f.wt().join("dangling")).unwrap();
        f.err("write_file", json!({"path": "dangling", "content": "pwned"})).await;
        f.err("write_file", json!({"path": "dangling/x", "content": "pwned"})).await;
        assert!(!target.exists());
    }

    #[tokio::test]
    async fn symlinks_that_stay_inside_are_followed() {
        let f = Fixture::new();
        f.put("real/file.txt", "hello\n");
        symlink("real/file.txt", f.wt().join("alias.txt")).unwrap();
        symlink("real", f.wt().join("dir")).unwrap();
        let out = f.ok("read_file", json!({"path": "alias.txt"})).await;
        assert!(out.content.contains("hello"));
        f.ok("write_file", json!({"path": "dir/new.txt", "content": "via link"})).await;
        assert_eq!(f.get("real/new.txt"), "via link");
        f.ok("edit_file", json!({"path": "alias.txt", "old": "hello", "new": "bye"})).await;
        assert_eq!(f.get("real/file.txt"), "bye\n");
    }

    #[tokio::test]
    async fn git_internals_are_not_writable() {
        let f = Fixture::new();
        f.put(".git/config", "[core]\n");
        f.put("sub/.git/HEAD", "ref\n");
        symlink(".git", f.wt().join("g")).unwrap();
        symlink(".git/config", f.wt().join("cfg")).unwrap();
        for path in [".git/config", ".git/hooks/pre-commit", "./.git/x", "sub/.git/HEAD", "g/hooks/x", "cfg", ".git"] {
            let out = f.err("write_file", json!({"path": path, "content": "pwned"})).await;
            assert!(out.content.contains(".git"), "{path}: {}", out.content);
        }
        f.err("edit_file", json!({"path": ".git/config", "old": "[core]", "new": "pwned"})).await;
        assert_eq!(f.get(".git/config"), "[core]\n");
        assert!(!f.wt().join(".git/hooks").exists());
        // Reading is allowed.
        f.ok("read_file", json!({"path": ".git/config"})).await;
    }

    #[tokio::test]
    async fn dot_dot_that_stays_inside_is_fine() {
        let f = Fixture::new();
        f.put("a/x.txt", "x\n");
        let out = f.ok("write_file", json!({"path": "a/../b/y.txt", "content": "y"})).await;
        assert_eq!(out.touched.as_deref(), Some("b/y.txt"));
        assert_eq!(f.get("b/y.txt"), "y");
        f.ok("read_file", json!({"path": "b/../a/./x.txt"})).await;
    }
}
