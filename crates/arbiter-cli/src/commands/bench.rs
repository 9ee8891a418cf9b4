//! `arbiter bench queue`: the control plane's work protocol measured end to end over real
//! HTTP, with no-op workers (claim, then report; no agent, no git on the worker's side).
//!
//! It registers `--workers` workers (with the bootstrap token), imports a plan of `--tasks`
//! independent tasks (with the admin token, in batches), and lets every worker claim and
//! report until the plan is drained, as a worker's slot does (each report brings the next
//! claim: `report-and-claim`): claim+complete cycles per second, and the latency of the
//! requests that got work. Then the wake-up: with every worker waiting in a long poll on an
//! empty plan, one task is imported at a time, `--wakeups` times, and the time from sending
//! the import to a worker holding the task is measured, and on the server's clock the time
//! from the import's `task_created` event to the task's `task_claimed`. The plans stay on the server
//! (cancelled), the bench workers are revoked.

use std::time::{Duration, Instant};

use arbiter_core::plan::file::{Syntax, parse};
use arbiter_runner::plan_admin::{PlanAdmin, PlanImport};
use arbiter_server::api::RegisterRequest;
use arbiter_server::client::{Client, ClientOptions};
use arbiter_server::plan_client::RemotePlanAdmin;
use arbiter_server::work_api::{
    ClaimRequest, ClaimResponse, ReportAndClaimRequest, ReportAndClaimResponse, ReportRequest, ReportResponse,
    WireAssignment, WireRetry, WireVerdict,
};
use arbiter_store::plans::ImportMode;
use arbiter_store::workers::Secret;
use serde::Serialize;
use serde_json::json;

use crate::cli::ServerArgs;
use crate::error::CliError;
use crate::output::{JsonDocument, note, out};

/// Tasks per import request (each well under the server's 1 MiB body limit).
const BATCH: usize = 2000;

/// What `arbiter bench queue` was given.
pub struct QueueBench<'a> {
    pub server: &'a ServerArgs,
    pub workers: usize,
    pub tasks: usize,
    pub wakeups: usize,
    pub repository: Option<&'a std::path::Path>,
    pub json: bool,
}

fn env_token(name: &str, what: &str) -> Result<Secret, CliError> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => Ok(Secret::new(v.trim())),
        _ => Err(CliError::usage(format!("set {name} to {what}; tokens are never taken from the command line"))),
    }
}

fn client_error(e: arbiter_server::client::ClientError) -> CliError {
    if e.is_usage() { CliError::usage(e) } else { CliError::environment(e) }
}

/// What the admin half of the protocol answered: a refusal (a wrong admin token, a plan the
/// server will not take) is the user's to fix (exit 2), an unreachable server is not (3).
fn admin_error(e: arbiter_runner::plan_admin::AdminError) -> CliError {
    let message = format!("the server refused the benchmark's request: {e}");
    if e.is_usage() { CliError::usage(message) } else { CliError::environment(message) }
}

/// `bench queue --json`.
#[derive(Serialize)]
struct QueueReport<'a> {
    server: &'a str,
    workers: usize,
    tasks: usize,
    import_seconds: f64,
    cycles: usize,
    seconds: f64,
    claim_complete_per_second: f64,
    claim_ms: ClaimLatency,
    /// From an import's `task_created` to its `task_claimed`, on the server's clock.
    wakeup_ms: WakeLatency,
    /// From sending the import to the claim's answer, on this client's clock.
    import_to_claim_ms: WakeLatency,
}

#[derive(Serialize)]
struct ClaimLatency {
    p50: f64,
    p95: f64,
    p99: f64,
}

#[derive(Serialize)]
struct WakeLatency {
    p50: f64,
    p95: f64,
    max: f64,
    samples: usize,
}

impl WakeLatency {
    fn of(sorted: &[Duration]) -> Self {
        Self {
            p50: quantile_ms(sorted, 0.5),
            p95: quantile_ms(sorted, 0.95),
            max: quantile_ms(sorted, 1.0),
            samples: sorted.len(),
        }
    }
}

impl JsonDocument for QueueReport<'_> {
    const SCHEMA: &'static str = "bench-queue";
}

/// The `q` quantile of sorted durations, in milliseconds.
fn quantile_ms(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)].as_secs_f64() * 1000.0
}

