//! The `run_shell` tool: `sh -c` in the worktree, in its own process group, with a timeout.
//!
//! Standard output and standard error go together to one temporary file outside the
//! worktree (never a pipe: a grandchild holding it open cannot hang the agent); the model
//! gets its head and tail when it is longer than the output limit.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use super::{MAX_SHELL_TIMEOUT, ToolOutcome, ToolResult, Toolbox, bad_args, failed, opt_uint, req_str};
use crate::process::{self, ShellCommand};

pub(super) async fn run_shell(tb: &Toolbox, args: &Value) -> ToolResult {
    let command = req_str(args, "command")?;
    if command.trim().is_empty() {
        return Err(bad_args("`command` is empty."));
    }
    let mut notes = Vec::new();
    let timeout = match opt_uint(args, "timeout_seconds")? {
        Some(0) => return Err(bad_args("`timeout_seconds` must be at least 1.")),
        Some(s) if s > MAX_SHELL_TIMEOUT.as_secs() => {
            notes.push(format!("[timeout_seconds capped at {}]", MAX_SHELL_TIMEOUT.as_secs()));
            MAX_SHELL_TIMEOUT
        }
        Some(s) => Duration::from_secs(s),
        None => tb.shell_timeout,
    };
    let log = tempfile::Builder::new()
        .prefix("arbiter-tool-shell-")
        .suffix(".log")
        .tempfile()
        .map_err(|e| failed(format!("could not create a file for the command's output: {e}. Try again.")))?;
    let cmd = ShellCommand {
        command: command.to_string(),
        cwd: tb.root.clone(),
        env: tb.env.clone(),
        stdout: log.path().to_path_buf(),
        stderr: log.path().to_path_buf(),
        timeout,
        jail: tb.jail.clone(),
    };
    let exit =
        process::run_shell(&cmd, &tb.cancel).await.map_err(|e| failed(format!("could not run the command: {e}.")))?;
    let output = head_and_tail(log.path(), tb.output_limit);

    let mut content = if output.is_empty() { "(no output)\n".to_string() } else { output };
    if !content.ends_with('\n') {
        content.push('\n');
    }
    for note in notes {
        content.push_str(&note);
        content.push('\n');
    }
    let is_error = exit.timed_out || exit.cancelled;
    let status = if exit.timed_out {
        format!(
            "[timed out after {} s: the command and every process it started were killed. Give a larger \
             timeout_seconds (at most {}), or run something quicker]",
            timeout.as_secs(),
            MAX_SHELL_TIMEOUT.as_secs()
        )
    } else if exit.cancelled {
        "[cancelled: the run is stopping; the command was killed]".to_string()
    } else if let Some(code) = exit.code {
        format!("[exit code: {code}]")
    } else if let Some(signal) = exit.signal {
        format!("[killed by signal {signal}]")
    } else {
        "[ended without an exit code]".to_string()
    };
    content.push_str(&status);
    Ok(ToolOutcome { content, is_error, ..Default::default() })
}

