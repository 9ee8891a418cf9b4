//! Claiming: a ready unit of a running attempt, or a new task of a plan that this worker can
//! run, and starting its attempt (whole, or spread over units) as an [`Assignment`].

use arbiter_core::ids::{CandidateId, RunId};
use arbiter_core::money::Usd;
use arbiter_core::plan::{PlanSpec, TaskSpec};
use arbiter_core::settings::{ApplyMode, RunSettings};
use arbiter_core::time::Timestamp;
use arbiter_store::StoreError;
use arbiter_store::plans::{AttemptResult, ClaimOutcome, Claimed, Lease, Retry};
use arbiter_store::units::{Capabilities, UnitClaim, UnitKind, UnitSpec};

use super::local::UNITS_RECHECK;
use super::report::{Finish, checked_out};
use super::{Assignment, CoordinatorError, LocalCoordinator, Work};
use crate::git::Git;
use crate::integration;
use crate::plan_branch;
use crate::worker::Progress;
use crate::workspace::Workspace;

/// A worker that cannot run every runner looks at the ready tasks a page at a time, up to a
/// few pages, before it claims one it can run.
const READY_PAGE: u32 = 16;
const READY_PAGES: u32 = 4;
/// How many times a worker that cannot run every runner looks at the ready tasks in one
/// claim, when the ones it saw were taken before it claimed.
const LOOKS: u32 = 3;

/// What a claim on one plan found.
pub(super) enum Found {
    Work(Box<Assignment>),
    /// Nothing now: whether more may come, and when the next retry is ready.
    Nothing {
        more: bool,
        next: Option<Timestamp>,
    },
}

impl LocalCoordinator {
    /// The plans a worker without a plan of its own claims from, in a stable order: those
    /// with a task ready or running (a look at every plan with its counts, at every claim of
    /// every waiting worker, grew with every finished plan the store keeps).
    pub(super) async fn open_plans(&self) -> Result<Vec<String>, CoordinatorError> {
        Ok(self.plans.claimable_plans().await?)
    }

    /// A claimed unit as an assignment.
    async fn unit_assignment(&self, claim: UnitClaim) -> Result<Assignment, CoordinatorError> {
        let UnitClaim { lease: unit, task } = claim;
        let plan = self.header(&unit.attempt.plan_id).await?;
        let (task, _) = self.with_feedback(&plan, task, unit.attempt.attempt).await?;
        // Every unit runs with the settings its attempt spread with, whatever the
        // configuration says by now.
        let frozen = self.plans.attempt_settings(&unit.attempt.plan_id, &task.id, unit.attempt.fence).await?;
        let settings = match frozen {
            Some(settings) => settings,
            None => {
                // An attempt spread before its settings were kept: resolved again.
                let workspace = self.repositories.workspace_for(&plan).await?;
                match self.settings_of(&workspace, &plan, &task).await? {
                    Ok(s) => capped(s, &unit.attempt),
                    Err(why) => {
                        self.fail_attempt(&unit.attempt, why.clone(), Retry::Never).await?;
                        return Err(CoordinatorError::Refused(format!("task {} of plan {}: {why}", task.id, plan.id)));
                    }
                }
            }
        };
        let run_id = RunId::parse(&unit.run_id).map_err(|_| {
            CoordinatorError::Store(StoreError::Corrupt { column: "plan_units.run_id", value: unit.run_id.clone() })
        })?;
        let work = match unit.kind {
            UnitKind::Candidate => {
                let index = (0..settings.candidates.value as usize)
                    .find(|i| CandidateId::from_index(*i).as_str() == unit.name)
                    .ok_or_else(|| {
                        CoordinatorError::Store(StoreError::Corrupt {
                            column: "plan_units.name",
                            value: unit.name.clone(),
                        })
                    })?;
                Work::Candidate { index, run_id }
            }
            UnitKind::Evaluation => {
                let units = self.plans.units_of(&unit.attempt.plan_id, &task.id, unit.attempt.fence).await?;
                let lost = units
                    .iter()
                    .filter(|u| u.kind == UnitKind::Candidate)
                    .filter_map(|u| {
                        let why = u.result.as_ref()?.missing()?.to_string();
                        let index = (0..settings.candidates.value as usize)
                            .find(|i| CandidateId::from_index(*i).as_str() == u.name)?;
                        Some((index, why))
                    })
                    .collect();
                Work::Evaluation { run_id, lost }
            }
        };
        Ok(Assignment {
            lease: unit.attempt.clone(),
            base: unit.base.clone(),
            unit: Some(unit),
            work,
            task,
            plan,
            settings,
        })
    }

