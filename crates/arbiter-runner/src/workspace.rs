//! The `.arbiter/` directory of a repository: its layout, `arbiter init`, the exclusion
//! from git, and the pruning of worktrees that a crashed run left behind.

use std::fs;
use std::path::{Path, PathBuf};

use arbiter_core::artifact::{RunState, paths};
use arbiter_core::ids::RunId;
use arbiter_core::settings::DEFAULT_CONFIG_TOML;
use arbiter_core::status::RunStatus;

use crate::git::{Git, GitError};
use crate::rundir::RunDir;

/// The name of the directory inside the repository.
pub const DIR_NAME: &str = ".arbiter";
/// The file in `worktrees/<run-id>/` naming the process that owns those worktrees.
const OWNER_FILE: &str = "owner.pid";

/// Paths of `.arbiter/` in one repository.
#[derive(Clone, Debug)]
pub struct Workspace {
    root: PathBuf,
}

/// What `init` did.
#[derive(Debug, Default)]
pub struct InitReport {
    pub created_config: bool,
    pub added_exclude: bool,
}

impl Workspace {
    /// The workspace of the repository whose top level is `root`.
    pub fn at(root: PathBuf) -> Self {
        Workspace { root }
    }

    pub fn repo_root(&self) -> &Path {
        &self.root
    }
    pub fn dir(&self) -> PathBuf {
        self.root.join(DIR_NAME)
    }
    pub fn config_path(&self) -> PathBuf {
        self.dir().join("config.toml")
    }
    pub fn db_path(&self) -> PathBuf {
        self.dir().join("arbiter.db")
    }
    pub fn runs_dir(&self) -> PathBuf {
        self.dir().join("runs")
    }
    pub fn run_dir(&self, id: &RunId) -> PathBuf {
        self.runs_dir().join(id.as_str())
    }
    pub fn worktrees_dir(&self) -> PathBuf {
        self.dir().join("worktrees")
    }
    pub fn run_worktrees(&self, id: &RunId) -> PathBuf {
        self.worktrees_dir().join(id.as_str())
    }
    pub fn scratch_dir(&self) -> PathBuf {
        self.dir().join("tmp")
    }

    /// Creates `.arbiter/` (config.toml with commented defaults, runs/, worktrees/) and adds
    /// it to `.git/info/exclude`. Safe to repeat: existing files are kept.
    pub async fn init(&self, git: &Git) -> Result<InitReport, GitError> {
        let mut report = InitReport::default();
        for d in [self.runs_dir(), self.worktrees_dir(), self.scratch_dir()] {
            fs::create_dir_all(&d)?;
        }
        if !self.config_path().exists() {
            fs::write(self.config_path(), DEFAULT_CONFIG_TOML)?;
            report.created_config = true;
        }
        let common = git.run(["rev-parse", "--git-common-dir"]).await?.text();
        let common = if Path::new(&common).is_absolute() { PathBuf::from(common) } else { self.root.join(common) };
        let exclude = common.join("info").join("exclude");
        let current = fs::read_to_string(&exclude).unwrap_or_default();
        if !current.lines().any(|l| l.trim() == "/.arbiter/" || l.trim() == ".arbiter/" || l.trim() == ".arbiter") {
            fs::create_dir_all(exclude.parent().unwrap_or(&common))?;
            let mut text = current;
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str("# arbiter's runs, worktrees and database\n.arbiter/\n");
            fs::write(&exclude, text)?;
            report.added_exclude = true;
        }
        Ok(report)
    }

    /// Marks `worktrees/<run-id>/` as owned by this process.
    pub fn claim_run_worktrees(&self, id: &RunId) -> std::io::Result<PathBuf> {
        let dir = self.run_worktrees(id);
        fs::create_dir_all(&dir)?;
        fs::write(dir.join(OWNER_FILE), std::process::id().to_string())?;
        Ok(dir)
    }

    /// Kills what still runs inside `dir` (a resumed run's worktrees, whose processes lost
    /// their arbiter).
    pub fn stop_processes_inside(&self, dir: &Path) {
        kill_processes_inside(dir);
    }

    /// Removes the worktrees of runs whose owning process is gone (a crash or SIGKILL) and
    /// kills what still runs inside them, marks those runs `interrupted` in their
    /// `state.json`, and prunes git's worktree records.
    /// Runs still owned by a live process are left alone. Returns the pruned run ids.
    pub async fn prune_leftovers(&self, git: &Git) -> Result<Vec<RunId>, GitError> {
        let mut pruned = Vec::new();
        let Ok(entries) = fs::read_dir(self.worktrees_dir()) else {
            return Ok(pruned);
        };
        for entry in entries.flatten() {
            let Ok(id) = RunId::parse(&entry.file_name().to_string_lossy()) else {
                continue;
            };
            let owner =
                fs::read_to_string(entry.path().join(OWNER_FILE)).ok().and_then(|s| s.trim().parse::<i32>().ok());
            if owner.is_some_and(process_alive) {
                continue;
            }
            kill_processes_inside(&entry.path());
            if let Ok(children) = fs::read_dir(entry.path()) {
                for child in children.flatten() {
                    if child.path().is_dir() {
                        git.worktree_remove(&child.path()).await?;
                    }
                }
            }
            fs::remove_dir_all(entry.path())?;
            mark_abandoned(&self.run_dir(&id));
            pruned.push(id);
        }
        git.worktree_prune().await?;
        Ok(pruned)
    }
}

/// Kills the process groups of processes still working inside `dir` (agents and commands
/// orphaned by a crashed run: they run in their own process groups, so the crash did not
/// take them down). Found by their working directory, so an unrelated process is never hit.
fn kill_processes_inside(dir: &Path) {
    use nix::sys::signal::{Signal, killpg};
    use nix::unistd::{Pid, getpgid, getpgrp};
    let Ok(dir) = dir.canonicalize() else { return };
    let Ok(procs) = fs::read_dir("/proc") else { return };
    for p in procs.flatten() {
        let Ok(pid) = p.file_name().to_string_lossy().parse::<i32>() else { continue };
        let inside = fs::read_link(p.path().join("cwd")).is_ok_and(|cwd| cwd.starts_with(&dir));
        if inside
            && pid != std::process::id() as i32
            && let Ok(pgid) = getpgid(Some(Pid::from_raw(pid)))
            && pgid != getpgrp()
        {
            let _ = killpg(pgid, Signal::SIGKILL);
        }
    }
}

fn process_alive(pid: i32) -> bool {
    pid > 0 && Path::new(&format!("/proc/{pid}")).exists()
}

/// A run left `running` by a dead process is recorded as interrupted.
fn mark_abandoned(run_dir: &Path) {
    let dir = RunDir::open(run_dir.to_path_buf());
    let Ok(text) = dir.read_text(paths::STATE) else {
        return;
    };
    if let Ok(mut state) = serde_json::from_str::<RunState>(&text)
        && state.status == RunStatus::Running
    {
        state.status = RunStatus::Interrupted;
        state.message = Some("the process running this run died; its worktrees were pruned by a later run".into());
        let _ = dir.write_json(paths::STATE, &state);
    }
}
