//! The sealed run directory: `manifest.json` written at the end of a run, `arbiter runs
//! verify` naming every file changed, missing or added behind arbiter's back, `arbiter apply`
//! refusing a changed run and resealing after its own write. Real repository, real binary,
//! a shell-script agent.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use std::fs;

use common::*;

/// A finished run (candidate c01 fixes the bug and wins; nothing applied yet).
fn finished_run() -> TestRepo {
    let repo = python_repo(AGENT_FIX);
    repo.arbiter(&[
        "run",
        "--task",
        "Fix add in calc.py",
        "--verify",
        VERIFY_PY,
        "--candidates",
        "2",
        "--runner",
        "command",
        "--command",
        "./agent.sh",
        "--timeout-seconds",
        "60",
        "--apply",
        "none",
        "--no-cross-tests",
    ])
    .assert_code(0);
    repo
}

#[test]
fn a_finished_run_is_sealed_and_verifies() {
    let repo = finished_run();
    let dir = repo.run_dir();
    let manifest = read_json(&dir.join("manifest.json"));
    assert_eq!(manifest["schema_version"], 1);
    assert_eq!(manifest["run_id"].as_str(), dir.file_name().and_then(|n| n.to_str()));
    let sealed: Vec<&str> =
        manifest["files"].as_array().expect("files").iter().filter_map(|f| f["path"].as_str()).collect();
    for path in ["state.json", "runtime_events.jsonl", "final_report.md", "selection.json", "candidates/c01/patch.diff"]
    {
        assert!(sealed.contains(&path), "{path} is sealed: {sealed:?}");
    }
    assert!(!sealed.contains(&"manifest.json"));
    // Every file of the directory (but the manifest) is in it, with its real size and hash.
    let mut on_disk: Vec<String> = files_under(&dir)
        .iter()
        .map(|p| p.strip_prefix(&dir).expect("inside").display().to_string())
        .filter(|p| p != "manifest.json")
        .collect();
    on_disk.sort();
    assert_eq!(sealed, on_disk);
    let state =
        &manifest["files"].as_array().expect("files")[sealed.iter().position(|p| *p == "state.json").expect("state")];
    assert_eq!(state["bytes"].as_u64(), fs::metadata(dir.join("state.json")).ok().map(|m| m.len()));
    assert_eq!(state["sha256"].as_str().map(str::len), Some(64));
    // The last event is in the sealed log: the seal came after it.
    let events = read_json_lines(&dir.join("runtime_events.jsonl"));
    assert_eq!(events.last().map(|e| e["kind"].clone()), Some("run_finished".into()));

    let ok = repo.arbiter(&["runs", "verify", "latest"]);
    ok.assert_code(0);
    assert!(ok.stdout.contains(&format!("all {} files match manifest.json", sealed.len())), "{}", ok.stdout);
    let json = repo.arbiter(&["runs", "verify", "latest", "--json"]);
    json.assert_code(0);
    let v: serde_json::Value = serde_json::from_str(&json.stdout).expect("one JSON value");
    assert_eq!((v["sealed"].as_bool(), v["holds"].as_bool()), (Some(true), Some(true)));
}

