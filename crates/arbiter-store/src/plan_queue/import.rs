//! A plan file imported into the queue: everything checked first (against the stored
//! tasks too), then written in one transaction, or nothing written.

use crate::StoreError;
use crate::db::{OrStore, sql, values};
use crate::plan_rows as decode;
use crate::plan_sql as q;
use crate::plans::*;
use crate::store::{Backend, SqlStore};
use arbiter_core::plan::check::check;
use arbiter_core::plan::event::{ImportCounts, PlanEntry, PlanLogEntry, TaskEntry};
use arbiter_core::plan::spec::ImportedStatus;
use arbiter_core::plan::state::{TaskEvent, TaskStatus, waiting_status};
use arbiter_core::plan::{PlanSpec, TaskSpec};
use arbiter_core::queue::rules::{self};
use std::collections::{BTreeMap, BTreeSet};

/// A task row to insert.
struct NewTask<'a> {
    id: &'a str,
    ord: i64,
    priority: i64,
    spec: String,
    status: &'static str,
    /// The status an import gave it, which a reset keeps.
    initial: Option<&'static str>,
    deps_left: i64,
    max_attempts: i64,
    attempt_budget: i64,
    has_files: bool,
    reason: Option<String>,
}

/// What an imported task starts as.
fn initial_status(t: &TaskSpec, deps_left: i64) -> TaskStatus {
    match t.imported_status {
        Some(ImportedStatus::Done) => TaskStatus::Done,
        Some(ImportedStatus::Skipped) => TaskStatus::Skipped,
        None => waiting_status(deps_left),
    }
}

