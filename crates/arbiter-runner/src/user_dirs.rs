//! arbiter's directories outside any repository: the cache (the workspace pools, the
//! sandbox registry) and the configuration (secrets, worker tokens), chosen the XDG way,
//! and the data of `arbiter serve` and `arbiter worker`.
//!
//! `ARBITER_CACHE_DIR` and `ARBITER_CONFIG_DIR` win; then `$XDG_CACHE_HOME/arbiter` and
//! `$XDG_CONFIG_HOME/arbiter`; then `~/.cache/arbiter` and `~/.config/arbiter` (the data:
//! `--data-dir`, `$XDG_DATA_HOME/arbiter`, `~/.local/share/arbiter`). None is ever inside a
//! repository: no path relative to a candidate's workspace reaches them, and the sandbox
//! hides them — those of every user of the machine, not only the ones in use
//! ([`UserDirs::everywhere`]).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Where arbiter keeps one kind of its directories: the variables that name the directory
/// itself, the XDG base directory variable (arbiter's directory is `arbiter` in it), and that
/// base directory's place in a home directory.
struct Kind {
    overrides: &'static [&'static str],
    xdg: &'static str,
    in_home: &'static str,
}

const CACHE: Kind = Kind { overrides: &["ARBITER_CACHE_DIR"], xdg: "XDG_CACHE_HOME", in_home: ".cache" };
const CONFIG: Kind = Kind { overrides: &["ARBITER_CONFIG_DIR"], xdg: "XDG_CONFIG_HOME", in_home: ".config" };
/// `arbiter serve`'s and `arbiter worker`'s data (their `--data-dir` variables name the
/// server's and the worker's directories themselves).
const DATA: Kind =
    Kind { overrides: &["ARBITER_DATA_DIR", "ARBITER_WORKER_DATA_DIR"], xdg: "XDG_DATA_HOME", in_home: ".local/share" };
const KINDS: [&Kind; 3] = [&CACHE, &CONFIG, &DATA];

/// The name of arbiter's directory in each base directory.
const NAME: &str = "arbiter";

impl Kind {
    /// The directory `env` names for this kind, or else the one in `home`.
    fn chosen(&self, env: &impl Fn(&str) -> Option<PathBuf>, home: &Path) -> PathBuf {
        self.overrides
            .iter()
            .find_map(|name| env(name))
            .or_else(|| env(self.xdg).map(|d| d.join(NAME)))
            .unwrap_or_else(|| self.in_home(home))
    }

    fn in_home(&self, home: &Path) -> PathBuf {
        home.join(self.in_home).join(NAME)
    }
}

/// Where arbiter keeps what is not a repository's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserDirs {
    pub cache: PathBuf,
    pub config: PathBuf,
}

impl UserDirs {
    /// The directories `env` (a variable lookup, normally the process environment) names.
    pub fn from_env(env: impl Fn(&str) -> Option<String>) -> UserDirs {
        let var = variables(env);
        let home = var("HOME").unwrap_or_else(|| PathBuf::from("/tmp"));
        UserDirs { cache: CACHE.chosen(&var, &home), config: CONFIG.chosen(&var, &home) }
    }

    /// The directories of this process's environment.
    pub fn from_process() -> UserDirs {
        UserDirs::from_env(|name| std::env::var(name).ok())
    }

    /// Every directory arbiter may keep its cache, configuration or data in on this machine:
    /// the ones `env` names (every override and XDG variable, and the defaults in its
    /// `HOME`), and in every home directory of `passwd` (the text of `/etc/passwd`) the
    /// default ones — those that exist, and all of them in a home its user owns (where
    /// arbiter could make them while a candidate runs). A home that does not exist holds
    /// none.
    pub fn everywhere(env: impl Fn(&str) -> Option<String>, passwd: &str) -> Vec<PathBuf> {
        let var = variables(env);
        let mut dirs: Vec<PathBuf> = Vec::new();
        for kind in KINDS {
            dirs.extend(kind.overrides.iter().filter_map(|name| var(name)));
            dirs.extend(var(kind.xdg).map(|d| d.join(NAME)));
            dirs.extend(var("HOME").map(|home| kind.in_home(&home)));
        }
        for (uid, home) in homes(passwd) {
            let Ok(meta) = std::fs::metadata(&home) else { continue };
            let owned = meta.is_dir() && meta.uid() == uid;
            dirs.extend(
                KINDS.iter().map(|kind| kind.in_home(&home)).filter(|dir| owned || dir.symlink_metadata().is_ok()),
            );
        }
        dirs.sort();
        dirs.dedup();
        dirs
    }

    /// [`UserDirs::everywhere`] for this process's environment and this machine's
    /// `/etc/passwd` (users of other sources, such as LDAP, are not listed there).
    pub fn everywhere_on_this_machine() -> Vec<PathBuf> {
        let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
        UserDirs::everywhere(|name| std::env::var(name).ok(), &passwd)
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

/// `env` as paths, empty values taken as unset.
fn variables(env: impl Fn(&str) -> Option<String>) -> impl Fn(&str) -> Option<PathBuf> {
    move |name| env(name).filter(|v| !v.trim().is_empty()).map(PathBuf::from)
}

/// The uid and home directory of every user of `passwd` (`name:password:uid:gid:gecos:home:shell`
/// lines), skipping what is not such a line or names no absolute home.
fn homes(passwd: &str) -> impl Iterator<Item = (u32, PathBuf)> + '_ {
    passwd.lines().filter_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        let uid = fields.get(2)?.parse().ok()?;
        let home = Path::new(fields.get(5)?);
        home.is_absolute().then(|| (uid, home.to_path_buf()))
    })
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

    #[test]
    fn every_user_s_arbiter_directories_are_found_from_passwd_and_the_environment() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let me = nix::unistd::getuid().as_raw();
        // alice's home is hers; a system user's home is someone else's, with one arbiter
        // directory in it; bob's home does not exist.
        let alice = root.join("home/alice");
        let system = root.join("var/lib/service");
        std::fs::create_dir_all(&alice).unwrap();
        std::fs::create_dir_all(system.join(".config/arbiter")).unwrap();
        std::fs::set_permissions(&system, std::fs::Permissions::from_mode(0o755)).unwrap();
        let passwd = format!(
            "# a comment\nalice:x:{me}:{me}::{}:/bin/sh\nservice:x:{}:1::{}:/usr/sbin/nologin\nbob:x:1001:1001::{}/home/bob:/bin/sh\nbroken line\nrel:x:7:7::relative:/bin/sh\n",
            alice.display(),
            me + 1,
            system.display(),
            root.display()
        );
        let env = |name: &str| match name {
            "HOME" => Some("/h".to_string()),
            "XDG_DATA_HOME" => Some("/x/data".to_string()),
            "ARBITER_CONFIG_DIR" => Some("/a/config".to_string()),
            "ARBITER_WORKER_DATA_DIR" => Some("/a/worker".to_string()),
            "XDG_CACHE_HOME" => Some("  ".to_string()),
            _ => None,
        };
        let dirs = UserDirs::everywhere(env, &passwd);
        let mut expected: Vec<PathBuf> = [
            "/a/config",
            "/a/worker",
            "/x/data/arbiter",
            "/h/.cache/arbiter",
            "/h/.config/arbiter",
            "/h/.local/share/arbiter",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        expected.extend([".cache", ".config", ".local/share"].iter().map(|d| alice.join(d).join("arbiter")));
        expected.push(system.join(".config/arbiter"));
        expected.sort();
        assert_eq!(dirs, expected);
    }
}
