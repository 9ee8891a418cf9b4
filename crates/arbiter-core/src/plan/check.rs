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
    BadPlanId { id: String },
    EmptyName,
    BadTaskId { id: String },
    DuplicateTask { id: String },
    UnknownDependency { task: String, dependency: String },
    Cycle { path: Vec<String> },
    BadValue { task: String, field: &'static str, problem: String },
    BadDefault { field: &'static str, problem: String },
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
                "task id '{id}' is not a safe name: use 1 to 128 letters, digits, '.', '_', ':', '/' or '-', without '..'"
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

fn task_id_ok(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && !id.contains("..")
        && !id.starts_with(['-', '/'])
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"._:/-".contains(&b))
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
    fn plan_ids_are_safe_names() {
        assert!(plan_id_ok("calc-2026.v1"));
        assert!(!plan_id_ok("-x") && !plan_id_ok("a/b") && !plan_id_ok("") && !plan_id_ok(".hidden"));
        assert!(!plan_id_ok("a..b") && !plan_id_ok("a.") && !plan_id_ok("x.lock"), "not valid in a ref name");
    }
}
