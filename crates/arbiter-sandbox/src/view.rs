//! The candidate's view of the machine: a mount namespace of its own, built by the init
//! before it restricts itself (a process under Landlock cannot mount), with
//!
//! - a fresh `/proc`, which lists the processes of the candidate's PID namespace only (the
//!   init is its PID 1);
//! - a private `/tmp`: the machine's `/tmp` seen through an overlay whose upper layer is a
//!   fresh tmpfs. Every file of the machine's `/tmp` reads as before; whatever the candidate
//!   creates, changes or deletes there lands in its own layer, which no other process sees
//!   and which is gone when its namespace ends.
//!
//! Landlock cannot confine anything beneath a directory where a process may create files (a
//! rule grants everything beneath it), so beneath `/tmp` the rest of the policy is made of
//! mounts ([`plan`]): each hidden path is covered by an empty read-only tmpfs (its mount
//! point made in the candidate's own layer when the path does not exist yet, so that it
//! cannot appear later), each writable path is the real directory mounted over the overlay,
//! and each revealed path inside a hidden one is mounted back read-only. Every path is
//! resolved without following a symbolic link, so a link a candidate planted in a writable
//! directory cannot redirect a mount.
//!
//! Why not the candidate's own temporary directory mounted on `/tmp`: what arbiter gives it
//! under the machine's `/tmp` (a workspace pool, a repository there) would have to be
//! mounted back beneath it, leaving mount points in that directory; and the overlay keeps
//! every program and file of the machine's `/tmp` where it was.
//!
//! Mounting needs capabilities that an `exec` keeps only for root, so the supervisor maps
//! the user to root in the namespaces it enters, and the init gives the program the user's
//! own ids back in a user namespace nested in it ([`become_user`]), after the view is built.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat, openat2};
use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};
use nix::sys::stat::{FchmodatFlags, Mode, SFlag, fchmodat, fstat, mkdirat};
use nix::sys::statvfs::{FsFlags, statvfs};

use crate::filesystem::{self, FilesystemError, canonical};
use crate::policy::Policy;

/// The directory every program takes for temporary files.
pub const TMP: &str = "/tmp";

/// Maps one uid and one gid of this process's new user namespace (`inside`) to its ids in
/// the parent namespace (`outside`); groups cannot be changed there.
pub(crate) fn map_ids(inside_uid: u32, outside_uid: u32, inside_gid: u32, outside_gid: u32) -> Result<(), String> {
    let write = |file: &str, text: String| {
        std::fs::write(format!("/proc/self/{file}"), &text).map_err(|e| format!("cannot write {file} ({text}): {e}"))
    };
    // A process may map only its own ids into the namespace it has just entered, and a gid
    // only once it has given up setgroups.
    write("setgroups", "deny".into())?;
    write("uid_map", format!("{inside_uid} {outside_uid} 1"))?;
    write("gid_map", format!("{inside_gid} {outside_gid} 1"))
}

/// Enters a mount namespace of its own and builds the view (see the module docs); returns
/// the private temporary directory (`/tmp`, as the machine spells it). The working
/// directory is looked up again in the view: a workspace under the machine's `/tmp` is then
/// the one mounted there.
pub(crate) fn enter(policy: &Policy) -> Result<PathBuf, String> {
    let cwd = std::env::current_dir().map_err(|e| format!("cannot read the working directory: {e}"))?;
    let tmp = canonical(Path::new(TMP));
    let ops = plan(policy, &tmp).map_err(|e| e.to_string())?;
    unshare(CloneFlags::CLONE_NEWNS).map_err(failed("unshare(CLONE_NEWNS)"))?;
    // Nothing mounted here may reach the machine's mount table, nor its changes reach here.
    mount(None::<&str>, "/", None::<&str>, MsFlags::MS_REC | MsFlags::MS_PRIVATE, None::<&str>)
        .map_err(failed("making every mount private"))?;
    let quiet = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    mount(Some("proc"), "/proc", Some("proc"), quiet, None::<&str>).map_err(failed("mounting a fresh /proc"))?;
    private_tmp(&tmp, &ops)?;
    std::env::set_current_dir(&cwd)
        .map_err(|e| format!("the working directory {} is out of the candidate's view: {e}", cwd.display()))?;
    Ok(tmp)
}

