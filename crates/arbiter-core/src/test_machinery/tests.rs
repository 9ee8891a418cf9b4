use super::*;
use crate::canary::StaticRepo;

/// The candidate's tree: the base with `changes` applied (`None` deletes), and the touched
/// paths as the capture lists them.
fn candidate(base: &StaticRepo, changes: &[(&str, Option<&str>)]) -> (StaticRepo, Vec<(String, Touch)>) {
    let mut tree = base.clone();
    let mut touched = Vec::new();
    for (path, content) in changes {
        let had = tree.files.iter().any(|f| f == path);
        match content {
            Some(c) => {
                if !had {
                    tree.files.push(path.to_string());
                }
                tree.contents.insert(path.to_string(), c.to_string());
                touched.push((path.to_string(), if had { Touch::Modified } else { Touch::Added }));
            }
            None => {
                tree.files.retain(|f| f != path);
                tree.contents.remove(*path);
                touched.push((path.to_string(), Touch::Deleted));
            }
        }
    }
    (tree, touched)
}

fn derive_on(base: &StaticRepo, changes: &[(&str, Option<&str>)], commands: &[&str]) -> Vec<Change> {
    let (tree, touched) = candidate(base, changes);
    let commands: Vec<String> = commands.iter().map(|c| c.to_string()).collect();
    let python = PythonFacts { stdlib_modules: ["unittest", "json", "os"].map(String::from).into() };
    derive(&Sources { base, candidate: &tree, touched: &touched, commands: &commands, python: &python })
}

fn described(changes: &[Change]) -> Vec<String> {
    changes.iter().map(Change::describe).collect()
}

fn python_base(extra: &[(&str, &str)]) -> StaticRepo {
    let mut files = vec![("calc.py", "def add(a, b):\n    return a - b\n"), ("test_calc.py", "def test_add(): pass\n")];
    files.extend_from_slice(extra);
    StaticRepo::with(&files)
}

const PYPROJECT: &str = "[project]\nname = \"calc\"\ndependencies = []\n";

#[test]
fn a_new_pytest_ini_of_any_spelling_is_taken_out() {
    let base = python_base(&[]);
    for name in ["pytest.ini", ".pytest.ini", "pytest.toml", "tests/.pytest.ini"] {
        let found =
            derive_on(&base, &[(name, Some("[pytest]\naddopts = --deselect test_calc.py::test_add\n"))], &["pytest"]);
        assert_eq!(described(&found), [name], "{name}");
        assert_eq!(found[0].restore, Restore::BaseFile);
        assert_eq!(found[0].family, Family::Python);
    }
}

#[test]
fn pyproject_gets_its_pytest_table_back_and_keeps_the_rest() {
    let base = python_base(&[("pyproject.toml", PYPROJECT)]);
    let hostile = format!(
        "{}\n[tool.pytest.ini_options]\naddopts = \"--deselect test_calc.py::test_add\"\n",
        PYPROJECT.replace("[]", "[\"requests\"]")
    );
    let found = derive_on(&base, &[("pyproject.toml", Some(&hostile))], &["pytest -q"]);
    assert_eq!(described(&found), ["pyproject.toml [tool.pytest.ini_options] addopts"]);
    let Restore::Settings { content } = &found[0].restore else { panic!("{found:?}") };
    assert!(!content.contains("tool.pytest") && content.contains("\"requests\""), "{content}");

    // An edit within the base's table names the setting; the base's table comes back.
    let configured = format!("{PYPROJECT}\n[tool.pytest.ini_options]\ntestpaths = [\"tests\"]\n");
    let base = python_base(&[("pyproject.toml", &configured)]);
    let edited = configured.replace("testpaths", "addopts = \"-p no:python\"\ntestpaths");
    let found = derive_on(&base, &[("pyproject.toml", Some(&edited))], &["pytest"]);
    assert_eq!(described(&found), ["pyproject.toml [tool.pytest.ini_options] addopts"]);
    let Restore::Settings { content } = &found[0].restore else { panic!("{found:?}") };
    assert!(content.contains("testpaths") && !content.contains("addopts"), "{content}");
    // pytest 9's own table.
    let native = format!("{configured}\n[tool.pytest]\naddopts = [\"-k\", \"not add\"]\n");
    assert_eq!(
        described(&derive_on(&base, &[("pyproject.toml", Some(&native))], &["pytest"])),
        ["pyproject.toml [tool.pytest] addopts"]
    );

    // Adding a dependency is an ordinary change.
    let honest = configured.replace("[]", "[\"requests\"]");
    assert!(derive_on(&base, &[("pyproject.toml", Some(&honest))], &["pytest"]).is_empty());
    // A candidate file that does not parse cannot be put back.
    let found = derive_on(&base, &[("pyproject.toml", Some("[tool.pytest\n"))], &["pytest"]);
    assert!(matches!(&found[0].restore, Restore::Reject { why } if why.contains("pyproject.toml")), "{found:?}");
    // Deleting it brings the whole base file back.
    let found = derive_on(&base, &[("pyproject.toml", None)], &["pytest"]);
    assert_eq!(found[0].restore, Restore::BaseFile);
}

