//! Everything wrong with a plan, found before anything is written: ids that are not safe
//! names, duplicate task ids, dependencies on tasks that exist nowhere, cycles (with their
//! path), and values that cannot work. A re-import is checked against the tasks already
//! stored, merged with the file.

use std::collections::BTreeSet;
use std::fmt;

use super::dag;
use super::spec::PlanSpec;
use crate::money::Usd;

/// One problem, with what to do about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    BadPlanId {
        id: String,
    },
    EmptyName,
    BadTaskId {
        id: String,
    },
    DuplicateTask {
        id: String,
    },
    UnknownDependency {
        task: String,
        dependency: String,
    },
    Cycle {
        path: Vec<String>,
    },
    BadValue {
        task: String,
        field: &'static str,
        problem: String,
    },
    BadDefault {
        field: &'static str,
        problem: String,
    },
    /// A runner or backend this repository's configuration does not define (`task`: `None`
    /// for the plan's defaults).
    UnknownName {
        task: Option<String>,
        what: &'static str,
        name: String,
        known: String,
        fix: &'static str,
    },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::BadPlanId { id } => write!(
                f,
                "plan id '{id}' is not a safe name: use 1 to 64 letters, digits, '.', '_' or '-', not starting with '.' or '-', without '..', not ending with '.' or '.lock'"
            ),
            Problem::EmptyName => write!(f, "the plan has no name: give it a `name`"),
            Problem::BadTaskId { id } => write!(
                f,
                "task id '{id}' is not a safe name: use 1 to 128 letters, digits, '.', '_', ':', '/' or '-', without '..', and no part between slashes empty, starting or ending with '.' or ending with '.lock'"
            ),
            Problem::DuplicateTask { id } => write!(f, "task id '{id}' is used twice: give each task its own id"),
            Problem::UnknownDependency { task, dependency } => write!(
                f,
                "task {task} depends on '{dependency}', which is no task of this plan: fix the id or add the task"
            ),
            Problem::Cycle { path } => {
                write!(f, "dependency cycle: {}; remove one of these dependencies", path.join(" → "))
            }
            Problem::BadValue { task, field, problem } => write!(f, "task {task}: {field} {problem}"),
            Problem::BadDefault { field, problem } => write!(f, "defaults: {field} {problem}"),
            Problem::UnknownName { task, what, name, known, fix } => {
                let whose = task.as_ref().map_or_else(|| "defaults".to_string(), |t| format!("task {t}"));
                write!(f, "{whose}: no {what} named '{name}' (known: {known}); {fix}")
            }
        }
    }
}

/// Plan ids become branch names, ref names (`refs/arbiter/plans/<id>/…`) and directory
/// names: what git refuses in a ref name (`..`, a trailing `.` or `.lock`) is refused here.
pub fn plan_id_ok(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && !id.starts_with(['.', '-'])
        && !id.contains("..")
        && !id.ends_with('.')
        && !id.ends_with(".lock")
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// Task ids become parts of ref and branch names (`refs/arbiter/plans/<plan>/<task>/…`):
/// each `/`-separated part follows git's rules for a ref component.
pub fn task_id_ok(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && !id.contains("..")
        && !id.starts_with(['-', '/'])
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"._:/-".contains(&b))
        && id
            .split('/')
            .all(|part| !part.is_empty() && !part.starts_with('.') && !part.ends_with('.') && !part.ends_with(".lock"))
}

/// A candidate count over the most a run may have.
fn too_many(task: Option<&str>, candidates: Option<u32>) -> Option<Problem> {
    let max = crate::settings::defaults::MAX_CANDIDATES;
    let n = candidates.filter(|n| *n > max)?;
    let problem = format!("is {n}: a run has at most {max} candidates");
    Some(match task {
        Some(t) => Problem::BadValue { task: t.to_string(), field: "candidates", problem },
        None => Problem::BadDefault { field: "candidates", problem },
    })
}