    /// Fails an attempt (its evaluation cannot run, or it cannot start).
    async fn fail_attempt(&self, lease: &Lease, reason: String, retry: Retry) -> Result<(), CoordinatorError> {
        let result = AttemptResult::Failed { reason: reason.clone(), retry, run_id: None };
        if let Finish::Recorded(retry_at) = self.finish(lease, result, Usd::ZERO).await? {
            self.tell(Progress::Failed { task: lease.task_id.clone(), reason, retry_at });
        }
        Ok(())
    }

    /// The best ready tasks of the plan a worker with `caps` can run, looked at a page at a
    /// time, up to a few pages (empty: none of those).
    async fn runnable_ready(
        &self,
        plan: &str,
        header: &PlanSpec,
        workspace: &Workspace,
        caps: &Capabilities,
    ) -> Result<Vec<TaskSpec>, CoordinatorError> {
        let mut ready = Vec::new();
        for page in 0..READY_PAGES {
            let tasks = self.plans.ready_tasks(plan, self.now(), page * READY_PAGE, READY_PAGE).await?;
            let last = tasks.len() < READY_PAGE as usize;
            let held_back = self.analyst.as_ref().map(|a| a.held_back(plan)).unwrap_or_default();
            ready.extend(tasks.into_iter().filter(|task| !held_back.contains(&task.id)).filter(|task| {
                // A task whose settings are invalid is claimed by the first worker to look
                // at it, and fails with the reason (it would otherwise wait for ever).
                match self.settings.of(workspace, header, task) {
                    Ok(settings) => can_run(caps, &settings),
                    Err(_) => true,
                }
            }));
            if !ready.is_empty() || last {
                break;
            }
        }
        Ok(ready)
    }

    /// Claims a new task of the plan this worker can run (some unit of it, when its
    /// tournament spreads; all of it otherwise).
    async fn claim_task(
        &self,
        plan: &str,
        worker: &str,
        caps: &Capabilities,
    ) -> Result<ClaimOutcome, CoordinatorError> {
        let held_back = self.analyst.as_ref().map(|a| a.held_back(plan)).unwrap_or_default();
        if *caps == Capabilities::Any && held_back.is_empty() {
            return Ok(self.plans.claim(plan, worker, self.lease, self.now()).await?);
        }
        if *caps == Capabilities::Any {
            // A task whose failed attempt is being analysed waits for the analysis; the
            // others are claimed as usual.
            let ready = self.plans.ready_tasks(plan, self.now(), 0, READY_PAGE * READY_PAGES).await?;
            let ids: Vec<String> = ready.into_iter().map(|t| t.id).filter(|id| !held_back.contains(id)).collect();
            return Ok(self.plans.claim_among(plan, &ids, worker, self.lease, self.now()).await?);
        }
        let header = self.header(plan).await?;
        let workspace = self.repositories.workspace_for(&header).await?;
        if !self.tasks_choose_runners(plan).await? {
            // Every task needs what the plan's defaults give it: those decide for all (a
            // task whose settings are invalid is claimed, and fails with the reason).
            return match self.settings.of(&workspace, &header, &TaskSpec::default()) {
                Ok(settings) if !can_run(caps, &settings) => {
                    Ok(self.plans.claim_among(plan, &[], worker, self.lease, self.now()).await?)
                }
                _ => Ok(self.plans.claim(plan, worker, self.lease, self.now()).await?),
            };
        }
        let mut ready = self.runnable_ready(plan, &header, &workspace, caps).await?;
        // One round trip claims the best of them still ready (claimers looking at the same
        // tasks at once skip each other's). When every one was taken meanwhile, a new look
        // finds those still ready; tasks that stay ready but cannot be claimed (their key
        // files overlap running work, the budget is spent) end the claim after a few looks.
        // An empty look answers with the plan's counts.
        for _ in 1..LOOKS {
            let ids: Vec<String> = ready.iter().map(|t| t.id.clone()).collect();
            match self.plans.claim_among(plan, &ids, worker, self.lease, self.now()).await? {
                ClaimOutcome::Idle(idle) if !ids.is_empty() && !idle.cancelled && !idle.budget_exhausted => {}
                outcome => return Ok(outcome),
            }
            ready = self.runnable_ready(plan, &header, &workspace, caps).await?;
        }
        let ids: Vec<String> = ready.iter().map(|t| t.id.clone()).collect();
        Ok(self.plans.claim_among(plan, &ids, worker, self.lease, self.now()).await?)
    }

