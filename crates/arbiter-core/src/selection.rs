//! Eligibility, votes, ranking and the decision, each with its reason.
//!
//! Eligible: a non-empty patch that applies cleanly to the base and, when verify commands
//! exist, passes every gate (no regression, every baseline failure fixed). Without verify
//! commands there is no evidence beyond the agent's own word, so the agent must also have
//! exited successfully. Eligible candidates are ordered by gates passed, then cross-tests
//! passed (the discriminating tests the candidates wrote, each candidate's own included:
//! tests that fail on the base and pass on some candidate), then votes (independent
//! candidates that produced the same normalized patch), then the pairwise judge (Copeland,
//! then Bradley–Terry), then smaller patch, then lower cost, then candidate index. The
//! decision is a pure function of these facts.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::crosstest::CrossScore;
use crate::gate::GateSummary;
use crate::ids::CandidateId;
use crate::money::Usd;
use crate::patch::PatchStats;
use crate::status::CandidateStatus;

/// What arbiter observed about one candidate, as selection needs it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CandidateFacts {
    pub id: CandidateId,
    pub index: usize,
    pub runner: String,
    pub status: CandidateStatus,
    pub agent_exit_code: Option<i32>,
    /// Why preparation failed, when it did.
    pub setup_error: Option<String>,
    pub patch: Option<PatchFacts>,
    /// `None` when the gates did not run.
    pub gates: Option<GateSummary>,
    pub cost: Option<Usd>,
    /// Protected files the patch modified or deleted, and protected configuration it added
    /// (see [`crate::protect::weakened`]).
    #[serde(default)]
    pub protected_changes: Vec<String>,
    /// Pairwise judge scores, when a judge compared this candidate.
    #[serde(default)]
    pub judge: Option<JudgeScore>,
    /// Its standing on the discriminating cross-tests, when they ran.
    #[serde(default)]
    pub cross_tests: Option<CrossScore>,
    /// Why it never started (an escalation stopped earlier, or the budget was spent).
    #[serde(default)]
    pub not_run: Option<String>,
    /// What it did that no honest candidate does: each one disqualifies it.
    #[serde(default)]
    pub violations: Vec<Violation>,
}

/// Something a candidate did that disqualifies it whatever else it achieved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Violation {
    /// Its patch holds the value of a secret arbiter knows (named by where it comes from,
    /// never by its value).
    SecretInPatch { sources: Vec<String> },
    /// The canary test arbiter planted did not fail in its tree: it neutralised the test
    /// machinery of these verify commands.
    TamperedChecks { commands: Vec<String> },
    /// Its patch broke a limit.
    OverLimit { breach: crate::limits::LimitBreach },
    /// It changed the test machinery (`crate::test_machinery`) in a way the gates cannot put
    /// back as the base has it.
    UnrestorableMachinery { path: crate::text::Untrusted, why: crate::text::Untrusted },
}

impl Violation {
    pub fn describe(&self) -> String {
        match self {
            Violation::SecretInPatch { sources } => format!(
                "its patch contains a secret ({}); the value is redacted from every artifact and the patch is never applied",
                sources.join(", ")
            ),
            Violation::TamperedChecks { commands } => format!(
                "it tampered with the checks: a test arbiter planted that must fail passed under it ({})",
                commands.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ")
            ),
            Violation::OverLimit { breach } => breach.describe(),
            Violation::UnrestorableMachinery { why, .. } => {
                format!("it changed how the tests run in a way the gates cannot undo: {why}")
            }
        }
    }
}

/// What the pairwise judge made of a candidate (both orders per pair; see `pairwise`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct JudgeScore {
    /// Wins minus losses.
    pub copeland: i64,
    /// Bradley–Terry strength (1.0 is average).
    #[cfg_attr(feature = "arbitrary", proptest(strategy = "crate::arbitrary::finite_f64()"))]
    pub strength: f64,
}

/// What the task allows, as selection needs it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    /// Verify commands exist: the gates decide.
    pub has_verify: bool,
    /// The task explicitly allows changing tests and other protected files.
    pub allow_test_changes: bool,
}

/// The captured patch of a candidate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PatchFacts {
    pub stats: PatchStats,
    /// `None` for an empty patch.
    pub normalized_hash: Option<String>,
    pub applies_cleanly: bool,
    pub apply_check_error: Option<String>,
}

/// Why a candidate cannot win.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(tag = "code", rename_all = "snake_case")]
pub enum Rejection {
    SetupFailed {
        detail: String,
    },
    Cancelled,
    NoPatchCaptured,
    EmptyPatch,
    /// The agent stopped (timed out, hit a limit, failed or crashed) before it changed
    /// anything.
    StoppedEmpty {
        status: CandidateStatus,
        exit_code: Option<i32>,
    },
    PatchDoesNotApply {
        detail: String,
    },
    GatesFailed {
        regressed: usize,
        still_failing: usize,
        summary: String,
    },
    GatesNotRun,
    AgentFailed {
        status: CandidateStatus,
        exit_code: Option<i32>,
    },
    ProtectedChanged {
        paths: Vec<String>,
    },
    NotRun {
        reason: String,
    },
    Violated {
        violation: Violation,
    },
}

