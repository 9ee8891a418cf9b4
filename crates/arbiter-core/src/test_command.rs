//! The repository's own test command, found from its files, for a run that names no verify
//! command: arbiter checks candidates by default instead of ranking unverified patches.
//!
//! [`detect`] looks at the base's tracked files (through a [`RepoView`]) and returns the
//! command a developer of the repository would run, with the file that says so. The order
//! is the language's own runner first (Cargo, then Python, then `package.json`, then Go),
//! then the build tools that wrap several (a Makefile's `test` target, Maven, Gradle,
//! Mix): a language runner is one plain invocation the gates can read test by test and
//! plant a canary in. Nothing is run here: the caller checks that the program exists.

use crate::canary::RepoView;

/// A test command found in the repository.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Detected {
    pub command: String,
    /// The file it was found from (`Cargo.toml`, `package.json`, ...).
    pub from: String,
}

/// npm's placeholder for a package without tests.
const NPM_PLACEHOLDER: &str = "no test specified";

/// The repository's test command, when its files name one.
pub fn detect(repo: &dyn RepoView) -> Option<Detected> {
    let has = |path: &str| repo.files().iter().any(|f| f == path);
    let found = |command: &str, from: &str| Some(Detected { command: command.into(), from: from.into() });
    if has("Cargo.toml") {
        let workspace = repo.read("Cargo.toml").is_some_and(|t| t.lines().any(|l| l.trim() == "[workspace]"));
        return found(if workspace { "cargo test --workspace" } else { "cargo test" }, "Cargo.toml");
    }
    if let Some(d) = python(repo) {
        return Some(d);
    }
    if has("package.json")
        && let Some(text) = repo.read("package.json")
        && let Some(script) = npm_test_script(&text)
        && !script.contains(NPM_PLACEHOLDER)
    {
        let manager = if has("pnpm-lock.yaml") {
            "pnpm test"
        } else if has("yarn.lock") {
            "yarn test"
        } else {
            "npm test"
        };
        return found(manager, "package.json");
    }
    if has("go.mod") {
        return found("go test ./...", "go.mod");
    }
    for makefile in ["Makefile", "makefile", "GNUmakefile"] {
        if has(makefile) && repo.read(makefile).is_some_and(|t| make_target(&t, "test")) {
            return found("make test", makefile);
        }
    }
    if has("pom.xml") {
        return found("mvn -q test", "pom.xml");
    }
    if has("gradlew") && (has("build.gradle") || has("build.gradle.kts")) {
        return found("./gradlew test", "gradlew");
    }
    if has("mix.exs") {
        return found("mix test", "mix.exs");
    }
    None
}

/// Python: pytest when the repository configures or depends on it, else unittest discovery
/// when it has test modules.
fn python(repo: &dyn RepoView) -> Option<Detected> {
    let files = repo.files();
    let has = |path: &str| files.iter().any(|f| f == path);
    let found = |command: &str, from: &str| Some(Detected { command: command.into(), from: from.into() });
    if has("pytest.ini") {
        return found("python3 -m pytest -q", "pytest.ini");
    }
    if has("conftest.py") {
        return found("python3 -m pytest -q", "conftest.py");
    }
    for (file, marker) in [
        ("pyproject.toml", "[tool.pytest"),
        ("setup.cfg", "[tool:pytest]"),
        ("tox.ini", "[pytest]"),
        ("pyproject.toml", "pytest"),
        ("requirements-dev.txt", "pytest"),
        ("requirements.txt", "pytest"),
        ("setup.py", "pytest"),
    ] {
        if has(file) && repo.read(file).is_some_and(|t| t.contains(marker)) {
            return found("python3 -m pytest -q", file);
        }
    }
    let test_module = files.iter().find(|f| {
        let name = f.rsplit('/').next().unwrap_or(f);
        name.ends_with(".py") && (name.starts_with("test_") || name.ends_with("_test.py") || name == "tests.py")
    })?;
    // unittest's discovery imports test*.py from packages only: a test beside an __init__.py
    // or at the top.
    found("python3 -m unittest -q", test_module)
}

