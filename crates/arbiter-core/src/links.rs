//! Where a symbolic link leads in a tree, followed as the kernel follows it — component by
//! component, through every link on the way (links to links, links to directories, `..`
//! after a link) — and which links a patch may leave in the user's tree: none that is
//! absolute, leads out of the repository's root, enters a `.git` or `.arbiter` directory, or
//! does not resolve within [`MAX_LINKS`] links.
//!
//! A link's text alone says nothing: `e -> sub/u/..` looks inside, but with `sub/u -> ..` it
//! is the directory above the repository. So every link is resolved against the whole tree
//! the patch produces. Pure: a tree is given as its links (path → target); any other
//! component is walked into as a directory whether or not the tree has one, since a
//! directory a build creates later must not turn a link into an escape.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Links followed in one resolution before it is given up (Linux's `MAXSYMLINKS`).
pub const MAX_LINKS: usize = 40;

/// Directories no link may lead into, at any depth (compared without regard to case, as
/// git compares `.git`).
const FORBIDDEN: [&str; 2] = [".git", ".arbiter"];

/// The symbolic links of a tree: path (relative to the root, `/`-separated) → target.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Links(BTreeMap<String, String>);

impl Links {
    pub fn new() -> Self {
        Links::default()
    }

    pub fn insert(&mut self, path: impl Into<String>, target: impl Into<String>) {
        self.0.insert(path.into(), target.into());
    }

    pub fn target(&self, path: &str) -> Option<&str> {
        self.0.get(path).map(String::as_str)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(p, t)| (p.as_str(), t.as_str()))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<P: Into<String>, T: Into<String>> FromIterator<(P, T)> for Links {
    fn from_iter<I: IntoIterator<Item = (P, T)>>(iter: I) -> Self {
        Links(iter.into_iter().map(|(p, t)| (p.into(), t.into())).collect())
    }
}

/// Why a link may not stay in the user's tree.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(tag = "why", content = "name", rename_all = "snake_case")]
pub enum Escape {
    /// Its resolution goes above the repository's root.
    #[default]
    LeavesRoot,
    /// It, or a link it goes through, is absolute.
    Absolute,
    /// Its target is empty.
    Empty,
    /// Its resolution enters this directory (`.git`, `.arbiter`).
    Enters(String),
    /// It goes through more than [`MAX_LINKS`] links (a loop, or a chain that long).
    TooManyLinks,
}

impl Escape {
    pub fn describe(&self) -> String {
        match self {
            Escape::LeavesRoot => "leads outside the repository".into(),
            Escape::Absolute => "is absolute, outside the repository".into(),
            Escape::Empty => "is empty".into(),
            Escape::Enters(name) => format!("leads into {name}, which is git's or arbiter's, not the project's"),
            Escape::TooManyLinks => format!("goes through more than {MAX_LINKS} links"),
        }
    }
}

/// A link that escapes: why, and the other links it went through on the way (`path ->
/// target` each, in order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Escaped {
    pub escape: Escape,
    pub via: Vec<String>,
}

/// Where the link at `path` leads (a path relative to the root), or how it escapes.
pub fn resolve(links: &Links, path: &str) -> Result<String, Escaped> {
    let target = links.target(path).unwrap_or_default();
    let mut via = Vec::new();
    let fail = |escape: Escape, via: Vec<String>| Err(Escaped { escape, via });
    if target.is_empty() {
        return fail(Escape::Empty, via);
    }
    if target.starts_with('/') {
        return fail(Escape::Absolute, via);
    }
    // Where we stand: real directories only (a link met on the way is replaced by its target).
    let mut at: Vec<&str> = path.split('/').collect();
    at.pop();
    let mut pending: Vec<&str> = target.split('/').rev().collect();
    let mut followed = 1;
    while let Some(part) = pending.pop() {
        match part {
            "" | "." => {}
            ".." => {
                if at.pop().is_none() {
                    return fail(Escape::LeavesRoot, via);
                }
            }
            name => {
                if let Some(forbidden) = FORBIDDEN.iter().find(|f| f.eq_ignore_ascii_case(name)) {
                    return fail(Escape::Enters((*forbidden).to_string()), via);
                }
                at.push(name);
                let here = at.join("/");
                let Some(next) = links.target(&here) else { continue };
                followed += 1;
                via.push(format!("{here} -> {next}"));
                if followed > MAX_LINKS {
                    return fail(Escape::TooManyLinks, via);
                }
                if next.is_empty() {
                    return fail(Escape::Empty, via);
                }
                if next.starts_with('/') {
                    return fail(Escape::Absolute, via);
                }
                at.pop();
                pending.extend(next.split('/').rev());
            }
        }
    }
    Ok(at.join("/"))
}

