//! `arbiter feature ...`: the slice verbs of `arbiter-slices`, their model access (the
//! `spec` role), the editor's current file, the tournament of `feature do` (through
//! `arbiter run`'s own preparation and driver), and what each verb printed.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use arbiter_core::Clock;
use arbiter_core::rules::RuleOptions;
use arbiter_core::settings::RunSettings;
use arbiter_core::task::Task;
use arbiter_runner::engine::RunOutcome;
use arbiter_slices::SliceError;
use arbiter_slices::repo::Repo;
use arbiter_slices::settings::SliceSettings;
use arbiter_slices::verbs::{self, DoFinished, DoPlan, ModifyRequest, NewRequest, SpecSource, Workspace};
use arbiter_slices::writer::SpecModel;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::run;
use crate::cli::{FeatureCommand, SettingsArgs};
use crate::context::RepoContext;
use crate::error::{CliError, exit};
use crate::output::{JsonDocument, note, out, printable, warning};

/// A slice error as an exit code.
pub fn slice_error(e: SliceError) -> CliError {
    match e {
        SliceError::Refused(m) => CliError::usage(m),
        SliceError::Failed(m) => CliError::no_result(m),
        SliceError::Environment(m) => CliError::environment(m),
    }
}

/// The repository and its slice workspace (`.arbiter/` kept out of git).
pub async fn workspace(repo: Option<&Path>) -> Result<(RepoContext, Workspace), CliError> {
    let ctx = RepoContext::locate(repo).await?;
    let config = ctx.config()?;
    let settings = SliceSettings::resolve(&config.slices).map_err(CliError::usage)?;
    ctx.prepare_dir().await?;
    let ws = Workspace {
        repo: Repo::new(ctx.workspace.repo_root(), settings),
        rule_options: RuleOptions::from_section(&config.rules),
    };
    Ok((ctx, ws))
}

