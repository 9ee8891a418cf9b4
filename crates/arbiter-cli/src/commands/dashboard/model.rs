//! The terminal dashboard's state and what each key does to it, without a terminal: which
//! screen is shown, which task is selected, the action waiting for its confirmation, and the
//! plan as last read with the tail of its events. [`super::view`] draws it; the loop in
//! [`super`] feeds it keys and what it reads.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use arbiter_core::plan::state::TaskStatus;
use arbiter_core::plan::worker_names::WorkerNames;
use arbiter_runner::plan_admin::PlanDetails;
use arbiter_store::plans::{PlanEvent, TaskRecord};

/// How many events the tail keeps.
pub const EVENT_TAIL: usize = 200;

/// A key, as the dashboard understands it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    Up,
    Down,
    Top,
    Bottom,
    Enter,
    Back,
    Cancel,
    Retry,
    Yes,
    No,
    Quit,
}

/// What the dashboard asks of the plan's administration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    CancelPlan,
    RetryTask(String),
}

impl Action {
    /// The question a confirmation asks.
    pub fn question(&self, plan: &str) -> String {
        match self {
            Action::CancelPlan => {
                format!("Cancel plan {plan}? Running work is stopped, nothing more is claimed. [y/n]")
            }
            Action::RetryTask(task) => format!("Retry task {task} of plan {plan}? [y/n]"),
        }
    }
}

/// What a key leads to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    Nothing,
    Quit,
    Run(Action),
}

/// The screen shown.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Screen {
    Plan,
    Task(String),
}

/// One row of the task table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    pub id: String,
    pub title: String,
    pub status: TaskStatus,
    pub depth: usize,
    /// On the critical path: the longest chain of tasks still to finish.
    pub critical: bool,
    pub attempts: String,
    pub worker: String,
    pub cost: String,
}

/// The order the table shows statuses in: work in progress first, what is finished last.
fn status_rank(s: TaskStatus) -> u8 {
    match s {
        TaskStatus::Running => 0,
        TaskStatus::Ready => 1,
        TaskStatus::Blocked => 2,
        TaskStatus::Failed => 3,
        TaskStatus::Done => 4,
        TaskStatus::Skipped => 5,
        TaskStatus::Cancelled => 6,
    }
}

/// The dashboard of one plan.
pub struct Dashboard {
    pub plan_id: String,
    /// Where the plan is read from (the store's path, or the control plane's URL).
    pub source: String,
    pub details: Option<PlanDetails>,
    pub depths: BTreeMap<String, usize>,
    /// The tasks on the critical path (the longest chain of work left).
    pub critical: BTreeSet<String>,
    pub events: VecDeque<PlanEvent>,
    pub screen: Screen,
    pub selected: usize,
    pub confirm: Option<Action>,
    /// The last action's outcome, or the last read's failure.
    pub message: Option<String>,
    /// Registered workers' names, which lease holders are shown by.
    pub names: WorkerNames,
}

impl Dashboard {
    pub fn new(plan_id: &str, source: &str) -> Self {
        Dashboard {
            plan_id: plan_id.to_string(),
            source: source.to_string(),
            details: None,
            depths: BTreeMap::new(),
            critical: BTreeSet::new(),
            events: VecDeque::new(),
            screen: Screen::Plan,
            selected: 0,
            confirm: None,
            message: None,
            names: WorkerNames::default(),
        }
    }

    /// The plan as just read: the selection stays on the task it was on.
    pub fn set_details(&mut self, details: PlanDetails) {
        let was = self.selected_task();
        let shape = details.shape();
        self.depths = shape.depths;
        self.critical = shape.critical.into_iter().collect();
        self.details = Some(details);
        let rows = self.rows();
        self.selected =
            was.and_then(|id| rows.iter().position(|r| r.id == id)).unwrap_or(0).min(rows.len().saturating_sub(1));
    }

