//! A check that cannot run: a verify command whose run on the base shows that this machine
//! lacks what it runs — its program, its interpreter, its test runner — as opposed to a
//! check that runs and fails. The one place that tells the two apart, from the command's own
//! exit code and output, and says what to do.
//!
//! It is read conservatively: only what the shell, Python or cargo print when the thing
//! they were asked to start is not there. A program named by a relative path in the
//! repository (`./run_tests.sh`) may be the task's to write, so its absence is a failing
//! check, unless the path is an environment's (a virtualenv's interpreter, `node_modules`):
//! no candidate's patch brings those.

use serde::{Deserialize, Serialize};

use crate::command_line::{Program, first_program, shell_word};
use crate::gate::CommandOutcome;

/// A verify command that cannot run on this machine.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct CannotRun {
    pub command: String,
    /// The line of its output that says why.
    pub cause: String,
    /// What to do about it.
    pub fix: String,
}

impl CannotRun {
    /// One sentence: the command, the cause, the fix.
    pub fn describe(&self) -> String {
        format!("the verify command `{}` cannot run on this machine: {}; {}", self.command, self.cause, self.fix)
    }
}

/// Whether `outcome` (a verify command's run) shows that the command cannot run here.
pub fn cannot_run(outcome: &CommandOutcome) -> Option<CannotRun> {
    if outcome.timed_out {
        return None;
    }
    let command = outcome.command.as_str();
    let found = |cause: &str, fix: String| CannotRun { command: command.to_string(), cause: cause.to_string(), fix };
    let lines = || outcome.output_tail.lines().map(str::trim).filter(|l| !l.is_empty());
    match outcome.exit_code {
        Some(127 | 126) => lines().find_map(|line| {
            let missing = shell_missing(line)?;
            environment_program(missing).then(|| found(line, program_fix(command, missing)))
        }),
        Some(1) => lines().find_map(|line| {
            let (interpreter, module) = python_missing_module(line)?;
            Some(found(line, module_fix(command, interpreter, module)))
        }),
        Some(101) => lines().find_map(|line| {
            let sub = cargo_missing_command(line)?;
            Some(found(
                line,
                format!(
                    "install it (`cargo install cargo-{sub}`), or pass --verify with a command this machine has, e.g. --verify 'cargo test'"
                ),
            ))
        }),
        _ => None,
    }
}

/// The program a shell could not start, from its message: `sh: 1: NAME: not found` (dash;
/// a script's name instead of `sh` for a line of a script),
/// `bash: NAME: command not found`, `bash: line 1: NAME: command not found`, `sh: 1: NAME:
/// Permission denied`, `bash: NAME: No such file or directory`, `env: 'NAME': No such file
/// or directory`.
fn shell_missing(line: &str) -> Option<&str> {
    const ENDINGS: &[&str] = &[
        ": not found",
        ": command not found",
        ": Permission denied",
        ": No such file or directory",
        ": cannot execute",
    ];
    let head = ENDINGS.iter().find_map(|e| line.strip_suffix(e))?;
    // The prefix is the shell, or the script it was running: one word.
    let (shell, rest) = head.split_once(": ")?;
    if shell.is_empty() || shell.contains(char::is_whitespace) {
        return None;
    }
    // Dash and bash put a line number between the shell and the name.
    let name = match rest.split_once(": ") {
        Some((number, name)) if number.trim_start_matches("line ").bytes().all(|b| b.is_ascii_digit()) => name,
        _ => rest,
    };
    let name = name.trim_matches(|c| c == '\'' || c == '"' || c == '‘' || c == '’');
    (!name.is_empty() && !name.contains(' ')).then_some(name)
}

/// Whether a missing `program` is the machine's to provide, not a candidate's: a name looked
/// up on `PATH`, an absolute path, or a relative path into an environment directory.
fn environment_program(program: &str) -> bool {
    if !program.contains('/') || program.starts_with('/') {
        return true;
    }
    let parts: Vec<&str> = program.split('/').collect();
    let file = parts.last().copied().unwrap_or_default();
    let in_env_dir = parts.iter().any(|p| matches!(*p, ".venv" | "venv" | ".tox" | ".nox" | "node_modules"));
    let interpreter = parts.len() >= 2
        && parts[parts.len() - 2] == "bin"
        && ["python", "pip", "pytest"].iter().any(|p| file.starts_with(p));
    in_env_dir || interpreter
}

/// `INTERPRETER: No module named MODULE`: what Python prints when the module `-m` names is
/// not installed for it (an import inside the code under test says `ModuleNotFoundError:
/// No module named 'x'` instead, and may be the task's to fix).
fn python_missing_module(line: &str) -> Option<(&str, &str)> {
    let (interpreter, module) = line.split_once(": No module named ")?;
    let base = interpreter.rsplit('/').next().unwrap_or(interpreter);
    let module = module.trim();
    let plain = !module.is_empty() && module.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.');
    (base.starts_with("python") && !interpreter.contains(' ') && plain).then_some((interpreter, module))
}

/// `error: no such command: `NAME`` from cargo.
fn cargo_missing_command(line: &str) -> Option<&str> {
    let name = line.strip_prefix("error: no such command: ")?;
    let name = name.trim_matches('`');
    (!name.is_empty() && !name.contains(' ')).then_some(name)
}

