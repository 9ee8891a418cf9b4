//! The `.arbiter/` directory of a repository: its layout, `arbiter init`, the exclusion
//! from git, and the pruning of worktrees that a crashed run left behind.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use arbiter_core::artifact::{RunState, paths};
use arbiter_core::ids::RunId;
use arbiter_core::settings::DEFAULT_CONFIG_TOML;
use arbiter_core::status::RunStatus;

use crate::git::{Git, GitError};
use crate::process::process_alive;
use crate::rundir::RunDir;

/// The name of the directory inside the repository.
pub const DIR_NAME: &str = ".arbiter";
/// The file in `worktrees/<run-id>/` naming the process that owns those worktrees.
const OWNER_FILE: &str = "owner.pid";
/// The file in `worktrees/<run-id>/` that marks worktrees kept with `--keep-worktrees`.
const KEEP_FILE: &str = "keep";

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

    /// Marks `worktrees/<run-id>/` as owned by this process. The owner file is written
    /// whole (a temporary file renamed into place), so a pruning run never reads half of it;
    /// the moment between creating the directory and claiming it is covered by
    /// [`UNOWNED_GRACE`].
    pub fn claim_run_worktrees(&self, id: &RunId) -> std::io::Result<PathBuf> {
        let dir = self.run_worktrees(id);
        fs::create_dir_all(&dir)?;
        let pid = std::process::id();
        let partial = dir.join(format!(".{OWNER_FILE}.{pid}"));
        fs::write(&partial, pid.to_string())?;
        fs::rename(&partial, dir.join(OWNER_FILE))?;
        Ok(dir)
    }

    /// Hands a finished run's worktrees to the user (`--keep-worktrees`): marked kept
    /// before they are disowned, so no pruning run takes them for a leftover.
    pub fn keep_run_worktrees(&self, id: &RunId) {
        let dir = self.run_worktrees(id);
        let _ = fs::write(dir.join(KEEP_FILE), "kept by --keep-worktrees\n");
        let _ = fs::remove_file(dir.join(OWNER_FILE));
    }

    /// Kills what still runs inside `dir` (a resumed run's worktrees, whose processes lost
    /// their arbiter).
    pub fn stop_processes_inside(&self, dir: &Path) {
        kill_processes_inside(dir);
    }

    /// Removes the worktrees of runs whose owning process is gone (a crash or SIGKILL) and
    /// kills what still runs inside them, marks those runs `interrupted` in their
    /// `state.json`, and prunes git's worktree records. Returns the pruned run ids.
    ///
    /// What is left alone (see [`Leftover`]): runs whose owner is alive, worktrees kept
    /// with `--keep-worktrees`, and directories without an owner file that changed in the
    /// last [`UNOWNED_GRACE`] (a run between creating its directory and claiming it).
    /// Several runs of one process (a plan's slots) may prune at once: pruning is
    /// serialized within the process, and a directory or worktree that is already gone
    /// (its own run finished, or another process pruned it) is not an error.
    pub async fn prune_leftovers(&self, git: &Git) -> Result<Vec<RunId>, GitError> {
        let _pruning = PRUNING.lock().await;
        let mut pruned = Vec::new();
        let Ok(entries) = fs::read_dir(self.worktrees_dir()) else {
            return Ok(pruned);
        };
        for entry in entries.flatten() {
            let Ok(id) = RunId::parse(&entry.file_name().to_string_lossy()) else {
                continue;
            };
            let dir = entry.path();
            if Leftover::of(&dir) != Leftover::Abandoned {
                continue;
            }
            kill_processes_inside(&dir);
            // Claimed while its processes were being stopped (a resume of that run).
            if Leftover::of(&dir) != Leftover::Abandoned {
                continue;
            }
            if let Ok(children) = fs::read_dir(&dir) {
                for child in children.flatten() {
                    if child.path().is_dir() {
                        gone_is_fine(git.worktree_remove(&child.path()).await)?;
                    }
                }
            }
            match fs::remove_dir_all(&dir) {
                Ok(()) => {}
                // Removed meanwhile by someone else: not ours to report.
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(e) => return Err(e.into()),
            }
            mark_abandoned(&self.run_dir(&id));
            pruned.push(id);
        }
        git.worktree_prune().await?;
        Ok(pruned)
    }
}

