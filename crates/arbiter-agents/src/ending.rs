//! The verdict on one agent run, from the CLI's own terminal event and its exit code.
//!
//! For a CLI with an event stream the terminal event decides, and success also needs exit
//! code 0: CLIs exit 0 after failed turns, denied edits and read-only sandboxes, so the
//! exit code alone proves nothing, and a stream that never reached its terminal event is
//! a failure whatever the code. For text-only CLIs (aider, villani-code) the exit code is
//! all there is, unless their output showed an unrecovered error. Whether the change is
//! any good is judged elsewhere (the diff, the gates).

use serde::{Deserialize, Serialize};

use crate::agent::CliAgent;
use crate::event::FinalStatus;
use crate::summary::AgentSummary;

/// How one agent run ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "ending", rename_all = "snake_case")]
pub enum AgentEnding {
    Success,
    Failed { reason: String },
    MaxTurns,
    BudgetExceeded,
}

/// Gemini CLI's exit code for "turn limit exceeded".
const GEMINI_TURN_LIMIT_EXIT: i32 = 53;
/// Gemini CLI's exit code for a rejected prompt or arguments.
const GEMINI_INPUT_ERROR_EXIT: i32 = 42;
/// Gemini CLI's exit code when it cannot authenticate (it prints no event then).
const GEMINI_AUTH_ERROR_EXIT: i32 = 41;

/// The verdict on a run of `agent` that exited with `exit_code` (`None`: killed by a
/// signal) and whose output folded into `summary`.
pub fn ending(agent: CliAgent, exit_code: Option<i32>, summary: &AgentSummary) -> AgentEnding {
    if agent == CliAgent::Gemini {
        match exit_code {
            Some(GEMINI_TURN_LIMIT_EXIT) => return AgentEnding::MaxTurns,
            Some(GEMINI_INPUT_ERROR_EXIT) => {
                return AgentEnding::Failed { reason: "gemini rejected its input (exit code 42)".into() };
            }
            Some(GEMINI_AUTH_ERROR_EXIT) => {
                return AgentEnding::Failed {
                    reason: "gemini could not authenticate (exit code 41): give it GEMINI_API_KEY".into(),
                };
            }
            _ => {}
        }
    }
    match &summary.final_status {
        Some(FinalStatus::MaxTurns) => AgentEnding::MaxTurns,
        Some(FinalStatus::BudgetExceeded) => AgentEnding::BudgetExceeded,
        Some(FinalStatus::Error { message }) => AgentEnding::Failed { reason: message.clone() },
        Some(FinalStatus::Success) => match exit_code {
            Some(0) => AgentEnding::Success,
            other => AgentEnding::Failed { reason: format!("{agent} reported success but {}", exited(other)) },
        },
        None if agent.structured_output() => {
            AgentEnding::Failed { reason: format!("{agent} {} without {}", exited(exit_code), terminal_event(agent)) }
        }
        None => match exit_code {
            Some(0) => AgentEnding::Success,
            other => AgentEnding::Failed { reason: format!("{agent} {}", exited(other)) },
        },
    }
}

fn exited(exit_code: Option<i32>) -> String {
    match exit_code {
        Some(code) => format!("exited with code {code}"),
        None => "was killed by a signal".to_string(),
    }
}

/// What a finished run of `agent` ends its output with.
fn terminal_event(agent: CliAgent) -> &'static str {
    match agent {
        CliAgent::ClaudeCode => "a result line",
        CliAgent::Codex => "a completed turn",
        CliAgent::Gemini => "a result event",
        CliAgent::OpenCode => "a final step",
        CliAgent::Aider | CliAgent::VillaniCode => "its final output",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(status: Option<FinalStatus>) -> AgentSummary {
        AgentSummary { final_status: status, ..Default::default() }
    }

    #[test]
    fn the_terminal_event_decides_and_success_needs_exit_zero() {
        let ok = with(Some(FinalStatus::Success));
        assert_eq!(ending(CliAgent::ClaudeCode, Some(0), &ok), AgentEnding::Success);
        assert_eq!(
            ending(CliAgent::ClaudeCode, Some(1), &ok),
            AgentEnding::Failed { reason: "claude-code reported success but exited with code 1".into() }
        );
        assert_eq!(
            ending(CliAgent::Codex, None, &ok),
            AgentEnding::Failed { reason: "codex reported success but was killed by a signal".into() }
        );
        let failed = with(Some(FinalStatus::Error { message: "API Error: 400".into() }));
        assert_eq!(ending(CliAgent::Codex, Some(0), &failed), AgentEnding::Failed { reason: "API Error: 400".into() });
        assert_eq!(ending(CliAgent::ClaudeCode, Some(1), &with(Some(FinalStatus::MaxTurns))), AgentEnding::MaxTurns);
        assert_eq!(
            ending(CliAgent::OpenCode, Some(0), &with(Some(FinalStatus::BudgetExceeded))),
            AgentEnding::BudgetExceeded
        );
    }

    #[test]
    fn a_missing_terminal_event_fails_a_structured_cli_only() {
        assert_eq!(
            ending(CliAgent::ClaudeCode, Some(0), &with(None)),
            AgentEnding::Failed { reason: "claude-code exited with code 0 without a result line".into() }
        );
        assert_eq!(ending(CliAgent::Aider, Some(0), &with(None)), AgentEnding::Success);
        assert_eq!(
            ending(CliAgent::VillaniCode, Some(2), &with(None)),
            AgentEnding::Failed { reason: "villani-code exited with code 2".into() }
        );
        assert_eq!(
            ending(CliAgent::Aider, None, &with(None)),
            AgentEnding::Failed { reason: "aider was killed by a signal".into() }
        );
    }

    #[test]
    fn gemini_exit_codes() {
        assert_eq!(ending(CliAgent::Gemini, Some(53), &with(None)), AgentEnding::MaxTurns);
        let failed = with(Some(FinalStatus::Error { message: "turn limit".into() }));
        assert_eq!(ending(CliAgent::Gemini, Some(53), &failed), AgentEnding::MaxTurns);
        assert!(matches!(ending(CliAgent::Gemini, Some(42), &with(None)), AgentEnding::Failed { .. }));
        assert!(
            matches!(ending(CliAgent::Gemini, Some(41), &with(None)), AgentEnding::Failed { reason } if reason.contains("authenticate"))
        );
        assert!(matches!(ending(CliAgent::Codex, Some(53), &with(None)), AgentEnding::Failed { .. }));
    }
}
