//! Text from a candidate reaches no terminal raw: file names chosen to drive a terminal (an
//! OSC title, a screen clear, a carriage return, a right-to-left override) quoted in a
//! rejection reason and in a protected-file warning are shown escaped on every surface a
//! person reads — the run's stdout and stderr, `runs show`, `final_report.md`, the viewer —
//! while the run's JSON keeps them as the data they are.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use common::*;

/// The honest fix, then per candidate one hostile name: a link out of the repository named
/// to drive the terminal (rejected, its name quoted), or a `conftest.py` in a directory so
/// named (a protected file: a warning quotes it).
const AGENT: &str = r#"set -e
sed -i 's/return a - b/return a + b/' calc.py
evil=$(printf 'x\033]0;pwned\007\033[2J\r\342\200\256gpj')
case "$ARBITER_CANDIDATE_INDEX" in
  1) ln -s .. "lnk$evil" ;;
  2) mkdir "cfg$evil"; printf 'import pytest\n' > "cfg$evil/conftest.py" ;;
esac
"#;

/// What must never reach a person's screen as it is.
const RAW: [(&str, char); 4] =
    [("ESC", '\u{1b}'), ("BEL", '\u{7}'), ("CR", '\r'), ("a right-to-left override", '\u{202e}')];

#[track_caller]
fn assert_shown(surface: &str, text: &str) {
    for (name, c) in RAW {
        assert!(!text.contains(c), "{surface} holds a raw {name}:\n{}", text.escape_debug());
    }
}

#[test]
fn names_a_candidate_chose_are_shown_escaped_on_every_surface() {
    let repo = python_repo(AGENT);
    let run = repo.arbiter(&[
        "run",
        "--task",
        "Fix add in calc.py",
        "--runner",
        "command",
        "--command",
        "./agent.sh",
        "--candidates",
        "3",
        "--verify",
        "python3 -m unittest -q",
    ]);
    run.assert_code(0);
    let dir = repo.run_dir();
    // The names are quoted, escaped, where a person reads.
    let escaped = "x\\u{1b}]0;pwned\\u{7}\\u{1b}[2J\\r\\u{202e}gpj";
    assert!(run.stdout.contains(&format!("lnk{escaped}")), "{}", run.stdout);
    assert!(run.stderr.contains(&format!("cfg{escaped}")), "{}", run.stderr);
    assert_shown("the run's stdout", &run.stdout);
    assert_shown("the run's stderr", &run.stderr);
    let shown = repo.arbiter(&["runs", "show", "latest"]);
    shown.assert_code(0);
    assert!(shown.stdout.contains(&format!("lnk{escaped}")), "{}", shown.stdout);
    assert_shown("runs show", &shown.stdout);
    assert_shown("runs show's stderr", &shown.stderr);
    let report = std::fs::read_to_string(dir.join("final_report.md")).expect("final_report.md");
    assert!(report.contains(&format!("lnk{escaped}")), "{report}");
    assert_shown("final_report.md", &report);
    let viewer = std::fs::read_to_string(dir.join("viewer/index.html")).expect("the viewer");
    assert_shown("the viewer", &viewer);
    // The machine-readable records keep the name as the bytes it is.
    let evidence = read_json(&dir.join("candidates/c02/evidence.json"));
    let path = evidence["violations"][0]["breach"]["path"].as_str().unwrap_or_default().to_string();
    assert_eq!(path, "lnkx\u{1b}]0;pwned\u{7}\u{1b}[2J\r\u{202e}gpj", "{evidence:#}");
    // And the user's tree got the honest fix only.
    assert!(!repo.path().join("lnkx").exists());
    assert_eq!(repo.read("calc.py"), "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n");
}
