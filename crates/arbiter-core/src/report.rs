//! `final_report.md`: the run told to a person — the decision and why, each candidate's
//! evidence and why it lost, the baseline, cost, and where everything is.

use std::fmt::Write;

use crate::artifact::{Baseline, Evidence, RankingArtifact, RunState, SelectionArtifact};
use crate::cost::CostSummary;
use crate::crosstest::CellOutcome;
use crate::gate::GateVerdict;
use crate::time::human_duration;

/// Everything a report is rendered from; all of it is read back from the run directory.
pub struct ReportInput<'a> {
    pub state: &'a RunState,
    pub baseline: Option<&'a Baseline>,
    pub evidence: &'a [Evidence],
    pub ranking: &'a RankingArtifact,
    pub selection: &'a SelectionArtifact,
    pub cost: &'a CostSummary,
    /// The pairs the judge compared (empty when no judge ran).
    pub pairs: &'a [crate::pairwise::PairRecord],
    /// The cross-test matrix (`None` in runs recorded before it existed).
    pub cross_tests: Option<&'a crate::crosstest::CrossTestMatrix>,
    /// The risk reviews of the surviving candidates (empty when no reviewer is configured).
    pub reviews: &'a [crate::review::ReviewArtifact],
}

impl ReportInput<'_> {
    /// The reviews for "Risks that remain": the winner's first, then by rank.
    pub fn risks_in_order(&self) -> Vec<&crate::review::ReviewArtifact> {
        let rank = |id: &crate::ids::CandidateId| {
            let winner = self.selection.winner.as_ref() == Some(id);
            let rank = self.ranking.candidates.iter().find(|c| c.candidate_id == *id).map_or(usize::MAX, |c| c.rank);
            (!winner, rank)
        };
        let mut ordered: Vec<&crate::review::ReviewArtifact> = self.reviews.iter().collect();
        ordered.sort_by_key(|r| rank(&r.candidate_id));
        ordered
    }
}

/// One review's heading: who, and what the reviewer concluded.
pub fn review_heading(r: &crate::review::ReviewArtifact, winner: Option<&crate::ids::CandidateId>) -> String {
    let who = if winner == Some(&r.candidate_id) {
        format!("{} (the winner)", r.candidate_id)
    } else {
        r.candidate_id.to_string()
    };
    match &r.review {
        Some(v) => format!(
            "{who} — {}, confidence {:.2}{}",
            if v.likely_correct { "likely correct" } else { "likely not correct" },
            v.confidence,
            r.backend.as_ref().map(|b| format!(" ({b})")).unwrap_or_default()
        ),
        None => format!("{who} — no review: {}", r.fallback.as_deref().unwrap_or("none was obtained")),
    }
}

/// Renders `final_report.md`: every character that would drive a terminal or hide text
/// (whoever `cat`s the report) is written out, whatever part of the report quoted it.
pub fn render_markdown(r: &ReportInput<'_>) -> String {
    crate::text::visible(&markdown(r))
}

