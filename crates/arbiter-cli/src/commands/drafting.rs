//! Drafting a plan with the `planning` role, as `arbiter plan new` and `arbiter intake` both
//! do: the repository's facts, the PRD and the plan (checked against the plan file's JSON
//! Schema, the drafting rules and the plan checks, with one repair round), the files the user
//! can edit and import again (`<docs>/PRD-<slug>.md`, `<docs>/PLAN-<slug>.json`), the record
//! of the calls and their cost (`.arbiter/planning/<slug>.json`), and the import that
//! records them in the plan's log (`plan_drafted`) and charges them to the plan.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use arbiter_core::cost::{CallRecord, CostSummary, summarize};
use arbiter_core::intake::draft::{Grounding, Header};
use arbiter_core::intake::prompts::RepoFacts;
use arbiter_core::money::Usd;
use arbiter_core::plan::PlanSpec;
use arbiter_core::plan::event::{Drafted, PlanEntry};
use arbiter_core::plan::gate::Rules;
use arbiter_core::plan::state::TaskStatus;
use arbiter_llm::{Endpoint, LlmClient};
use arbiter_runner::plan_admin::{Imported, PlanAdmin, PlanImport};
use arbiter_runner::planning::{self, Planner, PlanningError};
use arbiter_store::plans::{ImportMode, PlanRecord, PlanView, TaskRecord};
use arbiter_store::units::UnitQueue;
use serde::Serialize;
use serde_json::Value;

use crate::context::RepoContext;
use crate::error::CliError;

/// What a drafting needs: the repository, its configuration, the planning role's chain.
pub struct Drafting {
    pub ctx: RepoContext,
    client: LlmClient,
    chain: Vec<Endpoint>,
    /// Keys of every backend, redacted from what is written.
    keys: Vec<String>,
    /// The repository at `HEAD`, as the planner is told it.
    pub facts: RepoFacts,
    /// The branch checked out (the plan's base), else `HEAD`.
    pub base_ref: String,
    /// Where PRDs and plan files go (relative to the repository).
    pub docs_dir: String,
    pub plans: Arc<dyn UnitQueue>,
}

/// A drafted plan.
pub struct Draft {
    pub spec: PlanSpec,
    /// It needed the repair round.
    pub repaired: bool,
    /// What was left out of the model's plan, and why.
    pub dropped: Vec<String>,
}

impl Drafting {
    /// Everything a drafting needs, or why it cannot start (no planning backend, a bad
    /// `[intake] docs_dir`, a repository without commits).
    pub async fn open(ctx: RepoContext) -> Result<Self, CliError> {
        let config = ctx.config()?;
        let docs_dir = config.intake.docs_dir().map_err(CliError::usage)?;
        let secrets = crate::config_file::read_secrets(&ctx.secrets_path())?;
        let endpoints = crate::model_access::endpoints(&config, &secrets)?;
        let keys = crate::model_access::keys(&endpoints);
        let chain = crate::model_access::chain_of("planning", &config, &endpoints)?;
        if chain.is_empty() {
            return Err(CliError::usage(PlanningError::NoBackend));
        }
        let client =
            LlmClient::new().map_err(|e| CliError::environment(format!("cannot start the HTTP client: {e}")))?;
        let head = ctx.git.resolve_commit("HEAD").await?;
        let facts = planning::repo_facts(&ctx.git, &head).await?;
        let base_ref = ctx.git.current_branch().await?.unwrap_or_else(|| "HEAD".to_string());
        let (_, plans) = ctx.plan_stores().await?;
        Ok(Drafting { ctx, client, chain, keys, facts, base_ref, docs_dir, plans })
    }

