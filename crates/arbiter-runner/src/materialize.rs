//! The one way a candidate's work reaches the user: [`check`], the single step that decides
//! whether a patch may go into the user's repository, and everything that puts it there —
//! the working tree, a new branch with one commit, `arbiter apply` (a new checked-out
//! branch, optionally committed), and, through [`commit_checked`], a plan's integration
//! branch and a pull request's branch.
//!
//! [`check`] applies the patch to the commit it is meant for in a private index (no working
//! tree is touched, and the objects it makes are kept apart until a commit needs them, so a
//! refused patch leaves nothing in the repository), measures what it changes against the limits (bytes, files, the size of
//! every file), and resolves every symbolic link of the resulting tree as the kernel would
//! ([`arbiter_core::links`]): a patch that leaves a link out of the repository or into
//! `.git`/`.arbiter` — directly, through a chain of links, or through `..` after a link — is
//! refused. Its verdict is a [`CheckedPatch`], which only it can make and which every way
//! into the user's repository requires; a patch read from a run directory (which is on disk
//! and could be edited) is checked again. Every path leaves the repository as it was when
//! anything fails.

use std::path::Path;

use arbiter_core::limits::{self, CandidateLimits, LimitBreach};

use crate::capture;
use crate::git::{Git, GitError};

/// Why a patch could not be materialized. Nothing was changed when this is returned.
#[derive(Debug, thiserror::Error)]
pub enum MaterializeError {
    #[error(
        "the working tree has uncommitted changes ({0}); commit or stash them, or pass --force to apply on top of them"
    )]
    Dirty(String),
    #[error("the patch does not apply to the working tree: {0}")]
    DoesNotApply(String),
    #[error("{}", Refusal::Breaks(.0.clone()))]
    Refused(Vec<LimitBreach>),
    #[error("the repository's HEAD is {head}, not {checked}, which the patch was checked on; check it again on {head}")]
    Moved { checked: String, head: String },
    #[error("'{0}' is not a valid branch name")]
    BadBranch(String),
    #[error("branch '{0}' already exists; choose another name or delete it first")]
    BranchExists(String),
    #[error(transparent)]
    Git(#[from] GitError),
}

impl From<std::io::Error> for MaterializeError {
    fn from(e: std::io::Error) -> Self {
        MaterializeError::Git(GitError::Io(e))
    }
}

impl From<Refusal> for MaterializeError {
    fn from(r: Refusal) -> Self {
        match r {
            Refusal::DoesNotApply(why) => MaterializeError::DoesNotApply(why),
            Refusal::Breaks(breaches) => MaterializeError::Refused(breaches),
        }
    }
}

/// Why [`check`] refused a patch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// It does not apply to the commit (git's complaint).
    DoesNotApply(String),
    /// It applies, but what it would leave breaks these limits.
    Breaks(Vec<LimitBreach>),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::DoesNotApply(why) => write!(f, "the patch does not apply: {}", why.trim()),
            Refusal::Breaks(breaches) => {
                let each: Vec<String> = breaches.iter().map(LimitBreach::describe).collect();
                write!(
                    f,
                    "the patch is refused, nothing of it was applied: {}. A link may only lead to a place inside the repository (not .git or .arbiter); the size limits are max_patch_bytes, max_patch_files and max_file_bytes under [run] in .arbiter/config.toml",
                    each.join("; ")
                )
            }
        }
    }
}

/// A patch [`check`] accepted for one commit: the exact bytes checked, the commit, and the
/// tree the patch makes of it. Only [`check`] makes one.
#[derive(Clone, Debug)]
pub struct CheckedPatch {
    text: Vec<u8>,
    onto: String,
    tree: String,
    limits: CandidateLimits,
    /// The objects of [`CheckedPatch::tree`] the repository did not have (an object
    /// directory of the check's own), moved into it by [`commit_checked`].
    objects: std::sync::Arc<tempfile::TempDir>,
}

impl CheckedPatch {
    /// The commit it was checked on.
    pub fn onto(&self) -> &str {
        &self.onto
    }

    /// The tree it makes of [`CheckedPatch::onto`].
    pub fn tree(&self) -> &str {
        &self.tree
    }

    pub fn text(&self) -> &[u8] {
        &self.text
    }

