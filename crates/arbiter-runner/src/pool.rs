//! The warm pool of candidate workspaces: isolated repositories, reused across candidates
//! and runs.
//!
//! A candidate's workspace shares no writable state with the user's repository. Each slot of
//! a repository's pool (`<cache>/workspaces/<repo-key>/slot-<n>/`) holds:
//!
//! - `tree/` — the work tree the candidate gets. Its `.git/` is the candidate's own small
//!   repository: HEAD at the base commit, an index, a config of its own, and the user's
//!   objects borrowed read-only through `objects/info/alternates`. Whatever the candidate
//!   does to it (hooks, fsmonitor, aliases, filters, refs) stays there;
//! - `git/` — arbiter's own git directory for the same work tree, which the candidate never
//!   sees (the sandbox hides it): the patch is captured, and the tree reset, through it only
//!   ([`Git::isolated`]);
//! - `home/`, `tmp/` — the agent's home and temporary directory; `input/` — the prompt;
//! - `lock` — held (`flock`) while the slot is in use, so a crashed process frees its slots
//!   the moment it dies; `slot.json` — who uses it, for which run, and whether it is kept.
//!
//! Taking a slot ([`Pool::acquire`]) makes it indistinguishable from a fresh checkout of the
//! base: `git reset --hard` and `git clean -ffdx` through arbiter's git directory (only what
//! changed is rewritten: a warm slot of a large repository costs a fraction of a checkout),
//! a new candidate `.git`, and empty home, temporary and input directories. A slot whose
//! reset fails is rebuilt from nothing. Slots are created on demand; idle ones beyond
//! [`IDLE_SLOTS_KEPT`] are removed when released, and `arbiter cache prune` removes the rest.

use std::fs::{self, File, OpenOptions};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};

use crate::git::{Git, GitError};

/// Idle slots a repository's pool keeps after a release (more are removed).
pub const IDLE_SLOTS_KEPT: usize = 8;

const SLOT_PREFIX: &str = "slot-";
const STATE_FILE: &str = "slot.json";
const LOCK_FILE: &str = "lock";
const PROMPT_FILE: &str = "prompt.md";
/// The identity of commits a candidate makes in its own repository.
const CANDIDATE_IDENTITY: &str = "[user]\n\tname = arbiter candidate\n\temail = candidate@arbiter.invalid\n";

/// A pool failure.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    #[error(transparent)]
    Git(#[from] GitError),
    #[error("workspace pool at {dir}: {source}")]
    Io { dir: String, source: std::io::Error },
}

fn io(dir: &Path) -> impl FnOnce(std::io::Error) -> PoolError + '_ {
    move |source| PoolError::Io { dir: dir.display().to_string(), source }
}

/// Who holds a slot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    /// The run.
    pub run: String,
    /// The candidate, or `base` for the baseline's tree.
    pub candidate: String,
    /// The process that took it.
    pub pid: u32,
}

impl Owner {
    pub fn new(run: &str, candidate: &str) -> Owner {
        Owner { run: run.to_string(), candidate: candidate.to_string(), pid: std::process::id() }
    }
}

/// What a slot is used for, as `slot.json` records it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Use {
    /// Free for the next candidate.
    #[default]
    Idle,
    /// Taken by its owner (when its lock is free, the owner died).
    InUse,
    /// Handed to the user (`--keep-worktrees`): never reused; `arbiter cache prune --kept`.
    Kept,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct SlotState {
    #[serde(rename = "use")]
    usage: Use,
    owner: Option<Owner>,
    base: Option<String>,
}

/// The pool of one repository.
#[derive(Clone, Debug)]
pub struct Pool {
    dir: PathBuf,
    /// The user's object directory, borrowed read-only by every workspace.
    objects: PathBuf,
    /// `--object-format` of the repository (`sha1` or `sha256`).
    object_format: String,
}

/// What `prune` removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct PruneReport {
    pub slots_removed: usize,
    pub bytes_freed: u64,
}

