//! Checks made before a run spends anything: every program a verify, setup or runner
//! command starts must exist, so a typo fails in a second with the fix, not after agents ran.

use std::path::{Path, PathBuf};

use arbiter_core::command_line::{Program, first_program};

use crate::process::{find_program, is_executable_file};

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

/// Where the checked commands run.
#[derive(Clone, Copy, Debug)]
pub struct CommandSite<'a> {
    /// The repository root: relative program paths are resolved against it (commands run
    /// in a checkout of it).
    pub repo: &'a Path,
    /// The `PATH` bare names are looked up on.
    pub path: &'a str,
    /// Whether the sandbox hides the repository from the commands (they run in a checkout
    /// of their own; a program named by its absolute path inside the repository is not
    /// there for them).
    pub repo_hidden: bool,
}

/// Checks the program of `command` (`what` names it in the error, e.g. "verify command").
/// Relative paths are resolved against the repository (where commands run); bare names on
/// `PATH`.
pub fn check_program(what: &str, command: &str, site: &CommandSite<'_>) -> Result<(), MissingProgram> {
    let (repo, path) = (site.repo, site.path);
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
            if site.repo_hidden
                && Path::new(p).is_absolute()
                && let Some(inside) = inside_repository(&full, repo)
            {
                Err(missing(
                    p,
                    "is inside the repository, which the sandbox hides from every command a candidate's run starts (each runs in a checkout of its own)",
                    format!(
                        "name it relative to the repository root (`./{inside}`) to run each checkout's own copy (commit it first), or keep it outside the repository"
                    ),
                ))
            } else if !full.exists() {
                Err(missing(
                    p,
                    "does not exist",
                    format!("commands run from the repository root ({}); check the path", repo.display()),
                ))
            } else if !is_executable_file(&full) {
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
            if find_program(name, path).is_some() {
                Ok(())
            } else {
                Err(missing(name, "is not on PATH", format!("install {name} or fix the command")))
            }
        }
    }
}

/// `program`'s path relative to the repository root, when it is inside the repository.
pub fn inside_repository(program: &Path, repo: &Path) -> Option<String> {
    let canonical = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let relative = canonical(program).strip_prefix(canonical(repo)).ok()?.to_path_buf();
    Some(relative.display().to_string())
}

/// Where an agent program is: a path with a `/` (relative ones against `repo`, when
/// given) as it is, a bare name on `path`. `Ok` holds the program as resolved against the
/// repository and where it was found; `Err` says what is wrong with it.
pub fn locate_program(program: &str, repo: Option<&Path>, path: &str) -> Result<(String, PathBuf), &'static str> {
    let resolved = match repo {
        Some(repo) if program.contains('/') && !Path::new(program).is_absolute() => {
            repo.join(program).display().to_string()
        }
        _ => program.to_string(),
    };
    match find_program(&resolved, path) {
        Some(found) => Ok((resolved, found)),
        None if program.contains('/') => Err("does not exist or is not executable"),
        None => Err("is not on PATH"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_and_misses_programs() {
        let dir = tempfile::tempdir().unwrap();
        let path = std::env::var("PATH").unwrap_or_default();
        let site = CommandSite { repo: dir.path(), path: &path, repo_hidden: true };
        assert!(check_program("verify command", "sh -c true", &site).is_ok());
        assert!(check_program("verify command", "cd x && make", &site).is_ok());
        let e = check_program("verify command", "no-such-tool-xyz --flag", &site).unwrap_err();
        assert!(e.to_string().contains("`no-such-tool-xyz`, which is not on PATH"), "{e}");
        let e = check_program("runner command", "./agent.sh", &site).unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
        std::fs::write(dir.path().join("agent.sh"), "#!/bin/sh\n").unwrap();
        let e = check_program("runner command", "./agent.sh", &site).unwrap_err();
        assert!(e.to_string().contains("chmod +x"), "{e}");
        // Named by its absolute path, a program in the repository is out of the sandbox's
        // sight: the fix names it relative to the root.
        let absolute = dir.path().join("agent.sh").display().to_string();
        let e = check_program("runner command", &absolute, &site).unwrap_err();
        assert!(e.to_string().contains("inside the repository") && e.to_string().contains("`./agent.sh`"), "{e}");
        let unsandboxed = CommandSite { repo_hidden: false, ..site };
        assert!(check_program("runner command", &absolute, &unsandboxed).unwrap_err().to_string().contains("chmod +x"));
    }
}
