//! How the dashboard looks: the plan screen (counts and budget, the task table by status and
//! depth, the workers, the event tail) and a task's screen (its record, attempts and
//! events), with the keys in a footer. Colours only say again what the text says, and are
//! left out under `NO_COLOR`.

use arbiter_core::plan::state::TaskStatus;
use arbiter_core::plan::worker_names::WorkerNames;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Cell, Gauge, Paragraph, Row as TableRow, Table, TableState, Wrap};

use super::model::{Dashboard, Screen};
use crate::output::printable;

/// Styles, or none under `NO_COLOR`.
#[derive(Clone, Copy)]
pub struct Palette {
    pub color: bool,
}

impl Palette {
    /// Colours unless `NO_COLOR` is set (to anything but the empty string).
    pub fn from_env() -> Self {
        Palette { color: std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) }
    }

    fn status(self, s: TaskStatus) -> Style {
        if !self.color {
            return Style::new();
        }
        Style::new().fg(match s {
            TaskStatus::Running => Color::Cyan,
            TaskStatus::Ready => Color::Yellow,
            TaskStatus::Blocked => Color::Gray,
            TaskStatus::Done => Color::Green,
            TaskStatus::Failed => Color::Red,
            TaskStatus::Skipped | TaskStatus::Cancelled => Color::DarkGray,
        })
    }

    pub(super) fn selected(self) -> Style {
        if self.color {
            Style::new().bg(Color::Blue).fg(Color::White)
        } else {
            Style::new().add_modifier(Modifier::REVERSED)
        }
    }

    pub(super) fn bold(self) -> Style {
        Style::new().add_modifier(Modifier::BOLD)
    }
}

const PLAN_KEYS: &str = "↑/k ↓/j move · Enter task · c cancel plan · r retry task · q quit";
const TASK_KEYS: &str = "Esc back · c cancel plan · r retry this task · q quit";

/// Draws the dashboard on the whole frame.
pub fn draw(frame: &mut Frame, d: &Dashboard, palette: Palette) {
    let [header, body, footer] =
        Layout::vertical([Constraint::Length(4), Constraint::Min(5), Constraint::Length(2)]).areas(frame.area());
    draw_header(frame, header, d, palette);
    match &d.screen {
        Screen::Plan => draw_plan(frame, body, d, palette),
        Screen::Task(id) => draw_task(frame, body, d, id, palette),
    }
    let keys = match (&d.confirm, &d.screen) {
        (Some(action), _) => Line::from(Span::styled(action.question(&d.plan_id), palette.bold())),
        (None, Screen::Plan) => Line::from(PLAN_KEYS),
        (None, Screen::Task(_)) => Line::from(TASK_KEYS),
    };
    let message = Line::from(d.message.as_deref().map(printable).unwrap_or_default());
    frame.render_widget(Paragraph::new(vec![message, keys]), footer);
}

fn draw_header(frame: &mut Frame, area: Rect, d: &Dashboard, palette: Palette) {
    let [text, gauge] = Layout::vertical([Constraint::Length(3), Constraint::Length(1)]).areas(area);
    let Some(details) = &d.details else {
        frame.render_widget(Paragraph::new(format!("plan {} — reading {}…", d.plan_id, d.source)), text);
        return;
    };
    let plan = &details.view.plan;
    let mut counts = vec![Span::raw(format!("{} task(s): ", details.view.tasks.len()))];
    for (i, (status, n)) in d.counts().into_iter().enumerate() {
        if i > 0 {
            counts.push(Span::raw(", "));
        }
        counts.push(Span::styled(format!("{} {n}", status.as_str()), palette.status(status)));
    }
    let cancelled = if plan.cancelled { " — CANCELLED" } else { "" };
    let lines = vec![
        Line::from(vec![
            Span::styled(format!("plan {}", printable(&plan.header.id)), palette.bold()),
            Span::raw(format!(" — {}{cancelled}", printable(&plan.header.name))),
        ]),
        Line::from(counts),
        Line::from(format!("branch {} · {}", printable(&plan.header.integration_branch), d.source)),
    ];
    frame.render_widget(Paragraph::new(lines), text);
    let budget = &plan.budget;
    let spent = format!("spent {} · reserved {}", budget.spent, budget.reserved);
    let widget = match budget.limit {
        Some(limit) if limit.pico() > 0 => {
            let used = (budget.spent.pico().max(0) + budget.reserved.pico().max(0)) as f64 / limit.pico() as f64;
            Gauge::default()
                .ratio(used.clamp(0.0, 1.0))
                .label(format!("budget {limit}: {spent}"))
                .gauge_style(if palette.color { Style::new().fg(Color::Magenta) } else { Style::new() })
        }
        _ => Gauge::default().ratio(0.0).label(format!("no budget limit: {spent}")),
    };
    frame.render_widget(widget, gauge);
}

