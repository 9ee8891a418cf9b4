//! arbiter-core: the pure domain of arbiter.
//!
//! Everything here is a plain function of its inputs: no processes, no file system, no
//! network, no clock, no randomness (time and random suffixes are passed in). The crates
//! around it (store, runner, cli) perform effects and hand their observations to this crate,
//! which decides: how settings layer, what a patch is worth, whether a candidate passed its
//! gates, who wins and why, and what the run directory's artifacts and reports say.
//!
//! Map:
//! - [`backends`]: model backends, role chains and where keys come from.
//! - [`time`] and [`ids`]: timestamps, run and candidate ids.
//! - [`settings`]: the configuration file schema and flag/config/default layering.
//! - [`task`]: the task a run works on and the clean prompt given to every candidate.
//! - [`plan`]: plans of dependent tasks: their files, checks, DAG, decision gate and states.
//! - [`intake`]: ideas and issues made into plans, winners into pull requests, failed
//!   attempts analysed.
//! - [`pairwise`]: both-order pairwise outcomes, Copeland and Bradley–Terry scores.
//! - [`patch`]: statistics and the normalized hash of a captured `git diff`.
//! - [`protect`]: the paths a candidate must not weaken (tests, CI, build configuration).
//! - [`gate`]: verify-command outcomes compared with the baseline.
//! - [`cannot_run`]: a verify command that cannot run on this machine, told from one that fails.
//! - [`canary`]: the test that must fail in every gate run, which detects neutralised test machinery.
//! - [`test_machinery`]: the files and settings that decide how the gates' tests run, derived per framework, and how the gate tree gets the base's back.
//! - [`selection`]: eligibility, votes, ranking and the decision with its reasons.
//! - [`status`] and [`event`]: run/candidate states and the event vocabulary.
//! - [`artifact`]: the versioned JSON artifacts of the run directory.
//! - [`manifest`]: `manifest.json`, the seal of a finished run directory, and checking it.
//! - [`review`]: risk reviews, their schema and validation.
//! - [`report`] and [`viewer`]: `final_report.md` and the self-contained `viewer/index.html`.
//! - [`cost`]: usage and cost records and their summary.
//! - [`budget`]: limits, charges, reservations and the one crossing event.
//! - [`queue`]: the plan and unit queues' ports, records and rules (the stores implement them).
//! - [`crosstest`]: the tests candidates wrote, pooled and run against every survivor and the base.
//! - [`strategy`]: tournament or escalation, and the order candidates are tried in.
//! - [`money`]: exact dollar amounts.
//! - [`limits`]: how large a candidate's patch may be, and where its links may point.
//! - [`redact`]: removal of secrets from anything that is written or printed.
//! - [`sandbox`]: how much sandboxing a run asks for, and what it enforces on this kernel.
//! - [`command_line`]: the first program named by a shell command line.
//! - [`rules`]: declarative code-standard checks (orch.py's rule files) judged on text, syntax-tree facts and root files.
//! - [`repair`]: the feedback a candidate's repair loop gives its agent, and the record of each round.

#![forbid(unsafe_code)]

#[cfg(feature = "arbitrary")]
pub mod arbitrary;
pub mod artifact;
pub mod backends;
pub mod budget;
pub mod canary;
pub mod cannot_run;
pub mod command_line;
pub mod cost;
pub mod crosstest;
pub mod event;
pub mod gate;
pub mod ids;
pub mod intake;
pub mod limits;
pub mod links;
pub mod manifest;
pub mod money;
pub mod pairwise;
pub mod patch;
pub mod plan;
pub mod protect;
pub mod queue;
pub mod redact;
pub mod repair;
pub mod report;
pub mod review;
pub mod rules;
pub mod sandbox;
pub mod selection;
pub mod settings;
pub mod status;
pub mod strategy;
pub mod task;
pub mod test_command;
pub mod test_machinery;
pub mod test_output;
pub mod test_report;
pub mod text;
pub mod time;
pub mod viewer;

/// The version every artifact of this build carries (`schema_version` in each JSON file).
pub const SCHEMA_VERSION: u32 = 1;

/// A source of the current time, injected so tests and replays are deterministic.
pub trait Clock: Send + Sync {
    fn now(&self) -> time::Timestamp;
}
