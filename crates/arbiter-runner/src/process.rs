//! Child processes in their own process group, with a wall-clock limit and cancellation.
//!
//! Every agent, setup and verify command runs as the leader of a new process group, so the
//! whole tree (grandchildren included) can be signalled at once. On timeout or
//! cancellation the group gets SIGTERM, a grace period, then SIGKILL. When the leader exits
//! on its own, any process it left behind in its group is killed too: a candidate never
//! outlives its slot. Output goes to files, never pipes, so a grandchild holding a stream
//! open cannot hang arbiter.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio_util::sync::CancellationToken;

/// How long a group has between SIGTERM and SIGKILL.
pub const KILL_GRACE: Duration = Duration::from_secs(2);

/// A shell command to run.
#[derive(Clone, Debug)]
pub struct ShellCommand {
    pub command: String,
    pub cwd: PathBuf,
    /// The complete environment (nothing is inherited).
    pub env: Vec<(String, String)>,
    /// Where stdout goes.
    pub stdout: PathBuf,
    /// Where stderr goes; the same path as stdout interleaves both in one file.
    pub stderr: PathBuf,
    pub timeout: Duration,
}

/// How a process ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Exit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub cancelled: bool,
    pub duration: Duration,
}

impl Exit {
    pub fn success(&self) -> bool {
        self.code == Some(0) && !self.timed_out && !self.cancelled
    }
}

/// Runs `sh -c COMMAND` to completion, timeout or cancellation.
pub async fn run_shell(cmd: &ShellCommand, cancel: &CancellationToken) -> std::io::Result<Exit> {
    let stdout = File::create(&cmd.stdout)?;
    let stderr = if cmd.stderr == cmd.stdout { stdout.try_clone()? } else { File::create(&cmd.stderr)? };
    let started = Instant::now();
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(&cmd.command)
        .current_dir(&cmd.cwd)
        .env_clear()
        .envs(cmd.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr))
        .process_group(0)
        .kill_on_drop(true)
        .spawn()?;
    let pgid = child.id().map(|id| Pid::from_raw(id as i32));

    let mut exit = Exit::default();
    let status = tokio::select! {
        status = child.wait() => Some(status?),
        _ = tokio::time::sleep(cmd.timeout) => { exit.timed_out = true; None }
        _ = cancel.cancelled() => { exit.cancelled = true; None }
    };
    let status = match status {
        Some(s) => s,
        None => {
            signal_group(pgid, Signal::SIGTERM);
            match tokio::time::timeout(KILL_GRACE, child.wait()).await {
                Ok(s) => s?,
                Err(_) => {
                    signal_group(pgid, Signal::SIGKILL);
                    child.wait().await?
                }
            }
        }
    };
    // Whatever the leader left behind in its group dies with it.
    signal_group(pgid, Signal::SIGKILL);
    use std::os::unix::process::ExitStatusExt;
    exit.code = status.code();
    exit.signal = status.signal();
    exit.duration = started.elapsed();
    Ok(exit)
}

fn signal_group(pgid: Option<Pid>, signal: Signal) {
    if let Some(pgid) = pgid {
        // ESRCH (the group is already gone) is the expected outcome most of the time.
        let _ = killpg(pgid, signal);
    }
}

/// The last `max_bytes` of a file, as text (lossy).
pub fn read_tail(path: &Path, max_bytes: u64) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    if len > max_bytes {
        let _ = f.seek(SeekFrom::Start(len - max_bytes));
    }
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

/// Rewrites a log file with secrets masked (files over 64 MiB are left as they are).
pub fn redact_file(path: &Path, redactor: &arbiter_core::redact::Redactor) -> std::io::Result<()> {
    if std::fs::metadata(path)?.len() > 64 << 20 {
        return Ok(());
    }
    let bytes = std::fs::read(path)?;
    let text = String::from_utf8_lossy(&bytes);
    let redacted = redactor.redact(&text);
    if redacted != text {
        crate::rundir::write_atomic(path, redacted.as_bytes())?;
    }
    Ok(())
}
