//! Running verify commands: arbiter runs them itself, in a tree it controls (the baseline's
//! workspace or a candidate's), in that tree's sandbox (a candidate's code runs when its tests
//! do), each with a time limit and its whole process group killed on timeout or interrupt. Full output goes to a log file; the
//! outcome keeps a redacted tail.

use std::path::{Path, PathBuf};
use std::time::Duration;

use arbiter_core::gate::{CommandOutcome, tail};
use arbiter_core::redact::Redactor;
use tokio_util::sync::CancellationToken;

use crate::process::{self, ShellCommand};

/// Bytes of output kept in an outcome.
const TAIL_BYTES: u64 = 4000;

/// Runs each command in `cwd`, in order, writing `log_dir/verify-<n>.log`, in `jail` (the
/// sandbox of the tree's candidate) when there is one.
#[allow(clippy::too_many_arguments)]
pub async fn run_verify(
    commands: &[String],
    cwd: &Path,
    jail: Option<&arbiter_sandbox::Jail>,
    env: &[(String, String)],
    timeout: Duration,
    log_dir: &Path,
    cancel: &CancellationToken,
    redactor: &Redactor,
) -> std::io::Result<Vec<CommandOutcome>> {
    std::fs::create_dir_all(log_dir)?;
    let mut outcomes = Vec::with_capacity(commands.len());
    for (i, command) in commands.iter().enumerate() {
        if cancel.is_cancelled() {
            break;
        }
        let log: PathBuf = log_dir.join(format!("verify-{}.log", i + 1));
        let cmd = ShellCommand {
            command: command.clone(),
            cwd: cwd.to_path_buf(),
            env: env.to_vec(),
            stdout: log.clone(),
            stderr: log.clone(),
            timeout,
            jail: jail.cloned(),
        };
        let exit = process::run_shell(&cmd, cancel).await?;
        process::redact_file(&log, redactor)?;
        let text = process::read_tail(&log, TAIL_BYTES * 2);
        outcomes.push(CommandOutcome {
            command: command.clone(),
            exit_code: if exit.cancelled { None } else { exit.code },
            timed_out: exit.timed_out,
            duration_ms: exit.duration.as_millis() as u64,
            output_tail: redactor.redact(&tail(&text, 40, TAIL_BYTES as usize)),
        });
    }
    Ok(outcomes)
}