    /// The same patch checked on another commit (a branch that moved), with the same limits.
    pub async fn check_onto(&self, repo: &Git, commit: &str) -> Result<Result<CheckedPatch, Refusal>, GitError> {
        check(repo, commit, self.text.clone(), &self.limits).await
    }

    /// The patch as a file for `git apply` (removed when dropped): the bytes checked, never a
    /// file someone could change after the check.
    fn file(&self) -> std::io::Result<tempfile::NamedTempFile> {
        patch_file(&self.text)
    }
}

fn patch_file(text: &[u8]) -> std::io::Result<tempfile::NamedTempFile> {
    use std::io::Write;
    let mut file = tempfile::Builder::new().prefix("arbiter-patch-").suffix(".diff").tempfile()?;
    file.write_all(text)?;
    file.flush()?;
    Ok(file)
}

/// The single step between a candidate's patch and the user's repository: whether `text`
/// may be put on commit `onto` within `limits`. It must apply there; what it changes must
/// fit the limits; and every symbolic link of the tree it makes must resolve inside the
/// repository, outside `.git` and `.arbiter` (links the patch neither adds nor changes and
/// that escaped before are the user's own, and stay).
pub async fn check(
    repo: &Git,
    onto: &str,
    text: Vec<u8>,
    limits: &CandidateLimits,
) -> Result<Result<CheckedPatch, Refusal>, GitError> {
    if text.len() as u64 > limits.max_patch_bytes {
        let over = LimitBreach::PatchBytes { bytes: text.len() as u64, limit: limits.max_patch_bytes };
        return Ok(Err(Refusal::Breaks(vec![over])));
    }
    let scratch = tempfile::Builder::new().prefix("arbiter-check-").tempdir()?;
    let objects = tempfile::Builder::new().prefix("arbiter-objects-").tempdir()?;
    let repo = &repo.quarantined(objects.path().to_path_buf(), repo.facts().await?.common_dir.join("objects"));
    let (patch, index) = (scratch.path().join("patch.diff"), scratch.path().join("index"));
    std::fs::write(&patch, &text)?;
    repo.run_with_index(["read-tree", onto], Some(&index)).await?;
    let applied = repo
        .run_with_index(
            [std::ffi::OsStr::new("apply"), std::ffi::OsStr::new("--cached"), patch.as_os_str()],
            Some(&index),
        )
        .await;
    match applied {
        Ok(_) => {}
        Err(GitError::Failed { stderr, .. }) => return Ok(Err(Refusal::DoesNotApply(stderr))),
        Err(e) => return Err(e),
    }
    let changed = capture::measure(repo, onto, Some(&index)).await?;
    let files: Vec<limits::ChangedFile> = changed.iter().map(capture::Change::file).collect();
    let mut breaches = limits::check(limits, Some(text.len() as u64), &files);
    // Only a link the patch adds or changes can make any link of the tree lead elsewhere.
    if changed.iter().any(capture::Change::is_link) {
        let before = capture::links_at(repo, onto).await?;
        let after = capture::links_in_index(repo, &index).await?;
        breaches.extend(limits::check_links(&before, &after));
    }
    if !breaches.is_empty() {
        return Ok(Err(Refusal::Breaks(breaches)));
    }
    let tree = repo.run_with_index(["write-tree"], Some(&index)).await?.text();
    let objects = std::sync::Arc::new(objects);
    Ok(Ok(CheckedPatch { text, onto: onto.to_string(), tree, limits: *limits, objects }))
}

/// Moves the loose objects of `from` (an object directory) into `to` (the repository's),
/// each one whole or not at all, keeping those `to` has already.
fn move_objects(from: &Path, to: &Path) -> std::io::Result<()> {
    for fan in std::fs::read_dir(from)? {
        let fan = fan?;
        let name = fan.file_name();
        // Two hex digits: the fan-out directories; `info` and `pack` are not git's output here.
        if name.len() != 2 || !fan.file_type()?.is_dir() {
            continue;
        }
        let dest_dir = to.join(&name);
        std::fs::create_dir_all(&dest_dir)?;
        for object in std::fs::read_dir(fan.path())? {
            let object = object?;
            let dest = dest_dir.join(object.file_name());
            if dest.exists() {
                continue;
            }
            // Copied under a temporary name, then renamed: no reader sees half an object.
            let mut partial = tempfile::Builder::new().prefix("tmp_obj_").tempfile_in(&dest_dir)?;
            std::io::copy(&mut std::fs::File::open(object.path())?, partial.as_file_mut())?;
            partial.persist(&dest).map_err(|e| e.error)?;
        }
    }
    Ok(())
}

