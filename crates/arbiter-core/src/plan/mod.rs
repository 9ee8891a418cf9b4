//! Plans: many tasks with dependencies (a DAG), run as tournaments one after another or
//! side by side, each building on its dependencies' winners.
//!
//! - [`spec`]: the plan as written (ours, or Whilly's `tasks.json`), its canonical export.
//! - [`file`]: reading plan files (JSON or TOML) into a spec, with every problem named.
//! - [`check`]: every problem of a plan (ids, duplicates, unknown dependencies, cycles).
//! - [`dag`]: dependency order, depths and cycles (with their path).
//! - [`gate`]: the decision gate (ALLOW / WARN / REJECT) over a task's definition, by
//!   arbiter's rules or Whilly's.
//! - [`whilly`]: Whilly's `tasks.json` both ways, and which of its test steps are commands.
//! - [`state`]: task and attempt states, their guarded transitions, and retry backoff.
//! - [`event`]: the plan event log's typed entries (plan, task and unit families).
//! - [`worker_names`]: lease holders as people know them (`gpu-box-1:2`).
//!
//! Executing a plan (claims, leases, budgets) is the store's and the runner's business; the
//! rules they follow are here.

pub mod check;
pub mod dag;
pub mod event;
pub mod file;
pub mod gate;
pub mod settings;
pub mod spec;
pub mod state;
pub mod whilly;
pub mod worker_names;

pub use spec::{PlanSpec, Priority, TaskDefaults, TaskSpec};
