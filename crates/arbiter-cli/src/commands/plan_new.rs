//! `arbiter plan new IDEA`: the PRD wizard. The `planning` role asks the clarifying
//! questions that matter (on a terminal; or the answers come from `--answers FILE`; or none
//! with `--no-questions`), writes `docs/PRD-<slug>.md`, decomposes it into
//! `docs/PLAN-<slug>.json` (checked, one repair round), the decision gate judges the tasks,
//! the DAG is shown, and the plan is imported after confirmation (`--yes`). Every call is
//! costed and recorded. Whatever the user must decide is checked before a model is asked.

use std::io::{BufRead, IsTerminal};
use std::path::Path;

use arbiter_core::intake::draft::Header;
use arbiter_core::intake::{slug, text};
use arbiter_core::plan::event::Drafted;
use arbiter_core::plan::gate::{GateResult, Rules};
use arbiter_core::plan::spec::export;
use serde::Serialize;

use crate::cli::PlanNewArgs;
use crate::commands::drafting::{Conversation, Drafting, cost_of, preview};
use crate::context::RepoContext;
use crate::error::{CliError, exit};
use crate::output::{JsonDocument, note, out};

/// The most of an answers file that is read.
const MAX_ANSWERS: usize = 64 * 1024;

/// `plan new --json`.
#[derive(Serialize)]
struct PlanDrafted {
    slug: String,
    prd: String,
    plan_file: String,
    tasks: usize,
    questions: Vec<String>,
    repaired: bool,
    dropped: Vec<String>,
    gate: Vec<GateResult>,
    calls: usize,
    cost: String,
    uncosted_calls: usize,
    imported: bool,
}

impl JsonDocument for PlanDrafted {
    const SCHEMA: &'static str = "plan-new";
}

