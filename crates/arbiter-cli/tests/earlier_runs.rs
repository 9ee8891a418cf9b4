//! A run directory as an earlier arbiter wrote it (`tests/fixtures/runs/`, recorded on
//! 2026-12-02 from a real run: two command candidates, one fixes `add`) is read by this one:
//! `runs show` (human and `--json`), `runs verify` against its seal, and its event log
//! through the typed payloads the progress display and the reports read. Renaming a stored
//! field breaks this test, not the users' old runs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use std::path::Path;

use arbiter_core::event::{
    AgentFinished, BaselineFinished, CandidateFinished, CandidatePreparing, CandidateQueued, Event, EventData,
    GateFinished, Materialized, PatchCaptured, RunStarted, SelectionMade,
};
use common::*;

const RUN: &str = "20261202T051759Z-a15c82";

fn with_the_earlier_run() -> TestRepo {
    let repo = initialized_repo("# earlier\n", "true\n");
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/runs").join(RUN);
    let to = repo.arbiter_dir().join("runs").join(RUN);
    for file in files_under(&from) {
        let rel = file.strip_prefix(&from).unwrap();
        std::fs::create_dir_all(to.join(rel).parent().unwrap()).unwrap();
        std::fs::copy(&file, to.join(rel)).unwrap();
    }
    repo
}

#[test]
fn a_run_directory_an_earlier_arbiter_wrote_still_reads() {
    let repo = with_the_earlier_run();
    let shown = repo.arbiter(&["runs", "show", RUN]);
    shown.assert_code(0);
    assert!(shown.stdout.contains(&format!("Run {RUN}")), "{}", shown.stdout);
    assert!(shown.stdout.contains("★ #1 c01") && shown.stdout.contains("c02"), "{}", shown.stdout);
    let json = assert_schema("runs-show", &repo.arbiter(&["runs", "show", RUN, "--json"]).stdout);
    assert_eq!(json["state"]["run_id"], RUN);
    assert_eq!(json["selection"]["winner"], "c01", "{json:#}");
    let verified = repo.arbiter(&["runs", "verify", RUN]);
    verified.assert_code(0);
    assert!(verified.stdout.contains("files match manifest.json"), "{}", verified.stdout);
}

/// Every line of the earlier event log reads as an event, and each kind the display and
/// the reports read reads as its typed payload.
#[test]
fn an_earlier_event_log_reads_through_the_typed_payloads() {
    let log = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/runs").join(RUN).join("runtime_events.jsonl");
    let events: Vec<Event> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    fn all_read<T: EventData>(events: &[Event]) -> usize {
        let of_kind: Vec<&Event> = events.iter().filter(|e| e.kind == T::KIND).collect();
        for e in &of_kind {
            assert!(e.data_as::<T>().is_some(), "{:?} does not read: {}", T::KIND, e.data);
        }
        of_kind.len()
    }
    let read = all_read::<RunStarted>(&events)
        + all_read::<BaselineFinished>(&events)
        + all_read::<CandidateQueued>(&events)
        + all_read::<CandidatePreparing>(&events)
        + all_read::<AgentFinished>(&events)
        + all_read::<PatchCaptured>(&events)
        + all_read::<GateFinished>(&events)
        + all_read::<CandidateFinished>(&events)
        + all_read::<SelectionMade>(&events)
        + all_read::<Materialized>(&events);
    assert_eq!(read, 16, "the fixture's events of those kinds");
}