/// Gives this process (root of the supervisor's user namespace, which maps it to the user)
/// the user's own uid and gid back, in a user namespace nested in that one: what it starts
/// runs with the user's ids and no capability over the mounts of the view.
pub(crate) fn become_user() -> Result<(), String> {
    let outside = |file: &str| -> Result<u32, String> {
        let text =
            std::fs::read_to_string(format!("/proc/self/{file}")).map_err(|e| format!("cannot read {file}: {e}"))?;
        let fields: Vec<&str> = text.split_whitespace().collect();
        match fields.as_slice() {
            ["0", id, "1"] => id.parse().map_err(|_| format!("unreadable {file}: {text}")),
            _ => Err(format!("{file} does not map root alone: {}", text.trim())),
        }
    };
    let (uid, gid) = (outside("uid_map")?, outside("gid_map")?);
    unshare(CloneFlags::CLONE_NEWUSER).map_err(failed("unshare(CLONE_NEWUSER) for the program"))?;
    map_ids(uid, 0, gid, 0)
}

/// What is mounted under `/tmp`, in order.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Mount {
    /// Covered by an empty read-only tmpfs (a blank file for a file).
    Hidden,
    /// The machine's directory, read-only (inside a hidden one).
    Revealed,
    /// The machine's directory, writable.
    Writable,
}

/// The mounts that make `policy`'s paths under `tmp` (canonical) what the policy says:
/// relative to `tmp`, parents before children (a writable workspace inside a hidden cache is
/// mounted over the cache's cover), a hidden path before a path bound at the same place. A
/// hidden path inside a hidden one with nothing mounted between them is hidden already; a
/// revealed path outside every hidden one is readable through the overlay already.
fn plan(policy: &Policy, tmp: &Path) -> Result<Vec<(PathBuf, Mount)>, FilesystemError> {
    let under = |paths: &[PathBuf]| -> Vec<PathBuf> {
        paths.iter().filter_map(|p| p.strip_prefix(tmp).ok().map(Path::to_path_buf)).collect()
    };
    let granted = filesystem::granted(policy, None)?;
    let hidden: Vec<PathBuf> = policy.hidden.iter().filter(|p| p.is_absolute()).map(|p| canonical(p)).collect();
    let hidden = under(&hidden);
    let mut ops: Vec<(PathBuf, Mount)> = hidden.iter().map(|h| (h.clone(), Mount::Hidden)).collect();
    ops.extend(under(&granted.writable).into_iter().map(|w| (w, Mount::Writable)));
    ops.extend(
        under(&granted.revealed)
            .into_iter()
            .filter(|r| hidden.iter().any(|h| r.starts_with(h)))
            .map(|r| (r, Mount::Revealed)),
    );
    ops.sort_by(|(a, ka), (b, kb)| (a.components().count(), a, ka).cmp(&(b.components().count(), b, kb)));
    ops.dedup();
    let mut kept: Vec<(PathBuf, Mount)> = Vec::with_capacity(ops.len());
    for (path, kind) in ops {
        let enclosing = kept.iter().rev().find(|(p, _)| path.starts_with(p) && *p != path);
        if kind == Mount::Hidden && enclosing.is_some_and(|(_, k)| *k == Mount::Hidden) {
            continue;
        }
        kept.push((path, kind));
    }
    Ok(kept)
}

