//! Whilly's `tasks.json`, both ways, as Whilly reads and writes it.
//!
//! - Reading: `project` and `tasks` (with an optional `plan_id`, else the project as a safe
//!   name); unknown keys are ignored, as Whilly ignores them. Statuses `done` and `skipped`
//!   are kept when a task is first imported; any other status starts the task afresh.
//! - Test steps: a step whose program exists (a shell builtin, a name on `PATH`, a path in
//!   the repository: the caller answers, see [`is_command`]) is a verify command; any other
//!   step is a sentence ("Run the tests and confirm the endpoint returns 200"), kept as a
//!   manual check that the agents and the judges see and nothing runs.
//! - Writing ([`export`]): the canonical fields in Whilly's order (`plan_id`, `project`,
//!   then per task `id`, `status`, `dependencies`, `key_files`, `priority`, `description`,
//!   `acceptance_criteria`, `test_steps`, `prd_requirement`, `version`), tasks sorted by id.

use serde::{Deserialize, Serialize};

use super::file::{ParseError, priority_of, title_from};
use super::spec::{ImportedStatus, PlanSpec, TaskDefaults, TaskSpec};
use super::state::TaskStatus;
use crate::command_line::is_assignment;

/// Whilly's `tasks.json`: unknown keys are ignored (as Whilly does).
#[derive(Deserialize)]
pub(super) struct WhillyPlan {
    project: String,
    plan_id: Option<String>,
    tasks: Vec<WhillyTask>,
}

#[derive(Deserialize)]
struct WhillyTask {
    id: String,
    status: String,
    priority: String,
    description: String,
    #[serde(default)]
    dependencies: Vec<String>,
    #[serde(default)]
    key_files: Vec<String>,
    #[serde(default)]
    acceptance_criteria: Vec<String>,
    #[serde(default)]
    test_steps: Vec<String>,
    #[serde(default)]
    prd_requirement: String,
}

/// Shell builtins no sentence starts with.
const SHELL_SYMBOLS: &[&str] = &["[", "[[", "!", ":", ".", "("];

/// Shell builtins and keywords that are English words too ("test that ...", "set up ...",
/// "export the CSV ..."): a command only with shell syntax in the step.
const SHELL_WORDS: &[&str] = &[
    "test", "cd", "true", "false", "echo", "printf", "export", "set", "exit", "if", "for", "while", "until", "case",
    "command", "source", "eval", "exec", "read", "type", "env",
];

/// Whether a test step is a command. Its first word (after `NAME=value` assignments) must
/// be a shell builtin or a program `program_exists` finds (an executable on `PATH`, or an
/// executable path such as `./run.sh` or `scripts/check` in the repository); and a step of
/// more than four words — or one starting with a builtin that is also an English word —
/// must show shell syntax (an option, a path, an assignment, a quote, an operator), or it
/// reads as a sentence ("make sure the server starts", "test that it works"). In doubt, a
/// step is a sentence: a manual check loses nothing, a sentence run as a command fails.
pub fn is_command(step: &str, program_exists: &dyn Fn(&str) -> bool) -> bool {
    let words: Vec<&str> = step.split_whitespace().collect();
    let Some(first) = words.iter().copied().find(|w| !is_assignment(w)) else {
        return false;
    };
    let first = first.strip_prefix('(').filter(|w| !w.is_empty()).unwrap_or(first);
    let shell_syntax = words.iter().skip(1).any(|w| w.starts_with('-'))
        || step.contains(['/', '=', '$', '|', '&', ';', '>', '<', '*', '"', '\'', '`']);
    if SHELL_SYMBOLS.contains(&first) {
        return true;
    }
    if SHELL_WORDS.contains(&first) {
        return words.len() == 1 || shell_syntax;
    }
    program_exists(first) && (words.len() <= 4 || shell_syntax)
}

/// Whilly's plan id falls back on `project`; ours must be a safe name, so the project is
/// turned into one (`My Project` → `my-project`).
fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.trim().chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

