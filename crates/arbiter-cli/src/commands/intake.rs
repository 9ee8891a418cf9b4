//! `arbiter intake github|gitlab OWNER/REPO#N` (or `OWNER/REPO --label L`): an issue into
//! a PRD and a plan whose record links the issue, through the user's own `gh`/`glab` login.
//!
//! - The issue (title, body, comments) is untrusted: cleaned of escape sequences, capped,
//!   and quoted to the `planning` role as data; the plan it drafts is held to the drafting
//!   rules (no runner, command or budget of the model's choosing; verify commands grounded in
//!   the repository's tests).
//! - One issue makes one plan, and the store decides: the plan's source is the issue's URL,
//!   unique in the store. A second intake finds the plan before any model call; two at once
//!   both draft, and the store keeps exactly one (the other writes nothing, and leaves the
//!   labels alone).
//! - Labels say where the issue is: the intake whose plan stands moves it from pending to in
//!   progress (the plan's completion moves it to done or failed, see
//!   [`crate::commands::pr`]); any other intake of the issue leaves its labels alone.

use std::path::Path;

use arbiter_core::intake::draft::Header;
use arbiter_core::intake::issue::{Forge, Issue, Labels, Stage, parse_ref};
use arbiter_core::intake::{slug, text};
use arbiter_core::plan::event::{Drafted, PlanEntry};
use arbiter_core::plan::spec::export;
use arbiter_runner::forge::{ForgeCli, ForgeError};
use serde::Serialize;

use crate::cli::{IntakeArgs, IntakeCommand};
use crate::commands::drafting::{Conversation, Drafting, cost_of};
use crate::context::RepoContext;
use crate::error::{CliError, exit};
use crate::output::{JsonDocument, note, out, warning};

/// What became of one issue.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "snake_case")]
enum Outcome {
    /// A new plan.
    Planned,
    /// A plan came from it already (no model call was made).
    PlannedAlready,
    /// Another intake of the same issue created its plan while this one drafted.
    PlannedConcurrently,
    /// It could not be planned (`error` says why).
    Failed,
}

/// One issue's line of `intake --json`.
#[derive(Clone, Debug, Serialize)]
struct IssueLine {
    number: u64,
    url: Option<String>,
    outcome: Outcome,
    plan: Option<String>,
    tasks: Option<usize>,
    prd: Option<String>,
    plan_file: Option<String>,
    calls: usize,
    cost: Option<String>,
    error: Option<String>,
}

impl IssueLine {
    /// The line of issue `number`, with nothing known yet but its outcome.
    fn new(number: u64, url: Option<String>, outcome: Outcome) -> Self {
        IssueLine {
            number,
            url,
            outcome,
            plan: None,
            tasks: None,
            prd: None,
            plan_file: None,
            calls: 0,
            cost: None,
            error: None,
        }
    }
}

/// `intake --json`.
#[derive(Serialize)]
struct Intaken {
    forge: Forge,
    repository: String,
    issues: Vec<IssueLine>,
}

impl JsonDocument for Intaken {
    const SCHEMA: &'static str = "intake";
}

pub async fn intake(repo: Option<&Path>, cmd: &IntakeCommand) -> Result<u8, CliError> {
    let (forge, args): (Forge, &IntakeArgs) = match cmd {
        IntakeCommand::Github(a) => (Forge::GitHub, a),
        IntakeCommand::Gitlab(a) => (Forge::GitLab, a),
    };
    let reference = parse_ref(&args.reference, forge).map_err(CliError::usage)?;
    if reference.number.is_some() && args.label.is_some() {
        return Err(CliError::usage(
            "--label goes with OWNER/REPO (every open issue carrying it), not with one issue: drop --label, or the #NUMBER",
        ));
    }
    let ctx = RepoContext::locate(repo).await?;
    let config = ctx.config()?;
    let labels = config.intake.labels();
    labels.check().map_err(CliError::usage)?;
    let cli = ForgeCli::find(forge, config.forge.host.as_deref()).map_err(forge_error)?;
    let drafting = Drafting::open(ctx).await?;
    let numbers = match reference.number {
        Some(n) => vec![n],
        None => {
            let label = args.label.clone().unwrap_or_else(|| labels.pending.clone());
            let found = cli.issues_with_label(&reference.repo, &label).await.map_err(forge_error)?;
            if found.is_empty() && !args.json {
                out!("No open issue of {} carries the label {label}.", reference.repo);
            }
            found
        }
    };
    let mut lines = Vec::new();
    let mut code = exit::SUCCESS;
    for number in numbers {
        let line = match intake_one(&drafting, &cli, &reference.repo, number, &labels, config.intake.push_or_default())
            .await
        {
            Ok(line) => line,
            Err(e) => {
                if code == exit::SUCCESS {
                    code = e.code;
                }
                if reference.number.is_some() && !args.json {
                    return Err(e);
                }
                warning!("arbiter: issue {}#{number}: {}", reference.repo, e.message);
                IssueLine { error: Some(e.message), ..IssueLine::new(number, None, Outcome::Failed) }
            }
        };
        if !args.json {
            say(&reference.repo, &line);
        }
        lines.push(line);
    }
    if args.json {
        crate::output::json(&Intaken { forge, repository: reference.repo.clone(), issues: lines });
    }
    Ok(code)
}

fn say(repo: &str, line: &IssueLine) {
    let plan = line.plan.as_deref().unwrap_or("-");
    match line.outcome {
        Outcome::Planned => out!(
            "{repo}#{}: planned as {plan} ({} task(s); {} and {}); run it with `arbiter plan run {plan}`",
            line.number,
            line.tasks.unwrap_or(0),
            line.prd.as_deref().unwrap_or("-"),
            line.plan_file.as_deref().unwrap_or("-")
        ),
        Outcome::PlannedAlready => out!("{repo}#{}: planned already as {plan}; nothing changed", line.number),
        Outcome::PlannedConcurrently => {
            out!("{repo}#{}: another intake planned it as {plan} at the same time; this one wrote nothing", line.number)
        }
        Outcome::Failed => {}
    }
}

