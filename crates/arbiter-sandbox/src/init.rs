//! The init (`__sandbox init`): the first process of the candidate's PID namespace.
//!
//! It dies with the supervisor, builds the candidate's view when the policy asks for one
//! ([`crate::view`]: a fresh `/proc`, a private `/tmp`) and gives the user its own ids back,
//! enforces the policy's filesystem rules on itself (so the program and all it starts
//! inherit them), starts the program with `TMPDIR` and its cousins naming its temporary
//! directory, reaps every process re-parented to it, and exits with the program's status as
//! soon as the program itself ends. Being PID 1, its exit makes the kernel kill whatever the
//! program left behind in the namespace. A policy it cannot enforce stops it before the
//! program starts.

use std::ffi::OsString;
use std::process::Command;

use nix::unistd::Pid;

use crate::policy::TEMP_VARIABLES;
use crate::supervisor::{die_with_parent, signal_fd, wait_for};
use crate::{RoleArgs, filesystem, registry, setup_failed, view};

/// The exit code when the program cannot be started at all (as a shell says it).
const NOT_STARTED: i32 = 127;

/// The `init` role.
pub(crate) fn main(args: Vec<OsString>) -> i32 {
    let role = match RoleArgs::parse(args) {
        Ok(r) => r,
        Err(e) => return setup_failed(format!("init: {e}")),
    };
    // Its parent (the supervisor) is outside the PID namespace, where getppid() says 0:
    // the supervisor passed its pid as `/proc` numbers it, and a supervisor killed between
    // starting this process and this call is caught here, before the program starts (this
    // process was re-parented by then).
    if let Err(e) = die_with_parent(None) {
        return setup_failed(e);
    }
    if let Some(supervisor) = role.parent
        && registry::own_parent().is_some_and(|parent| parent != supervisor)
    {
        return setup_failed("the supervisor that started this sandbox is gone");
    }
    let signals = match signal_fd() {
        Ok(fd) => fd,
        Err(e) => return setup_failed(e),
    };
    // The view is built before Landlock, under which no mount can be made.
    let private_tmp = if role.policy.mounts {
        match view::enter(&role.policy).and_then(|tmp| view::become_user().map(|()| tmp)) {
            Ok(tmp) => Some(tmp),
            Err(e) => return setup_failed(format!("the policy asks for a mount namespace and {e}")),
        }
    } else {
        None
    };
    if role.policy.landlock
        && let Err(e) = filesystem::enforce(&role.policy, private_tmp.as_deref())
    {
        return setup_failed(format!("the policy asks for Landlock and {e}"));
    }
    let mut program = Command::new(&role.program);
    program.args(&role.args);
    if let Some(tmp) = private_tmp.as_ref().or(role.policy.tmp.as_ref()) {
        program.envs(TEMP_VARIABLES.map(|name| (name, tmp)));
    }
    let child = match program.spawn() {
        Ok(child) => Pid::from_raw(child.id() as i32),
        Err(e) => {
            crate::tell(format_args!("cannot start {}: {e}", role.program.to_string_lossy()));
            return NOT_STARTED;
        }
    };
    wait_for(child, &signals)
}