    /// One claim on one plan: a unit of a running attempt, or a new attempt.
    pub(super) async fn claim_on(
        &self,
        plan: &str,
        worker: &str,
        caps: &Capabilities,
    ) -> Result<Found, CoordinatorError> {
        let none_lately = self
            .no_ready_units
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(plan)
            .is_some_and(|at| at.elapsed() < UNITS_RECHECK);
        if !none_lately {
            match self.plans.claim_unit(Some(plan), worker, caps, self.lease, self.now()).await? {
                Some(u) => return Ok(Found::Work(Box::new(self.unit_assignment(u).await?))),
                None => {
                    let mut seen = self.no_ready_units.lock().unwrap_or_else(|p| p.into_inner());
                    seen.retain(|_, at| at.elapsed() < UNITS_RECHECK);
                    seen.insert(plan.to_string(), std::time::Instant::now());
                }
            }
        }
        loop {
            let c = match self.claim_task(plan, worker, caps).await? {
                ClaimOutcome::Claimed(c) => *c,
                ClaimOutcome::Idle(idle) => {
                    return Ok(Found::Nothing { more: !idle.finished(), next: idle.next_ready_at });
                }
            };
            if let Some(found) = self.start_attempt(plan, worker, caps, c).await? {
                return Ok(found);
            }
        }
    }

    /// Starts a claimed attempt: recognised as done when its winner is on the branch
    /// already, failed when its settings are invalid, spread over units when its tournament
    /// can spread, run whole otherwise. `None`: nothing for this worker (claim again).
    async fn start_attempt(
        &self,
        plan: &str,
        worker: &str,
        caps: &Capabilities,
        c: Claimed,
    ) -> Result<Option<Found>, CoordinatorError> {
        let header = self.header(plan).await?;
        let plan_base = match self.open_plan(plan).await {
            Ok(base) => base,
            Err(e) => {
                self.give_back(&c.lease, format!("its integration branch cannot be used: {e}")).await;
                return Err(e);
            }
        };
        let repo = self.repo(&header).await?;
        if let Some(worktree) = plan_branch::checked_out_in(&repo, &header.integration_branch).await? {
            let branch = header.integration_branch.clone();
            self.give_back(&c.lease, format!("its integration branch {branch} is checked out in {worktree}")).await;
            return Err(checked_out(&header, worktree));
        }
        let base = integration::tip(&repo, &header.integration_branch).await?;
        // A winner committed just before its worker died is recognised and reported done,
        // never run twice.
        if let Some(commit) =
            integration::find_task_commit(&repo, &header.integration_branch, &plan_base, &header.id, &c.task.id).await?
        {
            let result = AttemptResult::Succeeded { run_id: None, commit: Some(commit.clone()) };
            self.finish(&c.lease, result, Usd::ZERO).await?;
            self.tell(Progress::Recovered { task: c.task.id.clone(), commit });
            return Ok(None);
        }
        let workspace = self.repositories.workspace_for(&header).await?;
        let mut c = c;
        let (task, fed) = self.with_feedback(&header, c.task, c.lease.attempt).await?;
        c.task = task;
        if let Some(from_run) = fed {
            let entry = arbiter_core::plan::event::PlanEntry::AnalysisFed {
                task: c.task.id.clone(),
                attempt: c.lease.attempt,
                from_run,
            };
            self.plans.note_event(plan, entry, self.now()).await?;
        }
        let settings = match self.settings_of(&workspace, &header, &c.task).await? {
            Ok(s) => capped(s, &c.lease),
            Err(why) => {
                self.fail_attempt(&c.lease, why, Retry::Never).await?;
                return Ok(None);
            }
        };
        if !can_run(caps, &settings) {
            // Claimed on a stale look at the plan (a task naming its own runners came since):
            // given back without counting, and the plan looked at again.
            self.choosers.lock().unwrap_or_else(|p| p.into_inner()).remove(plan);
            self.give_back(&c.lease, "the worker that claimed it cannot run it".into()).await;
            return Ok(None);
        }
        if !settings.spreads() {
            self.hand_out(&c.lease, &c.task);
            let assignment = Assignment {
                lease: c.lease,
                unit: None,
                work: Work::Tournament,
                task: c.task,
                plan: header,
                base,
                settings,
            };
            return Ok(Some(Found::Work(Box::new(assignment))));
        }
        let run_id = RunId::new(self.now(), crate::random_suffix());
        let units: Vec<UnitSpec> = (0..settings.candidates.value as usize)
            .map(|i| UnitSpec {
                name: CandidateId::from_index(i).to_string(),
                kind: UnitKind::Candidate,
                needs: settings.needs_of(i),
            })
            .chain([UnitSpec { name: "evaluation".into(), kind: UnitKind::Evaluation, needs: Vec::new() }])
            .collect();
        self.plans.start_units(&c.lease, run_id.as_str(), &base, &settings, &units, self.now()).await?;
        self.units_changed(plan);
        self.tell(Progress::Spread { task: c.task.id.clone(), run: run_id.to_string(), units: units.len() });
        match self.plans.claim_unit(Some(plan), worker, caps, self.lease, self.now()).await? {
            Some(u) => Ok(Some(Found::Work(Box::new(self.unit_assignment(u).await?)))),
            None => Ok(None),
        }
    }

