//! What every command needs first: the repository, its `.arbiter/` workspace, the
//! configuration file, the store, and run ids given on the command line.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use arbiter_core::ids::RunId;
use arbiter_core::settings::ConfigFile;
use arbiter_runner::git::Git;
use arbiter_runner::workspace::Workspace;
use arbiter_store::Store;
use arbiter_store::postgres::PgStore;
use arbiter_store::sqlite::SqliteStore;
use arbiter_store::units::UnitQueue;

use crate::error::CliError;
use crate::output::{note, warning};

/// The database of this invocation (`--database-url` / `ARBITER_DATABASE_URL`), set once by
/// the dispatcher: every command that reads or writes runs, candidates, plans and events uses
/// the same store.
static DATABASE_URL: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();

/// Chooses this invocation's store: Postgres at `url`, or each repository's SQLite file.
pub fn use_database(url: Option<&str>) {
    let _ = DATABASE_URL.set(url.map(str::trim).filter(|u| !u.is_empty()).map(str::to_string));
}

/// This invocation's database URL, when it uses Postgres.
pub fn database_url() -> Option<&'static str> {
    DATABASE_URL.get().and_then(|u| u.as_deref())
}

/// The repository a command works on.
/// A store as opened, by kind (what needs every port of it, e.g. a dashboard's state).
pub enum OpenedStore {
    Postgres(Arc<PgStore>),
    Sqlite(Arc<SqliteStore>),
}

pub struct RepoContext {
    pub git: Git,
    pub workspace: Workspace,
}

impl RepoContext {
    /// Finds the repository containing `--repo` (or the current directory).
    pub async fn locate(repo: Option<&Path>) -> Result<Self, CliError> {
        let start: PathBuf = match repo {
            Some(p) => {
                if !p.is_dir() {
                    return Err(CliError::usage(format!("--repo {}: no such directory", p.display())));
                }
                p.to_path_buf()
            }
            None => std::env::current_dir()?,
        };
        let root = Git::new(start).toplevel().await?;
        Ok(RepoContext { git: Git::new(root.clone()), workspace: Workspace::at(root) })
    }

    /// The repository's secrets file: backend keys given with `--api-key-stdin` (mode 0600),
    /// in arbiter's configuration directory (`~/.config/arbiter/secrets/<repo>.toml`), never
    /// inside the repository. A `.arbiter/secrets.toml` an older arbiter wrote is moved there
    /// the first time it is needed.
    pub fn secrets_path(&self) -> PathBuf {
        let dirs = arbiter_runner::user_dirs::UserDirs::from_process();
        let path = dirs.secrets_file(self.workspace.repo_root());
        let old = self.workspace.dir().join("secrets.toml");
        if old.exists() {
            match crate::config_file::migrate_secrets(&old, &path) {
                Ok(()) => note!(
                    "arbiter: moved {} to {} (mode 0600): secrets no longer live inside the repository",
                    old.display(),
                    path.display()
                ),
                Err(e) => warning!(
                    "arbiter: warning: {} could not be moved to {}: {e}; move it there yourself (mode 0600)",
                    old.display(),
                    path.display()
                ),
            }
        }
        path
    }

