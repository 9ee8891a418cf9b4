//! `arbiter plan create|budget|reset|cancel|retry|push`: the verbs that change a plan (or
//! move its integration branch).

use arbiter_core::money::Usd;
use arbiter_runner::plan_admin::{NewPlan, PlanAdmin};

use super::{Plans, confirm, local_actor, short};
use crate::commands::plan_output::PlanPushed;
use crate::error::{CliError, exit};
use crate::output::{out, printable};

/// `plan create`: an empty plan.
pub(super) async fn create(
    plans: &Plans,
    id: &str,
    name: &str,
    budget: Option<&str>,
    repository: Option<&str>,
) -> Result<u8, CliError> {
    let admin = &*plans.admin;
    let budget_usd = budget.map(parse_usd).transpose()?;
    let repository = plans.repository(repository, None)?.ok_or_else(|| {
        CliError::usage(
            "outside a repository, `plan create --server` needs --repository PATH_OR_URL: the plan's repository as the server sees it (an absolute path on the server's machine, or a git URL it can clone)",
        )
    })?;
    admin
        .create(&NewPlan { id: id.to_string(), name: name.to_string(), repository: Some(repository), budget_usd })
        .await?;
    out!("Created plan {id} ({}); add tasks with `arbiter plan import FILE --update`.", printable(name));
    Ok(exit::SUCCESS)
}

/// `plan budget`: the plan's budget in USD, or none.
pub(super) async fn budget(admin: &dyn PlanAdmin, id: &str, usd: &str) -> Result<u8, CliError> {
    let limit = if usd.eq_ignore_ascii_case("none") { None } else { Some(parse_usd(usd)?) };
    let b = admin.set_budget(id, limit, &local_actor()).await?;
    match b.limit {
        Some(l) if b.exhausted() => {
            out!("Plan {id}: budget {l}, {} spent — still spent; no task will be claimed", b.spent)
        }
        Some(l) => out!("Plan {id}: budget {l}, {} spent, {} reserved", b.spent, b.reserved),
        None => out!("Plan {id}: no budget limit ({} spent)", b.spent),
    }
    Ok(exit::SUCCESS)
}

/// `plan reset`: every task back to its start, asked first unless `yes`.
pub(super) async fn reset(
    admin: &dyn PlanAdmin,
    id: &str,
    hard: bool,
    keep_branch: bool,
    yes: bool,
) -> Result<u8, CliError> {
    // What happens to the branch is decided before anything changes: a branch the
    // plan does not own (or a checked-out one) refuses the whole reset.
    let preview = admin.reset_preview(id, keep_branch).await?;
    let branch = &preview.branch;
    let branch_then = match &branch.new_tip {
        Some(base) => {
            format!("Its integration branch {} goes back to where arbiter created it ({})", branch.name, short(base))
        }
        None => format!("Its integration branch {} stays where it is", branch.name),
    };
    if !yes
        && !confirm(&format!(
            "Reset plan {id} ({} tasks){}? {branch_then}. [y/N] ",
            preview.tasks,
            if hard { ", forgetting attempts and spending" } else { "" }
        ))?
    {
        out!("Not reset.");
        return Ok(exit::SUCCESS);
    }
    let done = admin.reset(id, hard, keep_branch).await?;
    let (n, branch) = (done.reset, &done.branch);
    match (&branch.old_tip, &branch.new_tip, &branch.kept) {
        (Some(old), Some(new), _) => out!(
            "Reset {n} task(s) of plan {id}; {} was at {} and now points where arbiter created it ({})",
            branch.name,
            short(old),
            short(new)
        ),
        (Some(old), None, _) => out!(
            "Reset {n} task(s) of plan {id}; {} stays at {} (--keep-branch): the plan's commits stay on it",
            branch.name,
            short(old)
        ),
        _ => out!("Reset {n} task(s) of plan {id}."),
    }
    Ok(exit::SUCCESS)
}

/// `plan cancel`.
pub(super) async fn cancel(admin: &dyn PlanAdmin, id: &str) -> Result<u8, CliError> {
    let n = admin.cancel(id, &local_actor()).await?;
    out!("Cancelled plan {id}: {n} unfinished task(s); running attempts are stopped at their next heartbeat.");
    Ok(exit::SUCCESS)
}

/// `plan retry`: one task.
pub(super) async fn retry(admin: &dyn PlanAdmin, id: &str, task: &str) -> Result<u8, CliError> {
    let status = admin.retry(id, task, &local_actor()).await?;
    out!("Task {task} of plan {id} is {} again, with new attempts.", status.as_str());
    Ok(exit::SUCCESS)
}

/// `plan push`: the integration branch to `remote`.
pub(super) async fn push(admin: &dyn PlanAdmin, id: &str, remote: &str, json: bool) -> Result<u8, CliError> {
    let pushed = admin.push(id, remote).await?;
    if json {
        crate::output::json(&PlanPushed { pushed: &pushed });
    } else if pushed.up_to_date {
        out!("{} ({}) has {} at {} already.", pushed.remote, pushed.url, pushed.branch, short(&pushed.commit));
    } else {
        out!("Pushed {} at {} to {} ({}).", pushed.branch, short(&pushed.commit), pushed.remote, pushed.url);
    }
    Ok(exit::SUCCESS)
}

fn parse_usd(text: &str) -> Result<Usd, CliError> {
    Usd::parse(text).filter(|u| *u >= Usd::ZERO).ok_or_else(|| {
        CliError::usage(format!("'{text}' is not an amount of USD; write it like 5 or 2.50 (at most 12 decimals)"))
    })
}
