//! The JSON bodies of plan administration (`/api/v1/plans…`), shared by the routes
//! (the server's `routes::plans`) and the client ([`crate::plan_client`]), so the two sides
//! cannot drift. Requests refuse unknown fields. Answers are the port's own types
//! ([`arbiter_runner::plan_admin`]) over the store's records, wrapped where a list or a
//! number needs a name.

use std::collections::BTreeMap;

use arbiter_core::money::Usd;
use arbiter_core::plan::file::{Syntax, parse};
use arbiter_core::plan::gate::Rules;
use arbiter_core::plan::spec::ImportedStatus;
use arbiter_core::plan::state::TaskStatus;
use arbiter_runner::plan_admin::{NewPlan, PlanImport};
use arbiter_store::plans::{ImportMode, PlanEvent, PlanSummary};
use serde::{Deserialize, Serialize};

/// `POST /api/v1/plans`: import (or apply) a plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(deny_unknown_fields)]
pub struct ImportRequest {
    /// The plan in the plan file format (arbiter's JSON, as `arbiter plan export` writes
    /// it), read by the same parser as a file; its `repository` an absolute path on the
    /// server's machine or a git URL.
    #[cfg_attr(feature = "arbitrary", proptest(strategy = "arbiter_core::arbitrary::json()"))]
    pub plan: serde_json::Value,
    /// `add` (default): new tasks only; `update`: also change tasks that have not started.
    #[serde(default)]
    pub mode: ImportMode,
    /// Judge every task with the decision gate (`plan apply`).
    #[serde(default)]
    pub apply: bool,
    /// With `apply`: skip the tasks the gate rejects.
    #[serde(default)]
    pub strict: bool,
    /// With `apply`: whose decision rules judge the tasks, `arbiter` (default) or `whilly`.
    #[serde(default, skip_serializing_if = "Rules::is_default")]
    pub gate: Rules,
    /// Hand this existing branch (the plan's integration branch) over to the plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adopt_branch: Option<String>,
    /// Statuses the source file gave tasks (a Whilly file's `done` and `skipped`), kept when
    /// a task is first imported; the file format has no field for them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub imported_status: BTreeMap<String, ImportedStatus>,
}

impl ImportRequest {
    /// The request of an import.
    pub fn of(import: &PlanImport) -> Self {
        ImportRequest {
            plan: serde_json::to_value(&import.spec).unwrap_or_default(),
            mode: import.mode,
            apply: import.apply.is_some(),
            strict: import.apply == Some(true),
            gate: import.gate,
            adopt_branch: import.adopt_branch.clone(),
            imported_status: import
                .spec
                .tasks
                .iter()
                .filter_map(|t| t.imported_status.map(|s| (t.id.clone(), s)))
                .collect(),
        }
    }

    /// The import it asks for; an error names the field that is wrong.
    pub fn into_import(self) -> Result<PlanImport, String> {
        if self.strict && !self.apply {
            return Err("strict: only an apply skips what the gate rejects; send \"apply\": true with it".into());
        }
        let mut spec = parse(&self.plan.to_string(), Syntax::Json).map_err(|e| format!("plan: {e}"))?;
        for (task, status) in self.imported_status {
            match spec.tasks.iter_mut().find(|t| t.id == task) {
                Some(t) => t.imported_status = Some(status),
                None => {
                    return Err(format!(
                        "imported_status: the plan has no task '{}'",
                        task.chars().take(200).collect::<String>().escape_default()
                    ));
                }
            }
        }
        Ok(PlanImport {
            spec,
            mode: self.mode,
            apply: self.apply.then_some(self.strict),
            adopt_branch: self.adopt_branch,
            gate: self.gate,
        })
    }
}

/// `PUT /api/v1/plans/{plan}`: create an empty plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(deny_unknown_fields)]
pub struct CreateRequest {
    pub name: String,
    /// An absolute path on the server's machine, or a git URL.
    pub repository: Option<String>,
    /// A budget in USD (`"2.50"` or `2.5`); `null` or absent: no limit.
    #[cfg_attr(feature = "arbitrary", proptest(strategy = "arbiter_core::arbitrary::usd_amount_option()"))]
    #[serde(default, deserialize_with = "arbiter_core::money::deserialize_budget")]
    pub budget_usd: Option<Usd>,
}

