//! The cost record of one chat call (`call_record`): tokens times the endpoint's prices,
//! exact in `Usd`. A call without usage or without a price is flagged and gets no cost,
//! never a cost of zero.

use arbiter_core::cost::CallRecord;
use arbiter_core::ids::CandidateId;
use arbiter_core::money::Usd;

use crate::types::{Endpoint, Usage};

/// The flag of a call whose endpoint has no input or output price.
pub const UNPRICED: &str = "unpriced";
/// The flag of a call whose provider reported no usage.
pub const USAGE_UNAVAILABLE: &str = "usage_unavailable";
/// The usage was read from files the agent itself wrote (villani-code's debug trace): what it
/// says it used, as a CLI's own cost figure is what it says it cost.
pub const USAGE_FROM_AGENT_TRACE: &str = "usage_from_agent_trace";

/// The record of one call to `endpoint` made for `role` (and `candidate`, if any).
///
/// Cost = input tokens × input price + output tokens × output price, per million tokens.
/// Cached tokens are part of the input tokens and priced as input; they are reported
/// apart in `cached_tokens`. The backend is the endpoint's name.
pub fn call_record(
    role: &str,
    endpoint: &Endpoint,
    candidate: Option<CandidateId>,
    usage: Option<&Usage>,
) -> CallRecord {
    let mut flags = Vec::new();
    if usage.is_none() {
        flags.push(USAGE_UNAVAILABLE.to_string());
    }
    if endpoint.input_price.is_none() || endpoint.output_price.is_none() {
        flags.push(UNPRICED.to_string());
    }
    let cost = match (usage, endpoint.input_price, endpoint.output_price) {
        (Some(u), Some(input), Some(output)) => {
            Some(Usd::per_million_tokens(input, u.input_tokens) + Usd::per_million_tokens(output, u.output_tokens))
        }
        _ => None,
    };
    CallRecord {
        role: role.to_string(),
        backend: Some(endpoint.name.clone()),
        model: Some(endpoint.model.clone()),
        candidate,
        input_tokens: usage.map(|u| u.input_tokens),
        output_tokens: usage.map(|u| u.output_tokens),
        cached_tokens: usage.map(|u| u.cached_tokens),
        cost,
        flags,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Provider;

    fn usd(s: &str) -> Usd {
        Usd::parse(s).unwrap()
    }

    #[test]
    fn priced_calls_cost_exactly() {
        let e = Endpoint::new("e", Provider::OpenAi, "m").with_prices(usd("0.15"), usd("0.6"));
        let u = Usage { input_tokens: 1234, output_tokens: 567, cached_tokens: 1000 };
        let r = call_record("judge", &e, Some(CandidateId::from_index(2)), Some(&u));
        // 1234 × 0.15 / 1e6 + 567 × 0.6 / 1e6 = 0.0001851 + 0.0003402
        assert_eq!(r.cost.map(Usd::decimal).as_deref(), Some("0.0005253"));
        assert_eq!(r.cached_tokens, Some(1000));
        assert!(r.flags.is_empty());
        assert_eq!(r.candidate.as_ref().map(CandidateId::as_str), Some("c03"));
        assert_eq!(r.backend.as_deref(), Some("e"));
    }

    #[test]
    fn missing_price_or_usage_is_flagged_not_zero() {
        let mut e = Endpoint::new("e", Provider::Anthropic, "m");
        e.input_price = Some(usd("3"));
        let u = Usage { input_tokens: 10, output_tokens: 10, cached_tokens: 0 };
        let r = call_record("coding", &e, None, Some(&u));
        assert_eq!((r.cost, r.flags.clone()), (None, vec![UNPRICED.to_string()]));
        let e = e.with_prices(usd("3"), usd("15"));
        let r = call_record("coding", &e, None, None);
        assert_eq!((r.cost, r.flags), (None, vec![USAGE_UNAVAILABLE.to_string()]));
        assert_eq!(r.input_tokens, None);
    }
}
