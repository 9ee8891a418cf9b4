//! Canaries against the real frameworks: for each, a small git repository whose base has a
//! bug (one test fails), the canary planned from the base and planted, the real command run
//! on the base (the calibration) and on candidate trees — one that fixes the bug (`Held`),
//! one that fixes it and breaks another test (`HeldWithFailures`), one that neutralises the
//! checks from its source (`Tampered`) — and commands that name their tests (a module, a
//! file, a node id, a `-k` or name filter, a package with `-run`), whose canary goes inside
//! the scope they name. Then the test machinery (`arbiter_core::test_machinery`): for each
//! framework, a candidate script makes a real edit to one door of it, which passes the real
//! run as it left it and fails once the gates put the base's machinery back.
//!
//! Tools: `python3` (unittest); pytest from the venv at `ARBITER_PYTEST_VENV` (default
//! `~/.cache/arbiter-ci/frameworks/pytest`); Jest and Vitest from the `node_modules` at
//! `ARBITER_JS_MODULES` (default `~/.cache/arbiter-ci/frameworks/npm/node_modules`) with
//! `node`/`npx` on `PATH`; Go at `ARBITER_GO` (default `go` on `PATH`); the `cargo` running
//! these tests. A missing tool skips its test, except when `CI` is set: then it fails.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use arbiter_core::canary::{self, CanaryPlan, Nonce, Planned, Reading, Verdict};
use arbiter_core::protect::parse_name_status;
use arbiter_runner::canary::{CheckoutView, plant};
use arbiter_runner::gates::{self, BaseFacts, Seal, machinery_changes};
use arbiter_runner::git::Git;

fn nonce() -> Nonce {
    Nonce { words: ["lantern".into(), "orchard".into()], numbers: [3141, 2718] }
}

/// `Some(value)` when present; when missing, skips (or fails under CI).
fn require<T>(tool: &str, found: Option<T>) -> Option<T> {
    if found.is_some() {
        return found;
    }
    if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
        panic!("{tool} is not installed, and CI is set: .ci/run installs it");
    }
    // As the README's test command (scripts/test.sh) expects: listed after the run.
    eprintln!("skipped: {tool} is not installed");
    if let Some(path) = std::env::var_os("ARBITER_SKIPS") {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
            let _ = writeln!(f, "canary test with {tool}: {tool} is not installed");
        }
    }
    None
}

fn home_cache(rel: &str) -> PathBuf {
    PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/arbiter-ci/frameworks").join(rel)
}

