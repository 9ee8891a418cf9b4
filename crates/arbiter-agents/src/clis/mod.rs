//! One module per agent CLI, each owning both sides of that CLI: the command line,
//! environment and config files that run it unattended, and the reading of its output.
//!
//! What they share lives outside: prompt delivery and key handling in `invocation`,
//! JSON-lines reading in `json_lines`, built-in tool semantics in `tool_effects`. This
//! module picks the one for a [`CliAgent`].

pub(crate) mod aider;
pub(crate) mod claude_code;
pub(crate) mod codex;
pub(crate) mod gemini;
pub(crate) mod opencode;
pub(crate) mod villani_code;
pub(crate) mod villani_trace;

use crate::agent::CliAgent;
use crate::event::{AgentEvent, StreamParser};
use crate::invocation::{Invocation, InvocationSpec};

/// The invocation of `agent` for `spec`.
pub fn invocation(agent: CliAgent, spec: &InvocationSpec) -> Invocation {
    match agent {
        CliAgent::ClaudeCode => claude_code::invocation(spec),
        CliAgent::Codex => codex::invocation(spec),
        CliAgent::Gemini => gemini::invocation(spec),
        CliAgent::Aider => aider::invocation(spec),
        CliAgent::OpenCode => opencode::invocation(spec),
        CliAgent::VillaniCode => villani_code::invocation(spec),
    }
}

/// A fresh parser for `agent`'s output (stdout).
pub fn parser(agent: CliAgent) -> Box<dyn StreamParser> {
    match agent {
        CliAgent::ClaudeCode => Box::new(claude_code::Parser::default()),
        CliAgent::Codex => Box::new(codex::Parser::default()),
        CliAgent::Gemini => Box::new(gemini::Parser::default()),
        CliAgent::Aider => Box::new(aider::Parser::default()),
        CliAgent::OpenCode => Box::new(opencode::Parser::default()),
        CliAgent::VillaniCode => Box::new(villani_code::Parser::default()),
    }
}

/// What `agent` recorded of its run beyond its output, read once it has exited from its
/// agent home `home`: villani-code's debug trace (its commands, tool calls, edits and token
/// usage); nothing for the CLIs whose output says it all.
pub fn telemetry(agent: CliAgent, home: &std::path::Path) -> Vec<AgentEvent> {
    match agent {
        CliAgent::VillaniCode => villani_trace::read(home).map(|f| villani_trace::events(&f)).unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// Runs `agent`'s parser over a whole captured output.
pub fn parse_all(agent: CliAgent, output: &str) -> Vec<AgentEvent> {
    let mut p = parser(agent);
    let mut events: Vec<AgentEvent> = output.lines().flat_map(|l| p.line(l)).collect();
    events.extend(p.finish());
    events
}