/// Serializes [`Workspace::prune_leftovers`] within this process.
static PRUNING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// How long a run's worktree directory without an owner file is taken for one being
/// claimed rather than one left behind.
pub const UNOWNED_GRACE: Duration = Duration::from_secs(120);

/// What `worktrees/<run-id>/` is to a pruning run.
#[derive(Debug, PartialEq, Eq)]
enum Leftover {
    /// Its owner file names a live process.
    Owned,
    /// Kept with `--keep-worktrees`: the user removes it.
    Kept,
    /// No owner file yet, and recently changed: a run is claiming it.
    Fresh,
    /// Its owner is gone, or it has no owner and has not changed for a while.
    Abandoned,
    /// It is no longer there.
    Gone,
}

impl Leftover {
    fn of(dir: &Path) -> Leftover {
        match fs::read_to_string(dir.join(OWNER_FILE)) {
            Ok(text) => match text.trim().parse::<i32>() {
                Ok(pid) if process_alive(pid) => Leftover::Owned,
                Ok(_) => Leftover::Abandoned,
                // Not a pid (written by hand, or damaged): judged as if there were none.
                Err(_) => Self::unowned(dir),
            },
            Err(_) => Self::unowned(dir),
        }
    }

    fn unowned(dir: &Path) -> Leftover {
        if dir.join(KEEP_FILE).exists() {
            return Leftover::Kept;
        }
        let modified = match fs::metadata(dir).and_then(|m| m.modified()) {
            Ok(t) => t,
            Err(e) if e.kind() == ErrorKind::NotFound => return Leftover::Gone,
            // Unknown age: not provably abandoned.
            Err(_) => return Leftover::Fresh,
        };
        // A clock set back makes the age negative: recent.
        let age = SystemTime::now().duration_since(modified).unwrap_or_default();
        if age < UNOWNED_GRACE { Leftover::Fresh } else { Leftover::Abandoned }
    }
}

