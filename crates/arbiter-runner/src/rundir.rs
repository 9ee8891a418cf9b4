//! Writing a run directory: atomic JSON files, plain text files, appended JSON lines.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use arbiter_core::artifact::paths;
use arbiter_core::ids::CandidateId;
use serde::Serialize;

/// `.arbiter/runs/<run-id>/`.
#[derive(Clone, Debug)]
pub struct RunDir {
    path: PathBuf,
}

impl RunDir {
    /// Creates the directory and its fixed subdirectories.
    pub fn create(path: PathBuf) -> std::io::Result<Self> {
        for sub in [paths::CANDIDATES, paths::REVIEWS, paths::COMPARISONS, "viewer"] {
            fs::create_dir_all(path.join(sub))?;
        }
        Ok(RunDir { path })
    }

    /// Opens an existing run directory.
    pub fn open(path: PathBuf) -> Self {
        RunDir { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `candidates/<id>/`, created on first use.
    pub fn candidate_dir(&self, id: &CandidateId) -> std::io::Result<PathBuf> {
        let dir = self.path.join(paths::CANDIDATES).join(id.as_str());
        fs::create_dir_all(&dir)?;
        Ok(dir)
    }

    /// Writes `value` as pretty JSON to `rel`, atomically (temporary file, then rename), so a
    /// reader or a crash never sees half a file.
    pub fn write_json<T: Serialize>(&self, rel: &str, value: &T) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(value).map_err(std::io::Error::other)?;
        self.write_text(rel, &(text + "\n"))
    }

    /// Writes text to `rel`, atomically.
    pub fn write_text(&self, rel: &str, text: &str) -> std::io::Result<()> {
        write_atomic(&self.path.join(rel), text.as_bytes())
    }

    pub fn read_text(&self, rel: &str) -> std::io::Result<String> {
        fs::read_to_string(self.path.join(rel))
    }
}

/// Writes a file through a temporary sibling and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    let tmp = path.with_extension(format!("{}.tmp", path.extension().and_then(|e| e.to_str()).unwrap_or("")));
    {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_data()?;
    }
    fs::rename(&tmp, path)
}

/// An append-only JSON-lines file.
pub struct JsonLines {
    file: File,
}

impl JsonLines {
    pub fn open(path: &Path) -> std::io::Result<Self> {
        Ok(JsonLines { file: OpenOptions::new().create(true).append(true).open(path)? })
    }

    pub fn append<T: Serialize>(&mut self, value: &T) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(value).map_err(std::io::Error::other)?;
        line.push(b'\n');
        self.file.write_all(&line)
    }
}
