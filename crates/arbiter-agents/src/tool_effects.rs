//! What a well-known tool call does to the worktree: the built-in edit and shell tools of
//! Claude Code, Gemini CLI and OpenCode, recognised by name and input, become
//! [`AgentEvent::FileChange`] and [`AgentEvent::Command`] once their result says they ran.
//!
//! Codex and aider report changes and commands natively and do not come through here.

use std::collections::HashMap;

use serde_json::Value;

use crate::event::{AgentEvent, excerpt};
use crate::json_lines::non_empty_text;

/// The effect of one tool call, known from its name and input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ToolEffect {
    FileChange { path: String, kind: &'static str },
    Command { command: String },
}

/// Tools that change one file, the input field naming it, and the kind of change.
/// `write` = created or overwritten (the call does not say which).
const FILE_TOOLS: &[(&str, &str, &str)] = &[
    // Claude Code
    ("Edit", "/file_path", "update"),
    ("MultiEdit", "/file_path", "update"),
    ("Write", "/file_path", "write"),
    ("NotebookEdit", "/notebook_path", "update"),
    // Gemini CLI
    ("replace", "/file_path", "update"),
    ("write_file", "/file_path", "write"),
    // OpenCode
    ("edit", "/filePath", "update"),
    ("multiedit", "/filePath", "update"),
    ("write", "/filePath", "write"),
];

/// Shell tools and the input field holding the command line.
const SHELL_TOOLS: &[(&str, &str)] = &[("Bash", "/command"), ("run_shell_command", "/command"), ("bash", "/command")];

/// The effect of calling `name` with `input`, when it is a tool this crate knows.
pub(crate) fn effect_of(name: &str, input: &Value) -> Option<ToolEffect> {
    if let Some((_, field, kind)) = FILE_TOOLS.iter().find(|(tool, _, _)| *tool == name) {
        return non_empty_text(input, field).map(|path| ToolEffect::FileChange { path: path.to_string(), kind });
    }
    let (_, field) = SHELL_TOOLS.iter().find(|(tool, _)| *tool == name)?;
    non_empty_text(input, field).map(|command| ToolEffect::Command { command: command.to_string() })
}

/// The events an effect yields once its result is known. A failed edit changed nothing; a
/// failed shell call is still a command the agent ran (it may have exited non-zero).
pub(crate) fn effect_events(
    effect: ToolEffect,
    is_error: bool,
    output: &str,
    exit_code: Option<i32>,
) -> Vec<AgentEvent> {
    match effect {
        ToolEffect::FileChange { .. } if is_error => Vec::new(),
        ToolEffect::FileChange { path, kind } => vec![AgentEvent::FileChange { path, kind: kind.to_string() }],
        ToolEffect::Command { command } => {
            vec![AgentEvent::Command { command, exit_code, output_excerpt: excerpt(output) }]
        }
    }
}

/// Tool calls whose result has not arrived yet, for CLIs that report the call and its
/// result as separate events.
#[derive(Default)]
pub(crate) struct PendingEffects {
    by_call_id: HashMap<String, ToolEffect>,
}

impl PendingEffects {
    pub(crate) fn call(&mut self, id: Option<&str>, name: &str, input: &Value) {
        if let (Some(id), Some(effect)) = (id, effect_of(name, input)) {
            self.by_call_id.insert(id.to_string(), effect);
        }
    }

    /// The events of the call `id`'s result; nothing for an unknown or unrelated call.
    pub(crate) fn result(
        &mut self,
        id: Option<&str>,
        is_error: bool,
        output: &str,
        exit_code: Option<i32>,
    ) -> Vec<AgentEvent> {
        id.and_then(|id| self.by_call_id.remove(id))
            .map(|effect| effect_events(effect, is_error, output, exit_code))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn recognises_edit_and_shell_tools() {
        assert_eq!(
            effect_of("Edit", &json!({"file_path": "calc.py", "old_string": "-", "new_string": "+"})),
            Some(ToolEffect::FileChange { path: "calc.py".into(), kind: "update" })
        );
        assert_eq!(
            effect_of("write", &json!({"filePath": "/w/a.rs", "content": ""})),
            Some(ToolEffect::FileChange { path: "/w/a.rs".into(), kind: "write" })
        );
        assert_eq!(
            effect_of("run_shell_command", &json!({"command": "pytest -q"})),
            Some(ToolEffect::Command { command: "pytest -q".into() })
        );
        assert_eq!(effect_of("Read", &json!({"file_path": "calc.py"})), None);
        assert_eq!(effect_of("Edit", &json!({"file_path": 3})), None);
        assert_eq!(effect_of("Bash", &json!({})), None);
    }

    #[test]
    fn failed_edits_change_nothing_but_failed_commands_ran() {
        let mut pending = PendingEffects::default();
        pending.call(Some("t1"), "Edit", &json!({"file_path": "a.py"}));
        pending.call(Some("t2"), "Bash", &json!({"command": "false"}));
        assert!(pending.result(Some("t1"), true, "File has not been read yet", None).is_empty());
        assert_eq!(
            pending.result(Some("t2"), true, "Exit code 1", Some(1)),
            vec![AgentEvent::Command {
                command: "false".into(),
                exit_code: Some(1),
                output_excerpt: "Exit code 1".into()
            }]
        );
        assert!(pending.result(Some("t2"), false, "", None).is_empty(), "a result is consumed once");
        assert!(pending.result(None, false, "", None).is_empty());
    }
}
