//! The sandbox as a run sees it: how much sandboxing it asks for ([`SandboxMode`]), what the
//! kernel offers ([`Capabilities`], probed by `arbiter-sandbox`), and what the run therefore
//! enforces ([`Enforcement`], recorded in its evidence) — or why it cannot start.

use serde::{Deserialize, Serialize};

/// What the kernel offers to an unprivileged process.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    /// The Landlock ABI, when Landlock is enabled.
    pub landlock_abi: Option<u32>,
    /// New user and PID namespaces can be created (and a process started in them).
    pub namespaces: bool,
    /// In those, a process can have a mount namespace of its own: a fresh `/proc` and a
    /// private `/tmp` (refused inside some containers, which forbid mounting `/proc`).
    #[serde(default)]
    pub mounts: bool,
    /// Why something is missing.
    pub detail: Option<String>,
}

/// How much sandboxing a run asks for (`--sandbox`, `[run] sandbox`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum SandboxMode {
    /// Use what the kernel offers, and say in the evidence what was enforced.
    #[default]
    Auto,
    /// Refuse to start without Landlock.
    Require,
    /// No sandbox: candidates run with the user's rights (said loudly in the report).
    Off,
}

impl SandboxMode {
    pub const NAMES: &'static [&'static str] = &["auto", "require", "off"];

    pub fn parse(text: &str) -> Option<SandboxMode> {
        match text {
            "auto" => Some(SandboxMode::Auto),
            "require" => Some(SandboxMode::Require),
            "off" => Some(SandboxMode::Off),
            _ => None,
        }
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            SandboxMode::Auto => "auto",
            SandboxMode::Require => "require",
            SandboxMode::Off => "off",
        }
    }

    /// What a run in this mode enforces on a kernel with `caps`, or why it cannot start.
    pub fn decide(self, caps: &Capabilities) -> Result<Enforcement, SandboxUnavailable> {
        let landlock = caps.landlock_abi.is_some();
        match self {
            SandboxMode::Off => Ok(Enforcement { mode: self, ..Enforcement::default() }),
            SandboxMode::Require if !landlock => Err(SandboxUnavailable {
                what: "Landlock".into(),
                detail: caps.detail.clone().unwrap_or_else(|| "the kernel does not offer it".into()),
            }),
            SandboxMode::Auto | SandboxMode::Require => Ok(Enforcement {
                mode: self,
                landlock_abi: caps.landlock_abi,
                filesystem: landlock,
                namespaces: caps.namespaces,
                mounts: caps.namespaces && caps.mounts,
                scoped_signals: caps.landlock_abi.is_some_and(|abi| abi >= 6),
            }),
        }
    }
}

impl std::fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a run's sandbox enforces (recorded in its evidence).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct Enforcement {
    pub mode: SandboxMode,
    /// The Landlock ABI of the kernel, when it has Landlock.
    pub landlock_abi: Option<u32>,
    /// Filesystem rules (Landlock): writes confined, hidden paths unreadable, no tracing of
    /// or reading the environment of processes outside the sandbox.
    pub filesystem: bool,
    /// User and PID namespaces: nothing a candidate starts outlives it.
    pub namespaces: bool,
    /// A mount namespace: a fresh `/proc` listing only the candidate's own processes, and a
    /// private `/tmp` (without it, `TMPDIR` and its cousins name the candidate's temporary
    /// directory, and `/tmp` and `/proc` are the machine's).
    #[serde(default)]
    pub mounts: bool,
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
        if self.mode == SandboxMode::Off {
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
        parts.push(match (self.mounts, self.namespaces) {
            (true, _) => "a private /tmp and a /proc of its own processes only".into(),
            (false, namespaces) => format!(
                "NO private /tmp or /proc of its own{}: TMPDIR names the candidate's temporary directory, and /proc \
                 lists every process of the machine",
                if namespaces { " (this kernel refuses mounts in a user namespace)" } else { "" }
            ),
        });
        format!("sandbox {}: {}", self.mode, parts.join("; "))
    }
}

/// Why a run that requires the sandbox cannot start.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "--sandbox require: {what} is not available ({detail}); run on Linux 5.13 or later with Landlock enabled (`landlock` in the kernel's lsm= list), or use --sandbox auto to run with what the kernel offers (the report says what was enforced)"
)]
pub struct SandboxUnavailable {
    pub what: String,
    pub detail: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn require_refuses_a_kernel_without_landlock_and_auto_says_what_it_has() {
        let none = Capabilities { landlock_abi: None, namespaces: false, mounts: false, detail: Some("ENOSYS".into()) };
        let err = SandboxMode::Require.decide(&none).expect_err("require without landlock");
        let text = err.to_string();
        assert!(text.contains("Landlock is not available (ENOSYS)"), "{text}");
        assert!(text.contains("--sandbox auto"), "{text}");
        let auto = SandboxMode::Auto.decide(&none).expect("auto always runs");
        assert!(!auto.any());
        assert!(auto.describe().contains("NOT ENFORCED"), "{}", auto.describe());

        let full = Capabilities { landlock_abi: Some(7), namespaces: true, mounts: true, detail: None };
        let e = SandboxMode::Require.decide(&full).expect("require with landlock");
        assert!(e.filesystem && e.namespaces && e.mounts && e.scoped_signals);
        assert!(e.describe().contains("Landlock (ABI 7, signals scoped)"), "{}", e.describe());
        assert!(e.describe().ends_with("a private /tmp and a /proc of its own processes only"), "{}", e.describe());

        // A container that refuses mounts in a user namespace: the rest holds, and the report
        // says what is missing.
        let no_mounts = Capabilities { mounts: false, ..full.clone() };
        let e = SandboxMode::Auto.decide(&no_mounts).expect("auto");
        assert!(e.namespaces && !e.mounts);
        assert!(e.describe().contains("NO private /tmp or /proc of its own"), "{}", e.describe());
        // Mounts come with the namespaces or not at all.
        let no_namespaces = Capabilities { namespaces: false, ..full.clone() };
        assert!(!SandboxMode::Auto.decide(&no_namespaces).expect("auto").mounts);
        let off = SandboxMode::Off.decide(&full).expect("off");
        assert!(!off.any());
        assert!(off.describe().contains("sandbox OFF"), "{}", off.describe());
    }
}
