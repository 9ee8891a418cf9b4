//! Planning on small repositories and reading outputs captured from the real tools
//! (`tests/fixtures/canary/`, produced with a canary named `walrus harbor` asserting
//! 4817 == 9203: unittest 3.11, pytest 9.2, Jest 30.5, Vitest 4.1, cargo 1.95, Go 1.19).

use super::*;

fn nonce() -> Nonce {
    Nonce { words: ["walrus".into(), "harbor".into()], numbers: [4817, 9203] }
}

fn planned(command: &str, repo: &StaticRepo) -> CanaryPlan {
    match plan(command, repo, &nonce()) {
        Planned::Plant(p) => p,
        Planned::NotApplicable { reason, .. } => panic!("{command}: not applicable: {reason}"),
    }
}

fn refused(command: &str, repo: &StaticRepo) -> String {
    match plan(command, repo, &nonce()) {
        Planned::Plant(p) => panic!("{command}: planted {:?}", p.files),
        Planned::NotApplicable { reason, .. } => reason,
    }
}

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/canary/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn python_repo() -> StaticRepo {
    StaticRepo::with(&[("calc.py", ""), ("test_calc.py", ""), ("tests/test_more.py", "")])
}

#[test]
fn nonces_are_deterministic_and_ordinary() {
    let a = Nonce::from_seed(0x1234_5678_9abc_def0);
    assert_eq!(a, Nonce::from_seed(0x1234_5678_9abc_def0));
    for seed in [0u64, 1, 255, u64::MAX, 0xdead_beef] {
        let n = Nonce::from_seed(seed);
        assert!(n.valid(), "{n:?}");
        assert!(n.words.iter().all(|w| !w.contains("canary") && !w.contains("arbiter")));
    }
}

