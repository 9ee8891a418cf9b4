//! The filesystem half of the sandbox: a [`Policy`] as Landlock rules, enforced on the
//! calling process and everything it starts.
//!
//! Landlock only grants: there is no "deny" rule. "Readable except the hidden paths" is
//! therefore built as grants on every sibling of the hidden paths and of their ancestors
//! ([`readable_roots`]): to hide `/home/u/.ssh`, `/` is opened up entry by entry except
//! `home`, `/home` except `u`, `/home/u` except `.ssh`. Symbolic links are never granted
//! (the rule would follow them into a hidden place); their targets are reached through
//! the grants on where they really are. A hidden path that does not exist yet is hidden
//! all the same: its parent is opened up entry by entry, so a file created there later is
//! not readable either. Writable and revealed hierarchies get grants of their own.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Component, Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, RestrictionStatus, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};

use crate::policy::Policy;

/// The newest Landlock ABI whose rights the rules handle (with best-effort compatibility:
/// an older kernel enforces what it knows).
const TARGET_ABI: ABI = ABI::V6;

/// Device nodes any program may need to write (the standard sinks and sources, terminals).
const WRITABLE_DEVICES: &[&str] =
    &["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx", "/dev/pts"];

/// Shared memory: Python's multiprocessing needs it for its semaphores. It is a channel
/// between candidates, not into the user's files (documented in docs/security.md).
const SHARED_MEMORY: &str = "/dev/shm";

/// Why the rules could not be built or enforced.
#[derive(Debug, thiserror::Error)]
pub enum FilesystemError {
    #[error("cannot build the Landlock rules: {0}")]
    Ruleset(#[from] landlock::RulesetError),
    #[error("the kernel does not enforce Landlock here (status {0:?})")]
    NotEnforced(RulesetStatus),
    #[error("cannot open {path} for a rule: {detail}")]
    Path { path: String, detail: String },
    #[error(
        "{path} is reached through the symbolic link {link}, inside a writable directory: a candidate may have planted it there, and the sandbox does not follow it (name the link's target in the policy instead)"
    )]
    Link { path: String, link: String },
}

/// The hierarchies a policy grants, free of symbolic links (see [`granted`]).
pub(crate) struct Granted {
    /// What it may write: its writable paths and temporary directory, and a private `/tmp`.
    pub(crate) writable: Vec<PathBuf>,
    /// What it may read inside hidden hierarchies.
    pub(crate) revealed: Vec<PathBuf>,
}

/// What `policy` grants, with `private_tmp` writable too. A path listed beneath a writable
/// one is resolved without following a symbolic link found inside that writable one: the
/// candidate may have planted it there, for the grant to land on a hidden place.
pub(crate) fn granted(policy: &Policy, private_tmp: Option<&Path>) -> Result<Granted, FilesystemError> {
    let mut listed: Vec<&Path> = policy.writable_paths().map(PathBuf::as_path).chain(private_tmp).collect();
    listed.retain(|p| p.is_absolute());
    // Outer ones first: a nested path is checked against them.
    listed.sort_by_key(|p| p.components().count());
    let mut writable: Vec<PathBuf> = Vec::with_capacity(listed.len());
    for path in listed {
        let resolved = canonical_beside(path, &writable)?;
        writable.push(resolved);
    }
    let mut revealed = Vec::with_capacity(policy.revealed.len());
    for path in policy.revealed.iter().filter(|p| p.is_absolute()) {
        revealed.push(canonical_beside(path, &writable)?);
    }
    for list in [&mut writable, &mut revealed] {
        list.sort();
        list.dedup();
    }
    Ok(Granted { writable, revealed })
}