/// Mounts the private `/tmp` on `tmp` and `ops` under it.
fn private_tmp(tmp: &Path, ops: &[(PathBuf, Mount)]) -> Result<(), String> {
    let directory = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let machine = nix::fcntl::open(tmp, directory, Mode::empty()).map_err(failed("opening /tmp"))?;
    // The candidate's layer, and a blank file to cover hidden files with, on a tmpfs the
    // overlay covers in turn (the descriptors keep them reachable).
    let quiet = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    mount(Some("tmpfs"), tmp, Some("tmpfs"), quiet, Some("mode=0700")).map_err(failed("mounting a tmpfs on /tmp"))?;
    let scratch = nix::fcntl::open(tmp, directory, Mode::empty()).map_err(failed("opening the tmpfs"))?;
    let upper = make_dirs(&scratch, Path::new("upper"))?;
    // The overlay's root is its upper layer's: writable by all, sticky, as /tmp is.
    fchmodat(&scratch, "upper", Mode::from_bits_truncate(0o1777), FchmodatFlags::FollowSymlink)
        .map_err(failed("making the candidate's layer /tmp-like"))?;
    let work = make_dirs(&scratch, Path::new("work"))?;
    let blank = make_file(&scratch, Path::new("blank"))?;
    let layers =
        format!("lowerdir={},upperdir={},workdir={},userxattr", fd_path(&machine), fd_path(&upper), fd_path(&work));
    mount(Some("overlay"), tmp, Some("overlay"), quiet, Some(layers.as_str()))
        .map_err(failed("mounting an overlay of /tmp (Linux 5.11 or later)"))?;
    let view = nix::fcntl::open(tmp, directory, Mode::empty()).map_err(failed("opening the private /tmp"))?;

    let mut covers = Vec::new();
    for (rel, kind) in ops {
        let shown = |what: &str| format!("{what} {}", tmp.join(rel).display());
        match kind {
            Mount::Hidden => match lookup(&view, rel)? {
                Some((target, false)) => {
                    bind(&blank, &target).map_err(failed(shown("covering")))?;
                    read_only(&view, rel).map_err(failed(shown("covering")))?;
                }
                found => {
                    let target = match found {
                        Some((target, _)) => target,
                        None => make_dirs(&view, rel)?,
                    };
                    mount(Some("tmpfs"), fd_path(&target).as_str(), Some("tmpfs"), quiet, Some("mode=0755,size=64k"))
                        .map_err(failed(shown("covering")))?;
                    covers.push(rel);
                }
            },
            Mount::Revealed | Mount::Writable => {
                // Gone from the machine: nothing to show.
                let Some((source, is_dir)) = lookup(&machine, rel)? else { continue };
                let target = match lookup(&view, rel)? {
                    Some((target, same)) if same == is_dir => target,
                    Some(_) => return Err(shown("a file and a directory swapped places at")),
                    None if is_dir => make_dirs(&view, rel)?,
                    None => {
                        let parent = make_dirs(&view, rel.parent().unwrap_or(Path::new("")))?;
                        make_file(&parent, Path::new(rel.file_name().unwrap_or_default()))?
                    }
                };
                bind(&source, &target).map_err(failed(shown("mounting")))?;
                if *kind == Mount::Revealed {
                    read_only(&view, rel).map_err(failed(shown("mounting read-only")))?;
                }
            }
        }
    }
    for rel in covers {
        read_only(&view, rel).map_err(failed(format!("covering {}", tmp.join(rel).display())))?;
    }
    Ok(())
}

/// `/proc/self/fd/N`: the path of exactly what the descriptor holds, for calls that take
/// paths (mount(2)) — the kernel follows it without looking at any name again.
fn fd_path(fd: &OwnedFd) -> String {
    format!("/proc/self/fd/{}", fd.as_raw_fd())
}

/// Opens `rel` beneath `dir` (`O_PATH`) without following any symbolic link, and says
/// whether it is a directory; `None` when it does not exist.
fn lookup(dir: &OwnedFd, rel: &Path) -> Result<Option<(OwnedFd, bool)>, String> {
    match open_beneath(dir, rel, OFlag::empty()) {
        Ok(fd) => {
            let stat = fstat(&fd).map_err(failed(format!("inspecting {}", rel.display())))?;
            Ok(Some((fd, SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR)))
        }
        Err(Errno::ENOENT) => Ok(None),
        Err(e) => Err(format!("cannot open {} (a symbolic link on the way is refused): {e}", rel.display())),
    }
}

fn open_beneath(dir: &OwnedFd, rel: &Path, flags: OFlag) -> Result<OwnedFd, Errno> {
    let rel = if rel.as_os_str().is_empty() { Path::new(".") } else { rel };
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW | flags)
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
    openat2(dir, rel, how)
}

/// The directory `rel` beneath `dir`, made with its missing parents.
fn make_dirs(dir: &OwnedFd, rel: &Path) -> Result<OwnedFd, String> {
    let mut current = open_beneath(dir, Path::new(""), OFlag::O_DIRECTORY).map_err(failed("opening a directory"))?;
    for part in rel.components() {
        let name = Path::new(part.as_os_str());
        current = match open_beneath(&current, name, OFlag::O_DIRECTORY) {
            Ok(fd) => fd,
            Err(Errno::ENOENT) => {
                mkdirat(&current, name, Mode::from_bits_truncate(0o755))
                    .map_err(failed(format!("making the mount point {}", rel.display())))?;
                open_beneath(&current, name, OFlag::O_DIRECTORY)
                    .map_err(failed(format!("opening the mount point {}", rel.display())))?
            }
            Err(e) => {
                return Err(format!("cannot open {} (a symbolic link on the way is refused): {e}", rel.display()));
            }
        };
    }
    Ok(current)
}