/// A removal that found nothing to remove succeeded.
fn gone_is_fine(result: Result<(), GitError>) -> Result<(), GitError> {
    match result {
        Err(GitError::Io(e)) if e.kind() == ErrorKind::NotFound => Ok(()),
        other => other,
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use super::*;

    fn run_id(n: u32) -> RunId {
        RunId::parse(&format!("20240101T000000Z-{n:06x}")).expect("a run id")
    }

    /// Backdates `dir` past the grace period of unowned directories.
    fn make_old(dir: &Path) {
        let old = SystemTime::now() - UNOWNED_GRACE * 10;
        fs::File::open(dir).and_then(|f| f.set_modified(old)).expect("backdate the directory");
    }

    async fn repo() -> (tempfile::TempDir, Workspace, Git) {
        let tmp = tempfile::tempdir().expect("temp dir");
        let git = Git::new(tmp.path().to_path_buf());
        git.run(["init", "--quiet"]).await.expect("git init");
        fs::write(tmp.path().join("a.txt"), "a\n").expect("write a file");
        git.run(["add", "a.txt"]).await.expect("git add");
        git.run(["-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "--quiet", "-m", "base"])
            .await
            .expect("git commit");
        let ws = Workspace::at(tmp.path().to_path_buf());
        ws.init(&git).await.expect("init");
        (tmp, ws, git)
    }

    /// Several runs of one process prune while others claim their worktrees and add
    /// worktrees to them: no live worktree is removed, no prune fails, and each leftover
    /// is pruned exactly once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_prunes_spare_live_runs_and_remove_each_leftover_once() {
        let (_tmp, ws, git) = repo().await;
        let base = git.resolve_commit("HEAD").await.expect("HEAD");
        // Left by dead processes (no process has the largest pid), each with a worktree.
        let mut leftovers = Vec::new();
        for n in 0..4 {
            let id = run_id(0x100 + n);
            let dir = ws.run_worktrees(&id);
            fs::create_dir_all(&dir).expect("leftover dir");
            fs::write(dir.join(OWNER_FILE), i32::MAX.to_string()).expect("dead owner");
            git.worktree_add(&dir.join("c01"), &base).await.expect("leftover worktree");
            leftovers.push(id);
        }
        // Unowned for long: a leftover too.
        let stale = run_id(0x200);
        fs::create_dir_all(ws.run_worktrees(&stale)).expect("stale dir");
        make_old(&ws.run_worktrees(&stale));
        leftovers.push(stale);
        // Kept by --keep-worktrees, unowned and old: stays.
        let kept = run_id(0x300);
        let kept_dir = ws.run_worktrees(&kept);
        git.worktree_add(&kept_dir.join("c01"), &base).await.expect("kept worktree");
        fs::write(kept_dir.join(KEEP_FILE), "kept\n").expect("keep marker");
        fs::remove_file(kept_dir.join(OWNER_FILE)).ok();
        make_old(&kept_dir);
        // Created a moment ago and not claimed yet: a run between mkdir and its claim.
        let fresh = run_id(0x400);
        fs::create_dir_all(ws.run_worktrees(&fresh)).expect("fresh dir");

        let ws = Arc::new(ws);
        let mut tasks = tokio::task::JoinSet::new();
        for n in 0..6u32 {
            let (ws, git, base) = (ws.clone(), git.clone(), base.clone());
            tasks.spawn(async move {
                // Half the tasks are runs starting: prune, claim, add worktrees, prune again
                // (a resume prunes after claiming). The others only prune.
                if n % 2 == 1 {
                    let pruned = ws.prune_leftovers(&git).await.map_err(|e| e.to_string())?;
                    return Ok::<_, String>((None, pruned));
                }
                let mut pruned = ws.prune_leftovers(&git).await.map_err(|e| e.to_string())?;
                let id = run_id(n);
                let dir = ws.claim_run_worktrees(&id).map_err(|e| e.to_string())?;
                for c in ["c01", "c02"] {
                    git.worktree_add(&dir.join(c), &base).await.map_err(|e| format!("{id}/{c}: {e}"))?;
                }
                pruned.extend(ws.prune_leftovers(&git).await.map_err(|e| e.to_string())?);
                Ok((Some(id), pruned))
            });
        }
        let mut live = Vec::new();
        let mut pruned: BTreeMap<RunId, usize> = BTreeMap::new();
        while let Some(joined) = tasks.join_next().await {
            let (id, ids) = joined.expect("task").expect("no prune or claim fails");
            live.extend(id);
            for p in ids {
                *pruned.entry(p).or_default() += 1;
            }
        }
        assert_eq!(live.len(), 3);
        for id in &live {
            for c in ["c01", "c02"] {
                let tree = ws.run_worktrees(id).join(c);
                assert!(tree.join(".git").is_file(), "{} was removed", tree.display());
                assert_eq!(fs::read_to_string(tree.join("a.txt")).expect("checked out"), "a\n");
            }
            assert!(!pruned.contains_key(id), "live run {id} was pruned");
        }
        let expected: BTreeMap<RunId, usize> = leftovers.iter().map(|id| (id.clone(), 1)).collect();
        assert_eq!(pruned, expected, "each leftover is pruned once, nothing else");
        for id in &leftovers {
            assert!(!ws.run_worktrees(id).exists(), "leftover {id} is still there");
        }
        assert!(kept_dir.join("c01/.git").is_file(), "kept worktrees were pruned");
        assert!(ws.run_worktrees(&fresh).is_dir(), "a directory being claimed was pruned");
        // Git's records: the main tree, the live worktrees and the kept one.
        let listed = git.run(["worktree", "list", "--porcelain"]).await.expect("worktree list").text();
        assert_eq!(listed.lines().filter(|l| l.starts_with("worktree ")).count(), 1 + live.len() * 2 + 1, "{listed}");
    }

    #[tokio::test]
    async fn a_run_dir_whose_owner_is_alive_is_never_pruned_even_when_old() {
        let (_tmp, ws, git) = repo().await;
        let id = run_id(7);
        let dir = ws.claim_run_worktrees(&id).expect("claim");
        make_old(&dir);
        assert_eq!(ws.prune_leftovers(&git).await.expect("prune"), Vec::<RunId>::new());
        assert!(dir.join(OWNER_FILE).is_file());
        assert_eq!(fs::read_to_string(dir.join(OWNER_FILE)).expect("owner"), std::process::id().to_string());
        // Only the owner file: the temporary one was renamed into place.
        assert_eq!(fs::read_dir(&dir).expect("dir").count(), 1);
    }
}