fn markdown(r: &ReportInput<'_>) -> String {
    let s = r.state;
    let mut out = String::new();
    let _ = writeln!(out, "# arbiter run {}\n", s.run_id);
    if !s.settings.verification.is_empty() {
        let loud = if s.settings.verification.starts_with("Verified") { "" } else { "**Warning:** " };
        let _ = writeln!(out, "{loud}{}.\n", s.settings.verification);
    }
    let _ = writeln!(out, "**Task:** {}\n", s.task.title());
    let _ = writeln!(out, "## Decision\n");
    let verdict = match r.selection.outcome.as_str() {
        "selected" => format!("**Winner: {}**", r.selection.winner.as_ref().map(|w| w.to_string()).unwrap_or_default()),
        "interrupted" => "**Interrupted** — no candidate was selected.".to_string(),
        _ => "**No acceptable candidate** — nothing was applied.".to_string(),
    };
    let _ = writeln!(out, "{verdict}\n");
    match &r.selection.winner {
        Some(w) => {
            let _ = writeln!(out, "### Why {w} won\n");
            let _ = writeln!(out, "{}\n", r.selection.summary);
            let _ = writeln!(out, "### Why each other candidate lost\n");
            for c in r.selection.candidates.iter().filter(|c| !c.won) {
                let _ = writeln!(out, "- **{}** ({}): {}", c.candidate_id, c.runner, c.reason);
            }
            let _ = writeln!(out);
        }
        None => {
            let _ = writeln!(out, "{}\n", r.selection.summary);
        }
    }
    if let Some(m) = &s.materialization {
        let _ = writeln!(out, "Materialization: {}\n", m.describe());
    }
    if let Some(sandbox) = &s.sandbox {
        let loud = if sandbox.filesystem { "" } else { "**Warning:** " };
        let _ = writeln!(out, "{loud}Candidates ran in: {}.\n", sandbox.describe());
    }
    if let Some(spending) = r.selection.spending.as_ref().filter(|s| s.noteworthy()) {
        let _ = writeln!(out, "Spending: {}.\n", spending.describe());
    }
    let _ = writeln!(out, "| | |\n|---|---|");
    let _ = writeln!(out, "| Status | {} |", s.status);
    let _ = writeln!(out, "| Repository | `{}` |", s.repo);
    let _ = writeln!(out, "| Base | `{}` ({}) |", short(&s.base_commit), s.base_ref);
    let _ = writeln!(out, "| Candidates | {} (parallel {}) |", s.settings.candidates, s.settings.parallel);
    let runners: Vec<String> = s.settings.runners.iter().map(|r| r.name.clone()).collect();
    let _ = writeln!(out, "| Runners | {} |", runners.join(", "));
    if let Some(done) = s.finished_at {
        let _ = writeln!(out, "| Duration | {} |", human_duration(done.millis_since(s.started_at)));
    }
    let _ = writeln!(out, "| Cost | {} |", r.cost.total.describe_cost());
    let _ = writeln!(out);

    let _ = writeln!(out, "## Task\n");
    let _ = writeln!(out, "{}\n", s.task.prompt.trim());
    if let Some(c) = &s.task.success_criteria {
        let _ = writeln!(out, "Success criteria: {}\n", c.trim());
    }

    let _ = writeln!(out, "## Baseline (verify commands on the base commit)\n");
    match r.baseline {
        None => {
            let _ = writeln!(out, "No verify commands were configured: candidates were judged on their patch alone.\n");
        }
        Some(b) if b.commands.is_empty() && b.error.is_none() => {
            let _ = writeln!(out, "No verify commands were configured: candidates were judged on their patch alone.\n");
        }
        Some(b) => {
            if let Some(e) = &b.error {
                let _ = writeln!(out, "The baseline could not run: {e}\n");
            }
            for c in &b.commands {
                let _ = writeln!(
                    out,
                    "- `{}` — {} ({})",
                    c.command,
                    if c.passed() { "passes" } else { "fails" },
                    exit_text(c.exit_code, c.timed_out)
                );
            }
            let _ = writeln!(out);
        }
    }

    let _ = writeln!(out, "## Ranking\n");
    let _ = writeln!(out, "Criteria, in order: {}.\n", r.ranking.criteria.join(" → "));
    let _ = writeln!(
        out,
        "| Rank | Candidate | Runner | Eligible | Gates | Cross-tests | Votes | Judge | Patch lines | Files |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|");
    for c in &r.ranking.candidates {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {}/{} | {} | {} | {} | {} | {} |",
            c.rank,
            c.candidate_id,
            c.runner,
            if c.eligible { "yes" } else { "no" },
            c.gates_passed,
            c.gates_total,
            c.cross_tests.map_or_else(|| "—".into(), |x| format!("{}/{}", x.passed, x.discriminating)),
            c.votes,
            c.judge.map_or_else(|| "—".into(), |j| format!("{:+} ({:.2})", j.copeland, j.strength)),
            c.patch_weight,
            c.files_changed
        );
    }
    let _ = writeln!(out);
    if let Some(m) = r.cross_tests {
        cross_test_section(&mut out, m);
    }
    if !r.pairs.is_empty() {
        let _ = writeln!(out, "## Pairwise judge\n");
        let _ = writeln!(out, "Each pair was judged in both orders; a win counts only when both orders agree.\n");
        for p in r.pairs {
            let outcome = match &p.outcome {
                crate::pairwise::PairOutcome::Win { winner, .. } => format!("{winner} wins"),
                crate::pairwise::PairOutcome::Tie { .. } => "tie".into(),
            };
            let _ = writeln!(
                out,
                "- {} vs {}: {outcome} ({} first: {}; {} first: {})",
                p.a,
                p.b,
                p.a,
                p.a_first.describe(),
                p.b,
                p.b_first.describe()
            );
        }
        let _ = writeln!(out);
    }

    let _ = writeln!(out, "## Candidates\n");
    for c in &r.ranking.candidates {
        let _ = writeln!(out, "### {} ({})\n", c.candidate_id, c.runner);
        let _ = writeln!(out, "{}\n", capitalize(&c.reason.to_string()));
        if let Some(e) = r.evidence.iter().find(|e| e.candidate_id == c.candidate_id) {
            let a = &e.agent;
            let _ = writeln!(
                out,
                "- Agent: {} after {}",
                if a.timed_out {
                    "timed out".to_string()
                } else if a.cancelled {
                    "cancelled".to_string()
                } else {
                    exit_text(a.exit_code, false)
                },
                human_duration(a.duration_ms)
            );
            if let Some(err) = &e.setup_error {
                let _ = writeln!(out, "- Preparation: {err}");
            }
            if let Some(p) = &e.patch {
                let _ = writeln!(
                    out,
                    "- Patch: {} file(s), +{} −{}{}, {} — `candidates/{}/patch.diff`",
                    p.stats.files_changed,
                    p.stats.lines_added,
                    p.stats.lines_removed,
                    if p.stats.binary_files > 0 { format!(", {} binary", p.stats.binary_files) } else { String::new() },
                    if p.empty {
                        "empty".to_string()
                    } else if p.applies_cleanly {
                        "applies cleanly".to_string()
                    } else {
                        "does NOT apply".to_string()
                    },
                    e.candidate_id
                );
            }
            if !e.protected_changes.is_empty() {
                let _ = writeln!(
                    out,
                    "- **Protected files changed:** {} (tests, CI or test configuration)",
                    e.protected_changes.join(", ")
                );
            }
            for g in &e.gates {
                let verdict = match g.verdict {
                    GateVerdict::KeptPassing => "kept passing",
                    GateVerdict::Fixed => "fixed",
                    GateVerdict::Regressed => "REGRESSED",
                    GateVerdict::StillFailing => "still failing",
                };
                let _ = writeln!(
                    out,
                    "- Gate `{}`: {verdict} ({}, {})",
                    g.outcome.command,
                    exit_text(g.outcome.exit_code, g.outcome.timed_out),
                    human_duration(g.outcome.duration_ms)
                );
            }
        }
        let _ = writeln!(out);
    }

    if !r.reviews.is_empty() {
        risks_section(&mut out, r);
    }
    let _ = writeln!(out, "## Files\n");
    let _ = writeln!(out, "- `selection.json` — the decision, with a reason for every candidate");
    let _ = writeln!(out, "- `comparisons/ranking.json` — every ranking feature of every candidate");
    let _ = writeln!(
        out,
        "- `comparisons/cross_tests.json` — the cross-test matrix; `comparisons/pairwise.json` — both verdicts of every judged pair"
    );
    let _ = writeln!(out, "- `candidates/<id>/` — patch, evidence, runner summary, transcript, agent output");
    let _ = writeln!(out, "- `runtime_events.jsonl` — every step, in order");
    let _ = writeln!(out, "- `viewer/index.html` — this report with the diffs, in a browser");
    if r.selection.winner.is_some() {
        let _ = writeln!(out, "\nApply later with `arbiter apply {}`.", s.run_id);
    }
    out
}

