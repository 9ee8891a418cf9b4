//! The plan queue's rules held to one behaviour. Claims and reports have a fast path (one
//! statement on Postgres, one script on SQLite) and a general path (a transaction of
//! several statements in Rust); the rules they keep are written in three languages. These
//! property tests generate plans (dependencies, attempts allowed, budgets) and what workers
//! do to them (claims, successes, failures, releases, heartbeats, costs, time passing, lease
//! sweeps; and for tournaments spread over units: spreading, unit claims, results, refusals,
//! evaluations), run each scenario on four stores — SQLite and Postgres, each with and
//! without its fast paths — and require the same outcome of every step, the same states at
//! the end and the same event log.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use arbiter_core::money::Usd;
use arbiter_core::plan::file::{Syntax, parse};
use arbiter_core::plan::state::UnitResult;
use arbiter_core::settings::{ConfigFile, RunSettings};
use arbiter_core::time::Timestamp;
use arbiter_store::plans::*;
use arbiter_store::postgres::PgStore;
use arbiter_store::sqlite::SqliteStore;
use arbiter_store::units::*;
use proptest::prelude::*;
use proptest::test_runner::{RngAlgorithm, TestRng, TestRunner};

const SECOND: i64 = 1_000_000;
const LEASE: Duration = Duration::from_secs(30);

/// What a worker does next.
#[derive(Clone, Debug)]
enum Step {
    /// Worker `0..3` claims.
    Claim(u8),
    /// The lease `n` (modulo those held) ends so, having spent `cost` cents.
    Report(usize, Ending, u8),
    /// The lease `n` (modulo) is renewed.
    Heartbeat(usize),
    /// Time passes.
    Wait(u8),
    /// Expired leases are taken back.
    Sweep,
}

#[derive(Clone, Copy, Debug)]
enum Ending {
    Succeeded,
    FailedRetry,
    FailedAtOnce,
    FailedForGood,
    Released,
}

impl Ending {
    fn result(self) -> AttemptResult {
        let failed = |retry| AttemptResult::Failed { reason: "gates failed".into(), retry, run_id: None };
        match self {
            Ending::Succeeded => AttemptResult::Succeeded { run_id: Some("run".into()), commit: None },
            Ending::FailedRetry => failed(Retry::AfterBackoff),
            Ending::FailedAtOnce => failed(Retry::Now),
            Ending::FailedForGood => failed(Retry::Never),
            Ending::Released => AttemptResult::Released { reason: "worker stopped".into() },
        }
    }
}

/// A plan: for each task, the earlier tasks it depends on (bit masks), and its attempts.
#[derive(Clone, Debug)]
struct Scenario {
    deps: Vec<u8>,
    max_attempts: u32,
    backoff: u64,
    /// The plan's budget and what an attempt reserves (a plan with a budget always takes
    /// the general path: the stores are then compared with each other).
    budget: Option<(&'static str, &'static str)>,
    steps: Vec<Step>,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    let ending = prop_oneof![
        4 => Just(Ending::Succeeded),
        1 => Just(Ending::FailedRetry),
        1 => Just(Ending::FailedAtOnce),
        1 => Just(Ending::FailedForGood),
        1 => Just(Ending::Released),
    ];
    let step = prop_oneof![
        4 => (0u8..3).prop_map(Step::Claim),
        3 => (0usize..4, ending, prop_oneof![3 => Just(0u8), 1 => 1u8..30]).prop_map(|(n, e, c)| Step::Report(n, e, c)),
        2 => (0usize..4).prop_map(Step::Heartbeat),
        2 => (1u8..70).prop_map(Step::Wait),
        2 => Just(Step::Sweep),
    ];
    (
        proptest::collection::vec(any::<u8>(), 1..7),
        1u32..4,
        prop_oneof![Just(0u64), Just(5u64)],
        prop_oneof![2 => Just(None), 1 => Just(Some(("0.50", "0.20"))), 1 => Just(Some(("0.10", "0.05")))],
        proptest::collection::vec(step, 1..40),
    )
        .prop_map(|(deps, max_attempts, backoff, budget, steps)| Scenario {
            deps,
            max_attempts,
            backoff,
            budget,
            steps,
        })
}