impl<B: Backend> SqlStore<B> {
    pub(crate) async fn import(&self, import: Import<'_>) -> Result<ImportReport, StoreError> {
        let spec = import.spec;
        let now = import.now;
        let mut tx = self.write_tx().await?;
        // No report ends an attempt of this plan while the import runs: the
        // dependency counts it computes stay true until it commits.
        Self::lock_tx(&mut tx, B::IMPORT_GUARD, &spec.id, None).await?;
        let locked = match Self::lock_plan_tx(&mut tx, &spec.id).await {
            Ok(locked) => Some(locked),
            Err(StoreError::NoPlan { .. }) => None,
            Err(e) => return Err(e),
        };
        let existing = match locked {
            Some(_) => {
                let row = sql(q::SELECT_PLAN).bind(&spec.id).fetch_one(&mut tx).await?;
                Some(decode::plan(&row)?)
            }
            None => None,
        };
        if import.mode == ImportMode::New && existing.is_some() {
            return Err(StoreError::PlanExists { id: spec.id.clone() });
        }
        if let Some(url) = &spec.source {
            let owner: Option<String> =
                sql(q::PLAN_BY_SOURCE).bind(url).fetch_optional(&mut tx).await?.map(|r| r.try_get("id")).transpose()?;
            if let Some(plan) = owner.filter(|p| *p != spec.id) {
                return Err(StoreError::SourceTaken { url: url.clone(), plan });
            }
        }
        let stored = Self::tasks_tx(&mut tx, &spec.id).await?;
        let by_id: BTreeMap<&str, &TaskRecord> = stored.iter().map(|t| (t.spec.id.as_str(), t)).collect();
        let in_file: BTreeSet<&str> = spec.tasks.iter().map(|t| t.id.as_str()).collect();
        let others: Vec<(String, Vec<String>)> = stored
            .iter()
            .filter(|t| !in_file.contains(t.spec.id.as_str()))
            .map(|t| (t.spec.id.clone(), t.spec.dependencies.clone()))
            .collect();
        let mut problems: Vec<String> = check(spec, &others).iter().map(|p| p.to_string()).collect();
        // A re-import without --update keeps the stored definitions: check with them.
        if import.mode == ImportMode::Add && !stored.is_empty() {
            let kept = PlanSpec {
                tasks: spec
                    .tasks
                    .iter()
                    .map(|t| by_id.get(t.id.as_str()).map_or(t.clone(), |s| s.spec.clone()))
                    .collect(),
                ..spec.clone()
            };
            for p in check(&kept, &others) {
                let p = p.to_string();
                if !problems.contains(&p) {
                    problems.push(p);
                }
            }
        }
        // A plan's source is where it came from: it is set when the plan is
        // created and never changes (the store keeps one plan per source).
        if let Some(p) = &existing
            && spec.source.is_some()
            && spec.source != p.header.source
        {
            problems.push(format!(
                "source: the plan comes from {}; a stored plan's source cannot change (leave `source` out, or write it as it is)",
                p.header.source.as_deref().unwrap_or("nowhere (it was written by hand)")
            ));
        }
        if !problems.is_empty() {
            return Err(StoreError::PlanInvalid { problems });
        }
        let mut report = ImportReport { created_plan: existing.is_none(), ..Default::default() };
        let mut refused = Vec::new();
        let mut to_update: Vec<&TaskSpec> = Vec::new();
        let mut to_add: Vec<&TaskSpec> = Vec::new();
        for t in &spec.tasks {
            match by_id.get(t.id.as_str()) {
                None => to_add.push(t),
                Some(s) if s.spec == t.definition() => report.unchanged.push(t.id.clone()),
                Some(s) => match import.mode {
                    // (A new plan has no stored tasks: `New` never gets here.)
                    ImportMode::Add | ImportMode::New => {
                        report.unchanged.push(t.id.clone());
                        report.differing.push(t.id.clone());
                    }
                    ImportMode::Update if s.attempts == 0 && TaskEvent::Update.allowed(s.status) => to_update.push(t),
                    ImportMode::Update => refused.push(format!(
                        "{} is {} after {} attempt(s): its definition cannot change",
                        t.id,
                        s.status.as_str(),
                        s.attempts
                    )),
                },
            }
        }
        if !refused.is_empty() {
            return Err(StoreError::ImportRefused { tasks: refused });
        }
        // The statuses after this import decide how many dependencies are unmet.
        let mut status_of: BTreeMap<String, TaskStatus> =
            stored.iter().map(|t| (t.spec.id.clone(), t.status)).collect();
        for t in &to_add {
            status_of.insert(t.id.clone(), initial_status(t, 0));
        }
        let unmet = |t: &TaskSpec, status_of: &BTreeMap<String, TaskStatus>| -> i64 {
            let deps: BTreeSet<&String> = t.dependencies.iter().collect();
            deps.into_iter().filter(|d| status_of.get(d.as_str()) != Some(&TaskStatus::Done)).count() as i64
        };
        // The budget a plan has stays unless the file states one (and may change it).
        let mut header = match (&existing, import.mode) {
            (Some(p), ImportMode::Add) => p.header.clone(),
            _ => spec.header(),
        };
        let limit = match &existing {
            Some(_) if import.mode == ImportMode::Update && spec.budget_usd.is_some() => spec.budget_usd,
            Some(p) => p.budget.limit,
            None => spec.budget_usd,
        };
        header.budget_usd = limit;
        if let Some(p) = &existing {
            header.source = p.header.source.clone();
        }
        // Tasks are only ever added, in order: the next one's place is the count.
        let mut next_ord = stored.len() as i64;
        let mut files_anywhere = stored.iter().any(|t| !t.spec.key_files.is_empty());
        if existing.is_none() {
            match Self::insert_plan_tx(&mut tx, &header, spec.tasks.len(), now).await {
                Err(StoreError::Query(db)) if db.is_unique_violation() => {
                    // A concurrent import created the plan (or one from the same
                    // source) since this one looked: the store lets one win.
                    drop(tx);
                    if let Some(url) = &header.source
                        && let Some(plan) = self.plan_by_source(url).await?
                    {
                        return Err(StoreError::SourceTaken { url: url.clone(), plan });
                    }
                    return Err(StoreError::PlanExists { id: spec.id.clone() });
                }
                other => other?,
            }
        }
        let defaults = &header.defaults;
        // New tasks, their dependencies, files and events go in in batches: a plan
        // of thousands of tasks imports in a handful of statements.
        let mut task_rows = Vec::with_capacity(to_add.len());
        let mut dep_rows: Vec<(&str, &str)> = Vec::new();
        let mut file_rows: Vec<(&str, String)> = Vec::new();
        let mut event_rows: Vec<(&str, String, String)> = Vec::with_capacity(to_add.len());
        for t in &to_add {
            let deps_left = unmet(t, &status_of);
            let status = initial_status(t, deps_left);
            task_rows.push(NewTask {
                id: &t.id,
                ord: next_ord,
                priority: t.priority.rank(),
                spec: serde_json::to_string(&t.definition()).unwrap_or_default(),
                status: status.as_str(),
                initial: t.imported_status.map(|_| status.as_str()),
                deps_left,
                max_attempts: i64::from(t.max_attempts_with(defaults)),
                attempt_budget: t.attempt_budget_with(defaults).pico(),
                has_files: !t.key_files.is_empty(),
                reason: t.imported_status.map(|_| "marked so in the imported file".to_string()),
            });
            next_ord += 1;
            files_anywhere |= !t.key_files.is_empty();
            let (deps, files) = rules::deps_and_files(t);
            dep_rows.extend(deps.into_iter().map(|d| (t.id.as_str(), d)));
            file_rows.extend(files.into_iter().map(|f| (t.id.as_str(), f)));
            let created = PlanLogEntry::from(TaskEntry::TaskCreated {
                status,
                priority: t.priority,
                dependencies: t.dependencies.clone(),
            });
            let (kind, data) = created.to_parts();
            event_rows.push((t.id.as_str(), kind, data.to_string()));
            report.added.push(t.id.clone());
        }
        for chunk in task_rows.chunks(500) {
            let mut b = values(
                "INSERT INTO plan_tasks (plan_id, id, ord, priority, spec, status, initial_status, deps_left, max_attempts, attempt_budget_pico, has_files, reason, updated_at)",
                13,
                chunk.len(),
            );
            for t in chunk {
                b = b
                    .bind(spec.id.as_str())
                    .bind(t.id)
                    .bind(t.ord)
                    .bind(t.priority)
                    .bind(t.spec.as_str())
                    .bind(t.status)
                    .bind(t.initial)
                    .bind(t.deps_left)
                    .bind(t.max_attempts)
                    .bind(t.attempt_budget)
                    .bind(t.has_files)
                    .bind(t.reason.as_deref())
                    .bind(now.0);
            }
            b.execute(&mut tx).await?;
        }
        for chunk in dep_rows.chunks(2000) {
            let mut b = values("INSERT INTO plan_deps (plan_id, task_id, depends_on)", 3, chunk.len());
            for (task, dep) in chunk {
                b = b.bind(spec.id.as_str()).bind(*task).bind(*dep);
            }
            b.execute(&mut tx).await?;
        }
        for chunk in file_rows.chunks(2000) {
            let mut b = values("INSERT INTO plan_files (plan_id, task_id, path)", 3, chunk.len());
            for (task, path) in chunk {
                b = b.bind(spec.id.as_str()).bind(*task).bind(path.as_str());
            }
            b.execute(&mut tx).await?;
        }
        for chunk in event_rows.chunks(1000) {
            let mut b = values("INSERT INTO plan_events (plan_id, task_id, attempt, kind, at, data)", 6, chunk.len());
            for (task, kind, data) in chunk {
                b = b
                    .bind(spec.id.as_str())
                    .bind(*task)
                    .bind(None::<i64>)
                    .bind(kind.as_str())
                    .bind(now.0)
                    .bind(data.as_str());
            }
            b.execute(&mut tx).await?;
        }
        for t in &to_update {
            let Some(s) = by_id.get(t.id.as_str()) else { continue };
            let def = t.definition();
            let deps_left = unmet(t, &status_of);
            let status = waiting_status(deps_left);
            let changed = sql(q::UPDATE_TASK_DEFINITION)
                .bind(&spec.id)
                .bind(&t.id)
                .bind(t.priority.rank())
                .bind(serde_json::to_string(&def).unwrap_or_default())
                .bind(status.as_str())
                .bind(deps_left)
                .bind(i64::from(t.max_attempts_with(defaults)))
                .bind(t.attempt_budget_with(defaults).pico())
                .bind(!t.key_files.is_empty())
                .bind(now.0)
                .bind(s.version)
                .execute(&mut tx)
                .await?;
            if changed.rows_affected() != 1 {
                return Err(StoreError::ImportRefused {
                    tasks: vec![format!("{} changed while the import ran; import again", t.id)],
                });
            }
            Self::set_deps_and_files_tx(&mut tx, &spec.id, t).await?;
            Self::event_tx(
                &mut tx,
                &spec.id,
                Some(&t.id),
                None,
                TaskEntry::TaskUpdated { status, dependencies: t.dependencies.clone() },
                now,
            )
            .await?;
            report.updated.push(t.id.clone());
        }
        files_anywhere |= to_update.iter().any(|t| !t.key_files.is_empty());
        sql(q::UPDATE_PLAN)
            .bind(&spec.id)
            .bind(&header.name)
            .bind(serde_json::to_string(&header).unwrap_or_default())
            .bind(header.defaults.retry_backoff() as i64)
            .bind(files_anywhere)
            .bind(now.0)
            .execute(&mut tx)
            .await?;
        if let Some(branch) = import.branch {
            let previous = existing.as_ref().and_then(|p| p.branch.clone());
            Self::set_branch_tx(&mut tx, &spec.id, branch, previous.as_ref(), now).await?;
        }
        // (The header with the new limit is stored just above.)
        if let Some(locked) = locked.filter(|l| l.budget.limit != limit) {
            Self::set_limit_tx(&mut tx, &spec.id, locked.budget, limit, None, now).await?;
        }
        // A gate judges what this import adds or changes, not what was there.
        let judged: BTreeSet<String> = report.added.iter().chain(&report.updated).cloned().collect();
        for (task, why) in import.skip.iter().filter(|(t, _)| judged.contains(t)) {
            let done = sql(q::SKIP_TASK).bind(&spec.id).bind(task).bind(why).bind(now.0).execute(&mut tx).await?;
            if done.rows_affected() == 1 {
                Self::event_tx(
                    &mut tx,
                    &spec.id,
                    Some(task),
                    None,
                    TaskEntry::TaskSkipped { reason: why.to_string() },
                    now,
                )
                .await?;
                report.skipped.push(task.clone());
            }
        }
        for v in import.verdicts.iter().filter(|v| judged.contains(&v.task)) {
            Self::event_tx(
                &mut tx,
                &spec.id,
                Some(&v.task),
                None,
                TaskEntry::GateVerdict { verdict: v.verdict, missing: v.missing.clone(), reason: v.reason.clone() },
                now,
            )
            .await?;
        }
        let counts = ImportCounts {
            added: report.added.len(),
            updated: report.updated.len(),
            unchanged: report.unchanged.len(),
            skipped: report.skipped.len(),
            strict: import.apply,
        };
        let entry =
            if import.apply.is_some() { PlanEntry::PlanApplied(counts) } else { PlanEntry::PlanImported(counts) };
        Self::event_tx(&mut tx, &spec.id, None, None, entry, now).await?;
        tx.commit().await.or_store()?;
        self.notify_work(&spec.id).await;
        Ok(report)
    }
}