    /// A planner on the `planning` chain.
    pub fn planner(&self) -> Result<Planner<'_>, CliError> {
        Planner::new(&self.client, &self.chain).map_err(planning_error)
    }

    /// `<docs>/PRD-<slug>.md` (relative) and its absolute path.
    pub fn prd_path(&self, slug: &str) -> (String, PathBuf) {
        let rel = format!("{}/PRD-{slug}.md", self.docs_dir);
        (rel.clone(), self.ctx.workspace.repo_root().join(rel))
    }

    /// `<docs>/PLAN-<slug>.json` (relative) and its absolute path.
    pub fn plan_path(&self, slug: &str) -> (String, PathBuf) {
        let rel = format!("{}/PLAN-{slug}.json", self.docs_dir);
        (rel.clone(), self.ctx.workspace.repo_root().join(rel))
    }

    /// The PRD for `idea` and the clarifications.
    pub async fn prd(&self, planner: &mut Planner<'_>, idea: &str, clarifications: &str) -> Result<String, CliError> {
        planner.prd(idea, clarifications, &self.facts).await.map_err(planning_error)
    }

    /// The plan decomposed from `prd`, under `header`.
    pub async fn plan(&self, planner: &mut Planner<'_>, prd: &str, header: &Header) -> Result<Draft, CliError> {
        let repo_root = self.ctx.workspace.repo_root().to_path_buf();
        let exists = move |word: &str| crate::commands::plan::program_exists(word, Some(&repo_root));
        let test_command = self.facts.test_command.as_ref().map(|(c, _)| c.as_str());
        let ground = Grounding { test_command, program_exists: &exists };
        let drafted =
            planner.plan(prd, &self.facts, header, &ground, &schema_problems).await.map_err(planning_error)?;
        Ok(Draft { spec: drafted.draft.spec, repaired: drafted.repaired, dropped: drafted.draft.dropped })
    }

    /// Writes a file of the repository (creating its directory), refusing one that would land
    /// outside it (a docs directory that is a link elsewhere).
    pub fn write_file(&self, path: &Path, text: &str) -> Result<(), CliError> {
        let root = self.ctx.workspace.repo_root();
        let dir = path.parent().unwrap_or(root);
        std::fs::create_dir_all(dir)
            .map_err(|e| CliError::environment(format!("cannot create {}: {e}", dir.display())))?;
        let (real_dir, real_root) = (dir.canonicalize()?, root.canonicalize()?);
        if !real_dir.starts_with(&real_root) {
            return Err(CliError::usage(format!(
                "{} leads outside the repository ({}); set `[intake] docs_dir` to a directory inside it",
                dir.display(),
                real_dir.display()
            )));
        }
        let redacted = arbiter_core::redact::Redactor::new(self.keys.clone()).redact(text);
        arbiter_runner::rundir::write_atomic(path, redacted.as_bytes())
            .map_err(|e| CliError::environment(format!("cannot write {}: {e}", path.display())))
    }

    /// Writes the record of the drafting's calls (`.arbiter/planning/<slug>.json`).
    fn write_record(&self, slug: &str, record: &PlanningRecord) -> Result<PathBuf, CliError> {
        let path = self.ctx.workspace.dir().join("planning").join(format!("{slug}.json"));
        let text = serde_json::to_string_pretty(record).unwrap_or_default();
        let redacted = arbiter_core::redact::Redactor::new(self.keys.clone()).redact(&text);
        arbiter_runner::rundir::write_atomic(&path, format!("{redacted}\n").as_bytes())
            .map_err(|e| CliError::environment(format!("cannot write {}: {e}", path.display())))?;
        Ok(path)
    }

    /// Writes `.arbiter/planning/<slug>.json`: the conversation, the files, what was left
    /// out of the plan (`plan`: its file and those), and every call with its cost.
    pub fn record(
        &self,
        slug: &str,
        said: &Conversation<'_>,
        prd: &str,
        plan: Option<(&str, &[String])>,
        calls: &[CallRecord],
    ) -> Result<PathBuf, CliError> {
        let (cost, _, _) = cost_of(calls);
        self.write_record(
            slug,
            &PlanningRecord {
                schema_version: arbiter_core::SCHEMA_VERSION,
                slug: slug.to_string(),
                from: said.from.to_string(),
                questions: said.questions.to_vec(),
                answers: said.answers.to_string(),
                prd: prd.to_string(),
                plan_file: plan.map(|(p, _)| p.to_string()),
                dropped: plan.map(|(_, d)| d.to_vec()).unwrap_or_default(),
                cost,
            },
        )
    }

    /// Imports the drafted plan as a new plan through the decision gate (its verdicts are
    /// events), then records the drafting (`plan_drafted`) and charges its cost to the plan.
    pub async fn import(
        &self,
        admin: &dyn PlanAdmin,
        spec: &PlanSpec,
        drafted: Drafted,
        known_cost: Usd,
    ) -> Result<Imported, CliError> {
        let import = PlanImport {
            spec: spec.clone(),
            mode: ImportMode::New,
            apply: Some(false),
            adopt_branch: None,
            gate: Rules::Arbiter,
        };
        let imported = admin.import(&import).await?;
        let now = arbiter_core::Clock::now(&arbiter_runner::SystemClock);
        self.plans.note_event(&spec.id, PlanEntry::PlanDrafted(drafted), now).await?;
        if known_cost > Usd::ZERO {
            self.plans.charge(&spec.id, None, known_cost, now).await?;
        }
        Ok(imported)
    }
}

