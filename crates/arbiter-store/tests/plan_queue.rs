//! The plan queue's conformance suite: every scenario runs against SQLite (a temporary file)
//! and Postgres (a fresh database on the real server), through the same `PlanStore` port.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use common::both;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use arbiter_core::money::Usd;
use arbiter_core::plan::PlanSpec;
use arbiter_core::plan::event::PlanEntry;
use arbiter_core::plan::file::{Syntax, parse};
use arbiter_core::plan::spec::export;
use arbiter_core::plan::state::TaskStatus;
use arbiter_core::time::Timestamp;
use arbiter_store::StoreError;
use arbiter_store::plans::*;
use arbiter_store::postgres::PgStore;
use arbiter_store::sqlite::SqliteStore;

const SECOND: i64 = 1_000_000;
const LEASE: Duration = Duration::from_secs(30);

fn t(s: i64) -> Timestamp {
    Timestamp(1_800_000_000 * SECOND + s * SECOND)
}

fn usd(s: &str) -> Usd {
    Usd::parse(s).unwrap()
}

fn plan(json: &str) -> PlanSpec {
    parse(json, Syntax::Json).unwrap_or_else(|e| panic!("{e}\n{json}"))
}

/// `{"id": "p", ..., "tasks": [...]}` with a zero retry backoff unless `extra` says otherwise.
fn plan_with(extra: &str, tasks: &str) -> PlanSpec {
    plan(&format!(
        r#"{{"id": "p", "name": "Plan", {extra} "defaults": {{"retry_backoff_seconds": 0}}, "tasks": [{tasks}]}}"#
    ))
}

fn task(id: &str, deps: &[&str]) -> String {
    format!(r#"{{"id": "{id}", "title": "task {id}", "dependencies": {}}}"#, serde_json::to_string(deps).unwrap())
}

async fn import(store: &dyn PlanStore, spec: &PlanSpec, mode: ImportMode) -> Result<ImportReport, StoreError> {
    store.import_plan(Import { spec, mode, skip: &[], verdicts: &[], apply: None, branch: None, now: t(0) }).await
}

async fn claim(store: &dyn PlanStore, worker: &str, at: Timestamp) -> ClaimOutcome {
    store.claim("p", worker, LEASE, at).await.unwrap()
}

fn claimed(outcome: ClaimOutcome) -> Claimed {
    match outcome {
        ClaimOutcome::Claimed(c) => *c,
        ClaimOutcome::Idle(i) => panic!("expected a claim, got {i:?}"),
    }
}

fn idle(outcome: ClaimOutcome) -> Idle {
    match outcome {
        ClaimOutcome::Idle(i) => i,
        ClaimOutcome::Claimed(c) => panic!("expected nothing to claim, got {}", c.lease.task_id),
    }
}

fn success() -> AttemptResult {
    AttemptResult::Succeeded { run_id: Some("run".into()), commit: Some("abc".into()) }
}

async fn status_of(store: &dyn PlanStore, id: &str) -> TaskStatus {
    store.plan("p").await.unwrap().unwrap().task(id).unwrap().status
}

/// Import checks everything before writing: a bad plan leaves the store untouched; a
/// re-import adds new tasks and keeps the others; `--update` changes only unstarted tasks.
async fn import_validation(store: Arc<dyn PlanStore>) {
    let cyclic =
        plan_with("", &[task("A", &["C"]), task("B", &["A"]), task("C", &["B"]), task("D", &["nope"])].join(","));
    let err = import(&*store, &cyclic, ImportMode::Add).await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("dependency cycle: A → C → B → A"), "{text}");
    assert!(text.contains("depends on 'nope'"), "{text}");
    assert!(store.plan("p").await.unwrap().is_none(), "nothing was written");
    assert!(store.events("p").await.unwrap().is_empty());

    let first = plan_with("", &[task("A", &[]), task("B", &["A"])].join(","));
    let r = import(&*store, &first, ImportMode::Add).await.unwrap();
    assert!(r.created_plan);
    assert_eq!(r.added, vec!["A", "B"]);
    assert_eq!(status_of(&*store, "A").await, TaskStatus::Ready);
    assert_eq!(status_of(&*store, "B").await, TaskStatus::Blocked);

    // A re-import adds C and reports A and B unchanged, even with a changed title.
    let second =
        plan_with("", &[task("A", &[]).replace("task A", "renamed"), task("B", &["A"]), task("C", &["B"])].join(","));
    let r = import(&*store, &second, ImportMode::Add).await.unwrap();
    assert_eq!(
        (r.added.clone(), r.unchanged.clone(), r.differing.clone()),
        (vec!["C".into()], vec!["A".into(), "B".into()], vec!["A".into()])
    );
    assert_eq!(store.plan("p").await.unwrap().unwrap().task("A").unwrap().spec.title, "task A");

    // --update changes a task that has not started...
    let r = import(&*store, &second, ImportMode::Update).await.unwrap();
    assert_eq!(r.updated, vec!["A"]);
    assert_eq!(store.plan("p").await.unwrap().unwrap().task("A").unwrap().spec.title, "renamed");
    // ...and refuses, writing nothing, to change one that did.
    let c = claimed(claim(&*store, "w1", t(1)).await);
    assert_eq!(c.lease.task_id, "A");
    let events_before = store.events("p").await.unwrap().len();
    let third = plan_with(
        "",
        &[task("A", &[]).replace("task A", "again"), task("B", &["A"]), task("C", &[]), task("E", &[])].join(","),
    );
    let err = import(&*store, &third, ImportMode::Update).await.unwrap_err();
    assert!(matches!(err, StoreError::ImportRefused { .. }), "{err}");
    assert!(err.to_string().contains("A is running after 1 attempt(s)"), "{err}");
    let view = store.plan("p").await.unwrap().unwrap();
    assert!(view.task("E").is_none(), "the refused import added nothing");
    assert_eq!(store.events("p").await.unwrap().len(), events_before);
    // A cycle through stored tasks is found too.
    let closing = plan_with("", &task("A", &["C"]));
    let err = import(&*store, &closing, ImportMode::Add).await.unwrap_err();
    assert!(err.to_string().contains("cycle"), "{err}");
}