    /// Events read since the last ones, oldest first.
    pub fn add_events(&mut self, events: impl IntoIterator<Item = PlanEvent>) {
        for e in events {
            if self.events.back().is_some_and(|last| last.id >= e.id) {
                continue;
            }
            self.events.push_back(e);
            if self.events.len() > EVENT_TAIL {
                self.events.pop_front();
            }
        }
    }

    /// The id of the last event read (0: none yet).
    pub fn last_event(&self) -> i64 {
        self.events.back().map_or(0, |e| e.id)
    }

    fn tasks(&self) -> &[TaskRecord] {
        self.details.as_ref().map_or(&[], |d| &d.view.tasks)
    }

    /// The task table: by status (running, ready, blocked, failed, done, skipped,
    /// cancelled), then by depth in the DAG, then in the plan's order.
    pub fn rows(&self) -> Vec<Row> {
        let mut tasks: Vec<&TaskRecord> = self.tasks().iter().collect();
        let depth = |t: &TaskRecord| self.depths.get(&t.spec.id).copied().unwrap_or(0);
        tasks.sort_by_key(|t| (status_rank(t.status), depth(t), t.ord));
        tasks
            .into_iter()
            .map(|t| Row {
                id: t.spec.id.clone(),
                title: t.spec.title.clone(),
                status: t.status,
                depth: depth(t),
                critical: self.critical.contains(&t.spec.id),
                attempts: format!("{}/{}", t.attempts, t.max_attempts),
                worker: if t.status == TaskStatus::Running {
                    t.lease_owner.as_deref().map(|w| self.names.label(w)).unwrap_or_default()
                } else {
                    String::new()
                },
                cost: t.cost.to_string(),
            })
            .collect()
    }

    /// The task under the cursor.
    pub fn selected_task(&self) -> Option<String> {
        self.rows().get(self.selected).map(|r| r.id.clone())
    }

    /// How many tasks have each status.
    pub fn counts(&self) -> BTreeMap<TaskStatus, usize> {
        let mut counts = BTreeMap::new();
        for t in self.tasks() {
            *counts.entry(t.status).or_insert(0) += 1;
        }
        counts
    }

    /// The events of one task, newest last.
    pub fn events_of<'a>(&'a self, task: &'a str) -> impl Iterator<Item = &'a PlanEvent> + 'a {
        self.events.iter().filter(move |e| e.task_id.as_deref() == Some(task))
    }

    /// What `key` does.
    pub fn on_key(&mut self, key: Key) -> Command {
        if let Some(action) = self.confirm.take() {
            return match key {
                Key::Yes => Command::Run(action),
                Key::Quit => Command::Quit,
                _ => {
                    self.message = Some("nothing was changed".into());
                    Command::Nothing
                }
            };
        }
        let rows = self.rows().len();
        match (key, &self.screen) {
            (Key::Quit, _) => return Command::Quit,
            (Key::Up, Screen::Plan) => self.selected = self.selected.saturating_sub(1),
            (Key::Down, Screen::Plan) => self.selected = (self.selected + 1).min(rows.saturating_sub(1)),
            (Key::Top, Screen::Plan) => self.selected = 0,
            (Key::Bottom, Screen::Plan) => self.selected = rows.saturating_sub(1),
            (Key::Enter, Screen::Plan) => {
                if let Some(task) = self.selected_task() {
                    self.screen = Screen::Task(task);
                }
            }
            (Key::Back, Screen::Task(_)) => self.screen = Screen::Plan,
            (Key::Cancel, _) => self.confirm = Some(Action::CancelPlan),
            (Key::Retry, screen) => {
                let task = match screen {
                    Screen::Task(t) => Some(t.clone()),
                    Screen::Plan => self.selected_task(),
                };
                if let Some(task) = task {
                    self.confirm = Some(Action::RetryTask(task));
                }
            }
            _ => {}
        }
        Command::Nothing
    }
}