/// The links of `after` (the tree a patch produces) that escape, with how, given `before`
/// (the tree it was applied to): every link that escapes, except one the patch left as it
/// was (same path, same target) that escaped in `before` too — the user's own link, which
/// the patch neither made nor redirected.
pub fn escaping(before: &Links, after: &Links) -> Vec<(String, String, Escaped)> {
    after
        .iter()
        .filter_map(|(path, target)| {
            let escaped = resolve(after, path).err()?;
            let users_own = before.target(path) == Some(target) && resolve(before, path).is_err();
            (!users_own).then(|| (path.to_string(), target.to_string(), escaped))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(links: &[(&str, &str)]) -> Links {
        links.iter().copied().collect()
    }

    #[test]
    fn honest_links_resolve_inside() {
        let t = tree(&[
            ("a", "b"),
            ("dir/a", "../b"),
            ("d/e/f", "../../g/./h"),
            ("x", "./y"),
            ("sub/u", ".."),
            ("lib", "vendor/lib"),
            ("vendor/lib", "../src"),
            ("use", "lib/mod.rs"),
        ]);
        assert_eq!(resolve(&t, "a").as_deref(), Ok("b"));
        assert_eq!(resolve(&t, "dir/a").as_deref(), Ok("b"));
        assert_eq!(resolve(&t, "d/e/f").as_deref(), Ok("g/h"));
        assert_eq!(resolve(&t, "sub/u").as_deref(), Ok(""));
        // A chain through a link to a directory.
        assert_eq!(resolve(&t, "use").as_deref(), Ok("src/mod.rs"));
        assert!(escaping(&Links::new(), &t).is_empty());
    }

    #[test]
    fn chains_that_look_inside_one_at_a_time_escape_together() {
        let t = tree(&[("sub/u", ".."), ("e", "sub/u/.."), ("f", "sub/u/../.."), ("g", "e/x")]);
        for path in ["e", "f", "g"] {
            let escaped = resolve(&t, path).expect_err(path);
            assert_eq!(escaped.escape, Escape::LeavesRoot, "{path}");
            assert!(escaped.via.contains(&"sub/u -> ..".to_string()), "{path}: {:?}", escaped.via);
        }
        // A chain of three links, each harmless on its own.
        let t = tree(&[("a/l1", "../b"), ("b", "c/l3/.."), ("c/l3", "../.."), ("go", "a/l1")]);
        assert_eq!(resolve(&t, "go").map_err(|e| e.escape), Err(Escape::LeavesRoot));
        assert_eq!(resolve(&t, "a/l1").map_err(|e| e.escape), Err(Escape::LeavesRoot));
    }

    #[test]
    fn absolute_empty_git_and_loops_escape() {
        let t = tree(&[
            ("abs", "/etc/passwd"),
            ("to_abs", "abs"),
            ("empty", ""),
            ("g", ".git/config"),
            ("G", "sub/../.GIT/hooks"),
            ("a", ".arbiter/runs"),
            ("nested", "vendor/x/.git"),
            ("loop1", "loop2"),
            ("loop2", "loop1"),
        ]);
        let why = |p: &str| resolve(&t, p).map_err(|e| e.escape);
        assert_eq!(why("abs"), Err(Escape::Absolute));
        assert_eq!(why("to_abs"), Err(Escape::Absolute));
        assert_eq!(why("empty"), Err(Escape::Empty));
        assert_eq!(why("g"), Err(Escape::Enters(".git".into())));
        assert_eq!(why("G"), Err(Escape::Enters(".git".into())));
        assert_eq!(why("a"), Err(Escape::Enters(".arbiter".into())));
        assert_eq!(why("nested"), Err(Escape::Enters(".git".into())));
        assert_eq!(why("loop1"), Err(Escape::TooManyLinks));
    }

    #[test]
    fn a_missing_or_file_component_is_walked_lexically() {
        // `nothere/../..` fails today, but escapes once a build creates `nothere/`.
        let t = tree(&[("l", "nothere/../.."), ("m", "README.md/../x")]);
        assert_eq!(resolve(&t, "l").map_err(|e| e.escape), Err(Escape::LeavesRoot));
        assert_eq!(resolve(&t, "m").as_deref(), Ok("x"));
    }

    #[test]
    fn only_the_users_own_unchanged_escaping_links_are_left_alone() {
        let before = tree(&[("tools", "/opt/tools"), ("x", "sub/b/.."), ("keep", "/usr/share")]);
        // The patch redirects `tools`, makes `x` escape by adding `sub/b`, adds `e`.
        let after =
            tree(&[("tools", "/etc"), ("x", "sub/b/.."), ("sub/b", ".."), ("keep", "/usr/share"), ("e", "sub/b/../y")]);
        let found: Vec<String> = escaping(&before, &after).into_iter().map(|(p, _, _)| p).collect();
        assert_eq!(found, vec!["e", "tools", "x"]);
    }
}
