//! Usage and cost accounting: one record per model or agent call, summed by role, backend,
//! model and candidate. A call without a price or without usage is flagged and never
//! counted as zero: the total then says it is incomplete.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ids::CandidateId;
use crate::money::Usd;

/// One call (an LLM request, or an agent run that reports its usage as a whole).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct CallRecord {
    pub role: String,
    pub backend: Option<String>,
    pub model: Option<String>,
    pub candidate: Option<CandidateId>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cached_tokens: Option<u64>,
    /// `None` when the price or the usage is unknown (see `flags`).
    pub cost: Option<Usd>,
    /// `unpriced`, `usage_unavailable`.
    pub flags: Vec<String>,
}

/// Totals of one bucket.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct CostBucket {
    pub calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_tokens: u64,
    /// The sum of the known costs.
    pub known_cost: Usd,
    pub unpriced_calls: u64,
    pub usage_unavailable_calls: u64,
    /// Calls whose cost is unknown (no usage, or no price, or both).
    #[serde(default)]
    pub uncosted_calls: u64,
}

impl CostBucket {
    fn add(&mut self, r: &CallRecord) {
        self.calls += 1;
        self.input_tokens += r.input_tokens.unwrap_or(0);
        self.output_tokens += r.output_tokens.unwrap_or(0);
        self.cached_tokens += r.cached_tokens.unwrap_or(0);
        match r.cost {
            Some(c) => self.known_cost = self.known_cost + c,
            None => self.uncosted_calls += 1,
        }
        if r.flags.iter().any(|f| f == "unpriced") {
            self.unpriced_calls += 1;
        }
        if r.flags.iter().any(|f| f == "usage_unavailable") {
            self.usage_unavailable_calls += 1;
        }
    }

    /// Every call had both usage and a price.
    pub fn complete(&self) -> bool {
        self.unpriced_calls == 0 && self.usage_unavailable_calls == 0
    }

    /// `$0.0123` or `$0.0123 (partial: 2 of 5 calls without cost)` or `unknown`.
    pub fn describe_cost(&self) -> String {
        let missing = self.uncosted_calls;
        if self.calls == 0 {
            "$0.00 (no calls)".into()
        } else if missing == self.calls {
            format!("unknown ({} call(s) without usage or price)", self.calls)
        } else if missing > 0 {
            format!("{} (partial: {missing} of {} call(s) without cost)", self.known_cost, self.calls)
        } else {
            self.known_cost.to_string()
        }
    }
}

/// `cost_summary.json`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct CostSummary {
    pub schema_version: u32,
    pub currency: String,
    pub total: CostBucket,
    /// True only when every call had usage and a price.
    pub complete: bool,
    pub by_role: BTreeMap<String, CostBucket>,
    pub by_backend: BTreeMap<String, CostBucket>,
    pub by_model: BTreeMap<String, CostBucket>,
    pub by_candidate: BTreeMap<String, CostBucket>,
    pub calls: Vec<CallRecord>,
}

/// Sums call records into the summary.
pub fn summarize(calls: Vec<CallRecord>) -> CostSummary {
    let mut s = CostSummary { schema_version: 1, currency: "USD".into(), ..Default::default() };
    for r in &calls {
        s.total.add(r);
        s.by_role.entry(r.role.clone()).or_default().add(r);
        s.by_backend.entry(r.backend.clone().unwrap_or_else(|| "(none)".into())).or_default().add(r);
        s.by_model.entry(r.model.clone().unwrap_or_else(|| "(unknown)".into())).or_default().add(r);
        s.by_candidate
            .entry(r.candidate.as_ref().map_or_else(|| "(run)".into(), |c| c.to_string()))
            .or_default()
            .add(r);
    }
    s.complete = s.total.complete();
    s.calls = calls;
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(cost: Option<&str>, flags: &[&str]) -> CallRecord {
        CallRecord {
            role: "coding".into(),
            backend: None,
            model: None,
            candidate: Some(CandidateId::from_index(0)),
            input_tokens: None,
            output_tokens: None,
            cached_tokens: None,
            cost: cost.and_then(Usd::parse),
            flags: flags.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn unknown_costs_are_never_zero() {
        let s = summarize(vec![call(None, &["usage_unavailable", "unpriced"])]);
        assert!(!s.complete);
        assert!(s.total.describe_cost().starts_with("unknown"));
        let s = summarize(vec![call(Some("0.5"), &[]), call(None, &["unpriced"])]);
        assert!(s.total.describe_cost().contains("partial"), "{}", s.total.describe_cost());
        let s = summarize(vec![call(None, &["unpriced"]), call(None, &["usage_unavailable"]), call(Some("1"), &[])]);
        assert_eq!(s.total.describe_cost(), "$1.00 (partial: 2 of 3 call(s) without cost)");
        let s = summarize(vec![call(Some("0.5"), &[]), call(Some("0.25"), &[])]);
        assert_eq!(s.total.describe_cost(), "$0.75");
        assert!(s.complete);
    }
}