    /// The parsed `.arbiter/config.toml`, or defaults when there is none.
    pub fn config(&self) -> Result<ConfigFile, CliError> {
        let path = self.workspace.config_path();
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(ConfigFile::parse(&text, &path.display().to_string())?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ConfigFile::default()),
            Err(e) => Err(CliError::usage(format!("cannot read {}: {e}", path.display()))),
        }
    }

    /// The run index of this invocation's store (see [`use_database`]): Postgres at the
    /// database URL, or `.arbiter/arbiter.db` (creating `.arbiter/` when needed).
    pub async fn store(&self) -> Result<Arc<dyn Store>, CliError> {
        Ok(self.plan_stores().await?.0)
    }

    /// The run index and the plan queue (with its units) of this invocation's store:
    /// Postgres at the database URL, or `.arbiter/arbiter.db`.
    pub async fn plan_stores(&self) -> Result<(Arc<dyn Store>, Arc<dyn UnitQueue>), CliError> {
        Ok(match self.open_store().await? {
            OpenedStore::Postgres(pg) => (pg.clone(), pg),
            OpenedStore::Sqlite(sqlite) => (sqlite.clone(), sqlite),
        })
    }

    /// This invocation's store, whichever it is (see [`use_database`]).
    pub async fn open_store(&self) -> Result<OpenedStore, CliError> {
        Ok(match database_url() {
            Some(url) => OpenedStore::Postgres(Arc::new(PgStore::connect(url).await?)),
            None => {
                self.prepare_dir().await?;
                OpenedStore::Sqlite(Arc::new(SqliteStore::open(&self.workspace.db_path()).await?))
            }
        })
    }

    /// Creates `.arbiter/` and keeps it out of git.
    pub async fn prepare_dir(&self) -> Result<(), CliError> {
        std::fs::create_dir_all(self.workspace.dir())?;
        self.workspace.exclude_from_git(&self.git).await?;
        Ok(())
    }

    /// Resolves a run id or `latest` to an existing run directory.
    pub fn resolve_run(&self, given: &str) -> Result<(RunId, PathBuf), CliError> {
        let runs = self.workspace.runs_dir();
        let id = if given == "latest" {
            // Run ids have one-second resolution; within a second the start time in
            // state.json decides.
            let started_at = |id: &RunId| -> i64 {
                std::fs::read_to_string(self.workspace.run_dir(id).join(arbiter_core::artifact::paths::STATE))
                    .ok()
                    .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                    .and_then(|v| v["started_at"].as_i64())
                    .unwrap_or(0)
            };
            let newest = std::fs::read_dir(&runs)
                .ok()
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| RunId::parse(&e.file_name().to_string_lossy()).ok())
                .max_by_key(|id| (id.as_str()[..16].to_string(), started_at(id), id.clone()));
            newest.ok_or_else(|| {
                CliError::usage(format!("there are no runs in {} yet; start one with `arbiter run`", runs.display()))
            })?
        } else {
            RunId::parse(given).map_err(CliError::usage)?
        };
        let dir = self.workspace.run_dir(&id);
        if !dir.is_dir() {
            return Err(CliError::usage(format!(
                "no run {id} in {}; `arbiter runs list` shows the runs",
                runs.display()
            )));
        }
        Ok((id, dir))
    }
}

/// The sandbox of this process, made once: the launcher is this very binary (it becomes the
/// sandbox when re-executed with `__sandbox`), arbiter's directories come from the
/// environment, and what the kernel offers is probed once for every command and task of the
/// process (a plan's preflight asks for each of its tasks).
pub fn sandboxing() -> Result<Arc<arbiter_runner::confinement::Sandboxing>, CliError> {
    static SANDBOXING: OnceLock<Arc<arbiter_runner::confinement::Sandboxing>> = OnceLock::new();
    if let Some(made) = SANDBOXING.get() {
        return Ok(made.clone());
    }
    let launcher = std::env::current_exe()
        .map_err(|e| CliError::environment(format!("cannot find the arbiter binary to run the sandbox: {e}")))?;
    let made = Arc::new(arbiter_runner::confinement::Sandboxing::new(
        launcher,
        arbiter_runner::user_dirs::UserDirs::from_process(),
    ));
    Ok(SANDBOXING.get_or_init(|| made).clone())
}

/// Reads and parses one JSON artifact of a run directory.
pub fn read_artifact<T: serde::de::DeserializeOwned>(run_dir: &Path, rel: &str) -> Result<T, CliError> {
    let path = run_dir.join(rel);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        CliError::usage(format!(
            "cannot read {}: {e}; the run may still be in progress or was interrupted early",
            path.display()
        ))
    })?;
    serde_json::from_str(&text).map_err(|e| CliError::environment(format!("{} is not valid: {e}", path.display())))
}
