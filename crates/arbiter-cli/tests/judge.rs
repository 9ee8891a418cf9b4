//! The pairwise judge end to end: the real binary, a real repository, command-runner
//! candidates making real edits, and a scripted judge model over real HTTP.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use common::*;
use serde_json::{Value, json};

/// Two candidates with equally small, equally passing, different fixes: the evidence cannot
/// separate them, so a configured judge is asked.
fn two_fixes() -> TestRepo {
    let repo = python_repo(
        r#"set -e
if [ "$ARBITER_CANDIDATE_INDEX" = 0 ]; then
  sed -i 's/return a - b/return a + b/' calc.py
else
  sed -i 's/return a - b/return b + a/' calc.py
fi
"#,
    );
    repo.arbiter(&["init"]).assert_code(0);
    repo
}

fn add_judge(repo: &TestRepo, mock: &MockLlm) {
    add_judge_backend(repo, mock, &["--roles", "selection", "--input-cost", "1", "--output-cost", "2"]);
}

/// The backend `judge` (model `judge-model`) on `mock`, with `extra` flags.
fn add_judge_backend(repo: &TestRepo, mock: &MockLlm, extra: &[&str]) {
    let url = mock.openai_url();
    let mut args = vec![
        "backend",
        "add",
        "judge",
        "--provider",
        "openai-compatible",
        "--model",
        "judge-model",
        "--base-url",
        &url,
    ];
    args.extend_from_slice(extra);
    repo.arbiter(&args).assert_code(0);
}

/// A backend with the `review` role on `mock`.
fn add_reviewer(repo: &TestRepo, mock: &MockLlm) {
    repo.arbiter(&[
        "backend",
        "add",
        "reviewer",
        "--provider",
        "openai-compatible",
        "--model",
        "r",
        "--base-url",
        &mock.openai_url(),
        "--roles",
        "review",
    ])
    .assert_code(0);
}

fn verdict(matching: Option<&str>, preferred: &str) -> Value {
    let mut r = json!({
        "tool_calls": [{"name": "verdict", "arguments": {"preferred": preferred, "rationale": format!("prefers {preferred}")}}],
        "usage": {"input_tokens": 100, "output_tokens": 10},
        "repeat": true,
    });
    if let Some(m) = matching {
        r["match"] = json!({"contains": m});
    }
    r
}

fn run(repo: &TestRepo) -> std::path::PathBuf {
    repo.arbiter(&[
        "run",
        "--task",
        "Fix add",
        "--candidates",
        "2",
        "--command",
        "./agent.sh",
        "--verify",
        VERIFY_PY,
        "--apply",
        "none",
    ])
    .assert_code(0);
    repo.run_dir()
}

fn judge_event(dir: &std::path::Path) -> Value {
    read_json_lines(&dir.join("runtime_events.jsonl"))
        .into_iter()
        .find(|e| e["kind"] == "judge_decision")
        .expect("a judge_decision event")
}

#[test]
fn a_judge_that_always_prefers_the_first_slot_yields_a_tie() {
    let repo = two_fixes();
    let mock = MockLlm::start(&json!({"responses": [verdict(None, "first")]}));
    add_judge(&repo, &mock);
    let dir = run(&repo);
    let pairs = read_json(&dir.join("comparisons/pairwise.json"));
    let pairs = pairs.as_array().expect("an array of pairs");
    assert_eq!(pairs.len(), 1);
    assert_eq!(pairs[0]["outcome"]["result"], "tie", "{pairs:#?}");
    assert_eq!(pairs[0]["a_first"]["preferred"], "first");
    assert_eq!(pairs[0]["b_first"]["preferred"], "first");
    assert_eq!(judge_event(&dir)["data"]["ran"], true);
    // Position bias cancelled: the deterministic order decides.
    assert_eq!(read_json(&dir.join("selection.json"))["winner"], "c01");
    // Both orders were paid for, under the judge's role, exactly.
    let cost = read_json(&dir.join("cost_summary.json"));
    assert_eq!(cost["by_role"]["selection"]["calls"], 2, "{cost:#}");
    assert_eq!(cost["by_role"]["selection"]["known_cost"], "0.00024");
}

