//! Canaries on disk (the decisions are `arbiter_core::canary`'s): a [`RepoView`] over a
//! checkout (the base's, or a candidate's tree), the base commit read into memory for the
//! planner and the test machinery ([`base_view`]), planting a plan's files into a tree
//! before a gate run, and taking them out again after it, so nothing of the canary outlives
//! the run.

use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use arbiter_core::canary::{CanaryPlan, Nonce, Planned, RepoView, StaticRepo};

/// The largest file the planner is given to read (configuration files are small).
const MAX_READ: u64 = 1 << 20;

/// The base as a checkout on disk (the baseline's scratch worktree): its tracked paths, and
/// their text read from the checkout.
#[derive(Clone, Debug)]
pub struct CheckoutView {
    root: PathBuf,
    files: Vec<String>,
}

impl CheckoutView {
    /// `files`: the tracked paths (`git ls-files`), relative to `root`.
    pub fn new(root: PathBuf, files: Vec<String>) -> Self {
        CheckoutView { root, files }
    }

    /// Reads the tracked paths from `git ls-files -z` output.
    pub fn from_ls_files(root: PathBuf, ls_files_z: &str) -> Self {
        let files = ls_files_z.split('\0').filter(|f| !f.is_empty()).map(str::to_string).collect();
        CheckoutView { root, files }
    }
}

impl RepoView for CheckoutView {
    fn files(&self) -> &[String] {
        &self.files
    }

    fn read(&self, path: &str) -> Option<String> {
        if !self.files.iter().any(|f| f == path) {
            return None;
        }
        let full = safe_join(&self.root, path)?;
        // A link is not read through: in a candidate's tree it could point anywhere.
        let meta = fs::symlink_metadata(&full).ok()?;
        if !meta.is_file() || meta.len() > MAX_READ {
            return None;
        }
        fs::read_to_string(full).ok()
    }
}

/// `root/rel` when `rel` is a plain relative path (no `..`, not absolute).
fn safe_join(root: &Path, rel: &str) -> Option<PathBuf> {
    let p = Path::new(rel);
    p.components().all(|c| matches!(c, Component::Normal(_))).then(|| root.join(p))
}

/// A random nonce for one run's canaries.
pub fn random_nonce() -> Nonce {
    let mut b = [0u8; 8];
    let seed = if getrandom::fill(&mut b).is_ok() {
        u64::from_le_bytes(b)
    } else {
        // No entropy source: the process id and the clock still differ between runs.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        nanos ^ u64::from(std::process::id()).rotate_left(32)
    };
    Nonce::from_seed(seed)
}

/// A canary planted in a tree: what to remove afterwards.
#[derive(Debug)]
#[must_use = "a planted canary must be removed after the run"]
pub struct Planted {
    files: Vec<PathBuf>,
    /// Directories created for it, deepest first.
    dirs: Vec<PathBuf>,
}

/// Writes the plan's files into `tree`, creating missing directories. Refuses a path that
/// leaves the tree or already exists (the plan never names one; a changed tree could).
pub fn plant(tree: &Path, plan: &CanaryPlan) -> io::Result<Planted> {
    let mut planted = Planted { files: Vec::new(), dirs: Vec::new() };
    for file in &plan.files {
        let path = safe_join(tree, &file.path).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("canary path {} leaves the tree", file.path))
        })?;
        if fs::symlink_metadata(&path).is_ok() {
            let _ = planted.remove();
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} exists in this tree; no canary is planted over a file", file.path),
            ));
        }
        let mut missing = Vec::new();
        let mut dir = path.parent();
        while let Some(d) = dir.filter(|d| !d.exists()) {
            missing.push(d.to_path_buf());
            dir = d.parent();
        }
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)?;
        }
        planted.dirs.extend(missing);
        fs::write(&path, &file.content)?;
        planted.files.push(path);
    }
    Ok(planted)
}

impl Planted {
    /// Removes the canary's files and the directories created for them.
    pub fn remove(self) -> io::Result<()> {
        for f in &self.files {
            match fs::remove_file(f) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        for d in &self.dirs {
            // Left in place when the run put something else there (a build's output).
            let _ = fs::remove_dir(d);
        }
        Ok(())
    }
}

/// Whether `command` names a program through which a recognised framework can run: only
/// then is the base listed and read for the planner (a plan's tasks with commands like
/// `test -f out.txt` skip that work).
fn might_run_tests(command: &str) -> bool {
    const PROGRAMS: &[&str] =
        &["python", "python3", "pytest", "py.test", "jest", "vitest", "npm", "npx", "yarn", "pnpm", "cargo", "go"];
    command.split(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')')).any(|word| {
        let name = word.rsplit('/').next().unwrap_or(word);
        PROGRAMS.contains(&name) || name.starts_with("python3.")
    })
}

