//! `arbiter plan import|apply|export`: plan files in (checked, their repository resolved,
//! Whilly's test steps classified) and out.

use std::path::{Path, PathBuf};

use arbiter_core::plan::PlanSpec;
use arbiter_core::plan::file::{Format, Syntax, read};
use arbiter_core::plan::gate::Rules;
use arbiter_core::plan::spec::export;
use arbiter_core::task::shorten;
use arbiter_runner::plan_admin::{Imported, PlanAdmin, PlanImport};
use arbiter_store::plans::ImportMode;

use super::{Plans, short};
use crate::commands::plan_output::PlanImported;
use crate::error::{CliError, exit};
use crate::output::{out, printable};

/// `plan export`: the plan as a file, arbiter's canonical one or Whilly's tasks.json.
pub(super) async fn export_plan(
    admin: &dyn PlanAdmin,
    id: &str,
    output: Option<&Path>,
    format: &str,
) -> Result<u8, CliError> {
    let view = admin.view(id).await?.view;
    let text = if format == "whilly" {
        let status_of = |task: &str| view.tasks.iter().find(|t| t.spec.id == task).map(|t| t.status);
        arbiter_core::plan::whilly::export(&view.spec(), &status_of)
    } else {
        export(&view.spec())
    };
    match output {
        Some(path) => std::fs::write(path, &text)
            .map_err(|e| CliError::environment(format!("cannot write {}: {e}", path.display())))?,
        None => crate::output::text(&text),
    }
    Ok(exit::SUCCESS)
}

#[allow(clippy::too_many_arguments)]
pub(super) async fn import(
    plans: &Plans,
    file: &Path,
    mode: ImportMode,
    apply: Option<bool>,
    gate: Rules,
    adopt: Option<&str>,
    as_json: bool,
) -> Result<u8, CliError> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| CliError::usage(format!("cannot read the plan file {}: {e}", file.display())))?;
    let dir: Option<PathBuf> = file.canonicalize().ok().and_then(|p| p.parent().map(Path::to_path_buf));
    // A Whilly test step is a command when its program is there: on PATH, or in the
    // repository (the plan's, else the file's, else this one).
    let repo_root = plans.ctx.as_ref().map(|c| c.workspace.repo_root().to_path_buf());
    let program_exists = |word: &str| program_exists(word, repo_root.as_deref().or(dir.as_deref()));
    let (mut spec, format) = read(&text, Syntax::of_path(&file.display().to_string()), &program_exists)
        .map_err(|e| CliError::usage(format!("{}: {e}", file.display())))?;
    spec.repository = plans.repository(spec.repository.as_deref(), dir.as_deref())?;
    if let (false, Some(ctx)) = (plans.remote, &plans.ctx) {
        let problems = arbiter_core::plan::check::check_names(&spec, &ctx.config()?);
        if !problems.is_empty() {
            return Err(arbiter_store::StoreError::PlanInvalid {
                problems: problems.iter().map(|p| p.to_string()).collect(),
            }
            .into());
        }
    }
    let import = PlanImport { spec, mode, apply, adopt_branch: adopt.map(str::to_string), gate };
    let Imported { report, adopted_branch: adopted, verdicts } = plans.admin.import(&import).await?;
    let spec = &import.spec;
    if as_json {
        crate::output::json(&PlanImported::new(&spec.id, &report, adopted.as_ref(), &verdicts));
        return Ok(exit::SUCCESS);
    }
    if format == Format::Whilly {
        print_step_classes(spec);
    }
    let what = if report.created_plan { "Created" } else { "Updated" };
    out!(
        "{what} plan {} ({}): {} added, {} updated, {} unchanged{}",
        spec.id,
        printable(&spec.name),
        report.added.len(),
        report.updated.len(),
        report.unchanged.len(),
        if report.skipped.is_empty() { String::new() } else { format!(", {} skipped", report.skipped.len()) }
    );
    if let Some(b) = &adopted {
        out!(
            "  integration branch {} adopted at {}: arbiter commits onto it and never moves it back",
            b.name,
            short(&b.base)
        );
    }
    if !report.differing.is_empty() {
        out!(
            "  {} existing task(s) differ from the file ({}); pass --update to change those that have not started",
            report.differing.len(),
            report.differing.join(", ")
        );
    }
    for v in &verdicts {
        let skipped = report.skipped.contains(&v.task);
        out!(
            "  {:<7} {}: {}{}",
            v.verdict.as_str(),
            v.task,
            v.reason,
            if skipped { " — skipped (--strict)" } else { "" }
        );
    }
    Ok(exit::SUCCESS)
}

/// How a Whilly file's test steps were read: commands run as verify commands, sentences
/// became manual checks (shown to the agents and the judges).
fn print_step_classes(spec: &PlanSpec) {
    let commands: usize = spec.tasks.iter().map(|t| t.verify.len()).sum();
    let checks: usize = spec.tasks.iter().map(|t| t.manual_checks.len()).sum();
    out!(
        "Whilly test steps: {commands} command(s) run as verify commands, {checks} sentence(s) kept as manual checks for the agents and the judges"
    );
    for t in spec.tasks.iter().filter(|t| !t.manual_checks.is_empty()) {
        for c in &t.manual_checks {
            out!("  check   {}: {}", t.id, printable(&shorten(c, 100)));
        }
    }
}

/// Whether a test step's first word names a program: a path (relative to `repo`) that
/// exists, or an executable file in a directory of `PATH`.
pub(crate) fn program_exists(word: &str, repo: Option<&Path>) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if word.contains('/') {
        let path = Path::new(word);
        return if path.is_absolute() { executable(path) } else { repo.is_some_and(|r| executable(&r.join(path))) };
    }
    std::env::var_os("PATH").is_some_and(|paths| std::env::split_paths(&paths).any(|d| executable(&d.join(word))))
}
