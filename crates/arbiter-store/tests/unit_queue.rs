//! The unit queue's conformance suite: attempts spread over candidate units and an
//! evaluation, on SQLite (a temporary file) and Postgres (a fresh database on the real
//! server), through the same `UnitQueue` port.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use common::both;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use arbiter_core::money::Usd;
use arbiter_core::plan::PlanSpec;
use arbiter_core::plan::file::{Syntax, parse};
use arbiter_core::plan::state::TaskStatus;
use arbiter_core::settings::{ConfigFile, RunSettings};
use arbiter_core::status::CandidateStatus;
use arbiter_core::time::Timestamp;
use arbiter_store::StoreError;
use arbiter_store::plans::*;
use arbiter_store::postgres::PgStore;
use arbiter_store::sqlite::SqliteStore;
use arbiter_store::units::*;

const SECOND: i64 = 1_000_000;
const LEASE: Duration = Duration::from_secs(30);

fn t(s: i64) -> Timestamp {
    Timestamp(1_800_000_000 * SECOND + s * SECOND)
}

fn plan(tasks: &str, extra: &str) -> PlanSpec {
    let json = format!(
        r#"{{"id": "p", "name": "Plan", {extra} "defaults": {{"retry_backoff_seconds": 0}}, "tasks": [{tasks}]}}"#
    );
    parse(&json, Syntax::Json).unwrap_or_else(|e| panic!("{e}\n{json}"))
}

