//! The registry of live sandboxes: one small file per supervisor naming it and the init it
//! started (pid and start time, so a reused pid is never mistaken for them).
//!
//! Normally nothing is ever found here: the supervisor removes its file, and when arbiter
//! is killed the chain of parent-death signals ends supervisor, init and namespace. The
//! registry is the net under that: [`end_orphans`], run at the start of every arbiter run,
//! kills the init of any sandbox whose supervisor is gone — and with it its namespace.

use std::path::{Path, PathBuf};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

/// One process, named so that a reused pid does not match.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessId {
    pub pid: i32,
    /// Start time in clock ticks since boot (`/proc/<pid>/stat` field 22).
    pub start: u64,
}

impl ProcessId {
    pub fn of(pid: i32) -> Option<ProcessId> {
        Some(ProcessId { pid, start: start_of(pid)? })
    }

    /// Whether this very process still runs (a zombie has ended: only its exit status is
    /// left for its parent to collect).
    pub fn alive(&self) -> bool {
        stat_fields(self.pid).is_some_and(|f| {
            f.first().is_some_and(|state| state != "Z") && f.get(19).and_then(|s| s.parse().ok()) == Some(self.start)
        })
    }
}

/// A live sandbox as the registry keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub supervisor: ProcessId,
    pub init: ProcessId,
}

/// Records the supervisor `supervisor` and its init `init` in `dir`; returns the file.
pub fn record(dir: &Path, supervisor: Pid, init: Pid) -> Option<PathBuf> {
    let record = Record { supervisor: ProcessId::of(supervisor.as_raw())?, init: ProcessId::of(init.as_raw())? };
    std::fs::create_dir_all(dir).ok()?;
    let path = dir.join(format!("{}-{}.json", record.supervisor.pid, record.supervisor.start));
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec(&record).ok()?).ok()?;
    std::fs::rename(&tmp, &path).ok()?;
    Some(path)
}

pub fn remove(path: &Path) {
    let _ = std::fs::remove_file(path);
}

/// Ends every sandbox in `dir` whose supervisor is gone (its init is killed, which ends its
/// PID namespace) and forgets it. Returns how many inits were killed.
pub fn end_orphans(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    let mut killed = 0;
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let Some(record) = std::fs::read(&path).ok().and_then(|bytes| serde_json::from_slice::<Record>(&bytes).ok())
        else {
            // Unreadable: written by hand or damaged; nothing it names can be trusted.
            remove(&path);
            continue;
        };
        if record.supervisor.alive() {
            continue;
        }
        if record.init.alive() && kill(Pid::from_raw(record.init.pid), Signal::SIGKILL).is_ok() {
            killed += 1;
        }
        remove(&path);
    }
    killed
}

/// `/proc/<process>/stat` after the command name (which may hold spaces and parentheses);
/// `process` is a pid or `self`.
fn stat_fields(process: impl std::fmt::Display) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{process}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    Some(after_name.split_whitespace().map(str::to_string).collect())
}

/// When process `pid` started, if it runs.
pub fn start_of(pid: i32) -> Option<u64> {
    stat_fields(pid)?.get(19)?.parse().ok()
}

/// The parent of process `pid`, if it runs.
pub fn parent_of(pid: i32) -> Option<i32> {
    stat_fields(pid)?.get(1)?.parse().ok()
}

/// This process's pid as `/proc` numbers it. `/proc` is the one of the namespace arbiter
/// runs in, so this is the number [`own_parent`] gives a child, even a child in a PID
/// namespace of its own.
pub(crate) fn own_pid() -> Option<i32> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    stat.split_whitespace().next()?.parse().ok()
}

/// This process's parent as `/proc` numbers it: inside the sandbox's PID namespace, where
/// `getppid()` says 0 for a parent outside it, this still names the supervisor.
pub(crate) fn own_parent() -> Option<i32> {
    stat_fields("self")?.get(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_whose_supervisor_is_gone_gets_its_init_killed_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut sleeper = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let init = ProcessId::of(sleeper.id() as i32).unwrap();
        // A supervisor that is gone: a pid that cannot exist.
        let gone = ProcessId { pid: i32::MAX, start: 1 };
        let path = dir.path().join("x.json");
        std::fs::write(&path, serde_json::to_vec(&Record { supervisor: gone, init }).unwrap()).unwrap();
        // A live supervisor (this process): left alone.
        let me = ProcessId::of(std::process::id() as i32).unwrap();
        let live = dir.path().join("y.json");
        std::fs::write(&live, serde_json::to_vec(&Record { supervisor: me, init: me }).unwrap()).unwrap();

        assert_eq!(end_orphans(dir.path()), 1);
        let status = sleeper.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(9));
        assert!(!path.exists());
        assert!(live.exists());
        assert_eq!(end_orphans(dir.path()), 0);
    }

    #[test]
    fn a_reused_pid_is_not_the_recorded_process() {
        let me = std::process::id() as i32;
        let recorded = ProcessId { pid: me, start: start_of(me).unwrap() + 1 };
        assert!(!recorded.alive());
        assert!(ProcessId::of(me).unwrap().alive());
        assert_eq!(parent_of(me), Some(nix::unistd::getppid().as_raw()));
        assert_eq!(own_parent(), Some(nix::unistd::getppid().as_raw()));
        assert_eq!(own_pid(), Some(me));
    }
}