#[test]
fn a_consistent_preference_in_both_orders_wins() {
    let repo = two_fixes();
    let mock = MockLlm::start(&json!({"responses": [
        verdict(Some("First patch (candidate c02)"), "first"),
        verdict(Some("Second patch (candidate c02)"), "second"),
    ]}));
    add_judge(&repo, &mock);
    let dir = run(&repo);
    let selection = read_json(&dir.join("selection.json"));
    assert_eq!(selection["winner"], "c02", "{selection:#}");
    assert!(selection["summary"].as_str().unwrap_or("").contains("pairwise judge preferred it"), "{selection:#}");
    let ranking = read_json(&dir.join("comparisons/ranking.json"));
    assert_eq!(ranking["candidates"][0]["judge"]["copeland"], 1, "{ranking:#}");
    let report = std::fs::read_to_string(dir.join("final_report.md")).expect("report");
    assert!(report.contains("### Why c02 won") && report.contains("### Why each other candidate lost"), "{report}");
    let viewer = std::fs::read_to_string(dir.join("viewer/index.html")).expect("viewer");
    assert!(viewer.contains("Pairwise judge") && viewer.contains("c02 wins"), "the viewer shows the pairwise matrix");
}

#[test]
fn malformed_judge_output_is_repaired_once_then_recorded_as_a_fallback() {
    let repo = two_fixes();
    let mock = MockLlm::start(&json!({"responses": [{"text": "I like the first one.", "repeat": true}]}));
    add_judge(&repo, &mock);
    let dir = run(&repo);
    let pairs = read_json(&dir.join("comparisons/pairwise.json"));
    let first = &pairs[0]["a_first"];
    assert_eq!(first["preferred"], "tie");
    assert!(first["fallback"].as_str().unwrap_or("").contains("repair"), "{first:#}");
    let cost = read_json(&dir.join("cost_summary.json"));
    assert_eq!(cost["by_role"]["selection"]["calls"], 4, "two orders, each with one repair request");
    assert_eq!(read_json(&dir.join("selection.json"))["winner"], "c01");
}

#[test]
fn without_a_judge_the_evidence_decides_and_says_so() {
    let repo = two_fixes();
    let dir = run(&repo);
    let event = judge_event(&dir);
    assert_eq!(event["data"]["ran"], false);
    assert!(event["data"]["reason"].as_str().unwrap_or("").contains("no judge is configured"), "{event:#}");
    assert_eq!(read_json(&dir.join("comparisons/pairwise.json")), json!([]));
}

#[test]
fn risk_reviews_are_validated_repaired_once_and_written_per_candidate() {
    let repo = two_fixes();
    let review = json!({"summary": "fixes add", "likely_correct": true, "confidence": 0.8, "risks": ["none seen"],
                        "evidence_gaps": [], "scores": {"correctness": 0.9, "risk": 0.1, "minimality": 1.0}});
    let mut bad = review.clone();
    bad["confidence"] = json!(8.5);
    let mock = MockLlm::start(&json!({"responses": [
        // c01's first review is out of range, repaired on the second request; c02's is valid.
        {"match": {"contains": "Candidate c01"}, "tool_calls": [{"name": "review", "arguments": bad}]},
        {"match": {"contains": "Candidate c01"}, "tool_calls": [{"name": "review", "arguments": review.clone()}]},
        {"match": {"contains": "Candidate c02"}, "tool_calls": [{"name": "review", "arguments": review}]},
    ]}));
    add_reviewer(&repo, &mock);
    let dir = run(&repo);
    let c01 = read_json(&dir.join("reviews/c01.json"));
    assert_eq!(c01["repaired"], true, "{c01:#}");
    assert_eq!(c01["review"]["confidence"], 0.8);
    assert_eq!(c01["schema_version"], 1);
    let c02 = read_json(&dir.join("reviews/c02.json"));
    assert_eq!(c02["repaired"], false);
    let cost = read_json(&dir.join("cost_summary.json"));
    assert_eq!(cost["by_role"]["review"]["calls"], 3, "{cost:#}");
    // Reviews inform; with no selection backend the pairwise judge did not run.
    assert_eq!(read_json(&dir.join("comparisons/pairwise.json")), json!([]));
}

