//! arbiter-agents: how arbiter drives agent CLIs unattended and reads what they did.
//!
//! Pure functions over strings and paths: this crate builds the command line, environment
//! and config files of one agent run ([`invocation()`]), turns the agent's output, line by
//! line, into normalized [`AgentEvent`]s ([`parser()`]), folds them into an [`AgentSummary`],
//! and decides how the run ended ([`ending()`]). Spawning the process, writing the files and
//! copying secrets into the child's environment belong to the runner.
//!
//! Two rules hold everywhere:
//! - A secret never reaches `Invocation::args`, `env` or `files`: the invocation names the
//!   variable that holds a key ([`Invocation::key_env_aliases`]) and the runner copies the
//!   value into the child's environment.
//! - A run's verdict comes from the CLI's own terminal event, never from the exit code
//!   alone, and no output, however malformed, makes a parser panic.
//!
//! Map:
//! - [`agent`]: the supported CLIs and their static facts (binaries, key and setting variables).
//! - [`mod@invocation`]: the invocation spec and the invocation built from it.
//! - [`event`]: the normalized event vocabulary and the stream parser seam.
//! - [`summary`]: the fold of a run's events into its summary.
//! - [`mod@ending`]: the verdict on one run.
//! - `clis`: one module per CLI, owning its command line and its output format, and the
//!   choice of the one for an agent ([`invocation()`], [`parser()`]).

#![forbid(unsafe_code)]

pub mod agent;
pub mod ending;
pub mod event;
pub mod invocation;
pub mod summary;
pub mod user_setup;

mod clis;
mod json_lines;
mod reported_cost;
mod tool_effects;

pub use agent::CliAgent;
pub use clis::{invocation, parse_all, parser, telemetry};
pub use ending::{AgentEnding, ending};
pub use event::{AgentEvent, EXCERPT_LIMIT, FinalStatus, StreamParser};
pub use invocation::{
    ENDPOINT_KEY_VAR, EndpointProvider, EndpointSpec, INLINE_PROMPT_LIMIT, Invocation, InvocationError, InvocationSpec,
    PLACEHOLDER_KEY, PromptInput, validate,
};
pub use summary::{AgentSummary, CommandRecord};
