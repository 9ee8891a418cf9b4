//! How a run spends its candidates, and which runner and backend each candidate uses.
//!
//! A *tournament* starts every candidate at once (a sliding pool) and picks the best. An
//! *escalation* runs them one at a time, the cheapest capable option first, and stops at the
//! first candidate that passes its gates: the cost-policy path. The presets map onto them:
//!
//! | strategy | runs | order | candidates by default |
//! |---|---|---|---|
//! | `tournament` | all at once | as configured (round-robin) | `candidates` |
//! | `escalate`, `balanced` | one at a time, stop at the first pass | cheapest first | one per option |
//! | `cheap` | one at a time, stop at the first pass | cheapest first | the two cheapest options |
//! | `quality` | all at once | strongest first | `candidates` |
//!
//! An *option* is one way to produce a candidate: a runner and, for the built-in agent with
//! several backends, one of them. Its price is the backend's input plus output price per
//! million tokens; options without a price come after priced ones, in configured order.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::money::Usd;

/// The strategy a run was asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    #[default]
    Tournament,
    Escalate,
    Cheap,
    Balanced,
    Quality,
}

impl Strategy {
    pub const NAMES: &'static [&'static str] = &["tournament", "escalate", "cheap", "balanced", "quality"];

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "tournament" => Self::Tournament,
            "escalate" => Self::Escalate,
            "cheap" => Self::Cheap,
            "balanced" => Self::Balanced,
            "quality" => Self::Quality,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tournament => "tournament",
            Self::Escalate => "escalate",
            Self::Cheap => "cheap",
            Self::Balanced => "balanced",
            Self::Quality => "quality",
        }
    }

    /// Candidates run one at a time, stopping at the first that passes its gates.
    pub fn escalates(self) -> bool {
        matches!(self, Self::Escalate | Self::Cheap | Self::Balanced)
    }

    /// The number of candidates when none was configured, given the number of options.
    pub fn default_candidates(self, options: usize, configured_default: u32) -> u32 {
        let options = options.max(1) as u32;
        match self {
            Self::Escalate | Self::Balanced => options,
            Self::Cheap => options.min(2),
            Self::Tournament | Self::Quality => configured_default,
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One way to produce a candidate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct CandidateOption {
    /// Index into the run's runners.
    pub runner: usize,
    /// The backend chain (empty for runners that are not model-driven by arbiter).
    pub backends: Vec<String>,
    pub input_price: Option<Usd>,
    pub output_price: Option<Usd>,
    /// `None` when not known (a runner that is not driven through a configured backend).
    pub capability: Option<u32>,
}

impl CandidateOption {
    /// Input plus output price per million tokens, when both are known.
    pub fn price(&self) -> Option<Usd> {
        Some(self.input_price? + self.output_price?)
    }

    /// The cost of `input` and `output` tokens at this option's prices, when priced.
    pub fn cost_of(&self, input: u64, output: u64) -> Option<Usd> {
        Some(Usd::per_million_tokens(self.input_price?, input) + Usd::per_million_tokens(self.output_price?, output))
    }
}

/// Options whose capability is known and below `min_capability` are left out; an unknown
/// capability is not held against an option. In configured order.
pub fn capable(options: &[CandidateOption], min_capability: u32) -> Vec<CandidateOption> {
    indexed_capable(options, min_capability).into_iter().map(|(_, o)| o.clone()).collect()
}

fn indexed_capable(options: &[CandidateOption], min_capability: u32) -> Vec<(usize, &CandidateOption)> {
    options.iter().enumerate().filter(|(_, o)| o.capability.is_none_or(|c| c >= min_capability)).collect()
}

/// Cheapest first: priced options by price (then the more capable first), then unpriced
/// ones in configured order. Options below `min_capability` are dropped.
pub fn cheapest_first(options: &[CandidateOption], min_capability: u32) -> Vec<CandidateOption> {
    let mut capable = indexed_capable(options, min_capability);
    capable.sort_by(|(ia, a), (ib, b)| match (a.price(), b.price()) {
        (Some(pa), Some(pb)) => pa.cmp(&pb).then(b.capability.cmp(&a.capability)).then(ia.cmp(ib)),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => ia.cmp(ib),
    });
    capable.into_iter().map(|(_, o)| o.clone()).collect()
}

/// Strongest first: by capability (unknown last), then the configured order. Options below
/// `min_capability` are dropped.
pub fn strongest_first(options: &[CandidateOption], min_capability: u32) -> Vec<CandidateOption> {
    let mut capable = indexed_capable(options, min_capability);
    capable.sort_by(|(ia, a), (ib, b)| b.capability.cmp(&a.capability).then(ia.cmp(ib)));
    capable.into_iter().map(|(_, o)| o.clone()).collect()
}

/// What one candidate of an escalation used, when it ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RanCost {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// `None` when some of its calls had no known cost.
    pub cost: Option<Usd>,
}

/// What running every candidate would have cost: the real cost of those that ran, and for
/// each that did not, the average tokens of those that ran at its own option's prices.
/// `None` when any part is unknown (a call without cost, no usage to average, no price).
pub fn cost_of_all(slots: &[CandidateOption], ran: &[Option<RanCost>]) -> Option<Usd> {
    let used: Vec<&RanCost> = ran.iter().flatten().collect();
    let runs = used.len() as u64;
    let mut total = Usd::ZERO;
    for (i, r) in ran.iter().enumerate() {
        total = total
            + match r {
                Some(r) => r.cost?,
                None => {
                    if runs == 0 {
                        return None;
                    }
                    let input = used.iter().map(|u| u.input_tokens).sum::<u64>() / runs;
                    let output = used.iter().map(|u| u.output_tokens).sum::<u64>() / runs;
                    slots.get(i)?.cost_of(input, output)?
                }
            };
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn option(runner: usize, price: Option<(&str, &str)>, capability: u32) -> CandidateOption {
        let capability = Some(capability);
        CandidateOption {
            runner,
            backends: vec![format!("b{runner}")],
            input_price: price.and_then(|p| Usd::parse(p.0)),
            output_price: price.and_then(|p| Usd::parse(p.1)),
            capability,
        }
    }

    #[test]
    fn cheapest_capable_first_unpriced_last() {
        let options = vec![
            option(0, None, 50),
            option(1, Some(("3", "15")), 90),
            option(2, Some(("0.1", "0.4")), 20),
            option(3, Some(("0.3", "0.2")), 40),
        ];
        let order: Vec<usize> = cheapest_first(&options, 0).iter().map(|o| o.runner).collect();
        assert_eq!(order, vec![3, 2, 1, 0], "equal price: the more capable first");
        let capable: Vec<usize> = cheapest_first(&options, 30).iter().map(|o| o.runner).collect();
        assert_eq!(capable, vec![3, 1, 0]);
        let strongest: Vec<usize> = strongest_first(&options, 0).iter().map(|o| o.runner).collect();
        assert_eq!(strongest, vec![1, 0, 3, 2]);
        let unknown = CandidateOption { capability: None, ..option(4, None, 0) };
        let with_unknown = [options.clone(), vec![unknown]].concat();
        let kept: Vec<usize> = cheapest_first(&with_unknown, 95).iter().map(|o| o.runner).collect();
        assert_eq!(kept, vec![4], "an unknown capability is not held against an option");
    }

    #[test]
    fn presets_choose_how_many_candidates() {
        assert_eq!(Strategy::Cheap.default_candidates(3, 5), 2);
        assert_eq!(Strategy::Balanced.default_candidates(3, 5), 3);
        assert_eq!(Strategy::Escalate.default_candidates(0, 5), 1);
        assert_eq!(Strategy::Quality.default_candidates(3, 5), 5);
        assert!(Strategy::Cheap.escalates() && !Strategy::Quality.escalates());
        for name in Strategy::NAMES {
            assert_eq!(Strategy::parse(name).map(|s| s.as_str()), Some(*name));
        }
    }

    #[test]
    fn the_cost_of_running_them_all_is_estimated_from_what_ran() {
        let slots = vec![option(0, Some(("1", "1")), 10), option(1, Some(("10", "10")), 50)];
        let cheap = RanCost { input_tokens: 1000, output_tokens: 1000, cost: Usd::parse("0.002") };
        // The cheap one passed; the expensive one would have used as many tokens at 10×.
        assert_eq!(cost_of_all(&slots, &[Some(cheap), None]).map(|c| c.decimal()), Some("0.022".into()));
        let unknown = RanCost { cost: None, ..cheap };
        assert_eq!(cost_of_all(&slots, &[Some(unknown), None]), None);
        let unpriced = vec![slots[0].clone(), option(1, None, 50)];
        assert_eq!(cost_of_all(&unpriced, &[Some(cheap), None]), None);
    }

    #[test]
    fn option_costs_are_exact() {
        let o = option(0, Some(("1", "2")), 0);
        assert_eq!(o.cost_of(1000, 500).map(|c| c.decimal()), Some("0.002".into()));
        assert_eq!(option(0, None, 0).cost_of(1, 1), None);
    }
}