    /// A task's settings, with the repository's own test command as its verify command when
    /// it names none (found at the plan's base, once per plan). `Err(why)`: its settings are
    /// invalid, or nothing would check its winner.
    async fn settings_of(
        &self,
        workspace: &Workspace,
        header: &PlanSpec,
        task: &TaskSpec,
    ) -> Result<Result<RunSettings, String>, CoordinatorError> {
        let mut settings = match self.settings.of(workspace, header, task) {
            Ok(s) => s,
            Err(why) => return Ok(Err(format!("its run settings are invalid: {why}"))),
        };
        if settings.wants_detection() {
            let known = self.detected.lock().unwrap_or_else(|p| p.into_inner()).get(&header.id).cloned();
            let detected = match known {
                Some(d) => d,
                None => {
                    let base = self.open_plan(&header.id).await?;
                    let repo = Git::new(workspace.repo_root().to_path_buf());
                    let d = crate::verify_detect::at_commit(&repo, &base).await?;
                    self.detected.lock().unwrap_or_else(|p| p.into_inner()).insert(header.id.clone(), d.clone());
                    d
                }
            };
            crate::verify_detect::apply(&mut settings, detected.as_ref());
        }
        if !settings.may_apply_unchecked() {
            return Ok(Err(crate::verify_detect::unverified_task(&header.id, &task.id)));
        }
        Ok(Ok(settings))
    }

    /// The plan's units changed here: the next claim asks the store for ready ones.
    pub(super) fn units_changed(&self, plan: &str) {
        self.no_ready_units.lock().unwrap_or_else(|p| p.into_inner()).remove(plan);
    }

    /// Remembers a whole tournament's lease until it is reported.
    fn hand_out(&self, lease: &Lease, task: &TaskSpec) {
        let mut handed = self.handed_out.lock().unwrap_or_else(|p| p.into_inner());
        if handed.len() >= 4096 {
            // Leases whose report never came (their workers died): the store has them.
            let stale = self.lease * 4;
            handed.retain(|_, (at, _, _)| at.elapsed() < stale);
        }
        let key = (lease.plan_id.clone(), lease.task_id.clone(), lease.fence);
        handed.insert(key, (std::time::Instant::now(), lease.clone(), task.clone()));
    }

    /// Gives a claimed task back without counting the attempt.
    async fn give_back(&self, lease: &Lease, reason: String) {
        let _ = self.plans.finish(lease, AttemptResult::Released { reason }, Usd::ZERO, self.now()).await;
    }
}

/// Whether a worker with `caps` can run (some of) a task with these settings: one of its
/// candidates when the tournament spreads, all of them otherwise.
fn can_run(caps: &Capabilities, settings: &RunSettings) -> bool {
    let mut needs = (0..settings.candidates.value as usize).map(|i| settings.needs_of(i));
    if settings.spreads() { needs.any(|n| caps.can(&n)) } else { needs.all(|n| caps.can(&n)) }
}

/// A task's settings for a plan attempt: the winner goes onto the integration branch, not
/// into any working tree; the attempt may spend what the claim reserved from the plan's
/// budget, no more (and no more than its own configuration allows).
fn capped(mut settings: RunSettings, lease: &Lease) -> RunSettings {
    settings.apply.value = ApplyMode::None;
    if lease.reserved > Usd::ZERO {
        let own = settings.budget_usd.value;
        settings.budget_usd.value = Some(own.map_or(lease.reserved, |b| b.min(lease.reserved)));
    }
    settings
}
