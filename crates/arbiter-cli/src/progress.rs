//! Progress on stderr: one live line per candidate on a terminal, plain log lines
//! otherwise. It only reads the run's events — the ones it shows through their typed
//! payloads (`arbiter_core::event::EventData`), so a renamed field does not compile — and
//! never decides anything.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use arbiter_core::event::{
    AgentFinished, BaselineFinished, CandidateFinished, CandidatePreparing, CandidateQueued, Event, EventKind,
    GateFinished, LeftoversPruned, MaterializeFailed, Materialized, ModelFallback, PatchCaptured, RunStarted,
    SelectionMade, SetupFinished, Warning,
};
use arbiter_core::time::human_duration;
use tokio::sync::mpsc::UnboundedReceiver;

#[derive(Default)]
struct Line {
    runner: String,
    state: String,
    started: Option<Instant>,
    ended: Option<Duration>,
    detail: String,
}

/// Renders events until the channel closes.
pub async fn render(mut rx: UnboundedReceiver<Event>) {
    if crate::output::quiet() {
        while rx.recv().await.is_some() {}
        return;
    }
    let live = crate::terminal::live_progress();
    let start = Instant::now();
    let mut lines: BTreeMap<String, Line> = BTreeMap::new();
    let mut baseline = String::new();
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        tokio::select! {
            ev = rx.recv() => {
                let Some(ev) = ev else { break };
                if !live && let Some(text) = log_line(&ev) {
                    crate::console::line(&format!("[{:>6}] {text}", human_duration(start.elapsed().as_millis() as u64)));
                }
                apply(&mut lines, &mut baseline, &ev);
                if live { draw(&lines, &baseline); }
            }
            _ = tick.tick(), if live => { draw(&lines, &baseline); }
        }
    }
    if live {
        draw(&lines, &baseline);
        crate::console::release_block();
    }
}

fn apply(lines: &mut BTreeMap<String, Line>, baseline: &mut String, ev: &Event) {
    if ev.kind == EventKind::BaselineStarted {
        *baseline = "baseline: running verify commands on the base".into();
    }
    if let Some(b) = ev.data_as::<BaselineFinished>() {
        *baseline = baseline_line(&b);
    }
    let Some(id) = &ev.candidate else { return };
    let line = lines.entry(id.to_string()).or_default();
    match ev.kind {
        EventKind::CandidateQueued => {
            line.runner = ev.data_as::<CandidateQueued>().map(|q| q.runner).unwrap_or_default();
            line.state = "queued".into();
        }
        EventKind::CandidatePreparing => {
            line.state = "preparing".into();
            line.started = Some(Instant::now());
        }
        EventKind::AgentStarted => line.state = "running".into(),
        EventKind::AgentFinished => line.state = "evaluating".into(),
        EventKind::RepairRound => line.state = "repairing".into(),
        EventKind::GateFinished => {
            let passed = ev.data_as::<GateFinished>().is_some_and(|g| g.passed);
            line.detail.push_str(if passed { "✓" } else { "✗" });
        }
        EventKind::CandidateFinished => {
            let Some(done) = ev.data_as::<CandidateFinished>() else { return };
            line.state = done.status.as_str().to_string();
            line.ended = line.started.map(|s| s.elapsed());
            let mut detail = Vec::new();
            if done.patch_empty == Some(true) {
                detail.push("empty patch".to_string());
            } else if done.applies_cleanly == Some(false) {
                detail.push("patch does not apply".into());
            }
            if let Some(total) = done.gates_total.filter(|t| *t > 0) {
                detail.push(format!("gates {}/{}", done.gates_passed.unwrap_or(0), total));
            }
            if let Some(skip) = done.gates_skipped {
                detail.push(format!("gates skipped: {skip}"));
            }
            if let Some(err) = done.error {
                detail.push(err);
            }
            line.detail = detail.join(", ");
        }
        _ => {}
    }
}

/// The live block: the baseline's line and one per candidate.
fn draw(lines: &BTreeMap<String, Line>, baseline: &str) {
    let mut block = Vec::new();
    if !baseline.is_empty() {
        block.push(format!("  {baseline}"));
    }
    let width = lines.values().map(|l| l.runner.chars().count()).max().unwrap_or(0).max(7);
    for (id, l) in lines {
        let elapsed = l
            .ended
            .or_else(|| l.started.map(|s| s.elapsed()))
            .map(|d| human_duration(d.as_millis() as u64))
            .unwrap_or_default();
        block.push(format!("  {id} {:<width$} {:<12} {:>7}  {}", l.runner, l.state, elapsed, l.detail));
    }
    crate::console::draw_block(&block);
}

/// The baseline's line: how many verify commands fail on the base, or why none ran.
fn baseline_line(b: &BaselineFinished) -> String {
    match &b.error {
        Some(e) => format!("baseline: could not run ({e})"),
        None => format!(
            "baseline: {} of {} verify command(s) fail on the base",
            b.results.iter().filter(|r| !r.passed).count(),
            b.results.len()
        ),
    }
}