fn draw_plan(frame: &mut Frame, area: Rect, d: &Dashboard, palette: Palette) {
    let [tasks, tail] = Layout::vertical([Constraint::Min(3), Constraint::Length(8)]).areas(area);
    let [table_area, workers_area] = Layout::horizontal([Constraint::Min(40), Constraint::Length(32)]).areas(tasks);
    let rows = d.rows();
    let table_rows: Vec<TableRow> = rows
        .iter()
        .map(|r| {
            TableRow::new(vec![
                Cell::from(printable(&r.id)),
                Cell::from(Span::styled(r.status.as_str(), palette.status(r.status))),
                Cell::from(if r.critical { format!("{}*", r.depth) } else { r.depth.to_string() }),
                Cell::from(r.attempts.clone()),
                Cell::from(r.cost.clone()),
                Cell::from(printable(&r.title)),
            ])
        })
        .collect();
    let widths = [
        Constraint::Length(14),
        Constraint::Length(9),
        Constraint::Length(5),
        Constraint::Length(6),
        Constraint::Length(10),
        Constraint::Min(10),
    ];
    let table = Table::new(table_rows, widths)
        .header(TableRow::new(["TASK", "STATUS", "DEPTH", "TRIES", "COST", "TITLE"]).style(palette.bold()))
        .row_highlight_style(palette.selected())
        .block(Block::bordered().title(" tasks (* the critical path) "));
    let mut state = TableState::default().with_selected((!rows.is_empty()).then_some(d.selected));
    frame.render_stateful_widget(table, table_area, &mut state);

    let working: Vec<Line> = rows
        .iter()
        .filter(|r| r.status == TaskStatus::Running)
        .map(|r| Line::from(format!("{} → {}", printable(&r.worker), printable(&r.id))))
        .collect();
    let working = if working.is_empty() { vec![Line::from("no task running")] } else { working };
    frame.render_widget(
        Paragraph::new(working).block(Block::bordered().title(" workers ")).wrap(Wrap { trim: true }),
        workers_area,
    );
    draw_events(frame, tail, d.events.iter().collect(), &d.names, " events ");
}

fn draw_events(
    frame: &mut Frame,
    area: Rect,
    events: Vec<&arbiter_store::plans::PlanEvent>,
    names: &WorkerNames,
    title: &str,
) {
    let shown = area.height.saturating_sub(2) as usize;
    let lines: Vec<Line> = events
        .iter()
        .skip(events.len().saturating_sub(shown))
        .map(|e| {
            let said = e.entry().map(|entry| entry.describe_naming(names)).unwrap_or_else(|| e.kind.clone());
            let task = e.task_id.as_deref().map(|t| format!("{t}: ")).unwrap_or_default();
            let c = e.at.civil();
            Line::from(printable(&format!("{:02}:{:02}:{:02} {task}{said}", c.hour, c.minute, c.second)))
        })
        .collect();
    frame.render_widget(Paragraph::new(lines).block(Block::bordered().title(title.to_string())), area);
}

fn draw_task(frame: &mut Frame, area: Rect, d: &Dashboard, id: &str, palette: Palette) {
    let [record, attempts, tail] =
        Layout::vertical([Constraint::Length(8), Constraint::Min(4), Constraint::Length(8)]).areas(area);
    let Some(task) = d.details.as_ref().and_then(|details| details.view.task(id)) else {
        frame.render_widget(Paragraph::new(format!("task {} is not in the plan any more", printable(id))), record);
        return;
    };
    let deps = if task.spec.dependencies.is_empty() { "none".to_string() } else { task.spec.dependencies.join(", ") };
    let lines = vec![
        Line::from(vec![
            Span::styled(format!("task {}", printable(id)), palette.bold()),
            Span::raw(" "),
            Span::styled(task.status.as_str(), palette.status(task.status)),
            Span::raw(format!(" — {}", printable(&task.spec.title))),
        ]),
        Line::from(format!("depends on {}", printable(&deps))),
        Line::from(format!(
            "attempts {}/{} · cost {} · reserved {}",
            task.attempts, task.max_attempts, task.cost, task.reserved
        )),
        Line::from(format!(
            "lease {} · run {} · commit {}",
            printable(&task.lease_owner.as_deref().map_or_else(|| "none".to_string(), |w| d.names.label(w))),
            printable(task.run_id.as_deref().unwrap_or("none")),
            printable(task.commit.as_deref().unwrap_or("none"))
        )),
        Line::from(format!("reason {}", printable(task.reason.as_deref().unwrap_or("none")))),
    ];
    frame.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" task ")).wrap(Wrap { trim: true }),
        record,
    );
    let rows: Vec<TableRow> = d
        .details
        .iter()
        .flat_map(|details| details.attempts.iter().filter(|a| a.task_id == id))
        .map(|a| {
            TableRow::new(vec![
                Cell::from(a.attempt.to_string()),
                Cell::from(a.status.as_str()),
                Cell::from(printable(&d.names.label(&a.worker))),
                Cell::from(a.cost.to_string()),
                Cell::from(printable(a.run_id.as_deref().unwrap_or(""))),
                Cell::from(printable(a.reason.as_deref().unwrap_or(""))),
            ])
        })
        .collect();
    let widths = [
        Constraint::Length(7),
        Constraint::Length(10),
        Constraint::Length(24),
        Constraint::Length(10),
        Constraint::Length(24),
        Constraint::Min(10),
    ];
    let table = Table::new(rows, widths)
        .header(TableRow::new(["TRY", "STATUS", "WORKER", "COST", "RUN", "REASON"]).style(palette.bold()))
        .block(Block::bordered().title(" attempts "));
    frame.render_widget(table, attempts);
    draw_events(frame, tail, d.events_of(id).collect(), &d.names, " its events ");
}