pub async fn feature(repo: Option<&Path>, cmd: &FeatureCommand) -> Result<u8, CliError> {
    let (ctx, ws) = workspace(repo).await?;
    let progress = |m: &str| note!("arbiter: {m}");
    match cmd {
        FeatureCommand::New { target, prompt, prompt_file, template, app, no_controller, force } => {
            let prompt = prompt_text(prompt, prompt_file.as_deref())?;
            let model = spec_model(&ctx)?;
            let req = NewRequest {
                target,
                prompt: &prompt,
                template: template.as_deref(),
                app: app.as_deref(),
                no_controller: *no_controller,
                force: *force,
            };
            let o = verbs::new_slice(&ws, req, model.as_ref(), &progress).await.map_err(slice_error)?;
            match o.spec_source {
                SpecSource::Model => {}
                SpecSource::TemplateNoModel => note!(
                    "arbiter: no `spec` role backend is configured: spec.md is orch.py's template with your prompt as its overview (`arbiter backend add NAME ... --roles spec` writes specs with a model)"
                ),
                SpecSource::TemplateModelFailed => warning!(
                    "arbiter: the spec model failed ({}): spec.md is the template; edit it, or amend it with `arbiter feature modify`",
                    o.model_problem.as_deref().unwrap_or("no answer")
                ),
            }
            if let Some(qa) = &o.spec_qa {
                out!("Spec QA: {} ({} round(s); records in {})", qa.verdict, qa.rounds.len(), o.records);
            }
            out!("Created {} in {} on the branch {}", o.slice, o.dir, o.branch);
            for f in &o.files {
                out!("  {f}");
            }
            if !o.registry.is_empty() {
                out!("Registered in {}", o.registry.join(", "));
            }
            if let Some(c) = &o.commit {
                out!("Committed {}", short(c));
            }
            out!("Next: arbiter feature do {}", o.slice);
            Ok(exit::SUCCESS)
        }
        FeatureCommand::Modify { words, prompt_file } => {
            let (target, prompt) = modify_words(words, prompt_file.as_deref())?;
            let model = spec_model(&ctx)?;
            let editor = editor_file().await;
            let req = ModifyRequest {
                target: target.as_deref(),
                prompt: &prompt,
                editor_file: editor.as_deref(),
                now: arbiter_runner::SystemClock.now().rfc3339(),
            };
            let o = verbs::modify(&ws, req, model.as_ref(), &progress).await.map_err(slice_error)?;
            out!("Amendment {} recorded in the spec of {}", o.amendment, o.slice);
            out!("  Resolution: {}", printable(&o.resolution));
            out!("  QA verdict: {}", printable(&o.qa.to_string()));
            if let Some(c) = &o.commit {
                out!("Committed {}", short(c));
            }
            out!("Next: arbiter feature do {}", o.slice);
            Ok(exit::SUCCESS)
        }
        FeatureCommand::Do { target, no_push, no_rules, json, settings } => {
            implement(&ctx, &ws, target.as_deref(), *no_push, *no_rules, *json, settings).await
        }
        FeatureCommand::Merge { target, no_push } => {
            let o = verbs::merge(&ws, target.as_deref(), *no_push).await.map_err(slice_error)?;
            out!("Merged {} into {} ({})", o.branch, o.into, short(&o.merge_commit));
            if o.fast_forwarded {
                out!("  {} was first brought up to date from {}", o.into, ws.repo.settings.remote);
            }
            out!(
                "  {}",
                if o.pushed { format!("pushed {}", o.into) } else { "not pushed (no remote, or --no-push)".into() }
            );
            out!(
                "  deleted the branch {}{}",
                o.branch,
                if o.remote_branch_deleted { " (also on the remote)" } else { "" }
            );
            for w in &o.warnings {
                warning!("arbiter: warning: {w}");
            }
            Ok(exit::SUCCESS)
        }
        FeatureCommand::Undo { target, yes } => {
            let o = verbs::undo(&ws, target.as_deref(), *yes).await.map_err(slice_error)?;
            out!(
                "Discarded the branch {}{}; you are on {}",
                o.branch,
                if o.remote_branch_deleted { " (and its remote branch)" } else { "" },
                o.now_on
            );
            if !o.discarded_commits.is_empty() {
                out!("  discarded commits: {}", o.discarded_commits.join("; "));
            }
            if !o.discarded_changes.is_empty() {
                out!("  discarded uncommitted changes inside the slice: {}", o.discarded_changes.join(", "));
            }
            if !o.kept_changes.is_empty() {
                out!("  kept uncommitted changes: {}", o.kept_changes.join(", "));
            }
            Ok(exit::SUCCESS)
        }
        FeatureCommand::Delete { target, yes } => {
            let o = verbs::delete(&ws, target.as_deref(), *yes).await.map_err(slice_error)?;
            if let Some(dir) = &o.removed_dir {
                out!("Removed {dir} and its registry entry ({})", o.commit.as_deref().map(short).unwrap_or_default());
            }
            if o.branch_deleted {
                out!(
                    "Deleted the branch {}{}",
                    o.slice,
                    if o.remote_branch_deleted { " (also on the remote)" } else { "" }
                );
            }
            if !o.discarded_commits.is_empty() {
                out!("  discarded commits: {}", o.discarded_commits.join("; "));
            }
            Ok(exit::SUCCESS)
        }
        FeatureCommand::Move { from, to } => {
            let cancel = CancellationToken::new();
            let o = verbs::move_slice(&ws, from, to, &cancel).await.map_err(slice_error)?;
            out!(
                "Moved {} ({}) to {} ({}){}",
                o.from,
                o.from_dir,
                o.to,
                o.to_dir,
                o.commit.as_deref().map(|c| format!(", commit {}", short(c))).unwrap_or_default()
            );
            if let Some(b) = &o.branch_renamed {
                out!("  the branch is now {b}");
            }
            Ok(match o.tests.passed {
                Some(true) => {
                    out!("  its tests pass at the new place (`{}`)", o.tests.command);
                    exit::SUCCESS
                }
                Some(false) => {
                    out!(
                        "  its tests FAIL at the new place (`{}`); the move is committed:\n{}",
                        printable(&o.tests.command),
                        arbiter_core::text::visible(o.tests.output_tail.trim_end())
                    );
                    exit::NO_RESULT
                }
                None => {
                    out!("  it has no tests to run");
                    exit::SUCCESS
                }
            })
        }
        FeatureCommand::Scan { json } => {
            let o = verbs::scan(&ws).map_err(slice_error)?;
            if *json {
                crate::output::json(&ScanDoc(o));
                return Ok(exit::SUCCESS);
            }
            if o.slices.is_empty() {
                out!("No feature slices found.");
            }
            let mut domain = None;
            for s in &o.slices {
                if domain != Some(&s.domain) {
                    out!("{}/", s.domain);
                    domain = Some(&s.domain);
                }
                out!(
                    "  {}{}{}",
                    s.name,
                    if s.flat { " (flat)" } else { "" },
                    if s.registered { "" } else { " (not in .features.json)" }
                );
            }
            for m in &o.registered_missing {
                out!("registered but not here: {m}");
            }
            Ok(exit::SUCCESS)
        }
        FeatureCommand::Status { json } => {
            let o = verbs::status(&ws).await.map_err(slice_error)?;
            if *json {
                crate::output::json(&StatusDoc(o));
                return Ok(exit::SUCCESS);
            }
            out!("Default branch: {}", o.default_branch);
            if o.in_progress.is_empty() {
                out!("No slice in progress.");
            }
            for b in &o.in_progress {
                out!(
                    "{} {}  {} ahead, {} behind{}",
                    if b.current { "*" } else { " " },
                    b.branch,
                    b.ahead,
                    b.behind,
                    if b.has_slice { "" } else { "  (its slice directory is not on it)" }
                );
            }
            if !o.uncommitted.is_empty() {
                out!("Uncommitted: {}", o.uncommitted.join(", "));
            }
            Ok(exit::SUCCESS)
        }
    }
}

