//! Pairwise judgements made robust to position bias, and the scores drawn from them.
//!
//! Each pair is judged twice, in both orders (A/B then B/A). A win counts only when both
//! orders name the same candidate; any disagreement — a judge that always prefers the first
//! slot, say — is a tie. From the resulting outcomes: the Copeland score (wins minus losses)
//! and a Bradley–Terry strength fitted by the minorization–maximization algorithm, ties
//! counting half a win each way. Both are pure functions of the outcomes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ids::CandidateId;

/// What one order of a comparison preferred, by slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum SlotVerdict {
    First,
    Second,
    Tie,
}

/// The outcome of a pair after both orders.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum PairOutcome {
    Win { winner: CandidateId, loser: CandidateId },
    Tie { a: CandidateId, b: CandidateId },
}

/// One order of one pair.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct OrderVerdict {
    pub first: CandidateId,
    pub second: CandidateId,
    pub preferred: SlotVerdict,
    pub rationale: String,
    pub backend: Option<String>,
    /// Why this order counts as a tie without a usable verdict.
    pub fallback: Option<String>,
}

impl OrderVerdict {
    /// `c02 (handles negatives)`, `tie`, or `tie (fallback: why)`.
    pub fn describe(&self) -> String {
        let who = match self.preferred {
            SlotVerdict::First => self.first.to_string(),
            SlotVerdict::Second => self.second.to_string(),
            SlotVerdict::Tie => "tie".to_string(),
        };
        match (&self.fallback, self.rationale.trim()) {
            (Some(f), _) => format!("{who} (fallback: {f})"),
            (None, "") => who,
            (None, why) => format!("{who} ({why})"),
        }
    }
}

/// A pair judged in both orders: `comparisons/pairwise.json` holds a list of these.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct PairRecord {
    pub a: CandidateId,
    pub b: CandidateId,
    pub a_first: OrderVerdict,
    pub b_first: OrderVerdict,
    pub outcome: PairOutcome,
}

/// Combines the verdict with `a` in the first slot and the verdict with `b` in the first
/// slot: a win only when both orders agree.
pub fn combine(a: &CandidateId, b: &CandidateId, a_first: SlotVerdict, b_first: SlotVerdict) -> PairOutcome {
    match (a_first, b_first) {
        (SlotVerdict::First, SlotVerdict::Second) => PairOutcome::Win { winner: a.clone(), loser: b.clone() },
        (SlotVerdict::Second, SlotVerdict::First) => PairOutcome::Win { winner: b.clone(), loser: a.clone() },
        _ => PairOutcome::Tie { a: a.clone(), b: b.clone() },
    }
}

/// Wins minus losses of every candidate named in `outcomes` (ties count for no one).
pub fn copeland(outcomes: &[PairOutcome]) -> BTreeMap<CandidateId, i64> {
    let mut score: BTreeMap<CandidateId, i64> = BTreeMap::new();
    for o in outcomes {
        match o {
            PairOutcome::Win { winner, loser } => {
                *score.entry(winner.clone()).or_default() += 1;
                *score.entry(loser.clone()).or_default() -= 1;
            }
            PairOutcome::Tie { a, b } => {
                score.entry(a.clone()).or_default();
                score.entry(b.clone()).or_default();
            }
        }
    }
    score
}