impl Pool {
    /// The pool of `repo` (the user's repository) under `cache` (`<cache>/workspaces/...`).
    pub async fn open(cache: &Path, repo: &Git) -> Result<Pool, PoolError> {
        let root = repo.dir().canonicalize().map_err(io(repo.dir()))?;
        let facts = repo.facts().await?;
        let objects = facts.common_dir.join("objects").canonicalize().map_err(io(&facts.common_dir))?;
        let object_format = facts.object_format;
        let dir = cache.join("workspaces").join(crate::user_dirs::repo_key(&root));
        fs::create_dir_all(&dir).map_err(io(&dir))?;
        restrict(&dir);
        let _ = fs::write(dir.join("repository"), format!("{}\n", root.display()));
        Ok(Pool { dir, objects, object_format })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The user's object directory the workspaces borrow.
    pub fn objects(&self) -> &Path {
        &self.objects
    }

    /// A free slot, reset to `base` and taken for `owner` (created when every slot is busy).
    pub async fn acquire(&self, base: &str, owner: &Owner) -> Result<Slot, PoolError> {
        let mut slot = self.lock_free_slot()?;
        slot.settled = false;
        slot.reset(base).await?;
        slot.set_state(SlotState { usage: Use::InUse, owner: Some(owner.clone()), base: Some(base.to_string()) });
        Ok(slot)
    }

    /// The slot `owner` left, as it left it (a resumed candidate continues in it), when it
    /// is still there and free.
    pub fn reacquire(&self, owner: &Owner) -> Option<Slot> {
        for path in self.slot_dirs() {
            let state = read_state(&path);
            let same = state.owner.as_ref().is_some_and(|o| o.run == owner.run && o.candidate == owner.candidate);
            if !same || state.usage == Use::Kept {
                continue;
            }
            if let Some(mut slot) = Slot::try_lock(&path, self)
                && slot.tree().join(".git").exists()
            {
                slot.settled = false;
                // Whatever the interrupted attempt left running (without a sandbox to end it).
                kill_processes_inside(&path);
                slot.set_state(SlotState { usage: Use::InUse, owner: Some(owner.clone()), base: state.base });
                return Some(slot);
            }
        }
        None
    }

    /// The owners of slots still marked in use whose lock is free: their process died
    /// holding them. Each is reported once (the slot is marked idle).
    pub fn abandoned(&self) -> Vec<Owner> {
        self.slot_dirs()
            .into_iter()
            .filter_map(|path| {
                let state = read_state(&path);
                if state.usage != Use::InUse {
                    return None;
                }
                // The lock is taken by whoever holds the slot, this process included.
                let slot = Slot::try_lock(&path, self)?;
                // What its dead owner left running there (without a sandbox to end it).
                kill_processes_inside(&path);
                slot.set_state(SlotState { usage: Use::Idle, owner: state.owner.clone(), base: state.base });
                state.owner
            })
            .collect()
    }

    /// Removes idle slots beyond the `keep` most recently used (and kept ones too with
    /// `kept`); a slot in use is never touched.
    pub fn prune(&self, keep: usize, kept: bool) -> PruneReport {
        let mut idle: Vec<(std::time::SystemTime, PathBuf)> = Vec::new();
        let mut report = PruneReport::default();
        for path in self.slot_dirs() {
            let Some(slot) = Slot::try_lock(&path, self) else { continue };
            let state = read_state(&path);
            match state.usage {
                Use::Kept if !kept => continue,
                Use::Kept => {
                    report.bytes_freed += size_of(&path);
                    if slot.destroy() {
                        report.slots_removed += 1;
                    }
                }
                _ => {
                    let used =
                        fs::metadata(path.join(STATE_FILE)).and_then(|m| m.modified()).unwrap_or(std::time::UNIX_EPOCH);
                    idle.push((used, path));
                }
            }
        }
        // Left by a removal that was interrupted.
        for entry in fs::read_dir(&self.dir).into_iter().flatten().flatten() {
            if entry.file_name().to_string_lossy().starts_with(".removing-") {
                report.bytes_freed += size_of(&entry.path());
                let _ = fs::remove_dir_all(entry.path());
            }
        }
        idle.sort_by_key(|(used, _)| std::cmp::Reverse(*used));
        for (_, path) in idle.into_iter().skip(keep) {
            if let Some(slot) = Slot::try_lock(&path, self) {
                report.bytes_freed += size_of(&path);
                if slot.destroy() {
                    report.slots_removed += 1;
                }
            }
        }
        report
    }

    fn slot_dirs(&self) -> Vec<PathBuf> {
        let mut dirs: Vec<(u32, PathBuf)> = fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let n = e.file_name().to_str()?.strip_prefix(SLOT_PREFIX)?.parse::<u32>().ok()?;
                Some((n, e.path()))
            })
            .collect();
        dirs.sort();
        dirs.into_iter().map(|(_, p)| p).collect()
    }

    fn lock_free_slot(&self) -> Result<Slot, PoolError> {
        let dirs = self.slot_dirs();
        for path in &dirs {
            if read_state(path).usage == Use::Kept {
                continue;
            }
            if let Some(slot) = Slot::try_lock(path, self) {
                // Kept by someone between the read and the lock.
                if read_state(path).usage == Use::Kept {
                    continue;
                }
                return Ok(slot);
            }
        }
        // All busy: a new slot. Creating its directory is the atomic claim on its number.
        let mut n = dirs.len() as u32 + 1;
        loop {
            let path = self.dir.join(format!("{SLOT_PREFIX}{n}"));
            match fs::create_dir(&path) {
                Ok(()) => {
                    restrict(&path);
                    if let Some(slot) = Slot::try_lock(&path, self) {
                        return Ok(slot);
                    }
                }
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io(&path)(e)),
            }
            n += 1;
        }
    }
}

