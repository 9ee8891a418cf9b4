//! What the kernel offers: Landlock (and its ABI), unprivileged user + PID namespaces, and
//! in them the candidate's own view ([`crate::view`]: mounting `/proc`, a tmpfs, an overlay).
//!
//! They can only be tried, not looked up, and namespaces only by a single-threaded
//! process, so [`probe`] runs the launcher's `__sandbox probe` role, which tries them for
//! real in throwaway processes and prints what worked as JSON. The view is tried as the
//! sandbox builds it, by the same code, in namespaces entered as the supervisor enters them
//! (`probe-mounts`, which starts `probe-view` as their PID 1): some containers forbid
//! mounting `/proc` in a user namespace.
//!
//! For tests of what arbiter does on a poorer kernel, `ARBITER_SANDBOX_PROBE` can make the
//! probe report *less* than the kernel offers (`no-landlock`, `no-namespaces`, `no-mounts`,
//! `nothing`); it can never report more. Using it is said on standard error.

use std::path::Path;
use std::process::{Command, Stdio};

use arbiter_core::sandbox::Capabilities;
use landlock::{ABI, Access, AccessFs, CompatLevel, Compatible, LandlockStatus, Ruleset, RulesetAttr};

use crate::policy::{Policy, ProbeError};
use crate::supervisor::enter_namespaces;
use crate::view;

/// The environment variable that makes the probe report less than the kernel offers.
pub const FAKE_PROBE_ENV: &str = "ARBITER_SANDBOX_PROBE";

/// Runs `launcher __sandbox probe` and reads what it found.
pub fn probe(launcher: &Path) -> Result<Capabilities, ProbeError> {
    let failed = |detail: String| ProbeError { launcher: launcher.display().to_string(), detail };
    let out = Command::new(launcher)
        .args([crate::ENTRY, "probe"])
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| failed(e.to_string()))?;
    if !out.status.success() {
        return Err(failed(format!("it exited with {}", out.status)));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| failed(format!("unreadable answer: {e}")))
}

/// The `probe` role: tries namespaces, then Landlock, in this (throwaway) process.
pub(crate) fn main() -> i32 {
    let fake = std::env::var(FAKE_PROBE_ENV).unwrap_or_default();
    if !fake.is_empty() {
        crate::tell(format_args!("{FAKE_PROBE_ENV}={fake}: reporting less than the kernel offers"));
    }
    let mut caps = Capabilities::default();
    let mut missing = Vec::new();
    // In a process of its own, before this one enters namespaces.
    match try_mounts() {
        Ok(()) => caps.mounts = true,
        Err(e) => missing.push(format!("a private /tmp and /proc: {e}")),
    }
    match try_namespaces() {
        Ok(()) => caps.namespaces = true,
        Err(e) => missing.push(format!("namespaces: {e}")),
    }
    match try_landlock() {
        Ok(abi) => caps.landlock_abi = Some(abi),
        Err(e) => missing.push(format!("Landlock: {e}")),
    }
    if matches!(fake.as_str(), "no-landlock" | "nothing") {
        caps.landlock_abi = None;
        missing.push(format!("Landlock: hidden by {FAKE_PROBE_ENV}"));
    }
    if matches!(fake.as_str(), "no-namespaces" | "nothing") {
        caps.namespaces = false;
        missing.push(format!("namespaces: hidden by {FAKE_PROBE_ENV}"));
    }
    if matches!(fake.as_str(), "no-mounts" | "no-namespaces" | "nothing") {
        caps.mounts = false;
        missing.push(format!("a private /tmp and /proc: hidden by {FAKE_PROBE_ENV}"));
    }
    if !missing.is_empty() {
        caps.detail = Some(missing.join("; "));
    }
    match serde_json::to_string(&caps) {
        Ok(text) => {
            crate::answer(text);
            0
        }
        Err(e) => crate::setup_failed(e),
    }
}

/// Builds a view as the sandbox does (see the module docs), in processes of its own.
fn try_mounts() -> Result<(), String> {
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = Command::new(me)
        .args([crate::ENTRY, "probe-mounts"])
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .output()
        .map_err(|e| format!("cannot start the probe: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&out.stderr);
    let why = said.lines().rev().find_map(|l| l.strip_prefix(crate::MESSAGE_PREFIX)).map(str::trim);
    Err(why.map_or_else(|| format!("the probe exited with {}", out.status), str::to_string))
}

/// The `probe-mounts` role: enters the namespaces as the supervisor does for a policy with
/// `mounts`, and starts `probe-view` as their PID 1.
pub(crate) fn mounts_main() -> i32 {
    if let Err(e) = enter_namespaces(true) {
        return crate::setup_failed(e);
    }
    let started = std::env::current_exe().map_err(|e| e.to_string()).and_then(|me| {
        Command::new(me).args([crate::ENTRY, "probe-view"]).stdin(Stdio::null()).status().map_err(|e| e.to_string())
    });
    match started {
        Ok(status) => status.code().unwrap_or(crate::SETUP_FAILED),
        Err(e) => crate::setup_failed(format!("cannot start a process in the namespaces: {e}")),
    }
}

/// The `probe-view` role: builds a view as the init does — with a hidden path under `/tmp`
/// that does not exist, so that a cover is made too — and gives the ids back.
pub(crate) fn view_main() -> i32 {
    let policy = Policy {
        namespaces: true,
        mounts: true,
        hidden: vec![Path::new(view::TMP).join(".arbiter-probe-hidden")],
        ..Policy::default()
    };
    match view::enter(&policy).and_then(|_| view::become_user()) {
        Ok(()) => 0,
        Err(e) => crate::setup_failed(e),
    }
}

/// Enters new user and PID namespaces and starts a process in them.
fn try_namespaces() -> Result<(), String> {
    enter_namespaces(false)?;
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let status = Command::new(me)
        .args([crate::ENTRY, "noop"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("cannot start a process in them: {e}"))?;
    if status.success() { Ok(()) } else { Err(format!("a process in them exited with {status}")) }
}

/// Restricts this process with an (empty-handed) ruleset and reads the kernel's ABI.
fn try_landlock() -> Result<u32, String> {
    let status = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(ABI::V1))
        .and_then(|r| r.create())
        .and_then(|r| r.restrict_self())
        .map_err(|e| e.to_string())?;
    match status.landlock {
        LandlockStatus::Available { effective_abi, kernel_abi } => {
            Ok(kernel_abi.map(|v| v as u32).unwrap_or(effective_abi as u32))
        }
        LandlockStatus::NotEnabled => Err("built into the kernel but not enabled at boot".into()),
        LandlockStatus::NotImplemented => Err("not built into this kernel".into()),
    }
}
