//! Agent runners: how a candidate's work is produced in its worktree.
//!
//! [`AgentRunner`] is the seam every runner plugs into (the `command` runner here; the
//! built-in agent and the agent CLIs alongside it). A runner gets a prepared worktree, the
//! clean prompt file, an allowlisted environment, a time limit and a cancellation token,
//! and reports how the agent ended plus the calls it made, for cost accounting.

use std::path::PathBuf;
use std::time::Duration;

use arbiter_core::artifact::AgentOutcome;
use arbiter_core::cost::CallRecord;
use arbiter_core::ids::CandidateId;
use arbiter_core::redact::Redactor;
use arbiter_core::settings::{RunnerKind, RunnerSpec};
use async_trait::async_trait;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::process::{self, ShellCommand};
use crate::rundir::JsonLines;

/// Everything a runner needs for one candidate.
pub struct AgentContext {
    pub candidate: CandidateId,
    pub worktree: PathBuf,
    /// `candidates/<id>/` in the run directory.
    pub candidate_dir: PathBuf,
    pub prompt_file: PathBuf,
    pub env: Vec<(String, String)>,
    pub timeout: Duration,
    pub cancel: CancellationToken,
    pub redactor: Redactor,
    /// The run's event log, for what a runner observes along the way (model fallbacks).
    pub events: crate::events::EventLog,
}

/// How the agent ended, and what it cost.
pub struct AgentReport {
    pub outcome: AgentOutcome,
    pub calls: Vec<CallRecord>,
}

/// A runner failure that is not the agent's own failure (the agent could not be started).
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    #[error("cannot start the agent: {0}")]
    Spawn(#[from] std::io::Error),
}

/// The seam for every kind of runner.
#[async_trait]
pub trait AgentRunner: Send + Sync {
    /// The label of candidates it produces.
    fn name(&self) -> &str;
    fn kind(&self) -> &'static str;
    /// The invocation, for the runner summary (secrets are redacted by the caller).
    fn invocation(&self) -> String;
    async fn run(&self, ctx: &AgentContext) -> Result<AgentReport, RunnerError>;
}

/// What the built-in agent needs to reach models: one client (connection pool and
/// per-backend concurrency limits shared by every candidate) and the configured endpoints,
/// keys resolved.
pub struct ModelAccess {
    pub client: std::sync::Arc<arbiter_llm::LlmClient>,
    pub endpoints: std::collections::BTreeMap<String, arbiter_llm::Endpoint>,
    pub limits: crate::builtin_agent::AgentLimits,
}

/// Builds the runner a spec describes for a candidate whose backend chain is `chain`, or
/// says why it cannot run.
pub fn from_spec(
    spec: &RunnerSpec,
    chain: &[String],
    models: Option<&ModelAccess>,
) -> Result<Box<dyn AgentRunner>, String> {
    match &spec.kind {
        RunnerKind::Command { command } => {
            Ok(Box::new(CommandRunner { name: spec.name.clone(), command: command.clone() }))
        }
        RunnerKind::Builtin { .. } => {
            let models = models.ok_or("the built-in agent has no model access configured")?;
            let endpoints = chain
                .iter()
                .map(|name| {
                    models.endpoints.get(name).cloned().ok_or_else(|| format!("backend '{name}' is not configured"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            if endpoints.is_empty() {
                return Err("the built-in agent has no backend to use".into());
            }
            Ok(Box::new(crate::builtin_agent::BuiltinRunner {
                name: spec.name.clone(),
                chain: endpoints,
                client: models.client.clone(),
                limits: models.limits,
            }))
        }
    }
}

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
        Ok(AgentReport { outcome, calls })
    }
}
