//! What arbiter writes on a forge: the body of a pull (merge) request — a run's final
//! report, or a plan's summary with each task's winner and the reasons it won — and the
//! comment that tells an issue how its plan ended.
//!
//! Everything written here may quote agents' and models' text: it is cleaned of control
//! characters and capped (forges refuse bodies over 65,536 characters).

use super::issue::Forge;
use super::text;

/// The most a body or comment holds (GitHub refuses more than 65,536 characters).
pub const MAX_BODY: usize = 60_000;

/// How one task of a plan ended, for the plan's pull request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskOutcome {
    pub id: String,
    pub title: String,
    /// `done`, `skipped`, `failed`, ...
    pub status: String,
    pub commit: Option<String>,
    pub run_id: Option<String>,
    /// The winning candidate, when the run's selection is at hand.
    pub winner: Option<String>,
    /// Why it won (the selection's summary and the winner's reason).
    pub reasons: Vec<String>,
}

/// The plan a pull request carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanOutcome {
    pub id: String,
    pub name: String,
    pub branch: String,
    pub source: Option<String>,
    pub prd: Option<String>,
    pub tasks: Vec<TaskOutcome>,
    /// What the plan spent, as `$1.23` (and what is unknown).
    pub spent: String,
}

/// The body of a plan's pull request: its tasks in plan order, each with its commit, run,
/// winner and reasons.
pub fn plan_body(plan: &PlanOutcome) -> String {
    let mut out = format!("Plan **{}** — {}\n\n", text::one_line(&plan.id, 64), text::one_line(&plan.name, 200));
    if let Some(source) = &plan.source {
        out.push_str(&format!("Planned from {}.\n", text::one_line(source, 300)));
    }
    if let Some(prd) = &plan.prd {
        out.push_str(&format!("Requirements: `{}`.\n", text::one_line(prd, 200)));
    }
    out.push_str(&format!(
        "Every task below was run by arbiter as a tournament of candidates, checked by its verify commands, and its winner committed on `{}`. Spent: {}.\n\n",
        text::one_line(&plan.branch, 200),
        plan.spent
    ));
    out.push_str("| task | status | commit | run | winner |\n|---|---|---|---|---|\n");
    for t in &plan.tasks {
        out.push_str(&format!(
            "| {} {} | {} | {} | {} | {} |\n",
            cell(&t.id),
            cell(&t.title),
            cell(&t.status),
            t.commit.as_deref().map(|c| format!("`{}`", short(c))).unwrap_or_else(|| "-".into()),
            t.run_id.as_deref().map(cell).unwrap_or_else(|| "-".into()),
            t.winner.as_deref().map(cell).unwrap_or_else(|| "-".into())
        ));
    }
    for t in plan.tasks.iter().filter(|t| !t.reasons.is_empty()) {
        out.push_str(&format!("\n### {} — why its winner won\n\n", cell(&t.id)));
        for r in &t.reasons {
            out.push_str(&format!("- {}\n", text::one_line(r, 600)));
        }
    }
    text::cap(&out, MAX_BODY)
}

/// The body of a run's pull request: its final report, cleaned and capped.
pub fn run_body(report: &str) -> String {
    text::cap(&text::clean(report), MAX_BODY)
}

/// The comment that tells an issue how its plan ended: done or failed, how many tasks, the
/// pull request when there is one, what to do next otherwise.
pub fn issue_comment(
    forge: Forge,
    plan: &str,
    done: bool,
    tasks_done: usize,
    tasks: usize,
    change: Option<&str>,
    failed: &[(String, String)],
) -> String {
    let mut out = if done {
        format!("arbiter finished plan `{plan}` for this issue: {tasks_done} of {tasks} task(s) done.\n")
    } else {
        format!("arbiter's plan `{plan}` for this issue stopped: {tasks_done} of {tasks} task(s) done.\n")
    };
    for (task, why) in failed {
        out.push_str(&format!("\n- task {} failed: {}", cell(task), text::one_line(why, 400)));
    }
    if !failed.is_empty() {
        out.push('\n');
    }
    match change {
        Some(url) => out.push_str(&format!("\nThe {}: {}\n", forge.change_noun(), text::one_line(url, 300))),
        None if done => out.push_str(&format!(
            "\nThe work is on the plan's integration branch; `arbiter pr --plan {plan}` opens the {}.\n",
            forge.change_noun()
        )),
        None => out.push_str(&format!(
            "\n`arbiter plan status {plan}` says why; `arbiter plan retry {plan} TASK` runs a task again.\n"
        )),
    }
    out
}

/// A table cell: one clean line without `|`.
fn cell(s: &str) -> String {
    text::one_line(s, 120).replace('|', "\\|")
}

fn short(commit: &str) -> &str {
    commit.get(..10).unwrap_or(commit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_body_names_every_task_its_winner_and_reasons() {
        let plan = PlanOutcome {
            id: "csv".into(),
            name: "CSV export".into(),
            branch: "arbiter/csv".into(),
            source: Some("https://github.com/a/b/issues/3".into()),
            prd: Some("docs/PRD-csv.md".into()),
            tasks: vec![TaskOutcome {
                id: "T1".into(),
                title: "Exporter | pipes".into(),
                status: "done".into(),
                commit: Some("0123456789abcdef".into()),
                run_id: Some("20260101T000000Z-abc123".into()),
                winner: Some("c02".into()),
                reasons: vec!["passed every gate\u{1b}[31m; c01 failed test_x".into()],
            }],
            spent: "$0.42".into(),
        };
        let body = plan_body(&plan);
        assert!(
            body.contains("| T1 Exporter \\| pipes | done | `0123456789` | 20260101T000000Z-abc123 | c02 |"),
            "{body}"
        );
        assert!(body.contains("### T1 — why its winner won\n\n- passed every gate; c01 failed test_x"));
        assert!(body.contains("Planned from https://github.com/a/b/issues/3."));
        assert!(!body.contains('\u{1b}'));
    }

    #[test]
    fn the_issue_comment_links_the_change_or_says_what_next() {
        let c = issue_comment(Forge::GitHub, "p", true, 2, 2, Some("https://h/a/b/pull/9"), &[]);
        assert!(c.contains("2 of 2 task(s) done") && c.contains("The pull request: https://h/a/b/pull/9"));
        let f = issue_comment(Forge::GitHub, "p", false, 1, 2, None, &[("T2".into(), "no candidate passed".into())]);
        assert!(
            f.contains("stopped")
                && f.contains("task T2 failed: no candidate passed")
                && f.contains("plan retry p TASK")
        );
        assert!(run_body(&"x".repeat(100_000)).len() < MAX_BODY + 100);
    }
}
