//! Choosing the runner of a candidate: from its runner spec, its backend chain and the
//! model access of the run, build the [`AgentRunner`] that will produce it.

use std::collections::BTreeMap;
use std::sync::Arc;

use arbiter_core::settings::{RunnerKind, RunnerSpec};
use arbiter_llm::{Endpoint, LlmClient};

use crate::agent::AgentRunner;
use crate::builtin_agent::{AgentLimits, BuiltinRunner};
use crate::command_runner::CommandRunner;

/// What the built-in agent needs to reach models: one client (connection pool and
/// per-backend concurrency limits shared by every candidate) and the configured endpoints,
/// keys resolved.
pub struct ModelAccess {
    pub client: Arc<LlmClient>,
    pub endpoints: BTreeMap<String, Endpoint>,
    pub limits: AgentLimits,
    /// The `selection` role's chain: the pairwise judge (empty: no judge).
    pub judges: Vec<Endpoint>,
    /// The `review` role's chain: risk reviews (empty: no reviews).
    pub reviewers: Vec<Endpoint>,
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
            Ok(Box::new(BuiltinRunner {
                name: spec.name.clone(),
                chain: endpoints,
                client: models.client.clone(),
                limits: models.limits,
            }))
        }
    }
}