/// `command` with its program replaced by `program`.
fn with_program(command: &str, program: &str) -> String {
    match first_program(command) {
        Some(Program::Name(p) | Program::Path(p)) => command.replacen(p, program, 1),
        _ => program.to_string(),
    }
}

fn program_fix(command: &str, missing: &str) -> String {
    let name = missing.rsplit('/').next().unwrap_or(missing);
    let example = shell_word(&with_program(command, &format!("/path/to/{name}")));
    if missing.contains('/') && !missing.starts_with('/') {
        format!(
            "{missing} is not on this machine: create it (for a virtualenv, make it again), or pass --verify with a program this machine has, e.g. --verify {example}"
        )
    } else {
        format!(
            "install {name} (or put its directory on PATH), or pass --verify with the program's full path, e.g. --verify {example}"
        )
    }
}

fn module_fix(command: &str, interpreter: &str, module: &str) -> String {
    let example = shell_word(&with_program(command, "/path/to/venv/bin/python"));
    format!(
        "install {module} for {interpreter} (`{interpreter} -m pip install {module}`), or pass --verify with an interpreter that has it, e.g. --verify {example}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(command: &str, exit: Option<i32>, output: &str) -> CommandOutcome {
        CommandOutcome {
            command: command.into(),
            exit_code: exit,
            timed_out: false,
            duration_ms: 5,
            output_tail: output.into(),
            canary: None,
            failed_tests: None,
            test_reports: Vec::new(),
        }
    }

    #[test]
    fn a_test_runner_missing_from_the_interpreter_cannot_run() {
        let c = cannot_run(&outcome(
            "python3 -m pytest -q",
            Some(1),
            "/root/.pyenv/versions/3.11.7/bin/python3: No module named pytest\n",
        ))
        .expect("cannot run");
        assert_eq!(c.cause, "/root/.pyenv/versions/3.11.7/bin/python3: No module named pytest");
        assert!(c.fix.contains("/root/.pyenv/versions/3.11.7/bin/python3 -m pip install pytest"), "{}", c.fix);
        assert!(c.fix.contains("--verify '/path/to/venv/bin/python -m pytest -q'"), "{}", c.fix);
        assert!(c.describe().starts_with("the verify command `python3 -m pytest -q` cannot run on this machine: "));
    }

    #[test]
    fn a_missing_program_cannot_run() {
        for (output, exit) in [
            ("sh: 1: pytest: not found", 127),
            ("bash: line 1: pytest: command not found", 127),
            ("bash: pytest: command not found", 127),
            ("./check.sh: 3: pytest: not found", 127),
            ("sh: 1: /opt/tools/pytest: Permission denied", 126),
            ("env: 'pytest': No such file or directory", 127),
        ] {
            let c = cannot_run(&outcome("pytest -q", Some(exit), &format!("collecting\n{output}\n")))
                .unwrap_or_else(|| panic!("{output}"));
            assert_eq!(c.cause, output);
            assert!(c.fix.contains("install pytest") || c.fix.contains("full path"), "{}", c.fix);
        }
    }

    #[test]
    fn a_virtualenv_s_missing_interpreter_cannot_run() {
        let c = cannot_run(&outcome("venv/bin/python -m pytest", Some(127), "sh: 1: venv/bin/python: not found"))
            .expect("cannot run");
        assert!(c.fix.contains("make it again"), "{}", c.fix);
        let c = cannot_run(&outcome("node_modules/.bin/jest", Some(127), "sh: 1: node_modules/.bin/jest: not found"));
        assert!(c.is_some());
        let c = cannot_run(&outcome("cargo nextest run", Some(101), "error: no such command: `nextest`"))
            .expect("cannot run");
        assert!(c.fix.contains("cargo install cargo-nextest"), "{}", c.fix);
    }

    #[test]
    fn a_check_that_runs_and_fails_is_not_taken_for_one_that_cannot_run() {
        for (command, exit, output) in [
            // The code under test imports what the task may be to write.
            ("python3 -m pytest -q", Some(2), "E   ModuleNotFoundError: No module named 'calc'"),
            ("python3 -m unittest -q", Some(1), "ModuleNotFoundError: No module named 'calc'"),
            // A script in the repository the task may be to write.
            ("./run_tests.sh", Some(127), "sh: 1: ./run_tests.sh: not found"),
            ("scripts/check", Some(126), "sh: 1: scripts/check: Permission denied"),
            // Tests that fail, a test that prints the words, a timeout.
            ("python3 -m unittest -q", Some(1), "FAILED (failures=1)"),
            ("pytest", Some(1), "assert 'sh: 1: x: not found' == ''"),
            ("make test", Some(2), "make: *** [Makefile:2: test] Error 127"),
        ] {
            assert_eq!(cannot_run(&outcome(command, exit, output)), None, "{command}: {output}");
        }
        let mut timed_out = outcome("pytest", None, "sh: 1: pytest: not found");
        timed_out.timed_out = true;
        assert_eq!(cannot_run(&timed_out), None);
    }
}