#[test]
fn recognises_single_test_runner_invocations() {
    let repo = StaticRepo::with(&[("package.json", r#"{"scripts":{"test":"jest --ci"}}"#)]);
    let fw = |c: &str| match recognise(c, &repo) {
        Recognition::Recognised(i) => Some(i.framework),
        Recognition::NotApplicable { .. } => None,
    };
    assert_eq!(fw("python3 -m unittest -v"), Some(Framework::Unittest));
    assert_eq!(fw("/usr/bin/python3.11 -B -m pytest -q"), Some(Framework::Pytest));
    assert_eq!(fw("CI=1 PYTHONPATH=$PWD py.test"), Some(Framework::Pytest));
    assert_eq!(fw(".venv/bin/pytest"), Some(Framework::Pytest));
    assert_eq!(fw("npx jest"), Some(Framework::Jest));
    assert_eq!(fw("npx vitest run"), Some(Framework::Vitest));
    assert_eq!(fw("npm test"), Some(Framework::Jest));
    assert_eq!(fw("yarn test --verbose"), Some(Framework::Jest));
    assert_eq!(fw("npm run test -- --verbose"), Some(Framework::Jest));
    assert_eq!(fw("cargo +stable test --workspace"), Some(Framework::CargoTest));
    assert_eq!(fw("go test ./..."), Some(Framework::GoTest));
    for c in [
        "python3 -m unittest && flake8",
        "pytest; true",
        "cargo nextest run",
        "make test",
        "python3 test_calc.py",
        "npm run lint",
        "npm test --silent",
        "cargo build",
        "pytest $EXTRA",
    ] {
        assert_eq!(fw(c), None, "{c}");
    }
    let shell_script = StaticRepo::with(&[("package.json", r#"{"scripts":{"test":"jest && eslint ."}}"#)]);
    assert!(matches!(recognise("npm test", &shell_script), Recognition::NotApplicable { .. }));
}

#[test]
fn unittest_canary_goes_where_discovery_looks() {
    let repo = python_repo();
    let p = planned("python3 -m unittest", &repo);
    assert_eq!(p.files[0].path, "test_walrus_harbor.py");
    assert!(p.files[0].content.contains("self.assertEqual(4817, 9203)"));
    assert_eq!((p.test.as_str(), p.class.as_deref()), ("test_walrus_harbor", Some("WalrusHarborTest")));
    assert_eq!(p.command, "python3 -m unittest");
    let p = planned("python -m unittest discover -s tests -p '*_check.py' -v", &repo);
    assert_eq!(p.files[0].path, "tests/walrus_harbor_check.py");
    let p = planned("python -m unittest discover tests", &repo);
    assert_eq!(p.files[0].path, "tests/test_walrus_harbor.py");
    // Named tests: the canary is one more module named on the command line, loaded in the same
    // process; a -k filter gets the canary's name as one more pattern.
    let p = planned("python3 -m unittest -q test_calc", &repo);
    assert_eq!(p.files[0].path, "test_walrus_harbor.py");
    assert_eq!(p.command, "python3 -m unittest -q test_calc test_walrus_harbor");
    let p = planned("python3 -m unittest tests.test_more.MoreTest -k add", &repo);
    assert_eq!(
        p.command,
        "python3 -m unittest tests.test_more.MoreTest test_walrus_harbor -k add -k test_walrus_harbor"
    );
    assert_eq!(
        planned("python3 -m unittest -k add", &repo).command,
        "python3 -m unittest -k add -k test_walrus_harbor"
    );
    assert!(refused("python3 -m unittest -f", &repo).contains("first failure"));
    assert!(refused("python3 -m unittest discover -s nowhere", &repo).contains("no tracked files"));
}

#[test]
fn pytest_canary_sits_beside_a_collected_test() {
    let repo = StaticRepo::with(&[
        ("calc.py", ""),
        ("tests/unit/test_calc.py", ""),
        ("tests/test_z.py", ""),
        ("build/test_generated.py", ""),
    ]);
    let p = planned("pytest -q", &repo);
    assert_eq!(p.files[0].path, "tests/test_walrus_harbor.py");
    assert_eq!(p.files[0].content, "def test_walrus_harbor():\n    assert 4817 == 9203\n");
    assert_eq!(planned("python -m pytest tests/unit -v", &repo).files[0].path, "tests/unit/test_walrus_harbor.py");
    for (cmd, why) in [
        ("pytest -x", "first failure"),
        ("pytest -vx", "first failure"),
        ("pytest --maxfail=2", "first failure"),
        ("pytest -m slow", "selects tests"),
        ("pytest -qk add", "-k on its own"),
    ] {
        assert!(refused(cmd, &repo).contains(why), "{cmd}");
    }
    // Named files and node ids: the canary is one more file named beside the first; a -k
    // expression is widened to select it too.
    let p = planned("pytest tests/test_z.py::test_a tests/unit -q", &repo);
    assert_eq!(p.files[0].path, "tests/test_walrus_harbor.py");
    assert_eq!(p.command, "pytest tests/test_z.py::test_a tests/unit tests/test_walrus_harbor.py -q");
    let p = planned("python3 -m pytest -q -k 'add and not slow' tests", &repo);
    assert_eq!(p.command, "python3 -m pytest -q -k '(add and not slow) or test_walrus_harbor' tests");
    assert_eq!(planned("pytest -kadd", &repo).command, "pytest '-k(add) or test_walrus_harbor'");
    let filtered = StaticRepo::with(&[
        (
            "pytest.ini",
            "[pytest]
addopts = -k add
",
        ),
        ("test_a.py", ""),
    ]);
    assert!(refused("pytest", &filtered).contains("addopts"));
    // The configuration decides which files are tests, and where.
    let configured = StaticRepo::with(&[
        ("pyproject.toml", "[tool.pytest.ini_options]\npython_files = [\"check_*.py\"]\ntestpaths = [\"checks\"]\n"),
        ("checks/check_calc.py", ""),
        ("tests/test_other.py", ""),
    ]);
    assert_eq!(planned("pytest", &configured).files[0].path, "checks/check_walrus_harbor.py");
    let failfast = StaticRepo::with(&[("pytest.ini", "[pytest]\naddopts = -x -q\n"), ("test_a.py", "")]);
    assert!(refused("pytest", &failfast).contains("addopts"));
}

#[test]
fn js_canaries_follow_the_existing_test_files() {
    let repo = StaticRepo::with(&[
        ("package.json", r#"{"scripts":{"test":"vitest run"}}"#),
        ("src/calc.ts", ""),
        ("src/calc.spec.ts", ""),
        ("node_modules/x/a.test.js", ""),
    ]);
    let p = planned("npm test", &repo);
    assert_eq!(p.framework, Framework::Vitest);
    assert_eq!(p.files[0].path, "src/walrus-harbor.spec.ts");
    assert!(p.files[0].content.starts_with("import { test, expect } from 'vitest';"));
    assert_eq!(p.test, "walrus harbor");
    let jest = StaticRepo::with(&[("lib/__tests__/calc.js", ""), ("lib/calc.js", "")]);
    let p = planned("npx jest --ci", &jest);
    assert_eq!(p.files[0].path, "lib/__tests__/walrus-harbor.js");
    assert!(!p.files[0].content.contains("import") && !p.files[0].content.contains("require"));
    assert!(p.files[0].content.contains("expect(4817).toBe(9203)"));
    assert!(refused("npx jest --bail", &jest).contains("first failure"));
    // Named tests (path patterns): the canary's path is named too, beside the first named file.
    let p = planned("npx jest calc", &jest);
    assert_eq!(
        (p.files[0].path.as_str(), p.command.as_str()),
        ("lib/__tests__/walrus-harbor.js", "npx jest calc lib/__tests__/walrus-harbor.js")
    );
    let p = planned("npx vitest run src/calc.spec.ts", &repo);
    assert_eq!(p.command, "npx vitest run src/calc.spec.ts src/walrus-harbor.spec.ts");
    assert!(refused("npm test -- src/calc.spec.ts", &repo).contains("package manager"));
    assert!(refused("vitest watch", &repo).contains("once"));
}

#[test]
fn cargo_canary_is_an_integration_test_and_the_run_does_not_fail_fast() {
    let repo = StaticRepo::with(&[
        ("Cargo.toml", "[workspace]\nmembers = [\"crates/*\"]\n"),
        ("crates/core/Cargo.toml", "[package]\nname = \"calc-core\"\n"),
        ("crates/core/src/lib.rs", ""),
        ("crates/app/Cargo.toml", "[package]\nname = \"app\"\nautotests = false\n"),
        ("crates/app/src/main.rs", ""),
    ]);
    let p = planned("cargo test --workspace -- --nocapture", &repo);
    assert_eq!(p.files[0].path, "crates/core/tests/walrus_harbor.rs");
    assert!(p.files[0].content.contains("assert_eq!(4817, 9203);"));
    assert_eq!(p.command, "cargo test --no-fail-fast --workspace -- --nocapture");
    assert_eq!(planned("cargo test -p calc-core", &repo).files[0].path, "crates/core/tests/walrus_harbor.rs");
    assert_eq!(planned("cargo test --no-fail-fast", &repo).command, "cargo test --no-fail-fast");
    assert!(refused("cargo test -p app", &repo).contains("integration tests"));
    // A name filter: the canary's path contains it.
    let p = planned("cargo test adds", &repo);
    assert_eq!((p.command.as_str(), p.test.as_str()), ("cargo test --no-fail-fast adds", "adds_walrus_harbor"));
    assert!(p.files[0].content.starts_with("#[test]\nfn adds_walrus_harbor() {"), "{}", p.files[0].content);
    let p = planned("cargo test -p calc-core -- calc::ad", &repo);
    assert_eq!(p.test, "calc::ad_walrus_harbor");
    assert!(
        p.files[0].content.starts_with("mod calc {\n    #[test]\n    fn ad_walrus_harbor() {"),
        "{}",
        p.files[0].content
    );
    assert!(refused("cargo test adds -- --exact", &repo).contains("exactly"));
    assert!(refused("cargo test fn::x", &repo).contains("no module can be named"));
    assert!(refused("cargo test --lib", &repo).contains("selects test targets"));
}

#[test]
fn go_canary_joins_a_tested_package() {
    let repo = StaticRepo::with(&[
        ("go.mod", "module example.com/calc\n\ngo 1.19\n"),
        ("calc/calc.go", "package calc\n"),
        ("calc/calc_test.go", "// tests\npackage calc_test\n"),
        ("util/util_test.go", "package util\n"),
        ("testdata/x_test.go", "package x\n"),
    ]);
    let p = planned("go test ./...", &repo);
    assert_eq!(p.files[0].path, "calc/walrus_harbor_test.go");
    assert!(p.files[0].content.starts_with("package calc_test\n"));
    assert_eq!(p.test, "TestWalrusHarbor");
    assert_eq!(planned("go test -v ./util", &repo).files[0].path, "util/walrus_harbor_test.go");
    assert_eq!(planned("go test example.com/calc/util", &repo).files[0].path, "util/walrus_harbor_test.go");
    assert!(refused("go test .", &repo).contains("_test.go"));
    assert!(refused("go test -failfast ./...", &repo).contains("first failure"));
    // A -run expression gets the canary's name as one more alternative.
    let p = planned("go test -run TestAdd ./...", &repo);
    assert_eq!(p.command, "go test -run 'TestAdd|^TestWalrusHarbor$' ./...");
    assert_eq!(
        planned("go test -run=TestAdd ./util", &repo).command,
        "go test '-run=TestAdd|^TestWalrusHarbor$' ./util"
    );
    assert!(refused("go test -run TestAdd/sub ./...", &repo).contains("subtests"));
}

fn plan_for(framework: Framework) -> CanaryPlan {
    let (path, test, class) = match framework {
        Framework::Unittest => ("test_walrus_harbor.py", "test_walrus_harbor", Some("WalrusHarborTest".to_string())),
        Framework::Pytest => ("tests/test_walrus_harbor.py", "test_walrus_harbor", None),
        Framework::Jest => ("walrus-harbor.test.js", "walrus harbor", None),
        Framework::Vitest => ("src/walrus-harbor.test.js", "walrus harbor", None),
        Framework::CargoTest => ("tests/walrus_harbor.rs", "walrus_harbor", None),
        Framework::GoTest => ("calc/walrus_harbor_test.go", "TestWalrusHarbor", None),
    };
    CanaryPlan {
        framework,
        command: String::new(),
        files: vec![CanaryFile { path: path.into(), content: String::new() }],
        test: test.into(),
        class,
    }
}

/// Reads a fixture and returns what was seen and counted.
fn seen(framework: Framework, name: &str, code: i32) -> (CanarySeen, Option<u32>) {
    let r = read(framework, &plan_for(framework), &fixture(name), Some(code));
    assert_eq!(r.exit_code, Some(code));
    (r.canary, r.other_failures)
}

#[test]
fn reads_unittest_output() {
    use CanarySeen::*;
    let f = Framework::Unittest;
    assert_eq!(seen(f, "unittest_honest.txt", 1), (Failed, Some(0)));
    assert_eq!(seen(f, "unittest_honest_v.txt", 1), (Failed, Some(0)));
    assert_eq!(seen(f, "unittest_broken_v.txt", 1), (Failed, Some(2)));
    assert_eq!(seen(f, "unittest_tampered.txt", 0), (NotSeen, Some(0)));
    assert_eq!(seen(f, "unittest_tampered_v.txt", 0), (Passed, Some(0)));
    assert_eq!(seen(f, "unittest_import_error.txt", 1), (Failed, Some(1)));
}

#[test]
fn reads_pytest_output() {
    use CanarySeen::*;
    let f = Framework::Pytest;
    assert_eq!(seen(f, "pytest_honest.txt", 1), (Failed, Some(0)));
    assert_eq!(seen(f, "pytest_honest_q.txt", 1), (Failed, Some(0)));
    assert_eq!(seen(f, "pytest_honest_v.txt", 1), (Failed, Some(0)));
    assert_eq!(seen(f, "pytest_broken.txt", 1), (Failed, Some(2)));
    assert_eq!(seen(f, "pytest_broken_q.txt", 1), (Failed, Some(2)));
    // atexit + os._exit(0): the output is honest, the exit code is not.
    assert_eq!(seen(f, "pytest_atexit_q.txt", 0), (Failed, Some(2)));
    assert_eq!(seen(f, "pytest_report_patch.txt", 0), (NotSeen, Some(0)));
    assert_eq!(seen(f, "pytest_report_patch_v.txt", 0), (Passed, Some(0)));
    assert_eq!(seen(f, "pytest_collect_error.txt", 2), (NotSeen, Some(1)));
}

#[test]
fn reads_jest_and_vitest_output() {
    use CanarySeen::*;
    let j = Framework::Jest;
    assert_eq!(seen(j, "jest_honest.txt", 1), (Failed, Some(0)));
    assert_eq!(seen(j, "jest_honest_verbose.txt", 1), (Failed, Some(0)));
    assert_eq!(seen(j, "jest_honest_npm.txt", 1), (Failed, Some(0)));
    assert_eq!(seen(j, "jest_broken.txt", 1), (Failed, Some(2)));
    assert_eq!(seen(j, "jest_process_exit0.txt", 0), (NotSeen, None));
    let v = Framework::Vitest;
    assert_eq!(seen(v, "vitest_honest.txt", 1), (Failed, Some(0)));
    assert_eq!(seen(v, "vitest_honest_nocolor.txt", 1), (Failed, Some(0)));
    assert_eq!(seen(v, "vitest_broken.txt", 1), (Failed, Some(2)));
    // process.exit(0) in the module under test: vitest itself fails that file.
    assert_eq!(seen(v, "vitest_process_exit0.txt", 1), (Failed, Some(1)));
}

#[test]
fn reads_cargo_output() {
    use CanarySeen::*;
    let f = Framework::CargoTest;
    assert_eq!(seen(f, "cargo_honest.txt", 101), (Failed, Some(0)));
    // lib 1, tests/calc.rs 2, tests/zeta.rs 1, the doc test 1.
    assert_eq!(seen(f, "cargo_broken_q.txt", 101), (Failed, Some(5)));
    assert_eq!(seen(f, "cargo_runner_true.txt", 0), (NotSeen, Some(0)));
    // A panic hook that exits 0 cuts `tests/calc.rs` short: no result line, counted.
    let r = read(f, &plan_for(f), &fixture("cargo_panic_hook.txt"), Some(101));
    assert_eq!((r.canary, r.other_failures), (Failed, Some(2)));
    assert!(r.notes.iter().any(|n| n.contains("tests/calc.rs")), "{:?}", r.notes);
}

#[test]
fn reads_go_output() {
    use CanarySeen::*;
    let f = Framework::GoTest;
    assert_eq!(seen(f, "go_honest.txt", 1), (Failed, Some(0)));
    assert_eq!(seen(f, "go_honest_v.txt", 1), (Failed, Some(0)));
    assert_eq!(seen(f, "go_broken.txt", 1), (Failed, Some(2)));
    assert_eq!(seen(f, "go_init_exit0.txt", 0), (NotSeen, Some(0)));
    assert_eq!(seen(f, "go_build_failed.txt", 2), (NotSeen, Some(1)));
}

#[test]
fn a_longer_title_is_not_the_canary() {
    let out = "  ✓ walrus harbors (3 ms)\n  ✓ walrus harbor_x 2ms\nTests:       3 passed, 3 total\n";
    let r = read(Framework::Jest, &plan_for(Framework::Jest), out, Some(0));
    assert_eq!(r.canary, CanarySeen::NotSeen);
    let out = "  ✓ walrus harbor (3 ms)\nTests:       3 passed, 3 total\n";
    assert_eq!(read(Framework::Jest, &plan_for(Framework::Jest), out, Some(0)).canary, CanarySeen::Passed);
}

#[test]
fn verdicts_follow_the_calibration() {
    let r = |canary, other, code| Reading { canary, other_failures: other, exit_code: code, notes: Vec::new() };
    use CanarySeen::*;
    assert_eq!(verdict(&r(Failed, Some(0), Some(1)), true), Verdict::Held);
    assert_eq!(verdict(&r(Failed, Some(2), Some(1)), true), Verdict::HeldWithFailures);
    assert_eq!(verdict(&r(Failed, None, Some(1)), true), Verdict::HeldWithFailures);
    assert_eq!(verdict(&r(Failed, Some(0), None), true), Verdict::HeldWithFailures);
    assert_eq!(verdict(&r(Failed, Some(0), Some(0)), true), Verdict::Tampered);
    assert_eq!(verdict(&r(Passed, Some(0), Some(1)), true), Verdict::Tampered);
    assert_eq!(verdict(&r(NotSeen, Some(0), Some(0)), true), Verdict::Tampered);
    assert_eq!(verdict(&r(NotSeen, Some(0), Some(1)), true), Verdict::Tampered);
    assert_eq!(verdict(&r(NotSeen, Some(1), Some(2)), true), Verdict::CanaryNotRun);
    assert_eq!(verdict(&r(NotSeen, None, Some(101)), true), Verdict::CanaryNotRun);
    assert_eq!(verdict(&r(NotSeen, Some(0), Some(0)), false), Verdict::NotApplicable);
    assert!(calibrated(&r(Failed, Some(3), Some(1))));
    assert!(!calibrated(&r(Failed, None, Some(1))));
    assert!(!calibrated(&r(NotSeen, Some(0), Some(0))));
    assert_eq!(Verdict::Held.command_passed(), Some(true));
    assert_eq!(Verdict::NotApplicable.command_passed(), None);
    let json = serde_json::to_string(&Verdict::HeldWithFailures).unwrap_or_default();
    assert_eq!(json, "\"held_with_failures\"");
}

#[test]
fn reading_is_linear_in_large_outputs() {
    // 200k passing lines and the canary's failure at the end: one pass, no quadratic work.
    let mut out = String::new();
    for i in 0..200_000 {
        out.push_str(&format!("test t{i} ... ok\n"));
    }
    out.push_str(&fixture("cargo_honest.txt"));
    let r = read(Framework::CargoTest, &plan_for(Framework::CargoTest), &out, Some(101));
    assert_eq!((r.canary, r.other_failures), (CanarySeen::Failed, Some(0)));
}