/// A bench plan: `ids` tasks of the no-op command, in the repository `repo`. Nothing checks
/// a no-op's winner, and the plan says so (`no_verify`): a plan that did not would have every
/// task refused at its claim for having no verify command.
fn plan_spec(id: &str, repo: &str, ids: &[String]) -> Result<arbiter_core::plan::PlanSpec, CliError> {
    let tasks: Vec<serde_json::Value> =
        ids.iter().map(|t| json!({"id": t, "title": format!("no-op {t}"), "acceptance_criteria": ["none"]})).collect();
    let spec = json!({
        "id": id, "name": "queue benchmark", "repository": repo,
        "defaults": {"runners": "command", "command": "true", "candidates": 1, "max_attempts": 1, "no_verify": true},
        "tasks": tasks,
    });
    parse(&spec.to_string(), Syntax::Json).map_err(|e| CliError::environment(format!("the bench plan: {e}")))
}

async fn import(admin: &RemotePlanAdmin, id: &str, repo: &str, ids: &[String]) -> Result<(), CliError> {
    let spec = plan_spec(id, repo, ids)?;
    admin
        .import(&PlanImport { spec, mode: ImportMode::Add, apply: None, adopt_branch: None, gate: Default::default() })
        .await
        .map_err(admin_error)?;
    Ok(())
}

/// One claim (of `plan`'s work, or any plan's): the answer and how long it took.
async fn claim(
    client: &Client,
    token: &Secret,
    plan: Option<&str>,
    wait_ms: u64,
) -> Result<(ClaimResponse, Duration), CliError> {
    let started = Instant::now();
    let request = ClaimRequest { slot: "1".into(), plan: plan.map(str::to_string), wait_ms };
    let answer = client.post("api/v1/work/claim", token, &request).await.map_err(client_error)?;
    Ok((answer, started.elapsed()))
}

/// The report of a claimed no-op task.
fn no_op_report(a: &WireAssignment) -> Result<ReportRequest, CliError> {
    let assignment = a.clone().into_assignment().map_err(CliError::environment)?;
    Ok(ReportRequest {
        lease: assignment.lease_ref(),
        verdict: WireVerdict::Failed { reason: "no-op".into(), retry: WireRetry::Never, run_id: None },
        cost: arbiter_core::money::Usd::ZERO,
        files: Vec::new(),
    })
}

/// Completes a claimed no-op task.
async fn complete(client: &Client, token: &Secret, a: &WireAssignment) -> Result<(), CliError> {
    let _: ReportResponse = client.post("api/v1/work/report", token, &no_op_report(a)?).await.map_err(client_error)?;
    Ok(())
}

/// Completes a claimed no-op task and looks for the next of `plan` in the same request, as a
/// busy worker does: the answer and how long it took.
async fn complete_and_claim(
    client: &Client,
    token: &Secret,
    a: &WireAssignment,
    plan: &str,
) -> Result<(ClaimResponse, Duration), CliError> {
    let started = Instant::now();
    let request = ReportAndClaimRequest {
        report: no_op_report(a)?,
        claim: ClaimRequest { slot: "1".into(), plan: Some(plan.to_string()), wait_ms: 0 },
    };
    let answer: ReportAndClaimResponse =
        client.post("api/v1/work/report-and-claim", token, &request).await.map_err(client_error)?;
    Ok((answer.claim, started.elapsed()))
}

/// The benchmark's no-op workers wait for wake-ups as a worker without `--plan` does, ready
/// to take any plan's work (and fail it): refused on a server whose plans have work to do.
async fn refuse_a_busy_server(admin: &RemotePlanAdmin, server: &str) -> Result<(), CliError> {
    let plans = admin.list().await.map_err(admin_error)?;
    let busy: Vec<&str> = plans.iter().filter(|p| p.has_work_left()).map(|p| p.id.as_str()).collect();
    if busy.is_empty() {
        return Ok(());
    }
    Err(CliError::usage(format!(
        "{server} has plans with work to do ({}): the benchmark's workers would claim and fail their tasks; run it against a server of its own (`arbiter serve --data-dir \"$(mktemp -d)\"` with a store of its own), or cancel those plans first (`arbiter plan cancel ID`)",
        busy.join(", ")
    )))
}