/// [`check`] of the patch in file `path` (a run directory's `patch.diff`), read no further
/// than the limit on a patch's size.
pub async fn check_file(
    repo: &Git,
    onto: &str,
    path: &Path,
    limits: &CandidateLimits,
) -> Result<Result<CheckedPatch, Refusal>, GitError> {
    check(repo, onto, read_capped(path, limits)?, limits).await
}

/// The file at `path`, read no further than one byte past `max_patch_bytes` (which [`check`]
/// refuses): a patch file of any size costs no more.
fn read_capped(path: &Path, limits: &CandidateLimits) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut text = Vec::new();
    std::fs::File::open(path)?.take(limits.max_patch_bytes.saturating_add(1)).read_to_end(&mut text)?;
    Ok(text)
}

/// Summarizes dirty paths for an error message.
pub fn describe_paths(paths: &[String]) -> String {
    let shown: Vec<&str> = paths.iter().take(5).map(String::as_str).collect();
    let more = paths.len().saturating_sub(shown.len());
    if more > 0 { format!("{} and {more} more", shown.join(", ")) } else { shown.join(", ") }
}

/// Applies `patch` to the working tree of `repo` (its top level), whose HEAD must be the
/// commit it was checked on.
pub async fn apply_to_worktree(repo: &Git, patch: &CheckedPatch) -> Result<(), MaterializeError> {
    let head = repo.resolve_commit("HEAD").await?;
    if head != patch.onto {
        return Err(MaterializeError::Moved { checked: patch.onto.clone(), head });
    }
    let file = patch.file()?;
    let p = file.path().as_os_str();
    if let Err(GitError::Failed { stderr, .. }) =
        repo.run([std::ffi::OsStr::new("apply"), std::ffi::OsStr::new("--check"), p]).await
    {
        return Err(MaterializeError::DoesNotApply(stderr));
    }
    repo.run([std::ffi::OsStr::new("apply"), p]).await?;
    Ok(())
}

/// A new commit holding `patch` on top of the commit it was checked on (its tree, as the
/// check made it), and nothing else; no ref is moved and no working tree touched.
pub async fn commit_checked(repo: &Git, patch: &CheckedPatch, message: &str) -> Result<String, GitError> {
    move_objects(patch.objects.path(), &repo.facts().await?.common_dir.join("objects"))?;
    let mut args = vec![
        "commit-tree".to_string(),
        patch.tree.clone(),
        "-p".into(),
        patch.onto.clone(),
        "-m".into(),
        message.to_string(),
    ];
    if !repo.facts().await?.has_identity {
        args = [
            vec!["-c".to_string(), "user.name=arbiter".into(), "-c".into(), "user.email=arbiter@localhost".into()],
            args,
        ]
        .concat();
    }
    Ok(repo.run(args).await?.text())
}

/// Creates branch `name` at a new commit holding `patch` on top of the commit it was
/// checked on; the working tree and the current branch are untouched. Returns the commit.
pub async fn commit_to_new_branch(
    repo: &Git,
    patch: &CheckedPatch,
    name: &str,
    message: &str,
) -> Result<String, MaterializeError> {
    if !repo.valid_branch_name(name).await {
        return Err(MaterializeError::BadBranch(name.to_string()));
    }
    if repo.branch_exists(name).await? {
        return Err(MaterializeError::BranchExists(name.to_string()));
    }
    let commit = commit_checked(repo, patch, message).await?;
    let r = format!("refs/heads/{name}");
    // The empty old value makes the update fail if the branch appeared meanwhile.
    repo.run(["update-ref", r.as_str(), commit.as_str(), ""]).await?;
    Ok(commit)
}

/// What `arbiter apply` did.
#[derive(Debug, Default)]
pub struct ApplyResult {
    pub created_branch: bool,
    pub commit: Option<String>,
    /// The working tree held the patch already (applied before, or committed): nothing
    /// was changed.
    pub already_applied: bool,
}

