//! How a run confines its candidates: which sandbox it enforces on this kernel, and the
//! policy of each workspace's processes.
//!
//! [`Sandboxing`] belongs to the process: the launcher (the `arbiter` binary, re-executed as
//! the sandbox), arbiter's own directories, and what the kernel offers (probed once).
//! [`Confinement`] belongs to a run: what its mode enforces here, and what every candidate
//! process may not read — the repository's `.arbiter/` and git directories (their objects
//! excepted: workspaces borrow them read-only), arbiter's cache (every other workspace),
//! configuration (secrets, tokens) and data — every user's, not only the ones in use
//! ([`UserDirs::everywhere_on_this_machine`]) —, and the usual credential stores in the home
//! directory. [`Confinement::jail`] turns that into the policy of one workspace: write its
//! tree, its home and its temporary directory (which `TMPDIR` and its cousins name, or a
//! private `/tmp` where the kernel allows one); read its input.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use arbiter_core::sandbox::{Capabilities, Enforcement, SandboxMode, SandboxUnavailable};
use arbiter_core::settings::SandboxSection;
use arbiter_sandbox::{Jail, Policy};

use crate::pool::Slot;
use crate::user_dirs::UserDirs;

/// Credential stores under the home directory that no candidate may read (relative to
/// `$HOME`). The agent CLIs get a home of their own, so their own logins are hidden too.
pub const CREDENTIAL_STORES: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".config/git/credentials",
    ".config/gh",
    ".config/hub",
    ".npmrc",
    ".yarnrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".terraform.d",
    ".vault-token",
    ".password-store",
    ".local/share/keyrings",
    ".claude",
    ".claude.json",
    ".codex",
    ".gemini",
    ".config/opencode",
    ".local/share/opencode",
];

/// The sandbox as this process has it.
#[derive(Debug)]
pub struct Sandboxing {
    launcher: PathBuf,
    dirs: UserDirs,
    capabilities: OnceLock<Capabilities>,
}

impl Sandboxing {
    /// `launcher` is the program that runs [`arbiter_sandbox::entry`] for the argument
    /// [`arbiter_sandbox::ENTRY`] (the `arbiter` binary).
    pub fn new(launcher: PathBuf, dirs: UserDirs) -> Sandboxing {
        Sandboxing { launcher, dirs, capabilities: OnceLock::new() }
    }

    pub fn dirs(&self) -> &UserDirs {
        &self.dirs
    }

    /// What the kernel offers (probed on first use; a probe that cannot run offers nothing,
    /// and says why).
    pub fn capabilities(&self) -> &Capabilities {
        self.capabilities.get_or_init(|| {
            arbiter_sandbox::probe(&self.launcher).unwrap_or_else(|e| Capabilities {
                landlock_abi: None,
                namespaces: false,
                mounts: false,
                detail: Some(e.to_string()),
            })
        })
    }

    /// What a run in `mode` enforces on this kernel, or why it cannot run (the kernel is
    /// probed only when the mode is not `off`).
    pub fn enforcement(&self, mode: SandboxMode) -> Result<Enforcement, SandboxUnavailable> {
        match mode {
            SandboxMode::Off => SandboxMode::Off.decide(&Capabilities::default()),
            mode => mode.decide(self.capabilities()),
        }
    }

    /// What a run in `mode` enforces here, with `hidden` (and `revealed`) paths of its
    /// repository added to the common ones, and the user's own `[sandbox]` paths; an error
    /// when `mode` cannot be honoured.
    pub fn confine(
        &self,
        mode: SandboxMode,
        home: Option<&Path>,
        repo_hidden: Vec<PathBuf>,
        revealed: Vec<PathBuf>,
        user: &SandboxSection,
    ) -> Result<Confinement, SandboxUnavailable> {
        let enforcement = self.enforcement(mode)?;
        let mut hidden = repo_hidden;
        hidden.push(self.dirs.cache.clone());
        hidden.push(self.dirs.config.clone());
        hidden.extend(UserDirs::everywhere_on_this_machine());
        if let Some(home) = home {
            hidden.extend(CREDENTIAL_STORES.iter().map(|rel| home.join(rel)));
        }
        let expand = |p: &String| match (p.strip_prefix("~/"), home) {
            (Some(rel), Some(home)) => home.join(rel),
            _ => PathBuf::from(p),
        };
        hidden.extend(user.hidden.iter().map(expand));
        Ok(Confinement {
            enforcement,
            launcher: self.launcher.clone(),
            hidden,
            revealed,
            writable: user.writable.iter().map(expand).collect(),
            registry: self.dirs.sandbox_registry(),
        })
    }

    /// Ends what a sandbox left running when its arbiter died (see
    /// `arbiter_sandbox::registry`); returns how many were ended.
    pub fn end_orphans(&self) -> usize {
        arbiter_sandbox::registry::end_orphans(&self.dirs.sandbox_registry())
    }
}

/// What one run's candidates run under.
#[derive(Clone, Debug)]
pub struct Confinement {
    pub enforcement: Enforcement,
    launcher: PathBuf,
    hidden: Vec<PathBuf>,
    revealed: Vec<PathBuf>,
    /// Writable for every workspace, beyond its own directories (`[sandbox] writable`).
    writable: Vec<PathBuf>,
    registry: PathBuf,
}

impl Confinement {
    /// No sandbox at all (library tests and callers that run nothing untrusted).
    pub fn none() -> Confinement {
        Confinement {
            enforcement: Enforcement::default(),
            launcher: PathBuf::new(),
            hidden: Vec::new(),
            revealed: Vec::new(),
            writable: Vec::new(),
            registry: PathBuf::new(),
        }
    }

    /// The jail of processes working in `slot`, or `None` when nothing is enforced.
    pub fn jail(&self, slot: &Slot) -> Option<Jail> {
        if !self.enforcement.any() {
            return None;
        }
        let mut revealed = self.revealed.clone();
        revealed.push(slot.input());
        Some(Jail {
            launcher: self.launcher.clone(),
            policy: Policy {
                writable: [slot.tree(), slot.home()].into_iter().chain(self.writable.iter().cloned()).collect(),
                hidden: self.hidden.clone(),
                revealed,
                landlock: self.enforcement.filesystem,
                namespaces: self.enforcement.namespaces,
                mounts: self.enforcement.mounts,
                tmp: Some(slot.tmp()),
                registry: Some(self.registry.clone()),
            },
        })
    }
}
