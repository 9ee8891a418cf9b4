//! Running the cross-test matrix: every pooled test (the test files candidates wrote) in
//! the base tree and in the tree of every surviving candidate, the pooled file copied in
//! and its previous state put back afterwards. Trees run in parallel (up to `parallel` at
//! once), the tests of one tree one after another. Candidates with identical patches share
//! one tree's results. Which tests discriminate, and the scores, are decided in the core
//! (`arbiter_core::crosstest`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arbiter_core::crosstest::{self, BASE, CrossTestMatrix, CrossTestResult, PooledTest};
use arbiter_core::ids::CandidateId;
use tokio::sync::Semaphore;

use super::candidate::prepare_workspace;
use super::{CandidateRun, RunCtx};
use crate::pool::Slot;
use crate::process::{self, ShellCommand};

/// Where the logs of the cross-test runs go, relative to the run directory.
const LOG_DIR: &str = "comparisons/cross_tests";

/// Builds the matrix for `survivors` (the eligible candidates, best first), or says why not.
pub(super) async fn cross_test(
    ctx: &Arc<RunCtx>,
    runs: &[CandidateRun],
    survivors: &[CandidateId],
    base_tree: Option<&Slot>,
) -> CrossTestMatrix {
    let matrix = build(ctx, runs, survivors, base_tree).await;
    let said = arbiter_core::event::CrossTests {
        ran: matrix.ran,
        reason: matrix.skip_reason.clone(),
        tests: matrix.tests.len(),
        discriminating: matrix.tests.iter().filter(|t| t.discriminating).count(),
        scores: matrix.scores.clone(),
    };
    ctx.events.emit(None, &said).await;
    matrix
}

async fn build(
    ctx: &Arc<RunCtx>,
    runs: &[CandidateRun],
    survivors: &[CandidateId],
    base_tree: Option<&Slot>,
) -> CrossTestMatrix {
    if !ctx.settings.cross_tests.value {
        return CrossTestMatrix::skipped("cross-tests are off (--no-cross-tests or [cross_tests] enabled = false)");
    }
    let authored: Vec<(CandidateId, Vec<crosstest::AuthoredTest>)> = runs
        .iter()
        .filter(|r| !r.authored_tests.is_empty())
        .map(|r| (r.id.clone(), r.authored_tests.clone()))
        .collect();
    let pool = crosstest::pool(&authored, &ctx.settings.cross_test_rules.value, &ctx.settings.verify.value);
    if pool.is_empty() {
        return CrossTestMatrix::skipped("no candidate added or changed a test file the cross-test rules recognize");
    }
    // One tree per distinct patch: identical patches share their results.
    let mut representative: BTreeMap<Option<String>, (CandidateId, &Slot)> = BTreeMap::new();
    let mut stand_in: Vec<(CandidateId, CandidateId)> = Vec::new();
    for id in survivors {
        let Some(run) = runs.iter().find(|r| &r.id == id) else { continue };
        let Some(tree) = &run.tree else { continue };
        let hash = run.patch.as_ref().and_then(|p| p.normalized_hash.clone());
        match representative.get(&hash) {
            Some((rep, _)) => stand_in.push((id.clone(), rep.clone())),
            None => {
                representative.insert(hash, (id.clone(), tree));
            }
        }
    }
    if representative.len() < 2 {
        return CrossTestMatrix::skipped(
            "fewer than two surviving candidates with different patches: cross-tests cannot separate them",
        );
    }
    if ctx.cancel.is_cancelled() {
        return CrossTestMatrix::skipped("the run was interrupted");
    }
    let own_base;
    let base_tree = match base_tree {
        Some(t) => t,
        None => {
            let log_dir = ctx.run_dir.path().join(LOG_DIR);
            let _ = std::fs::create_dir_all(&log_dir);
            match prepare_workspace(ctx, None, &log_dir).await {
                Ok(slot) => {
                    own_base = slot;
                    &own_base
                }
                Err(e) => {
                    if ctx.cancel.is_cancelled() {
                        return CrossTestMatrix::skipped("the run was interrupted");
                    }
                    return CrossTestMatrix::skipped(format!(
                        "the base tree for cross-tests could not be prepared: {e}"
                    ));
                }
            }
        }
    };
    if ctx.cancel.is_cancelled() {
        return CrossTestMatrix::skipped("the run was interrupted");
    }

    // Each tree: where it is, and the sandbox its tree's candidate runs in (the pooled tests
    // are other candidates' code: they run sandboxed like everything else).
    let mut targets: Vec<(String, PathBuf, Option<arbiter_sandbox::Jail>)> =
        vec![(BASE.to_string(), base_tree.tree(), ctx.confinement.jail(base_tree))];
    targets.extend(
        representative.into_values().map(|(id, slot)| (id.to_string(), slot.tree(), ctx.confinement.jail(slot))),
    );
    let pool = Arc::new(pool);
    let limit = Arc::new(Semaphore::new(ctx.settings.parallel.value.max(1) as usize));
    let mut tasks = tokio::task::JoinSet::new();
    for (target, tree, jail) in targets {
        let (ctx, pool, limit) = (ctx.clone(), pool.clone(), limit.clone());
        tasks.spawn(async move {
            let _slot = tokio::select! {
                slot = limit.acquire_owned() => slot.ok(),
                _ = ctx.cancel.cancelled() => None,
            };
            let mut results = Vec::with_capacity(pool.len());
            for test in pool.iter() {
                if ctx.cancel.is_cancelled() {
                    break;
                }
                results.push((test.id.clone(), run_one(&ctx, &tree, jail.as_ref(), &target, test).await));
            }
            (target, results)
        });
    }
    let mut by_test: BTreeMap<String, BTreeMap<String, CrossTestResult>> = BTreeMap::new();
    while let Some(joined) = tasks.join_next().await {
        let Ok((target, results)) = joined else { continue };
        for (test, result) in results {
            by_test.entry(test).or_default().insert(target.clone(), result);
        }
    }
    for (twin, rep) in &stand_in {
        for results in by_test.values_mut() {
            if let Some(r) = results.get(rep.as_str()).cloned() {
                results.insert(twin.to_string(), r);
            }
        }
    }
    if ctx.cancel.is_cancelled() {
        return CrossTestMatrix::skipped("the run was interrupted");
    }
    let pool = Arc::try_unwrap(pool).unwrap_or_else(|shared| (*shared).clone());
    CrossTestMatrix::build(survivors, pool, by_test)
}