/// The files the planner may read (it reads nothing else; see `arbiter_core::canary::RepoView`).
const PLANNER_READS: &[&str] = &[
    "package.json",
    "Cargo.toml",
    "go.mod",
    "pytest.ini",
    ".pytest.ini",
    "pytest.toml",
    "pyproject.toml",
    "tox.ini",
    "setup.cfg",
];

/// At most this many files are loaded for the planner (a monorepo's Go test files, say).
const MAX_LOADED: usize = 400;

/// The base commit as the planner and the test machinery read it: every tracked path, and
/// the text of the files they may read (the planner's, those
/// `arbiter_core::test_machinery::base_reads` names, and one `_test.go` per directory).
pub async fn base_view(repo: &crate::git::Git, base: &str) -> Result<StaticRepo, String> {
    let out = repo
        .run(["ls-tree", "-r", "-z", "--name-only", base])
        .await
        .map_err(|e| format!("the base's files cannot be listed: {e}"))?;
    let files: Vec<String> =
        String::from_utf8_lossy(&out.stdout).split('\0').filter(|f| !f.is_empty()).map(str::to_string).collect();
    let mut go_dirs = std::collections::BTreeSet::new();
    let wanted: Vec<&String> = files
        .iter()
        .filter(|f| {
            let (dir, name) = f.rsplit_once('/').unwrap_or(("", f.as_str()));
            PLANNER_READS.contains(&name)
                || arbiter_core::test_machinery::base_reads(f)
                || (name.ends_with("_test.go") && go_dirs.insert(dir.to_string()))
        })
        .take(MAX_LOADED)
        .collect();
    let mut contents = std::collections::BTreeMap::new();
    for path in wanted {
        let spec = format!("{base}:{path}");
        if let Ok(out) = repo.run(["cat-file", "blob", spec.as_str()]).await
            && out.stdout.len() as u64 <= MAX_READ
            && let Ok(text) = String::from_utf8(out.stdout)
        {
            contents.insert(path.clone(), text);
        }
    }
    Ok(StaticRepo { files, contents })
}

/// Plans a canary for each verify command, from the base commit as the repository holds it
/// (never from a candidate's tree: a candidate could steer the plan). One random nonce per
/// call, so each run's canaries are named afresh.
pub async fn plan_for(repo: &crate::git::Git, base: &str, commands: &[String]) -> Vec<Planned> {
    if commands.is_empty() {
        return Vec::new();
    }
    if !commands.iter().any(|c| might_run_tests(c)) {
        let reason =
            "not a run of a test framework arbiter recognises (unittest, pytest, Jest, Vitest, cargo test, go test)";
        return commands.iter().map(|_| Planned::NotApplicable { framework: None, reason: reason.into() }).collect();
    }
    let view = match base_view(repo, base).await {
        Ok(v) => v,
        Err(reason) => {
            return commands
                .iter()
                .map(|_| Planned::NotApplicable { framework: None, reason: reason.clone() })
                .collect();
        }
    };
    let nonce = random_nonce();
    commands.iter().map(|c| arbiter_core::canary::plan(c, &view, &nonce)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbiter_core::canary::{CanaryFile, Framework};

    #[test]
    fn plants_and_removes_without_leaving_directories() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("Cargo.toml"), "[package]\nname = \"x\"\n").unwrap();
        let plan = CanaryPlan {
            framework: Framework::CargoTest,
            command: "cargo test".into(),
            files: vec![CanaryFile { path: "tests/deep/a.rs".into(), content: "x".into() }],
            test: "a".into(),
            class: None,
        };
        let planted = plant(dir.path(), &plan).unwrap();
        assert_eq!(fs::read_to_string(dir.path().join("tests/deep/a.rs")).unwrap(), "x");
        planted.remove().unwrap();
        assert!(!dir.path().join("tests").exists());
        let view = CheckoutView::from_ls_files(dir.path().to_path_buf(), "Cargo.toml\0");
        assert!(view.read("Cargo.toml").is_some_and(|t| t.contains("name")));
        assert_eq!(view.read("../etc/passwd"), None);
        let mut bad = plan.clone();
        bad.files[0].path = "../escape.rs".into();
        assert!(plant(dir.path(), &bad).is_err());
        bad.files[0].path = "Cargo.toml".into();
        assert_eq!(plant(dir.path(), &bad).map(|_| ()).map_err(|e| e.kind()), Err(io::ErrorKind::AlreadyExists));
    }
}