impl Rejection {
    /// A sentence for reports.
    pub fn describe(&self) -> String {
        match self {
            Rejection::SetupFailed { detail } => format!("preparation failed: {detail}"),
            Rejection::Cancelled => "the run was interrupted before it finished".into(),
            Rejection::NoPatchCaptured => "no patch could be captured".into(),
            Rejection::EmptyPatch => "it changed nothing (empty patch)".into(),
            Rejection::StoppedEmpty { status, exit_code } => match (status, exit_code) {
                (CandidateStatus::TimedOut, _) => "the agent timed out before it changed anything".into(),
                (CandidateStatus::LimitReached, _) => "the agent hit a limit before it changed anything".into(),
                (_, Some(code)) => format!("the agent exited with code {code} without changing anything"),
                _ => "the agent crashed (it was killed by a signal) without changing anything".into(),
            },
            Rejection::PatchDoesNotApply { detail } => {
                format!("its patch does not apply cleanly to the base: {detail}")
            }
            Rejection::GatesFailed { regressed, still_failing, summary } => {
                let mut parts = Vec::new();
                if *regressed > 0 {
                    parts.push(format!("broke {regressed} verify command(s) that passed on the base"));
                }
                if *still_failing > 0 {
                    parts.push(format!("{still_failing} verify command(s) that failed on the base still fail"));
                }
                format!("gates failed: {} ({summary})", parts.join(" and "))
            }
            Rejection::GatesNotRun => "its verify commands did not run".into(),
            Rejection::NotRun { reason } => format!("not run: {reason}"),
            Rejection::Violated { violation } => violation.describe(),
            Rejection::ProtectedChanged { paths } => format!(
                "it changed protected files ({}): it modified or deleted tests or configuration, or added configuration of how the tests run; its gates ran on the base's versions, without the added configuration; pass --allow-test-changes if the task requires changing them",
                paths.join(", ")
            ),
            Rejection::AgentFailed { status, exit_code } => match (status, exit_code) {
                (CandidateStatus::TimedOut, _) => {
                    "the agent timed out and no verify command can vouch for its patch".into()
                }
                (CandidateStatus::LimitReached, _) => {
                    "the agent hit a limit before finishing and no verify command can vouch for its patch".into()
                }
                (_, Some(code)) => {
                    format!("the agent exited with code {code} and no verify command can vouch for its patch")
                }
                _ => "the agent failed and no verify command can vouch for its patch".into(),
            },
        }
    }
}

/// One candidate's place in the ranking, with every feature that decided it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct RankedCandidate {
    pub candidate_id: CandidateId,
    pub rank: usize,
    pub index: usize,
    pub runner: String,
    pub status: CandidateStatus,
    pub eligible: bool,
    pub rejection: Option<Rejection>,
    pub gates_passed: usize,
    pub gates_total: usize,
    pub votes: usize,
    pub normalized_hash: Option<String>,
    pub patch_weight: usize,
    pub files_changed: usize,
    pub cost: Option<Usd>,
    pub judge: Option<JudgeScore>,
    pub cross_tests: Option<CrossScore>,
    /// Why it won, or why it lost (it quotes what candidates chose: file names, tests).
    pub reason: crate::text::Untrusted,
}

/// Candidates that produced the same normalized patch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct AgreementGroup {
    pub normalized_hash: String,
    pub candidates: Vec<CandidateId>,
}

/// The outcome of selection.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub ranking: Vec<RankedCandidate>,
    pub winner: Option<CandidateId>,
    pub groups: Vec<AgreementGroup>,
    /// One sentence: why the winner won, or why there is none.
    pub summary: crate::text::Untrusted,
}

/// Groups non-empty patches by normalized hash, largest group first.
pub fn agreement(candidates: &[CandidateFacts]) -> Vec<AgreementGroup> {
    let mut by_hash: BTreeMap<&str, Vec<CandidateId>> = BTreeMap::new();
    for c in candidates {
        if let Some(hash) = c.patch.as_ref().and_then(|p| p.normalized_hash.as_deref()) {
            by_hash.entry(hash).or_default().push(c.id.clone());
        }
    }
    let mut groups: Vec<AgreementGroup> = by_hash
        .into_iter()
        .map(|(h, candidates)| AgreementGroup { normalized_hash: h.to_string(), candidates })
        .collect();
    groups.sort_by(|a, b| b.candidates.len().cmp(&a.candidates.len()).then_with(|| a.candidates.cmp(&b.candidates)));
    groups
}