pub async fn queue(b: QueueBench<'_>) -> Result<u8, CliError> {
    if b.workers == 0 || b.tasks == 0 {
        return Err(CliError::usage("--workers and --tasks are at least 1"));
    }
    let admin_token = env_token("ARBITER_TOKEN", "the server's admin token")?;
    let bootstrap =
        env_token("ARBITER_BOOTSTRAP_TOKEN", "the server's bootstrap token (to register the bench workers)")?;
    let options = ClientOptions { ca_cert: b.server.ca_cert.clone(), insecure: b.server.insecure, timeout: None };
    let client = Client::new(&b.server.server, &options).map_err(client_error)?;
    let repo = match b.repository {
        Some(p) => p.to_path_buf(),
        None => std::env::current_dir()?,
    };
    let repo = arbiter_runner::git::Git::new(repo).toplevel().await.map_err(|e| {
        CliError::usage(format!(
            "{e}; the bench plans need a git repository on the server's host: pass --repository PATH"
        ))
    })?;
    let repo = repo.display().to_string();
    let admin = RemotePlanAdmin::new(client.clone(), admin_token.clone());
    refuse_a_busy_server(&admin, &b.server.server).await?;
    let run = format!("{:06x}", arbiter_runner::random_suffix() & 0xff_ffff);

    let mut tokens = Vec::with_capacity(b.workers);
    for i in 0..b.workers {
        let request = RegisterRequest {
            name: format!("bench-{run}-{i}"),
            runners: vec!["command".into()],
            backends: Vec::new(),
            slots: 1,
            replace: false,
        };
        tokens.push(client.register(&bootstrap, &request).await.map_err(client_error)?);
    }
    let names: Vec<String> = tokens.iter().map(|t| t.name.clone()).collect();
    let tokens: Vec<Secret> = tokens.into_iter().map(|t| Secret::new(t.token)).collect();

    // Drain: every task pending before the first claim.
    let plan = format!("bench-{run}");
    let ids: Vec<String> = (0..b.tasks).map(|i| format!("t{i:06}")).collect();
    let loading = Instant::now();
    for batch in ids.chunks(BATCH) {
        import(&admin, &plan, &repo, batch).await?;
    }
    let load_time = loading.elapsed();
    note!("imported {} tasks in {:.1} s; draining with {} workers", b.tasks, load_time.as_secs_f64(), b.workers);
    let started = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for token in &tokens {
        let (client, plan, token) = (client.clone(), plan.clone(), token.clone());
        workers.spawn(async move {
            // As a worker's slot: a claim, then each report brings the next claim; when that
            // finds nothing, a claim of its own (a long poll).
            let mut latencies = Vec::new();
            let mut answer = claim(&client, &token, Some(&plan), 1000).await?;
            loop {
                answer = match answer {
                    (ClaimResponse::Assigned { assignment }, took) => {
                        latencies.push(took);
                        complete_and_claim(&client, &token, &assignment, &plan).await?
                    }
                    (ClaimResponse::Finished, _) => return Ok::<_, CliError>(latencies),
                    (ClaimResponse::Idle, _) => claim(&client, &token, Some(&plan), 1000).await?,
                };
            }
        });
    }
    let mut latencies = Vec::with_capacity(b.tasks);
    while let Some(joined) = workers.join_next().await {
        latencies.extend(joined.map_err(|e| CliError::environment(e.to_string()))??);
    }
    let drain = started.elapsed();
    latencies.sort();
    let cycles = latencies.len();
    if cycles != b.tasks {
        return Err(CliError::environment(format!(
            "the plan finished with {cycles} of its {} tasks claimed: the server refused the rest (see `arbiter plan status {plan} --server {}`)",
            b.tasks, b.server.server
        )));
    }
    let per_second = cycles as f64 / drain.as_secs_f64();

    // Wake-up: every worker waits in a long poll for any plan's work (as a worker without
    // `--plan` does: a claim of one plan's work answers at once while that plan has nothing
    // left, so waiting on the empty plan itself would measure polling, not the wake-up);
    // one task at a time into an empty plan.
    // The drained plan is done with: cancelled, it is no longer among the plans a waiting
    // worker's claim looks at.
    let _ = admin.cancel(&plan, "bench").await;
    let wake_plan = format!("bench-{run}-wake");
    import(&admin, &wake_plan, &repo, &[]).await?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
    let stop = tokio_util::sync::CancellationToken::new();
    let mut waiters = tokio::task::JoinSet::new();
    for token in &tokens {
        let (client, tx, stop, token) = (client.clone(), tx.clone(), stop.clone(), token.clone());
        waiters.spawn(async move {
            while !stop.is_cancelled() {
                let answer = tokio::select! {
                    a = claim(&client, &token, None, 20_000) => a?,
                    _ = stop.cancelled() => break,
                };
                if let (ClaimResponse::Assigned { assignment }, _) = answer {
                    let _ = tx.send(Instant::now());
                    complete(&client, &token, &assignment).await?;
                }
            }
            Ok::<_, CliError>(())
        });
    }
    // Every worker is waiting before the first import.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut wakes = Vec::with_capacity(b.wakeups);
    for i in 0..b.wakeups {
        let sent = Instant::now();
        import(&admin, &wake_plan, &repo, &[format!("w{i:04}")]).await?;
        match tokio::time::timeout(Duration::from_secs(30), rx.recv()).await {
            Ok(Some(got)) => wakes.push(got.saturating_duration_since(sent)),
            _ => return Err(CliError::environment("a task imported into an empty plan was not claimed within 30 s")),
        }
        // Its report is in before the next import.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.cancel();
    while waiters.join_next().await.is_some() {}
    wakes.sort();
    // On the server's own clock: from the import's task_created to its task_claimed (what
    // the client sees adds the import's request and the claim's answer).
    let events = arbiter_runner::plan_admin::all_events(&admin, &wake_plan).await.map_err(admin_error)?;
    let at = |kind: &str, task: &str| {
        events.iter().find(|e| e.kind == kind && e.task_id.as_deref() == Some(task)).map(|e| e.at.0)
    };
    let mut server_wakes: Vec<Duration> = (0..b.wakeups)
        .filter_map(|i| {
            let task = format!("w{i:04}");
            let (created, claimed) = (at("task_created", &task)?, at("task_claimed", &task)?);
            Some(Duration::from_micros(claimed.saturating_sub(created).max(0) as u64))
        })
        .collect();
    server_wakes.sort();

    let _ = admin.cancel(&wake_plan, "bench").await;
    for name in &names {
        let _ = client.revoke(&admin_token, name).await;
    }

    if b.json {
        crate::output::json(&QueueReport {
            server: &b.server.server,
            workers: b.workers,
            tasks: b.tasks,
            import_seconds: load_time.as_secs_f64(),
            cycles,
            seconds: drain.as_secs_f64(),
            claim_complete_per_second: per_second,
            claim_ms: ClaimLatency {
                p50: quantile_ms(&latencies, 0.5),
                p95: quantile_ms(&latencies, 0.95),
                p99: quantile_ms(&latencies, 0.99),
            },
            wakeup_ms: WakeLatency::of(&server_wakes),
            import_to_claim_ms: WakeLatency::of(&wakes),
        });
    } else {
        out!("queue benchmark against {} ({} workers, {} tasks)", b.server.server, b.workers, b.tasks);
        out!("  claim+complete   {per_second:.0}/s ({cycles} cycles in {:.2} s)", drain.as_secs_f64());
        out!(
            "  claim latency    p50 {:.2} ms, p95 {:.2} ms, p99 {:.2} ms",
            quantile_ms(&latencies, 0.5),
            quantile_ms(&latencies, 0.95),
            quantile_ms(&latencies, 0.99)
        );
        out!(
            "  wake-up          p50 {:.2} ms, p95 {:.2} ms, max {:.2} ms (import committed to task claimed, {} imports into an empty plan)",
            quantile_ms(&server_wakes, 0.5),
            quantile_ms(&server_wakes, 0.95),
            quantile_ms(&server_wakes, 1.0),
            server_wakes.len()
        );
        out!(
            "  import to claim  p50 {:.2} ms, p95 {:.2} ms (as this client sees it: the import's request and the claim's answer included)",
            quantile_ms(&wakes, 0.5),
            quantile_ms(&wakes, 0.95),
        );
    }
    Ok(0)
}