/// Runs one pooled test in one tree: the pooled file in place of whatever was there, the
/// rule's command, then the tree as it was.
async fn run_one(
    ctx: &RunCtx,
    tree: &Path,
    jail: Option<&arbiter_sandbox::Jail>,
    target: &str,
    test: &PooledTest,
) -> CrossTestResult {
    let rel_log = format!("{LOG_DIR}/{}-{target}.log", test.id);
    let log = ctx.run_dir.path().join(&rel_log);
    let failed = |why: String| {
        let _ = std::fs::write(&log, why);
        CrossTestResult { passed: false, exit_code: None, timed_out: false, duration_ms: 0, log: rel_log.clone() }
    };
    if let Some(parent) = log.parent()
        && let Err(e) = std::fs::create_dir_all(parent)
    {
        return failed(format!("cannot create the log directory: {e}"));
    }
    let file = tree.join(&test.path);
    let before = std::fs::read(&file).ok();
    let created_dir = topmost_missing(tree, file.parent());
    if let Some(parent) = file.parent()
        && let Err(e) = std::fs::create_dir_all(parent)
    {
        return failed(format!("cannot create {}: {e}", parent.display()));
    }
    if let Err(e) = std::fs::write(&file, &test.content) {
        return failed(format!("cannot write {}: {e}", test.path));
    }
    let exit = process::run_shell(
        &ShellCommand {
            command: test.command.clone(),
            cwd: tree.to_path_buf(),
            env: ctx.command_env(),
            stdout: log.clone(),
            stderr: log.clone(),
            timeout: Duration::from_secs(ctx.settings.verify_timeout_seconds.value),
            jail: jail.cloned(),
        },
        &ctx.cancel,
    )
    .await;
    match before {
        Some(bytes) => {
            let _ = std::fs::write(&file, bytes);
        }
        None => {
            let _ = std::fs::remove_file(&file);
            if let Some(dir) = created_dir {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }
    let _ = process::redact_file(&log, &ctx.redactor);
    match exit {
        Ok(exit) => CrossTestResult {
            passed: exit.success(),
            exit_code: if exit.cancelled { None } else { exit.code },
            timed_out: exit.timed_out,
            duration_ms: exit.duration.as_millis() as u64,
            log: rel_log,
        },
        Err(e) => failed(format!("cannot start `{}`: {e}", test.command)),
    }
}

/// The highest directory between `tree` and `dir` that does not exist yet: removing it
/// after the test leaves the tree as it was.
fn topmost_missing(tree: &Path, dir: Option<&Path>) -> Option<PathBuf> {
    let mut missing = None;
    let mut current = dir?;
    while current != tree && current.starts_with(tree) && !current.exists() {
        missing = Some(current.to_path_buf());
        current = current.parent()?;
    }
    missing
}
