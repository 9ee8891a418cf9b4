//! What a sandboxed process may do ([`Policy`]), what a run enforces ([`Mode`],
//! [`Enforcement`]) and the command line that starts a program under a policy ([`Jail`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::probe::Capabilities;

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
    /// Where the supervisor records the init it started (see [`crate::registry`]).
    pub registry: Option<PathBuf>,
}

/// How much sandboxing a run asks for (`--sandbox`, `[run] sandbox`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Use what the kernel offers, and say in the evidence what was enforced.
    #[default]
    Auto,
    /// Refuse to start without Landlock.
    Require,
    /// No sandbox: candidates run with the user's rights (said loudly in the report).
    Off,
}

impl Mode {
    pub const NAMES: &'static [&'static str] = &["auto", "require", "off"];

    pub fn parse(text: &str) -> Option<Mode> {
        match text {
            "auto" => Some(Mode::Auto),
            "require" => Some(Mode::Require),
            "off" => Some(Mode::Off),
            _ => None,
        }
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            Mode::Auto => "auto",
            Mode::Require => "require",
            Mode::Off => "off",
        }
    }

    /// What a run in this mode enforces on a kernel with `caps`, or why it cannot start.
    pub fn decide(self, caps: &Capabilities) -> Result<Enforcement, SandboxError> {
        let landlock = caps.landlock_abi.is_some();
        match self {
            Mode::Off => Ok(Enforcement { mode: self, ..Enforcement::default() }),
            Mode::Require if !landlock => Err(SandboxError::Unavailable {
                what: "Landlock".into(),
                detail: caps.detail.clone().unwrap_or_else(|| "the kernel does not offer it".into()),
            }),
            Mode::Auto | Mode::Require => Ok(Enforcement {
                mode: self,
                landlock_abi: caps.landlock_abi,
                filesystem: landlock,
                namespaces: caps.namespaces,
                scoped_signals: caps.landlock_abi.is_some_and(|abi| abi >= 6),
            }),
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a run's sandbox enforces (recorded in its evidence).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Enforcement {
    pub mode: Mode,
    /// The Landlock ABI of the kernel, when it has Landlock.
    pub landlock_abi: Option<u32>,
    /// Filesystem rules (Landlock): writes confined, hidden paths unreadable, no tracing of
    /// or reading the environment of processes outside the sandbox.
    pub filesystem: bool,
    /// User and PID namespaces: nothing a candidate starts outlives it.
    pub namespaces: bool,
    /// Signals to processes outside the sandbox are refused (Landlock ABI 6).
    pub scoped_signals: bool,
}

impl Enforcement {
    /// Whether anything at all is enforced.
    pub fn any(&self) -> bool {
        self.filesystem || self.namespaces
    }

    /// One sentence for reports and progress: what candidates run under.
    pub fn describe(&self) -> String {
        if self.mode == Mode::Off {
            return "sandbox OFF (--sandbox off): candidates ran with your full rights and could read and write \
                    anything you can, including .git, .arbiter/ and your secrets"
                .into();
        }
        if !self.any() {
            return "sandbox NOT ENFORCED: this kernel offers neither Landlock nor user namespaces; candidates ran \
                    with your full rights (use --sandbox require to refuse such runs)"
                .into();
        }
        let mut parts = Vec::new();
        match (self.filesystem, self.landlock_abi) {
            (true, Some(abi)) => parts.push(format!(
                "filesystem confined by Landlock (ABI {abi}{})",
                if self.scoped_signals { ", signals scoped" } else { "" }
            )),
            _ => parts.push("filesystem NOT confined (no Landlock on this kernel)".into()),
        }
        parts.push(if self.namespaces {
            "user and PID namespaces (nothing a candidate starts outlives it)".into()
        } else {
            "no PID namespace (leftover processes are killed through a subreaper)".into()
        });
        format!("sandbox {}: {}", self.mode, parts.join("; "))
    }
}

/// Why a sandbox cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(
        "--sandbox require: {what} is not available ({detail}); run on Linux 5.13 or later with Landlock enabled (`landlock` in the kernel's lsm= list), or use --sandbox auto to run with what the kernel offers (the report says what was enforced)"
    )]
    Unavailable { what: String, detail: String },
    #[error("cannot probe the sandbox with {launcher}: {detail}")]
    Probe { launcher: String, detail: String },
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
    fn require_refuses_a_kernel_without_landlock_and_auto_says_what_it_has() {
        let none = Capabilities { landlock_abi: None, namespaces: false, detail: Some("ENOSYS".into()) };
        let err = Mode::Require.decide(&none).expect_err("require without landlock");
        let text = err.to_string();
        assert!(text.contains("Landlock is not available (ENOSYS)"), "{text}");
        assert!(text.contains("--sandbox auto"), "{text}");
        let auto = Mode::Auto.decide(&none).expect("auto always runs");
        assert!(!auto.any());
        assert!(auto.describe().contains("NOT ENFORCED"), "{}", auto.describe());

        let full = Capabilities { landlock_abi: Some(7), namespaces: true, detail: None };
        let e = Mode::Require.decide(&full).expect("require with landlock");
        assert!(e.filesystem && e.namespaces && e.scoped_signals);
        assert!(e.describe().contains("Landlock (ABI 7, signals scoped)"), "{}", e.describe());
        let off = Mode::Off.decide(&full).expect("off");
        assert!(!off.any());
        assert!(off.describe().contains("sandbox OFF"), "{}", off.describe());
    }

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