/// "Risks that remain": what the reviewers think could still be wrong with each surviving
/// candidate, the winner first.
fn risks_section(out: &mut String, r: &ReportInput<'_>) {
    let _ = writeln!(out, "## Risks that remain\n");
    let _ = writeln!(
        out,
        "What the reviewers (role `review`) think could still be wrong with each surviving candidate, the winner first. Reviews inform; they do not rank.\n"
    );
    for review in r.risks_in_order() {
        let _ = writeln!(out, "### {}\n", review_heading(review, r.selection.winner.as_ref()));
        let Some(v) = &review.review else { continue };
        if !v.summary.trim().is_empty() {
            let _ = writeln!(out, "{}\n", v.summary.trim());
        }
        if v.risks.is_empty() && v.evidence_gaps.is_empty() {
            let _ = writeln!(out, "- No risk named.");
        }
        for risk in &v.risks {
            let _ = writeln!(out, "- Risk: {risk}");
        }
        for gap in &v.evidence_gaps {
            let _ = writeln!(out, "- Evidence gap: {gap}");
        }
        let _ = writeln!(out);
    }
}

fn cross_test_section(out: &mut String, m: &crate::crosstest::CrossTestMatrix) {
    let _ = writeln!(out, "## Cross-tests\n");
    if !m.ran {
        let _ = writeln!(out, "Not run: {}.\n", m.skip_reason.as_deref().unwrap_or("no reason recorded"));
        return;
    }
    let _ = writeln!(
        out,
        "Test files the candidates wrote, run against the base and every surviving candidate. A test that fails on the base and passes somewhere discriminates.\n"
    );
    let _ = writeln!(out, "| Test | File | Written by | Discriminates | {} |", m.targets.join(" | "));
    let _ = writeln!(out, "|---|---|---|---|{}", "---|".repeat(m.targets.len()));
    for row in &m.tests {
        let cells: Vec<&str> = m
            .targets
            .iter()
            .map(|t| match row.outcome(t) {
                CellOutcome::Pass => "pass",
                CellOutcome::Timeout => "timeout",
                CellOutcome::Fail => "FAIL",
                CellOutcome::Missing => "—",
            })
            .collect();
        let authors: Vec<String> = row.test.authors.iter().map(|a| a.to_string()).collect();
        let _ = writeln!(
            out,
            "| {} | `{}` | {} | {} | {} |",
            row.test.id,
            row.test.path,
            authors.join(", "),
            if row.discriminating { "yes" } else { "no" },
            cells.join(" | ")
        );
    }
    let _ = writeln!(out, "\nThe matrix, commands and logs: `comparisons/cross_tests.json`.\n");
}

fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}

/// `exit 0`, `exit 2`, `timed out`, `killed`.
pub fn exit_text(code: Option<i32>, timed_out: bool) -> String {
    match (code, timed_out) {
        (_, true) => "timed out".into(),
        (Some(c), _) => format!("exit {c}"),
        (None, _) => "killed".into(),
    }
}

fn capitalize(s: &str) -> String {
    // A sentence that starts with a candidate id keeps it as it is.
    if s.split_whitespace().next().and_then(crate::ids::CandidateId::parse).is_some() {
        return s.to_string();
    }
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}
