//! `arbiter dashboard --run ID`: one run's tournament watched live — its candidates with
//! their state, elapsed time, cost and gates, the decision once there is one; Enter shows the
//! selected candidate's gates command by command and why it won or lost.
//!
//! Locally the run directory is read again every half second; against a control plane
//! (`--server`, with `--plan`) the server's overview of the run is read when the plan's event
//! stream says something happened, and every few seconds.

use std::time::Duration;

use arbiter_core::time::{Timestamp, human_duration};
use arbiter_runner::run_record::{CandidateOverview, RunOverview};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Cell, Paragraph, Row, Table, TableState, Wrap};

use super::model::Key;
use super::view::Palette;
use crate::output::printable;

const KEYS: &str = "↑/k ↓/j move · Enter candidate · q quit";
const DETAIL_KEYS: &str = "Esc back · ↑/k ↓/j other candidate · q quit";

/// The run view's state: the run as last read, the selected candidate, whether its detail
/// is open.
pub struct RunWatch {
    /// Where the run is read from, for the header.
    pub source: String,
    pub run: Option<RunOverview>,
    pub selected: usize,
    pub detail: bool,
    pub message: Option<String>,
}

impl RunWatch {
    pub fn new(source: String) -> Self {
        RunWatch { source, run: None, selected: 0, detail: false, message: None }
    }

    pub fn set(&mut self, run: RunOverview) {
        self.selected = self.selected.min(run.candidates.len().saturating_sub(1));
        self.run = Some(run);
        self.message = None;
    }

    /// What a key does; `true` to quit.
    pub fn on_key(&mut self, key: Key) -> bool {
        let n = self.run.as_ref().map_or(0, |r| r.candidates.len());
        match key {
            Key::Quit => return true,
            Key::Up => self.selected = self.selected.saturating_sub(1),
            Key::Down => self.selected = (self.selected + 1).min(n.saturating_sub(1)),
            Key::Top => self.selected = 0,
            Key::Bottom => self.selected = n.saturating_sub(1),
            Key::Enter if n > 0 => self.detail = true,
            Key::Back => self.detail = false,
            _ => {}
        }
        false
    }

    fn candidate(&self) -> Option<&CandidateOverview> {
        self.run.as_ref()?.candidates.get(self.selected)
    }
}

fn elapsed(from: Option<Timestamp>, to: Option<Timestamp>, now: Timestamp) -> String {
    from.map_or_else(|| "-".into(), |f| human_duration(to.unwrap_or(now).millis_since(f)))
}

fn state_style(palette: Palette, status: &str) -> Style {
    if !palette.color {
        return Style::new();
    }
    Style::new().fg(match status {
        "finished" | "succeeded" => Color::Green,
        "running" | "preparing" | "evaluating" => Color::Cyan,
        "queued" | "skipped" | "cancelled" => Color::Gray,
        _ => Color::Red,
    })
}

/// Draws the run view on the whole frame.
pub fn draw(frame: &mut Frame, w: &RunWatch, now: Timestamp, palette: Palette) {
    let [header, body, footer] =
        Layout::vertical([Constraint::Length(4), Constraint::Min(5), Constraint::Length(2)]).areas(frame.area());
    let Some(run) = &w.run else {
        frame.render_widget(Paragraph::new(format!("reading the run from {}…", w.source)), header);
        return;
    };
    let title = Line::from(vec![
        Span::styled(format!("run {} ", run.run_id), palette.bold()),
        Span::styled(run.status.clone(), state_style(palette, &run.status)),
        Span::raw(format!(" · {} · {}", run.phase, elapsed(Some(run.started_at), run.finished_at, now))),
        Span::raw(run.cost.as_ref().map(|c| format!(" · cost {c}")).unwrap_or_default()),
    ]);
    let decision = run.decision.as_deref().map(printable).unwrap_or_else(|| "not decided yet".into());
    frame.render_widget(
        Paragraph::new(vec![title, Line::from(printable(&run.task)), Line::from(decision)]).wrap(Wrap { trim: true }),
        header,
    );
    if w.detail {
        draw_detail(frame, body, w, palette);
    } else {
        draw_candidates(frame, body, w, run, now, palette);
    }
    let keys = if w.detail { DETAIL_KEYS } else { KEYS };
    let message = Line::from(w.message.as_deref().map(printable).unwrap_or_default());
    frame.render_widget(Paragraph::new(vec![message, Line::from(keys)]), footer);
}

