//! One module per agent CLI, each owning both sides of that CLI: the command line,
//! environment and config files that run it unattended, and the reading of its output.
//!
//! What they share lives outside: prompt delivery and key handling in `invocation`,
//! JSON-lines reading in `json_lines`, built-in tool semantics in `tool_effects`.

pub(crate) mod aider;
pub(crate) mod claude_code;
pub(crate) mod codex;
pub(crate) mod gemini;
pub(crate) mod opencode;
pub(crate) mod villani_code;