pub async fn new(repo: Option<&Path>, args: &PlanNewArgs) -> Result<u8, CliError> {
    let terminal = std::io::stdin().is_terminal();
    let idea = text::clean(args.idea.trim());
    if idea.trim().is_empty() {
        return Err(CliError::usage(
            "the idea is empty: say in a sentence what to build, like `arbiter plan new \"Add CSV export to the reports page\"`",
        ));
    }
    let slug = match &args.slug {
        Some(s) => {
            slug::check(s).map_err(CliError::usage)?;
            s.clone()
        }
        None => slug::from_text(&idea),
    };
    let asks = !args.no_questions && args.answers.is_none();
    if asks && !terminal {
        return Err(CliError::usage(
            "there is no terminal to answer the clarifying questions on: pass --answers FILE (your answers, in any form) or --no-questions",
        ));
    }
    if !args.yes && !args.no_import && !terminal {
        return Err(CliError::usage(
            "there is no terminal to confirm the import on: pass --yes to import the plan, or --no-import to write the PRD and the plan file only",
        ));
    }
    let answers = match &args.answers {
        Some(path) => {
            let bytes = std::fs::read(path)
                .map_err(|e| CliError::usage(format!("cannot read the answers file {}: {e}", path.display())))?;
            Some(text::cap(&text::clean(&String::from_utf8_lossy(&bytes)), MAX_ANSWERS))
        }
        None => None,
    };
    let ctx = RepoContext::locate(repo).await?;
    let drafting = Drafting::open(ctx).await?;
    let (prd_rel, prd_path) = drafting.prd_path(&slug);
    let (plan_rel, plan_path) = drafting.plan_path(&slug);
    if !args.force {
        for (rel, path) in [(&prd_rel, &prd_path), (&plan_rel, &plan_path)] {
            if path.exists() {
                return Err(CliError::usage(format!(
                    "{rel} exists already: pass --force to overwrite it, or choose another --slug"
                )));
            }
        }
    }
    if !args.no_import && drafting.plans.plan_record(&slug).await?.is_some() {
        return Err(CliError::usage(format!(
            "a plan named {slug} exists already: choose another --slug (or write the files only with --no-import)"
        )));
    }

    let mut planner = drafting.planner()?;
    let (questions, clarifications) = if asks {
        let questions =
            planner.questions(&idea, &drafting.facts).await.map_err(crate::commands::drafting::planning_error)?;
        let clarifications = ask(&questions)?;
        (questions, clarifications)
    } else {
        let given = answers
            .as_deref()
            .map(|a| format!("The user's answers to the questions that matter:\n{a}"))
            .unwrap_or_default();
        (Vec::new(), given)
    };
    note!("arbiter: asking the planning model for the PRD");
    let prd = drafting.prd(&mut planner, &idea, &clarifications).await?;
    drafting.write_file(&prd_path, &prd)?;
    note!("arbiter: wrote {prd_rel}; decomposing it into a plan");
    let header = Header {
        id: slug.clone(),
        name: text::one_line(&idea, 80),
        base_ref: drafting.base_ref.clone(),
        source: None,
        prd: Some(prd_rel.clone()),
        push: false,
    };
    let from = format!("idea: {}", text::one_line(&idea, 200));
    let said = Conversation { from: &from, questions: &questions, answers: &clarifications };
    let draft = match drafting.plan(&mut planner, &prd, &header).await {
        Ok(d) => d,
        Err(e) => {
            drafting.record(&slug, &said, &prd_rel, None, planner.calls())?;
            return Err(e);
        }
    };
    drafting.write_file(&plan_path, &export(&draft.spec))?;
    let record_path = drafting.record(&slug, &said, &prd_rel, Some((&plan_rel, &draft.dropped)), planner.calls())?;
    let (_, known, uncosted) = cost_of(planner.calls());
    let calls = planner.calls().len();
    let gate: Vec<GateResult> =
        draft.spec.tasks.iter().map(|t| Rules::Arbiter.evaluate(t, &draft.spec.defaults)).collect();
    if !args.json {
        out!("PRD:  {prd_rel}");
        out!(
            "Plan: {plan_rel} ({} task(s)){}",
            draft.spec.tasks.len(),
            if draft.repaired { ", after one repair round" } else { "" }
        );
        out!();
        crate::output::text(&crate::commands::plan::render_dag(
            &preview(&draft.spec),
            crate::terminal::stdout_colour(),
        ));
        out!("Decision gate:");
        for v in &gate {
            out!("  {:<7} {}: {}", v.verdict.as_str(), v.task, crate::output::printable(&v.reason));
        }
        for d in &draft.dropped {
            out!("  left out: {}", crate::output::printable(d));
        }
        out!(
            "Planning: {calls} call(s), {known}{} (recorded in {})",
            if uncosted > 0 { format!(" plus {uncosted} call(s) of unknown cost") } else { String::new() },
            record_path.display()
        );
    }
    let import = if args.no_import {
        false
    } else if args.yes {
        true
    } else {
        crate::commands::plan::confirm(&format!("Import plan {slug} ({} task(s))? [y/N] ", draft.spec.tasks.len()))?
    };
    if import {
        let admin = crate::commands::plan::local_admin(&drafting.ctx, drafting.plans.clone());
        let drafted = Drafted {
            from: format!("idea: {}", text::one_line(&idea, 200)),
            prd: prd_rel.clone(),
            calls,
            cost: known,
            uncosted_calls: uncosted,
            repaired: draft.repaired,
            dropped: draft.dropped.clone(),
        };
        drafting.import(&*admin, &draft.spec, drafted, known).await?;
        if !args.json {
            out!(
                "Imported plan {slug}; run it with `arbiter plan run {slug}` (edit {plan_rel} and `arbiter plan apply {plan_rel} --update` to change it first)."
            );
        }
    } else if !args.json {
        out!("Not imported; import it with `arbiter plan apply {plan_rel}` once it reads right.");
    }
    if args.json {
        crate::output::json(&PlanDrafted {
            slug,
            prd: prd_rel,
            plan_file: plan_rel,
            tasks: draft.spec.tasks.len(),
            questions,
            repaired: draft.repaired,
            dropped: draft.dropped,
            gate,
            calls,
            cost: known.decimal(),
            uncosted_calls: uncosted,
            imported: import,
        });
    }
    Ok(exit::SUCCESS)
}

/// Asks each question on the terminal; the questions with their answers, for the PRD.
fn ask(questions: &[String]) -> Result<String, CliError> {
    if questions.is_empty() {
        note!("arbiter: the planner has no questions");
        return Ok(String::new());
    }
    let mut out = String::new();
    let stdin = std::io::stdin();
    for (i, q) in questions.iter().enumerate() {
        crate::output::prompt(&format!("[{}/{}] {}\n> ", i + 1, questions.len(), crate::output::printable(q)));
        let mut answer = String::new();
        stdin.lock().read_line(&mut answer)?;
        let answer = text::clean(answer.trim());
        out.push_str(&format!("Q: {q}\nA: {}\n\n", if answer.is_empty() { "(no answer)" } else { &answer }));
    }
    Ok(out)
}
