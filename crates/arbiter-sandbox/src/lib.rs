//! arbiter-sandbox: every process a candidate can start runs inside a sandbox.
//!
//! A candidate (an agent, its setup command, the verify commands run on its tree) is an
//! adversary. The sandbox gives it, with the kernel's unprivileged mechanisms only:
//!
//! - **a filesystem view** ([`filesystem`], Landlock): it may write its own workspace, its
//!   agent home and its temporary directory, and nothing else; it may read everything except
//!   the paths a [`Policy`] hides (the user's `.git` but its objects, `.arbiter/`, arbiter's
//!   configuration and secrets, the other candidates' workspaces and homes, credential
//!   stores). Landlock also keeps it from tracing, or reading `/proc/<pid>/environ` of, any
//!   process outside its domain (arbiter itself), and — from Landlock ABI 6 — from signalling
//!   them;
//! - **a view of its own** ([`view`]): a mount namespace with a fresh `/proc` (only its own
//!   processes) and a private `/tmp` (`TMPDIR` and its cousins name it); without one, those
//!   variables name its temporary directory;
//! - **a process boundary** ([`supervisor`]): a user and a PID namespace, whose first process
//!   is a small init ([`init`]); when the candidate's main process ends, the init ends and
//!   the kernel kills every process left in the namespace, `setsid` daemons included. Every
//!   link of the chain (arbiter → supervisor → init) dies with its parent (`PR_SET_PDEATHSIG`),
//!   so a `kill -9` of arbiter tears the namespace down too, and the supervisor records the
//!   init it started ([`registry`]) so a later run can end anything that survived anyway.
//!
//! The sandbox is entered by re-executing the launcher (the `arbiter` binary) with the hidden
//! first argument [`ENTRY`]: `arbiter __sandbox run --policy JSON -- PROGRAM ARGS...`. The
//! launcher calls [`entry`] before anything else, in a single-threaded process (namespaces
//! can only be entered by one). [`Jail::wrap`] builds that command line; [`probe`] finds out
//! what the kernel offers, and [`SandboxMode::decide`] what a run enforces.

#![forbid(unsafe_code)]

use std::ffi::OsString;

pub mod filesystem;
pub mod init;
pub mod policy;
pub mod probe;
pub mod registry;
pub mod supervisor;
pub mod view;

pub use arbiter_core::sandbox::{Capabilities, Enforcement, SandboxMode, SandboxUnavailable};
pub use policy::{Jail, Policy, ProbeError, TEMP_VARIABLES};
pub use probe::probe;

/// The first argument that makes the launcher act as the sandbox.
pub const ENTRY: &str = "__sandbox";

/// The exit code of a sandbox that could not be set up as its policy demands (the
/// message, prefixed with [`MESSAGE_PREFIX`], is on standard error).
pub const SETUP_FAILED: i32 = 125;

/// How the sandbox's own messages start on standard error.
pub const MESSAGE_PREFIX: &str = "arbiter-sandbox:";

/// Runs the sandbox role named by `args` (everything after [`ENTRY`]) and returns the exit
/// code for the process. Call it first thing in `main`, before any thread is started.
pub fn entry(args: Vec<OsString>) -> i32 {
    let mut args = args.into_iter();
    let role = args.next().map(|a| a.to_string_lossy().into_owned()).unwrap_or_default();
    let rest: Vec<OsString> = args.collect();
    match role.as_str() {
        "run" => supervisor::main(rest),
        "init" => init::main(rest),
        "probe" => probe::main(),
        "probe-mounts" => probe::mounts_main(),
        "probe-view" => probe::view_main(),
        "noop" => 0,
        other => {
            tell(format_args!("unknown role '{other}' (this entry point is internal to arbiter)"));
            2
        }
    }
}

/// The command line of a sandbox role: `--policy JSON [--parent PID] -- PROGRAM ARGS...`.
pub(crate) struct RoleArgs {
    pub(crate) policy: Policy,
    pub(crate) parent: Option<i32>,
    pub(crate) program: OsString,
    pub(crate) args: Vec<OsString>,
}

impl RoleArgs {
    pub(crate) fn parse(args: Vec<OsString>) -> Result<RoleArgs, String> {
        let mut it = args.into_iter();
        let mut policy = None;
        let mut parent = None;
        loop {
            let Some(arg) = it.next() else {
                return Err("missing `-- PROGRAM`".into());
            };
            match arg.to_str() {
                Some("--policy") => {
                    let text = it.next().ok_or("--policy needs a value")?;
                    let text = text.to_str().ok_or("--policy is not UTF-8")?;
                    policy = Some(serde_json::from_str(text).map_err(|e| format!("invalid --policy: {e}"))?);
                }
                Some("--parent") => {
                    let pid = it.next().ok_or("--parent needs a value")?;
                    parent = Some(pid.to_string_lossy().parse().map_err(|_| "--parent is not a pid")?);
                }
                Some("--") => break,
                _ => return Err(format!("unexpected argument {}", arg.to_string_lossy())),
            }
        }
        let program = it.next().ok_or("missing the program after `--`")?;
        Ok(RoleArgs { policy: policy.ok_or("missing --policy")?, parent, program, args: it.collect() })
    }
}

/// Reports a failure to set the sandbox up and returns [`SETUP_FAILED`].
pub(crate) fn setup_failed(message: impl std::fmt::Display) -> i32 {
    tell(message);
    SETUP_FAILED
}

/// Tells the arbiter that started this sandbox role something, on standard error, after
/// [`MESSAGE_PREFIX`] (by which the parent finds it among the program's own output). The
/// only way a role writes to standard error: it runs in a process of its own, before any
/// screen, and has no printer but this.
#[allow(clippy::print_stderr, reason = "a sandbox role's messages to its parent")]
pub(crate) fn tell(message: impl std::fmt::Display) {
    eprintln!("{MESSAGE_PREFIX} {message}");
}

/// A role's answer to its parent on standard output (the probe's findings, as JSON).
#[allow(clippy::print_stdout, reason = "a sandbox role's answer to its parent")]
pub(crate) fn answer(text: impl std::fmt::Display) {
    println!("{text}");
}