/// Why `c` cannot win, or `None` when it is eligible.
pub fn rejection(c: &CandidateFacts, policy: Policy) -> Option<Rejection> {
    if let Some(reason) = &c.not_run {
        return Some(Rejection::NotRun { reason: reason.clone() });
    }
    if let Some(detail) = &c.setup_error {
        return Some(Rejection::SetupFailed { detail: detail.clone() });
    }
    if c.status == CandidateStatus::Cancelled {
        return Some(Rejection::Cancelled);
    }
    if let Some(violation) = c.violations.first() {
        return Some(Rejection::Violated { violation: violation.clone() });
    }
    let Some(patch) = &c.patch else {
        return Some(Rejection::NoPatchCaptured);
    };
    if patch.normalized_hash.is_none() {
        let stopped = matches!(
            c.status,
            CandidateStatus::TimedOut | CandidateStatus::LimitReached | CandidateStatus::AgentFailed
        ) || c.agent_exit_code.is_some_and(|code| code != 0);
        return Some(if stopped {
            Rejection::StoppedEmpty { status: c.status, exit_code: c.agent_exit_code }
        } else {
            Rejection::EmptyPatch
        });
    }
    if !patch.applies_cleanly {
        return Some(Rejection::PatchDoesNotApply {
            detail: patch.apply_check_error.clone().unwrap_or_else(|| "git apply --check failed".into()),
        });
    }
    if !c.protected_changes.is_empty() && !policy.allow_test_changes {
        return Some(Rejection::ProtectedChanged { paths: c.protected_changes.clone() });
    }
    if policy.has_verify {
        match &c.gates {
            None => return Some(Rejection::GatesNotRun),
            Some(g) if !g.all_passed => {
                return Some(Rejection::GatesFailed {
                    regressed: g.regressed,
                    still_failing: g.still_failing,
                    summary: g.describe(),
                });
            }
            Some(_) => {}
        }
    } else if c.status != CandidateStatus::Finished || c.agent_exit_code != Some(0) {
        return Some(Rejection::AgentFailed { status: c.status, exit_code: c.agent_exit_code });
    }
    None
}

struct Scored<'a> {
    facts: &'a CandidateFacts,
    rejection: Option<Rejection>,
    gates_passed: usize,
    votes: usize,
    weight: usize,
}

/// Which criterion separated two candidates, in ranking order.
fn compare(a: &Scored<'_>, b: &Scored<'_>) -> (Ordering, &'static str) {
    let cost_key = |s: &Scored<'_>| s.facts.cost.map(|c| (0, c.pico())).unwrap_or((1, 0));
    let judge = |s: &Scored<'_>| s.facts.judge.unwrap_or(JudgeScore { copeland: 0, strength: 1.0 });
    let cross = |s: &Scored<'_>| s.facts.cross_tests.map_or(0, |c| c.passed);
    let steps: [(Ordering, &'static str); 8] = [
        (b.gates_passed.cmp(&a.gates_passed), "gates"),
        (cross(b).cmp(&cross(a)), "cross-tests"),
        (b.votes.cmp(&a.votes), "votes"),
        (judge(b).copeland.cmp(&judge(a).copeland), "judge wins"),
        (judge(b).strength.total_cmp(&judge(a).strength), "judge strength"),
        (a.weight.cmp(&b.weight), "patch size"),
        (cost_key(a).cmp(&cost_key(b)), "cost"),
        (a.facts.index.cmp(&b.facts.index), "candidate order"),
    ];
    steps.into_iter().find(|(o, _)| *o != Ordering::Equal).unwrap_or((Ordering::Equal, "nothing"))
}

fn hash_of<'a>(s: &Scored<'a>) -> Option<&'a str> {
    s.facts.patch.as_ref().and_then(|p| p.normalized_hash.as_deref())
}

/// What the evaluation has gathered so far, beyond each candidate's own evidence.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Gathered {
    /// The tests candidates wrote were run against the survivors (or could not be).
    pub cross_tests: bool,
    /// The judges were asked (or could not be).
    pub judges: bool,
}

/// The evaluation's next step. The engine follows one loop: it gathers what [`next`] asks
/// for, records it in the facts, and asks again, until the evidence is complete and the
/// run is decided — once, by [`decide`].
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    /// Run the tests candidates wrote against these eligible candidates, best first.
    CrossTests { survivors: Vec<CandidateId> },
    /// Ask the judges about these eligible candidates, best first: the evidence so far
    /// cannot separate the top two.
    Judge { eligible: Vec<RankedCandidate> },
    /// Nothing more can separate the candidates. `judge_skipped`: why judging was not
    /// needed, when the evaluation got that far without asking.
    Done { decision: Decision, judge_skipped: Option<String> },
}