/// Ctrl-C while the cross-tests run stops the run there: the judge the evidence would have
/// needed is never asked, nothing is selected or applied, and the run ends `interrupted`.
#[test]
fn an_interrupt_during_the_cross_tests_asks_no_judge_and_applies_nothing() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    use std::time::Duration;

    // Two different fixes, each with the same test of its own: the cross-tests run, and
    // they cannot separate the two, so the judge would be next.
    let repo = python_repo(
        r#"set -e
if [ "$ARBITER_CANDIDATE_INDEX" = 0 ]; then
  sed -i 's/return a - b/return a + b/' calc.py
else
  sed -i 's/return a - b/return b + a/' calc.py
fi
printf 'import unittest\nfrom calc import add\n\n\nclass More(unittest.TestCase):\n    def test_more(self):\n        self.assertEqual(add(10, 5), 15)\n' > test_more.py
"#,
    );
    repo.arbiter(&["init"]).assert_code(0);
    let mut mock = MockLlm::start(&json!({"responses": [verdict(None, "first")]}));
    add_judge(&repo, &mock);
    let markers = tempfile::tempdir().expect("temp dir");
    // Cross-tests run in the candidates' sandboxes: the marker's directory is writable there.
    repo.allow_writes(markers.path());
    let started = markers.path().join("cross-test-started");
    // Each cross-test says it started, then waits to be interrupted.
    let config = repo.arbiter_dir().join("config.toml");
    let mut text = std::fs::read_to_string(&config).expect("config.toml");
    text.push_str(&format!(
        "\n[[cross_tests.rules]]\npattern = \"**/test_*.py\"\ncommand = \"touch '{}' && sleep 300\"\n",
        started.display()
    ));
    std::fs::write(&config, text).expect("write config.toml");
    let logs = tempfile::tempdir().expect("temp dir");
    let mut child = repo
        .arbiter_cmd(&[
            "run",
            "--task",
            "Fix add",
            "--candidates",
            "2",
            "--command",
            "./agent.sh",
            "--verify",
            VERIFY_PY,
        ])
        .stdout(std::fs::File::create(logs.path().join("stdout")).expect("stdout file"))
        .stderr(std::fs::File::create(logs.path().join("stderr")).expect("stderr file"))
        .spawn()
        .expect("spawn arbiter");
    let reached =
        wait_until(Duration::from_secs(120), || started.exists() || child.try_wait().ok().flatten().is_some());
    if !reached || !started.exists() {
        let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGINT);
        if !wait_until(Duration::from_secs(30), || child.try_wait().ok().flatten().is_some()) {
            let _ = child.kill();
        }
        let _ = child.wait();
        let stderr = std::fs::read_to_string(logs.path().join("stderr")).unwrap_or_default();
        panic!("the cross-tests never started\nstderr:\n{stderr}");
    }
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).expect("send SIGINT");
    let mut status = None;
    let exited = wait_until(Duration::from_secs(60), || {
        status = child.try_wait().expect("wait for arbiter");
        status.is_some()
    });
    if !exited {
        let _ = child.kill();
        let _ = child.wait();
        panic!("arbiter did not exit after SIGINT");
    }
    let stderr = std::fs::read_to_string(logs.path().join("stderr")).unwrap_or_default();
    assert_eq!(status.and_then(|s| s.code()), Some(130), "stderr:\n{stderr}");

    assert_eq!(mock.chat_requests(), Vec::<String>::new(), "the judge was asked after the interrupt");
    let dir = repo.run_dir();
    assert_eq!(read_json(&dir.join("state.json"))["status"], "interrupted");
    let selection = read_json(&dir.join("selection.json"));
    assert_eq!(selection["outcome"], "interrupted", "{selection:#}");
    assert_eq!(selection["winner"], Value::Null, "{selection:#}");
    assert_eq!(read_json(&dir.join("comparisons/pairwise.json")), json!([]));
    let cross = read_json(&dir.join("comparisons/cross_tests.json"));
    assert_eq!(cross["ran"], false, "{cross:#}");
    assert!(cross["skip_reason"].as_str().unwrap_or("").contains("interrupted"), "{cross:#}");
    let events = read_json_lines(&dir.join("runtime_events.jsonl"));
    assert!(!events.iter().any(|e| e["kind"] == "judge_decision" && e["data"]["ran"] == true), "{events:#?}");
    assert!(!events.iter().any(|e| e["kind"] == "materialized"), "{events:#?}");
    // Nothing was applied: the repository is as it was.
    assert!(repo.read("calc.py").contains("return a - b"));
    assert!(!repo.path().join("test_more.py").exists());
    assert_eq!(repo.status(), Vec::<String>::new());
}

