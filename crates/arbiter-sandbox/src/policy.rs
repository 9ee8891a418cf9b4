//! What a sandboxed process may do ([`Policy`]) and the command line that starts a program
//! under a policy ([`Jail`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The rules for one sandboxed process and everything it starts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// Hierarchies it may write (and read): its workspace, agent home, temporary directory.
    pub writable: Vec<PathBuf>,
    /// Hierarchies it may not read (nor write): everything else stays readable.
    pub hidden: Vec<PathBuf>,
    /// Read-only exceptions inside hidden hierarchies (the objects of the user's `.git`).
    pub revealed: Vec<PathBuf>,
    /// Enforce the filesystem rules with Landlock; the sandbox refuses to start the program
    /// when the kernel does not enforce them.
    pub landlock: bool,
    /// Run it in new user and PID namespaces; the sandbox refuses to start when it cannot.
    pub namespaces: bool,
    /// Give it a mount namespace of its own (with `namespaces` only): a fresh `/proc` that
    /// lists the processes of its PID namespace alone, and a private `/tmp` (see
    /// [`crate::view`]); the sandbox refuses to start when it cannot.
    #[serde(default)]
    pub mounts: bool,
    /// Its temporary directory: writable, and what `TMPDIR` and its cousins
    /// ([`TEMP_VARIABLES`]) name when `/tmp` is not private (with `mounts`, they name `/tmp`).
    #[serde(default)]
    pub tmp: Option<PathBuf>,
    /// Where the supervisor records the init it started (see [`crate::registry`]).
    pub registry: Option<PathBuf>,
}

/// The variables programs read their temporary directory from (`TMPDIR` by POSIX, the
/// others by Python's `tempfile`, Perl, Java tools and Windows-minded ports).
pub const TEMP_VARIABLES: [&str; 4] = ["TMPDIR", "TMP", "TEMP", "TEMPDIR"];

impl Policy {
    /// Every hierarchy it may write: [`Policy::writable`] and its temporary directory.
    pub fn writable_paths(&self) -> impl Iterator<Item = &PathBuf> {
        self.writable.iter().chain(&self.tmp)
    }
}

/// Why the sandbox cannot be probed.
#[derive(Debug, thiserror::Error)]
#[error("cannot probe the sandbox with {launcher}: {detail}")]
pub struct ProbeError {
    pub launcher: String,
    pub detail: String,
}

/// A policy ready to wrap programs: the launcher (the `arbiter` binary) and the rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Jail {
    pub launcher: PathBuf,
    pub policy: Policy,
}

impl Jail {
    /// The program and arguments that run `program args` under this jail: the launcher as
    /// the supervisor (`__sandbox run --policy JSON --parent PID -- program args`).
    pub fn wrap(&self, program: &Path, args: &[String]) -> (PathBuf, Vec<OsString>) {
        // The policy holds paths and booleans only, never a secret: argv is safe for it.
        let policy = serde_json::to_string(&self.policy).unwrap_or_else(|_| "{}".into());
        let mut wrapped: Vec<OsString> = vec![
            crate::ENTRY.into(),
            "run".into(),
            "--policy".into(),
            policy.into(),
            "--parent".into(),
            std::process::id().to_string().into(),
            "--".into(),
            program.as_os_str().to_owned(),
        ];
        wrapped.extend(args.iter().map(OsString::from));
        (self.launcher.clone(), wrapped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_puts_the_program_after_the_policy() {
        let jail = Jail { launcher: "/bin/arbiter".into(), policy: Policy { landlock: true, ..Policy::default() } };
        let (program, args) = jail.wrap(Path::new("sh"), &["-c".into(), "echo hi".into()]);
        assert_eq!(program, PathBuf::from("/bin/arbiter"));
        let args: Vec<String> = args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(&args[..2], ["__sandbox", "run"]);
        assert_eq!(&args[args.len() - 4..], ["--", "sh", "-c", "echo hi"]);
        let parsed = crate::RoleArgs::parse(args[2..].iter().map(OsString::from).collect()).expect("parse");
        assert_eq!(parsed.policy, jail.policy);
        assert_eq!(parsed.parent, Some(std::process::id() as i32));
        assert_eq!(parsed.program, OsString::from("sh"));
    }
}