/// How a candidate ended, in words.
fn candidate_end(status: &str) -> String {
    match status {
        "finished" => "done: its agent finished".into(),
        "agent_failed" => "done: its agent failed".into(),
        "timed_out" => "done: its agent timed out and was killed".into(),
        "limit_reached" => "done: its agent hit a limit".into(),
        "setup_failed" => "could not be prepared".into(),
        "cancelled" => "cancelled".into(),
        "skipped" => "never started".into(),
        other => format!("ended: {other}"),
    }
}

fn log_line(ev: &Event) -> Option<String> {
    let who = ev.candidate.as_ref().map(|c| c.to_string()).unwrap_or_else(|| "run".into());
    let text = match ev.kind {
        EventKind::RunStarted => {
            let r = ev.data_as::<RunStarted>()?;
            let base: String = r.base_commit.chars().take(12).collect();
            format!("run {} started: {} candidate(s), base {base}", ev.run_id, r.candidates)
        }
        EventKind::LeftoversPruned => {
            format!("pruned worktrees left by crashed runs: {}", ev.data_as::<LeftoversPruned>()?.runs.join(", "))
        }
        EventKind::BaselineStarted => "baseline: running verify commands on the base".into(),
        EventKind::BaselineFinished => baseline_line(&ev.data_as::<BaselineFinished>()?),
        EventKind::CandidatePreparing => {
            let p = ev.data_as::<CandidatePreparing>()?;
            match (p.restart, p.runner) {
                (true, _) if p.reuses_worktree == Some(true) => format!("{who} restarting in its own workspace"),
                (true, _) => format!("{who} restarting in a fresh workspace"),
                (false, runner) => format!("{who} preparing ({})", runner.unwrap_or_default()),
            }
        }
        EventKind::SetupFinished => {
            let s = ev.data_as::<SetupFinished>()?;
            match s.exit_code {
                _ if s.timed_out => format!("{who} setup timed out after {}", human_duration(s.duration_ms)),
                Some(code) => format!("{who} setup exited {code}"),
                None => format!("{who} setup was killed"),
            }
        }
        EventKind::AgentStarted => format!("{who} agent started"),
        EventKind::AgentFinished => {
            let a = ev.data_as::<AgentFinished>()?;
            let took = human_duration(a.duration_ms);
            match (a.exit_code, a.signal) {
                _ if a.timed_out => format!("{who} agent timed out after {took} and was killed"),
                _ if a.cancelled => format!("{who} agent cancelled"),
                (None, Some(signal)) => format!("{who} agent crashed (killed by signal {signal}) after {took}"),
                _ if a.limit_reached.is_some() => {
                    format!("{who} agent stopped at a limit: {}", a.limit_reached.unwrap_or_default())
                }
                (Some(code), _) => format!("{who} agent exited {code} after {took}"),
                (None, None) => format!("{who} agent ended after {took}"),
            }
        }
        EventKind::ModelFallback => {
            let f = ev.data_as::<ModelFallback>()?;
            let next = f.to.map(|t| format!("trying {t}")).unwrap_or_else(|| "no backend left".into());
            format!("{who} backend {} failed ({}); {next}", f.from, f.reason)
        }
        EventKind::PatchCaptured => {
            let p = ev.data_as::<PatchCaptured>()?;
            let how = match (p.empty, p.applies_cleanly) {
                (Some(true), _) => ", empty",
                (_, Some(true)) => ", applies cleanly",
                _ => ", does NOT apply",
            };
            format!(
                "{who} patch: {} file(s), {} changed line(s){how}",
                p.files_changed.unwrap_or(0),
                p.changed_lines.unwrap_or(0)
            )
        }
        EventKind::GateFinished => {
            let g = ev.data_as::<GateFinished>()?;
            format!("{who} verify `{}`: {}", g.command, if g.passed { "passed" } else { "failed" })
        }
        EventKind::RepairRound => {
            let r = ev.data_as::<arbiter_core::event::RepairRound>()?;
            if r.failing.is_empty() {
                format!("{who} repair round {}/{}: every gate passes", r.round, r.of)
            } else {
                format!("{who} repair round {}/{}: back to the agent for {}", r.round, r.of, r.failing.join(", "))
            }
        }
        EventKind::CandidateFinished => {
            format!("{who} {}", candidate_end(ev.data_as::<CandidateFinished>()?.status.as_str()))
        }
        EventKind::SelectionMade => format!("selection: {}", ev.data_as::<SelectionMade>()?.summary),
        EventKind::Materialized => {
            let m = ev.data_as::<Materialized>()?;
            if m.applied { format!("applied winner ({})", m.mode) } else { "winner not applied (--apply none)".into() }
        }
        EventKind::MaterializeFailed => {
            let MaterializeFailed(m) = ev.data_as::<MaterializeFailed>()?;
            format!("could not apply winner: {}", m.error.unwrap_or_default())
        }
        EventKind::Warning => format!("warning: {}", ev.data_as::<Warning>()?.message),
        EventKind::RunInterrupted => "run interrupted".into(),
        _ => return None,
    };
    Some(text)
}