/// A forge failure as the user sees it: a missing or logged-out CLI is the environment's (3),
/// anything the forge refused is the request's (2).
fn forge_error(e: ForgeError) -> CliError {
    if e.is_environment() { CliError::environment(e) } else { CliError::usage(e) }
}

async fn intake_one(
    drafting: &Drafting,
    cli: &ForgeCli,
    repo: &str,
    number: u64,
    labels: &Labels,
    push: bool,
) -> Result<IssueLine, CliError> {
    let issue = cli.issue(repo, number).await.map_err(forge_error)?;
    if issue.state != "open" {
        return Err(CliError::usage(format!(
            "{repo}#{number} is {}: only open issues are planned (reopen it first)",
            text::one_line(&issue.state, 20)
        )));
    }
    let source = issue.url.clone();
    if remote_url_ok(&source).is_none() {
        return Err(CliError::environment(format!(
            "the forge gave {repo}#{number} no usable page URL ('{}'), which names its plan",
            text::one_line(&source, 100)
        )));
    }
    let mut line = IssueLine::new(number, Some(source.clone()), Outcome::Planned);
    if let Some(plan) = drafting.plans.plan_by_source(&source).await? {
        // The intake that made the plan moves the labels; this one changes nothing (it may
        // run while that one is still at it).
        return Ok(IssueLine { outcome: Outcome::PlannedAlready, plan: Some(plan), ..line });
    }
    let (owner, name) = repo.rsplit_once('/').unwrap_or(("", repo));
    let slug = slug::for_issue(owner, name, number);
    let (prd_rel, prd_path) = drafting.prd_path(&slug);
    let (plan_rel, plan_path) = drafting.plan_path(&slug);
    let mut planner = drafting.planner()?;
    note!("arbiter: {repo}#{number}: writing the PRD");
    let idea = issue.as_idea();
    let prd = drafting.prd(&mut planner, &idea, "").await?;
    let header = Header {
        id: slug.clone(),
        name: issue.clean_title(),
        base_ref: drafting.base_ref.clone(),
        source: Some(source.clone()),
        prd: Some(prd_rel.clone()),
        push,
    };
    note!("arbiter: {repo}#{number}: decomposing the PRD into a plan");
    let draft = drafting.plan(&mut planner, &prd, &header).await?;
    let (_, known, uncosted) = cost_of(planner.calls());
    let drafted = Drafted {
        from: source.clone(),
        prd: prd_rel.clone(),
        calls: planner.calls().len(),
        cost: known,
        uncosted_calls: uncosted,
        repaired: draft.repaired,
        dropped: draft.dropped.clone(),
    };
    line.calls = planner.calls().len();
    line.cost = Some(known.decimal());
    let admin = crate::commands::plan::local_admin(&drafting.ctx, drafting.plans.clone());
    if let Err(e) = drafting.import(&*admin, &draft.spec, drafted, known).await {
        // The store decides: when another intake's plan from this issue is there now, that
        // one stands, and this one wrote nothing.
        if let Some(plan) = drafting.plans.plan_by_source(&source).await? {
            return Ok(IssueLine { outcome: Outcome::PlannedConcurrently, plan: Some(plan), ..line });
        }
        return Err(e);
    }
    drafting.write_file(&prd_path, &prd)?;
    drafting.write_file(&plan_path, &export(&draft.spec))?;
    let said = Conversation { from: &source, questions: &[], answers: "" };
    drafting.record(&slug, &said, &prd_rel, Some((&plan_rel, &draft.dropped)), planner.calls())?;
    for d in &draft.dropped {
        note!("arbiter: {repo}#{number}: left out of the model's plan: {}", crate::output::printable(d));
    }
    flip(drafting, cli, repo, &issue, &slug, labels.move_to(Stage::InProgress, &issue.labels)).await;
    Ok(IssueLine {
        plan: Some(slug),
        tasks: Some(draft.spec.tasks.len()),
        prd: Some(prd_rel),
        plan_file: Some(plan_rel),
        ..line
    })
}

/// Moves the issue's labels (a failure is a warning: the plan stands, and the next intake
/// of the issue puts the label back); records it in the plan's log.
async fn flip(
    drafting: &Drafting,
    cli: &ForgeCli,
    repo: &str,
    issue: &Issue,
    plan: &str,
    change: arbiter_core::intake::issue::LabelChange,
) {
    if change.is_empty() {
        return;
    }
    match cli.relabel(repo, issue.number, &change).await {
        Ok(()) => {
            let entry = PlanEntry::IssueUpdated {
                url: issue.url.clone(),
                stage: "in-progress".into(),
                comment: None,
                change: None,
            };
            let now = arbiter_core::Clock::now(&arbiter_runner::SystemClock);
            if let Err(e) = drafting.plans.note_event(plan, entry, now).await {
                warning!("arbiter: the label change of {repo}#{} could not be recorded: {e}", issue.number);
            }
        }
        Err(e) => warning!(
            "arbiter: plan {plan} stands, but the labels of {repo}#{} could not be changed ({e}): add {} and remove {} yourself",
            issue.number,
            change.add.join(", "),
            if change.remove.is_empty() { "nothing".to_string() } else { change.remove.join(", ") }
        ),
    }
}

/// The issue's page, when it names an issue of a forge repository.
fn remote_url_ok(url: &str) -> Option<()> {
    arbiter_core::intake::remote::issue_of_url(url).map(|_| ())
}
