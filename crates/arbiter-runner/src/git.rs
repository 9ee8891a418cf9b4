//! The one way arbiter talks to git: the `git` program, with a sanitized environment.
//!
//! Working-tree mutations (workspaces, apply, commit) go through the git CLI because it is
//! what users run and trust; libraries differ from it at the edges. Inherited `GIT_DIR`,
//! `GIT_WORK_TREE` and `GIT_INDEX_FILE` are removed so a caller's environment cannot
//! redirect arbiter to another repository, prompts are disabled, and messages are in C.
//!
//! No git call of arbiter's runs a program a repository names: every call turns off the
//! fsmonitor, hooks and the pager, and never uses external diff or textconv drivers. The
//! git of a candidate's workspace ([`Git::isolated`]) goes further: its git directory is
//! arbiter's own (the candidate never sees it), and system and global configuration are not
//! read at all, so no filter, diff or merge driver, `core.sshCommand` or alias can be
//! defined for it — whatever the candidate wrote into its tree's `.gitattributes`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// What does not change about a repository while arbiter runs: looked up once per process
/// and repository (a plan's tasks would otherwise ask git for it hundreds of times).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepoFacts {
    /// The git directory (`.git`, or a linked worktree's own), absolute.
    pub git_dir: PathBuf,
    /// The common git directory (the main repository's `.git`), absolute.
    pub common_dir: PathBuf,
    /// `sha1` or `sha256`.
    pub object_format: String,
    /// Whether commits get an author from the configuration (`user.name` and `user.email`).
    pub has_identity: bool,
}

static FACTS: std::sync::Mutex<Option<std::collections::HashMap<PathBuf, RepoFacts>>> = std::sync::Mutex::new(None);

/// What identifies a version of a file (its inode, size and change time), if it exists.
fn file_stamp(path: &Path) -> Option<(u64, u64, i64, i64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.ino(), m.size(), m.ctime(), m.ctime_nsec()))
}

/// Serializes changes to worktree records within this process (see [`Git::worktree_add`]).
static WORKTREE_RECORDS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A git failure, with git's own message.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("git is not installed or not on PATH ({0}); install git and try again")]
    Missing(std::io::Error),
    #[error("`git {args}` failed in {dir}: {stderr}")]
    Failed { args: String, dir: String, stderr: String },
    #[error("{0} is not inside a git repository; run `git init` there or pass --repo DIR")]
    NotARepository(String),
    #[error("cannot resolve '{0}' to a commit; pass an existing branch, tag or commit to --base")]
    UnknownRevision(String),
    #[error("the repository has no commit yet; commit your files first (candidates start from a commit)")]
    NoCommits,
    #[error("i/o error around git: {0}")]
    Io(#[from] std::io::Error),
}

/// Output of a successful git command.
pub struct GitOutput {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl GitOutput {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).trim_end().to_string()
    }
}

/// Settings on every git call: no program a repository names is ever run.
const HARDENING: &[&str] = &["-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-c", "core.pager=cat"];

/// More settings for the git of a candidate's workspace.
const ISOLATION: &[&str] = &[
    "-c",
    "core.attributesFile=/dev/null",
    "-c",
    "core.sshCommand=false",
    "-c",
    "protocol.allow=never",
    "-c",
    "core.untrackedCache=false",
];

/// Why git could not be started or talked to: missing, or another i/o error.
fn not_started(e: std::io::Error) -> GitError {
    if e.kind() == std::io::ErrorKind::NotFound { GitError::Missing(e) } else { GitError::Io(e) }
}

/// Runs git in a directory.
#[derive(Clone, Debug)]
pub struct Git {
    dir: PathBuf,
    /// A git directory of arbiter's own for the work tree `dir` (a candidate's workspace).
    isolated: Option<PathBuf>,
    /// Where new objects go instead of the repository's object directory, whose objects stay
    /// readable ([`Git::quarantined`]).
    quarantine: Option<(PathBuf, PathBuf)>,
}