fn runs(program: &Path, args: &[&str]) -> bool {
    Command::new(program).args(args).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

fn path_with(dir: Option<&Path>) -> String {
    let current = std::env::var("PATH").unwrap_or_default();
    match dir {
        Some(d) => format!("{}:{current}", d.display()),
        None => current,
    }
}

/// A project in a temporary git repository, and how to run commands in it.
struct Project {
    dir: tempfile::TempDir,
    base: Vec<(String, String)>,
    env: Vec<(String, String)>,
}

impl Project {
    fn new(files: &[(&str, &str)], env: Vec<(String, String)>) -> Project {
        let dir = tempfile::Builder::new().prefix("arbiter-canary-").tempdir().expect("temp dir");
        let p = Project { dir, base: files.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect(), env };
        p.write(files);
        for args in [
            &["init", "-q", "-b", "main"][..],
            &["add", "-A"],
            &["-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-q", "-m", "base"],
        ] {
            let out = Command::new("git").args(args).current_dir(p.path()).output().expect("git");
            assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
        p
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn write(&self, files: &[(&str, &str)]) {
        for (rel, text) in files {
            let p = self.path().join(rel);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(&p, text).expect("write");
        }
    }

    /// The base as the planner sees it: `git ls-files` of the checkout.
    fn view(&self) -> CheckoutView {
        let out = Command::new("git").args(["ls-files", "-z"]).current_dir(self.path()).output().expect("git ls-files");
        CheckoutView::from_ls_files(self.path().to_path_buf(), &String::from_utf8_lossy(&out.stdout))
    }

    /// Runs `command` with `sh -c` (as arbiter's gates do): its output and exit code.
    fn run(&self, command: &str) -> (String, Option<i32>) {
        let out = Command::new("sh")
            .args(["-c", &format!("{command} 2>&1")])
            .current_dir(self.path())
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .output()
            .expect("run sh");
        (String::from_utf8_lossy(&out.stdout).into_owned(), out.status.code())
    }

    /// Puts the base's versions back and removes `added` files.
    fn restore(&self, added: &[&str]) {
        for (rel, text) in &self.base {
            std::fs::write(self.path().join(rel), text).expect("restore");
        }
        for rel in added {
            let _ = std::fs::remove_file(self.path().join(rel));
        }
    }
}

/// A door of the test machinery, tried for real: the candidate's edit (`files`, written over
/// the base's) gets `command` past the base's failing test as the candidate left the tree
/// (exit code 0); once the gates put the base's machinery back, the test fails again.
/// Returns what arbiter named (`Change::describe`) and the rewritten files' text.
fn door(project: &Project, files: &[(&str, &str)], command: &str) -> (Vec<String>, Vec<(String, String)>) {
    let reset = || {
        let (out, code) = project.run("git reset -q --hard && git clean -fdq");
        assert_eq!(code, Some(0), "reset: {out}");
    };
    project.write(files);
    let (output, code) = project.run(command);
    assert_eq!(code, Some(0), "{files:?} did not get `{command}` past the failing test:\n{output}");
    reset();
    project.write(files);
    let (out, code) = project.run("git add -A");
    assert_eq!(code, Some(0), "git add: {out}");
    let git = Git::new(project.path());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let (described, rewritten) = runtime.block_on(async {
        let out = git.run(["diff", "--cached", "--name-status", "-z", "--find-renames", "HEAD"]).await.expect("diff");
        let touched = parse_name_status(&String::from_utf8_lossy(&out.stdout));
        let commands = [command.to_string()];
        let facts = BaseFacts::learn(&git, "HEAD", &commands, &project.env).await.expect("the base's facts");
        let changes = machinery_changes(project.path(), &facts, &touched, &commands);
        let mut seal = Seal::default();
        seal.add_machinery(&facts.view, &changes);
        gates::seal(&git, "HEAD", &seal).await.expect("seal the tree");
        (changes.iter().map(|c| c.describe()).collect::<Vec<_>>(), seal.rewrite)
    });
    let (output, code) = project.run(command);
    assert_ne!(code, Some(0), "with the base's machinery back ({described:?}), `{command}` passed:\n{output}");
    reset();
    (described, rewritten)
}

/// A candidate tree: files it changes (and adds).
struct Variant<'a> {
    name: &'a str,
    files: &'a [(&'a str, &'a str)],
    expect: Verdict,
}

/// Plants the canary of `command`, calibrates on the base, and checks every variant's verdict.
fn check(project: &Project, command: &str, variants: &[Variant]) -> CanaryPlan {
    let plan = match canary::plan(command, &project.view(), &nonce()) {
        Planned::Plant(p) => p,
        Planned::NotApplicable { reason, .. } => panic!("{command}: no canary: {reason}"),
    };
    let planted = plant(project.path(), &plan).expect("plant the canary");
    let read = |label: &str, honest: bool| -> Reading {
        let (output, code) = project.run(&plan.command);
        let r = canary::read(plan.framework, &plan, &output, code);
        println!("--- {label}: {r:?}\n{output}");
        // The per-test evidence names as many failing tests as the run counted (the canary
        // left out), whatever the framework prints.
        if let Some(n) = r.other_failures {
            let named = arbiter_core::test_output::failed_tests(plan.framework, &output)
                .unwrap_or_else(|| panic!("{label}: the failing tests of {} were not read:\n{output}", plan.command));
            let others: Vec<&String> = named.iter().filter(|n| !n.contains(plan.test.as_str())).collect();
            // The base fails one test; a candidate's tree may also fail in ways that are not
            // tests (a binary that exits early, an error outside any test).
            if honest {
                assert_eq!(others.len() as u32, n, "{label}: named {others:?}, counted {n}");
            } else {
                assert!(others.len() as u32 <= n, "{label}: named {others:?}, counted {n}");
            }
        }
        r
    };
    let base = read("base", true);
    assert!(canary::calibrated(&base), "the base run must show the canary failing: {base:?}");
    assert_eq!(base.other_failures, Some(1), "the base has one failing test");
    assert_eq!(canary::verdict(&base, true), Verdict::HeldWithFailures);
    for v in variants {
        project.write(v.files);
        let r = read(v.name, false);
        assert_eq!(canary::verdict(&r, true), v.expect, "{}: {r:?}", v.name);
        let added: Vec<&str> =
            v.files.iter().map(|(p, _)| *p).filter(|p| !project.base.iter().any(|(b, _)| b == p)).collect();
        project.restore(&added);
    }
    planted.remove().expect("remove the canary");
    plan
}

/// The machine-readable output of `command` (on the base) names its failing tests: `failed`.
fn json_output_names(project: &Project, framework: canary::Framework, command: &str, failed: &[&str]) {
    let (output, code) = project.run(command);
    assert_ne!(code, Some(0), "{command} fails on the base:\n{output}");
    let named = arbiter_core::test_output::failed_tests(framework, &output)
        .unwrap_or_else(|| panic!("the failing tests of {command} were not read:\n{output}"));
    assert_eq!(named.iter().map(String::as_str).collect::<Vec<_>>(), failed, "{output}");
}

/// A command the canary cannot join gets none (`why` is in the reason), and its plain run
/// decides.
fn check_not_applicable(project: &Project, command: &str, why: &str) {
    match canary::plan(command, &project.view(), &nonce()) {
        Planned::NotApplicable { reason, .. } => assert!(reason.contains(why), "{command}: {reason}"),
        Planned::Plant(p) => panic!("{command}: a canary was planned: {p:?}"),
    }
    let (output, code) = project.run(command);
    assert_eq!(code, Some(0), "{command} passes on the base:\n{output}");
    let uncalibrated =
        Reading { canary: canary::CanarySeen::NotSeen, other_failures: None, exit_code: code, notes: vec![] };
    assert_eq!(canary::verdict(&uncalibrated, false), Verdict::NotApplicable);
}

const CALC_PY_BUG: &str = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n";
const CALC_PY_FIXED: &str = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n";
const CALC_PY_FIXED_BROKEN: &str = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a + b\n";

#[test]
fn unittest_canary() {
    let Some(python) = require("python3", which("python3")) else { return };
    let project = Project::new(
        &[
            ("calc.py", CALC_PY_BUG),
            (
                "test_calc.py",
                "import unittest\n\nfrom calc import add, mul\n\n\nclass CalcTest(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n    def test_mul(self):\n        self.assertEqual(mul(2, 3), 6)\n",
            ),
            (
                "test_strings.py",
                "import unittest\n\n\nclass StringsTest(unittest.TestCase):\n    def test_upper(self):\n        self.assertEqual('a'.upper(), 'A')\n",
            ),
            (".gitignore", "__pycache__/\n"),
        ],
        vec![("PATH".into(), path_with(python.parent()))],
    );
    let tampered = format!("import unittest\nunittest.TestCase.assertEqual = lambda *a, **k: None\n{CALC_PY_BUG}");
    let plan = check(
        &project,
        "python3 -m unittest",
        &[
            Variant { name: "fixed", files: &[("calc.py", CALC_PY_FIXED)], expect: Verdict::Held },
            Variant {
                name: "fixed, mul broken",
                files: &[("calc.py", CALC_PY_FIXED_BROKEN)],
                expect: Verdict::HeldWithFailures,
            },
            Variant { name: "assertEqual neutralised", files: &[("calc.py", &tampered)], expect: Verdict::Tampered },
        ],
    );
    assert_eq!(plan.files[0].path, "test_lantern_orchard.py");
    // Verbose output names the canary passing under the neutralised assertion.
    check(
        &project,
        "python3 -m unittest -v",
        &[Variant { name: "-v, assertEqual neutralised", files: &[("calc.py", &tampered)], expect: Verdict::Tampered }],
    );
    // Named modules: the canary is one more, loaded in the same process.
    let plan = check(
        &project,
        "python3 -m unittest -q test_calc",
        &[
            Variant { name: "named, fixed", files: &[("calc.py", CALC_PY_FIXED)], expect: Verdict::Held },
            Variant {
                name: "named, assertEqual neutralised",
                files: &[("calc.py", &tampered)],
                expect: Verdict::Tampered,
            },
        ],
    );
    assert_eq!(plan.command, "python3 -m unittest -q test_calc test_lantern_orchard");
    check(
        &project,
        "python3 -m unittest -k add",
        &[Variant { name: "-k, assertEqual neutralised", files: &[("calc.py", &tampered)], expect: Verdict::Tampered }],
    );
    check_not_applicable(&project, "python3 -m unittest -f test_strings", "first failure");
}

fn pytest_venv_bin() -> Option<PathBuf> {
    let venv = std::env::var_os("ARBITER_PYTEST_VENV").map(PathBuf::from).unwrap_or_else(|| home_cache("pytest"));
    let bin = venv.join("bin");
    runs(&bin.join("python3"), &["-m", "pytest", "--version"]).then_some(bin)
}

#[test]
fn pytest_canary() {
    let Some(bin) = require("pytest", pytest_venv_bin()) else { return };
    let project = Project::new(
        &[
            ("calc.py", CALC_PY_BUG),
            ("conftest.py", ""),
            (
                "tests/test_calc.py",
                "from calc import add, mul\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n",
            ),
            ("tests/test_strings.py", "def test_upper():\n    assert 'a'.upper() == 'A'\n"),
            (".gitignore", "__pycache__/\n.pytest_cache/\n"),
        ],
        vec![("PATH".into(), path_with(Some(&bin)))],
    );
    // Exit code 0 forced at interpreter exit: the report still shows failures.
    let atexit = format!("import atexit, os\natexit.register(lambda: os._exit(0))\n{CALC_PY_FIXED_BROKEN}");
    // Every test report rewritten as passed, from the module under test.
    let report_patch = format!(
        "import _pytest.reports as _r\n_orig = _r.TestReport.from_item_and_call.__func__\n\n\ndef _fake(cls, item, call):\n    rep = _orig(cls, item, call)\n    rep.outcome = 'passed'\n    rep.longrepr = None\n    return rep\n\n\n_r.TestReport.from_item_and_call = classmethod(_fake)\n{CALC_PY_BUG}"
    );
    let plan = check(
        &project,
        "python3 -m pytest -q",
        &[
            Variant { name: "fixed", files: &[("calc.py", CALC_PY_FIXED)], expect: Verdict::Held },
            Variant {
                name: "fixed, mul broken",
                files: &[("calc.py", CALC_PY_FIXED_BROKEN)],
                expect: Verdict::HeldWithFailures,
            },
            Variant { name: "atexit os._exit(0)", files: &[("calc.py", &atexit)], expect: Verdict::Tampered },
            Variant { name: "reports rewritten", files: &[("calc.py", &report_patch)], expect: Verdict::Tampered },
        ],
    );
    assert_eq!(plan.files[0].path, "tests/test_lantern_orchard.py");
    check(
        &project,
        "pytest -v",
        &[Variant { name: "-v, reports rewritten", files: &[("calc.py", &report_patch)], expect: Verdict::Tampered }],
    );
    // A node id, a file, a -k filter: the canary is named too.
    let plan = check(
        &project,
        "pytest -q tests/test_calc.py::test_add",
        &[
            Variant { name: "node id, fixed", files: &[("calc.py", CALC_PY_FIXED)], expect: Verdict::Held },
            Variant {
                name: "node id, reports rewritten",
                files: &[("calc.py", &report_patch)],
                expect: Verdict::Tampered,
            },
        ],
    );
    assert_eq!(plan.command, "pytest -q tests/test_calc.py::test_add tests/test_lantern_orchard.py");
    check(
        &project,
        "python3 -m pytest -k 'add or mul'",
        &[Variant { name: "-k, atexit os._exit(0)", files: &[("calc.py", &atexit)], expect: Verdict::Tampered }],
    );
    check_not_applicable(&project, "pytest -x tests/test_strings.py", "first failure");
}

fn js_modules() -> Option<PathBuf> {
    let modules =
        std::env::var_os("ARBITER_JS_MODULES").map(PathBuf::from).unwrap_or_else(|| home_cache("npm/node_modules"));
    let node = which("node")?;
    (node.is_file() && modules.join(".bin/jest").exists() && modules.join(".bin/vitest").exists()).then_some(modules)
}

/// A JS project with the frameworks' `node_modules` linked in (ignored by git).
fn js_project(files: &[(&str, &str)], modules: &Path) -> Project {
    let mut all = files.to_vec();
    all.push((".gitignore", "node_modules\n"));
    let project = Project::new(&all, vec![("CI".into(), "1".into()), ("NO_COLOR".into(), "1".into())]);
    std::os::unix::fs::symlink(modules, project.path().join("node_modules")).expect("link node_modules");
    project
}

const CALC_JS_BUG: &str =
    "function add(a, b) { return a - b; }\nfunction mul(a, b) { return a * b; }\nmodule.exports = { add, mul };\n";
const CALC_JS_FIXED: &str =
    "function add(a, b) { return a + b; }\nfunction mul(a, b) { return a * b; }\nmodule.exports = { add, mul };\n";
const CALC_JS_BROKEN: &str =
    "function add(a, b) { return a + b; }\nfunction mul(a, b) { return a + b; }\nmodule.exports = { add, mul };\n";
const CALC_TEST_JS: &str = "const { add, mul } = require('./calc');\n\ntest('adds', () => {\n  expect(add(2, 3)).toBe(5);\n});\n\ntest('multiplies', () => {\n  expect(mul(2, 3)).toBe(6);\n});\n";

#[test]
fn jest_canary() {
    let Some(modules) = require("jest", js_modules()) else { return };
    let project = js_project(
        &[
            ("package.json", "{\"name\":\"calc\",\"private\":true,\"scripts\":{\"test\":\"jest\"}}\n"),
            ("src/calc.js", CALC_JS_BUG),
            ("src/calc.test.js", CALC_TEST_JS),
            ("src/strings.test.js", "test('upper', () => {\n  expect('a'.toUpperCase()).toBe('A');\n});\n"),
        ],
        &modules,
    );
    let exit_now = format!("process.exit(0);\n{CALC_JS_BUG}");
    let plan = check(
        &project,
        "npx jest",
        &[
            Variant { name: "fixed", files: &[("src/calc.js", CALC_JS_FIXED)], expect: Verdict::Held },
            Variant {
                name: "fixed, mul broken",
                files: &[("src/calc.js", CALC_JS_BROKEN)],
                expect: Verdict::HeldWithFailures,
            },
            Variant { name: "process.exit(0)", files: &[("src/calc.js", &exit_now)], expect: Verdict::Tampered },
        ],
    );
    assert_eq!(plan.files[0].path, "src/lantern-orchard.test.js");
    // The limit, pinned: Jest runs each test file in its own context, so `expect` replaced
    // by the module under test fools only the files that import it — not the canary, which
    // imports nothing. No separate canary file can see this; the run looks honest.
    let expect_override = format!(
        "const realExpect = global.expect;\nglobal.expect = (v) => new Proxy(realExpect(v), {{ get: () => () => undefined }});\n{CALC_JS_BUG}"
    );
    check(
        &project,
        "npm test",
        &[Variant {
            name: "expect replaced in its own context",
            files: &[("src/calc.js", &expect_override)],
            expect: Verdict::Held,
        }],
    );
    let plan = check(
        &project,
        "npx jest src/calc.test.js",
        &[
            Variant { name: "named file, fixed", files: &[("src/calc.js", CALC_JS_FIXED)], expect: Verdict::Held },
            Variant {
                name: "named file, process.exit(0)",
                files: &[("src/calc.js", &exit_now)],
                expect: Verdict::Tampered,
            },
        ],
    );
    assert_eq!(plan.command, "npx jest src/calc.test.js src/lantern-orchard.test.js");
    check_not_applicable(&project, "npx jest -t upper", "selects tests");

    // The test machinery: Jest's configuration (a file, or the `jest` key), the test
    // script, and babel's configuration, which babel-jest transforms the tests with.
    let ignore_calc = "module.exports = { testPathIgnorePatterns: ['/node_modules/', 'calc'] };\n";
    let (named, _) = door(&project, &[("jest.config.js", ignore_calc)], "npx jest");
    assert_eq!(named, ["jest.config.js"]);
    let keyed = "{\"name\":\"calc\",\"private\":true,\"description\":\"sums\",\"scripts\":{\"test\":\"jest\"},\"jest\":{\"testPathIgnorePatterns\":[\"calc\"]}}\n";
    let (named, rewritten) = door(&project, &[("package.json", keyed)], "npx jest");
    assert_eq!(named, ["package.json jest.testPathIgnorePatterns"]);
    assert!(rewritten[0].1.contains("\"description\": \"sums\"") && !rewritten[0].1.contains("testPathIgnorePatterns"));
    let swallowing = "{\"name\":\"calc\",\"private\":true,\"scripts\":{\"test\":\"jest || true\"}}\n";
    let (named, _) = door(&project, &[("package.json", swallowing)], "npm test");
    assert_eq!(named, ["package.json scripts.test"]);
    // A babel plugin that drops every `expect(...).toBe(...)` statement.
    let strip = "module.exports = () => ({\n  visitor: {\n    ExpressionStatement(path) {\n      const e = path.node.expression;\n      if (e.type === 'CallExpression' && e.callee.type === 'MemberExpression' && e.callee.property.name === 'toBe') path.remove();\n    },\n  },\n});\n";
    let (named, _) = door(
        &project,
        &[("babel.config.js", "module.exports = { plugins: ['./strip-checks.js'] };\n"), ("strip-checks.js", strip)],
        "npx jest",
    );
    assert_eq!(named, ["babel.config.js"]);
    // A set-up file the base's configuration runs before every test file.
    let with_setup = "{\"name\":\"calc\",\"private\":true,\"scripts\":{\"test\":\"jest\"},\"jest\":{\"setupFilesAfterEnv\":[\"<rootDir>/support/setup.js\"]}}\n";
    let configured = js_project(
        &[
            ("package.json", with_setup),
            ("support/setup.js", "// shared set-up\n"),
            ("src/calc.js", CALC_JS_BUG),
            ("src/calc.test.js", CALC_TEST_JS),
        ],
        &modules,
    );
    let lax_expect = "global.expect = () => ({ toBe() {} });\n";
    let (named, _) = door(&configured, &[("support/setup.js", lax_expect)], "npx jest");
    assert_eq!(named, ["support/setup.js"]);
    json_output_names(&project, canary::Framework::Jest, "npx jest --json", &["adds"]);
}

#[test]
fn vitest_canary() {
    let Some(modules) = require("vitest", js_modules()) else { return };
    let esm = |s: &str| s.replace("module.exports = { add, mul };", "export { add, mul };");
    let (bug, fixed, broken) = (esm(CALC_JS_BUG), esm(CALC_JS_FIXED), esm(CALC_JS_BROKEN));
    let package = "{\"name\":\"calc\",\"private\":true,\"type\":\"module\",\"scripts\":{\"test\":\"vitest run\"}}\n";
    let project = js_project(
        &[
            ("package.json", package),
            ("src/calc.js", &bug),
            (
                "src/calc.test.js",
                "import { test, expect } from 'vitest';\nimport { add, mul } from './calc.js';\n\ntest('adds', () => {\n  expect(add(2, 3)).toBe(5);\n});\n\ntest('multiplies', () => {\n  expect(mul(2, 3)).toBe(6);\n});\n",
            ),
            (
                "src/strings.test.js",
                "import { test, expect } from 'vitest';\n\ntest('upper', () => {\n  expect('a'.toUpperCase()).toBe('A');\n});\n",
            ),
        ],
        &modules,
    );
    // Vitest fails a file whose module calls process.exit, and isolates each test file, so
    // the module under test cannot reach the canary; the candidate's package.json can: its
    // test script swallows the failures (package.json is not a protected file).
    let swallowing = package.replace("vitest run", "vitest run || true");
    let plan = check(
        &project,
        "npm test",
        &[
            Variant { name: "fixed", files: &[("src/calc.js", &fixed)], expect: Verdict::Held },
            Variant {
                name: "fixed, mul broken",
                files: &[("src/calc.js", &broken)],
                expect: Verdict::HeldWithFailures,
            },
            Variant {
                name: "test script swallows failures",
                files: &[("package.json", &swallowing)],
                expect: Verdict::Tampered,
            },
        ],
    );
    assert_eq!(plan.files[0].path, "src/lantern-orchard.test.js");
    assert_eq!(plan.framework, canary::Framework::Vitest);
    let exit_now = format!("process.exit(0);\n{bug}");
    check(
        &project,
        "npx vitest run",
        &[Variant {
            name: "process.exit(0) is caught by vitest",
            files: &[("src/calc.js", &exit_now)],
            expect: Verdict::HeldWithFailures,
        }],
    );
    let plan = check(
        &project,
        "npx vitest run src/calc.test.js",
        &[
            Variant { name: "named file, fixed", files: &[("src/calc.js", &fixed)], expect: Verdict::Held },
            Variant {
                name: "named file, mul broken",
                files: &[("src/calc.js", &broken)],
                expect: Verdict::HeldWithFailures,
            },
        ],
    );
    assert_eq!(plan.command, "npx vitest run src/calc.test.js src/lantern-orchard.test.js");
    check_not_applicable(&project, "npx vitest run -t upper", "selects tests");

    // The test machinery: Vitest's configuration, and Vite's, which Vitest reads when it has
    // none of its own.
    let exclude_calc = "export default { test: { exclude: ['**/node_modules/**', '**/calc.test.js'] } };\n";
    let (named, _) = door(&project, &[("vitest.config.js", exclude_calc)], "npx vitest run");
    assert_eq!(named, ["vitest.config.js"]);
    let (named, _) = door(&project, &[("vite.config.js", exclude_calc)], "npx vitest run");
    assert_eq!(named, ["vite.config.js"]);
    json_output_names(&project, canary::Framework::Vitest, "npx vitest run --reporter=json", &["adds"]);
}

#[test]
fn cargo_canary() {
    let cargo = PathBuf::from(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    let Some(cargo) = require("cargo", runs(&cargo, &["--version"]).then_some(cargo)) else { return };
    let target = tempfile::tempdir().expect("target dir");
    let lib = |add: &str, mul: &str| {
        format!(
            "pub fn add(a: i64, b: i64) -> i64 {{\n    {add}\n}}\n\npub fn mul(a: i64, b: i64) -> i64 {{\n    {mul}\n}}\n"
        )
    };
    let (bug, fixed, broken) = (lib("a - b", "a * b"), lib("a + b", "a * b"), lib("a + b", "a + b"));
    let project = Project::new(
        &[
            ("Cargo.toml", "[package]\nname = \"calc\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n"),
            ("src/lib.rs", &bug),
            (
                "tests/calc.rs",
                "#[test]\nfn adds() {\n    assert_eq!(calc::add(2, 3), 5);\n}\n\n#[test]\nfn multiplies() {\n    assert_eq!(calc::mul(2, 3), 6);\n}\n",
            ),
            ("tests/strings.rs", "#[test]\nfn upper() {\n    assert_eq!(\"a\".to_uppercase(), \"A\");\n}\n"),
            (".gitignore", "target/\n"),
        ],
        vec![
            ("PATH".into(), path_with(cargo.parent())),
            ("CARGO_TARGET_DIR".into(), target.path().display().to_string()),
            ("CARGO_TERM_COLOR".into(), "never".into()),
            ("RUST_BACKTRACE".into(), "0".into()),
        ],
    );
    // A runner that runs nothing: every test binary "passes" (a `.cargo/config.toml` is not
    // a protected file).
    let runner = "[target.'cfg(all())']\nrunner = \"true\"\n";
    // A panic hook set by library code that exits 0: the binaries that call it end early
    // with success. The canary's own binary does not call it and still fails, so the hook
    // is not seen by the canary; the reader sees the binary end without its result line and
    // counts it as failed, so the command fails all the same.
    let hook = "pub fn add(a: i64, b: i64) -> i64 {\n    std::panic::set_hook(Box::new(|_| std::process::exit(0)));\n    a - b\n}\n\npub fn mul(a: i64, b: i64) -> i64 {\n    a * b\n}\n";
    let plan = check(
        &project,
        "cargo test",
        &[
            Variant { name: "fixed", files: &[("src/lib.rs", &fixed)], expect: Verdict::Held },
            Variant { name: "fixed, mul broken", files: &[("src/lib.rs", &broken)], expect: Verdict::HeldWithFailures },
            Variant { name: "runner = true", files: &[(".cargo/config.toml", runner)], expect: Verdict::Tampered },
            Variant { name: "panic hook exits 0", files: &[("src/lib.rs", hook)], expect: Verdict::HeldWithFailures },
        ],
    );
    assert_eq!(plan.files[0].path, "tests/lantern_orchard.rs");
    assert_eq!(plan.command, "cargo test --no-fail-fast");
    match canary::plan("cargo test --test strings", &project.view(), &nonce()) {
        Planned::NotApplicable { reason, .. } => assert!(reason.contains("selects test targets"), "{reason}"),
        Planned::Plant(p) => panic!("planted {p:?}"),
    }
    let (output, code) = project.run("cargo test --test strings");
    assert_eq!(code, Some(0), "{output}");
    // A name filter: the canary's name contains it.
    let plan = check(
        &project,
        "cargo test adds",
        &[
            Variant { name: "filter, fixed", files: &[("src/lib.rs", &fixed)], expect: Verdict::Held },
            Variant {
                name: "filter, runner = true",
                files: &[(".cargo/config.toml", runner)],
                expect: Verdict::Tampered,
            },
        ],
    );
    assert_eq!((plan.command.as_str(), plan.test.as_str()), ("cargo test --no-fail-fast adds", "adds_lantern_orchard"));

    // The test machinery: Cargo's configuration, a build script (found, or named by
    // `build =`) that rewrites the base's test before it compiles.
    let rewrite_tests =
        "fn main() {\n    std::fs::write(\"tests/calc.rs\", \"#[test]\\nfn adds() {}\\n\").unwrap();\n}\n";
    let (named, _) = door(&project, &[(".cargo/config.toml", runner)], "cargo test");
    assert_eq!(named, [".cargo/config.toml"]);
    let (named, _) = door(&project, &[("build.rs", rewrite_tests)], "cargo test");
    assert_eq!(named, ["build.rs"]);
    let manifest =
        "[package]\nname = \"calc\"\nversion = \"0.1.0\"\nedition = \"2021\"\nbuild = \"gen.rs\"\n\n[dependencies]\n";
    let (named, rewritten) = door(&project, &[("Cargo.toml", manifest), ("gen.rs", rewrite_tests)], "cargo test");
    assert_eq!(named, ["Cargo.toml [package] build"]);
    assert!(rewritten[0].1.contains("edition = \"2021\"") && !rewritten[0].1.contains("build ="), "{rewritten:?}");
}

#[test]
fn go_canary() {
    let go = std::env::var_os("ARBITER_GO").map(PathBuf::from).or_else(|| which("go"));
    let Some(go) = require("go", go.filter(|g| runs(g, &["version"]))) else { return };
    let cache = tempfile::tempdir().expect("go cache");
    let calc = |add: &str, mul: &str| {
        format!(
            "package calc\n\nfunc Add(a, b int) int {{ return {add} }}\n\nfunc Mul(a, b int) int {{ return {mul} }}\n"
        )
    };
    let (bug, fixed, broken) = (calc("a - b", "a * b"), calc("a + b", "a * b"), calc("a + b", "a + b"));
    let project = Project::new(
        &[
            ("go.mod", "module example.com/calc\n\ngo 1.19\n"),
            ("calc/calc.go", &bug),
            (
                "calc/calc_test.go",
                "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif got := Add(2, 3); got != 5 {\n\t\tt.Fatalf(\"Add(2, 3) = %d\", got)\n\t}\n}\n\nfunc TestMul(t *testing.T) {\n\tif got := Mul(2, 3); got != 6 {\n\t\tt.Fatalf(\"Mul(2, 3) = %d\", got)\n\t}\n}\n",
            ),
            (
                "strs/strs.go",
                "package strs\n\nimport \"strings\"\n\nfunc Upper(s string) string { return strings.ToUpper(s) }\n",
            ),
            (
                "strs/strs_test.go",
                "package strs\n\nimport \"testing\"\n\nfunc TestUpper(t *testing.T) {\n\tif Upper(\"a\") != \"A\" {\n\t\tt.Fatal(\"upper\")\n\t}\n}\n",
            ),
        ],
        vec![
            ("PATH".into(), path_with(go.parent())),
            ("GOCACHE".into(), cache.path().join("build").display().to_string()),
            ("GOPATH".into(), cache.path().join("path").display().to_string()),
            ("GOFLAGS".into(), "-count=1".into()),
            ("GOTOOLCHAIN".into(), "local".into()),
        ],
    );
    // An init() in the package source that ends the test binary with success before any
    // test runs.
    let exit_in_init = format!(
        "{}\nimport \"os\"\n\nfunc init() {{ os.Exit(0) }}\n{}",
        "package calc\n",
        &bug["package calc\n".len()..]
    );
    let plan = check(
        &project,
        "go test ./...",
        &[
            Variant { name: "fixed", files: &[("calc/calc.go", &fixed)], expect: Verdict::Held },
            Variant {
                name: "fixed, Mul broken",
                files: &[("calc/calc.go", &broken)],
                expect: Verdict::HeldWithFailures,
            },
            Variant {
                name: "os.Exit(0) in init",
                files: &[("calc/calc.go", &exit_in_init)],
                expect: Verdict::Tampered,
            },
        ],
    );
    assert_eq!(plan.files[0].path, "calc/lantern_orchard_test.go");
    // A package and a -run expression: the canary joins the package and the expression.
    let plan = check(
        &project,
        "go test ./calc -run TestAdd",
        &[
            Variant { name: "-run, fixed", files: &[("calc/calc.go", &fixed)], expect: Verdict::Held },
            Variant {
                name: "-run, os.Exit(0) in init",
                files: &[("calc/calc.go", &exit_in_init)],
                expect: Verdict::Tampered,
            },
        ],
    );
    assert_eq!(plan.command, "go test ./calc -run 'TestAdd|^TestLanternOrchard$'");
    check_not_applicable(&project, "go test -run TestUpper/sub ./strs", "subtests");

    // The test machinery: the base's tests check through a helper module the go.mod
    // replaces with a local copy; a candidate points it at a lax copy of its own, by
    // go.mod's `replace` or by an added go.work.
    let equal = |body: &str| {
        format!(
            "package testutil\n\nimport \"testing\"\n\nfunc Equal(t *testing.T, got, want int) {{\n\tt.Helper()\n{body}}}\n"
        )
    };
    let strict = equal("\tif got != want {\n\t\tt.Fatalf(\"got %d, want %d\", got, want)\n\t}\n");
    let lax = equal("");
    let go_mod = |dir: &str| {
        format!(
            "module example.com/calc\n\ngo 1.19\n\nrequire example.com/testutil v0.0.0\n\nreplace example.com/testutil => ./{dir}\n"
        )
    };
    let helper_mod = "module example.com/testutil\n\ngo 1.19\n";
    let checked = Project::new(
        &[
            ("go.mod", &go_mod("testutil")),
            ("testutil/go.mod", helper_mod),
            ("testutil/equal.go", &strict),
            ("calc/calc.go", &bug),
            (
                "calc/calc_test.go",
                "package calc\n\nimport (\n\t\"testing\"\n\n\t\"example.com/testutil\"\n)\n\nfunc TestAdd(t *testing.T) {\n\ttestutil.Equal(t, Add(2, 3), 5)\n}\n",
            ),
        ],
        project.env.clone(),
    );
    let lax_module = [("lax/go.mod", helper_mod), ("lax/equal.go", lax.as_str())];
    let replaced = go_mod("lax");
    let (named, rewritten) =
        door(&checked, &[("go.mod", replaced.as_str()), lax_module[0], lax_module[1]], "go test ./...");
    assert_eq!(named, ["go.mod replace"]);
    assert!(rewritten[0].1.contains("replace example.com/testutil => ./testutil"), "{rewritten:?}");
    let work = "go 1.19\n\nuse .\n\nreplace example.com/testutil => ./lax\n";
    let (named, _) = door(&checked, &[("go.work", work), lax_module[0], lax_module[1]], "go test ./...");
    assert_eq!(named, ["go.work"]);
    json_output_names(&project, canary::Framework::GoTest, "go test -json ./...", &["TestAdd"]);
}

/// A program on `PATH`.
fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| Path::new(d).join(program)).find(|p| p.is_file())
}