#[test]
fn every_change_behind_arbiters_back_is_named_and_apply_refuses_it() {
    let repo = finished_run();
    let dir = repo.run_dir();
    let events = dir.join("runtime_events.jsonl");
    let patch = dir.join("candidates/c01/patch.diff");
    let report = dir.join("final_report.md");
    let (events_text, patch_text, report_text) = (repo_read(&events), repo_read(&patch), repo_read(&report));

    fs::write(
        &events,
        format!("{events_text}{{\"seq\":999,\"kind\":\"selection_made\",\"data\":{{\"winner\":\"c02\"}}}}\n"),
    )
    .expect("forge an event");
    fs::write(&patch, patch_text.replace("return a + b", "return a + b + 1")).expect("edit the patch");
    fs::remove_file(&report).expect("delete the report");
    fs::write(dir.join("candidates/c02/notes.txt"), "added later\n").expect("add a file");

    let broken = repo.arbiter(&["runs", "verify", "latest"]);
    broken.assert_code(1);
    for line in [
        "changed     runtime_events.jsonl",
        "changed     candidates/c01/patch.diff",
        "missing     final_report.md",
        "unexpected  candidates/c02/notes.txt",
    ] {
        assert!(broken.stdout.contains(line), "`{line}` in:\n{}", broken.stdout);
    }
    let json = repo.arbiter(&["runs", "verify", "latest", "--json"]);
    json.assert_code(1);
    let v: serde_json::Value = serde_json::from_str(&json.stdout).expect("one JSON value");
    assert_eq!(v["holds"], false);
    assert_eq!(v["changed"], serde_json::json!(["candidates/c01/patch.diff", "runtime_events.jsonl"]));
    assert_eq!(v["missing"], serde_json::json!(["final_report.md"]));
    assert_eq!(v["unexpected"], serde_json::json!(["candidates/c02/notes.txt"]));

    // The edited patch is not applied, and the refusal seals nothing over the changes.
    let refused = repo.arbiter(&["apply", "latest"]);
    refused.assert_code(1);
    assert!(refused.stderr.contains("changed after arbiter sealed it"), "{}", refused.stderr);
    assert_eq!(repo.read("calc.py"), CALC_PY);
    assert!(!dir.join("apply.json").exists());
    repo.arbiter(&["runs", "verify", "latest"]).assert_code(1);

    // Put back as arbiter wrote it: the seal holds again, and arbiter's own write (apply)
    // is resealed.
    fs::write(&events, events_text).expect("restore");
    fs::write(&patch, patch_text).expect("restore");
    fs::write(&report, report_text).expect("restore");
    fs::remove_file(dir.join("candidates/c02/notes.txt")).expect("remove");
    repo.arbiter(&["runs", "verify", "latest"]).assert_code(0);
    repo.arbiter(&["apply", "latest"]).assert_code(0);
    assert!(repo.read("calc.py").contains("return a + b"));
    let sealed = read_json(&dir.join("manifest.json"));
    assert!(sealed["files"].as_array().expect("files").iter().any(|f| f["path"] == "apply.json"));
    repo.arbiter(&["runs", "verify", "latest"]).assert_code(0);

    // A change after the reseal is still seen.
    fs::write(dir.join("apply.json"), "{}\n").expect("edit apply.json");
    let after = repo.arbiter(&["runs", "verify", "latest"]);
    after.assert_code(1);
    assert!(after.stdout.contains("changed     apply.json"), "{}", after.stdout);
}

#[test]
fn a_run_without_a_manifest_is_explained() {
    let repo = finished_run();
    let dir = repo.run_dir();
    fs::remove_file(dir.join("manifest.json")).expect("remove the manifest");
    let r = repo.arbiter(&["runs", "verify", "latest"]);
    r.assert_code(1);
    assert!(r.stderr.contains("has no manifest.json"), "{}", r.stderr);
    assert!(r.stderr.contains("older than manifest.json"), "{}", r.stderr);
    let json = repo.arbiter(&["runs", "verify", "latest", "--json"]);
    json.assert_code(1);
    let v: serde_json::Value = serde_json::from_str(&json.stdout).expect("one JSON value");
    assert_eq!((v["sealed"].as_bool(), v["holds"].as_bool()), (Some(false), Some(false)));
    // An unsealed run (an older arbiter's) is still applied, and stays unsealed.
    repo.arbiter(&["apply", "latest"]).assert_code(0);
    assert!(!dir.join("manifest.json").exists());
    // A manifest that is not JSON any more cannot vouch for anything.
    fs::write(dir.join("manifest.json"), "{ not json").expect("write");
    let r = repo.arbiter(&["runs", "verify", "latest"]);
    r.assert_code(1);
    assert!(r.stderr.contains("manifest.json is not valid"), "{}", r.stderr);
}

fn repo_read(path: &std::path::Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}
