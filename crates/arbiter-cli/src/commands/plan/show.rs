//! `arbiter plan show|status|list|events`, and how a plan is drawn: its DAG, its status and
//! the task table (`plan run` prints the table too).

use std::collections::BTreeMap;

use arbiter_core::Clock;
use arbiter_core::money::Usd;
use arbiter_core::plan::dag;
use arbiter_core::plan::state::TaskStatus;
use arbiter_runner::SystemClock;
use arbiter_runner::plan_admin::{CallCosts, PlanAdmin, all_events};
use arbiter_store::plans::{BranchOrigin, PlanRecord, PlanView, TaskRecord};

use super::short;
use crate::commands::plan_output::{PlanDocument, PlanEvents, PlanList, PlanShown, PlanStatus};
use crate::error::{CliError, exit};
use crate::output::{out, printable};

/// `plan show`: the dependency graph with each task's status.
pub(super) async fn show(admin: &dyn PlanAdmin, id: &str, json: bool) -> Result<u8, CliError> {
    let details = admin.view(id).await?;
    let view = details.view;
    if json {
        crate::output::json(&PlanShown { plan: PlanDocument::of(&view, &details.call_costs) });
    } else {
        crate::output::text(&render_dag(&view, crate::terminal::stdout_colour()));
    }
    Ok(exit::SUCCESS)
}

/// `plan status`: progress, budget, leases and every task's state.
pub(super) async fn status(admin: &dyn PlanAdmin, id: &str, json: bool) -> Result<u8, CliError> {
    let details = admin.view(id).await?;
    let (view, attempts) = (&details.view, &details.attempts);
    if json {
        crate::output::json(&PlanStatus::of(view, attempts, &details.call_costs));
    } else {
        crate::output::text(&render_status(view, &details.call_costs, SystemClock.now()));
    }
    Ok(exit::SUCCESS)
}

/// `plan list`: every plan with its task counts and budget.
pub(super) async fn list(admin: &dyn PlanAdmin, json: bool) -> Result<u8, CliError> {
    let all = admin.list().await?;
    if json {
        crate::output::json(&PlanList::of(&all));
    } else if all.is_empty() {
        out!("No plans yet; add one with `arbiter plan import FILE`.");
    } else {
        out!("{:<24} {:>6} {:>6}  {:<18} NAME", "PLAN", "TASKS", "DONE", "BUDGET");
        for p in &all {
            let total: usize = p.counts.values().sum();
            let done = p.counts.get(&TaskStatus::Done).copied().unwrap_or(0);
            let budget = match p.budget.limit {
                Some(l) => format!("{} of {l}", p.budget.spent),
                None => format!("{} (no limit)", p.budget.spent),
            };
            let name = printable(&p.name);
            let name = if p.cancelled { format!("{name} (cancelled)") } else { name };
            out!("{:<24} {:>6} {:>6}  {:<18} {name}", p.id, total, done, budget);
        }
    }
    Ok(exit::SUCCESS)
}

/// `plan events`: the plan's event log, oldest first.
pub(super) async fn events(admin: &dyn PlanAdmin, id: &str, json: bool) -> Result<u8, CliError> {
    let events = all_events(admin, id).await?;
    if json {
        crate::output::json(&PlanEvents { events: &events });
    } else {
        for e in &events {
            out!(
                "{:>6}  {}  {:<26} {:<10} {}",
                e.id,
                e.at.rfc3339(),
                e.kind,
                e.task_id.as_deref().unwrap_or("-"),
                printable(&e.entry().map(|entry| entry.describe()).unwrap_or_else(|| e.data.to_string()))
            );
        }
    }
    Ok(exit::SUCCESS)
}

/// A status badge, coloured on a terminal.
fn badge(status: TaskStatus, colour: bool) -> String {
    let text = format!("[{}]", status.as_str().to_uppercase());
    if !colour {
        return format!("{text:<11}");
    }
    let code = match status {
        TaskStatus::Done => "32",
        TaskStatus::Running => "33",
        TaskStatus::Ready => "36",
        TaskStatus::Failed | TaskStatus::Cancelled => "31",
        TaskStatus::Blocked | TaskStatus::Skipped => "2",
    };
    crate::output::paint(code, &format!("{text:<11}"))
}

/// `plan show`: the tasks by depth (dependencies above their dependents), each with its
/// badge and what it depends on.
pub(crate) fn render_dag(view: &PlanView, colour: bool) -> String {
    let p = &view.plan;
    let mut out = format!("Plan {} — {}\n", p.header.id, printable(&p.header.name));
    out.push_str(&format!("{}\n", "─".repeat(out.chars().count().saturating_sub(1).max(20))));
    let edges = view.edges();
    let depths = dag::depths(&edges);
    let width = view.tasks.iter().map(|t| t.spec.id.chars().count()).max().unwrap_or(0);
    for id in dag::order(&edges) {
        let Some(t) = view.task(&id) else { continue };
        let indent = "  ".repeat(depths.get(&id).copied().unwrap_or(0));
        out.push_str(&format!(
            "{indent}{} {:<width$}  {}\n",
            badge(t.status, colour),
            t.spec.id,
            printable(&t.spec.title)
        ));
        if !t.spec.dependencies.is_empty() {
            let waiting = view.waiting_on(t);
            let mut line = format!("{indent}            └─ depends on: {}", t.spec.dependencies.join(", "));
            if t.status == TaskStatus::Blocked && !waiting.is_empty() {
                let w: Vec<String> = waiting.iter().map(|(d, s)| format!("{d} ({})", s.as_str())).collect();
                line.push_str(&format!(" — waiting on {}", w.join(", ")));
            }
            out.push_str(&line);
            out.push('\n');
        }
    }
    let counts: Vec<String> = view.counts().iter().map(|(s, n)| format!("{} {n}", s.as_str())).collect();
    out.push_str(&format!("Summary: {} task(s) · {}\n", view.tasks.len(), counts.join(" · ")));
    out
}