/// The next step of the evaluation of `candidates` (see [`Next`]).
pub fn next(candidates: &[CandidateFacts], policy: Policy, gathered: Gathered) -> Next {
    let decision = decide(candidates, policy);
    let eligible: Vec<&RankedCandidate> = decision.ranking.iter().filter(|r| r.eligible).collect();
    if !gathered.cross_tests {
        return Next::CrossTests { survivors: eligible.iter().map(|r| r.candidate_id.clone()).collect() };
    }
    if !gathered.judges {
        let judge_skipped = judging_needless(&eligible);
        if judge_skipped.is_none() {
            return Next::Judge { eligible: eligible.into_iter().cloned().collect() };
        }
        return Next::Done { decision, judge_skipped };
    }
    Next::Done { decision, judge_skipped: None }
}

/// Why the judges have nothing to add, if so: fewer than two eligible candidates, one patch
/// among them, or the top two already separated by gates, cross-tests or votes.
fn judging_needless(eligible: &[&RankedCandidate]) -> Option<String> {
    let cross_passed = |r: &RankedCandidate| r.cross_tests.map_or(0, |c| c.passed);
    if eligible.len() < 2 {
        Some("fewer than two eligible candidates".to_string())
    } else if eligible.iter().all(|r| r.normalized_hash == eligible[0].normalized_hash) {
        Some("every eligible candidate made the same patch".to_string())
    } else if eligible[0].gates_passed != eligible[1].gates_passed
        || cross_passed(eligible[0]) != cross_passed(eligible[1])
        || eligible[0].votes != eligible[1].votes
    {
        Some(format!(
            "the evidence already separates {} and {} (gates, cross-tests or votes)",
            eligible[0].candidate_id, eligible[1].candidate_id
        ))
    } else {
        None
    }
}

/// Decides the run: eligibility, ranking, winner and reasons.
pub fn decide(candidates: &[CandidateFacts], policy: Policy) -> Decision {
    let has_verify = policy.has_verify;
    let groups = agreement(candidates);
    let votes_of = |hash: Option<&str>| -> usize {
        hash.and_then(|h| groups.iter().find(|g| g.normalized_hash == h)).map_or(0, |g| g.candidates.len())
    };
    let mut scored: Vec<Scored<'_>> = candidates
        .iter()
        .map(|facts| {
            let hash = facts.patch.as_ref().and_then(|p| p.normalized_hash.as_deref());
            Scored {
                facts,
                rejection: rejection(facts, policy),
                gates_passed: facts.gates.as_ref().map_or(0, |g| g.passed),
                votes: votes_of(hash),
                weight: facts.patch.as_ref().map_or(0, |p| p.stats.weight()),
            }
        })
        .collect();
    scored.sort_by(|a, b| a.rejection.is_some().cmp(&b.rejection.is_some()).then_with(|| compare(a, b).0));

    let winner_idx = scored.first().filter(|s| s.rejection.is_none()).map(|_| 0);
    let mut ranking = Vec::with_capacity(scored.len());
    for (pos, s) in scored.iter().enumerate() {
        let reason = match (&s.rejection, winner_idx) {
            (Some(r), _) => format!("rejected: {}", r.describe()),
            (None, Some(0)) if pos == 0 => {
                // Compare with the best eligible candidate that made a different patch:
                // its identical twins share its votes and say nothing about why it won.
                let runner_up = scored[1..].iter().find(|n| n.rejection.is_none() && hash_of(n) != hash_of(s));
                win_reason(s, runner_up, has_verify)
            }
            (None, _) => {
                let same_patch = hash_of(s).is_some() && hash_of(s) == hash_of(&scored[0]);
                if same_patch {
                    format!("eligible; made the same patch as {}, which comes first", scored[0].facts.id)
                } else {
                    let (_, why) = compare(&scored[0], s);
                    loss_reason(s, &scored[0], why)
                }
            }
        };
        ranking.push(RankedCandidate {
            candidate_id: s.facts.id.clone(),
            rank: pos + 1,
            index: s.facts.index,
            runner: s.facts.runner.clone(),
            status: s.facts.status,
            eligible: s.rejection.is_none(),
            rejection: s.rejection.clone(),
            gates_passed: s.gates_passed,
            gates_total: s.facts.gates.as_ref().map_or(0, |g| g.total),
            votes: s.votes,
            normalized_hash: s.facts.patch.as_ref().and_then(|p| p.normalized_hash.clone()),
            patch_weight: s.weight,
            files_changed: s.facts.patch.as_ref().map_or(0, |p| p.stats.files_changed),
            cost: s.facts.cost,
            judge: s.facts.judge,
            cross_tests: s.facts.cross_tests,
            reason: reason.into(),
        });
    }
    let winner = winner_idx.map(|i| scored[i].facts.id.clone());
    let summary = match &winner {
        Some(_) => ranking[0].reason.clone(),
        None if candidates.is_empty() => "no candidate ran".into(),
        None => format!(
            "no candidate is acceptable: {}",
            ranking
                .iter()
                .map(|r| format!(
                    "{} {}",
                    r.candidate_id,
                    r.rejection.as_ref().map(Rejection::describe).unwrap_or_default()
                ))
                .collect::<Vec<_>>()
                .join("; ")
        )
        .into(),
    };
    Decision { ranking, winner, groups, summary }
}