/// Whether the working tree of `repo` holds `patch` already: it does not apply, and
/// reversed it does.
async fn holds_already(repo: &Git, patch: &Path) -> bool {
    let check = |reverse: bool| async move {
        let mut args = vec![std::ffi::OsStr::new("apply"), std::ffi::OsStr::new("--check")];
        if reverse {
            args.push(std::ffi::OsStr::new("--reverse"));
        }
        args.push(patch.as_os_str());
        repo.run(args).await.is_ok()
    };
    !check(false).await && check(true).await
}

/// A failed `arbiter apply`, after rollback.
#[derive(Debug)]
pub struct ApplyFailure {
    pub error: MaterializeError,
    pub rolled_back: bool,
}

/// Commits `patch` on the checked-out commit it was checked on (whose working tree and
/// index hold it already) and moves the checked-out branch there.
async fn commit_on_head(repo: &Git, patch: &CheckedPatch, message: &str) -> Result<String, MaterializeError> {
    let commit = commit_checked(repo, patch, message).await?;
    // The old value makes the update fail if HEAD moved meanwhile.
    repo.run(["update-ref", "-m", "arbiter apply", "HEAD", commit.as_str(), patch.onto()]).await?;
    Ok(commit)
}

/// `arbiter apply`: checks the patch in file `patch` (a run directory's) on HEAD within
/// `limits`, optionally switches to a new branch, applies it to the working tree and
/// optionally commits. `tooling`: working-tree files the run ran programs from (not counted
/// as uncommitted work). On failure the new branch is removed and the original branch
/// checked out again.
pub async fn apply_run_patch(
    repo: &Git,
    patch: &Path,
    limits: &CandidateLimits,
    tooling: &[String],
    branch: Option<&str>,
    commit_message: Option<&str>,
    force: bool,
) -> Result<ApplyResult, ApplyFailure> {
    let fail = |error: MaterializeError| ApplyFailure { error, rolled_back: false };
    let text = read_capped(patch, limits).map_err(|e| fail(e.into()))?;
    let as_read = patch_file(&text).map_err(|e| fail(e.into()))?;
    // Applied before (`arbiter apply` twice, or a run that applied it): said, not refused
    // as a patch that does not apply, nor as uncommitted changes (they are its own).
    if branch.is_none() && text.len() as u64 <= limits.max_patch_bytes && holds_already(repo, as_read.path()).await {
        return Ok(ApplyResult { already_applied: true, ..Default::default() });
    }
    if !force {
        let mut dirty = repo.dirty_paths().await.map_err(|e| fail(e.into()))?;
        dirty.retain(|d| !tooling.contains(d));
        if !dirty.is_empty() {
            return Err(fail(MaterializeError::Dirty(describe_paths(&dirty))));
        }
    }
    let original = repo.current_branch().await.map_err(|e| fail(e.into()))?;
    let original_head = repo.resolve_commit("HEAD").await.map_err(|e| fail(e.into()))?;
    let checked = match check(repo, &original_head, text, limits).await {
        Ok(Ok(checked)) => checked,
        Ok(Err(refusal)) => return Err(fail(refusal.into())),
        Err(e) => return Err(fail(e.into())),
    };
    let file = checked.file().map_err(|e| fail(e.into()))?;
    let p = file.path().as_os_str();
    if let Err(GitError::Failed { stderr, .. }) =
        repo.run([std::ffi::OsStr::new("apply"), std::ffi::OsStr::new("--check"), p]).await
    {
        return Err(fail(MaterializeError::DoesNotApply(stderr)));
    }
    let mut result = ApplyResult::default();
    if let Some(name) = branch {
        if !repo.valid_branch_name(name).await {
            return Err(fail(MaterializeError::BadBranch(name.to_string())));
        }
        if repo.branch_exists(name).await.map_err(|e| fail(e.into()))? {
            return Err(fail(MaterializeError::BranchExists(name.to_string())));
        }
        repo.run(["switch", "--quiet", "-c", name]).await.map_err(|e| fail(e.into()))?;
        result.created_branch = true;
    }
    let applied: Result<Option<String>, MaterializeError> = async {
        let index_flag = if commit_message.is_some() { Some(std::ffi::OsStr::new("--index")) } else { None };
        let mut args = vec![std::ffi::OsStr::new("apply")];
        args.extend(index_flag);
        args.push(p);
        repo.run(args).await?;
        match commit_message {
            // The commit holds the patch and nothing else (the tree the check made): files
            // the user staged for something of their own (allowed with --force) stay
            // staged, uncommitted.
            Some(message) => match commit_on_head(repo, &checked, message).await {
                Ok(commit) => Ok(Some(commit)),
                Err(e) => {
                    let _ = repo
                        .run([
                            std::ffi::OsStr::new("apply"),
                            std::ffi::OsStr::new("--index"),
                            std::ffi::OsStr::new("--reverse"),
                            p,
                        ])
                        .await;
                    Err(e)
                }
            },
            None => Ok(None),
        }
    }
    .await;
    match applied {
        Ok(commit) => {
            result.commit = commit;
            Ok(result)
        }
        Err(error) => {
            let mut rolled_back = false;
            if let Some(name) = branch.filter(|_| result.created_branch) {
                let back = match &original {
                    Some(b) => repo.run(["switch", "--quiet", "--discard-changes", b.as_str()]).await,
                    None => {
                        repo.run(["switch", "--quiet", "--discard-changes", "--detach", original_head.as_str()]).await
                    }
                };
                rolled_back = back.is_ok() && repo.run(["branch", "-D", name]).await.is_ok();
            }
            Err(ApplyFailure { error, rolled_back })
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    /// A repository with one commit (`calc.py`, `docs/readme.md`), and that commit.
    async fn repo() -> (tempfile::TempDir, Git, String) {
        let tmp = tempfile::tempdir().expect("temp dir");
        let files = [("calc.py", "x = 1\n"), ("docs/readme.md", "# docs\n")];
        let (git, base) = crate::testing::committed_repo(&tmp.path().join("repo"), &files).await;
        (tmp, git, base)
    }

    /// The patch of the changes made to the working tree, and of `links` (path, target),
    /// taken as a candidate's is; the working tree is clean again afterwards.
    async fn patch_of(git: &Git, base: &str, links: &[(&str, &str)]) -> Vec<u8> {
        for (path, target) in links {
            let at = git.dir().join(path);
            std::fs::create_dir_all(at.parent().unwrap()).unwrap();
            symlink(target, &at).unwrap();
        }
        git.run(["add", "-A"]).await.unwrap();
        let patch = git.run(["diff", "--cached", "--binary", base]).await.unwrap().stdout;
        git.run(["reset", "--quiet", "--hard", base]).await.unwrap();
        git.run(["clean", "-fdq"]).await.unwrap();
        patch
    }

    fn link_breaches(refusal: Refusal) -> Vec<(String, String)> {
        let Refusal::Breaks(breaches) = refusal else { panic!("refused as not applying: {refusal}") };
        breaches
            .into_iter()
            .map(|b| match b {
                LimitBreach::LinkOutside { path, escape, .. } => (path.raw().to_string(), escape.describe()),
                other => panic!("another limit: {other:?}"),
            })
            .collect()
    }

    #[tokio::test]
    async fn links_are_resolved_against_the_whole_tree_the_patch_makes() {
        let (_tmp, git, base) = repo().await;
        let limits = CandidateLimits::default();
        let attacks: &[(&[(&str, &str)], &str)] = &[
            (&[("sub/u", ".."), ("e", "sub/u/..")], "e"),
            (&[("sub/u", ".."), ("f", "sub/u/../..")], "f"),
            (&[("x/y/l3", ".."), ("x/l2", "y/l3/.."), ("l1", "x/l2/..")], "l1"),
            (&[("sub/up", ".."), ("dir", "sub/up"), ("leak", "dir/../secret.txt")], "leak"),
            (&[("abs", "/etc/passwd")], "abs"),
            (&[("cfg", "docs/../.git/config")], "cfg"),
        ];
        for (links, escaping) in attacks {
            let patch = patch_of(&git, &base, links).await;
            let refusal = check(&git, &base, patch, &limits).await.unwrap().expect_err("an escape is refused");
            let found = link_breaches(refusal);
            assert_eq!(found.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(), vec![*escaping], "{links:?}");
        }
        // Honest links: relative, to files and directories, chained, all inside.
        let honest = [("docs/calc.py", "../calc.py"), ("alias", "docs"), ("chained", "alias/calc.py")];
        let patch = patch_of(&git, &base, &honest).await;
        let checked = check(&git, &base, patch, &limits).await.unwrap().expect("honest links pass");
        apply_to_worktree(&git, &checked).await.expect("applied");
        assert_eq!(std::fs::read_to_string(git.dir().join("chained")).unwrap(), "x = 1\n");
    }

    #[tokio::test]
    async fn a_link_that_escaped_before_and_is_left_alone_is_the_users() {
        let (_tmp, git, _) = repo().await;
        symlink("/usr/share", git.dir().join("system")).unwrap();
        git.run(["add", "-A"]).await.unwrap();
        git.run(["-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "--quiet", "-m", "mine"])
            .await
            .unwrap();
        let base = git.resolve_commit("HEAD").await.unwrap();
        let limits = CandidateLimits::default();
        let honest = patch_of(&git, &base, &[("docs/link", "readme.md")]).await;
        check(&git, &base, honest, &limits).await.unwrap().expect("the user's own link is no reason to refuse");
        // Redirecting it is the patch's doing.
        std::fs::remove_file(git.dir().join("system")).unwrap();
        let redirected = patch_of(&git, &base, &[("system", "/etc")]).await;
        let refusal = check(&git, &base, redirected, &limits).await.unwrap().expect_err("redirected");
        assert_eq!(link_breaches(refusal)[0].0, "system");
    }

    #[tokio::test]
    async fn sizes_are_measured_from_what_the_patch_leaves() {
        let (_tmp, git, base) = repo().await;
        std::fs::write(git.dir().join("wide.txt"), "x".repeat(3000)).unwrap();
        for i in 0..3 {
            std::fs::write(git.dir().join(format!("f{i}.txt")), "y\n").unwrap();
        }
        let patch = patch_of(&git, &base, &[]).await;
        let small = CandidateLimits { max_patch_bytes: 1 << 20, max_patch_files: 3, max_file_bytes: 2000 };
        let Err(Refusal::Breaks(breaches)) = check(&git, &base, patch.clone(), &small).await.unwrap() else {
            panic!("over the limits")
        };
        let kinds: Vec<String> = breaches.iter().map(LimitBreach::describe).collect();
        assert_eq!(kinds.len(), 2, "{kinds:?}");
        assert!(kinds[0].contains("4 files") && kinds[1].starts_with("wide.txt is 3000 bytes"), "{kinds:?}");
        let tight = CandidateLimits { max_patch_bytes: 100, ..CandidateLimits::default() };
        let Err(Refusal::Breaks(breaches)) = check(&git, &base, patch, &tight).await.unwrap() else {
            panic!("over max_patch_bytes")
        };
        assert!(matches!(breaches[..], [LimitBreach::PatchBytes { limit: 100, .. }]), "{breaches:?}");
    }

    #[tokio::test]
    async fn a_checked_patch_goes_only_on_the_commit_it_was_checked_on() {
        let (_tmp, git, base) = repo().await;
        let limits = CandidateLimits::default();
        let patch = patch_of(&git, &base, &[("docs/up", "../calc.py")]).await;
        let checked = check(&git, &base, patch, &limits).await.unwrap().expect("checked");
        let commit = commit_to_new_branch(&git, &checked, "winner", "the winner").await.expect("branch");
        assert_eq!(git.run(["rev-parse", "winner^{tree}"]).await.unwrap().text(), checked.tree());
        assert_eq!(git.run(["rev-parse", "winner~1"]).await.unwrap().text(), base);
        assert_eq!(git.resolve_commit("winner").await.unwrap(), commit);
        // HEAD moves on: the working tree is no longer what it was checked on.
        git.run([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@localhost",
            "commit",
            "--quiet",
            "--allow-empty",
            "-m",
            "on",
        ])
        .await
        .unwrap();
        let moved = apply_to_worktree(&git, &checked).await.expect_err("checked on another commit");
        assert!(matches!(moved, MaterializeError::Moved { .. }), "{moved}");
        assert!(git.dirty_paths().await.unwrap().is_empty());
    }
}
