//! Agent runners: how a candidate's work is produced in its worktree.
//!
//! [`AgentRunner`] is the seam every runner plugs into (the `command` runner, the built-in
//! agent, and the agent CLIs). A runner gets a prepared worktree, the
//! clean prompt file, an empty home, the sandbox its processes run in, an allowlisted
//! environment, a time limit and a cancellation token,
//! and reports how the agent ended plus the calls it made, for cost accounting.

use std::path::PathBuf;
use std::time::Duration;

use arbiter_core::artifact::AgentOutcome;
use arbiter_core::cost::CallRecord;
use arbiter_core::ids::CandidateId;
use arbiter_core::redact::Redactor;
use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

/// Everything a runner needs for one candidate.
pub struct AgentContext {
    pub candidate: CandidateId,
    pub worktree: PathBuf,
    /// `candidates/<id>/` in the run directory.
    pub candidate_dir: PathBuf,
    pub prompt_file: PathBuf,
    /// The agent's home (`HOME` of an agent CLI, its configuration and temporary files),
    /// outside the worktree and empty at the start.
    pub home: PathBuf,
    /// The sandbox every process the agent starts runs in.
    pub jail: Option<arbiter_sandbox::Jail>,
    pub env: Vec<(String, String)>,
    pub timeout: Duration,
    pub cancel: CancellationToken,
    pub redactor: Redactor,
    /// The run's event log, for what a runner observes along the way (model fallbacks).
    pub events: crate::events::EventLog,
    /// The run's budget: charge every call the moment its cost is known. `cancel` is its
    /// stop token, so an agent stops when the run is interrupted or the budget is spent.
    pub budget: std::sync::Arc<crate::budget::RunBudget>,
    /// A resumed candidate: the agent session to continue, for runners that can.
    pub resume_session: Option<String>,
}

/// How the agent ended, and what it cost.
pub struct AgentReport {
    pub outcome: AgentOutcome,
    pub calls: Vec<CallRecord>,
    /// What the runner alone knows about the run (an agent CLI's session, usage, cost,
    /// commands, files and final status), recorded as `agent_cli` in `runner_summary.json`.
    pub details: Option<serde_json::Value>,
    /// Secrets the runner gave the agent beyond the run's own (a login of the user's it
    /// copied into the agent home), as (where it came from, value): the candidate's patch
    /// is searched for them like for the run's.
    pub secrets: Vec<(String, String)>,
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