#[test]
fn ini_sections_of_setup_cfg_and_tox_ini() {
    let base = python_base(&[("setup.cfg", "[metadata]\nname = calc\n"), ("tox.ini", "[tox]\nenvlist = py3\n")]);
    let found = derive_on(
        &base,
        &[
            ("setup.cfg", Some("[metadata]\nname = calc2\n[tool:pytest]\naddopts = -k 'not add'\n")),
            ("tox.ini", Some("[tox]\nenvlist = py3,py4\n")),
        ],
        &["python3 -m pytest"],
    );
    assert_eq!(described(&found), ["setup.cfg [tool:pytest] addopts"]);
    assert_eq!(found[0].restore, Restore::Settings { content: "[metadata]\nname = calc2\n".into() });
    let found = derive_on(&base, &[("tox.ini", Some("[tox]\nenvlist = py3\n[pytest]\naddopts = -x\n"))], &["pytest"]);
    assert_eq!(described(&found), ["tox.ini [pytest] addopts"]);
}

#[test]
fn conftest_plugins_and_start_up_hooks() {
    let base = python_base(&[
        ("pytest.ini", "[pytest]\naddopts = -p tools.checks\n"),
        ("tests/conftest.py", "pytest_plugins = ['tools.fixtures']\n"),
        ("tools/checks.py", ""),
        ("tools/fixtures.py", ""),
        ("tools/other.py", ""),
        ("pkg/__init__.py", ""),
        ("pkg/test_pkg.py", ""),
    ]);
    let found = derive_on(
        &base,
        &[
            ("conftest.py", Some("")),
            ("deep/er/conftest.py", Some("")),
            ("tools/checks.py", Some("x = 1\n")),
            ("tools/fixtures.py", Some("x = 1\n")),
            ("tools/other.py", Some("x = 1\n")),
            ("sitecustomize.py", Some("")),
            ("lib/usercustomize.py", Some("")),
            ("zz.pth", Some("import os\n")),
            // Shadows the standard library where tests are imported from: the root, and a
            // directory of tests that is not a package.
            ("unittest.py", Some("")),
            ("tests/json/__init__.py", Some("")),
            ("pytest.py", Some("")),
            // Inside a package: `pkg.json`, which shadows nothing.
            ("pkg/json.py", Some("")),
            ("calc.py", Some("def add(a, b):\n    return a + b\n")),
        ],
        &["python3 -m unittest"],
    );
    assert_eq!(
        described(&found),
        [
            "conftest.py",
            "deep/er/conftest.py",
            "tools/checks.py",
            "tools/fixtures.py",
            "sitecustomize.py",
            "lib/usercustomize.py",
            "zz.pth",
            "unittest.py",
            "tests/json/__init__.py",
            "pytest.py"
        ]
    );
    assert!(found.iter().all(|c| c.restore == Restore::BaseFile));
    assert!(found[7].what.contains("`unittest`"), "{:?}", found[7]);
}

#[test]
fn cargo_configuration_build_scripts_and_test_targets() {
    let manifest = "[package]\nname = \"calc\"\nversion = \"0.1.0\"\n\n[dependencies]\n";
    let base = StaticRepo::with(&[
        ("Cargo.toml", manifest),
        ("src/lib.rs", ""),
        ("tools/Cargo.toml", "[package]\nname = \"tools\"\nbuild = \"gen/build_it.rs\"\n"),
        ("tools/gen/build_it.rs", "fn main() {}\n"),
    ]);
    let hostile = manifest.replace("[dependencies]", "build = \"make.rs\"\n\n[dependencies]\nrand = \"0.8\"");
    let found = derive_on(
        &base,
        &[
            (".cargo/config.toml", Some("[target.'cfg(all())']\nrunner = \"true\"\n")),
            ("crates/x/.cargo/config", Some("")),
            ("build.rs", Some("fn main() {}\n")),
            ("tools/gen/build_it.rs", Some("fn main() { }\n")),
            ("src/build.rs", Some("")),
            ("Cargo.toml", Some(&hostile)),
        ],
        &["cargo test"],
    );
    assert_eq!(
        described(&found),
        [
            ".cargo/config.toml",
            "crates/x/.cargo/config",
            "build.rs",
            "tools/gen/build_it.rs",
            "Cargo.toml [package] build"
        ]
    );
    let Restore::Settings { content } = &found[4].restore else { panic!("{found:?}") };
    assert!(!content.contains("build =") && content.contains("rand = \"0.8\""), "{content}");
    // A harness turned off for a test target.
    let harness = format!("{manifest}\n[[test]]\nname = \"calc\"\nharness = false\n");
    assert_eq!(described(&derive_on(&base, &[("Cargo.toml", Some(&harness))], &["cargo test"])), ["Cargo.toml test"]);
    // A dependency is an ordinary change.
    let honest = manifest.replace("[dependencies]\n", "[dependencies]\nrand = \"0.8\"\n");
    assert!(derive_on(&base, &[("Cargo.toml", Some(&honest))], &["cargo test"]).is_empty());
}

