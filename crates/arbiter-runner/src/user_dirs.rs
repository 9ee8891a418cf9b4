//! arbiter's directories outside any repository: the cache (the workspace pools, the
//! sandbox registry) and the configuration (secrets, worker tokens), chosen the XDG way.
//!
//! `ARBITER_CACHE_DIR` and `ARBITER_CONFIG_DIR` win; then `$XDG_CACHE_HOME/arbiter` and
//! `$XDG_CONFIG_HOME/arbiter`; then `~/.cache/arbiter` and `~/.config/arbiter`. Neither is
//! ever inside a repository: no path relative to a candidate's workspace reaches them, and
//! the sandbox hides both.

use std::path::{Path, PathBuf};

/// Where arbiter keeps what is not a repository's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserDirs {
    pub cache: PathBuf,
    pub config: PathBuf,
}

impl UserDirs {
    /// The directories `env` (a variable lookup, normally the process environment) names.
    pub fn from_env(env: impl Fn(&str) -> Option<String>) -> UserDirs {
        let var = |name: &str| env(name).filter(|v| !v.trim().is_empty()).map(PathBuf::from);
        let home = var("HOME").unwrap_or_else(|| PathBuf::from("/tmp"));
        let cache = var("ARBITER_CACHE_DIR")
            .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("arbiter")))
            .unwrap_or_else(|| home.join(".cache").join("arbiter"));
        let config = var("ARBITER_CONFIG_DIR")
            .or_else(|| var("XDG_CONFIG_HOME").map(|d| d.join("arbiter")))
            .unwrap_or_else(|| home.join(".config").join("arbiter"));
        UserDirs { cache, config }
    }

    /// The directories of this process's environment.
    pub fn from_process() -> UserDirs {
        UserDirs::from_env(|name| std::env::var(name).ok())
    }

    /// Where programs of the user's working tree that the base lacks are copied to run
    /// outside every workspace (see [`crate::outside_copy`]); readable by candidates.
    pub fn program_copies(&self) -> PathBuf {
        self.cache.join("programs")
    }

    /// Where live sandboxes are recorded (see `arbiter_sandbox::registry`).
    pub fn sandbox_registry(&self) -> PathBuf {
        self.cache.join("sandboxes")
    }

    /// The secrets file of the repository at `root` (backend keys, mode 0600): outside the
    /// repository, so no candidate can reach it by a relative path, and hidden by the sandbox.
    pub fn secrets_file(&self, root: &Path) -> PathBuf {
        self.config.join("secrets").join(format!("{}.toml", repo_key(root)))
    }
}

/// The name arbiter files a repository under in its own directories: the repository's
/// directory name and a hash of its canonical path (two clones of one project differ).
pub fn repo_key(root: &Path) -> String {
    use sha2::{Digest, Sha256};
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let name: String = root
        .file_name()
        .map(|n| {
            n.to_string_lossy().chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect()
        })
        .unwrap_or_else(|| "repo".into());
    let hash = Sha256::digest(root.as_os_str().as_encoded_bytes());
    let hex: String = hash.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("{name}-{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_then_xdg_then_home() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
        };
        let d = UserDirs::from_env(env(&[("HOME", "/h")]));
        assert_eq!(d, UserDirs { cache: "/h/.cache/arbiter".into(), config: "/h/.config/arbiter".into() });
        let d = UserDirs::from_env(env(&[("HOME", "/h"), ("XDG_CACHE_HOME", "/x/c"), ("XDG_CONFIG_HOME", "/x/k")]));
        assert_eq!(d, UserDirs { cache: "/x/c/arbiter".into(), config: "/x/k/arbiter".into() });
        let d = UserDirs::from_env(env(&[
            ("HOME", "/h"),
            ("XDG_CACHE_HOME", "/x/c"),
            ("ARBITER_CACHE_DIR", "/a/c"),
            ("ARBITER_CONFIG_DIR", "/a/k"),
        ]));
        assert_eq!(d, UserDirs { cache: "/a/c".into(), config: "/a/k".into() });
        assert_eq!(d.sandbox_registry(), PathBuf::from("/a/c/sandboxes"));
    }
}