/// One task's note: why it waits, failed or was skipped, or what it produced.
fn note(view: &PlanView, t: &TaskRecord, now: arbiter_core::time::Timestamp) -> String {
    match t.status {
        TaskStatus::Blocked => {
            let w: Vec<String> = view.waiting_on(t).iter().map(|(d, s)| format!("{d} ({})", s.as_str())).collect();
            format!("blocked by {}", w.join(", "))
        }
        TaskStatus::Running => match (&t.lease_owner, t.lease_expires) {
            (Some(w), Some(e)) => format!("held by {w}, lease for {}s more", e.seconds_after(now)),
            // Spread over units: what holds it up, when something does (a refused unit).
            _ => t.reason.clone().unwrap_or_default(),
        },
        TaskStatus::Ready if t.not_before > now => {
            format!("retry in {}s: {}", t.not_before.seconds_after(now), t.reason.clone().unwrap_or_default())
        }
        TaskStatus::Done => t.run_id.as_ref().map(|r| format!("run {r}")).unwrap_or_default(),
        _ => t.reason.clone().unwrap_or_default(),
    }
}

/// A task's cost as far as it is known: "unknown" when none of its calls had one, "≥$0.12"
/// when some had none (as `runs show` says "unknown" or "partial" of the same run).
fn cost_cell(cost: Usd, calls: Option<&CallCosts>) -> String {
    match calls {
        None => cost.to_string(),
        Some(c) if c.all_unknown() => "unknown".to_string(),
        Some(_) => format!("≥{cost}"),
    }
}

/// The line under a table whose tasks had calls of unknown cost, saying what that means.
/// The calls of unknown cost of every task.
fn uncosted_total(uncosted: &BTreeMap<String, CallCosts>) -> u64 {
    uncosted.values().map(|c| c.uncosted).sum()
}

fn uncosted_note(uncosted: &BTreeMap<String, CallCosts>) -> String {
    let calls = uncosted_total(uncosted);
    if calls == 0 {
        return String::new();
    }
    format!(
        "Cost unknown for {calls} call(s) of {} task(s): their runner reports no usage or price (a command agent, a model without prices); the amounts spent count only what is known.\n",
        uncosted.len()
    )
}

pub(super) fn render_table(
    view: &PlanView,
    uncosted: &BTreeMap<String, CallCosts>,
    now: arbiter_core::time::Timestamp,
) -> String {
    let width = view.tasks.iter().map(|t| t.spec.id.chars().count()).max().unwrap_or(4).max(4);
    let mut out =
        format!("{:<width$}  {:<9} {:>8}  {:<10} {:<10} NOTE\n", "TASK", "STATUS", "ATTEMPTS", "COST", "COMMIT");
    for t in &view.tasks {
        out.push_str(&format!(
            "{:<width$}  {:<9} {:>8}  {:<10} {:<10} {}\n",
            t.spec.id,
            t.status.as_str(),
            format!("{}/{}", t.attempts, t.max_attempts),
            cost_cell(t.cost, uncosted.get(&t.spec.id)),
            t.commit.as_deref().map(short).unwrap_or("-"),
            printable(&note(view, t, now))
        ));
    }
    out.push_str(&uncosted_note(uncosted));
    out
}

/// Whose the integration branch is, in a few words.
fn branch_owner(p: &PlanRecord) -> String {
    match p.branch_record() {
        Some(b) if b.origin == BranchOrigin::Created => format!("created by arbiter at {}", short(&b.base)),
        Some(b) => format!("adopted at {}; never moved back", short(&b.base)),
        None => "not created yet: the first run creates it".into(),
    }
}

fn render_status(
    view: &PlanView,
    uncosted: &BTreeMap<String, CallCosts>,
    now: arbiter_core::time::Timestamp,
) -> String {
    let p = &view.plan;
    let mut out = format!(
        "Plan {} — {}{}\n",
        p.header.id,
        printable(&p.header.name),
        if p.cancelled { " (cancelled)" } else { "" }
    );
    out.push_str(&format!(
        "Repository {} · base {} · integration branch {} ({})\n",
        p.header.repository.as_deref().unwrap_or("-"),
        p.header.base_ref,
        p.header.integration_branch,
        branch_owner(p)
    ));
    if let Some(source) = &p.header.source {
        out.push_str(&format!("From {}\n", printable(source)));
    }
    if let Some(prd) = &p.header.prd {
        out.push_str(&format!("Requirements {}\n", printable(prd)));
    }
    out.push_str(&match p.budget.limit {
        Some(l) => format!(
            "Budget {l}: {} spent{}, {} reserved{}\n",
            p.budget.spent,
            unknown_beside(uncosted),
            p.budget.reserved,
            if p.budget.exhausted() {
                " — spent: no task will be claimed until `arbiter plan budget` raises it"
            } else {
                ""
            }
        ),
        None => format!("No budget limit: {} spent{}\n", p.budget.spent, unknown_beside(uncosted)),
    });
    let counts: Vec<String> = view.counts().iter().map(|(s, n)| format!("{} {n}", s.as_str())).collect();
    out.push_str(&format!("{} task(s): {}\n\n", view.tasks.len(), counts.join(", ")));
    out.push_str(&render_table(view, uncosted, now));
    out
}

/// ", plus N call(s) of unknown cost" after an amount spent, when there are such calls.
pub(super) fn unknown_beside(uncosted: &BTreeMap<String, CallCosts>) -> String {
    match uncosted_total(uncosted) {
        0 => String::new(),
        calls => format!(", plus {calls} call(s) of unknown cost"),
    }
}