pub(super) fn into_spec(raw: WhillyPlan, program_exists: &dyn Fn(&str) -> bool) -> Result<PlanSpec, ParseError> {
    let id = raw.plan_id.filter(|p| !p.trim().is_empty()).unwrap_or_else(|| slug(&raw.project));
    let tasks = raw
        .tasks
        .into_iter()
        .map(|t| {
            let imported_status = match t.status.trim().to_ascii_lowercase().as_str() {
                "done" => Some(ImportedStatus::Done),
                "skipped" => Some(ImportedStatus::Skipped),
                _ => None,
            };
            let (verify, manual_checks): (Vec<String>, Vec<String>) =
                t.test_steps.into_iter().filter(|s| !s.trim().is_empty()).partition(|s| is_command(s, program_exists));
            Ok(TaskSpec {
                priority: priority_of(&t.id, Some(&t.priority))?,
                title: title_from(&t.description, &t.id),
                description: t.description,
                acceptance_criteria: t.acceptance_criteria,
                verify,
                manual_checks,
                dependencies: t.dependencies,
                key_files: t.key_files,
                candidates: None,
                runners: Vec::new(),
                command: None,
                timeout_seconds: None,
                max_attempts: None,
                attempt_budget_usd: None,
                requirement: Some(t.prd_requirement).filter(|r| !r.trim().is_empty()),
                imported_status,
                id: t.id,
            })
        })
        .collect::<Result<Vec<_>, ParseError>>()?;
    Ok(PlanSpec {
        integration_branch: PlanSpec::default_branch(&id),
        name: raw.project,
        id,
        repository: None,
        base_ref: "HEAD".into(),
        budget_usd: None,
        push: false,
        source: None,
        prd: None,
        defaults: TaskDefaults::default(),
        tasks,
    })
}

/// Whilly's status for one of ours: what runs is in progress, what may still run is
/// pending (Whilly has no blocked or ready), a cancelled task is pending again.
pub fn status_name(status: TaskStatus) -> &'static str {
    match status {
        TaskStatus::Running => "IN_PROGRESS",
        TaskStatus::Done => "DONE",
        TaskStatus::Failed => "FAILED",
        TaskStatus::Skipped => "SKIPPED",
        TaskStatus::Blocked | TaskStatus::Ready | TaskStatus::Cancelled => "PENDING",
    }
}

#[derive(Serialize)]
struct ExportPlan<'a> {
    plan_id: &'a str,
    project: &'a str,
    tasks: Vec<ExportTask<'a>>,
}

#[derive(Serialize)]
struct ExportTask<'a> {
    id: &'a str,
    status: &'static str,
    dependencies: &'a [String],
    key_files: &'a [String],
    priority: &'static str,
    description: String,
    acceptance_criteria: &'a [String],
    test_steps: Vec<String>,
    prd_requirement: &'a str,
    version: u32,
}