/// Reviews ran only when the evidence could not separate the top candidates. Now every
/// survivor is reviewed whenever a `review` backend is configured — here the evidence
/// decides (one candidate's fix has a test of its own that the other fails) — and the
/// report and the viewer say what risks remain, the winner first.
#[test]
fn every_survivor_is_reviewed_and_the_risks_that_remain_are_reported_winner_first() {
    let repo = python_repo(
        r##"set -e
sed -i 's/return a - b/return a + b/' calc.py
if [ "$ARBITER_CANDIDATE_INDEX" = 1 ]; then
  printf 'import unittest\nfrom calc import add\n\n\nclass More(unittest.TestCase):\n    def test_more(self):\n        self.assertEqual(add(10, 5), 15)\n' > test_more.py
  echo "# add adds" >> README.md
fi
"##,
    );
    repo.arbiter(&["init"]).assert_code(0);
    let review = |risk: &str| {
        json!({"summary": format!("reviewed: {risk}"), "likely_correct": true, "confidence": 0.7, "risks": [risk],
               "evidence_gaps": ["negative numbers are not tested"], "scores": {"correctness": 0.9, "risk": 0.2, "minimality": 0.8}})
    };
    let mock = MockLlm::start(&json!({"responses": [
        {"match": {"contains": "Candidate c01"}, "tool_calls": [{"name": "review", "arguments": review("c01 risk: only the sign changed")}], "repeat": true},
        {"match": {"contains": "Candidate c02"}, "tool_calls": [{"name": "review", "arguments": review("c02 risk: README edited too")}], "repeat": true},
    ]}));
    add_reviewer(&repo, &mock);
    let dir = run(&repo);
    assert!(
        dir.join("reviews/c01.json").exists() && dir.join("reviews/c02.json").exists(),
        "not every survivor was reviewed"
    );
    let events = read_json_lines(&dir.join("runtime_events.jsonl"));
    let decision = events.iter().find(|e| e["kind"] == "review_decision").expect("a review_decision event");
    assert_eq!(decision["data"]["ran"], true, "{decision:#}");
    let winner = read_json(&dir.join("selection.json"))["winner"].as_str().unwrap_or_default().to_string();
    let loser = if winner == "c01" { "c02" } else { "c01" };
    let report = std::fs::read_to_string(dir.join("final_report.md")).unwrap();
    let section = &report[report.find("## Risks that remain").expect("a Risks that remain section")..];
    let at = |s: &str| section.find(s).unwrap_or_else(|| panic!("{s} missing from:\n{section}"));
    assert!(
        at(&format!("### {winner} (the winner) — likely correct, confidence 0.70"))
            < at(&format!("### {loser} — likely correct"))
    );
    assert!(
        section.contains(&format!("- Risk: {winner} risk"))
            && section.contains("- Evidence gap: negative numbers are not tested")
    );
    let viewer = std::fs::read_to_string(dir.join("viewer/index.html")).unwrap();
    assert!(
        viewer.contains("<h2>Risks that remain</h2>") && viewer.contains(&format!("{winner} (the winner)")),
        "the viewer"
    );
    // Reviews inform; the pairwise judge was not needed.
    assert_eq!(read_json(&dir.join("comparisons/pairwise.json")), json!([]));
}

/// Evidence that cannot separate two candidates is said to be a tie-break, with the way to a
/// decision; following it as printed (a backend, then `[roles] selection` naming it in
/// .arbiter/config.toml) gets a judged decision on the next run. (The hint once said
/// `selection = "BACKEND"`, which the configuration refuses: roles are lists.)
#[test]
fn an_undecided_selection_says_so_and_its_hint_leads_to_a_decision() {
    let repo = two_fixes();
    let dir = run(&repo);
    let selection = read_json(&dir.join("selection.json"));
    let summary = selection["summary"].as_str().unwrap_or_default().to_string();
    assert!(
        summary.contains("could not tell them apart") && summary.contains("tie-break, not a verdict"),
        "{selection:#}"
    );
    assert!(summary.contains("`[roles] selection = [\"NAME\"]` in .arbiter/config.toml"), "{summary}");
    let report = std::fs::read_to_string(dir.join("final_report.md")).expect("report");
    assert!(report.contains("could not tell them apart"), "{report}");

    let mock = MockLlm::start(&json!({"responses": [
        verdict(Some("First patch (candidate c02)"), "first"),
        verdict(Some("Second patch (candidate c02)"), "second"),
    ]}));
    // A backend without roles, then named in [roles] as the hint says.
    add_judge_backend(&repo, &mock, &[]);
    let config = repo.arbiter_dir().join("config.toml");
    let text = std::fs::read_to_string(&config).expect("config.toml");
    let text = if text.lines().any(|l| l.trim() == "[roles]") {
        text.replacen("[roles]", "[roles]\nselection = [\"judge\"]", 1)
    } else {
        format!("{text}\n[roles]\nselection = [\"judge\"]\n")
    };
    std::fs::write(&config, text).expect("write config.toml");
    let first = dir;
    std::fs::remove_dir_all(&first).expect("the first run's directory");
    let dir = run(&repo);
    let selection = read_json(&dir.join("selection.json"));
    assert_eq!(selection["winner"], "c02", "{selection:#}");
    let summary = selection["summary"].as_str().unwrap_or_default();
    assert!(summary.contains("pairwise judge preferred it") && !summary.contains("tie-break"), "{selection:#}");
}
