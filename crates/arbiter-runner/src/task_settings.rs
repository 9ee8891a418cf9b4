//! Where a plan task's run settings come from: the plan's defaults and the task's own values
//! over a configuration file. `plan run` resolves them over the configuration it read when it
//! started, with its command line's overrides ([`TaskSettings::fixed`]); a control plane over
//! the `.arbiter/config.toml` of the repository each plan runs in, parsed again when the file
//! changes ([`TaskSettings::per_repository`]).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use arbiter_core::plan::settings::{RunOverrides, task_settings};
use arbiter_core::plan::{PlanSpec, TaskSpec};
use arbiter_core::settings::{ConfigFile, RunSettings};

use crate::workspace::Workspace;

/// The configuration a plan's tasks are resolved over.
pub enum TaskSettings {
    /// One configuration and the overrides of the command line.
    Fixed { config: Box<ConfigFile>, overrides: RunOverrides },
    /// The configuration file of each task's repository.
    PerRepository(ConfigCache),
}

impl TaskSettings {
    pub fn fixed(config: ConfigFile, overrides: RunOverrides) -> TaskSettings {
        TaskSettings::Fixed { config: Box::new(config), overrides }
    }

    pub fn per_repository() -> TaskSettings {
        TaskSettings::PerRepository(ConfigCache::default())
    }

    /// The run settings of `task` of `plan` in `workspace`; an error names what is wrong.
    pub fn of(&self, workspace: &Workspace, plan: &PlanSpec, task: &TaskSpec) -> Result<RunSettings, String> {
        match self {
            TaskSettings::Fixed { config, overrides } => task_settings(config, plan, task, overrides),
            TaskSettings::PerRepository(configs) => {
                task_settings(&*configs.of(workspace)?, plan, task, &RunOverrides::default())
            }
        }
    }
}

/// Each repository's `.arbiter/config.toml`, parsed once per version of the file.
#[derive(Default)]
pub struct ConfigCache {
    parsed: Mutex<HashMap<PathBuf, Parsed>>,
}

/// A configuration as parsed, and the version of its file it was parsed from.
type Parsed = (Option<FileStamp>, Arc<ConfigFile>);

/// A version of a file: its modification time and size.
type FileStamp = (SystemTime, u64);

impl ConfigCache {
    /// The configuration of `workspace` (the defaults when it has no file).
    pub fn of(&self, workspace: &Workspace) -> Result<Arc<ConfigFile>, String> {
        let path = workspace.config_path();
        let stamp = std::fs::metadata(&path).ok().and_then(|m| Some((m.modified().ok()?, m.len())));
        if let Some((seen, config)) = self.parsed.lock().unwrap_or_else(|p| p.into_inner()).get(&path)
            && *seen == stamp
        {
            return Ok(config.clone());
        }
        let config = match std::fs::read_to_string(&path) {
            Ok(text) => ConfigFile::parse(&text, &path.display().to_string()).map_err(|e| e.to_string())?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => ConfigFile::default(),
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        let config = Arc::new(config);
        self.parsed.lock().unwrap_or_else(|p| p.into_inner()).insert(path, (stamp, config.clone()));
        Ok(config)
    }
}