/// `spec` as a `tasks.json` Whilly imports: each task with its status (`status_of`; a task
/// it does not know is pending), its verify commands (the plan's defaults first) and its
/// manual checks as test steps, its title in the description when the description does not
/// start with it. Arbiter's own fields (runners, candidates, budgets) have no place there.
pub fn export(spec: &PlanSpec, status_of: &dyn Fn(&str) -> Option<TaskStatus>) -> String {
    let mut tasks: Vec<&TaskSpec> = spec.tasks.iter().collect();
    tasks.sort_by(|a, b| a.id.cmp(&b.id));
    let plan = ExportPlan {
        plan_id: &spec.id,
        project: &spec.name,
        tasks: tasks
            .into_iter()
            .map(|t| ExportTask {
                id: &t.id,
                status: status_of(&t.id).map_or("PENDING", status_name),
                dependencies: &t.dependencies,
                key_files: &t.key_files,
                priority: t.priority.as_str(),
                description: if title_from(&t.description, &t.id) == t.title {
                    t.description.clone()
                } else if t.description.trim().is_empty() {
                    t.title.clone()
                } else {
                    format!("{}\n\n{}", t.title, t.description)
                },
                acceptance_criteria: &t.acceptance_criteria,
                test_steps: t.verify_with(&spec.defaults).into_iter().chain(t.manual_checks.iter().cloned()).collect(),
                prd_requirement: t.requirement.as_deref().unwrap_or(""),
                version: 0,
            })
            .collect(),
    };
    let mut text = serde_json::to_string_pretty(&plan).unwrap_or_else(|_| "{}".into());
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::file::{Format, Syntax, read};

    fn on_path(word: &str) -> bool {
        ["pytest", "python3", "npm", "./run.sh", "scripts/check"].contains(&word)
    }

    #[test]
    fn commands_are_told_from_sentences() {
        for step in [
            "test -s DEMO-HELLO.md",
            "pytest -q tests/test_api.py",
            "CI=1 npm test",
            "./run.sh --fast",
            "scripts/check",
            "[ -f out.txt ]",
            "(cd api && python3 -m pytest)",
        ] {
            assert!(is_command(step, &on_path), "{step}");
        }
        for step in [
            "Run the tests and confirm the endpoint returns 200",
            "Verify that the page shows the new column",
            "The CSV has a header row",
            "export the CSV and check the header",
            "set up the database",
            "test that it works",
            "read the logs",
            "source code compiles",
            "pytest passes on every supported version and nothing else breaks",
            "",
        ] {
            assert!(!is_command(step, &on_path), "{step}");
        }
    }

    #[test]
    fn whilly_files_are_read_with_prose_steps_as_manual_checks() {
        let w = r#"{"project": "Demo Project", "tasks": [
          {"id": "DEMO-001", "priority": "HIGH", "status": "pending",
           "description": "Create DEMO-HELLO.md with a greeting\nsecond line", "dependencies": [],
           "key_files": ["DEMO-HELLO.md"], "acceptance_criteria": ["DEMO-HELLO.md exists"],
           "test_steps": ["test -s DEMO-HELLO.md", "Open the file and check the greeting is friendly"],
           "prd_requirement": "demo-step-1", "phase": "p1"},
          {"id": "DEMO-002", "priority": "low", "status": "done", "description": "Already there",
           "dependencies": ["DEMO-001"]}
        ]}"#;
        let (p, format) = read(w, Syntax::Json, &on_path).unwrap();
        assert_eq!(format, Format::Whilly);
        assert_eq!(p.id, "demo-project");
        assert_eq!(p.tasks[0].verify, vec!["test -s DEMO-HELLO.md".to_string()]);
        assert_eq!(p.tasks[0].manual_checks, vec!["Open the file and check the greeting is friendly".to_string()]);
        assert!(p.tasks[0].success_criteria().unwrap().contains("check the greeting is friendly"));
        assert_eq!(p.tasks[0].title, "Create DEMO-HELLO.md with a greeting");
        assert_eq!(p.tasks[0].requirement.as_deref(), Some("demo-step-1"));
        assert_eq!(p.tasks[1].imported_status, Some(ImportedStatus::Done));
    }

    #[test]
    fn the_export_is_a_file_whilly_reads_and_comes_back_the_same() {
        let w = r#"{"project": "Demo", "plan_id": "demo", "tasks": [
          {"id": "B", "priority": "low", "status": "pending", "description": "Second, after A is there",
           "dependencies": ["A"], "test_steps": ["Check by eye that it reads well"]},
          {"id": "A", "priority": "critical", "status": "pending", "description": "First: write a.txt with the word",
           "key_files": ["a.txt"], "acceptance_criteria": ["a.txt holds the word"], "test_steps": ["test -s a.txt"],
           "prd_requirement": "r-1"}
        ]}"#;
        let (spec, _) = read(w, Syntax::Json, &on_path).unwrap();
        let status = |id: &str| Some(if id == "A" { TaskStatus::Done } else { TaskStatus::Ready });
        let out = export(&spec, &status);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["plan_id"], "demo");
        assert_eq!(v["tasks"][0]["id"], "A", "sorted by id");
        assert_eq!(v["tasks"][0]["status"], "DONE");
        assert_eq!(v["tasks"][1]["status"], "PENDING");
        assert_eq!(v["tasks"][0]["priority"], "critical");
        assert_eq!(v["tasks"][1]["test_steps"], serde_json::json!(["Check by eye that it reads well"]));
        let keys: Vec<&str> = out
            .lines()
            .filter(|l| l.starts_with("      \"") || l.starts_with("  \""))
            .map(|l| l.trim().split('"').nth(1).unwrap_or(""))
            .collect();
        assert_eq!(
            &keys[..12],
            &[
                "plan_id",
                "project",
                "tasks",
                "id",
                "status",
                "dependencies",
                "key_files",
                "priority",
                "description",
                "acceptance_criteria",
                "test_steps",
                "prd_requirement"
            ]
        );
        // Back in: the same plan, the done task done.
        let (again, _) = read(&out, Syntax::Json, &on_path).unwrap();
        let mut a = again.clone();
        a.tasks.sort_by(|x, y| x.id.cmp(&y.id));
        let mut b = spec.clone();
        b.tasks.sort_by(|x, y| x.id.cmp(&y.id));
        assert_eq!(a.tasks[0].imported_status, Some(ImportedStatus::Done));
        a.tasks[0].imported_status = None;
        assert_eq!(a, b);
        assert_eq!(export(&again, &status), out, "byte-stable");
    }
}