/// export → import → export is byte-identical, through the store.
async fn export_round_trip(store: Arc<dyn PlanStore>) {
    let spec = plan(
        r#"{"id": "p", "name": "Plan", "budget_usd": "3.25", "base_ref": "main",
            "defaults": {"candidates": 2, "runners": ["command", "builtin"], "verify": ["make test"], "max_attempts": 3},
            "tasks": [
              {"id": "T1", "title": "First", "description": "Do the first thing properly.", "priority": "critical",
               "acceptance_criteria": ["it works"], "key_files": ["src/a.rs"], "verify": ["make t1"]},
              {"id": "T2", "title": "Second", "dependencies": ["T1"], "candidates": 4, "attempt_budget_usd": "0.25"}
            ]}"#,
    );
    import(&*store, &spec, ImportMode::Add).await.unwrap();
    let once = export(&store.plan("p").await.unwrap().unwrap().spec());
    let again_spec = parse(&once, Syntax::Json).unwrap();
    let r = import(&*store, &again_spec, ImportMode::Update).await.unwrap();
    assert_eq!(r.unchanged.len(), 2, "{r:?}");
    let twice = export(&store.plan("p").await.unwrap().unwrap().spec());
    assert_eq!(once, twice);
    assert_eq!(parse(&twice, Syntax::Json).unwrap(), spec);
}

/// A diamond: D waits for B and C, which wait for A; readiness follows completions.
async fn dependencies(store: Arc<dyn PlanStore>) {
    let spec = plan_with(
        "",
        &[
            task("D", &["B", "C"]),
            task("B", &["A"]),
            task("C", &["A"]).replace(r#""title""#, r#""priority": "high", "title""#),
            task("A", &[]),
        ]
        .join(","),
    );
    import(&*store, &spec, ImportMode::Add).await.unwrap();
    let a = claimed(claim(&*store, "w1", t(1)).await);
    assert_eq!(a.lease.task_id, "A");
    let i = idle(claim(&*store, "w2", t(1)).await);
    assert_eq!((i.running, i.ready), (1, 0));
    assert!(!i.finished());
    let f = store.finish(&a.lease, success(), Usd::ZERO, t(2)).await.unwrap();
    assert_eq!(f.status, TaskStatus::Done);
    assert_eq!(f.newly_ready, vec!["B", "C"]);
    // C is high priority: first, although B comes earlier in plan order.
    let c = claimed(claim(&*store, "w1", t(3)).await);
    assert_eq!(c.lease.task_id, "C");
    let b = claimed(claim(&*store, "w2", t(3)).await);
    assert_eq!(b.lease.task_id, "B");
    assert_eq!(status_of(&*store, "D").await, TaskStatus::Blocked);
    let f = store.finish(&b.lease, success(), Usd::ZERO, t(4)).await.unwrap();
    assert!(f.newly_ready.is_empty(), "D still waits for C");
    assert!(matches!(claim(&*store, "w2", t(4)).await, ClaimOutcome::Idle(_)));
    let f = store.finish(&c.lease, success(), Usd::ZERO, t(5)).await.unwrap();
    assert_eq!(f.newly_ready, vec!["D"]);
    let d = claimed(claim(&*store, "w1", t(6)).await);
    store.finish(&d.lease, success(), Usd::ZERO, t(7)).await.unwrap();
    let i = idle(claim(&*store, "w1", t(8)).await);
    assert!(i.finished());
    let kinds: Vec<String> = store.events("p").await.unwrap().into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds.iter().filter(|k| *k == "task_done").count(), 4);
    assert_eq!(kinds.iter().filter(|k| *k == "task_ready").count(), 3);
}

