//! The fold of one run's events into its summary: session, model, token totals, the
//! CLI's own cost, commands, files touched, counts and the terminal verdict.

use std::collections::BTreeSet;
use std::path::Path;

use serde::{Deserialize, Serialize};

use arbiter_core::money::Usd;

use crate::event::{AgentEvent, FinalStatus};

/// A shell command the agent ran.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandRecord {
    pub command: String,
    /// `None` when the CLI does not report it (or the command was denied).
    pub exit_code: Option<i32>,
}

/// What one agent run did, folded from its events.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentSummary {
    pub session_id: Option<String>,
    pub model: Option<String>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_tokens: u64,
    /// Whether the CLI reported any usage: zero tokens without it means "unknown".
    pub usage_seen: bool,
    /// The total cost the CLI itself reported, if it reports cost.
    pub cli_cost: Option<Usd>,
    pub commands: Vec<CommandRecord>,
    /// Sorted, unique; relative to the worktree when the CLI named them absolutely under it.
    pub files_touched: Vec<String>,
    pub tool_calls: usize,
    pub messages: usize,
    pub unparsed_lines: usize,
    pub final_status: Option<FinalStatus>,
    /// The CLI's final answer, else its last message.
    pub final_text: Option<String>,
}

impl AgentSummary {
    /// Folds `events` in order; `worktree` is the root that absolute paths are made
    /// relative to (compared component-wise, nothing is resolved on disk).
    pub fn fold(events: &[AgentEvent], worktree: &Path) -> Self {
        let mut s = AgentSummary::default();
        let mut files = BTreeSet::new();
        let mut last_message: Option<&str> = None;
        for event in events {
            match event {
                AgentEvent::Session { id } => {
                    s.session_id.get_or_insert_with(|| id.clone());
                }
                AgentEvent::Message { text } => {
                    s.messages += 1;
                    last_message = Some(text);
                }
                AgentEvent::ToolCall { .. } => s.tool_calls += 1,
                AgentEvent::ToolResult { .. } | AgentEvent::Error { .. } => {}
                AgentEvent::Command { command, exit_code, .. } => {
                    s.commands.push(CommandRecord { command: command.clone(), exit_code: *exit_code });
                }
                AgentEvent::FileChange { path, .. } => {
                    files.insert(worktree_relative(path, worktree));
                }
                AgentEvent::Usage { input_tokens, output_tokens, cached_tokens, model } => {
                    s.usage_seen = true;
                    s.input_tokens = s.input_tokens.saturating_add(*input_tokens);
                    s.output_tokens = s.output_tokens.saturating_add(*output_tokens);
                    s.cached_tokens = s.cached_tokens.saturating_add(*cached_tokens);
                    if model.is_some() {
                        s.model.clone_from(model);
                    }
                }
                AgentEvent::Cost { usd } => s.cli_cost = Some(s.cli_cost.unwrap_or(Usd::ZERO) + *usd),
                AgentEvent::Final { status, text } => {
                    s.final_status = Some(status.clone());
                    s.final_text.clone_from(text);
                }
                AgentEvent::Unparsed { .. } => s.unparsed_lines += 1,
            }
        }
        if s.final_text.is_none() {
            s.final_text = last_message.map(str::to_string);
        }
        s.files_touched = files.into_iter().collect();
        s
    }
}

/// `path` relative to `worktree` when it is absolute and inside it; `./` dropped.
fn worktree_relative(path: &str, worktree: &Path) -> String {
    let p = Path::new(path);
    if p.is_absolute() {
        return match p.strip_prefix(worktree) {
            Ok(rel) if !rel.as_os_str().is_empty() => rel.to_string_lossy().into_owned(),
            _ => path.to_string(),
        };
    }
    let mut rel = path;
    while let Some(rest) = rel.strip_prefix("./") {
        rel = rest;
    }
    rel.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_become_worktree_relative() {
        let wt = Path::new("/w/cand-1");
        assert_eq!(worktree_relative("/w/cand-1/src/a.rs", wt), "src/a.rs");
        assert_eq!(worktree_relative("/w/cand-1/", wt), "/w/cand-1/");
        assert_eq!(worktree_relative("/w/cand-10/a.rs", wt), "/w/cand-10/a.rs");
        assert_eq!(worktree_relative("/etc/passwd", wt), "/etc/passwd");
        assert_eq!(worktree_relative("./calc.py", wt), "calc.py");
        assert_eq!(worktree_relative("calc.py", wt), "calc.py");
        assert_eq!(worktree_relative("/w/cand-1/x.py", Path::new("/w/cand-1/")), "x.py");
    }

    #[test]
    fn folds_totals_costs_and_the_last_verdict() {
        let usd = |s: &str| Usd::parse(s).unwrap();
        let events = vec![
            AgentEvent::Session { id: "s1".into() },
            AgentEvent::Session { id: "s2".into() },
            AgentEvent::Usage { input_tokens: 10, output_tokens: 2, cached_tokens: 4, model: Some("m1".into()) },
            AgentEvent::Usage { input_tokens: 5, output_tokens: 1, cached_tokens: 0, model: None },
            AgentEvent::Cost { usd: usd("0.1") },
            AgentEvent::Cost { usd: usd("0.2") },
            AgentEvent::Message { text: "working".into() },
            AgentEvent::Message { text: "done".into() },
            AgentEvent::FileChange { path: "b.py".into(), kind: "update".into() },
            AgentEvent::FileChange { path: "/w/a.py".into(), kind: "add".into() },
            AgentEvent::FileChange { path: "./b.py".into(), kind: "update".into() },
            AgentEvent::Unparsed { line: 9, reason: "x".into() },
            AgentEvent::Final { status: FinalStatus::Success, text: None },
        ];
        let s = AgentSummary::fold(&events, Path::new("/w"));
        assert_eq!(s.session_id.as_deref(), Some("s1"));
        assert_eq!((s.input_tokens, s.output_tokens, s.cached_tokens, s.usage_seen), (15, 3, 4, true));
        assert_eq!(s.model.as_deref(), Some("m1"));
        assert_eq!(s.cli_cost, Some(usd("0.3")));
        assert_eq!(s.files_touched, ["a.py", "b.py"]);
        assert_eq!((s.messages, s.unparsed_lines, s.tool_calls), (2, 1, 0));
        assert_eq!(s.final_status, Some(FinalStatus::Success));
        assert_eq!(s.final_text.as_deref(), Some("done"), "falls back to the last message");

        let empty = AgentSummary::fold(&[], Path::new("/w"));
        assert!(!empty.usage_seen);
        assert_eq!(empty.cli_cost, None);
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<AgentSummary>(&json).unwrap(), s);
    }
}