/// Every problem of `spec`, merged with `stored`: the `(id, dependencies)` of tasks already
/// in the store that the file does not redefine.
pub fn check(spec: &PlanSpec, stored: &[(String, Vec<String>)]) -> Vec<Problem> {
    let mut problems = Vec::new();
    if !plan_id_ok(&spec.id) {
        problems.push(Problem::BadPlanId { id: spec.id.clone() });
    }
    if spec.name.trim().is_empty() {
        problems.push(Problem::EmptyName);
    }
    const NOTHING_TO_SPEND: &str =
        "is 0: an attempt with nothing to spend cannot run; give it an amount or leave it out";
    if spec.defaults.attempt_budget_usd == Some(Usd::ZERO) {
        problems.push(Problem::BadDefault { field: "attempt_budget_usd", problem: NOTHING_TO_SPEND.into() });
    }
    let d = &spec.defaults;
    problems.extend(too_many(None, d.candidates));
    for (field, value) in [
        ("candidates", d.candidates.map(u64::from)),
        ("max_attempts", d.max_attempts.map(u64::from)),
        ("timeout_seconds", d.timeout_seconds),
    ] {
        if value == Some(0) {
            problems.push(Problem::BadDefault { field, problem: "is 0: use at least 1, or leave it out".into() });
        }
    }
    if let Some(strategy) = &d.strategy
        && crate::strategy::Strategy::parse(strategy).is_none()
    {
        problems.push(Problem::BadDefault {
            field: "strategy",
            problem: format!(
                "'{strategy}' is not a strategy: use one of {}",
                crate::strategy::Strategy::NAMES.join(", ")
            ),
        });
    }
    let mut seen = BTreeSet::new();
    for t in &spec.tasks {
        if !task_id_ok(&t.id) {
            problems.push(Problem::BadTaskId { id: t.id.clone() });
        }
        if !seen.insert(t.id.as_str()) {
            problems.push(Problem::DuplicateTask { id: t.id.clone() });
        }
        let zero = |field: &'static str, v: Option<u64>| {
            (v == Some(0)).then(|| Problem::BadValue {
                task: t.id.clone(),
                field,
                problem: "is 0: use at least 1".into(),
            })
        };
        problems.extend(zero("candidates", t.candidates.map(u64::from)));
        problems.extend(too_many(Some(&t.id), t.candidates));
        problems.extend(zero("max_attempts", t.max_attempts.map(u64::from)));
        problems.extend(zero("timeout_seconds", t.timeout_seconds));
        if t.attempt_budget_usd == Some(Usd::ZERO) {
            problems.push(Problem::BadValue {
                task: t.id.clone(),
                field: "attempt_budget_usd",
                problem: NOTHING_TO_SPEND.into(),
            });
        }
        if t.title.trim().is_empty() {
            problems.push(Problem::BadValue { task: t.id.clone(), field: "title", problem: "is empty".into() });
        }
    }
    let mut edges: Vec<(&str, Vec<&str>)> =
        spec.tasks.iter().map(|t| (t.id.as_str(), t.dependencies.iter().map(String::as_str).collect())).collect();
    for (id, deps) in stored {
        if !seen.contains(id.as_str()) {
            edges.push((id.as_str(), deps.iter().map(String::as_str).collect()));
        }
    }
    let known: BTreeSet<&str> = edges.iter().map(|(id, _)| *id).collect();
    for t in &spec.tasks {
        for d in &t.dependencies {
            if !known.contains(d.as_str()) {
                problems.push(Problem::UnknownDependency { task: t.id.clone(), dependency: d.clone() });
            }
        }
    }
    problems.extend(dag::cycles(&edges, 5).into_iter().map(|path| Problem::Cycle { path }));
    problems
}

