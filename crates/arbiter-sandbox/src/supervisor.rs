//! The supervisor (`__sandbox run`): the sandbox's process outside the candidate's reach.
//!
//! Started by arbiter as the leader of the candidate's process group, it
//! 1. dies with arbiter (`PR_SET_PDEATHSIG`, checked against the pid arbiter passed, so a
//!    parent that died before the call is noticed);
//! 2. enters new user and PID namespaces when the policy asks for them — the next process
//!    it starts, the init, is PID 1 there, and everything the candidate starts lives and
//!    dies in that namespace; the init builds the candidate's mount namespace ([`crate::view`])
//!    — or else becomes a child subreaper, so that orphans of the candidate (double-forked
//!    daemons) are re-parented to it rather than to the system;
//! 3. starts the init (`__sandbox init`, the launcher again), records it in the registry,
//!    and waits for it, taking SIGTERM and friends without dying (the candidate's process
//!    group receives them directly; arbiter's SIGKILL after the grace period ends it all);
//! 4. when the init has ended: without namespaces, kills every process left under it; then
//!    exits with the init's status.
//!
//! It holds nothing secret beyond the candidate's own environment, and the candidate cannot
//! read it: Landlock denies tracing and `/proc/<pid>/environ` across domains.

use std::ffi::OsString;
use std::process::Command;
use std::time::Duration;

use nix::sched::{CloneFlags, unshare};
use nix::sys::prctl;
use nix::sys::signal::{SigSet, SigmaskHow, Signal, kill, sigprocmask};
use nix::sys::signalfd::SignalFd;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Pid, getgid, getpid, getppid, getuid};

use crate::{RoleArgs, registry, setup_failed};

/// The signals the sandbox's own processes take through a signalfd instead of dying of
/// them: children ending, and the termination requests meant for the candidate.
pub(crate) fn blocked_signals() -> SigSet {
    let mut set = SigSet::empty();
    for s in [Signal::SIGCHLD, Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP, Signal::SIGQUIT] {
        set.add(s);
    }
    set
}

/// Blocks [`blocked_signals`] and returns a descriptor to read them from. (A program the
/// sandbox starts gets an empty signal mask back: the standard library resets it.)
pub(crate) fn signal_fd() -> Result<SignalFd, String> {
    let set = blocked_signals();
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&set), None).map_err(|e| format!("cannot block signals: {e}"))?;
    SignalFd::new(&set).map_err(|e| format!("cannot open a signalfd: {e}"))
}

/// Makes this process die with its parent; `expected` (the parent's pid, when known)
/// catches a parent that died before the call.
pub(crate) fn die_with_parent(expected: Option<i32>) -> Result<(), String> {
    prctl::set_pdeathsig(Signal::SIGKILL).map_err(|e| format!("cannot tie this process to its parent: {e}"))?;
    if let Some(parent) = expected
        && getppid().as_raw() != parent
    {
        return Err("the process that started the sandbox is gone".into());
    }
    Ok(())
}

/// Enters new user and PID namespaces (this process must be single-threaded); the next
/// child is PID 1 of the new PID namespace. The user keeps its uid and gid inside, unless
/// `as_root`: then it is root there (with no power outside), so that the init — whose
/// capabilities would not survive its `exec` otherwise — can build the candidate's mount
/// namespace before it gives the user back its ids ([`crate::view::become_user`]).
pub fn enter_namespaces(as_root: bool) -> Result<(), String> {
    let (uid, gid) = (getuid(), getgid());
    unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWPID)
        .map_err(|e| format!("unshare(CLONE_NEWUSER | CLONE_NEWPID) failed: {e}"))?;
    let (inside_uid, inside_gid) = if as_root { (0, 0) } else { (uid.as_raw(), gid.as_raw()) };
    crate::view::map_ids(inside_uid, uid.as_raw(), inside_gid, gid.as_raw())
}

/// The `run` role.
pub(crate) fn main(args: Vec<OsString>) -> i32 {
    let role = match RoleArgs::parse(args) {
        Ok(r) => r,
        Err(e) => return setup_failed(format!("run: {e}")),
    };
    if let Err(e) = die_with_parent(role.parent) {
        return setup_failed(e);
    }
    let signals = match signal_fd() {
        Ok(fd) => fd,
        Err(e) => return setup_failed(e),
    };
    if role.policy.namespaces {
        if let Err(e) = enter_namespaces(role.policy.mounts) {
            return setup_failed(format!("the policy asks for namespaces and {e}"));
        }
    } else if let Err(e) = prctl::set_child_subreaper(true) {
        return setup_failed(format!("cannot become a child subreaper: {e}"));
    }
    let launcher = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => return setup_failed(format!("cannot find the launcher: {e}")),
    };
    let policy = match serde_json::to_string(&role.policy) {
        Ok(p) => p,
        Err(e) => return setup_failed(e),
    };
    // The init checks, once it is tied to this process, that this process still runs:
    // by the pid `/proc` gives it, the only number both sides of the namespace share.
    let mut init = Command::new(launcher);
    init.args([crate::ENTRY, "init", "--policy", &policy]);
    if let Some(pid) = registry::own_pid() {
        init.args(["--parent", &pid.to_string()]);
    }
    let init = match init.arg("--").arg(&role.program).args(&role.args).spawn() {
        Ok(child) => Pid::from_raw(child.id() as i32),
        Err(e) => return setup_failed(format!("cannot start the sandbox's init: {e}")),
    };
    let record = role.policy.registry.as_deref().and_then(|dir| registry::record(dir, getpid(), init));

    let code = wait_for(init, &signals);
    if !role.policy.namespaces {
        kill_descendants();
    }
    if let Some(path) = record {
        registry::remove(&path);
    }
    code
}

/// Waits for `child`, reaping any other child on the way, and returns its exit code (128 +
/// the signal for a child killed by one).
pub(crate) fn wait_for(child: Pid, signals: &SignalFd) -> i32 {
    loop {
        loop {
            match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(pid, code)) if pid == child => return code,
                Ok(WaitStatus::Signaled(pid, sig, _)) if pid == child => return 128 + sig as i32,
                Ok(WaitStatus::StillAlive) => break,
                Ok(_) => continue,
                // No child left at all: the one awaited was reaped elsewhere (cannot happen).
                Err(nix::errno::Errno::ECHILD) => return crate::SETUP_FAILED,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(_) => break,
            }
        }
        // Termination requests are for the candidate, which got them through its process
        // group; this process waits for the outcome (or arbiter's SIGKILL).
        if signals.read_signal().is_err() {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Kills every process left under this one (a subreaper: orphans come here) until none is
/// left, reaping them.
fn kill_descendants() {
    for _ in 0..200 {
        let children = children_of(getpid());
        if children.is_empty() {
            return;
        }
        for child in children {
            let _ = kill(child, Signal::SIGKILL);
        }
        while let Ok(status) = waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            if status == WaitStatus::StillAlive {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The processes whose parent is `parent` (from `/proc/<pid>/stat`).
fn children_of(parent: Pid) -> Vec<Pid> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| registry::parent_of(*pid) == Some(parent.as_raw()))
        .map(Pid::from_raw)
        .collect()
}
