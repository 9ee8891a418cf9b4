//! Reading plan files: arbiter's own format (JSON or TOML) and Whilly's `tasks.json`
//! (`project`, `plan_id`, tasks with `status`, `priority`, `description`, `test_steps`, …),
//! accepted as it is, its `test_steps` becoming verify commands.
//!
//! Parsing names the field of every problem (`tasks[2].priority: …`); the checks that need
//! the whole plan (duplicate ids, unknown dependencies, cycles) are in
//! [`crate::plan::check`].

use serde::Deserialize;
use serde_json::Value;

use super::spec::{PlanSpec, Priority, TaskDefaults, TaskSpec};
use crate::money::Usd;
use crate::task::shorten;

/// The syntax of a plan file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Syntax {
    Json,
    Toml,
}

impl Syntax {
    /// From the file name: `.toml` is TOML, anything else JSON.
    pub fn of_path(path: &str) -> Self {
        if path.to_ascii_lowercase().ends_with(".toml") { Syntax::Toml } else { Syntax::Json }
    }
}

/// A plan file that cannot be read, with where and why.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct ParseError(pub String);

/// Which format a plan file was in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Arbiter,
    /// Whilly's `tasks.json` (`project` and `tasks`).
    Whilly,
}

/// Reads a plan file's text; a Whilly file's test steps are all taken as commands (see
/// [`read`] for telling commands from sentences).
pub fn parse(text: &str, syntax: Syntax) -> Result<PlanSpec, ParseError> {
    read(text, syntax, &|_| true).map(|(spec, _)| spec)
}

/// Reads a plan file's text, and which format it was in. A Whilly test step is a verify
/// command when its program exists (`program_exists` answers for a name on `PATH` or a path
/// in the repository, see [`super::whilly::is_command`]), else an acceptance check.
pub fn read(
    text: &str,
    syntax: Syntax,
    program_exists: &dyn Fn(&str) -> bool,
) -> Result<(PlanSpec, Format), ParseError> {
    let value: Value = match syntax {
        Syntax::Json => serde_json::from_str(text).map_err(|e| ParseError(format!("not valid JSON: {e}")))?,
        Syntax::Toml => {
            let table: toml::Table =
                toml::from_str(text).map_err(|e| ParseError(format!("not valid TOML: {}", e.to_string().trim())))?;
            if let Some((path, value)) = non_finite(&table, "") {
                return Err(ParseError(format!(
                    "{path}: {value} is not a number a plan can use; write an amount such as \"2.50\", or leave {path} out"
                )));
            }
            serde_json::to_value(table).map_err(|e| ParseError(format!("cannot read the TOML: {e}")))?
        }
    };
    if let Some(path) = nul_byte(&value, "") {
        return Err(ParseError(format!("{path} holds a NUL byte (\\u0000), which no plan text may hold; remove it")));
    }
    if !value.is_object() {
        return Err(ParseError(
            "a plan is an object with `id`, `name` and `tasks` (or Whilly's `project` and `tasks`)".into(),
        ));
    }
    if value.get("project").is_some() && value.get("name").is_none() {
        let raw: super::whilly::WhillyPlan = from_value(value)?;
        return Ok((super::whilly::into_spec(raw, program_exists)?, Format::Whilly));
    }
    let raw: RawPlan = from_value(value)?;
    Ok((ours(raw)?, Format::Arbiter))
}

/// The path of the first string (or key) of `value` holding a NUL byte: no store keeps one
/// (Postgres refuses it) and no branch or file name can hold one.
fn nul_byte(value: &Value, path: &str) -> Option<String> {
    let at = |p: &str| if p.is_empty() { "the plan".to_string() } else { p.to_string() };
    match value {
        Value::String(s) if s.contains('\0') => Some(at(path)),
        Value::Array(items) => items.iter().enumerate().find_map(|(i, v)| nul_byte(v, &format!("{path}[{i}]"))),
        Value::Object(map) => map.iter().find_map(|(k, v)| {
            let here = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
            if k.contains('\0') { Some(at(path)) } else { nul_byte(v, &here) }
        }),
        _ => None,
    }
}

/// The first `nan` or `inf` in `table` (TOML has them, JSON does not: converted, they would
/// become `null`, which reads as "no limit" for a budget), with its path.
fn non_finite(table: &toml::Table, prefix: &str) -> Option<(String, String)> {
    fn walk(value: &toml::Value, path: String) -> Option<(String, String)> {
        match value {
            toml::Value::Float(f) if !f.is_finite() => Some((path, f.to_string().to_lowercase())),
            toml::Value::Table(t) => non_finite(t, &path),
            toml::Value::Array(items) => items.iter().enumerate().find_map(|(i, v)| walk(v, format!("{path}[{i}]"))),
            _ => None,
        }
    }
    table
        .iter()
        .find_map(|(key, value)| walk(value, if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") }))
}

fn from_value<T: for<'de> Deserialize<'de>>(value: Value) -> Result<T, ParseError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        if path == "." { ParseError(inner) } else { ParseError(format!("{path}: {inner}")) }
    })
}

