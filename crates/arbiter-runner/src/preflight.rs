//! Checks made before a run spends anything: every program a verify, setup or runner
//! command starts must exist, so a typo fails in a second with the fix, not after agents ran.

use std::path::Path;

use arbiter_core::command_line::{Program, first_program};

/// A command whose program cannot be found.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{what} `{command}` runs `{program}`, which {problem}; {fix}")]
pub struct MissingProgram {
    pub what: String,
    pub command: String,
    pub program: String,
    pub problem: String,
    pub fix: String,
}

/// Checks the program of `command` (`what` names it in the error, e.g. "verify command").
/// Relative paths are resolved against `repo` (where commands run); bare names on `path`.
pub fn check_program(what: &str, command: &str, repo: &Path, path: &str) -> Result<(), MissingProgram> {
    let missing = |program: &str, problem: &str, fix: String| MissingProgram {
        what: what.to_string(),
        command: command.to_string(),
        program: program.to_string(),
        problem: problem.to_string(),
        fix,
    };
    match first_program(command) {
        None | Some(Program::Builtin(_)) => Ok(()),
        Some(Program::Path(p)) => {
            let full = if Path::new(p).is_absolute() { Path::new(p).to_path_buf() } else { repo.join(p) };
            if !full.exists() {
                Err(missing(
                    p,
                    "does not exist",
                    format!("commands run from the repository root ({}); check the path", repo.display()),
                ))
            } else if !is_executable(&full) {
                Err(missing(
                    p,
                    "is not executable",
                    format!("run `chmod +x {p}` or prefix the command with its interpreter"),
                ))
            } else {
                Ok(())
            }
        }
        Some(Program::Name(name)) => {
            let found = path.split(':').filter(|d| !d.is_empty()).any(|d| is_executable(&Path::new(d).join(name)));
            if found {
                Ok(())
            } else {
                Err(missing(name, "is not on PATH", format!("install {name} or fix the command")))
            }
        }
    }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_and_misses_programs() {
        let dir = tempfile::tempdir().unwrap();
        let path = std::env::var("PATH").unwrap_or_default();
        assert!(check_program("verify command", "sh -c true", dir.path(), &path).is_ok());
        assert!(check_program("verify command", "cd x && make", dir.path(), &path).is_ok());
        let e = check_program("verify command", "no-such-tool-xyz --flag", dir.path(), &path).unwrap_err();
        assert!(e.to_string().contains("`no-such-tool-xyz`, which is not on PATH"), "{e}");
        let e = check_program("runner command", "./agent.sh", dir.path(), &path).unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
        std::fs::write(dir.path().join("agent.sh"), "#!/bin/sh\n").unwrap();
        let e = check_program("runner command", "./agent.sh", dir.path(), &path).unwrap_err();
        assert!(e.to_string().contains("chmod +x"), "{e}");
    }
}
