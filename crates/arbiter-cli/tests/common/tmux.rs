//! A tmux server of a test's own, to drive a command in a real terminal: keys sent, the
//! pane read.

use std::process::Command;
use std::time::Duration;

use super::{skip, wait_until};

/// A tmux server of the test's own (its socket in a temp dir), killed at the end.
pub struct Tmux {
    socket: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Tmux {
    pub fn start(test: &str, dir: &std::path::Path, script: &str) -> Option<Tmux> {
        Tmux::start_with(test, dir, script, &[])
    }

    /// [`Tmux::start`] with `env` in the terminal's environment (never on a command line:
    /// the tmux server takes the environment of the command that starts it).
    pub fn start_with(test: &str, dir: &std::path::Path, script: &str, env: &[(&str, &str)]) -> Option<Tmux> {
        if Command::new("tmux").arg("-V").output().is_err() {
            assert!(
                std::env::var_os("CI").is_none(),
                "{test}: tmux is not installed, and CI needs it (.ci/run installs it)"
            );
            skip(test, "tmux is not installed (apt-get install tmux)");
            return None;
        }
        let own = tempfile::tempdir().unwrap();
        let t = Tmux { socket: own.path().join("tmux.sock"), _dir: own };
        let out = t
            .cmd(&["new-session", "-d", "-s", "dash", "-x", "120", "-y", "36", "-c"])
            .arg(dir)
            .arg(script)
            .envs(env.iter().copied())
            .output()
            .unwrap();
        assert!(out.status.success(), "tmux: {}", String::from_utf8_lossy(&out.stderr));
        Some(t)
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new("tmux");
        c.arg("-S").arg(&self.socket).args(args);
        c
    }

    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "dash"];
        args.extend_from_slice(keys);
        assert!(self.cmd(&args).status().unwrap().success());
    }

    pub fn pane(&self) -> String {
        let out = self.cmd(&["capture-pane", "-p", "-t", "dash"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits (up to 30 s) for the pane to show `text`; the pane as it was.
    pub fn wait_for(&self, text: &str) -> String {
        self.wait_for_all(&[text])
    }

    /// Waits (up to 30 s) for the pane to show every one of `texts` at once; the pane as it
    /// was.
    pub fn wait_for_all(&self, texts: &[&str]) -> String {
        let mut last = String::new();
        let found = wait_until(Duration::from_secs(30), || {
            last = self.pane();
            texts.iter().all(|t| last.contains(t))
        });
        assert!(found, "the pane never showed {texts:?}:\n{last}");
        last
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]).output();
    }
}
