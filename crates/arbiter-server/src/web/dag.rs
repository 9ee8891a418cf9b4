//! A plan's DAG as an SVG drawing: one column per depth, tasks in plan order within a
//! column, each box coloured by status (and saying it in its tooltip), dependencies as
//! curves, the critical path drawn thick. Every box links to its task's page. Plans larger
//! than [`MAX_DRAWN`] tasks are not drawn (the task table lists them all).

use std::collections::BTreeMap;
use std::fmt::Write;

use arbiter_core::plan::dag::Shape;
use arbiter_core::plan::state::TaskStatus;
use maud::{Markup, html};

use super::layout::{printable, raw, task_href};

/// The most tasks drawn.
pub const MAX_DRAWN: usize = 400;

const BOX_W: usize = 168;
const BOX_H: usize = 30;
const COL_GAP: usize = 56;
const ROW_GAP: usize = 12;
const MARGIN: usize = 10;

/// One task to draw.
pub struct Node<'a> {
    pub id: &'a str,
    pub title: &'a str,
    pub status: TaskStatus,
    pub dependencies: &'a [String],
}

/// Text for SVG (XML) content and attributes: control and invisible characters shown,
/// markup escaped.
fn xml(s: &str) -> String {
    arbiter_core::viewer::escape(&printable(s))
}

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n { s.to_string() } else { format!("{}…", s.chars().take(n - 1).collect::<String>()) }
}

/// The drawing (or why there is none).
pub fn draw(plan: &str, nodes: &[Node<'_>], shape: &Shape) -> Markup {
    if nodes.is_empty() {
        return html! { p.empty { "The plan has no tasks yet." } };
    }
    if nodes.len() > MAX_DRAWN {
        return html! {
            p.muted { "The graph is drawn for plans of up to " (MAX_DRAWN) " tasks; this one has " (nodes.len()) ". The table below lists every task with its depth." }
        };
    }
    // Place each task: its column is its depth, its row the next free one in that column.
    let mut rows_used: BTreeMap<usize, usize> = BTreeMap::new();
    let mut at: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for n in nodes {
        let col = shape.depths.get(n.id).copied().unwrap_or(0);
        let row = rows_used.entry(col).or_insert(0);
        at.entry(n.id).or_insert((col, *row));
        *row += 1;
    }
    let cols = rows_used.keys().max().map_or(1, |c| c + 1);
    let rows = rows_used.values().max().copied().unwrap_or(1);
    let width = MARGIN * 2 + cols * BOX_W + cols.saturating_sub(1) * COL_GAP;
    let height = MARGIN * 2 + rows * BOX_H + rows.saturating_sub(1) * ROW_GAP;
    let x = |col: usize| MARGIN + col * (BOX_W + COL_GAP);
    let y = |row: usize| MARGIN + row * (BOX_H + ROW_GAP);
    let on_path = |a: &str, b: &str| shape.critical.windows(2).any(|w| w[0] == a && w[1] == b);

    let mut svg = String::new();
    let _ = write!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" role=\"img\" aria-labelledby=\"dag-title\"><title id=\"dag-title\">Dependency graph of plan {}: {} tasks by depth, the critical path drawn thick</title>",
        xml(plan),
        nodes.len()
    );
    for n in nodes {
        let Some(&(col, row)) = at.get(n.id) else { continue };
        for dep in n.dependencies {
            let Some(&(dcol, drow)) = at.get(dep.as_str()) else { continue };
            let (x1, y1) = (x(dcol) + BOX_W, y(drow) + BOX_H / 2);
            let (x2, y2) = (x(col), y(row) + BOX_H / 2);
            let mid = (x1 + x2) / 2;
            let class = if on_path(dep, n.id) { "edge critical" } else { "edge" };
            let _ = write!(svg, "<path class=\"{class}\" d=\"M{x1},{y1} C{mid},{y1} {mid},{y2} {x2},{y2}\"/>");
        }
    }
    for n in nodes {
        let Some(&(col, row)) = at.get(n.id) else { continue };
        let critical = shape.is_critical(n.id);
        let _ = write!(
            svg,
            "<a href=\"{href}\"><g class=\"node{crit}\"><title>{id} — {title} ({status}{on})</title><rect class=\"fill-{status}\" x=\"{bx}\" y=\"{by}\" width=\"{BOX_W}\" height=\"{BOX_H}\" rx=\"5\"/><text x=\"{tx}\" y=\"{ty}\">{label}</text></g></a>",
            href = xml(&task_href(plan, n.id)),
            crit = if critical { " critical" } else { "" },
            id = xml(n.id),
            title = xml(n.title),
            status = n.status.as_str(),
            on = if critical { ", on the critical path" } else { "" },
            bx = x(col),
            by = y(row),
            tx = x(col) + 8,
            ty = y(row) + BOX_H / 2 + 4,
            label =
                xml(&clip(&if n.title.is_empty() { n.id.to_string() } else { format!("{} · {}", n.id, n.title) }, 21)),
        );
    }
    svg.push_str("</svg>");
    html! { (raw(svg)) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbiter_core::plan::dag::shape;

    #[test]
    fn a_diamond_is_drawn_by_depth_with_its_critical_path_and_hostile_ids_escaped() {
        let deps_b = vec!["A".to_string()];
        let deps_c = vec!["A".to_string()];
        let deps_d = vec!["B".to_string(), "<C>".to_string()];
        let nodes = [
            Node { id: "A", title: "first", status: TaskStatus::Done, dependencies: &[] },
            Node { id: "B", title: "second", status: TaskStatus::Running, dependencies: &deps_b },
            Node { id: "<C>", title: "<script>alert(1)</script>", status: TaskStatus::Ready, dependencies: &deps_c },
            Node { id: "D", title: "last", status: TaskStatus::Blocked, dependencies: &deps_d },
        ];
        let edges: Vec<(&str, Vec<&str>)> =
            nodes.iter().map(|n| (n.id, n.dependencies.iter().map(String::as_str).collect())).collect();
        let s = shape(&edges, |id| id == "A");
        let svg = draw("p", &nodes, &s).into_string();
        assert_eq!(svg.matches("<rect").count(), 4);
        assert_eq!(svg.matches("<path").count(), 4);
        assert!(svg.contains("class=\"node critical\""), "{svg}");
        assert!(svg.contains("edge critical"), "{svg}");
        assert!(!svg.contains("<script>") && !svg.contains("<C>"), "{svg}");
        assert!(svg.contains("&lt;C&gt;"));
        assert!(svg.contains("fill-running"));
    }
}
