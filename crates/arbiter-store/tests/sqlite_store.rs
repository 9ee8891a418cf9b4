//! The SQLite store against a real database file.

use arbiter_core::event::{Event, EventKind};
use arbiter_core::ids::{CandidateId, RunId};
use arbiter_core::status::{CandidateStatus, RunStatus};
use arbiter_core::time::Timestamp;
use arbiter_store::sqlite::SqliteStore;
use arbiter_store::{CandidateRecord, RunRecord, Store};

fn run(id: &RunId, started: i64) -> RunRecord {
    RunRecord {
        id: id.clone(),
        repo: "/repo".into(),
        task_title: "Fix it".into(),
        status: RunStatus::Running,
        base_commit: "abc".into(),
        run_dir: "/repo/.arbiter/runs/x".into(),
        candidates: 2,
        winner: None,
        started_at: Timestamp(started),
        finished_at: None,
    }
}

#[tokio::test]
async fn runs_candidates_and_events_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("arbiter.db");
    let store = SqliteStore::open(&path).await.unwrap();
    let a = RunId::new(Timestamp(1_000_000), 1);
    let b = RunId::new(Timestamp(2_000_000), 2);
    store.put_run(&run(&a, 1_000_000)).await.unwrap();
    store.put_run(&run(&b, 2_000_000)).await.unwrap();

    let c = CandidateRecord {
        run_id: a.clone(),
        id: CandidateId::from_index(0),
        index: 0,
        runner: "command".into(),
        status: CandidateStatus::Finished,
        exit_code: Some(0),
        normalized_hash: Some("h".into()),
        eligible: Some(true),
        rank: Some(1),
    };
    store.put_candidate(&c).await.unwrap();
    store.put_candidate(&CandidateRecord { rank: Some(2), ..c.clone() }).await.unwrap();
    for seq in 1..=3 {
        store
            .append_event(&Event {
                seq,
                run_id: a.clone(),
                at: Timestamp(seq as i64),
                kind: EventKind::Warning,
                candidate: Some(CandidateId::from_index(0)),
                data: serde_json::json!({"n": seq}),
            })
            .await
            .unwrap();
    }
    store
        .finish_run(&a, RunStatus::Succeeded, Some(&CandidateId::from_index(0)), Some(Timestamp(5_000_000)))
        .await
        .unwrap();

    let listed = store.list_runs(10).await.unwrap();
    assert_eq!(listed.iter().map(|r| r.id.clone()).collect::<Vec<_>>(), vec![b.clone(), a.clone()]);
    let got = store.get_run(&a).await.unwrap().unwrap();
    assert_eq!(got.status, RunStatus::Succeeded);
    assert_eq!(got.winner, Some(CandidateId::from_index(0)));
    assert_eq!(store.candidates(&a).await.unwrap()[0].rank, Some(2));
    let events = store.events(&a).await.unwrap();
    assert_eq!(events.len(), 3);
    assert_eq!(events[2].data["n"], 3);

    // Reopening applies no migration twice and keeps the data.
    drop(store);
    let again = SqliteStore::open(&path).await.unwrap();
    assert_eq!(again.list_runs(1).await.unwrap()[0].id, b);
}

#[tokio::test]
async fn unwritable_location_is_a_clear_error() {
    let err = SqliteStore::open(std::path::Path::new("/proc/arbiter/none.db")).await.err().unwrap();
    assert!(err.to_string().contains("cannot open the database /proc/arbiter/none.db"), "{err}");
}
