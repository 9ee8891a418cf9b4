//! Choosing the runner of a candidate: from its runner spec, its backend chain and the
//! model access of the run, build the [`AgentRunner`] that will produce it.

use std::collections::BTreeMap;
use std::sync::Arc;

use arbiter_core::settings::{RunnerKind, RunnerSpec};
use arbiter_llm::{Endpoint, LlmClient};

use crate::agent::AgentRunner;
use crate::builtin_agent::{AgentLimits, BuiltinRunner};
use crate::cli_runner::CliRunner;
use crate::command_runner::CommandRunner;

/// What the built-in agent and agent CLIs on a backend need to reach models: one client (connection pool and
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
        RunnerKind::Agent(agent) => {
            let endpoint = match chain.first() {
                None => None,
                Some(name) => Some(
                    models
                        .and_then(|m| m.endpoints.get(name))
                        .cloned()
                        .ok_or_else(|| format!("backend '{name}' is not configured"))?,
                ),
            };
            Ok(Box::new(CliRunner::new(&spec.name, agent, endpoint)?))
        }
    }
}

/// The variables an agent CLI reads from arbiter's own environment beyond the allowlist:
/// on its own provider, its key variables (`ANTHROPIC_API_KEY`, ...) and the settings it
/// honours (`ANTHROPIC_BASE_URL`, ...); on a backend nothing, since the invocation sets the
/// endpoint and the backend's key itself (so no other key reaches the agent).
pub fn agent_passthrough(spec: &RunnerSpec) -> Vec<String> {
    let RunnerKind::Agent(agent) = &spec.kind else { return Vec::new() };
    let Some(cli) = arbiter_agents::CliAgent::parse(&agent.cli) else { return Vec::new() };
    if !agent.backends.is_empty() {
        return Vec::new();
    }
    cli.key_env_vars().iter().chain(cli.setting_env_vars()).map(|v| v.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbiter_core::settings::AgentCliSpec;

    fn agent_spec(cli: &str, backends: &[&str]) -> RunnerSpec {
        RunnerSpec {
            name: cli.into(),
            kind: RunnerKind::Agent(AgentCliSpec {
                cli: cli.into(),
                backends: backends.iter().map(|b| b.to_string()).collect(),
                ..Default::default()
            }),
            env_passthrough: Vec::new(),
        }
    }

    #[test]
    fn own_provider_keys_pass_only_without_a_backend() {
        let own = agent_passthrough(&agent_spec("claude-code", &[]));
        assert!(own.contains(&"ANTHROPIC_API_KEY".to_string()) && own.contains(&"ANTHROPIC_BASE_URL".to_string()));
        assert!(!own.contains(&"OPENAI_API_KEY".to_string()), "another CLI's key: {own:?}");
        assert!(agent_passthrough(&agent_spec("claude-code", &["local"])).is_empty());
        let command = RunnerSpec {
            name: "command".into(),
            kind: RunnerKind::Command { command: "true".into() },
            env_passthrough: Vec::new(),
        };
        assert!(agent_passthrough(&command).is_empty());
    }

    #[test]
    fn agent_specs_build_cli_runners() {
        let runner = from_spec(&agent_spec("codex", &[]), &[], None).map_err(|e| e.to_string()).unwrap();
        assert_eq!(runner.kind(), "codex");
        assert!(runner.invocation().starts_with("codex exec --json"), "{}", runner.invocation());
        let e = from_spec(&agent_spec("codex", &["ghost"]), &["ghost".to_string()], None).err().unwrap();
        assert!(e.contains("backend 'ghost' is not configured"), "{e}");
    }
}