/// An empty file `name` in `dir` (made when missing).
fn make_file(dir: &OwnedFd, name: &Path) -> Result<OwnedFd, String> {
    let made = OFlag::O_CREAT | OFlag::O_WRONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    drop(
        openat(dir, name, made, Mode::from_bits_truncate(0o644))
            .map_err(failed(format!("making {}", name.display())))?,
    );
    open_beneath(dir, name, OFlag::empty()).map_err(failed(format!("opening {}", name.display())))
}

/// Mounts what `source` holds on `target`. A directory holding mounts of the machine's is
/// bound with them (their contents are what the machine shows there).
fn bind(source: &OwnedFd, target: &OwnedFd) -> Result<(), Errno> {
    let (from, to) = (fd_path(source), fd_path(target));
    match mount(Some(from.as_str()), to.as_str(), None::<&str>, MsFlags::MS_BIND, None::<&str>) {
        Err(Errno::EINVAL) => {
            mount(Some(from.as_str()), to.as_str(), None::<&str>, MsFlags::MS_BIND | MsFlags::MS_REC, None::<&str>)
        }
        other => other,
    }
}

/// Makes the mount at `rel` beneath `view` read-only, keeping the flags the kernel locks in
/// a user namespace (a remount that dropped them would be refused).
fn read_only(view: &OwnedFd, rel: &Path) -> Result<(), Errno> {
    let mounted = open_beneath(view, rel, OFlag::empty())?;
    let path = fd_path(&mounted);
    let now = statvfs(path.as_str())?.flags();
    let mut flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
    for (have, keep) in [
        (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
        (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
        (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
    ] {
        if now.contains(have) {
            flags |= keep;
        }
    }
    mount(None::<&str>, path.as_str(), None::<&str>, flags, None::<&str>)
}

fn failed(what: impl std::fmt::Display) -> impl FnOnce(Errno) -> String {
    move |e| format!("{what} failed: {e}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(hidden: &[&str], writable: &[&str], revealed: &[&str]) -> Policy {
        let paths = |list: &[&str]| list.iter().map(PathBuf::from).collect();
        Policy { hidden: paths(hidden), writable: paths(writable), revealed: paths(revealed), ..Policy::default() }
    }

    #[test]
    fn the_plan_mounts_parents_first_and_only_what_the_overlay_does_not_show() {
        // Paths that do not exist: canonical keeps them as they are.
        let tmp = Path::new("/nonexistent-tmp");
        let p = policy(
            &[
                "/nonexistent-tmp/cache",
                "/nonexistent-tmp/cache/pools/r/slot-1/git",
                "/nonexistent-tmp/cache/config",
                "/nonexistent-tmp/repo",
                "/home/u/.ssh",
            ],
            &["/nonexistent-tmp/cache/pools/r/slot-1/tree", "/nonexistent-tmp/markers", "/home/u/work"],
            &["/nonexistent-tmp/repo/.git/objects", "/nonexistent-tmp/public", "/usr/share"],
        );
        let p = Policy { tmp: Some("/nonexistent-tmp/cache/pools/r/slot-1/tmp".into()), ..p };
        let shown: Vec<(String, Mount)> =
            plan(&p, tmp).unwrap().into_iter().map(|(rel, kind)| (rel.display().to_string(), kind)).collect();
        let expected = [
            ("cache", Mount::Hidden),
            ("markers", Mount::Writable),
            ("repo", Mount::Hidden),
            ("repo/.git/objects", Mount::Revealed),
            ("cache/pools/r/slot-1/tmp", Mount::Writable),
            ("cache/pools/r/slot-1/tree", Mount::Writable),
        ];
        let expected: Vec<(String, Mount)> = expected.into_iter().map(|(p, k)| (p.to_string(), k)).collect();
        assert_eq!(shown, expected);
    }

    #[test]
    fn a_hidden_path_inside_a_writable_one_is_covered_over_it() {
        let tmp = Path::new("/nonexistent-tmp");
        let p = policy(&["/nonexistent-tmp/shared/secret", "/nonexistent-tmp"], &["/nonexistent-tmp/shared"], &[]);
        let shown: Vec<(String, Mount)> =
            plan(&p, tmp).unwrap().into_iter().map(|(rel, kind)| (rel.display().to_string(), kind)).collect();
        let expected = [("", Mount::Hidden), ("shared", Mount::Writable), ("shared/secret", Mount::Hidden)];
        let expected: Vec<(String, Mount)> = expected.into_iter().map(|(p, k)| (p.to_string(), k)).collect();
        assert_eq!(shown, expected);
    }
}