#[test]
fn go_workspaces_replacements_and_vendored_source() {
    let go_mod = "module example.com/calc\n\ngo 1.21\n";
    let base = StaticRepo::with(&[("go.mod", go_mod), ("calc/calc.go", "package calc\n")]);
    let replaced = format!("{go_mod}\nrequire example.com/dep v1.0.0\n\nreplace example.com/dep => ./fake\n");
    let found = derive_on(
        &base,
        &[
            ("go.work", Some("go 1.21\nuse .\n")),
            ("vendor/example.com/dep/dep.go", Some("package dep\n")),
            ("go.mod", Some(&replaced)),
        ],
        &["go test ./..."],
    );
    assert_eq!(described(&found), ["go.work", "vendor/example.com/dep/dep.go", "go.mod replace"]);
    let Restore::Settings { content } = &found[2].restore else { panic!("{found:?}") };
    assert_eq!(content, &format!("{go_mod}\nrequire example.com/dep v1.0.0\n\n"));
}

#[test]
fn jest_and_vitest_configuration_scripts_and_named_files() {
    let package = "{\"name\":\"calc\",\"scripts\":{\"test\":\"npm run unit\",\"unit\":\"jest\",\"build\":\"tsc\"},\"jest\":{\"setupFiles\":[\"<rootDir>/test/setup.js\"]},\"devDependencies\":{}}\n";
    let base = StaticRepo::with(&[
        ("package.json", package),
        ("test/setup.js", ""),
        ("vitest.config.ts", "export default { test: { setupFiles: ['./vsetup.ts'] } }\n"),
        ("vsetup.ts", ""),
        ("src/calc.js", ""),
    ]);
    let swallowing =
        package.replace("\"unit\":\"jest\"", "\"unit\":\"jest || true\"").replace("{}}", "{\"left-pad\":\"1\"}}");
    let found = derive_on(
        &base,
        &[
            ("jest.config.js", Some("module.exports = {}\n")),
            ("web/vite.config.mjs", Some("")),
            ("babel.config.js", Some("")),
            (".babelrc", Some("{}")),
            (".npmrc", Some("script-shell=/bin/true\n")),
            ("test/setup.js", Some("global.expect = () => ({ toBe() {} });\n")),
            ("vsetup.ts", Some("")),
            ("package.json", Some(&swallowing)),
        ],
        &["npm test"],
    );
    assert_eq!(
        described(&found),
        [
            "jest.config.js",
            "web/vite.config.mjs",
            "babel.config.js",
            ".babelrc",
            ".npmrc",
            "test/setup.js",
            "vsetup.ts",
            "package.json scripts.unit"
        ]
    );
    let Restore::Settings { content } = &found[7].restore else { panic!("{found:?}") };
    let restored: serde_json::Value = serde_json::from_str(content).unwrap_or_default();
    assert_eq!(restored["scripts"]["unit"], "jest");
    assert_eq!(restored["devDependencies"]["left-pad"], "1", "the honest part stays");
    // A build script is the project's own business.
    let build = package.replace("\"tsc\"", "\"tsc -p .\"");
    assert!(derive_on(&base, &[("package.json", Some(&build))], &["npm test"]).is_empty());
}

#[test]
fn only_the_frameworks_in_play_count() {
    // A Python project: a build.rs or a jest.config.js means nothing to its tests.
    let base = python_base(&[]);
    let found = derive_on(&base, &[("build.rs", Some("")), ("jest.config.js", Some("")), ("go.work", Some(""))], &[]);
    assert!(found.is_empty(), "{found:?}");
    // The commands bring their framework in, whatever the base holds.
    let empty = StaticRepo::with(&[("README.md", "")]);
    assert_eq!(described(&derive_on(&empty, &[("conftest.py", Some(""))], &["pytest"])), ["conftest.py"]);
    assert!(derive_on(&empty, &[("conftest.py", Some(""))], &["make check"]).is_empty());
}

#[test]
fn the_base_files_the_runner_loads_are_those_derive_reads() {
    for p in
        ["pyproject.toml", "a/setup.cfg", "tox.ini", ".pytest.ini", "x/conftest.py", "package.json", "jest.config.ts"]
    {
        assert!(base_reads(p), "{p}");
    }
    for p in ["Cargo.toml", "go.mod", "web/vite.config.js", "vitest.workspace.ts"] {
        assert!(base_reads(p), "{p}");
    }
    assert!(!base_reads("src/calc.py") && !base_reads("README.md"));
}