/// One workspace, held (locked) until released. Dropping it releases it too; only a
/// process that dies holding it leaves it marked in use (see [`Pool::abandoned`]).
#[derive(Debug)]
pub struct Slot {
    dir: PathBuf,
    _lock: Flock<File>,
    objects: PathBuf,
    object_format: String,
    pool: PathBuf,
    /// Nothing left for `drop` to do: released, kept or removed already, or locked only to be
    /// looked at. A slot taken for use is not, and `drop` releases it.
    settled: bool,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if !self.settled {
            let state = read_state(&self.dir);
            self.set_state(SlotState { usage: Use::Idle, owner: state.owner, base: state.base });
        }
    }
}

impl Slot {
    fn try_lock(dir: &Path, pool: &Pool) -> Option<Slot> {
        let file = OpenOptions::new().create(true).truncate(false).write(true).open(dir.join(LOCK_FILE)).ok()?;
        let lock = Flock::lock(file, FlockArg::LockExclusiveNonblock).ok()?;
        // The directory may have been removed by a prune between listing and locking.
        if !dir.is_dir() {
            return None;
        }
        Some(Slot {
            dir: dir.to_path_buf(),
            _lock: lock,
            objects: pool.objects.clone(),
            object_format: pool.object_format.clone(),
            pool: pool.dir.clone(),
            // A lock taken to look or to prune settles nothing; a lease taken for use does.
            settled: true,
        })
    }

    /// The slot's directory (`slot-<n>`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The pool's directory (every slot of the repository).
    pub fn pool_dir(&self) -> &Path {
        &self.pool
    }

    /// The work tree the candidate works in.
    pub fn tree(&self) -> PathBuf {
        self.dir.join("tree")
    }

    /// The agent's home.
    pub fn home(&self) -> PathBuf {
        self.dir.join("home")
    }

    /// The agent's temporary directory.
    pub fn tmp(&self) -> PathBuf {
        self.dir.join("tmp")
    }

    /// Read-only inputs: the prompt.
    pub fn input(&self) -> PathBuf {
        self.dir.join("input")
    }

    pub fn prompt_file(&self) -> PathBuf {
        self.input().join(PROMPT_FILE)
    }

    /// arbiter's git directory for the tree.
    pub fn git_dir(&self) -> PathBuf {
        self.dir.join("git")
    }

    /// Git on the tree through arbiter's own git directory.
    pub fn git(&self) -> Git {
        Git::isolated(self.git_dir(), self.tree())
    }