/// The runner and backend names of `spec` that `config` (the configuration of the
/// repository the plan runs in) does not define: a plan run on this machine would fail on
/// them task after task. (A control plane cannot check this at import: its workers bring
/// their own runners.)
pub fn check_names(spec: &PlanSpec, config: &crate::settings::ConfigFile) -> Vec<Problem> {
    let mut runners: Vec<String> = crate::settings::RUNNER_KINDS.iter().map(|s| s.to_string()).collect();
    runners.extend(config.runners.keys().cloned());
    let backends: Vec<&String> = config.backends.keys().collect();
    let known = |names: &[&String]| {
        if names.is_empty() {
            "none".to_string()
        } else {
            names.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
        }
    };
    let mut problems = Vec::new();
    let mut runner_problems = |task: Option<&str>, names: &[String]| {
        for name in names.iter().filter(|n| !runners.contains(n)) {
            problems.push(Problem::UnknownName {
                task: task.map(str::to_string),
                what: "runner",
                name: name.clone(),
                known: runners.join(", "),
                fix: "define it in a [runners.NAME] table of .arbiter/config.toml, or use a known one",
            });
        }
    };
    runner_problems(None, &spec.defaults.runners);
    for t in &spec.tasks {
        runner_problems(Some(&t.id), &t.runners);
    }
    for name in spec.defaults.backend.iter().flat_map(|b| b.split(',')).map(str::trim).filter(|n| !n.is_empty()) {
        if !config.backends.contains_key(name) {
            problems.push(Problem::UnknownName {
                task: None,
                what: "backend",
                name: name.to_string(),
                known: known(&backends),
                fix: "add it with `arbiter backend add NAME --provider ... --model ...`, or use a known one",
            });
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::file::{Syntax, parse};

    fn plan(tasks: &str) -> PlanSpec {
        parse(&format!(r#"{{"id": "p", "name": "P", "tasks": [{tasks}]}}"#), Syntax::Json).unwrap()
    }

    #[test]
    fn every_problem_is_found_and_named() {
        let p = plan(
            r#"{"id": "A", "title": "a", "dependencies": ["B"]},
               {"id": "B", "title": "b", "dependencies": ["A", "nope"]},
               {"id": "B", "title": "again"},
               {"id": "../x", "title": "bad id", "candidates": 0}"#,
        );
        let text: Vec<String> = check(&p, &[]).iter().map(|p| p.to_string()).collect();
        assert!(text.iter().any(|t| t.contains("'B' is used twice")), "{text:#?}");
        assert!(text.iter().any(|t| t.contains("depends on 'nope'")), "{text:#?}");
        assert!(text.iter().any(|t| t.contains("dependency cycle: A → B → A")), "{text:#?}");
        assert!(text.iter().any(|t| t.contains("task id '../x' is not a safe name")), "{text:#?}");
        assert!(text.iter().any(|t| t.contains("candidates is 0")), "{text:#?}");
    }

    #[test]
    fn stored_tasks_count_for_dependencies_and_cycles() {
        let p = plan(r#"{"id": "C", "title": "c", "dependencies": ["A"]}"#);
        assert!(check(&p, &[("A".into(), vec![])]).is_empty());
        assert!(!check(&p, &[]).is_empty());
        let cyc = check(&p, &[("A".into(), vec!["C".into()])]);
        assert_eq!(cyc, vec![Problem::Cycle { path: vec!["C".into(), "A".into(), "C".into()] }]);
    }

    #[test]
    fn an_attempt_budget_of_zero_is_refused() {
        let p = plan(
            r#"{"id": "A", "title": "a", "attempt_budget_usd": "0"}, {"id": "B", "title": "b", "attempt_budget_usd": "0.5"}"#,
        );
        let text: Vec<String> = check(&p, &[]).iter().map(|p| p.to_string()).collect();
        assert_eq!(text.len(), 1, "{text:#?}");
        assert!(text[0].starts_with("task A: attempt_budget_usd is 0"), "{text:#?}");
        let d = parse(
            r#"{"id": "p", "name": "P", "defaults": {"attempt_budget_usd": "0"}, "tasks": [{"id": "A", "title": "a"}]}"#,
            Syntax::Json,
        )
        .unwrap();
        let text: Vec<String> = check(&d, &[]).iter().map(|p| p.to_string()).collect();
        assert_eq!(
            text,
            vec![
                "defaults: attempt_budget_usd is 0: an attempt with nothing to spend cannot run; give it an amount or leave it out"
            ]
        );
    }

    #[test]
    fn defaults_that_cannot_work_and_names_nobody_defines_are_found() {
        let d = parse(
            r#"{"id": "p", "name": "P", "defaults": {"candidates": 0, "max_attempts": 0, "timeout_seconds": 0,
                "strategy": "fastest", "runners": ["nosuch"], "backend": "gpt9"},
                "tasks": [{"id": "A", "title": "a", "runners": ["command", "ghost"]}]}"#,
            Syntax::Json,
        )
        .unwrap();
        let text: Vec<String> = check(&d, &[]).iter().map(|p| p.to_string()).collect();
        for field in ["candidates", "max_attempts", "timeout_seconds"] {
            assert!(text.contains(&format!("defaults: {field} is 0: use at least 1, or leave it out")), "{text:#?}");
        }
        assert!(text.iter().any(|t| t.contains("'fastest' is not a strategy: use one of tournament")), "{text:#?}");
        let config =
            crate::settings::ConfigFile::parse("[runners.fast]\nkind = \"command\"\ncommand = \"x\"\n", "c").unwrap();
        let names: Vec<String> = check_names(&d, &config).iter().map(|p| p.to_string()).collect();
        assert_eq!(names.len(), 3, "{names:#?}");
        assert!(names[0].starts_with("defaults: no runner named 'nosuch' (known: command, builtin,"), "{names:#?}");
        assert!(names[0].contains("fast"), "{names:#?}");
        assert!(names[1].starts_with("task A: no runner named 'ghost'"), "{names:#?}");
        assert!(names[2].starts_with("defaults: no backend named 'gpt9' (known: none)"), "{names:#?}");
    }

    #[test]
    fn task_ids_are_safe_parts_of_a_ref_name() {
        assert!(task_id_ok("api/users:create") && task_id_ok("T1.2"));
        for bad in ["a..b", "a/.b", "a//b", "a/", "x.lock", "a.", "-a", "/a", "a\0b", "a b"] {
            assert!(!task_id_ok(bad), "{bad:?} accepted");
        }
    }

    #[test]
    fn plan_ids_are_safe_names() {
        assert!(plan_id_ok("calc-2026.v1"));
        assert!(!plan_id_ok("-x") && !plan_id_ok("a/b") && !plan_id_ok("") && !plan_id_ok(".hidden"));
        assert!(!plan_id_ok("a..b") && !plan_id_ok("a.") && !plan_id_ok("x.lock"), "not valid in a ref name");
    }
}
