//! `viewer/index.html`: one self-contained page (inline CSS, no script, no external URL)
//! showing the decision, the ranking, the cross-test and pairwise matrices, the candidates'
//! diffs side by side, and each candidate's evidence.
//!
//! The page is bounded by the run's patch limit: all the diff text it shows together is at
//! most `max_patch_bytes` (shared equally by every place a diff appears); a diff cut short
//! says so and where the whole patch is.

use std::fmt::Write;

use crate::crosstest::CellOutcome;
use crate::gate::GateVerdict;
use crate::ids::CandidateId;
use crate::report::{ReportInput, exit_text};
use crate::time::human_duration;

/// Escapes text for HTML element content and attribute values; control, bidirectional and
/// invisible characters are written out too (every text the viewer shows passes here).
pub fn escape(s: &str) -> String {
    let s = crate::text::visible(s);
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}\
header{background:#1d2330;color:#fff;padding:18px 28px}header h1{margin:0;font-size:20px}\
main{padding:20px 28px;max-width:1200px}section{background:#fff;border:1px solid #dde1e7;border-radius:8px;padding:14px 18px;margin:0 0 16px}\
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:5px 8px;border-bottom:1px solid #eceff3;vertical-align:top}\
.win{background:#e7f6ec}.tag{display:inline-block;border-radius:10px;padding:1px 8px;font-size:12px;font-weight:600}\
.ok{background:#d4f2dd;color:#135c2c}.bad{background:#fbdada;color:#8a1f1f}.mid{background:#eee;color:#444}\
pre{background:#0f1420;color:#d8dee9;padding:10px;border-radius:6px;overflow:auto;font-size:12.5px;max-height:520px}\
.add{color:#8fd19e}.del{color:#f19999}.hunk{color:#88b4f0}.meta{color:#b8a4e3}summary{cursor:pointer;font-weight:600}\
.side{display:grid;grid-auto-flow:column;grid-auto-columns:minmax(420px,1fr);gap:12px;overflow-x:auto}\
.side pre{max-height:720px;margin:6px 0 0}.pass{background:#d4f2dd}.fail{background:#fbdada}td.c{text-align:center}";

/// Renders the page; `patches` holds each candidate's diff text, of which at most
/// `max_diff_bytes` are shown in all.
pub fn render_html(r: &ReportInput<'_>, patches: &[(CandidateId, String)], max_diff_bytes: u64) -> String {
    let s = r.state;
    let shown_side_by_side = side_by_side_diffs(r, patches);
    let places = patches.iter().filter(|(_, d)| !d.trim().is_empty()).count()
        + if shown_side_by_side.len() < 2 { 0 } else { shown_side_by_side.len() };
    let share = usize::try_from(max_diff_bytes / places.max(1) as u64).unwrap_or(usize::MAX);
    let mut h = String::new();
    let _ = write!(
        h,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>arbiter run {}</title><style>{STYLE}</style></head><body>",
        escape(s.run_id.as_str())
    );
    let _ = write!(
        h,
        "<header><h1>arbiter run {}</h1><div>{}</div></header><main>",
        escape(s.run_id.as_str()),
        escape(&s.task.title())
    );

    let (tag_class, tag) = match r.selection.outcome.as_str() {
        "selected" => {
            ("ok", format!("winner {}", r.selection.winner.as_ref().map(|w| w.to_string()).unwrap_or_default()))
        }
        "interrupted" => ("mid", "interrupted".to_string()),
        _ => ("bad", "no acceptable candidate".to_string()),
    };
    let _ = write!(
        h,
        "<section><h2>Decision <span class=\"tag {tag_class}\">{}</span></h2><p>{}</p>",
        escape(&tag),
        escape(&r.selection.summary.to_string())
    );
    if let Some(m) = &s.materialization {
        let _ = write!(h, "<p>Materialization: {}</p>", escape(&m.describe()));
    }
    let _ = write!(
        h,
        "<table><tr><th>Status</th><td>{}</td><th>Base</th><td><code>{}</code> ({})</td></tr><tr><th>Repository</th><td><code>{}</code></td><th>Cost</th><td>{}</td></tr></table></section>",
        escape(s.status.as_str()),
        escape(&s.base_commit[..s.base_commit.len().min(12)]),
        escape(&s.base_ref),
        escape(&s.repo),
        escape(&r.cost.total.describe_cost())
    );

    let _ = write!(h, "<section><h2>Task</h2><pre>{}</pre>", escape(s.task.prompt.trim()));
    if let Some(c) = &s.task.success_criteria {
        let _ = write!(h, "<p><b>Success criteria:</b> {}</p>", escape(c));
    }
    if let Some(b) = r.baseline.filter(|b| !b.commands.is_empty()) {
        let _ = write!(h, "<h3>Baseline on the base commit</h3><table>");
        for c in &b.commands {
            let (cls, word) = if c.passed() { ("ok", "passes") } else { ("bad", "fails") };
            let _ = write!(
                h,
                "<tr><td><code>{}</code></td><td><span class=\"tag {cls}\">{word}</span> {}</td></tr>",
                escape(&c.command),
                escape(&exit_text(c.exit_code, c.timed_out))
            );
        }
        let _ = write!(h, "</table>");
    }
    let _ = write!(h, "</section>");

    let _ = write!(
        h,
        "<section><h2>Ranking</h2><p>Criteria in order: {}</p><table><tr><th>Rank</th><th>Candidate</th><th>Runner</th><th>Eligible</th><th>Gates</th><th>Votes</th><th>Patch lines</th><th>Reason</th></tr>",
        escape(&r.ranking.criteria.join(" → "))
    );
    for c in &r.ranking.candidates {
        let won = r.selection.winner.as_ref() == Some(&c.candidate_id);
        let _ = write!(
            h,
            "<tr{}><td>{}</td><td><a href=\"#{id}\">{id}</a></td><td>{}</td><td><span class=\"tag {}\">{}</span></td><td>{}/{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            if won { " class=\"win\"" } else { "" },
            c.rank,
            escape(&c.runner),
            if c.eligible { "ok" } else { "bad" },
            if c.eligible { "yes" } else { "no" },
            c.gates_passed,
            c.gates_total,
            c.votes,
            c.patch_weight,
            escape(&c.reason.to_string()),
            id = escape(c.candidate_id.as_str()),
        );
    }
    let _ = write!(h, "</table></section>");
    if let Some(m) = r.cross_tests {
        cross_test_matrix(&mut h, m);
    }
    if !r.pairs.is_empty() {
        let _ = write!(
            h,
            "<section><h2>Pairwise judge</h2><p>Each pair judged in both orders; a win counts only when both orders agree.</p><table><tr><th>Pair</th><th>A shown first</th><th>B shown first</th><th>Outcome</th></tr>"
        );
        for p in r.pairs {
            let order = |v: &crate::pairwise::OrderVerdict| escape(&v.describe());
            let outcome = match &p.outcome {
                crate::pairwise::PairOutcome::Win { winner, .. } => {
                    format!("<span class=\"tag ok\">{winner} wins</span>")
                }
                crate::pairwise::PairOutcome::Tie { .. } => "<span class=\"tag mid\">tie</span>".to_string(),
            };
            let _ = write!(
                h,
                "<tr><td>{} vs {}</td><td>{}</td><td>{}</td><td>{outcome}</td></tr>",
                p.a,
                p.b,
                order(&p.a_first),
                order(&p.b_first)
            );
        }
        let _ = write!(h, "</table></section>");
    }
    if !r.reviews.is_empty() {
        risks(&mut h, r);
    }

    side_by_side(&mut h, r, &shown_side_by_side, share);
    for c in &r.ranking.candidates {
        let _ = write!(
            h,
            "<section id=\"{id}\"><h2>{id} <small>({})</small></h2><p>{}</p>",
            escape(&c.runner),
            escape(&c.reason.to_string()),
            id = escape(c.candidate_id.as_str())
        );
        if let Some(e) = r.evidence.iter().find(|e| e.candidate_id == c.candidate_id) {
            let a = &e.agent;
            let _ = write!(
                h,
                "<p>Agent: {} after {}</p>",
                escape(&if a.timed_out {
                    "timed out".into()
                } else if a.cancelled {
                    "cancelled".into()
                } else {
                    exit_text(a.exit_code, false)
                }),
                human_duration(a.duration_ms)
            );
            if !e.protected_changes.is_empty() {
                let _ = write!(
                    h,
                    "<p><span class=\"tag bad\">protected files changed</span> {}</p>",
                    escape(&e.protected_changes.join(", "))
                );
            }
            if let Some(err) = &e.setup_error {
                let _ = write!(h, "<p><span class=\"tag bad\">preparation failed</span> {}</p>", escape(err));
            }
            if !e.gates.is_empty() {
                let _ = write!(h, "<table><tr><th>Verify command</th><th>Result</th><th>Output (tail)</th></tr>");
                for g in &e.gates {
                    let (cls, word) = match g.verdict {
                        GateVerdict::KeptPassing => ("ok", "kept passing"),
                        GateVerdict::Fixed => ("ok", "fixed"),
                        GateVerdict::Regressed => ("bad", "regressed"),
                        GateVerdict::StillFailing => ("bad", "still failing"),
                    };
                    let _ = write!(
                        h,
                        "<tr><td><code>{}</code></td><td><span class=\"tag {cls}\">{word}</span> {}</td><td><details><summary>output</summary><pre>{}</pre></details></td></tr>",
                        escape(&g.outcome.command),
                        escape(&exit_text(g.outcome.exit_code, g.outcome.timed_out)),
                        escape(&g.outcome.output_tail)
                    );
                }
                let _ = write!(h, "</table>");
            }
        }
        match patches.iter().find(|(id, _)| *id == c.candidate_id) {
            Some((_, diff)) if !diff.trim().is_empty() => {
                let _ = write!(
                    h,
                    "<details{}><summary>Diff</summary><pre>{}</pre></details>",
                    if r.selection.winner.as_ref() == Some(&c.candidate_id) { " open" } else { "" },
                    colour_diff(&c.candidate_id, diff, share)
                );
            }
            _ => {
                let _ = write!(h, "<p><i>No changes.</i></p>");
            }
        }
        let _ = write!(h, "</section>");
    }
    let _ = writeln!(h, "</main></body></html>");
    h
}

/// "Risks that remain": each surviving candidate's review, the winner first.
fn risks(h: &mut String, r: &ReportInput<'_>) {
    let _ = write!(
        h,
        "<section><h2>Risks that remain</h2><p>What the reviewers (role <code>review</code>) think could still be wrong with each surviving candidate, the winner first. Reviews inform; they do not rank.</p>"
    );
    for review in r.risks_in_order() {
        let _ = write!(h, "<h3>{}</h3>", escape(&crate::report::review_heading(review, r.selection.winner.as_ref())));
        let Some(v) = &review.review else { continue };
        if !v.summary.trim().is_empty() {
            let _ = write!(h, "<p>{}</p>", escape(v.summary.trim()));
        }
        let _ = write!(h, "<ul>");
        if v.risks.is_empty() && v.evidence_gaps.is_empty() {
            let _ = write!(h, "<li>No risk named.</li>");
        }
        for risk in &v.risks {
            let _ = write!(h, "<li><b>Risk:</b> {}</li>", escape(risk));
        }
        for gap in &v.evidence_gaps {
            let _ = write!(h, "<li><b>Evidence gap:</b> {}</li>", escape(gap));
        }
        let _ = write!(h, "</ul>");
    }
    let _ = write!(h, "</section>");
}

/// The test × tree matrix of the cross-tests, or why they did not run.
fn cross_test_matrix(h: &mut String, m: &crate::crosstest::CrossTestMatrix) {
    let _ = write!(h, "<section><h2>Cross-tests</h2>");
    if !m.ran {
        let _ = write!(
            h,
            "<p>Not run: {}.</p></section>",
            escape(m.skip_reason.as_deref().unwrap_or("no reason recorded"))
        );
        return;
    }
    let _ = write!(
        h,
        "<p>Test files the candidates wrote, run against the base and every surviving candidate. A test that fails on the base and passes somewhere discriminates.</p><table><tr><th>Test</th><th>File</th><th>Written by</th><th>Discriminates</th>"
    );
    for t in &m.targets {
        let _ = write!(h, "<th>{}</th>", escape(t));
    }
    let _ = write!(h, "</tr>");
    for row in &m.tests {
        let authors: Vec<String> = row.test.authors.iter().map(|a| a.to_string()).collect();
        let _ = write!(
            h,
            "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td><span class=\"tag {}\">{}</span></td>",
            escape(&row.test.id),
            escape(&row.test.path),
            escape(&authors.join(", ")),
            if row.discriminating { "ok" } else { "mid" },
            if row.discriminating { "yes" } else { "no" }
        );
        for t in &m.targets {
            let (class, word) = match row.outcome(t) {
                CellOutcome::Pass => ("pass", "pass"),
                CellOutcome::Timeout => ("fail", "timeout"),
                CellOutcome::Fail => ("fail", "fail"),
                CellOutcome::Missing => ("", "—"),
            };
            let _ = write!(h, "<td class=\"c {class}\">{word}</td>");
        }
        let _ = write!(h, "</tr>");
    }
    let _ = write!(h, "</table><p>Scores (discriminating tests passed): ");
    let scores: Vec<String> = m.scores.iter().map(|(c, s)| format!("{c} {}/{}", s.passed, s.discriminating)).collect();
    let _ = write!(h, "{}</p></section>", escape(&scores.join(", ")));
}

/// Every candidate's diff in its own column, in ranking order, to compare at a glance.
/// The candidates whose diffs are shown side by side, in rank order, with their diffs.
fn side_by_side_diffs<'a>(
    r: &'a ReportInput<'_>,
    patches: &'a [(CandidateId, String)],
) -> Vec<(&'a crate::selection::RankedCandidate, &'a str)> {
    r.ranking
        .candidates
        .iter()
        .filter_map(|c| {
            patches.iter().find(|(id, d)| *id == c.candidate_id && !d.trim().is_empty()).map(|(_, d)| (c, d.as_str()))
        })
        .collect()
}

fn side_by_side(
    h: &mut String,
    r: &ReportInput<'_>,
    shown: &[(&crate::selection::RankedCandidate, &str)],
    share: usize,
) {
    if shown.len() < 2 {
        return;
    }
    let _ = write!(h, "<section><h2>Diffs side by side</h2><div class=\"side\">");
    for &(c, diff) in shown {
        let won = r.selection.winner.as_ref() == Some(&c.candidate_id);
        let _ = write!(
            h,
            "<div><b>#{} {}</b> <small>({})</small> <span class=\"tag {}\">{}</span><pre>{}</pre></div>",
            c.rank,
            escape(c.candidate_id.as_str()),
            escape(&c.runner),
            if won {
                "ok"
            } else if c.eligible {
                "mid"
            } else {
                "bad"
            },
            if won {
                "winner"
            } else if c.eligible {
                "eligible"
            } else {
                "rejected"
            },
            colour_diff(&c.candidate_id, diff, share)
        );
    }
    let _ = write!(h, "</div></section>");
}

/// `diff` as coloured, escaped lines: its first `share` bytes (whole lines), and a line
/// saying how much was cut and where the whole patch is.
fn colour_diff(id: &CandidateId, diff: &str, share: usize) -> String {
    let shown = if diff.len() <= share {
        diff
    } else {
        let mut end = share;
        while !diff.is_char_boundary(end) {
            end -= 1;
        }
        diff[..end].rfind('\n').map_or("", |newline| &diff[..=newline])
    };
    let mut out = String::with_capacity(shown.len() + shown.len() / 4);
    for line in shown.lines() {
        let class = if line.starts_with("diff --git")
            || line.starts_with("index ")
            || line.starts_with("+++")
            || line.starts_with("---")
        {
            Some("meta")
        } else if line.starts_with("@@") {
            Some("hunk")
        } else if line.starts_with('+') {
            Some("add")
        } else if line.starts_with('-') {
            Some("del")
        } else {
            None
        };
        match class {
            Some(c) => {
                let _ = writeln!(out, "<span class=\"{c}\">{}</span>", escape(line));
            }
            None => {
                let _ = writeln!(out, "{}", escape(line));
            }
        }
    }
    if shown.len() < diff.len() {
        let _ = writeln!(
            out,
            "<span class=\"meta\">… cut here: {} more bytes are not shown (the page shows at most the run's max_patch_bytes of diffs in all); the patch is candidates/{}/patch.diff</span>",
            diff.len() - shown.len(),
            escape(id.as_str())
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(escape("<script>\"&'"), "&lt;script&gt;&quot;&amp;&#39;");
        let id = CandidateId::from_index(1);
        let d = colour_diff(&id, "+<b>\n-x\n", 100);
        assert!(d.contains("&lt;b&gt;") && d.contains("class=\"add\""));
        assert!(!d.contains("cut here"), "{d}");
    }

    #[test]
    fn a_diff_over_its_share_is_cut_at_a_line_and_says_so() {
        let id = CandidateId::from_index(1);
        let diff = format!("+{}\n+é{}\n", "a".repeat(10), "b".repeat(1000));
        let d = colour_diff(&id, &diff, 20);
        assert!(d.contains("aaaaaaaaaa") && !d.contains("bbb"), "{d}");
        assert!(d.contains("1004 more bytes are not shown") && d.contains("candidates/c02/patch.diff"), "{d}");
    }
}