    /// Frees the slot for the next candidate (it keeps naming its last owner, so a resume
    /// finds it as long as nobody took it since).
    pub fn release(mut self) {
        let state = read_state(&self.dir);
        self.set_state(SlotState { usage: Use::Idle, owner: state.owner, base: state.base });
        self.settled = true;
        let pool = self.pool.clone();
        drop(self);
        trim_idle(&pool);
    }

    /// Hands the slot to the user (`--keep-worktrees`): it is never reused.
    pub fn keep(mut self) {
        let mut state = read_state(&self.dir);
        state.usage = Use::Kept;
        self.set_state(state);
        self.settled = true;
    }

    /// Removes the slot (its lock goes with it). Returns whether it is gone.
    fn destroy(mut self) -> bool {
        self.settled = true;
        let dir = self.dir.clone();
        // Renamed first, so no other process can lock a half-removed slot.
        let doomed = dir.with_file_name(format!(".removing-{}-{}", std::process::id(), crate::random_suffix()));
        let removed = fs::rename(&dir, &doomed).is_ok();
        drop(self);
        if removed {
            let _ = fs::remove_dir_all(&doomed);
        }
        removed
    }

    fn set_state(&self, state: SlotState) {
        if let Ok(text) = serde_json::to_vec_pretty(&state) {
            let _ = crate::rundir::write_atomic(&self.dir.join(STATE_FILE), &text);
        }
    }

    /// Makes the slot exactly a fresh checkout of `base` (see the module docs).
    pub async fn reset(&mut self, base: &str) -> Result<(), PoolError> {
        kill_processes_inside(&self.dir);
        let tree = self.tree();
        remove_any(&tree.join(".git")).map_err(io(&tree))?;
        if self.try_reset(base).await.is_err() {
            // Whatever state a crash left: start this slot from nothing.
            remove_any(&tree).map_err(io(&tree))?;
            remove_any(&self.git_dir()).map_err(io(&self.dir))?;
            self.try_reset(base).await?;
        }
        self.write_candidate_repository(base)?;
        for dir in [self.home(), self.tmp(), self.input()] {
            remove_any(&dir).map_err(io(&dir))?;
            fs::create_dir_all(&dir).map_err(io(&dir))?;
            restrict(&dir);
        }
        Ok(())
    }

    async fn try_reset(&self, base: &str) -> Result<(), PoolError> {
        let git_dir = self.git_dir();
        if !git_dir.join("HEAD").is_file() {
            self.init_git_dir().await?;
        }
        // A lock left by a process that died holding it (the slot's flock says none runs).
        let _ = fs::remove_file(git_dir.join("index.lock"));
        let tree = self.tree();
        fs::create_dir_all(&tree).map_err(io(&tree))?;
        let git = self.git();
        git.run(["reset", "--hard", "--quiet", "--no-recurse-submodules", base]).await?;
        git.run(["clean", "-ffdxq"]).await?;
        // The captures of earlier candidates: every object a fresh tree needs is the user's.
        remove_loose_objects(&git_dir.join("objects"));
        Ok(())
    }

    async fn init_git_dir(&self) -> Result<(), PoolError> {
        let git_dir = self.git_dir();
        let _ = fs::remove_dir_all(&git_dir);
        let format = format!("--object-format={}", self.object_format);
        let init = Git::new(self.dir.clone());
        init.run([
            std::ffi::OsStr::new("init"),
            std::ffi::OsStr::new("--quiet"),
            std::ffi::OsStr::new("--bare"),
            std::ffi::OsStr::new("--template="),
            std::ffi::OsStr::new(&format),
            git_dir.as_os_str(),
        ])
        .await?;
        let info = git_dir.join("objects").join("info");
        fs::create_dir_all(&info).map_err(io(&info))?;
        fs::write(info.join("alternates"), format!("{}\n", self.objects.display())).map_err(io(&info))?;
        for (key, value) in [("core.bare", "false"), ("gc.auto", "0"), ("core.logAllRefUpdates", "false")] {
            Git::new(self.dir.clone())
                .run([
                    std::ffi::OsStr::new("--git-dir"),
                    git_dir.as_os_str(),
                    "config".as_ref(),
                    key.as_ref(),
                    value.as_ref(),
                ])
                .await?;
        }
        Ok(())
    }

