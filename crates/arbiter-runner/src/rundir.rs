//! Writing a run directory: atomic JSON files, plain text files, appended JSON lines, and
//! its seal (`manifest.json`): the SHA-256 and size of every file, written when the run
//! finishes and updated by every later write arbiter makes ([`RunDir::seal`],
//! [`RunDir::reseal`]), checked by `arbiter runs verify` ([`RunDir::verify`]).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use arbiter_core::artifact::paths;
use arbiter_core::ids::{CandidateId, RunId};
use arbiter_core::manifest::{FileDigest, Manifest, Verification, is_sealed};
use serde::Serialize;
use sha2::{Digest, Sha256};

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

    /// Every file of the directory that belongs in the manifest, hashed, sorted by path.
    pub fn scan(&self) -> io::Result<Vec<FileDigest>> {
        let mut out = Vec::new();
        let mut stack = vec![(self.path.clone(), String::new())];
        while let Some((dir, prefix)) = stack.pop() {
            for entry in fs::read_dir(&dir)? {
                let entry = entry?;
                let name = entry.file_name().to_string_lossy().into_owned();
                let rel = if prefix.is_empty() { name } else { format!("{prefix}/{name}") };
                let kind = entry.file_type()?;
                if kind.is_dir() {
                    stack.push((entry.path(), rel));
                } else if is_sealed(&rel) {
                    let (sha256, bytes) = if kind.is_symlink() {
                        // Recorded, not followed: a link planted in the directory is a change too.
                        let target = fs::read_link(entry.path())?;
                        let text = format!("symlink:{}", target.display());
                        (hex(&Sha256::digest(text.as_bytes())), text.len() as u64)
                    } else {
                        digest_file(&entry.path())?
                    };
                    out.push(FileDigest { path: rel, sha256, bytes });
                }
            }
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    /// Seals the directory: `manifest.json` with every file's SHA-256 and size. Called once
    /// everything of the run is written (after its last event).
    pub fn seal(&self, run_id: &RunId) -> io::Result<Manifest> {
        let manifest = Manifest::new(run_id.clone(), self.scan()?);
        self.write_json(paths::MANIFEST, &manifest)?;
        Ok(manifest)
    }

    /// [`RunDir::seal`], warning on stderr when it cannot: the run's result stands, only its
    /// seal is missing (`arbiter runs verify` then says so).
    pub fn seal_or_warn(&self, run_id: &RunId) {
        if let Err(e) = self.seal(run_id) {
            tracing::warn!(
                "cannot write {}: {e}; the run directory is not sealed",
                self.path.join(paths::MANIFEST).display()
            );
        }
    }

    /// The manifest, or `None` when the directory has none (not finished, or recorded by an
    /// older arbiter). An unreadable manifest is an `InvalidData` error.
    pub fn manifest(&self) -> io::Result<Option<Manifest>> {
        match fs::read_to_string(self.path.join(paths::MANIFEST)) {
            Ok(text) => serde_json::from_str(&text).map(Some).map_err(|e| {
                io::Error::new(io::ErrorKind::InvalidData, format!("{} is not valid: {e}", paths::MANIFEST))
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Checks the directory against its manifest (`None` when it has none).
    pub fn verify(&self) -> io::Result<Option<(Manifest, Verification)>> {
        let Some(manifest) = self.manifest()? else { return Ok(None) };
        let verification = manifest.verify(&self.scan()?);
        Ok(Some((manifest, verification)))
    }

    /// Records the files arbiter just wrote to a sealed directory (`written`, relative
    /// paths), leaving every other entry as sealed, so a change made by someone else stays
    /// visible. A directory without a manifest stays without one. Returns whether it was
    /// resealed.
    pub fn reseal(&self, written: &[&str]) -> io::Result<bool> {
        let Some(mut manifest) = self.manifest()? else { return Ok(false) };
        let mut digests = Vec::with_capacity(written.len());
        for rel in written {
            let (sha256, bytes) = digest_file(&self.path.join(rel))?;
            digests.push(FileDigest { path: rel.to_string(), sha256, bytes });
        }
        manifest.update(digests);
        self.write_json(paths::MANIFEST, &manifest)?;
        Ok(true)
    }

    /// Removes the seal of a run that is being written again (a resume): until it finishes
    /// and is sealed anew, it is a run in progress.
    pub fn unseal(&self) -> io::Result<()> {
        match fs::remove_file(self.path.join(paths::MANIFEST)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

/// The SHA-256 (lowercase hex) and size of a file, read in chunks.
pub fn digest_file(path: &Path) -> io::Result<(String, u64)> {
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    let bytes = io::copy(&mut file, &mut hasher)?;
    Ok((hex(&hasher.finalize()), bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
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

/// The values of a JSON-lines file, in order; a missing file has none, and a line that does
/// not parse (a crash cut it short) is skipped.
pub fn read_json_lines<T: serde::de::DeserializeOwned>(path: &Path) -> Vec<T> {
    fs::read_to_string(path).unwrap_or_default().lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbiter_core::time::Timestamp;

    #[test]
    fn a_sealed_directory_verifies_until_someone_else_changes_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = RunDir::create(tmp.path().join("run")).unwrap();
        let id = RunId::new(Timestamp(1_700_000_000_000_000), 7);
        dir.write_text(paths::REPORT, "# report\n").unwrap();
        dir.write_text("candidates/c1/patch.diff", "diff\n").unwrap();
        let manifest = dir.seal(&id).unwrap();
        assert_eq!(manifest.files.len(), 2);
        assert!(dir.verify().unwrap().is_some_and(|(_, v)| v.holds()));

        // arbiter's own later write is resealed; an outside edit stays visible.
        fs::write(dir.path().join("candidates/c1/patch.diff"), "forged\n").unwrap();
        dir.write_text(paths::APPLY, "{}\n").unwrap();
        assert!(dir.reseal(&[paths::APPLY]).unwrap());
        let (_, v) = dir.verify().unwrap().unwrap();
        assert_eq!((v.changed.as_slice(), v.unexpected.len()), (&["candidates/c1/patch.diff".to_string()][..], 0));

        dir.unseal().unwrap();
        assert!(dir.verify().unwrap().is_none());
        assert!(!dir.reseal(&[paths::APPLY]).unwrap(), "an unsealed directory stays unsealed");
    }
}