/// The first 12 characters of a commit id.
fn short(c: &str) -> String {
    c.chars().take(12).collect()
}

/// The prompt: the words, or the file.
fn prompt_text(words: &[String], file: Option<&Path>) -> Result<String, CliError> {
    match file {
        Some(f) => std::fs::read_to_string(f)
            .map_err(|e| CliError::usage(format!("cannot read the prompt file {}: {e}", f.display()))),
        None => Ok(words.join(" ")),
    }
}

/// `modify`'s words: a first word that is a target (no space in it) names the slice; the
/// rest is the change.
fn modify_words(words: &[String], file: Option<&Path>) -> Result<(Option<String>, String), CliError> {
    let first_is_target = words
        .first()
        .is_some_and(|w| !w.contains(char::is_whitespace) && arbiter_slices::names::TargetSpec::parse(w).is_ok());
    let (target, rest) = if first_is_target { (words.first().cloned(), &words[1..]) } else { (None, words) };
    Ok((target, prompt_text(rest, file)?))
}

/// The file open in the user's editor: `$ARBITER_CURRENT_FILE`, else the current buffer of
/// the Neovim server `$NVIM` (or `$NVIM_LISTEN_ADDRESS`) names, asked for 3 seconds.
async fn editor_file() -> Option<String> {
    if let Some(f) = std::env::var("ARBITER_CURRENT_FILE").ok().filter(|f| !f.is_empty()) {
        return Some(f);
    }
    let server =
        std::env::var("NVIM").or_else(|_| std::env::var("NVIM_LISTEN_ADDRESS")).ok().filter(|s| !s.is_empty())?;
    let ask = tokio::process::Command::new("nvim")
        .args(["--headless", "--server", &server, "--remote-expr", "expand('%:p')"])
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(3), ask).await.ok()?.ok()?;
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !path.is_empty()).then_some(path)
}

/// The `spec` role's backends, or `None` when the role has none.
fn spec_model(ctx: &RepoContext) -> Result<Option<SpecModel>, CliError> {
    let config = ctx.config()?;
    let names = arbiter_core::backends::chain_for("spec", &config.roles, &config.backends).map_err(CliError::usage)?;
    if names.is_empty() {
        return Ok(None);
    }
    let secrets = crate::config_file::read_secrets(&ctx.secrets_path())?;
    let endpoints = crate::model_access::endpoints(&config, &secrets)?;
    let chain: Vec<_> = names.iter().filter_map(|n| endpoints.get(n).cloned()).collect();
    let client = arbiter_llm::LlmClient::new()
        .map_err(|e| CliError::environment(format!("cannot start the HTTP client: {e}")))?;
    Ok(Some(SpecModel { client: Arc::new(client), chain }))
}

