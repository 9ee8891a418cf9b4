//! The `command` runner: any program as an agent, run with `sh -c COMMAND` in the
//! candidate's worktree. Its output goes to files in the run directory and, redacted, into
//! the transcript.

use arbiter_core::artifact::AgentOutcome;
use arbiter_core::cost::CallRecord;
use async_trait::async_trait;
use serde_json::json;

use crate::agent::{AgentContext, AgentReport, AgentRunner, RunnerError};
use crate::process::{self, ShellCommand};
use crate::rundir::JsonLines;

/// Any program as an agent: `sh -c COMMAND` in the worktree.
pub struct CommandRunner {
    pub name: String,
    pub command: String,
}

/// Lines of agent output copied into the transcript.
const TRANSCRIPT_LINES: usize = 2000;

#[async_trait]
impl AgentRunner for CommandRunner {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        "command"
    }

    fn invocation(&self) -> String {
        format!("sh -c {}", self.command)
    }

    async fn run(&self, ctx: &AgentContext) -> Result<AgentReport, RunnerError> {
        let stdout = ctx.candidate_dir.join(arbiter_core::artifact::paths::STDOUT);
        let stderr = ctx.candidate_dir.join(arbiter_core::artifact::paths::STDERR);
        let cmd = ShellCommand {
            command: self.command.clone(),
            cwd: ctx.worktree.clone(),
            env: ctx.env.clone(),
            stdout: stdout.clone(),
            stderr: stderr.clone(),
            timeout: ctx.timeout,
            jail: ctx.jail.clone(),
        };
        let mut transcript = JsonLines::open(&ctx.candidate_dir.join(arbiter_core::artifact::paths::TRANSCRIPT))?;
        transcript.append(&json!({"type": "process_started", "command": ctx.redactor.redact(&self.command)}))?;
        let exit = process::run_shell(&cmd, &ctx.cancel).await?;
        process::redact_file(&stdout, &ctx.redactor)?;
        process::redact_file(&stderr, &ctx.redactor)?;
        for (stream, path) in [("stdout", &stdout), ("stderr", &stderr)] {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            for line in lines.iter().take(TRANSCRIPT_LINES) {
                transcript.append(&json!({"type": "output", "stream": stream, "text": ctx.redactor.redact(line)}))?;
            }
            if lines.len() > TRANSCRIPT_LINES {
                transcript.append(
                    &json!({"type": "truncated", "stream": stream, "omitted_lines": lines.len() - TRANSCRIPT_LINES}),
                )?;
            }
        }
        let outcome = AgentOutcome {
            exit_code: exit.code,
            signal: exit.signal,
            timed_out: exit.timed_out,
            cancelled: exit.cancelled,
            duration_ms: exit.duration.as_millis() as u64,
            limit_reached: None,
            failure: None,
        };
        transcript.append(&json!({"type": "process_exited", "exit_code": outcome.exit_code, "signal": outcome.signal, "timed_out": outcome.timed_out, "cancelled": outcome.cancelled, "duration_ms": outcome.duration_ms}))?;
        // A command runner reports no token usage: its one "call" is recorded as such,
        // never as free.
        let calls = vec![CallRecord {
            role: "coding".into(),
            backend: None,
            model: None,
            candidate: Some(ctx.candidate.clone()),
            input_tokens: None,
            output_tokens: None,
            cached_tokens: None,
            cost: None,
            flags: vec!["usage_unavailable".into(), "unpriced".into()],
        }];
        Ok(AgentReport { outcome, calls, details: None, secrets: Vec::new() })
    }
}