fn win_reason(w: &Scored<'_>, runner_up: Option<&Scored<'_>>, has_verify: bool) -> String {
    let mut parts = Vec::new();
    match (&w.facts.gates, has_verify) {
        (Some(g), true) => parts.push(format!("passed all {} verify command(s) ({})", g.total, g.describe())),
        _ => parts.push("its agent finished and its patch applies cleanly (no verify commands were configured)".into()),
    }
    if w.votes > 1 {
        parts.push(format!("{} independent candidates produced this same patch", w.votes));
    }
    let mut undecided = false;
    let versus = match runner_up {
        None if w.votes > 1 => "no eligible candidate made a different patch; it is the first of its group".to_string(),
        None => "it is the only eligible candidate".to_string(),
        Some(r) => {
            let (_, why) = compare(w, r);
            undecided = matches!(why, "patch size" | "cost" | "candidate order");
            match why {
                "votes" => format!("it beat {} on votes ({} vs {})", r.facts.id, w.votes, r.votes),
                "cross-tests" => {
                    format!("it beat {} on cross-tests ({})", r.facts.id, cross_text(w, r))
                }
                "patch size" => {
                    format!("it beat {} on patch size ({} vs {} changed lines)", r.facts.id, w.weight, r.weight)
                }
                "cost" => format!("it beat {} on cost", r.facts.id),
                "judge wins" => format!(
                    "the pairwise judge preferred it over {} in both orders (wins minus losses {} vs {})",
                    r.facts.id,
                    w.facts.judge.map_or(0, |j| j.copeland),
                    r.facts.judge.map_or(0, |j| j.copeland)
                ),
                "candidate order" => format!("it tied with {} on every criterion and comes first", r.facts.id),
                other => format!("it beat {} on {other}", r.facts.id),
            }
        }
    };
    parts.push(versus);
    if undecided {
        parts.push(UNDECIDED.into());
    }
    format!("{} won: {}", w.facts.id, parts.join("; "))
}

/// Said of a winner that only a tie-break chose: the evidence did not tell the candidates
/// apart, and how to get a decision next time.
pub const UNDECIDED: &str = "the evidence could not tell them apart (the same gates and cross-tests, no votes, no judge), so this is a tie-break, not a verdict: configure a judge (a backend with the selection role: `arbiter backend add NAME … --roles selection`, or `[roles] selection = [\"NAME\"]` in .arbiter/config.toml) or give the task verify commands that test the behaviour";

/// `passed 1 vs 0 of 1 discriminating cross-test(s)`.
fn cross_text(first: &Scored<'_>, second: &Scored<'_>) -> String {
    let (a, b) = (first.facts.cross_tests.unwrap_or_default(), second.facts.cross_tests.unwrap_or_default());
    format!(
        "passed {} vs {} of {} discriminating cross-test(s)",
        a.passed,
        b.passed,
        a.discriminating.max(b.discriminating)
    )
}

