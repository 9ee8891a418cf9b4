//! The built-in coding agent: arbiter's own agent loop, driven by a model through tool calls.
//!
//! [`tools`] is its tool layer: the tools the model may call (list, read, search, write and
//! edit files, run a shell command, finish), each confined to one candidate's worktree and
//! turning every failure into a message addressed to the model rather than an error that
//! ends the loop.

pub mod tools;