impl Scenario {
    fn plan_json(&self, id: &str) -> String {
        let tasks: Vec<String> = self
            .deps
            .iter()
            .enumerate()
            .map(|(i, mask)| {
                let deps: Vec<String> = (0..i).filter(|j| mask & (1 << j) != 0).map(|j| format!("\"t{j}\"")).collect();
                format!(r#"{{"id": "t{i}", "title": "task {i}", "dependencies": [{}]}}"#, deps.join(", "))
            })
            .collect();
        let (budget, reserve) = match self.budget {
            Some((budget, reserve)) => {
                (format!(r#""budget_usd": "{budget}","#), format!(r#", "attempt_budget_usd": "{reserve}""#))
            }
            None => (String::new(), String::new()),
        };
        format!(
            r#"{{"id": "{id}", "name": "differential", {budget} "defaults": {{"max_attempts": {}, "retry_backoff_seconds": {}{reserve}}}, "tasks": [{}]}}"#,
            self.max_attempts,
            self.backoff,
            tasks.join(", ")
        )
    }
}

/// Runs `s` as plan `id` on `store` and writes down everything it answered, in a form the
/// four stores can be compared by (no claim tokens, no store-wide event ids).
async fn play(store: &dyn UnitQueue, s: &Scenario, id: &str) -> Vec<String> {
    let spec = parse(&s.plan_json(id), Syntax::Json).unwrap();
    let mut said = Vec::new();
    let mut now = Timestamp(1_800_000_000 * SECOND);
    let import =
        Import { spec: &spec, mode: ImportMode::Add, skip: &[], verdicts: &[], apply: None, branch: None, now };
    let report = store.import_plan(import).await.unwrap();
    said.push(format!("import: added {:?}", report.added));
    let mut held: Vec<Lease> = Vec::new();
    for step in &s.steps {
        let line = match step {
            Step::Claim(w) => match store.claim(id, &format!("w{w}"), LEASE, now).await.unwrap() {
                ClaimOutcome::Claimed(c) => {
                    let l = &c.lease;
                    let line = format!(
                        "claim w{w}: {} attempt {}/{} fence {} until {} reserving {}",
                        l.task_id, l.attempt, l.max_attempts, l.fence, l.expires.0, l.reserved
                    );
                    held.push(c.lease);
                    line
                }
                ClaimOutcome::Idle(i) => format!("claim w{w}: idle {i:?}"),
            },
            Step::Report(n, ending, cents) if !held.is_empty() => {
                let lease = held.remove(n % held.len());
                let cost = Usd::from_pico(i64::from(*cents) * 10_000_000_000);
                match store.finish(&lease, ending.result(), cost, now).await {
                    Ok(f) => format!(
                        "report {} {ending:?} costing {cost}: {:?}, newly ready {:?}, not before {:?}, crossed {}",
                        lease.task_id,
                        f.status,
                        sorted(f.newly_ready),
                        f.not_before.map(|t| t.0),
                        f.budget_crossed
                    ),
                    Err(e) => format!("report {} {ending:?}: refused: {e}", lease.task_id),
                }
            }
            Step::Heartbeat(n) if !held.is_empty() => {
                let at = n % held.len();
                let lease = &mut held[at];
                let renewed = store.heartbeat(lease, LEASE, now).await.unwrap();
                if let Some(until) = renewed {
                    lease.expires = until;
                }
                match renewed {
                    Some(until) => format!("heartbeat {}: until {}", lease.task_id, until.0),
                    None => format!("heartbeat {}: lease lost", lease.task_id),
                }
            }
            Step::Report(..) | Step::Heartbeat(_) => continue,
            Step::Wait(seconds) => {
                now = Timestamp(now.0 + i64::from(*seconds) * SECOND);
                format!("wait {seconds} s")
            }
            Step::Sweep => {
                let mut back: Vec<String> = store
                    .sweep_expired(now)
                    .await
                    .unwrap()
                    .into_iter()
                    .filter(|r| r.plan_id == id)
                    .map(|r| format!("{} fence {} from {} now {:?}", r.task_id, r.fence, r.worker, r.status))
                    .collect();
                back.sort();
                format!("sweep: {back:?}")
            }
        };
        said.push(line);
    }
    let view = store.plan(id).await.unwrap().unwrap();
    let states: BTreeMap<String, String> = view
        .tasks
        .iter()
        .map(|t| {
            let held = format!("{:?} by {:?}", t.lease_owner, t.fence);
            (
                t.spec.id.clone(),
                format!(
                    "{:?}, {} left, {} attempts, not before {}, {held}",
                    t.status, t.deps_left, t.attempts, t.not_before.0
                ),
            )
        })
        .collect();
    said.push(format!("tasks: {states:?}"));
    said.push(format!("budget: {:?}", view.plan.budget));
    for a in store.attempts(id).await.unwrap() {
        said.push(format!("attempt {a:?}"));
    }
    for e in store.events(id).await.unwrap() {
        said.push(format!(
            "event {} {:?} {:?} at {}: {}",
            e.kind,
            e.task_id,
            e.attempt,
            e.at.0,
            without_tokens(e.data)
        ));
    }
    said
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// An event's data without the claim tokens (random by design).
fn without_tokens(mut data: serde_json::Value) -> serde_json::Value {
    if let Some(map) = data.as_object_mut() {
        map.retain(|key, _| !key.contains("token"));
        for value in map.values_mut() {
            *value = without_tokens(value.take());
        }
    }
    data
}

/// The four stores, opened once for every case (each case is a plan of its own).
struct Stores {
    named: Vec<(&'static str, Arc<dyn UnitQueue>)>,
    _sqlite_dirs: Vec<tempfile::TempDir>,
    databases: Vec<String>,
}

impl Stores {
    async fn open() -> Stores {
        let (fast_dir, general_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let sqlite_fast = SqliteStore::open(&fast_dir.path().join("arbiter.db")).await.unwrap();
        let sqlite_general =
            SqliteStore::open(&general_dir.path().join("arbiter.db")).await.unwrap().general_path_only();
        let (fast_url, fast_db) = common::fresh_database().await;
        let (general_url, general_db) = common::fresh_database().await;
        let pg_fast = PgStore::connect(&fast_url).await.unwrap();
        let pg_general = PgStore::connect(&general_url).await.unwrap().general_path_only();
        Stores {
            named: vec![
                ("SQLite, fast paths", Arc::new(sqlite_fast)),
                ("SQLite, general path only", Arc::new(sqlite_general)),
                ("Postgres, fast paths", Arc::new(pg_fast)),
                ("Postgres, general path only", Arc::new(pg_general)),
            ],
            _sqlite_dirs: vec![fast_dir, general_dir],
            databases: vec![fast_db, general_db],
        }
    }

    async fn close(self) {
        drop(self.named);
        for db in &self.databases {
            common::drop_database(db).await;
        }
    }
}

/// The first line at which `b` differs from `a`, with its context.
fn first_difference(a: &[String], b: &[String]) -> Option<String> {
    let at = (0..a.len().max(b.len())).find(|&i| a.get(i) != b.get(i))?;
    let from = at.saturating_sub(6);
    let show = |v: &[String]| v[from.min(v.len())..(at + 1).min(v.len())].join("\n    ");
    Some(format!("at line {at}:\n  one:\n    {}\n  other:\n    {}", show(a), show(b)))
}

/// Plays every scenario `strategy` makes on the four stores, with `play`, and requires the
/// same log of each; then that the scenarios reached everything `coverage` names (a marker
/// in the log of one of them).
fn agree<S, P>(strategy: S, coverage: &[(&'static str, &'static str)], play: P)
where
    S: Strategy,
    S::Value: std::fmt::Debug,
    P: for<'a> Fn(&'a dyn UnitQueue, &'a S::Value, &'a str) -> Pin<Box<dyn Future<Output = Vec<String>> + 'a>>,
{
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let stores = runtime.block_on(Stores::open());
    let next = AtomicU32::new(0);
    let seen = std::sync::Mutex::new(std::collections::BTreeSet::new());
    // The same scenarios on every run (a failure is reproduced by running the test again);
    // `PROPTEST_CASES` asks for more of them.
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(96);
    let config = ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() };
    let rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
    let outcome = TestRunner::new_with_rng(config, rng).run(&strategy, |s| {
        let id = format!("p{}", next.fetch_add(1, Ordering::Relaxed));
        let logs: Vec<(&str, Vec<String>)> = runtime.block_on(async {
            let mut logs = Vec::new();
            for (name, store) in &stores.named {
                logs.push((*name, play(&**store, &s, &id).await));
            }
            logs
        });
        if let Ok(mut seen) = seen.lock() {
            for (what, marker) in coverage {
                if logs[0].1.iter().any(|line| line.contains(marker)) {
                    seen.insert(*what);
                }
            }
        }
        let (reference, first) = &logs[0];
        for (name, log) in &logs[1..] {
            if let Some(diff) = first_difference(first, log) {
                return Err(TestCaseError::fail(format!("{reference} and {name} differ on {s:?}\n{diff}")));
            }
        }
        Ok(())
    });
    runtime.block_on(stores.close());
    if let Err(e) = outcome {
        panic!("{e}");
    }
    let seen = seen.into_inner().unwrap();
    let missed: Vec<&str> = coverage.iter().map(|(what, _)| *what).filter(|what| !seen.contains(what)).collect();
    assert!(missed.is_empty(), "no scenario reached: {missed:?}");
}

#[test]
fn fast_and_general_paths_agree_on_both_stores() {
    agree(scenario(), COVERAGE, |store, s, id| Box::pin(play(store, s, id)));
}

/// What the generated scenarios must reach, as a marker in the log of one of them.
const COVERAGE: &[(&str, &str)] = &[
    ("a claim", ": t"),
    ("an idle claim", "idle Idle"),
    ("a success that readies a dependent", "newly ready [\""),
    ("a retry that waits", "not before Some"),
    ("a task failed for good", ": Failed,"),
    ("a released task", "Released costing"),
    ("a stale report refused", ": refused: "),
    ("a lease swept", "sweep: [\""),
    ("a report with a cost", "crossed false"),
    ("a budget crossed", "crossed true"),
    ("a claim refused by the budget", "budget_exhausted: true"),
    ("a heartbeat after the lease was lost", ": lease lost"),
];

/// What a worker does to a plan whose tournaments spread over units.
#[derive(Clone, Debug)]
enum UnitStep {
    /// Worker `0..3` claims a task and spreads its attempt over its candidates and an
    /// evaluation.
    Spread(u8),
    /// Worker `0..3` claims a unit.
    Claim(u8),
    /// The unit lease `n` (modulo those held) ends so, having spent `cost` cents; an
    /// evaluation that is done ends its attempt too.
    Report(usize, UnitEnding, u8),
    /// The unit lease `n` (modulo) is renewed.
    Heartbeat(usize),
    Wait(u8),
    /// Expired unit leases go back to the queue (or are given up).
    Sweep,
}

#[derive(Clone, Copy, Debug)]
enum UnitEnding {
    Finished,
    AgentFailed,
    Error,
    Released,
    Refused,
}

#[derive(Clone, Debug)]
struct UnitScenario {
    tasks: usize,
    candidates: usize,
    steps: Vec<UnitStep>,
}

fn unit_scenario() -> impl Strategy<Value = UnitScenario> {
    let ending = prop_oneof![
        3 => Just(UnitEnding::Finished),
        1 => Just(UnitEnding::AgentFailed),
        1 => Just(UnitEnding::Error),
        1 => Just(UnitEnding::Released),
        2 => Just(UnitEnding::Refused),
    ];
    let step = prop_oneof![
        2 => (0u8..3).prop_map(UnitStep::Spread),
        4 => (0u8..3).prop_map(UnitStep::Claim),
        4 => (0usize..6, ending, prop_oneof![3 => Just(0u8), 1 => 1u8..30])
            .prop_map(|(n, e, c)| UnitStep::Report(n, e, c)),
        1 => (0usize..6).prop_map(UnitStep::Heartbeat),
        2 => (1u8..70).prop_map(UnitStep::Wait),
        2 => Just(UnitStep::Sweep),
    ];
    (1usize..4, 1usize..4, proptest::collection::vec(step, 1..50)).prop_map(|(tasks, candidates, steps)| UnitScenario {
        tasks,
        candidates,
        steps,
    })
}

fn unit_outcome(ending: UnitEnding) -> UnitOutcome {
    use arbiter_core::status::CandidateStatus;
    match ending {
        UnitEnding::Finished => UnitOutcome::Done { result: UnitResult::Status(CandidateStatus::Finished) },
        UnitEnding::AgentFailed => UnitOutcome::Done { result: UnitResult::Status(CandidateStatus::AgentFailed) },
        UnitEnding::Error => UnitOutcome::Done { result: UnitResult::Error("the agent could not start".into()) },
        UnitEnding::Released => UnitOutcome::Released { reason: "worker stopped".into() },
        UnitEnding::Refused => UnitOutcome::Refused { reason: "cannot fetch the repository".into() },
    }
}

async fn play_units(store: &dyn UnitQueue, s: &UnitScenario, id: &str) -> Vec<String> {
    let tasks: Vec<String> = (0..s.tasks)
        .map(|i| {
            format!(r#"{{"id": "t{i}", "title": "task {i}", "dependencies": [], "candidates": {}}}"#, s.candidates)
        })
        .collect();
    let json = format!(
        r#"{{"id": "{id}", "name": "units", "defaults": {{"retry_backoff_seconds": 0}}, "tasks": [{}]}}"#,
        tasks.join(", ")
    );
    let spec = parse(&json, Syntax::Json).unwrap();
    let settings = RunSettings::resolve_values(&ConfigFile::default(), &[]).unwrap();
    let units: Vec<UnitSpec> = (1..=s.candidates)
        .map(|i| UnitSpec { name: format!("c{i:02}"), kind: UnitKind::Candidate, needs: Vec::new() })
        .chain([UnitSpec { name: "evaluation".into(), kind: UnitKind::Evaluation, needs: Vec::new() }])
        .collect();
    let mut said = Vec::new();
    let mut now = Timestamp(1_800_000_000 * SECOND);
    let import =
        Import { spec: &spec, mode: ImportMode::Add, skip: &[], verdicts: &[], apply: None, branch: None, now };
    store.import_plan(import).await.unwrap();
    let mut held: Vec<UnitLease> = Vec::new();
    for step in &s.steps {
        let line = match step {
            UnitStep::Spread(w) => match store.claim(id, &format!("w{w}"), LEASE, now).await.unwrap() {
                ClaimOutcome::Claimed(c) => {
                    let l = &c.lease;
                    let run = format!("run-{}-{}", l.task_id, l.fence);
                    let spread = store.start_units(l, &run, "base", &settings, &units, now).await;
                    format!("spread w{w}: {} attempt {} fence {}: {:?}", l.task_id, l.attempt, l.fence, spread.err())
                }
                ClaimOutcome::Idle(i) => format!("spread w{w}: idle {i:?}"),
            },
            UnitStep::Claim(w) => {
                match store.claim_unit(Some(id), &format!("w{w}"), &Capabilities::Any, LEASE, now).await.unwrap() {
                    Some(c) => {
                        let l = &c.lease;
                        let line = format!(
                            "claim w{w}: {} {} {:?} fence {} of attempt {} until {}",
                            l.attempt.task_id, l.name, l.kind, l.fence, l.attempt.fence, l.expires.0
                        );
                        held.push(c.lease);
                        line
                    }
                    None => format!("claim w{w}: nothing"),
                }
            }
            UnitStep::Report(n, ending, cents) if !held.is_empty() => {
                let lease = held.remove(n % held.len());
                let cost = Usd::from_pico(i64::from(*cents) * 10_000_000_000);
                let what = format!("report {} {} {ending:?} costing {cost}", lease.attempt.task_id, lease.name);
                match store.finish_unit(&lease, unit_outcome(*ending), cost, now).await {
                    Ok(f) => {
                        let mut line =
                            format!("{what}: evaluation ready {}, given up {}", f.evaluation_ready, f.given_up);
                        if lease.kind == UnitKind::Evaluation && matches!(ending, UnitEnding::Finished) {
                            let result = AttemptResult::Succeeded { run_id: Some(lease.run_id.clone()), commit: None };
                            match store.finish(&lease.attempt, result, Usd::ZERO, now).await {
                                Ok(f) => line.push_str(&format!(
                                    "; attempt {:?}, newly ready {:?}",
                                    f.status,
                                    sorted(f.newly_ready)
                                )),
                                Err(e) => line.push_str(&format!("; attempt refused: {e}")),
                            }
                        }
                        line
                    }
                    Err(e) => format!("{what}: refused: {e}"),
                }
            }
            UnitStep::Heartbeat(n) if !held.is_empty() => {
                let at = n % held.len();
                let lease = &mut held[at];
                let renewed = store.heartbeat_unit(lease, LEASE, now).await.unwrap();
                if let Some(until) = renewed {
                    lease.expires = until;
                }
                match renewed {
                    Some(until) => format!("heartbeat {} {}: until {}", lease.attempt.task_id, lease.name, until.0),
                    None => format!("heartbeat {} {}: lease lost", lease.attempt.task_id, lease.name),
                }
            }
            UnitStep::Report(..) | UnitStep::Heartbeat(_) => continue,
            UnitStep::Wait(seconds) => {
                now = Timestamp(now.0 + i64::from(*seconds) * SECOND);
                format!("wait {seconds} s")
            }
            UnitStep::Sweep => {
                let mut back: Vec<String> = store
                    .sweep_expired_units(now)
                    .await
                    .unwrap()
                    .into_iter()
                    .filter(|r| r.plan_id == id)
                    .map(|r| {
                        format!(
                            "{} {} from {}: given up {}, evaluation ready {}",
                            r.task_id, r.name, r.worker, r.given_up, r.evaluation_ready
                        )
                    })
                    .collect();
                back.sort();
                format!("sweep: {back:?}")
            }
        };
        said.push(line);
    }
    let view = store.plan(id).await.unwrap().unwrap();
    for t in &view.tasks {
        said.push(format!("task {}: {:?}, {} attempts, fence {}", t.spec.id, t.status, t.attempts, t.fence));
        for fence in 1..=t.fence {
            for u in store.units_of(id, &t.spec.id, fence).await.unwrap() {
                said.push(format!(
                    "unit {} {} of attempt {}: {:?} fence {} worker {:?} result {:?} cost {}",
                    u.task_id, u.name, u.task_fence, u.status, u.fence, u.worker, u.result, u.cost
                ));
            }
        }
    }
    for e in store.events(id).await.unwrap() {
        said.push(format!(
            "event {} {:?} {:?} at {}: {}",
            e.kind,
            e.task_id,
            e.attempt,
            e.at.0,
            without_tokens(e.data)
        ));
    }
    said
}

/// What the generated unit scenarios must reach.
const UNIT_COVERAGE: &[(&str, &str)] = &[
    ("a spread attempt", ": None"),
    ("a unit claimed", "Candidate fence"),
    ("an evaluation claimed", "Evaluation fence"),
    ("an evaluation made ready", "evaluation ready true"),
    ("an attempt ended by its evaluation", "; attempt Done"),
    ("a refused unit given up", "given up true"),
    ("a unit released", "Released costing"),
    ("a stale unit report refused", ": refused: "),
    ("a unit lease swept", "sweep: [\""),
];

#[test]
fn units_agree_on_both_stores() {
    agree(unit_scenario(), UNIT_COVERAGE, |store, s, id| Box::pin(play_units(store, s, id)));
}
