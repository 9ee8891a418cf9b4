//! A program of the user's working tree that the base commit does not have (an agent
//! script not committed yet), run from a copy outside every workspace: candidates start at
//! the base, where it does not exist, and the sandbox hides the user's working tree from
//! them. The copy is content-addressed and read-only, under arbiter's cache in a directory
//! the sandbox lets candidates read ([`UserDirs::program_copies`]); it is never in a
//! workspace, so it never becomes part of a patch.

use std::io;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::user_dirs::UserDirs;

/// Copies the executable `source` to `<program copies>/<sha256 prefix>/<file name>` (once;
/// the same content is copied once) and returns the copy's absolute path.
pub fn copy_outside(dirs: &UserDirs, source: &Path) -> io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let bytes = std::fs::read(source)?;
    let digest: String = Sha256::digest(&bytes).iter().take(16).map(|b| format!("{b:02x}")).collect();
    let name = source.file_name().ok_or_else(|| io::Error::other("the program has no file name"))?;
    let dir = dirs.program_copies().join(digest);
    let copy = dir.join(name);
    if copy.is_file() && std::fs::read(&copy).is_ok_and(|c| c == bytes) {
        return Ok(copy);
    }
    std::fs::create_dir_all(&dir)?;
    let partial = dir.join(format!(".{}.partial-{}", name.to_string_lossy(), std::process::id()));
    std::fs::write(&partial, &bytes)?;
    std::fs::set_permissions(&partial, std::fs::Permissions::from_mode(0o555))?;
    std::fs::rename(&partial, &copy)?;
    Ok(copy)
}

/// `command` with its leading program word `program` replaced by `path` (quoted for `sh`).
pub fn with_program(command: &str, program: &str, path: &Path) -> String {
    let trimmed = command.trim_start();
    let rest = trimmed
        .strip_prefix(program)
        .or_else(|| trimmed.strip_prefix(&format!("'{program}'")))
        .or_else(|| trimmed.strip_prefix(&format!("\"{program}\"")))
        .unwrap_or(trimmed);
    format!("{}{rest}", arbiter_core::command_line::shell_word(&path.display().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copy_is_content_addressed_read_only_and_runs_from_outside() {
        let scratch = tempfile::tempdir().unwrap();
        let dirs = UserDirs { cache: scratch.path().join("cache"), config: scratch.path().join("config") };
        let script = scratch.path().join("my-agent.sh");
        std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
        let a = copy_outside(&dirs, &script).unwrap();
        assert!(a.starts_with(dirs.program_copies()) && a.ends_with("my-agent.sh"));
        assert_eq!(copy_outside(&dirs, &script).unwrap(), a, "the same content is copied once");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&a).unwrap().permissions().mode() & 0o777, 0o555);
        std::fs::write(&script, "#!/bin/sh\necho changed\n").unwrap();
        assert_ne!(copy_outside(&dirs, &script).unwrap(), a, "new content, new copy");
        assert_eq!(with_program("./my-agent.sh --fast x", "./my-agent.sh", &a), format!("{} --fast x", a.display()));
    }
}