/// Bradley–Terry strengths (normalized to sum to the number of candidates), fitted with the
/// MM algorithm for `iterations` rounds. Ties count half a win to each side; a small prior
/// (one half-win against a virtual average opponent) keeps undefeated or winless candidates
/// finite.
pub fn bradley_terry(outcomes: &[PairOutcome], iterations: usize) -> BTreeMap<CandidateId, f64> {
    let mut ids: Vec<CandidateId> = Vec::new();
    for o in outcomes {
        let (x, y) = match o {
            PairOutcome::Win { winner, loser } => (winner, loser),
            PairOutcome::Tie { a, b } => (a, b),
        };
        for id in [x, y] {
            if !ids.contains(id) {
                ids.push(id.clone());
            }
        }
    }
    ids.sort();
    let n = ids.len();
    let index = |id: &CandidateId| ids.iter().position(|x| x == id).unwrap_or(0);
    // wins[i] and games[i][j] with ties split, plus the prior.
    let mut wins = vec![0.5_f64; n];
    let mut games = vec![vec![0.0_f64; n]; n];
    for o in outcomes {
        match o {
            PairOutcome::Win { winner, loser } => {
                let (w, l) = (index(winner), index(loser));
                wins[w] += 1.0;
                games[w][l] += 1.0;
                games[l][w] += 1.0;
            }
            PairOutcome::Tie { a, b } => {
                let (i, j) = (index(a), index(b));
                wins[i] += 0.5;
                wins[j] += 0.5;
                games[i][j] += 1.0;
                games[j][i] += 1.0;
            }
        }
    }
    let mut p = vec![1.0_f64; n];
    for _ in 0..iterations {
        let mut next = vec![0.0_f64; n];
        for i in 0..n {
            // The prior's virtual opponent has strength 1 and one game against everyone.
            let mut denom = 1.0 / (p[i] + 1.0);
            for j in 0..n {
                if i != j && games[i][j] > 0.0 {
                    denom += games[i][j] / (p[i] + p[j]);
                }
            }
            next[i] = wins[i] / denom;
        }
        let total: f64 = next.iter().sum();
        if total > 0.0 {
            for v in next.iter_mut() {
                *v *= n as f64 / total;
            }
        }
        p = next;
    }
    ids.into_iter().zip(p).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(i: usize) -> CandidateId {
        CandidateId::from_index(i)
    }

    #[test]
    fn position_bias_cancels_to_a_tie() {
        // A judge that always prefers whatever is shown first.
        let o = combine(&c(0), &c(1), SlotVerdict::First, SlotVerdict::First);
        assert_eq!(o, PairOutcome::Tie { a: c(0), b: c(1) });
        let o = combine(&c(0), &c(1), SlotVerdict::Second, SlotVerdict::First);
        assert_eq!(o, PairOutcome::Win { winner: c(1), loser: c(0) });
    }

    #[test]
    fn consistent_preference_wins_everywhere() {
        let outcomes = vec![
            combine(&c(0), &c(1), SlotVerdict::Second, SlotVerdict::First),
            combine(&c(1), &c(2), SlotVerdict::First, SlotVerdict::Second),
            combine(&c(0), &c(2), SlotVerdict::Tie, SlotVerdict::Tie),
        ];
        let cope = copeland(&outcomes);
        assert_eq!(cope[&c(1)], 2);
        assert_eq!(cope[&c(0)], -1);
        let bt = bradley_terry(&outcomes, 200);
        assert!(bt[&c(1)] > bt[&c(0)] && bt[&c(1)] > bt[&c(2)], "{bt:?}");
        assert!((bt.values().sum::<f64>() - 3.0).abs() < 1e-9);
    }

    #[test]
    fn scores_do_not_depend_on_the_order_of_outcomes() {
        let mut outcomes = vec![
            combine(&c(0), &c(1), SlotVerdict::First, SlotVerdict::Second),
            combine(&c(1), &c(2), SlotVerdict::First, SlotVerdict::Second),
            combine(&c(2), &c(3), SlotVerdict::Tie, SlotVerdict::First),
            combine(&c(0), &c(3), SlotVerdict::First, SlotVerdict::Second),
        ];
        let (cope, bt) = (copeland(&outcomes), bradley_terry(&outcomes, 300));
        for rotation in 1..outcomes.len() {
            outcomes.rotate_left(1);
            assert_eq!(copeland(&outcomes), cope, "rotation {rotation}");
            let again = bradley_terry(&outcomes, 300);
            for (id, v) in &bt {
                assert!((again[id] - v).abs() < 1e-9, "rotation {rotation}: {id}");
            }
        }
    }

    #[test]
    fn a_candidate_that_beats_everyone_ranks_first() {
        for n in 2..7 {
            let mut outcomes = Vec::new();
            for i in 0..n {
                for j in (i + 1)..n {
                    // c(n-1) beats everyone; the rest alternate.
                    let (w, l) = if j == n - 1 {
                        (j, i)
                    } else if (i + j) % 2 == 0 {
                        (i, j)
                    } else {
                        (j, i)
                    };
                    outcomes.push(PairOutcome::Win { winner: c(w), loser: c(l) });
                }
            }
            let cope = copeland(&outcomes);
            let bt = bradley_terry(&outcomes, 300);
            let best = c(n - 1);
            assert!(cope.iter().all(|(id, s)| *id == best || *s < cope[&best]), "n={n} {cope:?}");
            assert!(bt.iter().all(|(id, s)| *id == best || *s < bt[&best]), "n={n} {bt:?}");
        }
    }
}