    /// The candidate's own `.git`: HEAD at `base`, the index arbiter's reset left (which
    /// matches the tree), a minimal config, and the user's objects borrowed read-only.
    fn write_candidate_repository(&self, base: &str) -> Result<(), PoolError> {
        let dot_git = self.tree().join(".git");
        let fail = io(&dot_git);
        (|| -> std::io::Result<()> {
            for d in ["refs/heads", "refs/tags", "objects/info", "info"] {
                fs::create_dir_all(dot_git.join(d))?;
            }
            fs::write(dot_git.join("HEAD"), format!("{base}\n"))?;
            let format = if self.object_format == "sha1" {
                "\trepositoryformatversion = 0\n".to_string()
            } else {
                format!(
                    "\trepositoryformatversion = 1\n[extensions]\n\tobjectformat = {}\n[core]\n",
                    self.object_format
                )
            };
            fs::write(
                dot_git.join("config"),
                format!(
                    "[core]\n{format}\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n{CANDIDATE_IDENTITY}"
                ),
            )?;
            fs::write(dot_git.join("objects/info/alternates"), format!("{}\n", self.objects.display()))?;
            fs::copy(self.git_dir().join("index"), dot_git.join("index"))?;
            Ok(())
        })()
        .map_err(fail)
    }
}

/// What pruning every pool of a cache removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct CachePruneReport {
    /// Pools of repositories that no longer exist, removed whole.
    pub pools_removed: usize,
    pub slots_removed: usize,
    pub bytes_freed: u64,
    /// Workspaces left because they are in use.
    pub in_use: usize,
}

/// Prunes every pool under `cache` (`arbiter cache prune`): the pool of a repository that
/// no longer exists goes whole (unless a workspace of it is in use); in the others, idle
/// workspaces beyond the `keep` most recently used go, and kept ones too with `kept`.
pub fn prune_cache(cache: &Path, keep: usize, kept: bool) -> CachePruneReport {
    let mut report = CachePruneReport::default();
    for entry in fs::read_dir(cache.join("workspaces")).into_iter().flatten().flatten() {
        let dir = entry.path();
        if !dir.is_dir() {
            continue;
        }
        let repository = fs::read_to_string(dir.join("repository")).unwrap_or_default();
        let gone = repository.trim().is_empty() || !Path::new(repository.trim()).join(".git").exists();
        let pool = Pool { dir: dir.clone(), objects: PathBuf::new(), object_format: String::new() };
        let pruned = pool.prune(if gone { 0 } else { keep }, kept || gone);
        report.slots_removed += pruned.slots_removed;
        report.bytes_freed += pruned.bytes_freed;
        let left = pool.slot_dirs();
        report.in_use += left.iter().filter(|slot| Slot::try_lock(slot, &pool).is_none()).count();
        if gone && left.is_empty() {
            report.bytes_freed += size_of(&dir);
            if fs::remove_dir_all(&dir).is_ok() {
                report.pools_removed += 1;
            }
        }
    }
    report
}

/// Removes idle slots beyond [`IDLE_SLOTS_KEPT`] (the highest-numbered first).
fn trim_idle(pool_dir: &Path) {
    let pool = Pool { dir: pool_dir.to_path_buf(), objects: PathBuf::new(), object_format: String::new() };
    let mut idle = Vec::new();
    for path in pool.slot_dirs() {
        if let Some(slot) = Slot::try_lock(&path, &pool)
            && read_state(&path).usage == Use::Idle
        {
            idle.push(slot);
        }
    }
    while idle.len() > IDLE_SLOTS_KEPT {
        if let Some(slot) = idle.pop() {
            slot.destroy();
        }
    }
}

fn read_state(slot: &Path) -> SlotState {
    fs::read(slot.join(STATE_FILE)).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default()
}

/// Owner-only permissions: other users of the machine have no business in a workspace.
fn restrict(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o700));
}