/// One string or several.
#[derive(Deserialize)]
#[serde(untagged)]
enum Names {
    One(String),
    Many(Vec<String>),
}

impl Names {
    fn into_vec(self) -> Vec<String> {
        match self {
            Names::One(s) => s.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect(),
            Names::Many(v) => v,
        }
    }
}

fn names(n: Option<Names>) -> Vec<String> {
    n.map(Names::into_vec).unwrap_or_default()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPlan {
    #[serde(rename = "$schema", default)]
    _schema: Option<String>,
    id: String,
    name: String,
    repository: Option<String>,
    base_ref: Option<String>,
    integration_branch: Option<String>,
    #[serde(default, deserialize_with = "crate::money::deserialize_budget")]
    budget_usd: Option<Usd>,
    #[serde(default)]
    push: bool,
    source: Option<String>,
    prd: Option<String>,
    #[serde(default)]
    defaults: RawDefaults,
    tasks: Vec<RawTask>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDefaults {
    candidates: Option<u32>,
    runners: Option<Names>,
    command: Option<String>,
    backend: Option<String>,
    #[serde(default)]
    verify: Vec<String>,
    timeout_seconds: Option<u64>,
    max_attempts: Option<u32>,
    #[serde(default, deserialize_with = "crate::money::deserialize_budget")]
    attempt_budget_usd: Option<Usd>,
    retry_backoff_seconds: Option<u64>,
    strategy: Option<String>,
    no_verify: Option<bool>,
    analysis_feedback: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTask {
    id: String,
    title: Option<String>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    acceptance_criteria: Vec<String>,
    #[serde(default)]
    verify: Vec<String>,
    #[serde(default)]
    manual_checks: Vec<String>,
    #[serde(default)]
    dependencies: Vec<String>,
    #[serde(default)]
    key_files: Vec<String>,
    priority: Option<String>,
    candidates: Option<u32>,
    runners: Option<Names>,
    command: Option<String>,
    timeout_seconds: Option<u64>,
    max_attempts: Option<u32>,
    #[serde(default, deserialize_with = "crate::money::deserialize_budget")]
    attempt_budget_usd: Option<Usd>,
    requirement: Option<String>,
}

pub(super) fn priority_of(task: &str, value: Option<&str>) -> Result<Priority, ParseError> {
    match value {
        None => Ok(Priority::Medium),
        Some(v) => Priority::parse(v).ok_or_else(|| {
            ParseError(format!(
                "task {task}: priority '{v}' is not one of {}; write one of them",
                Priority::NAMES.join(", ")
            ))
        }),
    }
}

/// A title from the first line of a description.
pub(super) fn title_from(description: &str, id: &str) -> String {
    description.lines().map(str::trim).find(|l| !l.is_empty()).map_or_else(|| id.to_string(), |l| shorten(l, 72))
}

fn ours(raw: RawPlan) -> Result<PlanSpec, ParseError> {
    let tasks = raw
        .tasks
        .into_iter()
        .map(|t| {
            Ok(TaskSpec {
                priority: priority_of(&t.id, t.priority.as_deref())?,
                title: t.title.filter(|s| !s.trim().is_empty()).unwrap_or_else(|| title_from(&t.description, &t.id)),
                description: t.description,
                acceptance_criteria: t.acceptance_criteria,
                verify: t.verify,
                manual_checks: t.manual_checks,
                dependencies: t.dependencies,
                key_files: t.key_files,
                candidates: t.candidates,
                runners: names(t.runners),
                command: t.command,
                timeout_seconds: t.timeout_seconds,
                max_attempts: t.max_attempts,
                attempt_budget_usd: t.attempt_budget_usd,
                requirement: t.requirement,
                imported_status: None,
                id: t.id,
            })
        })
        .collect::<Result<Vec<_>, ParseError>>()?;
    let d = raw.defaults;
    Ok(PlanSpec {
        integration_branch: raw
            .integration_branch
            .filter(|b| !b.trim().is_empty())
            .unwrap_or_else(|| PlanSpec::default_branch(&raw.id)),
        id: raw.id,
        name: raw.name,
        repository: raw.repository.filter(|r| !r.trim().is_empty()),
        base_ref: raw.base_ref.filter(|b| !b.trim().is_empty()).unwrap_or_else(|| "HEAD".into()),
        budget_usd: raw.budget_usd,
        push: raw.push,
        source: raw.source.filter(|s| !s.trim().is_empty()),
        prd: raw.prd.filter(|p| !p.trim().is_empty()),
        defaults: TaskDefaults {
            candidates: d.candidates,
            runners: names(d.runners),
            command: d.command,
            backend: d.backend,
            verify: d.verify,
            timeout_seconds: d.timeout_seconds,
            max_attempts: d.max_attempts,
            attempt_budget_usd: d.attempt_budget_usd,
            retry_backoff_seconds: d.retry_backoff_seconds,
            strategy: d.strategy,
            no_verify: d.no_verify,
            analysis_feedback: d.analysis_feedback,
        },
        tasks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::spec::export;

    const OURS: &str = r#"{
      "id": "calc", "name": "Calculator", "budget_usd": "2.50",
      "defaults": {"candidates": 2, "runners": "command", "command": "./agent.sh", "verify": ["python3 -m unittest -q"]},
      "tasks": [
        {"id": "T1", "title": "Fix add", "description": "add() subtracts instead of adding; make it add.",
         "acceptance_criteria": ["add(2, 3) == 5"], "priority": "high", "key_files": ["calc.py"]},
        {"id": "T2", "description": "Document add in the README file.", "dependencies": ["T1"]}
      ]
    }"#;

    #[test]
    fn our_format_reads_with_defaults_filled_in() {
        let p = parse(OURS, Syntax::Json).unwrap();
        assert_eq!(p.integration_branch, "arbiter/calc");
        assert_eq!(p.base_ref, "HEAD");
        assert_eq!(p.budget_usd, Usd::parse("2.5"));
        assert_eq!(p.defaults.runners, vec!["command".to_string()]);
        assert_eq!(p.tasks[0].priority, Priority::High);
        assert_eq!(p.tasks[1].priority, Priority::Medium);
        assert_eq!(p.tasks[1].title, "Document add in the README file.", "a title from the description");
    }

    #[test]
    fn export_is_canonical_and_reads_back_to_the_same_plan() {
        let p = parse(OURS, Syntax::Json).unwrap();
        let once = export(&p);
        let again = export(&parse(&once, Syntax::Json).unwrap());
        assert_eq!(once, again);
        assert!(once.ends_with("}\n"));
        assert!(once.find("\"id\": \"calc\"").unwrap() < once.find("\"tasks\"").unwrap());
    }

    /// TOML's `nan` and `inf` became JSON's `null`, which read as "no limit"; a NUL byte got
    /// as far as Postgres, which refused it with exit 3.
    #[test]
    fn non_numbers_and_nul_bytes_are_refused_with_where_they_are() {
        for (value, shown) in [("nan", "nan"), ("-inf", "-inf"), ("+inf", "inf")] {
            let text = format!("id = \"p\"\nname = \"P\"\nbudget_usd = {value}\ntasks = []\n");
            let err = parse(&text, Syntax::Toml).unwrap_err().to_string();
            assert_eq!(
                err,
                format!(
                    "budget_usd: {shown} is not a number a plan can use; write an amount such as \"2.50\", or leave budget_usd out"
                )
            );
        }
        let text = "id = \"p\"\nname = \"P\"\n[[tasks]]\nid = \"a\"\ntitle = \"t\"\nattempt_budget_usd = nan\n";
        assert!(parse(text, Syntax::Toml).unwrap_err().to_string().starts_with("tasks[0].attempt_budget_usd: nan"));
        let err = parse(r#"{"id": "p\u0000x", "name": "P", "tasks": []}"#, Syntax::Json).unwrap_err().to_string();
        assert!(err.starts_with("id holds a NUL byte"), "{err}");
        let err = parse(
            r#"{"id": "p", "name": "P", "tasks": [{"id": "a", "title": "t", "verify": ["x\u0000"]}]}"#,
            Syntax::Json,
        )
        .unwrap_err()
        .to_string();
        assert!(err.starts_with("tasks[0].verify[0] holds a NUL byte"), "{err}");
    }

    #[test]
    fn toml_reads_like_json() {
        let toml = r#"
id = "calc"
name = "Calculator"
[defaults]
runners = ["command", "builtin"]
[[tasks]]
id = "T1"
title = "Fix add"
priority = "critical"
"#;
        let p = parse(toml, Syntax::Toml).unwrap();
        assert_eq!(p.tasks[0].priority, Priority::Critical);
        assert_eq!(p.defaults.runners.len(), 2);
        assert!(parse("id = ", Syntax::Toml).unwrap_err().0.starts_with("not valid TOML"));
    }

    #[test]
    fn problems_name_the_field() {
        let bad = OURS.replace("\"priority\": \"high\"", "\"priority\": \"urgent\"");
        let e = parse(&bad, Syntax::Json).unwrap_err();
        assert!(e.0.contains("task T1: priority 'urgent' is not one of critical, high, medium, low"), "{e}");
        let typo = OURS.replace("\"key_files\"", "\"key_file\"");
        let e = parse(&typo, Syntax::Json).unwrap_err();
        assert!(e.0.contains("tasks[0]") && e.0.contains("key_file"), "{e}");
        let e = parse("[1]", Syntax::Json).unwrap_err();
        assert!(e.0.contains("a plan is an object"), "{e}");
    }
}