impl Git {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Git { dir: dir.into(), isolated: None, quarantine: None }
    }

    /// Git on the work tree `work_tree` through the git directory `git_dir`, which arbiter
    /// owns: the work tree's own `.git` (the candidate's) is never read, and neither is any
    /// system or global configuration.
    pub fn isolated(git_dir: impl Into<PathBuf>, work_tree: impl Into<PathBuf>) -> Self {
        Git { dir: work_tree.into(), isolated: Some(git_dir.into()), quarantine: None }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// This git with every object it writes put in `quarantine` (an object directory of its
    /// own), not in the repository's `objects` directory, whose objects it still reads: git
    /// work on a repository that leaves nothing in it.
    pub fn quarantined(&self, quarantine: PathBuf, objects: PathBuf) -> Git {
        Git { quarantine: Some((quarantine, objects)), ..self.clone() }
    }

    fn command<I, S>(&self, args: I, index_file: Option<&Path>) -> tokio::process::Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = tokio::process::Command::new("git");
        cmd.arg("-c").arg("core.quotepath=off").args(HARDENING);
        if self.isolated.is_some() {
            cmd.args(ISOLATION);
        }
        cmd.args(args).current_dir(&self.dir);
        for var in [
            "GIT_DIR",
            "GIT_WORK_TREE",
            "GIT_INDEX_FILE",
            "GIT_OBJECT_DIRECTORY",
            "GIT_CEILING_DIRECTORIES",
            "GIT_PREFIX",
        ] {
            cmd.env_remove(var);
        }
        cmd.env("GIT_TERMINAL_PROMPT", "0").env("LC_ALL", "C").env("GIT_OPTIONAL_LOCKS", "0");
        if let Some(git_dir) = &self.isolated {
            cmd.env("GIT_DIR", git_dir)
                .env("GIT_WORK_TREE", &self.dir)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_ATTR_NOSYSTEM", "1");
        }
        if let Some(index) = index_file {
            cmd.env("GIT_INDEX_FILE", index);
        }
        if let Some((quarantine, objects)) = &self.quarantine {
            cmd.env("GIT_OBJECT_DIRECTORY", quarantine).env("GIT_ALTERNATE_OBJECT_DIRECTORIES", objects);
        }
        cmd.stdin(Stdio::null()).kill_on_drop(true);
        cmd
    }

    /// Runs `git ARGS`, failing on a non-zero exit.
    pub async fn run<I, S>(&self, args: I) -> Result<GitOutput, GitError>
    where
        I: IntoIterator<Item = S> + Clone,
        S: AsRef<OsStr>,
    {
        self.run_with_index(args, None).await
    }

    /// Runs `git ARGS` with `env` added to its environment (what must not be on its command
    /// line: an HTTP authorization header), failing on a non-zero exit.
    pub async fn run_with_env<I, S>(&self, args: I, env: &[(String, String)]) -> Result<GitOutput, GitError>
    where
        I: IntoIterator<Item = S> + Clone,
        S: AsRef<OsStr>,
    {
        let mut cmd = self.command(args.clone(), None);
        cmd.envs(env.iter().map(|(k, v)| (k, v)));
        let out = cmd.output().await.map_err(not_started)?;
        self.outcome(args, out)
    }

    /// Runs `git ARGS` with `input` on its standard input (`update-ref --stdin`), failing on
    /// a non-zero exit.
    pub async fn run_with_input<I, S>(&self, args: I, input: &[u8]) -> Result<GitOutput, GitError>
    where
        I: IntoIterator<Item = S> + Clone,
        S: AsRef<OsStr>,
    {
        use tokio::io::AsyncWriteExt;
        let mut cmd = self.command(args.clone(), None);
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(not_started)?;
        if let Some(mut stdin) = child.stdin.take() {
            // git reads everything before it acts; a closed pipe shows up as its exit status.
            let _ = stdin.write_all(input).await;
            drop(stdin);
        }
        let out = child.wait_with_output().await.map_err(not_started)?;
        self.outcome(args, out)
    }

    /// Whether `ancestor` is `descendant` or one of its ancestors (`git merge-base
    /// --is-ancestor`, whose exit status 1 means no).
    pub async fn is_ancestor(&self, ancestor: &str, descendant: &str) -> Result<bool, GitError> {
        let out = self
            .command(["merge-base", "--is-ancestor", ancestor, descendant], None)
            .output()
            .await
            .map_err(not_started)?;
        match out.status.code() {
            Some(0) => Ok(true),
            Some(1) => Ok(false),
            _ => Err(GitError::Failed {
                args: format!("merge-base --is-ancestor {ancestor} {descendant}"),
                dir: self.dir.display().to_string(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            }),
        }
    }

    /// The value of a configuration key, if it is set.
    pub async fn config_value(&self, key: &str) -> Result<Option<String>, GitError> {
        match self.run(["config", "--get", key]).await {
            Ok(out) => Ok(Some(out.text()).filter(|v| !v.is_empty())),
            // Exit 1: the key is not set.
            Err(GitError::Failed { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Every worktree of the repository (the main one first) and the branch it has checked
    /// out (`None`: a detached HEAD), read from the git directory's `HEAD` files rather than
    /// asked of git: a plan checks it before every commit.
    pub async fn worktree_branches(&self) -> Result<Vec<(String, Option<String>)>, GitError> {
        let facts = self.facts().await?;
        let branch_of = |head: &Path| -> Option<String> {
            let text = std::fs::read_to_string(head).ok()?;
            text.trim().strip_prefix("ref: refs/heads/").map(str::to_string)
        };
        let mut all = Vec::new();
        // A bare repository has no main worktree.
        if facts.common_dir.file_name().is_some_and(|n| n == ".git")
            && let Some(main) = facts.common_dir.parent()
        {
            all.push((main.display().to_string(), branch_of(&facts.common_dir.join("HEAD"))));
        }
        let mut linked: Vec<(String, Option<String>)> = std::fs::read_dir(facts.common_dir.join("worktrees"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| {
                let admin = entry.path();
                let gitdir = std::fs::read_to_string(admin.join("gitdir")).ok()?;
                let path = Path::new(gitdir.trim()).parent()?.display().to_string();
                Some((path, branch_of(&admin.join("HEAD"))))
            })
            .collect();
        linked.sort();
        all.extend(linked);
        Ok(all)
    }

    /// Runs `git ARGS` with `GIT_INDEX_FILE` pointing at a private index.
    pub async fn run_with_index<I, S>(&self, args: I, index_file: Option<&Path>) -> Result<GitOutput, GitError>
    where
        I: IntoIterator<Item = S> + Clone,
        S: AsRef<OsStr>,
    {
        let out = self.command(args.clone(), index_file).output().await.map_err(not_started)?;
        self.outcome(args, out)
    }

    /// Runs `git ARGS` keeping at most `cap` bytes of its standard output: the bytes, and
    /// whether it had more (then git is killed the moment it writes past the cap, so an
    /// output of any size costs at most `cap` bytes of memory).
    pub async fn run_capped<I, S>(&self, args: I, cap: u64) -> Result<(Vec<u8>, bool), GitError>
    where
        I: IntoIterator<Item = S> + Clone,
        S: AsRef<OsStr>,
    {
        use tokio::io::AsyncReadExt;
        let mut cmd = self.command(args.clone(), None);
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(not_started)?;
        let (Some(stdout), Some(mut stderr)) = (child.stdout.take(), child.stderr.take()) else {
            return Err(GitError::Io(std::io::Error::other("git's output was not captured")));
        };
        // Its messages are read on the side: git must never wait on a full stderr pipe.
        let messages = tokio::spawn(async move {
            let mut err = Vec::new();
            let _ = stderr.read_to_end(&mut err).await;
            err
        });
        // Read to the cap and one byte past it: that byte says there was more.
        let mut kept = Vec::new();
        stdout.take(cap.saturating_add(1)).read_to_end(&mut kept).await.map_err(not_started)?;
        if kept.len() as u64 > cap {
            // Dropping the pipe alone would leave git blocked writing to it.
            let _ = child.start_kill();
            let _ = child.wait().await;
            messages.abort();
            kept.truncate(usize::try_from(cap).unwrap_or(usize::MAX));
            return Ok((kept, true));
        }
        let status = child.wait().await.map_err(not_started)?;
        let err = messages.await.unwrap_or_default();
        self.outcome(args, std::process::Output { status, stdout: kept, stderr: err }).map(|o| (o.stdout, false))
    }

    /// A finished git process as a result: its output, or its failure with its own message.
    fn outcome<I, S>(&self, args: I, out: std::process::Output) -> Result<GitOutput, GitError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        if out.status.success() {
            return Ok(GitOutput { stdout: out.stdout, stderr: out.stderr });
        }
        Err(GitError::Failed {
            args: args.into_iter().map(|a| a.as_ref().to_string_lossy().into_owned()).collect::<Vec<_>>().join(" "),
            dir: self.dir.display().to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }

    /// The top of the repository containing this directory.
    pub async fn toplevel(&self) -> Result<PathBuf, GitError> {
        match self.run(["rev-parse", "--show-toplevel"]).await {
            Ok(out) => Ok(PathBuf::from(out.text())),
            Err(GitError::Failed { stderr, .. }) if stderr.contains("not a git repository") => {
                Err(GitError::NotARepository(self.dir.display().to_string()))
            }
            Err(e) => Err(e),
        }
    }

    /// The commit a revision names.
    pub async fn resolve_commit(&self, rev: &str) -> Result<String, GitError> {
        let spec = format!("{rev}^{{commit}}");
        match self.run(["rev-parse", "--verify", "--quiet", spec.as_str()]).await {
            Ok(out) => Ok(out.text()),
            Err(GitError::Failed { .. }) if rev == "HEAD" => Err(GitError::NoCommits),
            Err(GitError::Failed { .. }) => Err(GitError::UnknownRevision(rev.to_string())),
            Err(e) => Err(e),
        }
    }

    /// The current branch name, or `None` on a detached HEAD.
    pub async fn current_branch(&self) -> Result<Option<String>, GitError> {
        match self.run(["symbolic-ref", "--quiet", "--short", "HEAD"]).await {
            Ok(out) => Ok(Some(out.text())),
            Err(GitError::Failed { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Paths with uncommitted changes (tracked or untracked, ignored files excluded).
    pub async fn dirty_paths(&self) -> Result<Vec<String>, GitError> {
        let out = self.run(["status", "--porcelain=v1", "-z", "--untracked-files=normal"]).await?;
        Ok(out
            .stdout
            .split(|b| *b == 0)
            .filter(|e| e.len() > 3)
            .map(|e| String::from_utf8_lossy(&e[3..]).into_owned())
            .filter(|p| !p.starts_with(".arbiter/"))
            .collect())
    }

    /// `git worktree add --detach PATH COMMIT`, then the checkout.
    ///
    /// git does not support concurrent changes to a repository's worktree records: two
    /// `worktree add` at once can read each other's half-written `.git/worktrees/<name>/`
    /// and fail. So only the record is created under a lock (`--no-checkout`, a few ms) and
    /// the expensive checkout, private to the new worktree, runs in parallel. Another
    /// process (a second arbiter run) can still collide, so a failed record is retried.
    pub async fn worktree_add(&self, path: &Path, commit: &str) -> Result<(), GitError> {
        let args = [
            OsStr::new("worktree"),
            OsStr::new("add"),
            OsStr::new("--no-checkout"),
            OsStr::new("--detach"),
            OsStr::new("--quiet"),
            path.as_os_str(),
            OsStr::new(commit),
        ];
        let mut attempt = 0;
        loop {
            let added = {
                let _records = WORKTREE_RECORDS.lock().await;
                self.run(args).await
            };
            match added {
                Ok(_) => break,
                Err(GitError::Failed { .. }) if attempt < 3 => {
                    attempt += 1;
                    if path.exists() {
                        let _ = tokio::fs::remove_dir_all(path).await;
                    }
                    let _ = self.worktree_prune().await;
                    tokio::time::sleep(std::time::Duration::from_millis(50 * attempt)).await;
                }
                Err(e) => return Err(e),
            }
        }
        Git::new(path).run(["reset", "--hard", "--quiet"]).await.map(|_| ())
    }

    /// Removes a worktree and its administrative record, even when it is dirty or half gone.
    /// The files are deleted without the lock; only the record pruning takes it.
    pub async fn worktree_remove(&self, path: &Path) -> Result<(), GitError> {
        if path.exists() {
            tokio::fs::remove_dir_all(path).await?;
        }
        self.worktree_prune().await
    }

    /// Drops the records of worktrees whose directories are gone.
    pub async fn worktree_prune(&self) -> Result<(), GitError> {
        let _records = WORKTREE_RECORDS.lock().await;
        self.run(["worktree", "prune"]).await.map(|_| ())
    }

    /// Whether `name` is a valid new branch name.
    pub async fn valid_branch_name(&self, name: &str) -> bool {
        self.run(["check-ref-format", "--branch", name]).await.is_ok()
    }

    pub async fn branch_exists(&self, name: &str) -> Result<bool, GitError> {
        Ok(self.ref_target(&format!("refs/heads/{name}")).await?.is_some())
    }

    /// The object a ref (`refs/...`) points at, if it exists: read from the repository's
    /// files (a loose ref, else `packed-refs`) without starting git, which a control plane
    /// asks on every claim; git itself answers for a symbolic ref or a reftable repository.
    pub async fn ref_target(&self, name: &str) -> Result<Option<String>, GitError> {
        let facts = self.facts().await?;
        let common = &facts.common_dir;
        let fast = name.starts_with("refs/") && !name.contains("..") && !common.join("reftable").exists();
        if fast {
            let packed = common.join("packed-refs");
            for _ in 0..3 {
                let before = file_stamp(&packed);
                match std::fs::read_to_string(common.join(name)) {
                    Ok(text) if !text.starts_with("ref:") && !text.trim().is_empty() => {
                        return Ok(Some(text.trim().to_string()));
                    }
                    Ok(_) => break,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    // A directory of that name (a longer ref's prefix), or unreadable.
                    Err(_) => break,
                }
                let found = std::fs::read_to_string(&packed).ok().and_then(|text| {
                    text.lines()
                        .filter(|l| !l.starts_with('#') && !l.starts_with('^'))
                        .find_map(|l| l.split_once(' ').filter(|(_, r)| *r == name).map(|(oid, _)| oid.to_string()))
                });
                // `packed-refs` rewritten while it was read (a `pack-refs` moving the ref):
                // read again.
                if file_stamp(&packed) == before {
                    return Ok(found);
                }
            }
        }
        match self.run(["rev-parse", "--verify", "--quiet", name]).await {
            Ok(out) => Ok(Some(out.text())),
            Err(GitError::Failed { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The repository's [`RepoFacts`] (asked of git once per process).
    pub async fn facts(&self) -> Result<RepoFacts, GitError> {
        let cached = FACTS.lock().unwrap_or_else(|p| p.into_inner()).as_ref().and_then(|m| m.get(&self.dir).cloned());
        if let Some(facts) = cached {
            return Ok(facts);
        }
        let out = self
            .run(["rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir", "--show-object-format"])
            .await?
            .text();
        let mut lines = out.lines();
        let (Some(git_dir), Some(common_dir), format) = (lines.next(), lines.next(), lines.next()) else {
            return Err(GitError::NotARepository(self.dir.display().to_string()));
        };
        let facts = RepoFacts {
            git_dir: PathBuf::from(git_dir),
            common_dir: PathBuf::from(common_dir),
            object_format: format.unwrap_or("sha1").to_string(),
            has_identity: self.has_identity().await,
        };
        FACTS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert_with(Default::default)
            .insert(self.dir.clone(), facts.clone());
        Ok(facts)
    }

    /// Whether an author identity is configured (commits need one).
    pub async fn has_identity(&self) -> bool {
        self.run(["config", "user.name"]).await.is_ok() && self.run(["config", "user.email"]).await.is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git").args(args).current_dir(dir).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    #[tokio::test]
    async fn refs_read_from_files_agree_with_git() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        git(d, &["init", "-q", "-b", "main"]);
        git(d, &["-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "--allow-empty", "-m", "one"]);
        let head = git(d, &["rev-parse", "HEAD"]);
        git(d, &["update-ref", "refs/arbiter/plans/p/tasks/41", &head]);
        let repo = Git::new(d);
        assert_eq!(repo.ref_target("refs/heads/main").await.unwrap(), Some(head.clone()));
        assert_eq!(repo.ref_target("refs/arbiter/plans/p/tasks/41").await.unwrap(), Some(head.clone()));
        assert_eq!(repo.ref_target("refs/heads/missing").await.unwrap(), None);
        // A prefix of another ref is a directory, not a ref.
        assert_eq!(repo.ref_target("refs/arbiter/plans/p").await.unwrap(), None);
        // Packed: the loose files are gone, packed-refs answers.
        git(d, &["pack-refs", "--all"]);
        assert!(!d.join(".git/refs/heads/main").exists());
        assert_eq!(repo.ref_target("refs/heads/main").await.unwrap(), Some(head.clone()));
        assert_eq!(repo.ref_target("refs/arbiter/plans/p/tasks/41").await.unwrap(), Some(head.clone()));
        assert!(repo.branch_exists("main").await.unwrap());
        assert!(!repo.branch_exists("nope").await.unwrap());
        // A symbolic ref is git's to resolve.
        git(d, &["symbolic-ref", "refs/heads/alias", "refs/heads/main"]);
        assert_eq!(repo.ref_target("refs/heads/alias").await.unwrap(), Some(head));
    }
}