fn loss_reason(l: &Scored<'_>, w: &Scored<'_>, why: &str) -> String {
    match why {
        "cross-tests" => format!(
            "eligible, lost to {} on cross-tests ({}): it fails tests the candidates wrote for behaviour the base lacks",
            w.facts.id,
            cross_text(l, w)
        ),
        "votes" => format!("eligible, lost to {} on votes ({} vs {})", w.facts.id, l.votes, w.votes),
        "patch size" => {
            format!("eligible, lost to {} on patch size ({} vs {} changed lines)", w.facts.id, l.weight, w.weight)
        }
        "cost" => format!("eligible, lost to {} on cost", w.facts.id),
        "judge wins" => format!("eligible, lost to {} on pairwise judge wins", w.facts.id),
        "judge strength" => format!("eligible, lost to {} on judge strength (Bradley–Terry)", w.facts.id),
        "candidate order" => {
            format!("eligible, tied with {} on every criterion; {} comes first", w.facts.id, w.facts.id)
        }
        other => format!("eligible, lost to {} on {other}", w.facts.id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::GateSummary;

    fn facts(i: usize, hash: Option<&str>, lines: usize, gates_ok: Option<bool>) -> CandidateFacts {
        CandidateFacts {
            id: CandidateId::from_index(i),
            index: i,
            runner: "command".into(),
            status: CandidateStatus::Finished,
            agent_exit_code: Some(0),
            setup_error: None,
            patch: Some(PatchFacts {
                stats: PatchStats { files_changed: 1, lines_added: lines, ..Default::default() },
                normalized_hash: hash.map(str::to_string),
                applies_cleanly: true,
                apply_check_error: None,
            }),
            gates: gates_ok.map(|ok| GateSummary {
                total: 1,
                passed: ok as usize,
                base_failing: 1,
                fixed: ok as usize,
                still_failing: (!ok) as usize,
                all_passed: ok,
                ..Default::default()
            }),
            cost: None,
            protected_changes: Vec::new(),
            judge: None,
            cross_tests: None,
            not_run: None,
            violations: Vec::new(),
        }
    }

    #[test]
    fn judge_wins_break_ties_after_votes_but_never_rescue_a_failed_gate() {
        let mut a = facts(0, Some("a"), 2, Some(true));
        let mut b = facts(1, Some("b"), 9, Some(true));
        let mut failing = facts(2, Some("c"), 1, Some(false));
        a.judge = Some(JudgeScore { copeland: -1, strength: 0.5 });
        b.judge = Some(JudgeScore { copeland: 1, strength: 1.5 });
        failing.judge = Some(JudgeScore { copeland: 5, strength: 9.0 });
        let d = decide(&[a, b, failing], VERIFY);
        assert_eq!(d.winner, Some(CandidateId::from_index(1)));
        assert!(d.ranking[0].reason.contains("pairwise judge preferred it"), "{}", d.ranking[0].reason);
        assert!(!d.ranking.iter().find(|r| r.index == 2).unwrap().eligible);
    }

    /// The evaluation loop: cross-tests first (on the eligible candidates), the judges only
    /// where the evidence cannot separate the top two, and one decision at the end.
    #[test]
    fn the_evaluation_asks_for_cross_tests_then_judges_only_a_tie_then_decides_once() {
        let (a, b, failing) = (
            facts(0, Some("a"), 2, Some(true)),
            facts(1, Some("b"), 9, Some(true)),
            facts(2, Some("c"), 1, Some(false)),
        );
        let mut all = vec![a, b, failing];
        let first = next(&all, VERIFY, Gathered::default());
        let ids = |v: &[usize]| v.iter().map(|i| CandidateId::from_index(*i)).collect::<Vec<_>>();
        assert_eq!(first, Next::CrossTests { survivors: ids(&[0, 1]) });
        let tied = Gathered { cross_tests: true, judges: false };
        let Next::Judge { eligible } = next(&all, VERIFY, tied) else {
            panic!("a tie of two patches goes to the judges")
        };
        assert_eq!(eligible.iter().map(|r| r.candidate_id.clone()).collect::<Vec<_>>(), ids(&[0, 1]));
        all[1].judge = Some(JudgeScore { copeland: 1, strength: 1.5 });
        all[0].judge = Some(JudgeScore { copeland: -1, strength: 0.5 });
        let Next::Done { decision, judge_skipped } = next(&all, VERIFY, Gathered { cross_tests: true, judges: true })
        else {
            panic!("judged: decided")
        };
        assert_eq!((decision.winner, judge_skipped), (Some(CandidateId::from_index(1)), None));

        // Cross-tests separate them: no judge is asked, and the decision says why.
        let mut separated = vec![facts(0, Some("x"), 2, Some(true)), facts(1, Some("y"), 2, Some(true))];
        separated[1].cross_tests = Some(crate::crosstest::CrossScore { passed: 1, discriminating: 1 });
        separated[0].cross_tests = Some(crate::crosstest::CrossScore { passed: 0, discriminating: 1 });
        let Next::Done { decision, judge_skipped } = next(&separated, VERIFY, tied) else {
            panic!("cross-tests decide")
        };
        assert_eq!(decision.winner, Some(CandidateId::from_index(1)));
        assert!(judge_skipped.unwrap().contains("already separates c02 and c01"));
        let alone = vec![facts(0, Some("x"), 2, Some(true))];
        let Next::Done { judge_skipped, .. } = next(&alone, VERIFY, tied) else { panic!("one candidate") };
        assert_eq!(judge_skipped.as_deref(), Some("fewer than two eligible candidates"));
    }

    const VERIFY: Policy = Policy { has_verify: true, allow_test_changes: false };
    const NO_VERIFY: Policy = Policy { has_verify: false, allow_test_changes: false };

    #[test]
    fn weakening_tests_is_rejected_unless_allowed() {
        let mut cheat = facts(0, Some("cheat"), 1, Some(true));
        cheat.protected_changes = vec!["test_calc.py".into()];
        let d = decide(&[cheat.clone(), facts(1, Some("fix"), 5, Some(true))], VERIFY);
        assert_eq!(d.winner, Some(CandidateId::from_index(1)));
        let r = d.ranking.iter().find(|r| r.index == 0).unwrap();
        assert!(matches!(r.rejection, Some(Rejection::ProtectedChanged { .. })), "{r:?}");
        assert!(r.reason.contains("test_calc.py") && r.reason.contains("--allow-test-changes"));
        let allowed = Policy { has_verify: true, allow_test_changes: true };
        assert_eq!(
            decide(&[cheat, facts(1, Some("fix"), 5, Some(true))], allowed).winner,
            Some(CandidateId::from_index(0))
        );
    }

    #[test]
    fn fixer_wins_others_rejected_with_reasons() {
        let d = decide(
            &[
                facts(0, Some("h1"), 3, Some(false)),
                facts(1, Some("h2"), 2, Some(true)),
                facts(2, None, 0, Some(false)),
            ],
            VERIFY,
        );
        assert_eq!(d.winner, Some(CandidateId::from_index(1)));
        assert!(d.ranking[0].reason.contains("passed all 1 verify command"));
        let c1 = d.ranking.iter().find(|r| r.index == 0).unwrap();
        assert!(matches!(c1.rejection, Some(Rejection::GatesFailed { .. })));
        let c3 = d.ranking.iter().find(|r| r.index == 2).unwrap();
        assert_eq!(c3.rejection, Some(Rejection::EmptyPatch));
    }

    #[test]
    fn identical_patches_vote() {
        let d = decide(
            &[
                facts(0, Some("solo"), 1, Some(true)),
                facts(1, Some("pair"), 5, Some(true)),
                facts(2, Some("pair"), 5, Some(true)),
            ],
            VERIFY,
        );
        assert_eq!(d.winner, Some(CandidateId::from_index(1)));
        assert_eq!(d.ranking[0].votes, 2);
        assert!(d.ranking[0].reason.contains("beat c01 on votes (2 vs 1)"), "{}", d.ranking[0].reason);
        assert_eq!(d.groups[0].candidates.len(), 2);
    }

    #[test]
    fn an_agent_that_stopped_before_changing_anything_is_said_to_have_stopped() {
        let mut timed_out = facts(0, None, 0, None);
        timed_out.status = CandidateStatus::TimedOut;
        timed_out.agent_exit_code = None;
        let mut crashed = facts(1, None, 0, None);
        crashed.status = CandidateStatus::AgentFailed;
        crashed.agent_exit_code = None;
        let mut exited = facts(2, None, 0, None);
        exited.status = CandidateStatus::AgentFailed;
        exited.agent_exit_code = Some(3);
        let idle = facts(3, None, 0, None);
        let d = decide(&[timed_out, crashed, exited, idle], VERIFY);
        let reason = |i: usize| d.ranking.iter().find(|r| r.index == i).unwrap().reason.clone();
        assert_eq!(reason(0), "rejected: the agent timed out before it changed anything");
        assert_eq!(reason(1), "rejected: the agent crashed (it was killed by a signal) without changing anything");
        assert_eq!(reason(2), "rejected: the agent exited with code 3 without changing anything");
        assert_eq!(reason(3), "rejected: it changed nothing (empty patch)");
    }

    #[test]
    fn smaller_patch_breaks_ties_then_index() {
        let d = decide(&[facts(0, Some("a"), 9, Some(true)), facts(1, Some("b"), 2, Some(true))], VERIFY);
        assert_eq!(d.winner, Some(CandidateId::from_index(1)));
        assert!(d.ranking[1].reason.contains("patch size"));
        // A tie-break is not a verdict, and the report says how to get one.
        assert!(
            d.summary.contains("could not tell them apart") && d.summary.contains("[roles] selection"),
            "{}",
            d.summary
        );
        let d = decide(&[facts(0, Some("a"), 2, Some(true)), facts(1, Some("b"), 2, Some(true))], VERIFY);
        assert_eq!(d.winner, Some(CandidateId::from_index(0)));
        assert!(d.summary.contains(UNDECIDED));
        // Votes decide: no such note.
        let d = decide(
            &[
                facts(0, Some("a"), 9, Some(true)),
                facts(1, Some("b"), 2, Some(true)),
                facts(2, Some("a"), 9, Some(true)),
            ],
            VERIFY,
        );
        assert!(!d.summary.contains(UNDECIDED), "{}", d.summary);
    }

    #[test]
    fn cross_tests_rank_after_gates_and_before_votes() {
        use crate::crosstest::CrossScore;
        // c01 and c03 made the same overfit patch (2 votes); c02 passes the test c02 wrote.
        let mut overfit_a = facts(0, Some("overfit"), 1, Some(true));
        let mut real = facts(1, Some("real"), 6, Some(true));
        let mut overfit_b = facts(2, Some("overfit"), 1, Some(true));
        overfit_a.cross_tests = Some(CrossScore { passed: 0, discriminating: 1 });
        overfit_b.cross_tests = Some(CrossScore { passed: 0, discriminating: 1 });
        real.cross_tests = Some(CrossScore { passed: 1, discriminating: 1 });
        let mut failing = facts(3, Some("x"), 1, Some(false));
        failing.cross_tests = Some(CrossScore { passed: 1, discriminating: 1 });
        let d = decide(&[overfit_a, real, overfit_b, failing], VERIFY);
        assert_eq!(d.winner, Some(CandidateId::from_index(1)));
        assert!(d.summary.contains("cross-tests"), "{}", d.summary);
        let loser = d.ranking.iter().find(|r| r.candidate_id == CandidateId::from_index(0)).unwrap();
        assert!(loser.reason.contains("lost to c02 on cross-tests"), "{}", loser.reason);
        assert!(!d.ranking.iter().find(|r| r.candidate_id == CandidateId::from_index(3)).unwrap().eligible);
    }

    #[test]
    fn a_candidate_that_never_ran_says_why() {
        let mut skipped = facts(1, None, 0, None);
        skipped.patch = None;
        skipped.status = CandidateStatus::Skipped;
        skipped.not_run = Some("c01 already passed its gates (escalate)".into());
        let d = decide(&[facts(0, Some("a"), 1, Some(true)), skipped], VERIFY);
        assert_eq!(d.winner, Some(CandidateId::from_index(0)));
        assert_eq!(d.ranking[1].reason, "rejected: not run: c01 already passed its gates (escalate)");
    }

    #[test]
    fn no_eligible_candidate_explains_each() {
        let mut broken = facts(1, Some("b"), 2, Some(true));
        broken.patch.as_mut().unwrap().applies_cleanly = false;
        let d = decide(&[facts(0, None, 0, Some(false)), broken], VERIFY);
        assert_eq!(d.winner, None);
        assert!(d.summary.contains("c01") && d.summary.contains("c02"), "{}", d.summary);
        assert!(d.summary.contains("does not apply"));
    }

    #[test]
    fn without_verify_the_agent_must_succeed() {
        let mut failed = facts(0, Some("a"), 1, None);
        failed.agent_exit_code = Some(3);
        failed.status = CandidateStatus::AgentFailed;
        let d = decide(&[failed, facts(1, Some("b"), 4, None)], NO_VERIFY);
        assert_eq!(d.winner, Some(CandidateId::from_index(1)));
        assert!(d.ranking[1].reason.contains("exited with code 3"));
    }

    #[test]
    fn ranking_does_not_depend_on_input_order() {
        let a = vec![
            facts(0, Some("x"), 3, Some(true)),
            facts(1, Some("y"), 3, Some(true)),
            facts(2, Some("x"), 3, Some(true)),
        ];
        let mut b = a.clone();
        b.reverse();
        assert_eq!(decide(&a, VERIFY).winner, decide(&b, VERIFY).winner);
    }

    fn permutations(items: Vec<CandidateFacts>) -> Vec<Vec<CandidateFacts>> {
        if items.len() <= 1 {
            return vec![items];
        }
        let mut out = Vec::new();
        for i in 0..items.len() {
            let mut rest = items.clone();
            let head = rest.remove(i);
            for mut tail in permutations(rest) {
                tail.insert(0, head.clone());
                out.push(tail);
            }
        }
        out
    }

    #[test]
    fn the_whole_ranking_is_invariant_under_reordering() {
        let mut judged = facts(3, Some("d"), 4, Some(true));
        judged.judge = Some(JudgeScore { copeland: 1, strength: 1.4 });
        let base = vec![
            facts(0, Some("a"), 3, Some(true)),
            facts(1, Some("b"), 3, Some(true)),
            facts(2, Some("a"), 3, Some(true)),
            judged,
            facts(4, None, 0, Some(false)),
        ];
        let expected: Vec<CandidateId> = decide(&base, VERIFY).ranking.into_iter().map(|r| r.candidate_id).collect();
        for p in permutations(base) {
            let got: Vec<CandidateId> = decide(&p, VERIFY).ranking.into_iter().map(|r| r.candidate_id).collect();
            assert_eq!(got, expected);
        }
    }

    #[test]
    fn a_candidate_best_on_every_feature_ranks_first() {
        // The best passes every gate, has the most votes, the best judge score, the smallest
        // patch and the lowest cost, whatever its index and the others' mix of features.
        for index in 0..4 {
            let mut all = Vec::new();
            for i in 0..4 {
                let mut f = facts(i, Some(["w", "x", "y", "z"][i]), 5 + i, Some(i != 2));
                f.judge = Some(JudgeScore { copeland: -(i as i64), strength: 1.0 });
                f.cost = crate::money::Usd::parse("0.5");
                all.push(f);
            }
            let mut best = facts(index, Some("best"), 1, Some(true));
            best.judge = Some(JudgeScore { copeland: 3, strength: 2.0 });
            best.cost = crate::money::Usd::parse("0.1");
            let twin = CandidateFacts { id: CandidateId::from_index(9), index: 9, ..best.clone() };
            all[index] = best;
            all.push(twin);
            let d = decide(&all, VERIFY);
            assert_eq!(d.winner, Some(CandidateId::from_index(index)), "index {index}");
        }
    }
}
