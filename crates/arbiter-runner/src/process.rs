//! Child processes in their own process group, with a wall-clock limit and cancellation.
//!
//! Every agent, setup and verify command runs as the leader of a new process group, so the
//! whole tree (grandchildren included) can be signalled at once. On timeout or
//! cancellation the group gets SIGTERM, a grace period, then SIGKILL. When the leader exits
//! on its own, any process it left behind in its group is killed too: a candidate never
//! outlives its slot. Output goes to files, never pipes, so a grandchild holding a stream
//! open cannot hang arbiter.
//!
//! A command with a [`Jail`] runs inside the sandbox: the launcher is started as the
//! sandbox's supervisor (the group leader), which starts the command under the jail's
//! policy; a sandbox that cannot be set up as the policy demands is an error, not an exit
//! code.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use arbiter_sandbox::Jail;
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
    /// The sandbox it runs in (`None`: with arbiter's rights).
    pub jail: Option<Jail>,
}

/// A program to run with its arguments (no shell in between).
#[derive(Clone, Debug)]
pub struct ProgramCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub stdin: Stdin,
    pub cwd: PathBuf,
    /// The complete environment (nothing is inherited).
    pub env: Vec<(String, String)>,
    /// Where stdout goes.
    pub stdout: PathBuf,
    /// Where stderr goes; the same path as stdout interleaves both in one file.
    pub stderr: PathBuf,
    pub timeout: Duration,
    /// The sandbox it runs in (`None`: with arbiter's rights).
    pub jail: Option<Jail>,
}

/// What a child reads on its standard input: nothing (`/dev/null`, so a program waiting
/// for input sees end-of-file at once) or a file. Never a pipe.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Stdin {
    #[default]
    Null,
    File(PathBuf),
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
    let program = ProgramCommand {
        program: PathBuf::from("sh"),
        args: vec!["-c".into(), cmd.command.clone()],
        stdin: Stdin::Null,
        cwd: cmd.cwd.clone(),
        env: cmd.env.clone(),
        stdout: cmd.stdout.clone(),
        stderr: cmd.stderr.clone(),
        timeout: cmd.timeout,
        jail: cmd.jail.clone(),
    };
    run_program(&program, cancel).await
}

/// Runs a program with its arguments to completion, timeout or cancellation, in its own
/// process group, its output going to files (see the module docs). A bare program name is
/// looked up on the `PATH` of `cmd.env`.
pub async fn run_program(cmd: &ProgramCommand, cancel: &CancellationToken) -> std::io::Result<Exit> {
    let stdin = match &cmd.stdin {
        Stdin::Null => Stdio::null(),
        Stdin::File(path) => Stdio::from(File::open(path)?),
    };
    let stdout = File::create(&cmd.stdout)?;
    let stderr = if cmd.stderr == cmd.stdout { stdout.try_clone()? } else { File::create(&cmd.stderr)? };
    let started = Instant::now();
    let (program, args): (PathBuf, Vec<std::ffi::OsString>) = match &cmd.jail {
        Some(jail) => jail.wrap(&cmd.program, &cmd.args),
        None => (cmd.program.clone(), cmd.args.iter().map(Into::into).collect()),
    };
    let mut child = tokio::process::Command::new(&program)
        .args(&args)
        .current_dir(&cmd.cwd)
        .env_clear()
        .envs(cmd.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(stdin)
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
    if cmd.jail.is_some()
        && exit.code == Some(arbiter_sandbox::SETUP_FAILED)
        && let Some(why) = sandbox_failure(&cmd.stderr)
    {
        return Err(std::io::Error::other(format!("the sandbox could not be set up: {why}")));
    }
    Ok(exit)
}

/// The sandbox's own complaint in a log, when it wrote one.
fn sandbox_failure(log: &Path) -> Option<String> {
    let tail = read_tail(log, 4096);
    tail.lines().rev().find_map(|l| l.strip_prefix(arbiter_sandbox::MESSAGE_PREFIX).map(|m| m.trim().to_string()))
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

/// Whether process `pid` exists (on this host).
pub fn process_alive(pid: i32) -> bool {
    pid > 0 && Path::new(&format!("/proc/{pid}")).exists()
}

/// When process `pid` started (`/proc/<pid>/stat` field 22, clock ticks since boot), if it
/// runs: with the pid, it names one process even after the pid is reused.
pub fn process_start(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count from its end.
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(19)?.parse().ok()
}

/// Where `program` is: a path (containing `/`) as it is when it is an executable file, a
/// bare name searched on `path` (a `PATH` value).
pub fn find_program(program: &str, path: &str) -> Option<PathBuf> {
    if program.contains('/') {
        let p = PathBuf::from(program);
        return is_executable_file(&p).then_some(p);
    }
    if program.is_empty() {
        return None;
    }
    path.split(':').filter(|d| !d.is_empty()).map(|d| Path::new(d).join(program)).find(|p| is_executable_file(p))
}

/// Whether `p` is a file this user may execute.
pub fn is_executable_file(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(dir: &Path, program: &str, args: &[&str], stdin: Stdin) -> ProgramCommand {
        ProgramCommand {
            program: PathBuf::from(program),
            args: args.iter().map(|a| a.to_string()).collect(),
            stdin,
            cwd: dir.to_path_buf(),
            env: vec![("PATH".into(), std::env::var("PATH").unwrap_or_default())],
            stdout: dir.join("out.log"),
            stderr: dir.join("err.log"),
            timeout: Duration::from_secs(30),
            jail: None,
        }
    }

    #[tokio::test]
    async fn programs_get_their_arguments_verbatim_and_stdin_from_a_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("in.txt"), "from the file\n").unwrap();
        let cmd = command(
            dir.path(),
            "sh",
            &["-c", "printf '%s|' \"$@\"; cat; echo oops >&2; exit 3", "sh", "a b", "$HOME", "--x"],
            Stdin::File(dir.path().join("in.txt")),
        );
        let exit = run_program(&cmd, &CancellationToken::new()).await.unwrap();
        assert_eq!(exit.code, Some(3));
        let out = std::fs::read_to_string(dir.path().join("out.log")).unwrap();
        assert_eq!(out, "a b|$HOME|--x|from the file\n");
        assert_eq!(std::fs::read_to_string(dir.path().join("err.log")).unwrap(), "oops\n");

        let cmd = command(dir.path(), "cat", &[], Stdin::Null);
        assert_eq!(run_program(&cmd, &CancellationToken::new()).await.unwrap().code, Some(0));
        assert_eq!(std::fs::read_to_string(dir.path().join("out.log")).unwrap(), "");
    }

    #[tokio::test]
    async fn a_missing_program_is_an_error_and_lookups_use_path() {
        let dir = tempfile::tempdir().unwrap();
        let cmd = command(dir.path(), "/no/such/program", &[], Stdin::Null);
        assert!(run_program(&cmd, &CancellationToken::new()).await.is_err());
        let path = std::env::var("PATH").unwrap_or_default();
        assert!(find_program("sh", &path).is_some_and(|p| p.is_absolute()));
        assert_eq!(find_program("no-such-program-xyz", &path), None);
        assert_eq!(find_program("sh", ""), None);
        assert_eq!(find_program("", &path), None);
        let script = dir.path().join("tool");
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        assert_eq!(find_program(script.to_str().unwrap(), ""), None, "not executable");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(find_program(script.to_str().unwrap(), ""), Some(script.clone()));
        assert_eq!(find_program("tool", dir.path().to_str().unwrap()), Some(script));
    }
}
