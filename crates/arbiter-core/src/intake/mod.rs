//! From an idea or an issue to a plan, and from a winner to a pull request: the pure parts.
//!
//! - [`text`]: untrusted text (an issue's body, a model's answer) made safe to show, to
//!   store and to put in a prompt: control and escape sequences removed, sizes capped, and
//!   fenced as data a model must not take as instructions.
//! - [`slug`]: the names plans, PRD files and branches get from an idea or an issue.
//! - [`issue`]: issue references (`OWNER/REPO#N`), issues as the forges give them, and the
//!   labels that say where an issue is (pending, in progress, done, failed).
//! - [`prompts`]: what the `planning` role is asked: clarifying questions, the PRD, the plan.
//! - [`draft`]: a plan a model drafted, checked (fields it may set, the plan's own checks,
//!   verify commands grounded in the repository's test setup), with the problems that go
//!   back to it in the one repair round.
//! - [`remote`]: a repository's remote URL as a forge sees it (host, owner, name), and the
//!   compare URL of a pushed branch.
//! - [`report`]: what arbiter writes on a forge: a pull request's body (a run's report, a
//!   plan's tasks with their winners and reasons) and the result comment on an issue.
//! - [`analysis`]: the failure analysis of a task's attempt (role `analysis`): its prompt,
//!   its answer, `analysis.md`, and the feedback the next attempt's prompt carries.
//! - [`config`]: the `[intake]`, `[forge]` and `[analysis]` tables of `.arbiter/config.toml`.

pub mod analysis;
pub mod config;
pub mod draft;
pub mod issue;
pub mod prompts;
pub mod remote;
pub mod report;
pub mod slug;
pub mod text;