/// The file's text, or when it is longer than `limit` bytes its first and last `limit / 2`
/// bytes around a note saying how much was left out.
fn head_and_tail(path: &Path, limit: usize) -> String {
    let Ok(mut file) = File::open(path) else {
        return String::new();
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    if len <= limit as u64 {
        let mut buf = Vec::new();
        let _ = file.read_to_end(&mut buf);
        return String::from_utf8_lossy(&buf).into_owned();
    }
    let half = (limit / 2) as u64;
    let mut head = Vec::new();
    let _ = file.by_ref().take(half).read_to_end(&mut head);
    let mut tail = Vec::new();
    if file.seek(SeekFrom::Start(len - half)).is_ok() {
        let _ = file.read_to_end(&mut tail);
    }
    let omitted = len - head.len() as u64 - tail.len() as u64;
    format!(
        "{}\n[output truncated: {omitted} bytes omitted]\n{}",
        String::from_utf8_lossy(&head),
        String::from_utf8_lossy(&tail)
    )
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use serde_json::json;

    use super::super::test_support::Fixture;

    #[tokio::test]
    async fn runs_in_the_worktree_with_combined_output_and_exit_code() {
        let f = Fixture::new();
        f.put("hello.txt", "hi\n");
        let out = f.ok("run_shell", json!({"command": "cat hello.txt; echo oops >&2; pwd"})).await;
        let wt = f.wt().display().to_string();
        assert_eq!(out.content, format!("hi\noops\n{wt}\n[exit code: 0]"));

        let out = f.ok("run_shell", json!({"command": "echo failing; exit 3"})).await;
        assert_eq!(out.content, "failing\n[exit code: 3]");

        let out = f.ok("run_shell", json!({"command": "true"})).await;
        assert_eq!(out.content, "(no output)\n[exit code: 0]");

        // The environment is the toolbox's, nothing inherited.
        let out = f.ok("run_shell", json!({"command": "env | cut -d= -f1 | sort | tr '\\n' ' '"})).await;
        assert!(out.content.contains("HOME PATH"), "{}", out.content);
        assert!(!out.content.contains("CARGO"), "{}", out.content);

        // The output file is not in the worktree.
        let listing = f.ok("list_files", json!({})).await;
        assert_eq!(listing.content, "hello.txt\n");
    }

    #[tokio::test]
    async fn a_timeout_kills_the_whole_group() {
        let f = Fixture::new();
        let started = Instant::now();
        let out = f
            .call(
                "run_shell",
                json!({"command": "sleep 30 & echo $! > bg.pid; trap '' TERM; echo started; sleep 30; echo never > after.txt",
                       "timeout_seconds": 1}),
            )
            .await;
        let elapsed = started.elapsed();
        assert!(out.is_error, "{}", out.content);
        assert!(elapsed.as_secs() < 10, "{elapsed:?}");
        assert!(out.content.starts_with("started\n"), "{}", out.content);
        assert!(out.content.contains("[timed out after 1 s"), "{}", out.content);
        assert!(!f.wt().join("after.txt").exists());
        let pid = f.get("bg.pid").trim().to_string();
        // The background sleep is gone (or a zombie waiting for its reaper).
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat.rsplit(')').next().unwrap_or("").split_whitespace().next().unwrap_or("");
        assert!(stat.is_empty() || state == "Z", "process {pid} still alive: {stat}");
    }

    #[tokio::test]
    async fn long_output_keeps_head_and_tail() {
        let f = Fixture::new();
        let toolbox = f.toolbox.clone().with_output_limit(1000);
        let out = toolbox.call("run_shell", &json!({"command": "seq 1 100000"})).await;
        assert!(!out.is_error);
        assert!(out.content.starts_with("1\n2\n3\n"), "{}", &out.content[..20]);
        assert!(out.content.ends_with("99999\n100000\n[exit code: 0]"), "{}", out.content);
        let total: usize = (1..=100000).map(|i: u32| i.to_string().len() + 1).sum();
        let note = format!("[output truncated: {} bytes omitted]", total - 1000);
        assert!(out.content.contains(&note), "{}", out.content);
        assert!(out.content.len() < 1200, "{}", out.content.len());
    }

    #[tokio::test]
    async fn bad_shell_arguments() {
        let f = Fixture::new();
        assert!(f.err("run_shell", json!({})).await.content.contains("`command`"));
        assert!(f.err("run_shell", json!({"command": "  "})).await.content.contains("empty"));
        assert!(
            f.err("run_shell", json!({"command": "true", "timeout_seconds": 0})).await.content.contains("at least 1")
        );
        let out = f.ok("run_shell", json!({"command": "echo hi", "timeout_seconds": 999999})).await;
        assert!(out.content.contains("capped at 1800"), "{}", out.content);
    }

    #[tokio::test]
    async fn cancellation_kills_the_command() {
        let f = Fixture::new();
        let cancel = f.toolbox.cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            cancel.cancel();
        });
        let started = Instant::now();
        let out = f.call("run_shell", json!({"command": "sleep 30"})).await;
        assert!(out.is_error);
        assert!(out.content.contains("[cancelled"), "{}", out.content);
        assert!(started.elapsed().as_secs() < 10);
    }
}