fn draw_candidates(frame: &mut Frame, area: Rect, w: &RunWatch, run: &RunOverview, now: Timestamp, palette: Palette) {
    let rows = run.candidates.iter().map(|c| {
        let star = if run.winner.as_deref() == Some(c.id.as_str()) { "★" } else { "" };
        Row::new(vec![
            Cell::from(format!("{}{star}", c.id)),
            Cell::from(printable(&c.runner)),
            Cell::from(Span::styled(c.status.clone(), state_style(palette, &c.status))),
            Cell::from(match (c.started_at, c.agent_ms) {
                (None, Some(ms)) => human_duration(ms),
                _ => elapsed(c.started_at, c.finished_at, now),
            }),
            Cell::from(cost_cell(c).to_string()),
            Cell::from(c.gates.clone().unwrap_or_else(|| "-".into())),
        ])
    });
    // The runner and cost columns are as wide as their longest cell (within reason): the
    // gates take what is left, and Enter shows a candidate whole.
    let widest = |cell: &dyn Fn(&CandidateOverview) -> String| {
        run.candidates.iter().map(|c| cell(c).chars().count()).max().unwrap_or(0)
    };
    let runner_width = widest(&|c| printable(&c.runner));
    let cost_width = widest(&|c| cost_cell(c).to_string());
    let table = Table::new(
        rows,
        [
            Constraint::Length(6),
            Constraint::Length(runner_width.clamp(6, 32) as u16 + 1),
            Constraint::Length(13),
            Constraint::Length(10),
            Constraint::Length(cost_width.clamp(4, 22) as u16 + 1),
            Constraint::Min(10),
        ],
    )
    .header(Row::new(["CAND", "RUNNER", "STATE", "ELAPSED", "COST", "GATES"]).style(palette.bold()))
    .row_highlight_style(palette.selected())
    .block(Block::bordered().title(format!("candidates ({})", run.candidates.len())));
    let mut state = TableState::default().with_selected(Some(w.selected));
    frame.render_stateful_widget(table, area, &mut state);
}

/// A candidate's cost as its column shows it: `unknown (2 call(s) without usage or price)`
/// is `unknown` there.
fn cost_cell(c: &CandidateOverview) -> &str {
    c.cost.as_deref().map_or("-", |c| c.split(" (").next().unwrap_or(c))
}

fn draw_detail(frame: &mut Frame, area: Rect, w: &RunWatch, palette: Palette) {
    let Some(c) = w.candidate() else { return };
    let mut lines = vec![
        Line::from(vec![
            Span::styled(format!("{} ", c.id), palette.bold()),
            Span::raw(format!("({}) ", printable(&c.runner))),
            Span::styled(c.status.clone(), state_style(palette, &c.status)),
        ]),
        Line::from(format!("cost {}", c.cost.clone().unwrap_or_else(|| "-".into()))),
        Line::from(""),
    ];
    if c.gate_results.is_empty() {
        lines.push(Line::from("no gate has run"));
    }
    for (command, verdict) in &c.gate_results {
        lines.push(Line::from(format!("{verdict:<14} {}", printable(command))));
    }
    if let Some(r) = &c.reason {
        lines.push(Line::from(""));
        lines.push(Line::from(printable(r)));
    }
    frame.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: false }).block(Block::bordered().title("candidate")),
        area,
    );
}

/// How often the run is read again without a word from a control plane.
pub fn poll_every(remote: bool) -> Duration {
    if remote { Duration::from_secs(3) } else { Duration::from_millis(500) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overview(n: usize) -> RunOverview {
        RunOverview {
            run_id: "r".into(),
            status: "running".into(),
            phase: "generate".into(),
            task: "t".into(),
            started_at: Timestamp(0),
            finished_at: None,
            winner: None,
            decision: None,
            cost: None,
            candidates: (0..n)
                .map(|i| CandidateOverview {
                    id: format!("c0{i}"),
                    runner: "command".into(),
                    status: "running".into(),
                    started_at: None,
                    finished_at: None,
                    agent_ms: None,
                    cost: None,
                    gates: None,
                    gate_results: Vec::new(),
                    reason: None,
                })
                .collect(),
        }
    }

    #[test]
    fn keys_move_within_the_candidates_and_open_one() {
        let mut w = RunWatch::new("here".into());
        assert!(!w.on_key(Key::Enter) && !w.detail, "nothing to open before the run is read");
        w.set(overview(3));
        w.on_key(Key::Down);
        w.on_key(Key::Down);
        w.on_key(Key::Down);
        assert_eq!(w.selected, 2);
        w.on_key(Key::Enter);
        assert!(w.detail);
        w.on_key(Key::Back);
        assert!(!w.detail);
        w.set(overview(1));
        assert_eq!(w.selected, 0, "a shorter list keeps the selection on a candidate");
        assert!(w.on_key(Key::Quit));
    }
}