/// `feature do --json`.
#[derive(Serialize)]
struct DoDoc<'a> {
    slice: &'a str,
    branch: &'a str,
    run_id: String,
    run_dir: String,
    status: arbiter_core::status::RunStatus,
    winner: Option<String>,
    commit: Option<String>,
    pushed: Option<bool>,
    push_error: Option<String>,
    candidates: Vec<CandidateDoc>,
    exit_code: u8,
}

#[derive(Serialize)]
struct CandidateDoc {
    candidate_id: String,
    runner: String,
    eligible: bool,
    reason: String,
    repair_rounds: usize,
    failing_gates: Vec<FailingGate>,
}

#[derive(Serialize)]
struct FailingGate {
    gate: String,
    output_tail: String,
}

impl JsonDocument for DoDoc<'_> {
    const SCHEMA: &'static str = "feature-do";
}

/// `feature scan --json`.
#[derive(Serialize)]
struct ScanDoc(verbs::ScanOutcome);

impl JsonDocument for ScanDoc {
    const SCHEMA: &'static str = "feature-scan";
}

/// `feature status --json`.
#[derive(Serialize)]
struct StatusDoc(verbs::StatusOutcome);

impl JsonDocument for StatusDoc {
    const SCHEMA: &'static str = "feature-status";
}

/// `feature do`: the slice's tournament with its gates and repair loop, then the commit.
async fn implement(
    ctx: &RepoContext,
    ws: &Workspace,
    target: Option<&str>,
    no_push: bool,
    no_rules: bool,
    json: bool,
    args: &SettingsArgs,
) -> Result<u8, CliError> {
    let config = ctx.config()?;
    let mut flags = args.options().map_err(CliError::usage)?;
    if flags.apply.is_some() {
        return Err(CliError::usage(
            "feature do applies the winner to the slice's branch and commits it there; leave out --apply",
        ));
    }
    if flags.unverified == Some(true) {
        return Err(CliError::usage("feature do always runs the slice's tests as a gate; leave out --no-verify"));
    }
    let plan = verbs::prepare_do(ws, target).await.map_err(slice_error)?;
    if let Some(c) = &plan.registered {
        note!("arbiter: registered {} in .features.json ({})", plan.slice.branch(), short(c));
    }
    flags.apply = Some("worktree".into());
    flags.rules = Some(!no_rules);
    flags.repair_rounds = flags.repair_rounds.or(Some(ws.repo.settings.repair_rounds));
    let mut verify = flags.verify.take().or_else(|| config.run.verify.clone()).unwrap_or_default();
    verify.push(plan.test_command.clone());
    flags.verify = Some(verify);
    let settings = RunSettings::resolve(&config, &[&flags])?;
    let task = Task::new(plan.task.clone(), None, settings.verify.value.clone()).map_err(CliError::usage)?;
    run::preflight(&settings, ctx.workspace.repo_root())?;
    let mut prepared = run::Prepared::new(ctx, &config, task, settings, "HEAD".into(), false)?;
    run::preflight_agents(&mut prepared, ctx.workspace.repo_root())?;
    note!(
        "arbiter: implementing {} on {}: gates {}; repair rounds {}",
        plan.slice.branch(),
        plan.branch,
        prepared.settings.verification(),
        prepared.settings.repair_rounds.value
    );
    let outcome = run::execute(ctx, prepared).await?;
    let applied = outcome.materialization.as_ref().is_some_and(|m| m.applied && m.error.is_none());
    let finished = if applied { Some(verbs::finish_do(ws, &plan, no_push).await.map_err(slice_error)?) } else { None };
    let code = match (&finished, run::exit_code(&outcome)) {
        (_, exit::INTERRUPTED) => exit::INTERRUPTED,
        (Some(f), _) if f.pushed == Some(false) => exit::NO_RESULT,
        (Some(_), _) => exit::SUCCESS,
        (None, exit::ENVIRONMENT) => exit::ENVIRONMENT,
        (None, _) => exit::NO_RESULT,
    };
    if json {
        crate::output::json(&do_doc(&plan, &outcome, finished.as_ref(), code));
    } else {
        report_do(&plan, &outcome, finished.as_ref(), ws);
    }
    Ok(code)
}