/// The `scripts.test` of a `package.json`.
fn npm_test_script(text: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    value.get("scripts")?.get("test")?.as_str().map(str::to_string)
}

/// Whether a Makefile defines `target` in a rule (`target:`, `a target: deps`, `target::`),
/// not in a variable assignment (`target := ...`, `target ::= ...`).
fn make_target(text: &str, target: &str) -> bool {
    text.lines().filter(|l| !l.starts_with('\t')).any(|line| {
        let Some((targets, rest)) = line.split_once(':') else { return false };
        let assignment = rest.starts_with('=') || rest.starts_with(":=") || targets.contains('=');
        !assignment && targets.split_whitespace().any(|t| t == target)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canary::StaticRepo;

    fn detected(files: &[(&str, &str)]) -> Option<(String, String)> {
        detect(&StaticRepo::with(files)).map(|d| (d.command, d.from))
    }

    fn pair(command: &str, from: &str) -> Option<(String, String)> {
        Some((command.into(), from.into()))
    }

    #[test]
    fn each_ecosystem_is_found_from_its_own_file() {
        assert_eq!(detected(&[("Cargo.toml", "[package]\nname = \"x\"\n")]), pair("cargo test", "Cargo.toml"));
        assert_eq!(
            detected(&[("Cargo.toml", "[workspace]\nmembers = [\"a\"]\n")]),
            pair("cargo test --workspace", "Cargo.toml")
        );
        assert_eq!(detected(&[("go.mod", "module x\n")]), pair("go test ./...", "go.mod"));
        assert_eq!(
            detected(&[("package.json", r#"{"scripts": {"test": "vitest run"}}"#)]),
            pair("npm test", "package.json")
        );
        assert_eq!(
            detected(&[("package.json", r#"{"scripts": {"test": "jest"}}"#), ("pnpm-lock.yaml", "")]),
            pair("pnpm test", "package.json")
        );
        assert_eq!(detected(&[("Makefile", "all:\n\tcc x.c\n\ntest: all\n\t./run\n")]), pair("make test", "Makefile"));
        assert_eq!(detected(&[("pom.xml", "<project/>")]), pair("mvn -q test", "pom.xml"));
        assert_eq!(detected(&[("mix.exs", "")]), pair("mix test", "mix.exs"));
    }

    #[test]
    fn python_prefers_pytest_where_the_repository_uses_it() {
        assert_eq!(detected(&[("pytest.ini", "[pytest]\n")]), pair("python3 -m pytest -q", "pytest.ini"));
        assert_eq!(
            detected(&[("pyproject.toml", "[tool.pytest.ini_options]\n"), ("src/x.py", "")]),
            pair("python3 -m pytest -q", "pyproject.toml")
        );
        assert_eq!(
            detected(&[("calc.py", ""), ("test_calc.py", "import unittest\n")]),
            pair("python3 -m unittest -q", "test_calc.py")
        );
        assert_eq!(
            detected(&[("requirements.txt", "pytest==8\n"), ("tests/test_a.py", "")]),
            pair("python3 -m pytest -q", "requirements.txt")
        );
    }

    #[test]
    fn nothing_is_made_up() {
        assert_eq!(detected(&[("README.md", "# x\n"), ("main.py", "print(1)\n")]), None);
        // npm's placeholder, and a package without a test script.
        assert_eq!(
            detected(&[("package.json", r#"{"scripts": {"test": "echo \"Error: no test specified\" && exit 1"}}"#)]),
            None
        );
        assert_eq!(detected(&[("package.json", r#"{"name": "x"}"#)]), None);
        assert_eq!(detected(&[("package.json", "not json")]), None);
        // A Makefile without a test target, or with a variable called test.
        assert_eq!(detected(&[("Makefile", "build:\n\tcc x.c\ntest := no\n")]), None);
        assert_eq!(detected(&[("gradlew", "")]), None);
    }

    #[test]
    fn cargo_comes_before_what_wraps_it() {
        assert_eq!(
            detected(&[("Makefile", "test:\n\tcargo test\n"), ("Cargo.toml", "[package]\n")]),
            pair("cargo test", "Cargo.toml")
        );
    }
}