/// Removes a file, a symbolic link or a directory tree (never following a link).
fn remove_any(path: &Path) -> std::io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

fn remove_loose_objects(objects: &Path) {
    for entry in fs::read_dir(objects).into_iter().flatten().flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.len() == 2 && name.chars().all(|c| c.is_ascii_hexdigit()) {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

fn size_of(path: &Path) -> u64 {
    let Ok(meta) = fs::symlink_metadata(path) else { return 0 };
    if !meta.is_dir() {
        return meta.len();
    }
    fs::read_dir(path).into_iter().flatten().flatten().map(|e| size_of(&e.path())).sum()
}

/// Kills the process groups of processes still working inside `dir` (left by a run whose
/// arbiter died without a sandbox to take them down). Found by their working directory, so
/// an unrelated process is never hit.
pub(crate) fn kill_processes_inside(dir: &Path) {
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    async fn repo() -> (tempfile::TempDir, Git, String) {
        let tmp = tempfile::tempdir().expect("temp dir");
        let git = Git::new(tmp.path().to_path_buf());
        git.run(["init", "--quiet"]).await.expect("git init");
        fs::create_dir_all(tmp.path().join("src")).unwrap();
        fs::write(tmp.path().join("src/a.txt"), "a\n").unwrap();
        fs::write(tmp.path().join("run.sh"), "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(tmp.path().join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        fs::write(tmp.path().join(".gitignore"), "*.log\n").unwrap();
        git.run(["add", "-A"]).await.expect("git add");
        git.run(["-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "--quiet", "-m", "base"])
            .await
            .expect("git commit");
        let base = git.resolve_commit("HEAD").await.expect("HEAD");
        (tmp, git, base)
    }

    /// Every file under `dir` (relative path → kind, mode and content), `.git/index` aside
    /// (its stat data differs from tree to tree by nature; `git status` checks it instead).
    fn snapshot(dir: &Path) -> BTreeMap<String, String> {
        use std::os::unix::fs::PermissionsExt;
        let mut out = BTreeMap::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                let meta = fs::symlink_metadata(&p).unwrap();
                if meta.is_dir() {
                    out.insert(rel, format!("dir {:o}", meta.permissions().mode()));
                    stack.push(p);
                } else if meta.file_type().is_symlink() {
                    out.insert(rel, format!("link {}", fs::read_link(&p).unwrap().display()));
                } else if rel != ".git/index" {
                    let content = String::from_utf8_lossy(&fs::read(&p).unwrap()).into_owned();
                    out.insert(rel, format!("file {:o} {content}", meta.permissions().mode()));
                }
            }
        }
        out
    }

    fn candidate_git(tree: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git").args(args).current_dir(tree).output().expect("git");
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    #[tokio::test]
    async fn a_reused_workspace_is_indistinguishable_from_a_fresh_one() {
        let (_repo, git, base) = repo().await;
        let cache = tempfile::tempdir().unwrap();
        let pool = Pool::open(cache.path(), &git).await.expect("pool");
        let owner = Owner::new("run-1", "c01");
        let slot = pool.acquire(&base, &owner).await.expect("acquire");
        let fresh = (snapshot(&slot.tree()), snapshot(&slot.home()), snapshot(&slot.tmp()));
        assert_eq!(candidate_git(&slot.tree(), &["status", "--porcelain", "--ignored"]), "");
        assert_eq!(candidate_git(&slot.tree(), &["rev-parse", "HEAD"]).trim(), base);

        // A hostile candidate leaves everything it can behind.
        let tree = slot.tree();
        fs::write(tree.join("src/a.txt"), "changed\n").unwrap();
        fs::write(tree.join("new.txt"), "new\n").unwrap();
        fs::write(tree.join("debug.log"), "ignored\n").unwrap();
        fs::remove_file(tree.join("run.sh")).unwrap();
        std::os::unix::fs::symlink("/etc", tree.join("src/escape")).unwrap();
        fs::create_dir_all(tree.join("nested/.git")).unwrap();
        fs::write(tree.join(".git/hooks-planted"), "x").unwrap();
        fs::create_dir_all(tree.join(".git/hooks")).unwrap();
        fs::write(tree.join(".git/hooks/post-checkout"), "#!/bin/sh\ntouch /tmp/pwned\n").unwrap();
        fs::write(tree.join(".git/config"), "[core]\n\tfsmonitor = touch /tmp/pwned\n").unwrap();
        candidate_git(&tree, &["update-ref", "refs/heads/evil", &base]);
        fs::write(slot.home().join(".bashrc"), "evil\n").unwrap();
        fs::write(slot.tmp().join("left"), "x").unwrap();
        slot.release();

        let again = pool.acquire(&base, &Owner::new("run-2", "c01")).await.expect("acquire again");
        assert_eq!(again.dir(), pool.dir().join("slot-1"), "the slot was reused");
        assert_eq!((snapshot(&again.tree()), snapshot(&again.home()), snapshot(&again.tmp())), fresh);
        assert_eq!(candidate_git(&again.tree(), &["status", "--porcelain", "--ignored"]), "");
        assert_eq!(candidate_git(&again.tree(), &["for-each-ref"]), "");
        // And a slot made from nothing right now is the same.
        let other = pool.acquire(&base, &Owner::new("run-2", "c02")).await.expect("a second slot");
        assert_eq!(other.dir(), pool.dir().join("slot-2"));
        assert_eq!(snapshot(&other.tree()), snapshot(&again.tree()));
    }

    #[tokio::test]
    async fn arbiter_s_git_never_runs_what_the_candidate_s_repository_names() {
        let (_repo, git, base) = repo().await;
        let cache = tempfile::tempdir().unwrap();
        let pool = Pool::open(cache.path(), &git).await.expect("pool");
        let slot = pool.acquire(&base, &Owner::new("run", "c01")).await.expect("acquire");
        let tree = slot.tree();
        let marker = cache.path().join("ran");
        let script = cache.path().join("evil.sh");
        fs::write(&script, format!("#!/bin/sh\ntouch {}\ncat\n", marker.display())).unwrap();
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
        let s = script.display();
        fs::write(
            tree.join(".git/config"),
            format!(
                "[core]\n\tfsmonitor = {s}\n\tpager = {s}\n\tsshCommand = {s}\n[filter \"evil\"]\n\tclean = {s}\n\tsmudge = {s}\n[diff \"evil\"]\n\ttextconv = {s}\n\tcommand = {s}\n[alias]\n\tadd = !{s}\n"
            ),
        )
        .unwrap();
        fs::create_dir_all(tree.join(".git/hooks")).unwrap();
        for hook in ["pre-commit", "post-checkout", "post-index-change", "reference-transaction"] {
            fs::copy(&script, tree.join(".git/hooks").join(hook)).unwrap();
        }
        fs::write(tree.join(".gitattributes"), "* filter=evil diff=evil\n").unwrap();
        fs::write(tree.join("src/a.txt"), "changed\n").unwrap();

        let ws = slot.git();
        let limits = arbiter_core::limits::CandidateLimits::default();
        let patch = crate::capture::capture_patch(&ws, &base, &[], &limits).await.expect("capture").text;
        assert!(patch.contains("+changed"), "{patch}");
        assert!(patch.contains(".gitattributes"), "{patch}");
        crate::capture::touched_paths(&ws, &base).await.expect("touched");
        crate::capture::restore_from_base(&ws, &base, &["src/a.txt".into()]).await.expect("restore");
        assert_eq!(fs::read_to_string(tree.join("src/a.txt")).unwrap(), "a\n");
        slot.release();
        pool.acquire(&base, &Owner::new("run", "c02")).await.expect("reset").release();
        assert!(!marker.exists(), "a program the candidate named was run by arbiter's git");
    }

    #[tokio::test]
    async fn slots_are_exclusive_and_a_dead_holder_s_slot_is_reported_and_reused() {
        let (_repo, git, base) = repo().await;
        let cache = tempfile::tempdir().unwrap();
        let pool = Pool::open(cache.path(), &git).await.expect("pool");
        let mut held = Vec::new();
        for i in 0..3 {
            held.push(pool.acquire(&base, &Owner::new("run", &format!("c0{i}"))).await.expect("acquire"));
        }
        let dirs: std::collections::BTreeSet<_> = held.iter().map(|s| s.dir().to_path_buf()).collect();
        assert_eq!(dirs.len(), 3, "three distinct slots");
        assert!(pool.abandoned().is_empty(), "slots held by this process are not abandoned");

        // A holder that died (no drop ran): its state says in use, its lock is free.
        let dead = Owner { run: "crashed-run".into(), candidate: "c09".into(), pid: i32::MAX as u32 };
        let slot = held.pop().unwrap();
        let dir = slot.dir().to_path_buf();
        drop(slot);
        let state = SlotState { usage: Use::InUse, owner: Some(dead.clone()), base: Some(base.clone()) };
        fs::write(dir.join(STATE_FILE), serde_json::to_vec(&state).unwrap()).unwrap();
        assert_eq!(pool.abandoned(), vec![dead.clone()]);
        assert!(pool.abandoned().is_empty(), "reported once");

        // A resume finds the slot its candidate left, untouched.
        let slot = pool.acquire(&base, &Owner::new("run-r", "c05")).await.expect("acquire");
        fs::write(slot.tree().join("work-in-progress"), "wip").unwrap();
        let dir = slot.dir().to_path_buf();
        drop(slot);
        let again = pool.reacquire(&Owner::new("run-r", "c05")).expect("reacquire");
        assert_eq!(again.dir(), dir);
        assert!(again.tree().join("work-in-progress").exists());
        assert!(pool.reacquire(&Owner::new("run-r", "c05")).is_none(), "held now");
        again.keep();
        assert_ne!(
            pool.acquire(&base, &Owner::new("x", "c01")).await.expect("acquire").dir(),
            dir,
            "kept is never reused"
        );
    }

    #[tokio::test]
    async fn pruning_the_cache_drops_pools_of_vanished_repositories_and_spares_busy_workspaces() {
        let (repo_a, git_a, base_a) = repo().await;
        let (repo_b, git_b, base_b) = repo().await;
        let cache = tempfile::tempdir().unwrap();
        let a = Pool::open(cache.path(), &git_a).await.unwrap();
        let b = Pool::open(cache.path(), &git_b).await.unwrap();
        let idle = a.acquire(&base_a, &Owner::new("r", "c01")).await.unwrap();
        let busy = a.acquire(&base_a, &Owner::new("r", "c02")).await.unwrap();
        idle.release();
        b.acquire(&base_b, &Owner::new("r", "c01")).await.unwrap().release();
        drop(repo_b);
        let report = prune_cache(cache.path(), 0, false);
        assert_eq!(report.pools_removed, 1, "{report:?}");
        assert!(!b.dir().exists());
        assert_eq!(report.slots_removed, 2, "b's slot and a's idle one: {report:?}");
        assert_eq!(report.in_use, 1);
        assert!(busy.tree().join("src/a.txt").exists());
        drop(repo_a);
    }

    #[tokio::test]
    async fn prune_removes_idle_slots_but_not_busy_or_kept_ones() {
        let (_repo, git, base) = repo().await;
        let cache = tempfile::tempdir().unwrap();
        let pool = Pool::open(cache.path(), &git).await.expect("pool");
        let a = pool.acquire(&base, &Owner::new("r", "c01")).await.unwrap();
        let b = pool.acquire(&base, &Owner::new("r", "c02")).await.unwrap();
        let c = pool.acquire(&base, &Owner::new("r", "c03")).await.unwrap();
        let busy = pool.acquire(&base, &Owner::new("r", "c04")).await.unwrap();
        a.release();
        b.release();
        c.keep();
        let report = pool.prune(0, false);
        assert_eq!(report.slots_removed, 2);
        assert!(report.bytes_freed > 0);
        assert!(busy.tree().join("src/a.txt").exists());
        assert_eq!(pool.prune(0, true).slots_removed, 1, "the kept one, on request");
        assert_eq!(pool.slot_dirs(), vec![busy.dir().to_path_buf()]);
    }
}