/// Planning errors as the user sees them: no backend is the user's to fix (2), an unusable
/// plan is no result (1), an unreachable model the environment's (3).
pub fn planning_error(e: PlanningError) -> CliError {
    match e {
        PlanningError::NoBackend => CliError::usage(e),
        PlanningError::Unusable(_) => CliError::no_result(e),
        PlanningError::Unreachable(_) => CliError::environment(e),
    }
}

/// What a plan was drafted from, and what was asked and answered before the PRD.
pub struct Conversation<'a> {
    /// `idea: ...` or the URL.
    pub from: &'a str,
    pub questions: &'a [String],
    pub answers: &'a str,
}

/// `.arbiter/planning/<slug>.json`: what was asked, answered and spent.
#[derive(Serialize)]
pub struct PlanningRecord {
    pub schema_version: u32,
    pub slug: String,
    /// `idea: ...` or the URL.
    pub from: String,
    pub questions: Vec<String>,
    pub answers: String,
    pub prd: String,
    pub plan_file: Option<String>,
    pub dropped: Vec<String>,
    pub cost: CostSummary,
}

/// The cost of calls: the summary, what is known, and how many calls had none.
pub fn cost_of(calls: &[CallRecord]) -> (CostSummary, Usd, usize) {
    let summary = summarize(calls.to_vec());
    let known = summary.total.known_cost;
    let uncosted = summary.total.uncosted_calls as usize;
    (summary, known, uncosted)
}

/// The plan file's JSON Schema (`arbiter plan schema`) problems of a drafted plan, each with
/// where it is.
pub fn schema_problems(plan: &Value) -> Vec<String> {
    static VALIDATOR: OnceLock<Option<jsonschema::Validator>> = OnceLock::new();
    let validator = VALIDATOR.get_or_init(|| {
        serde_json::from_str::<Value>(crate::commands::plan::SCHEMA)
            .ok()
            .and_then(|s| jsonschema::validator_for(&s).ok())
    });
    let Some(validator) = validator else {
        return vec!["the plan file schema could not be read (a bug in this arbiter)".into()];
    };
    validator
        .iter_errors(plan)
        .map(|e| {
            let at = e.instance_path().to_string();
            format!("{}: {e}", if at.is_empty() { "the plan".to_string() } else { at })
        })
        .collect()
}

/// A plan not imported yet as the DAG view shows it: tasks without dependencies ready, the
/// others blocked.
pub fn preview(spec: &PlanSpec) -> PlanView {
    let now = arbiter_core::Clock::now(&arbiter_runner::SystemClock);
    let plan = PlanRecord {
        header: spec.header(),
        budget: Default::default(),
        cancelled: false,
        created_at: now,
        updated_at: now,
        branch: None,
    };
    let tasks = spec
        .tasks
        .iter()
        .enumerate()
        .map(|(i, t)| TaskRecord {
            spec: t.clone(),
            ord: i as i64,
            status: if t.dependencies.is_empty() { TaskStatus::Ready } else { TaskStatus::Blocked },
            deps_left: t.dependencies.len() as i64,
            attempts: 0,
            max_attempts: t.max_attempts_with(&spec.defaults),
            not_before: now,
            fence: 0,
            lease_owner: None,
            lease_expires: None,
            reserved: Usd::ZERO,
            cost: Usd::ZERO,
            run_id: None,
            commit: None,
            reason: None,
            version: 0,
        })
        .collect();
    PlanView::new(plan, tasks)
}