/// Tasks whose key files overlap (same file, or a directory and a file inside it) never
/// run at once.
async fn key_files(store: Arc<dyn PlanStore>) {
    let with_files = |id: &str, files: &[&str]| {
        format!(r#"{{"id": "{id}", "title": "t {id}", "key_files": {}}}"#, serde_json::to_string(files).unwrap())
    };
    let spec = plan_with(
        "",
        &[
            with_files("A", &["src/lib.rs"]),
            with_files("B", &["./src/lib.rs"]),
            with_files("C", &["src"]),
            with_files("D", &["docs/x.md"]),
            with_files("E", &["src-other/y.rs"]),
        ]
        .join(","),
    );
    import(&*store, &spec, ImportMode::Add).await.unwrap();
    let a = claimed(claim(&*store, "w", t(1)).await);
    assert_eq!(a.lease.task_id, "A");
    let next = claimed(claim(&*store, "w", t(1)).await);
    assert_eq!(next.lease.task_id, "D", "B and C overlap A's src/lib.rs");
    let e = claimed(claim(&*store, "w", t(1)).await);
    assert_eq!(e.lease.task_id, "E", "src-other is not inside src");
    let i = idle(claim(&*store, "w", t(1)).await);
    assert_eq!((i.running, i.ready), (3, 2));
    store.finish(&a.lease, success(), Usd::ZERO, t(2)).await.unwrap();
    let b = claimed(claim(&*store, "w", t(3)).await);
    assert_eq!(b.lease.task_id, "B");
    assert!(matches!(claim(&*store, "w", t(3)).await, ClaimOutcome::Idle(_)), "C overlaps B");
}

/// 100 concurrent claimers on 100 ready tasks: each task claimed exactly once.
async fn hundred_claimers(store: Arc<dyn PlanStore>) {
    let tasks: Vec<String> = (0..100).map(|i| task(&format!("T{i:03}"), &[])).collect();
    import(&*store, &plan_with("", &tasks.join(",")), ImportMode::Add).await.unwrap();
    let mut joins = Vec::new();
    for w in 0..100 {
        let store = store.clone();
        joins.push(tokio::spawn(async move { store.claim("p", &format!("w{w}"), LEASE, t(1)).await }));
    }
    let mut got = BTreeSet::new();
    for j in joins {
        match j.await.unwrap().unwrap() {
            ClaimOutcome::Claimed(c) => {
                assert!(got.insert(c.lease.task_id.clone()), "{} claimed twice", c.lease.task_id)
            }
            ClaimOutcome::Idle(i) => panic!("a claimer found nothing: {i:?}"),
        }
    }
    assert_eq!(got.len(), 100);
    assert!(matches!(claim(&*store, "late", t(1)).await, ClaimOutcome::Idle(_)));
    assert_eq!(store.attempts("p").await.unwrap().len(), 100);
}

/// An expired lease is taken back; the superseded holder's heartbeat and report are
/// refused (its cost still charged); heartbeats keep a live lease.
async fn leases(store: Arc<dyn PlanStore>) {
    import(&*store, &plan_with("", &[task("A", &[]), task("B", &[])].join(",")), ImportMode::Add).await.unwrap();
    let a = claimed(claim(&*store, "w1", t(0)).await);
    let b = claimed(claim(&*store, "w2", t(0)).await);
    // w2 renews its lease; w1 does not.
    assert_eq!(store.heartbeat(&b.lease, LEASE, t(20)).await.unwrap(), Some(Timestamp(t(20).0 + 30 * SECOND)));
    let reclaimed = store.sweep_expired(t(31)).await.unwrap();
    assert_eq!(reclaimed.iter().map(|r| r.task_id.as_str()).collect::<Vec<_>>(), vec!["A"]);
    assert_eq!(reclaimed[0].status, TaskStatus::Ready);
    let again = claimed(claim(&*store, "w3", t(32)).await);
    assert_eq!(again.lease.task_id, "A");
    assert!(again.lease.fence > a.lease.fence);
    assert_eq!(again.lease.attempt, 2);
    assert_eq!(store.heartbeat(&a.lease, LEASE, t(33)).await.unwrap(), None, "the old lease is lost");
    let err = store.finish(&a.lease, success(), usd("0.5"), t(34)).await.unwrap_err();
    assert!(matches!(err, StoreError::StaleLease { .. }), "{err}");
    assert!(err.to_string().contains("fencing token"), "{err}");
    let view = store.plan("p").await.unwrap().unwrap();
    assert_eq!(view.task("A").unwrap().status, TaskStatus::Running, "the stale report changed nothing");
    assert_eq!(view.plan.budget.spent, usd("0.5"), "what the stale attempt spent is charged");
    store.finish(&again.lease, success(), Usd::ZERO, t(35)).await.unwrap();
    store.finish(&b.lease, success(), usd("0.25"), t(36)).await.unwrap();
    let view = store.plan("p").await.unwrap().unwrap();
    assert_eq!(view.plan.budget.spent, usd("0.75"));
    let attempts = store.attempts("p").await.unwrap();
    let statuses: Vec<&str> = attempts.iter().map(|a| a.status.as_str()).collect();
    assert_eq!(statuses.iter().filter(|s| **s == "expired").count(), 1, "{attempts:#?}");
    assert_eq!(statuses.iter().filter(|s| **s == "succeeded").count(), 2);
    let kinds: Vec<String> = store.events("p").await.unwrap().into_iter().map(|e| e.kind).collect();
    assert!(kinds.contains(&"lease_expired_retry".to_string()) && kinds.contains(&"stale_report_refused".to_string()));
    common::every_event_is_typed(&store.events("p").await.unwrap());
    // A dead worker's leases are taken back at once.
    import(&*store, &plan_with("", &task("C", &[])), ImportMode::Add).await.unwrap();
    let c = claimed(claim(&*store, "dead-worker", t(40)).await);
    let released = store.release_workers("p", &["dead-worker".into()], "its process is gone", t(41)).await.unwrap();
    assert_eq!(released.len(), 1);
    assert!(matches!(store.finish(&c.lease, success(), Usd::ZERO, t(42)).await, Err(StoreError::StaleLease { .. })));
    let c2 = claimed(claim(&*store, "w", t(43)).await);
    assert_eq!(c2.lease.attempt, 1, "a dead worker's attempt does not count");
    let interrupted = AttemptResult::Released { reason: "interrupted".into() };
    let f = store.finish(&c2.lease, interrupted, Usd::ZERO, t(44)).await.unwrap();
    assert_eq!(f.status, TaskStatus::Ready);
    assert_eq!(claimed(claim(&*store, "w", t(45)).await).lease.attempt, 1, "nor does a release");
}

/// 16 concurrent charges crossing the budget: exactly one crossing, the exact decimal sum.
async fn concurrent_charges(store: Arc<dyn PlanStore>) {
    import(&*store, &plan_with(r#""budget_usd": "1","#, &task("A", &[])), ImportMode::Add).await.unwrap();
    let each = usd("0.070000000001");
    let mut joins = Vec::new();
    for i in 0..16 {
        let store = store.clone();
        joins.push(tokio::spawn(async move { store.charge("p", None, each, t(i)).await }));
    }
    let mut crossings = 0;
    for j in joins {
        if j.await.unwrap().unwrap().crossed {
            crossings += 1;
        }
    }
    assert_eq!(crossings, 1);
    let view = store.plan("p").await.unwrap().unwrap();
    assert_eq!(view.plan.budget.spent.decimal(), "1.120000000016");
    let events = store.events("p").await.unwrap();
    assert_eq!(events.iter().filter(|e| e.kind == "budget_exceeded").count(), 1);
    assert_eq!(events.iter().filter(|e| e.kind == "cost_charged").count(), 16);
}

/// Claims reserve their attempt budget, so parallel claims cannot overshoot; nothing is
/// claimed once the budget is spent, until it is raised.
async fn budget_reservations(store: Arc<dyn PlanStore>) {
    let tasks: Vec<String> =
        (0..5).map(|i| format!(r#"{{"id": "T{i}", "title": "t", "attempt_budget_usd": "0.4"}}"#)).collect();
    import(&*store, &plan_with(r#""budget_usd": "1","#, &tasks.join(",")), ImportMode::Add).await.unwrap();
    let mut joins = Vec::new();
    for w in 0..5 {
        let store = store.clone();
        joins.push(tokio::spawn(async move { store.claim("p", &format!("w{w}"), LEASE, t(1)).await }));
    }
    let mut leases = Vec::new();
    let mut exhausted = 0;
    for j in joins {
        match j.await.unwrap().unwrap() {
            ClaimOutcome::Claimed(c) => leases.push(c.lease),
            ClaimOutcome::Idle(i) => {
                assert!(i.budget_exhausted, "{i:?}");
                exhausted += 1;
            }
        }
    }
    let mut reserved: Vec<String> = leases.iter().map(|l| l.reserved.decimal()).collect();
    reserved.sort();
    assert_eq!(reserved, vec!["0.2", "0.4", "0.4"], "the third gets what is left");
    assert_eq!(exhausted, 2);
    let total: Usd = leases.iter().map(|l| l.reserved).sum();
    assert!(total <= usd("1"));
    // Each attempt spends its whole reservation: exactly the budget, one crossing.
    for l in &leases {
        store.finish(l, success(), l.reserved, t(2)).await.unwrap();
    }
    let view = store.plan("p").await.unwrap().unwrap();
    assert_eq!((view.plan.budget.spent, view.plan.budget.reserved), (usd("1"), Usd::ZERO));
    assert!(idle(claim(&*store, "w", t(3)).await).budget_exhausted);
    assert_eq!(store.events("p").await.unwrap().iter().filter(|e| e.kind == "budget_exceeded").count(), 1);
    let b = store.set_budget("p", Some(usd("1.5")), "admin", t(4)).await.unwrap();
    assert!(!b.exhausted());
    let c = claimed(claim(&*store, "w", t(5)).await);
    assert_eq!(c.lease.reserved, usd("0.4"));
}

/// Failed attempts retry after a doubling backoff, up to max_attempts; then the task fails
/// and its dependents stay blocked.
async fn retries(store: Arc<dyn PlanStore>) {
    let spec = plan(&format!(
        r#"{{"id": "p", "name": "P", "defaults": {{"retry_backoff_seconds": 5, "max_attempts": 2}},
            "tasks": [{}, {}]}}"#,
        task("A", &[]),
        task("B", &["A"])
    ));
    import(&*store, &spec, ImportMode::Add).await.unwrap();
    let a = claimed(claim(&*store, "w", t(0)).await);
    let failed =
        AttemptResult::Failed { reason: "no candidate passed".into(), retry: Retry::AfterBackoff, run_id: None };
    let f = store.finish(&a.lease, failed.clone(), usd("0.1"), t(10)).await.unwrap();
    assert_eq!((f.status, f.not_before), (TaskStatus::Ready, Some(t(15))));
    let i = idle(claim(&*store, "w", t(14)).await);
    assert_eq!((i.ready, i.next_ready_at), (1, Some(t(15))));
    assert!(!i.finished(), "a retry is waiting");
    let a2 = claimed(claim(&*store, "w", t(15)).await);
    assert_eq!(a2.lease.attempt, 2);
    let f = store.finish(&a2.lease, failed, usd("0.1"), t(16)).await.unwrap();
    assert_eq!(f.status, TaskStatus::Failed);
    let view = store.plan("p").await.unwrap().unwrap();
    let b = view.task("B").unwrap();
    assert_eq!(b.status, TaskStatus::Blocked);
    assert_eq!(view.waiting_on(b), vec![("A".to_string(), TaskStatus::Failed)]);
    assert_eq!(view.task("A").unwrap().cost, usd("0.2"), "every attempt is costed");
    assert_eq!(view.plan.budget.spent, usd("0.2"));
    assert!(idle(claim(&*store, "w", t(17)).await).finished());
    // Retry gives it new attempts; a task that is not finished cannot be retried.
    assert!(matches!(store.retry_task("p", "B", "admin", t(18)).await, Err(StoreError::NotAllowed { .. })));
    assert_eq!(store.retry_task("p", "A", "admin", t(18)).await.unwrap(), TaskStatus::Ready);
    let a3 = claimed(claim(&*store, "w", t(19)).await);
    assert_eq!(a3.lease.attempt, 1);
    let now_retry = AttemptResult::Failed { reason: "conflict".into(), retry: Retry::Now, run_id: None };
    assert_eq!(store.finish(&a3.lease, now_retry, Usd::ZERO, t(20)).await.unwrap().not_before, Some(t(20)));
}

/// Cancel fences out running attempts; resets put everything back and keep every event.
async fn cancel_and_reset(store: Arc<dyn PlanStore>) {
    import(
        &*store,
        &plan_with(r#""budget_usd": "5","#, &[task("A", &[]), task("B", &["A"])].join(",")),
        ImportMode::Add,
    )
    .await
    .unwrap();
    let a = claimed(claim(&*store, "w", t(0)).await);
    assert_eq!(store.cancel_plan("p", "admin", t(1)).await.unwrap(), 2);
    assert!(matches!(store.finish(&a.lease, success(), usd("1"), t(2)).await, Err(StoreError::StaleLease { .. })));
    let i = idle(claim(&*store, "w", t(3)).await);
    assert!(i.cancelled && i.finished());
    let events_before = store.events("p").await.unwrap().len();
    assert_eq!(store.reset_plan("p", false, None, t(4)).await.unwrap(), 2);
    let view = store.plan("p").await.unwrap().unwrap();
    assert_eq!(
        (view.task("A").unwrap().status, view.task("B").unwrap().status),
        (TaskStatus::Ready, TaskStatus::Blocked)
    );
    assert_eq!(view.plan.budget.spent, usd("1"), "a soft reset keeps what was spent");
    let events = store.events("p").await.unwrap();
    assert!(events.len() > events_before, "a reset only adds events");
    assert_eq!(events.iter().filter(|e| e.kind == "task_reset").count(), 2);
    let a = claimed(claim(&*store, "w", t(5)).await);
    assert_eq!(a.lease.attempt, 1);
    // Not while a worker holds a live lease: its commit could land after the reset.
    let err = store.reset_plan("p", true, None, t(6)).await.unwrap_err();
    assert!(matches!(err, StoreError::LeasesHeld { .. }), "{err}");
    assert!(err.to_string().contains("A (worker w)"), "{err}");
    store.reset_plan("p", true, None, t(36)).await.unwrap();
    let view = store.plan("p").await.unwrap().unwrap();
    assert_eq!(view.plan.budget.spent, Usd::ZERO, "a hard reset forgets the spending");
    assert!(store.attempts("p").await.unwrap().is_empty());
    assert!(store.events("p").await.unwrap().len() > events.len(), "and keeps every event");
    assert!(matches!(store.finish(&a.lease, success(), Usd::ZERO, t(37)).await, Err(StoreError::StaleLease { .. })));
    let listed = store.plans().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].counts.get(&TaskStatus::Ready), Some(&1));
    assert!(matches!(store.claim("nope", "w", LEASE, t(8)).await, Err(StoreError::NoPlan { .. })));
}

/// A reset puts tasks back as they were imported: a task imported as done stays done (its
/// dependents do not wait for it), one a gate skipped stays skipped.
async fn reset_keeps_imported_statuses(store: Arc<dyn PlanStore>) {
    let spec = plan_with("", &[task("A", &[]), task("B", &["A"]), task("C", &["B"]), task("D", &[])].join(","));
    let mut spec = spec;
    spec.tasks[0].imported_status = Some(arbiter_core::plan::spec::ImportedStatus::Done);
    let skip = vec![("D".to_string(), "the gate rejected it".to_string())];
    store
        .import_plan(Import {
            spec: &spec,
            mode: ImportMode::Add,
            skip: &skip,
            verdicts: &[],
            apply: None,
            branch: None,
            now: t(0),
        })
        .await
        .unwrap();
    let b = claimed(claim(&*store, "w", t(1)).await);
    assert_eq!(b.lease.task_id, "B");
    store.finish(&b.lease, success(), Usd::ZERO, t(2)).await.unwrap();
    for hard in [false, true] {
        store.reset_plan("p", hard, None, t(3)).await.unwrap();
        let view = store.plan("p").await.unwrap().unwrap();
        let statuses: Vec<(&str, TaskStatus, i64)> =
            view.tasks.iter().map(|t| (t.spec.id.as_str(), t.status, t.deps_left)).collect();
        assert_eq!(
            statuses,
            vec![
                ("A", TaskStatus::Done, 0),
                ("B", TaskStatus::Ready, 0),
                ("C", TaskStatus::Blocked, 1),
                ("D", TaskStatus::Skipped, 0)
            ],
            "hard: {hard}"
        );
        assert_eq!(view.task("D").unwrap().reason.as_deref(), Some("the gate rejected it"));
    }
}

/// The limit set with `plan budget` survives re-imports whose file states none; a file that
/// states one changes it with `--update`; lowering it to what was spent is a crossing,
/// reported once.
async fn budget_changes(store: Arc<dyn PlanStore>) {
    let plain = plan_with("", &task("A", &[]));
    import(&*store, &plain, ImportMode::Add).await.unwrap();
    store.set_budget("p", Some(usd("2")), "admin", t(1)).await.unwrap();
    for mode in [ImportMode::Add, ImportMode::Update] {
        import(&*store, &plain, mode).await.unwrap();
        let view = store.plan("p").await.unwrap().unwrap();
        assert_eq!((view.plan.budget.limit, view.plan.header.budget_usd), (Some(usd("2")), Some(usd("2"))));
    }
    import(&*store, &plan_with(r#""budget_usd": "3","#, &task("A", &[])), ImportMode::Update).await.unwrap();
    let view = store.plan("p").await.unwrap().unwrap();
    assert_eq!((view.plan.budget.limit, view.plan.header.budget_usd), (Some(usd("3")), Some(usd("3"))));
    assert_eq!(store.events("p").await.unwrap().iter().filter(|e| e.kind == "budget_changed").count(), 2);

    let a = claimed(claim(&*store, "w", t(2)).await);
    store.finish(&a.lease, success(), usd("1"), t(3)).await.unwrap();
    let b = store.set_budget("p", Some(usd("0.5")), "admin", t(4)).await.unwrap();
    assert!(b.exhausted() && b.crossed);
    store.set_budget("p", Some(usd("0.4")), "admin", t(5)).await.unwrap();
    let exceeded: Vec<PlanEvent> =
        store.events("p").await.unwrap().into_iter().filter(|e| e.kind == "budget_exceeded").collect();
    assert_eq!(exceeded.len(), 1, "{exceeded:?}");
    assert_eq!(exceeded[0].data["lowered"], true);
}

/// A cost charged while an attempt runs is on its task and attempt at once (a worker that
/// dies later loses none of it); a refused report's cost is recorded too.
async fn costs_as_incurred(store: Arc<dyn PlanStore>) {
    import(&*store, &plan_with("", &[task("A", &[]), task("B", &[])].join(",")), ImportMode::Add).await.unwrap();
    let a = claimed(claim(&*store, "w", t(0)).await);
    store.charge("p", Some(("A", a.lease.fence)), usd("0.25"), t(1)).await.unwrap();
    let view = store.plan("p").await.unwrap().unwrap();
    assert_eq!((view.task("A").unwrap().cost, view.plan.budget.spent), (usd("0.25"), usd("0.25")));
    store.finish(&a.lease, success(), Usd::ZERO, t(2)).await.unwrap();
    let b = claimed(claim(&*store, "w", t(3)).await);
    assert_eq!(b.lease.task_id, "B");
    // B's lease runs out and another attempt takes over; the first one's report comes late.
    assert_eq!(store.sweep_expired(t(100)).await.unwrap().len(), 1);
    let b2 = claimed(claim(&*store, "w2", t(101)).await);
    assert_eq!(b2.lease.task_id, "B");
    let late = store.finish(&b.lease, success(), usd("0.5"), t(102)).await;
    assert!(matches!(late, Err(StoreError::StaleLease { .. })), "{late:?}");
    let view = store.plan("p").await.unwrap().unwrap();
    assert_eq!((view.task("B").unwrap().cost, view.plan.budget.spent), (usd("0.5"), usd("0.75")));
    let attempts = store.attempts("p").await.unwrap();
    let cost_of =
        |task: &str, fence: i64| attempts.iter().find(|x| x.task_id == task && x.fence == fence).unwrap().cost;
    assert_eq!(cost_of("A", a.lease.fence), usd("0.25"));
    assert_eq!(cost_of("B", b.lease.fence), usd("0.5"));
    assert_eq!(cost_of("B", b2.lease.fence), Usd::ZERO);
}

/// A dependent imported while its dependency's report is in flight is counted by one of
/// them: it never stays blocked on a task that is done.
async fn import_racing_a_report(store: Arc<dyn PlanStore>) {
    for round in 0..25 {
        let id = format!("race{round}");
        let spec = |tasks: &str| {
            plan(&format!(
                r#"{{"id": "{id}", "name": "Race", "defaults": {{"retry_backoff_seconds": 0}}, "tasks": [{tasks}]}}"#
            ))
        };
        let first = spec(&task("A", &[]));
        store.import_plan(Import::adding(&first, t(0))).await.unwrap();
        let a = claimed(store.claim(&id, "w", LEASE, t(1)).await.unwrap());
        let second = spec(&[task("A", &[]), task("B", &["A"])].join(","));
        let (reporter, importer) = (store.clone(), store.clone());
        let report = tokio::spawn(async move { reporter.finish(&a.lease, success(), Usd::ZERO, t(2)).await });
        let added = tokio::spawn(async move { importer.import_plan(Import::adding(&second, t(2))).await });
        report.await.unwrap().unwrap();
        added.await.unwrap().unwrap();
        let view = store.plan(&id).await.unwrap().unwrap();
        let b = view.task("B").unwrap();
        assert_eq!((b.status, b.deps_left), (TaskStatus::Ready, 0), "round {round}");
    }
}

/// Reports of tasks that share dependents, on a plan without and one with a budget (the
/// two report paths), with a cancel of a third plan, all at once: none deadlocks, and
/// every dependent is counted off once per dependency.
async fn concurrent_reports_share_dependents(store: Arc<dyn PlanStore>) {
    let roots: Vec<String> = (0..8).map(|i| format!("R{i}")).collect();
    let root_refs: Vec<&str> = roots.iter().map(String::as_str).collect();
    let mut tasks: Vec<String> = roots.iter().map(|r| task(r, &[])).collect();
    tasks.extend((0..24).map(|i| task(&format!("D{i:02}"), &root_refs)));
    for (id, budget) in [("fast", ""), ("general", r#""budget_usd": "100","#), ("cancelled", "")] {
        let spec = plan(&format!(
            r#"{{"id": "{id}", "name": "Shared", {budget} "defaults": {{"retry_backoff_seconds": 0, "attempt_budget_usd": "0.01"}}, "tasks": [{}]}}"#,
            tasks.join(",")
        ));
        store.import_plan(Import::adding(&spec, t(0))).await.unwrap();
    }
    let mut leases = Vec::new();
    for id in ["fast", "general", "cancelled"] {
        for w in 0..8 {
            leases.push(claimed(store.claim(id, &format!("w{w}"), LEASE, t(1)).await.unwrap()).lease);
        }
    }
    let mut joins = Vec::new();
    for lease in leases.into_iter().filter(|l| l.plan_id != "cancelled") {
        let store = store.clone();
        joins.push(tokio::spawn(async move {
            let cost = if lease.plan_id == "general" { usd("0.001") } else { Usd::ZERO };
            store.finish(&lease, success(), cost, t(2)).await.map(|_| ())
        }));
    }
    let canceller = store.clone();
    joins.push(tokio::spawn(async move { canceller.cancel_plan("cancelled", "admin", t(2)).await.map(|_| ()) }));
    for j in joins {
        j.await.unwrap().unwrap();
    }
    for id in ["fast", "general"] {
        let view = store.plan(id).await.unwrap().unwrap();
        for t in view.tasks.iter().filter(|t| t.spec.id.starts_with('D')) {
            assert_eq!((t.status, t.deps_left), (TaskStatus::Ready, 0), "{id}/{}", t.spec.id);
        }
        let ready = store.events(id).await.unwrap().iter().filter(|e| e.kind == "task_ready").count();
        assert_eq!(ready, 24, "{id}: each dependent became ready once");
    }
    let view = store.plan("cancelled").await.unwrap().unwrap();
    assert!(view.tasks.iter().all(|t| t.status == TaskStatus::Cancelled));
}

/// Who owns the integration branch: a new plan has no record; an import can record an
/// adopted branch (with its event) and a re-import without one keeps it; `record_branch`
/// replaces it and names the record it replaced; the record only concerns the branch it
/// names; a reset writes what it did to the branch into its `plan_reset` event.
async fn branch_records(store: Arc<dyn PlanStore>) {
    let spec = plan_with(r#""integration_branch": "feature","#, &task("A", &[]));
    import(&*store, &spec, ImportMode::Add).await.unwrap();
    let view = store.plan("p").await.unwrap().unwrap();
    assert_eq!(view.plan.branch, None, "nothing is recorded before the branch is created or adopted");

    let adopted = BranchRecord {
        name: "feature".into(),
        origin: BranchOrigin::Adopted,
        base: "1111111111111111111111111111111111111111".into(),
        recorded_at: t(1),
    };
    store
        .import_plan(Import {
            spec: &spec,
            mode: ImportMode::Add,
            skip: &[],
            verdicts: &[],
            apply: None,
            branch: Some(&adopted),
            now: t(1),
        })
        .await
        .unwrap();
    let view = store.plan("p").await.unwrap().unwrap();
    assert_eq!(view.plan.branch.as_ref(), Some(&adopted));
    assert_eq!(view.plan.branch_record(), Some(&adopted));
    for mode in [ImportMode::Add, ImportMode::Update] {
        import(&*store, &spec, mode).await.unwrap();
        assert_eq!(store.plan("p").await.unwrap().unwrap().plan.branch, Some(adopted.clone()), "a re-import keeps it");
    }
    let events = store.events("p").await.unwrap();
    let e = events.iter().find(|e| e.kind == "integration_branch_adopted").expect("an adoption event");
    assert_eq!((e.data["branch"].as_str(), e.data["origin"].as_str()), (Some("feature"), Some("adopted")));
    assert_eq!(e.data["previous"], serde_json::Value::Null);

    // The plan moves to another branch (an --update): the old record gives no right to it.
    let moved = plan_with(r#""integration_branch": "arbiter/p","#, &task("A", &[]));
    import(&*store, &moved, ImportMode::Update).await.unwrap();
    let view = store.plan("p").await.unwrap().unwrap();
    assert_eq!(view.plan.branch.as_ref().map(|b| b.name.as_str()), Some("feature"));
    assert_eq!(view.plan.branch_record(), None);
    let created = BranchRecord {
        name: "arbiter/p".into(),
        origin: BranchOrigin::Created,
        base: "2222222222222222222222222222222222222222".into(),
        recorded_at: t(2),
    };
    let previous = store.record_branch("p", &created, t(2)).await.unwrap();
    assert_eq!(previous, Some(adopted.clone()));
    let view = store.plan("p").await.unwrap().unwrap();
    assert_eq!(view.plan.branch_record(), Some(&created));
    let events = store.events("p").await.unwrap();
    let e = events.iter().find(|e| e.kind == "integration_branch_created").expect("a creation event");
    assert_eq!(e.data["base"].as_str(), Some(created.base.as_str()));
    assert_eq!(e.data["previous"]["origin"].as_str(), Some("adopted"));
    assert!(matches!(store.record_branch("nope", &created, t(2)).await, Err(StoreError::NoPlan { .. })));

    let reset = BranchReset {
        name: "arbiter/p".into(),
        old_tip: Some("3333333333333333333333333333333333333333".into()),
        new_tip: Some(created.base.clone()),
        kept: None,
    };
    store.reset_plan("p", false, Some(&reset), t(3)).await.unwrap();
    let events = store.events("p").await.unwrap();
    let e = events.iter().rfind(|e| e.kind == "plan_reset").expect("a reset event");
    assert_eq!(serde_json::from_value::<BranchReset>(e.data["branch"].clone()).unwrap(), reset);
    assert_eq!(store.plan("p").await.unwrap().unwrap().plan.branch_record(), Some(&created), "a reset keeps it");
    let failed = PlanEntry::BranchResetFailed { branch: reset.clone(), error: "test".into() };
    store.note_event("p", failed.clone(), t(4)).await.unwrap();
    let events = store.events("p").await.unwrap();
    assert_eq!(events.last().and_then(|e| e.entry()), Some(failed.into()));
    common::every_event_is_typed(&events);
}

/// A claimer waiting for work is woken when work appears (not only by its poll).
async fn wake_up(store: Arc<dyn PlanStore>, other: Arc<dyn PlanStore>) {
    import(&*store, &plan_with("", &task("A", &[])), ImportMode::Add).await.unwrap();
    let a = claimed(claim(&*store, "w", t(0)).await);
    let waiter = {
        let store = store.clone();
        tokio::spawn(async move { store.wait_for_work("p", Duration::from_secs(120)).await })
    };
    // Give the waiter time to start listening, then make work from another connection.
    for _ in 0..50 {
        if waiter.is_finished() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        let failed = AttemptResult::Failed { reason: "x".into(), retry: Retry::Now, run_id: None };
        if other.finish(&a.lease, failed, Usd::ZERO, t(1)).await.is_err() {
            other.set_budget("p", None, "admin", t(1)).await.unwrap();
        }
    }
    assert_eq!(waiter.await.unwrap(), Wake::Notified);
}

/// `events_after` resumes a plan's event log after an event id, in pages, and never shows
/// another plan's events.
async fn events_after(store: Arc<dyn PlanStore>) {
    let spec = plan_with("", &[task("A", &[]), task("B", &["A"])].join(","));
    import(store.as_ref(), &spec, ImportMode::Add).await.unwrap();
    let mut other = plan_with("", &task("X", &[]));
    other.id = "q".into();
    import(store.as_ref(), &other, ImportMode::Add).await.unwrap();
    let a = claimed(claim(store.as_ref(), "w1", t(1)).await);
    store.finish(&a.lease, success(), Usd::ZERO, t(2)).await.unwrap();

    let all = store.events("p").await.unwrap();
    assert!(all.len() >= 4, "{all:?}");
    assert_eq!(store.events_after("p", 0, 1000).await.unwrap(), all);
    let mut paged = Vec::new();
    let mut after = 0;
    loop {
        let page = store.events_after("p", after, 2).await.unwrap();
        if page.is_empty() {
            break;
        }
        assert!(page.len() <= 2);
        after = page.last().unwrap().id;
        paged.extend(page);
    }
    assert_eq!(paged, all);
    let last = all.last().unwrap().id;
    assert!(store.events_after("p", last, 10).await.unwrap().is_empty());
    assert!(store.events_after("q", 0, 10).await.unwrap().iter().all(|e| e.plan_id == "q"));
}

/// What a worker without a plan of its own looks at: plans with a task ready or running —
/// not a finished plan, not a cancelled one, not one whose tasks all wait on others.
async fn claimable_plans(store: Arc<dyn PlanStore>) {
    let with_id = |id: &str, tasks: &str| {
        plan(&format!(
            r#"{{"id": "{id}", "name": "Plan {id}", "defaults": {{"retry_backoff_seconds": 0}}, "tasks": [{tasks}]}}"#
        ))
    };
    import(&*store, &with_id("ready", &task("A", &[])), ImportMode::Add).await.unwrap();
    import(&*store, &with_id("done", &task("A", &[])), ImportMode::Add).await.unwrap();
    import(&*store, &with_id("gone", &task("A", &[])), ImportMode::Add).await.unwrap();
    import(&*store, &with_id("empty", ""), ImportMode::Add).await.unwrap();
    let finished = claimed(store.claim("done", "w", LEASE, t(1)).await.unwrap());
    store.finish(&finished.lease, success(), Usd::ZERO, t(2)).await.unwrap();
    store.cancel_plan("gone", "admin", t(3)).await.unwrap();
    assert_eq!(store.claimable_plans().await.unwrap(), ["ready"]);
    let running = claimed(store.claim("ready", "w", LEASE, t(4)).await.unwrap());
    assert_eq!(store.claimable_plans().await.unwrap(), ["ready"], "a running task's units may be ready");
    store.finish(&running.lease, success(), Usd::ZERO, t(5)).await.unwrap();
    assert!(store.claimable_plans().await.unwrap().is_empty());
}

/// A source (an issue's URL) makes one plan: a plan of another id from the same source is
/// refused, a create-only import of an existing id is refused, a stored source never
/// changes, and of many imports racing from one source exactly one wins.
async fn one_plan_per_source(store: Arc<dyn PlanStore>) {
    let from = |id: &str, source: &str| {
        plan(&format!(r#"{{"id": "{id}", "name": "Plan {id}", "source": "{source}", "tasks": [{}]}}"#, task("A", &[])))
    };
    let issue = "https://github.com/acme/web/issues/7";
    assert!(import(&*store, &from("a", issue), ImportMode::New).await.unwrap().created_plan);
    assert_eq!(store.plan_by_source(issue).await.unwrap().as_deref(), Some("a"));
    assert_eq!(store.plan_record("a").await.unwrap().unwrap().header.source.as_deref(), Some(issue));
    match import(&*store, &from("b", issue), ImportMode::New).await {
        Err(StoreError::SourceTaken { url, plan }) => assert_eq!((url.as_str(), plan.as_str()), (issue, "a")),
        other => panic!("expected SourceTaken, got {other:?}"),
    }
    assert!(matches!(import(&*store, &from("b", issue), ImportMode::Add).await, Err(StoreError::SourceTaken { .. })));
    assert!(store.plan("b").await.unwrap().is_none(), "nothing was written");
    assert!(matches!(import(&*store, &from("a", issue), ImportMode::New).await, Err(StoreError::PlanExists { .. })));
    // Re-imports keep the source; one that would change it is refused.
    import(&*store, &from("a", issue), ImportMode::Add).await.unwrap();
    let moved = from("a", "https://github.com/acme/web/issues/8");
    let err = import(&*store, &moved, ImportMode::Update).await.unwrap_err().to_string();
    assert!(err.contains("source cannot change"), "{err}");
    let mut unsourced = from("a", issue);
    unsourced.source = None;
    import(&*store, &unsourced, ImportMode::Update).await.unwrap();
    assert_eq!(store.plan_by_source(issue).await.unwrap().as_deref(), Some("a"));
    assert_eq!(store.plan_record("a").await.unwrap().unwrap().header.source.as_deref(), Some(issue));

    // Eight intakes of one issue at once, under different ids and under the same id.
    for same_id in [false, true] {
        let url = format!("https://github.com/acme/web/issues/{}", if same_id { 10 } else { 9 });
        let racers: Vec<_> = (0..8)
            .map(|i| {
                let store = store.clone();
                let spec = from(&if same_id { "same".to_string() } else { format!("r{i}") }, &url);
                tokio::spawn(async move { import(&*store, &spec, ImportMode::New).await })
            })
            .collect();
        let mut won = 0;
        for r in racers {
            match r.await.unwrap() {
                Ok(report) => {
                    assert!(report.created_plan);
                    won += 1;
                }
                Err(StoreError::SourceTaken { .. } | StoreError::PlanExists { .. }) => {}
                Err(e) => panic!("a racing import failed otherwise: {e}"),
            }
        }
        assert_eq!(won, 1, "exactly one import from {url} wins");
        assert!(store.plan_by_source(&url).await.unwrap().is_some());
    }
    let sourced = store.plans().await.unwrap().len();
    assert_eq!(sourced, 3, "a, one of r0..r7, same");
}

both!(
    import_validation,
    export_round_trip,
    dependencies,
    key_files,
    hundred_claimers,
    leases,
    concurrent_charges,
    budget_reservations,
    retries,
    cancel_and_reset,
    reset_keeps_imported_statuses,
    budget_changes,
    costs_as_incurred,
    import_racing_a_report,
    concurrent_reports_share_dependents,
    branch_records,
    events_after,
    claimable_plans,
    one_plan_per_source,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_wakes_waiting_claimers() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn PlanStore> = Arc::new(SqliteStore::open(&dir.path().join("arbiter.db")).await.unwrap());
    wake_up(store.clone(), store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_wakes_waiting_claimers_through_listen_notify() {
    let (url, name) = common::fresh_database().await;
    let waiting: Arc<dyn PlanStore> = Arc::new(PgStore::connect(&url).await.unwrap());
    // A second store: its own pool, as another process would have.
    let other: Arc<dyn PlanStore> = Arc::new(PgStore::connect(&url).await.unwrap());
    wake_up(waiting, other).await;
    common::drop_database(&name).await;
}

/// A report on Postgres reads its task and its dependents only, however the statements of
/// `arbiter_finish_fast` are planned: on a database that plans every statement generically
/// (what PL/pgSQL may settle on after five calls; on fresh tables, without statistics), ten
/// reports in a plan of 2,000 tasks fetch a few dozen rows of `plan_tasks` and scan none.
/// (A generic plan that hashed the plan's tasks against the dependents made reports fall to a
/// third on 22,000 tasks; docs/BENCHMARKS.md. Timing is the benchmark's: this counts rows.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_reports_read_their_task_and_dependents_only() {
    use sqlx::Row;
    let (url, name) = common::fresh_database().await;
    let mut admin = <sqlx::PgConnection as sqlx::Connection>::connect(&common::admin_url()).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("ALTER DATABASE {name} SET plan_cache_mode = force_generic_plan")))
        .execute(&mut admin)
        .await
        .unwrap();
    let store = PgStore::connect(&url).await.unwrap();
    let mut tasks: Vec<String> = (0..10).map(|i| task(&format!("a{i}"), &[])).collect();
    tasks.extend((0..10).map(|i| task(&format!("b{i}"), &[&format!("a{i}")])));
    tasks.extend((0..1980).map(|i| task(&format!("f{i:04}"), &[])));
    import(&store, &plan_with("", &tasks.join(",")), ImportMode::Add).await.unwrap();
    let mut leases = Vec::new();
    for i in 0..10 {
        let c = claimed(claim(&store, &format!("w{i}"), t(1)).await);
        assert_eq!(c.lease.task_id, format!("a{i}"));
        leases.push(c.lease);
    }

    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&url).await.unwrap();
    let mode: String = sqlx::query_scalar("SHOW plan_cache_mode").fetch_one(&mut conn).await.unwrap();
    assert_eq!(mode, "force_generic_plan");
    let mut tx = sqlx::Connection::begin(&mut conn).await.unwrap();
    for (i, lease) in leases.iter().enumerate() {
        let ready: Option<Vec<String>> = sqlx::query_scalar(
            "SELECT arbiter_finish_fast($1, $2, 'done', 0, NULL, NULL, NULL, $3, $4, 'succeeded', 'task_done', '{}')",
        )
        .bind(&lease.plan_id)
        .bind(&lease.task_id)
        .bind(t(2).0)
        .bind(lease.fence)
        .fetch_one(&mut *tx)
        .await
        .unwrap();
        assert_eq!(ready, Some(vec![format!("b{i}")]), "the report of {} readies its dependent", lease.task_id);
    }
    let row = sqlx::query(
        "SELECT seq_scan, seq_tup_read, idx_tup_fetch FROM pg_stat_xact_user_tables WHERE relname = 'plan_tasks'",
    )
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    let (scans, scanned, fetched): (i64, i64, i64) =
        (row.get("seq_scan"), row.get("seq_tup_read"), row.get("idx_tup_fetch"));
    assert_eq!((scans, scanned), (0, 0), "a report never scans plan_tasks");
    assert!(fetched <= 60, "ten reports fetched {fetched} rows of plan_tasks: more than their tasks and dependents");
    tx.rollback().await.unwrap();
    drop(conn);
    drop(store);
    common::drop_database(&name).await;
}