fn task(id: &str, deps: &[&str]) -> String {
    format!(r#"{{"id": "{id}", "title": "task {id}", "dependencies": {}}}"#, serde_json::to_string(deps).unwrap())
}

async fn import(store: &dyn UnitQueue, spec: &PlanSpec) {
    store.import_plan(Import::adding(spec, t(0))).await.unwrap();
}

fn caps(have: &[&str]) -> Capabilities {
    Capabilities::Only(have.iter().map(|s| s.to_string()).collect())
}

fn unit(name: &str, kind: UnitKind, needs: &[&str]) -> UnitSpec {
    UnitSpec { name: name.into(), kind, needs: needs.iter().map(|s| s.to_string()).collect() }
}

/// c01 needs runner x, c02 runner y, the evaluation nothing.
fn two_candidates() -> Vec<UnitSpec> {
    vec![
        unit("c01", UnitKind::Candidate, &["runner:x"]),
        unit("c02", UnitKind::Candidate, &["runner:y"]),
        unit("evaluation", UnitKind::Evaluation, &[]),
    ]
}

async fn claim_task(store: &dyn UnitQueue, worker: &str, at: Timestamp) -> Claimed {
    match store.claim("p", worker, LEASE, at).await.unwrap() {
        ClaimOutcome::Claimed(c) => *c,
        ClaimOutcome::Idle(i) => panic!("expected a claim, got {i:?}"),
    }
}

async fn claim_unit(store: &dyn UnitQueue, worker: &str, have: &Capabilities, at: Timestamp) -> Option<UnitClaim> {
    store.claim_unit(Some("p"), worker, have, LEASE, at).await.unwrap()
}

async fn task_record(store: &dyn UnitQueue, id: &str) -> TaskRecord {
    store.plan("p").await.unwrap().unwrap().task(id).unwrap().clone()
}

fn done(result: UnitResult) -> UnitOutcome {
    UnitOutcome::Done { result }
}

/// The settings an attempt spreads with: the defaults, but for a value the configuration
/// does not default to (so that a round trip that lost it would show).
fn settings() -> RunSettings {
    let mut settings = RunSettings::resolve_values(&ConfigFile::default(), &[]).unwrap();
    settings.keep_worktrees.value = !settings.keep_worktrees.value;
    settings
}

/// An attempt spreads over its units: each worker claims only what it can run, the
/// evaluation waits for every candidate, and its report ends the attempt.
async fn spread_and_evaluate(store: Arc<dyn UnitQueue>) {
    import(&*store, &plan(&[task("A", &[]), task("B", &["A"])].join(","), "")).await;
    let a = claim_task(&*store, "starter", t(1)).await;
    store.start_units(&a.lease, "run-a", "base-sha", &settings(), &two_candidates(), t(1)).await.unwrap();
    // Its settings are kept with it, as they were.
    assert_eq!(store.attempt_settings("p", "A", a.lease.fence).await.unwrap(), Some(settings()));
    assert_eq!(store.attempt_settings("p", "A", a.lease.fence + 1).await.unwrap(), None, "another attempt");
    // The task's own lease no longer runs out, and no longer names its claimer.
    let record = task_record(&*store, "A").await;
    assert_eq!((record.lease_owner, record.lease_expires), (None, None));
    assert!(store.sweep_expired(t(10_000)).await.unwrap().is_empty());

    let (x, y, bare) = (caps(&["runner:x"]), caps(&["runner:y"]), caps(&[]));
    assert!(claim_unit(&*store, "bare", &bare, t(2)).await.is_none(), "a worker without the runners claims nothing");
    let c1 = claim_unit(&*store, "wx", &x, t(2)).await.expect("c01 for runner x");
    assert_eq!(
        (c1.lease.name.as_str(), c1.lease.kind, c1.lease.run_id.as_str()),
        ("c01", UnitKind::Candidate, "run-a")
    );
    assert_eq!((c1.lease.attempt.fence, c1.lease.attempt.attempt), (a.lease.fence, 1));
    assert_eq!(c1.task.id, "A");
    assert!(claim_unit(&*store, "wx", &x, t(2)).await.is_none(), "c02 needs runner y; the evaluation waits");
    let c2 = claim_unit(&*store, "wy", &y, t(2)).await.expect("c02 for runner y");
    assert_eq!(c2.lease.name, "c02");

    let f = store
        .finish_unit(&c1.lease, done(UnitResult::Status(CandidateStatus::Finished)), Usd::parse("0.25").unwrap(), t(3))
        .await;
    assert!(!f.unwrap().evaluation_ready);
    assert!(claim_unit(&*store, "bare", &bare, t(3)).await.is_none(), "the evaluation waits for c02");
    let f = store
        .finish_unit(&c2.lease, done(UnitResult::Status(CandidateStatus::AgentFailed)), Usd::ZERO, t(4))
        .await
        .unwrap();
    assert!(f.evaluation_ready);

    let eval = claim_unit(&*store, "bare", &bare, t(5)).await.expect("the evaluation, for any worker");
    assert_eq!(eval.lease.kind, UnitKind::Evaluation);
    let units = store.units_of("p", "A", a.lease.fence).await.unwrap();
    let results: Vec<_> = units.iter().filter_map(|u| u.result.clone()).collect();
    assert_eq!(
        results,
        vec![UnitResult::Status(CandidateStatus::Finished), UnitResult::Status(CandidateStatus::AgentFailed)]
    );
    assert_eq!(units[0].cost, Usd::parse("0.25").unwrap());
    assert_eq!(store.running_units("p").await.unwrap().len(), 3);

    store.finish_unit(&eval.lease, done(UnitResult::Status(CandidateStatus::Finished)), Usd::ZERO, t(6)).await.unwrap();
    let result = AttemptResult::Succeeded { run_id: Some("run-a".into()), commit: Some("abc".into()) };
    let finished = store.finish(&eval.lease.attempt, result, Usd::ZERO, t(6)).await.unwrap();
    assert_eq!((finished.status, finished.newly_ready.clone()), (TaskStatus::Done, vec!["B".to_string()]));
    let record = task_record(&*store, "A").await;
    assert_eq!((record.run_id.as_deref(), record.cost), (Some("run-a"), Usd::parse("0.25").unwrap()));
    assert!(store.running_units("p").await.unwrap().is_empty(), "a finished attempt has no running units");
    let kinds: Vec<String> = store.events("p").await.unwrap().into_iter().map(|e| e.kind).collect();
    for kind in ["units_started", "unit_claimed", "unit_done", "evaluation_ready", "task_done"] {
        assert!(kinds.iter().any(|k| k == kind), "no {kind} event in {kinds:?}");
    }
    common::every_event_is_typed(&store.events("p").await.unwrap());
}

/// A unit whose lease runs out goes back to the queue; its worker's late report is refused
/// (its cost charged); after the last try a candidate is lost and the evaluation goes on.
async fn unit_leases(store: Arc<dyn UnitQueue>) {
    import(&*store, &plan(&task("A", &[]), "")).await;
    let a = claim_task(&*store, "starter", t(1)).await;
    store.start_units(&a.lease, "run-a", "base-sha", &settings(), &two_candidates(), t(1)).await.unwrap();
    let all = Capabilities::Any;
    let first = claim_unit(&*store, "w1", &all, t(2)).await.unwrap();
    assert_eq!(first.lease.name, "c01");
    // Renewed in time, it stays; not renewed, it runs out.
    assert!(store.heartbeat_unit(&first.lease, LEASE, t(20)).await.unwrap().is_some());
    assert!(store.sweep_expired_units(t(40)).await.unwrap().is_empty());
    let taken = store.sweep_expired_units(t(51)).await.unwrap();
    assert_eq!(taken.len(), 1);
    assert!(!taken[0].given_up);
    assert!(store.heartbeat_unit(&first.lease, LEASE, t(52)).await.unwrap().is_none());
    let second = claim_unit(&*store, "w2", &all, t(52)).await.unwrap();
    assert_eq!((second.lease.name.as_str(), second.lease.fence), ("c01", first.lease.fence + 1));
    let late = store
        .finish_unit(
            &first.lease,
            done(UnitResult::Status(CandidateStatus::Finished)),
            Usd::parse("0.5").unwrap(),
            t(53),
        )
        .await;
    assert!(matches!(late, Err(StoreError::StaleUnit { .. })), "{late:?}");
    let spent = store.plan("p").await.unwrap().unwrap().plan.budget.spent;
    assert_eq!(spent, Usd::parse("0.5").unwrap(), "the refused report's cost is charged");
    store
        .finish_unit(&second.lease, done(UnitResult::Status(CandidateStatus::Finished)), Usd::ZERO, t(54))
        .await
        .unwrap();

    // c02 runs out MAX_UNIT_TRIES times: lost; the evaluation becomes ready without it.
    let mut at = 60;
    for try_ in 1..=MAX_UNIT_TRIES {
        let c = claim_unit(&*store, &format!("dying-{try_}"), &all, t(at)).await.unwrap();
        assert_eq!(c.lease.name, "c02");
        at += 40;
        let taken = store.sweep_expired_units(t(at)).await.unwrap();
        assert_eq!(taken[0].given_up, try_ == MAX_UNIT_TRIES, "try {try_}");
    }
    let units = store.units_of("p", "A", a.lease.fence).await.unwrap();
    assert_eq!(units[1].status, UnitStatus::Done);
    assert!(
        matches!(&units[1].result, Some(UnitResult::Lost(why)) if why.contains("3 times")),
        "{:?}",
        units[1].result
    );
    // The evaluation, lost as often, fails the attempt (retried: attempts are left).
    for try_ in 1..=MAX_UNIT_TRIES {
        let e = claim_unit(&*store, &format!("evaluator-{try_}"), &all, t(at)).await.unwrap();
        assert_eq!(e.lease.kind, UnitKind::Evaluation);
        at += 40;
        store.sweep_expired_units(t(at)).await.unwrap();
    }
    let record = task_record(&*store, "A").await;
    assert_eq!(record.status, TaskStatus::Ready, "{:?}", record.reason);
    assert!(record.reason.unwrap_or_default().contains("evaluation was lost"));
    // The old attempt's units are never claimed again.
    assert!(claim_unit(&*store, "late", &all, t(at)).await.is_none());
    let again = claim_task(&*store, "starter", t(at)).await;
    assert_eq!(again.lease.attempt, 2);
    common::every_event_is_typed(&store.events("p").await.unwrap());
}

/// A released unit (SIGTERM) and the units of a worker known to be dead go back at once
/// without counting a try; a cancelled plan's units are never claimed.
async fn releases(store: Arc<dyn UnitQueue>) {
    import(&*store, &plan(&[task("A", &[]), task("B", &[])].join(","), "")).await;
    let a = claim_task(&*store, "starter", t(1)).await;
    store.start_units(&a.lease, "run-a", "base-sha", &settings(), &two_candidates(), t(1)).await.unwrap();
    let all = Capabilities::Any;
    let c = claim_unit(&*store, "w1", &all, t(2)).await.unwrap();
    let reason = "the worker was stopped".to_string();
    store.finish_unit(&c.lease, UnitOutcome::Released { reason }, Usd::ZERO, t(3)).await.unwrap();
    let c = claim_unit(&*store, "w2", &all, t(3)).await.unwrap();
    assert_eq!(c.lease.name, "c01");
    let d = claim_unit(&*store, "w2", &all, t(3)).await.unwrap();
    assert_eq!(d.lease.name, "c02");
    // A live unit lease holds the plan against a reset, like a task's.
    let held = store.reset_plan("p", false, None, t(4)).await;
    assert!(
        matches!(&held, Err(StoreError::LeasesHeld { tasks, .. }) if tasks == &["A (worker w2)".to_string()]),
        "{held:?}"
    );
    let taken = store.release_unit_workers("p", &["w2".to_string()], t(4)).await.unwrap();
    assert_eq!(taken.len(), 2);
    let units = store.units_of("p", "A", a.lease.fence).await.unwrap();
    assert!(units.iter().all(|u| u.tries == 0), "releases do not count: {units:?}");
    // The starting worker's lease went to the units: releasing it takes nothing back.
    assert!(store.release_workers("p", &["starter".to_string()], "gone", t(5)).await.unwrap().is_empty());
    store.cancel_plan("p", "admin", t(6)).await.unwrap();
    assert!(claim_unit(&*store, "w3", &all, t(7)).await.is_none(), "a cancelled plan's units are not claimed");
    let stale = store.start_units(&a.lease, "run-x", "base-sha", &settings(), &two_candidates(), t(8)).await;
    assert!(matches!(stale, Err(StoreError::StaleLease { .. })), "{stale:?}");
}

/// A worker looks at the ready tasks before it claims one it can run.
async fn chosen_claims(store: Arc<dyn UnitQueue>) {
    import(&*store, &plan(&[task("A", &[]), task("B", &[]), task("C", &["A"])].join(","), "")).await;
    let ready: Vec<String> = store.ready_tasks("p", t(1), 0, 10).await.unwrap().into_iter().map(|s| s.id).collect();
    assert_eq!(ready, vec!["A", "B"]);
    let second: Vec<String> = store.ready_tasks("p", t(1), 1, 10).await.unwrap().into_iter().map(|s| s.id).collect();
    assert_eq!(second, vec!["B"]);
    let b = match store.claim_among("p", &["B".into()], "w", LEASE, t(1)).await.unwrap() {
        ClaimOutcome::Claimed(c) => *c,
        ClaimOutcome::Idle(i) => panic!("B is ready: {i:?}"),
    };
    assert_eq!(b.lease.task_id, "B");
    let b_or_c = ["B".to_string(), "C".to_string()];
    assert!(matches!(store.claim_among("p", &b_or_c, "w", LEASE, t(1)).await.unwrap(), ClaimOutcome::Idle(_)));
    // Of several, the best that is ready; none given: the plan's counts.
    let a = match store.claim_among("p", &["C".into(), "A".into()], "w", LEASE, t(1)).await.unwrap() {
        ClaimOutcome::Claimed(c) => *c,
        ClaimOutcome::Idle(i) => panic!("A is ready: {i:?}"),
    };
    assert_eq!(a.lease.task_id, "A");
    match store.claim_among("p", &[], "w", LEASE, t(1)).await.unwrap() {
        ClaimOutcome::Idle(i) => assert_eq!((i.running, i.ready), (2, 0)),
        ClaimOutcome::Claimed(c) => panic!("nothing was asked for: {c:?}"),
    }
    assert!(store.ready_tasks("p", t(1), 0, 10).await.unwrap().is_empty());

    // Whether any unfinished task names its own runners or candidates (a description that
    // only mentions them does not count).
    assert!(!store.tasks_choose_runners("p").await.unwrap());
    let own = r#"{"id": "R", "title": "r", "description": "say \"runners\": x", "runners": ["command"]}"#;
    let mentions = r#"{"id": "M", "title": "m", "description": "\"candidates\": 3 and \"runners\":"}"#;
    let mixed = PlanSpec { id: "m".into(), ..plan(&[own, mentions].join(","), "") };
    import(&*store, &mixed).await;
    assert!(store.tasks_choose_runners("m").await.unwrap());
    let only_mentions = PlanSpec { id: "n".into(), ..plan(mentions, "") };
    import(&*store, &only_mentions).await;
    assert!(!store.tasks_choose_runners("n").await.unwrap());

    // A plan with a budget takes the general path, which chooses among them the same way.
    let budgeted =
        PlanSpec { id: "q".into(), ..plan(&[task("X", &[]), task("Y", &[])].join(","), r#""budget_usd": "5","#) };
    import(&*store, &budgeted).await;
    let y = match store.claim_among("q", &["Y".into()], "w", LEASE, t(1)).await.unwrap() {
        ClaimOutcome::Claimed(c) => *c,
        ClaimOutcome::Idle(i) => panic!("Y is ready: {i:?}"),
    };
    assert_eq!((y.lease.task_id.as_str(), y.lease.reserved), ("Y", Usd::parse("1").unwrap()));
    assert!(matches!(store.claim_among("q", &["Y".into()], "w", LEASE, t(1)).await.unwrap(), ClaimOutcome::Idle(_)));
}

/// Many workers claiming at once: every unit is leased to exactly one of them.
async fn concurrent_unit_claims(store: Arc<dyn UnitQueue>) {
    let tasks: Vec<String> = (0..10).map(|i| task(&format!("T{i:02}"), &[])).collect();
    import(&*store, &plan(&tasks.join(","), "")).await;
    for _ in 0..10 {
        let c = claim_task(&*store, "starter", t(1)).await;
        let units: Vec<UnitSpec> = (1..=4)
            .map(|i| unit(&format!("c{i:02}"), UnitKind::Candidate, &[]))
            .chain([unit("evaluation", UnitKind::Evaluation, &[])])
            .collect();
        store
            .start_units(&c.lease, &format!("run-{}", c.lease.task_id), "base-sha", &settings(), &units, t(1))
            .await
            .unwrap();
    }
    let mut workers = tokio::task::JoinSet::new();
    for w in 0..8 {
        let store = store.clone();
        workers.spawn(async move {
            let mut got = Vec::new();
            while let Some(c) =
                store.claim_unit(Some("p"), &format!("w{w}"), &Capabilities::Any, LEASE, t(2)).await.unwrap()
            {
                got.push((c.lease.attempt.task_id.clone(), c.lease.name.clone()));
                store
                    .finish_unit(&c.lease, done(UnitResult::Error(format!("by w{w}"))), Usd::ZERO, t(2))
                    .await
                    .unwrap();
            }
            got
        });
    }
    let mut all = Vec::new();
    while let Some(joined) = workers.join_next().await {
        all.extend(joined.unwrap());
    }
    let distinct: BTreeSet<_> = all.iter().cloned().collect();
    assert_eq!(distinct.len(), all.len(), "a unit was claimed twice");
    // Every candidate and every evaluation (ready once its candidates were done).
    assert_eq!(all.len(), 50, "{all:?}");
}

/// The candidates of one attempt finishing at the same moment: whichever finishes last makes
/// the evaluation ready, exactly once (each would otherwise see the others still running).
async fn concurrent_candidate_finishes(store: Arc<dyn UnitQueue>) {
    let tasks: Vec<String> = (0..12).map(|i| task(&format!("T{i:02}"), &[])).collect();
    import(&*store, &plan(&tasks.join(","), "")).await;
    let mut held = Vec::new();
    for _ in 0..12 {
        let c = claim_task(&*store, "starter", t(1)).await;
        let units: Vec<UnitSpec> = (1..=4)
            .map(|i| unit(&format!("c{i:02}"), UnitKind::Candidate, &[]))
            .chain([unit("evaluation", UnitKind::Evaluation, &[])])
            .collect();
        store
            .start_units(&c.lease, &format!("run-{}", c.lease.task_id), "base-sha", &settings(), &units, t(1))
            .await
            .unwrap();
    }
    while let Some(c) = store.claim_unit(Some("p"), "w", &Capabilities::Any, LEASE, t(2)).await.unwrap() {
        held.push(c.lease);
    }
    assert_eq!(held.len(), 48, "every candidate is claimed before any finishes");
    let start = Arc::new(tokio::sync::Barrier::new(held.len()));
    let mut finishing = tokio::task::JoinSet::new();
    for lease in held {
        let (store, start) = (store.clone(), start.clone());
        finishing.spawn(async move {
            start.wait().await;
            let f = store
                .finish_unit(&lease, done(UnitResult::Status(CandidateStatus::Finished)), Usd::ZERO, t(3))
                .await
                .unwrap();
            (lease.attempt.task_id.clone(), f.evaluation_ready)
        });
    }
    let mut ready = Vec::new();
    while let Some(joined) = finishing.join_next().await {
        let (task, evaluation_ready) = joined.unwrap();
        if evaluation_ready {
            ready.push(task);
        }
    }
    ready.sort();
    let expected: Vec<String> = (0..12).map(|i| format!("T{i:02}")).collect();
    assert_eq!(ready, expected, "each evaluation became ready once, when its last candidate finished");
    let mut evaluations = BTreeSet::new();
    while let Some(c) = store.claim_unit(Some("p"), "e", &Capabilities::Any, LEASE, t(4)).await.unwrap() {
        assert_eq!(c.lease.kind, UnitKind::Evaluation);
        evaluations.insert(c.lease.attempt.task_id.clone());
    }
    assert_eq!(evaluations.len(), 12);
}

/// A worker that cannot run a unit refuses it: the unit goes to another worker (the
/// refusing one is not given it again for a while), the task's reason says what holds it up,
/// and after its last try a candidate is lost (the evaluation goes on without it) and an
/// evaluation fails its attempt, saying why.
async fn refusals(store: Arc<dyn UnitQueue>) {
    import(&*store, &plan(&task("A", &[]), "")).await;
    let a = claim_task(&*store, "starter", t(1)).await;
    store.start_units(&a.lease, "run-a", "base-sha", &settings(), &two_candidates(), t(1)).await.unwrap();
    let any = Capabilities::Any;
    let refuse = |why: &str| UnitOutcome::Refused { reason: why.to_string() };

    let c1 = claim_unit(&*store, "w1:1", &any, t(2)).await.unwrap();
    assert_eq!(c1.lease.name, "c01");
    let f = store.finish_unit(&c1.lease, refuse("cannot fetch"), Usd::ZERO, t(2)).await.unwrap();
    assert!(!f.given_up && !f.evaluation_ready);
    let reason = task_record(&*store, "A").await.reason.unwrap_or_default();
    assert!(
        reason.contains("c01 is waiting for another worker (try 1 of 3)")
            && reason.contains("w1 could not run it: cannot fetch"),
        "{reason}"
    );
    // The refusing worker (any of its slots) is given the other candidate, not c01 again.
    let c2 = claim_unit(&*store, "w1:2", &any, t(3)).await.unwrap();
    assert_eq!(c2.lease.name, "c02");
    store.finish_unit(&c2.lease, refuse("cannot fetch"), Usd::ZERO, t(3)).await.unwrap();
    assert!(claim_unit(&*store, "w1:1", &any, t(4)).await.is_none(), "w1 was given a unit it refused");
    // Another worker takes c01; the task's note is cleared.
    let again = claim_unit(&*store, "w2:1", &any, t(5)).await.unwrap();
    assert_eq!((again.lease.name.as_str(), again.lease.fence), ("c01", c1.lease.fence + 1));
    assert_eq!(task_record(&*store, "A").await.reason, None);
    store.finish_unit(&again.lease, refuse("no sandbox"), Usd::ZERO, t(5)).await.unwrap();
    let last = claim_unit(&*store, "w3:1", &any, t(6)).await.unwrap();
    assert_eq!(last.lease.name, "c01");
    // Its last try: given up, a lost candidate with the reason.
    let f = store.finish_unit(&last.lease, refuse("no sandbox either"), Usd::ZERO, t(6)).await.unwrap();
    assert!(f.given_up && !f.evaluation_ready, "{f:?}");
    let units = store.units_of("p", "A", a.lease.fence).await.unwrap();
    match &units[0].result {
        Some(UnitResult::Lost(why)) => {
            assert!(why.contains("no worker could run it (3 tries") && why.contains("w3: no sandbox either"), "{why}")
        }
        other => panic!("c01 was not lost: {other:?}"),
    }
    // After the cooldown, the refusing worker may try c02 again; its candidate done, the
    // evaluation is ready though c01 is lost.
    let later = t(3).0 + REFUSAL_COOLDOWN.as_micros() as i64 + SECOND;
    let c2 = claim_unit(&*store, "w1:1", &any, Timestamp(later)).await.expect("c02 after the cooldown");
    assert_eq!(c2.lease.name, "c02");
    let f = store
        .finish_unit(&c2.lease, done(UnitResult::Status(CandidateStatus::Finished)), Usd::ZERO, Timestamp(later))
        .await;
    assert!(f.unwrap().evaluation_ready);
    // The evaluation, refused on its every try, fails the attempt with the reason.
    for (n, w) in ["e1:1", "e2:1", "e3:1"].iter().enumerate() {
        let at = Timestamp(later + n as i64 * SECOND);
        let eval = claim_unit(&*store, w, &any, at).await.expect("the evaluation");
        assert_eq!(eval.lease.kind, UnitKind::Evaluation);
        store.finish_unit(&eval.lease, refuse("cannot read its assignment"), Usd::ZERO, at).await.unwrap();
    }
    let record = task_record(&*store, "A").await;
    assert_eq!(record.status, TaskStatus::Ready, "the failed attempt is retried");
    let reason = record.reason.unwrap_or_default();
    assert!(
        reason.contains("its evaluation was lost: no worker could run it")
            && reason.contains("e3: cannot read its assignment"),
        "{reason}"
    );
    let kinds: Vec<String> = store.events("p").await.unwrap().into_iter().map(|e| e.kind).collect();
    for kind in ["unit_expired", "unit_given_up", "attempt_failed_retry"] {
        assert!(kinds.iter().any(|k| k == kind), "no {kind} event in {kinds:?}");
    }
    common::every_event_is_typed(&store.events("p").await.unwrap());
}

both!(
    refusals,
    spread_and_evaluate,
    unit_leases,
    releases,
    chosen_claims,
    concurrent_unit_claims,
    concurrent_candidate_finishes
);