/// `path` (absolute) free of symbolic links as far as it exists, refusing a link that lies
/// inside one of `writable`.
fn canonical_beside(path: &Path, writable: &[PathBuf]) -> Result<PathBuf, FilesystemError> {
    let mut resolved = PathBuf::from("/");
    for part in path.components() {
        match part {
            Component::Normal(name) => {
                let next = resolved.join(name);
                if fs::symlink_metadata(&next).is_ok_and(|m| m.file_type().is_symlink()) {
                    if writable.iter().any(|w| resolved.starts_with(w)) {
                        return Err(FilesystemError::Link {
                            path: path.display().to_string(),
                            link: next.display().to_string(),
                        });
                    }
                    resolved = canonical(&next);
                } else {
                    resolved = next;
                }
            }
            Component::ParentDir => {
                resolved.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    Ok(resolved)
}

/// Enforces `policy`'s filesystem rules on this process (and its future children);
/// `private_tmp`, the private `/tmp` of the candidate's view ([`crate::view`]), is writable
/// too.
pub fn enforce(policy: &Policy, private_tmp: Option<&Path>) -> Result<RestrictionStatus, FilesystemError> {
    let abi = TARGET_ABI;
    let read = AccessFs::from_read(abi);
    let all = AccessFs::from_all(abi);
    let mut created = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)?
        .scope(Scope::from_all(abi))?
        .create()?;

    let Granted { writable, revealed } = granted(policy, private_tmp)?;
    // A rule grants everything beneath its path: a hidden path beneath a writable one is
    // not Landlock's to hide (under a private /tmp, the view's mounts hide it).
    let mut hidden = canonical_all(&policy.hidden);
    hidden.retain(|h| !writable.iter().any(|w| h.starts_with(w)));
    for root in readable_roots(&hidden) {
        created = add(created, &root, read)?;
    }
    for path in &revealed {
        created = add(created, path, read)?;
    }
    for path in &writable {
        created = add(created, path, all)?;
    }
    for device in WRITABLE_DEVICES.iter().chain([&SHARED_MEMORY]) {
        let path = Path::new(device);
        if path.exists() {
            created = add(created, path, all)?;
        }
    }
    let status = created.restrict_self()?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err(FilesystemError::NotEnforced(status.ruleset));
    }
    Ok(status)
}

/// Adds a rule granting `access` beneath `path` (only the rights a file can have when it is
/// not a directory). A path that vanished meanwhile is skipped.
fn add(
    created: landlock::RulesetCreated,
    path: &Path,
    access: BitFlags<AccessFs>,
) -> Result<landlock::RulesetCreated, FilesystemError> {
    let Ok(meta) = fs::metadata(path) else {
        return Ok(created);
    };
    let access = if meta.is_dir() { access } else { access & AccessFs::from_file(TARGET_ABI) };
    let fd = match PathFd::new(path) {
        Ok(fd) => fd,
        Err(e) => return Err(FilesystemError::Path { path: path.display().to_string(), detail: e.to_string() }),
    };
    Ok(created.add_rule(PathBeneath::new(fd, access))?)
}

/// `paths` (the absolute ones) free of symbolic links as far as they exist (a hidden path
/// that does not exist yet keeps its missing tail).
fn canonical_all(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = paths.iter().filter(|p| p.is_absolute()).map(|p| canonical(p)).collect();
    out.sort();
    out.dedup();
    out
}

/// `path` free of symbolic links as far as it exists (a missing tail is kept as it is).
pub(crate) fn canonical(path: &Path) -> PathBuf {
    if let Ok(c) = path.canonicalize() {
        return c;
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => canonical(parent).join(name),
        _ => path.to_path_buf(),
    }
}

/// The hierarchies to grant read access on so that everything is readable except `hidden`
/// (canonical, absolute paths): every entry of every ancestor of a hidden path that is
/// neither hidden itself, nor an ancestor of a hidden path, nor a symbolic link.
pub fn readable_roots(hidden: &[PathBuf]) -> Vec<PathBuf> {
    if hidden.is_empty() {
        return vec![PathBuf::from("/")];
    }
    let hidden: BTreeSet<&Path> = hidden.iter().map(PathBuf::as_path).collect();
    let mut ancestors: BTreeSet<&Path> = BTreeSet::new();
    for h in &hidden {
        let mut a = h.parent();
        while let Some(p) = a {
            ancestors.insert(p);
            a = p.parent();
        }
    }
    let mut roots = Vec::new();
    for dir in &ancestors {
        // A hidden directory's own contents stay hidden, however deep other hidden paths are.
        if dir.ancestors().skip(1).any(|a| hidden.contains(a)) || hidden.contains(dir) {
            continue;
        }
        let Ok(entries) = fs::read_dir(dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if hidden.contains(path.as_path()) || ancestors.contains(path.as_path()) {
                continue;
            }
            if entry.file_type().is_ok_and(|t| t.is_symlink()) {
                continue;
            }
            roots.push(path);
        }
    }
    roots.sort();
    roots
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readable_roots_open_up_siblings_of_every_hidden_path_and_its_ancestors() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        for d in ["a/secret", "a/b/c", "a/b/hidden/inner", "d"] {
            fs::create_dir_all(root.join(d)).unwrap();
        }
        fs::write(root.join("a/file"), "x").unwrap();
        std::os::unix::fs::symlink(root.join("a/secret"), root.join("a/link")).unwrap();
        let hidden = vec![root.join("a/secret"), root.join("a/b/hidden"), root.join("a/not-yet")];
        let roots = readable_roots(&hidden);
        let under: Vec<String> =
            roots.iter().filter_map(|p| p.strip_prefix(&root).ok()).map(|p| p.display().to_string()).collect();
        // The siblings inside the temp dir; the link into a hidden place is not granted.
        assert_eq!(under, ["a/b/c", "a/file", "d"]);
        // Outside the temp dir, its ancestors' siblings are granted (e.g. /usr).
        assert!(roots.iter().any(|p| p == Path::new("/usr")), "{roots:?}");
        assert!(!roots.iter().any(|p| root.starts_with(p)), "an ancestor of a hidden path is granted whole");
    }

    #[test]
    fn nothing_hidden_means_the_whole_tree_is_readable() {
        assert_eq!(readable_roots(&[]), vec![PathBuf::from("/")]);
    }
}
