//! The normalized vocabulary every CLI's output is read into, and the stream parser seam.
//!
//! Each CLI speaks its own format; its parser (in `clis`) maps what it recognises onto
//! these events, ignores what it does not know (new event types, new fields) and reports a
//! line it cannot read as [`AgentEvent::Unparsed`] instead of failing.

use serde::{Deserialize, Serialize};

use arbiter_core::money::Usd;

/// One thing an agent run reported.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentEvent {
    /// The CLI's session (or thread) id, usable to resume.
    Session {
        id: String,
    },
    /// Assistant text.
    Message {
        text: String,
    },
    ToolCall {
        id: Option<String>,
        name: String,
        input: serde_json::Value,
    },
    ToolResult {
        id: Option<String>,
        is_error: bool,
        excerpt: String,
    },
    /// A shell command the agent ran; `exit_code` is `None` when the CLI does not say.
    Command {
        command: String,
        exit_code: Option<i32>,
        output_excerpt: String,
    },
    /// A file the agent changed, as the CLI names it (absolute or relative).
    FileChange {
        path: String,
        kind: String,
    },
    /// Token usage to add to the run's totals. `input_tokens` counts every prompt token,
    /// cache reads included; `cached_tokens` is the part read from a cache.
    Usage {
        input_tokens: u64,
        output_tokens: u64,
        cached_tokens: u64,
        model: Option<String>,
    },
    /// Cost the CLI itself reported, to add to the run's total (a cross-check: arbiter's
    /// cost of record is tokens times its own price table).
    Cost {
        usd: Usd,
    },
    /// An error the CLI reported; `fatal` when it ends the run by itself.
    Error {
        message: String,
        fatal: bool,
    },
    /// The CLI's own terminal verdict.
    Final {
        status: FinalStatus,
        text: Option<String>,
    },
    /// A line that could not be read (1-based line number).
    Unparsed {
        line: usize,
        reason: String,
    },
}

/// How the CLI itself says the run ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum FinalStatus {
    Success,
    Error { message: String },
    MaxTurns,
    BudgetExceeded,
}

/// Reads one CLI's output stream, a line at a time.
pub trait StreamParser: Send {
    /// The events of one line of output (without its line terminator).
    fn line(&mut self, line: &str) -> Vec<AgentEvent>;
    /// The events only known once the stream has ended (a verdict that depends on the
    /// whole stream, totals, buffered text).
    fn finish(&mut self) -> Vec<AgentEvent>;
}

/// Reports a session id the first time it is seen (and again only if it changes), for
/// CLIs that repeat it on every event.
#[derive(Default)]
pub(crate) struct SessionTracker {
    current: Option<String>,
}

impl SessionTracker {
    pub(crate) fn see(&mut self, id: Option<&str>) -> Option<AgentEvent> {
        let id = id.filter(|id| !id.is_empty())?;
        if self.current.as_deref() == Some(id) {
            return None;
        }
        self.current = Some(id.to_string());
        Some(AgentEvent::Session { id: id.to_string() })
    }
}

/// The longest excerpt of tool output or command output an event carries: enough to see
/// what happened, small enough that a chatty command does not bloat the event log.
pub const EXCERPT_LIMIT: usize = 2000;

/// `text` cut to [`EXCERPT_LIMIT`] bytes on a character boundary, marked when cut.
pub(crate) fn excerpt(text: &str) -> String {
    if text.len() <= EXCERPT_LIMIT {
        return text.to_string();
    }
    let mut end = EXCERPT_LIMIT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…[truncated]", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpts_are_cut_on_character_boundaries() {
        assert_eq!(excerpt("short"), "short");
        let long = "é".repeat(EXCERPT_LIMIT);
        let cut = excerpt(&long);
        assert!(cut.ends_with("…[truncated]"));
        assert_eq!(cut.trim_end_matches("…[truncated]").len(), EXCERPT_LIMIT);
    }

    #[test]
    fn sessions_are_reported_once() {
        let mut t = SessionTracker::default();
        assert_eq!(t.see(Some("s1")), Some(AgentEvent::Session { id: "s1".into() }));
        assert_eq!(t.see(Some("s1")), None);
        assert_eq!(t.see(None), None);
        assert_eq!(t.see(Some("")), None);
        assert_eq!(t.see(Some("s2")), Some(AgentEvent::Session { id: "s2".into() }));
    }

    #[test]
    fn events_serialize_with_a_type_tag() {
        let e = AgentEvent::Final { status: FinalStatus::Error { message: "boom".into() }, text: None };
        let json = serde_json::to_value(&e).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"type": "final", "status": {"status": "error", "message": "boom"}, "text": null})
        );
        let back: AgentEvent = serde_json::from_value(json).unwrap();
        assert_eq!(back, e);
        let cost = AgentEvent::Cost { usd: Usd::parse("0.25").unwrap() };
        assert_eq!(serde_json::to_value(&cost).unwrap(), serde_json::json!({"type": "cost", "usd": "0.25"}));
    }
}