impl CreateRequest {
    pub fn of(plan: &NewPlan) -> Self {
        CreateRequest { name: plan.name.clone(), repository: plan.repository.clone(), budget_usd: plan.budget_usd }
    }

    pub fn into_plan(self, id: String) -> NewPlan {
        NewPlan { id, name: self.name, repository: self.repository, budget_usd: self.budget_usd }
    }
}

/// `POST /api/v1/plans/{plan}/budget`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(deny_unknown_fields)]
pub struct BudgetRequest {
    /// The new limit in USD (`"5"` or `5`); `null` removes the limit.
    #[cfg_attr(feature = "arbitrary", proptest(strategy = "arbiter_core::arbitrary::usd_amount_option()"))]
    #[serde(deserialize_with = "arbiter_core::money::deserialize_budget")]
    pub limit_usd: Option<Usd>,
}

/// `POST /api/v1/plans/{plan}/reset`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(deny_unknown_fields)]
pub struct ResetRequest {
    /// Forget attempts and spending too.
    #[serde(default)]
    pub hard: bool,
    /// Leave the integration branch where it is.
    #[serde(default)]
    pub keep_branch: bool,
}

/// `POST /api/v1/plans/{plan}/retry`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(deny_unknown_fields)]
pub struct RetryRequest {
    pub task: String,
}

/// The answer of `POST /api/v1/plans/{plan}/retry`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct Retried {
    pub task: String,
    pub status: TaskStatus,
}

/// `POST /api/v1/plans/{plan}/push`; the answer is a [`arbiter_runner::plan_push::Pushed`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(deny_unknown_fields)]
pub struct PushRequest {
    /// A remote of the plan's repository (default `origin`).
    #[serde(default)]
    pub remote: Option<String>,
}

/// The answer of `POST /api/v1/plans/{plan}/cancel`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct Cancelled {
    /// Tasks cancelled.
    pub cancelled: usize,
}

/// `GET /api/v1/plans`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct PlanList {
    pub plans: Vec<PlanSummary>,
}

/// `GET /api/v1/plans/{plan}/events`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct EventList {
    pub events: Vec<PlanEvent>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_import_survives_the_wire() {
        let text = r#"{"project": "Demo", "plan_id": "demo", "tasks": [
          {"id": "D-1", "priority": "high", "status": "pending", "description": "Create HELLO.md with a greeting"},
          {"id": "D-2", "priority": "low", "status": "done", "description": "Done elsewhere", "dependencies": ["D-1"]}]}"#;
        let mut spec = parse(text, Syntax::Json).unwrap();
        spec.repository = Some("/srv/demo".into());
        let import = PlanImport {
            spec,
            mode: ImportMode::Update,
            apply: Some(true),
            adopt_branch: Some("b".into()),
            gate: Rules::Whilly,
        };
        let wire = serde_json::to_string(&ImportRequest::of(&import)).unwrap();
        let back: ImportRequest = serde_json::from_str(&wire).unwrap();
        assert_eq!(back.into_import().unwrap(), import);
    }

    #[test]
    fn bad_imports_name_the_field() {
        let req = |plan: serde_json::Value| ImportRequest {
            plan,
            mode: ImportMode::Add,
            apply: false,
            strict: false,
            gate: Rules::Arbiter,
            adopt_branch: None,
            imported_status: BTreeMap::new(),
        };
        let e = req(serde_json::json!({"id": "p", "name": "P", "tasks": [{"id": "a", "colour": 1}]}))
            .into_import()
            .unwrap_err();
        assert!(e.starts_with("plan: ") && e.contains("colour"), "{e}");
        let e = ImportRequest { strict: true, ..req(serde_json::json!({})) }.into_import().unwrap_err();
        assert!(e.starts_with("strict: "), "{e}");
        let mut r = req(serde_json::json!({"id": "p", "name": "P", "tasks": []}));
        r.imported_status.insert("nope".into(), ImportedStatus::Done);
        assert!(r.into_import().unwrap_err().contains("no task 'nope'"));
    }
}