fn do_doc<'a>(plan: &'a DoPlan, o: &RunOutcome, f: Option<&DoFinished>, code: u8) -> DoDoc<'a> {
    DoDoc {
        slice: &plan.slice.dir,
        branch: &plan.branch,
        run_id: o.run_id.to_string(),
        run_dir: o.run_dir.display().to_string(),
        status: o.status,
        winner: o.decision.winner.as_ref().map(|w| w.to_string()),
        commit: f.and_then(|f| f.commit.clone()),
        pushed: f.and_then(|f| f.pushed),
        push_error: f.and_then(|f| f.push_error.clone()),
        candidates: candidates(o),
        exit_code: code,
    }
}

/// Each candidate's last gate failures, and how many repair rounds it had.
fn candidates(o: &RunOutcome) -> Vec<CandidateDoc> {
    o.decision
        .ranking
        .iter()
        .map(|r| {
            let evidence = o.evidence.iter().find(|e| e.candidate_id == r.candidate_id);
            let cdir = o.run_dir.join("candidates").join(r.candidate_id.as_str()).join("repair");
            let repair_rounds = std::fs::read_dir(&cdir)
                .map(|d| d.flatten().filter(|e| e.file_name().to_string_lossy().ends_with(".json")).count())
                .unwrap_or(0);
            CandidateDoc {
                candidate_id: r.candidate_id.to_string(),
                runner: r.runner.clone(),
                eligible: r.eligible,
                reason: r.reason.to_string(),
                repair_rounds,
                failing_gates: evidence
                    .map(|e| {
                        e.gates
                            .iter()
                            .filter(|g| !g.passed)
                            .map(|g| FailingGate {
                                gate: g.outcome.command.clone(),
                                output_tail: g.outcome.output_tail.clone(),
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
            }
        })
        .collect()
}

fn report_do(plan: &DoPlan, o: &RunOutcome, f: Option<&DoFinished>, ws: &Workspace) {
    out!();
    for c in candidates(o) {
        let mark = if o.decision.winner.as_ref().is_some_and(|w| w.as_str() == c.candidate_id) { "★" } else { " " };
        out!("{mark} {} ({}): {} [repair rounds: {}]", c.candidate_id, c.runner, c.reason, c.repair_rounds);
        for g in &c.failing_gates {
            out!("    failing gate `{}`:", g.gate);
            for line in g.output_tail.lines().rev().take(12).collect::<Vec<_>>().into_iter().rev() {
                out!("      {}", printable(line));
            }
        }
    }
    out!("Run directory: {}", o.run_dir.display());
    match f {
        Some(f) => {
            match &f.commit {
                Some(c) => out!("Committed feat: {} on {} ({})", plan.slice.name, plan.branch, short(c)),
                None => out!("The winner changed nothing to commit on {}", plan.branch),
            }
            match (f.pushed, &f.push_error) {
                (Some(true), _) => out!(
                    "Pushed {} to {} (NOT merged: `arbiter feature merge` when ready)",
                    plan.branch,
                    ws.repo.settings.remote
                ),
                (Some(false), e) => out!(
                    "NOT pushed: {}; push with `git push -u {} {}`",
                    e.as_deref().unwrap_or("the push failed"),
                    ws.repo.settings.remote,
                    plan.branch
                ),
                (None, _) => out!(
                    "Not pushed (no remote {}, or --no-push); merge with `arbiter feature merge`",
                    ws.repo.settings.remote
                ),
            }
        }
        None => out!(
            "No candidate passed its gates: nothing was applied and {} is as it was. Read the failures above (and the run directory), then amend the spec (`arbiter feature modify`) or run `arbiter feature do` again.",
            plan.branch
        ),
    }
}
