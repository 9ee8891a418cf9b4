//! Usage reported over real HTTP turns into exact cost records: sums are exact decimals,
//! an unpriced endpoint is flagged `unpriced`, a usage-less answer `usage_unavailable`, and
//! neither is counted as zero.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use arbiter_core::cost::summarize;
use arbiter_core::ids::CandidateId;
use arbiter_core::money::Usd;
use arbiter_llm::{ChatRequest, MockResponse, MockScript, Provider, Usage, call_record};
use common::{endpoint, fast_client, start};

fn usd(s: &str) -> Usd {
    Usd::parse(s).unwrap()
}

fn answer(usage: Option<Usage>) -> MockResponse {
    MockResponse { usage, omit_usage: usage.is_none(), ..MockResponse::text("ok") }
}

#[tokio::test]
async fn usage_and_costs_sum_exactly_and_flag_what_is_unknown() {
    let script = MockScript::new(vec![
        answer(Some(Usage { input_tokens: 1000, output_tokens: 200, cached_tokens: 400 })),
        answer(Some(Usage { input_tokens: 123, output_tokens: 45, cached_tokens: 0 })),
        answer(Some(Usage { input_tokens: 1000, output_tokens: 50, cached_tokens: 600 })),
        answer(None),
    ]);
    let server = start(script).await;
    let client = fast_client();
    let priced = endpoint("gpt", Provider::OpenAi, &server).with_prices(usd("2.5"), usd("10"));
    let unpriced = endpoint("claude", Provider::Anthropic, &server);
    let mut no_usage = endpoint("local", Provider::OpenAiCompatible, &server).with_prices(usd("0.1"), usd("0.2"));
    no_usage.stream = false;

    let mut records = Vec::new();
    for (endpoint, candidate) in [(&priced, Some(0)), (&priced, Some(1)), (&unpriced, Some(0)), (&no_usage, None)] {
        let r = client.chat(endpoint, &ChatRequest::user("go")).await.unwrap();
        records.push(call_record("coding", endpoint, candidate.map(CandidateId::from_index), r.usage.as_ref()));
    }
    // Anthropic reports cache reads apart; they come back inside input_tokens.
    assert_eq!((records[2].input_tokens, records[2].cached_tokens), (Some(1000), Some(600)));
    // 1000×2.5 + 200×10 = 4500 µ$; 123×2.5 + 45×10 = 757.5 µ$.
    assert_eq!(records[0].cost.map(Usd::decimal).as_deref(), Some("0.0045"));
    assert_eq!(records[1].cost.map(Usd::decimal).as_deref(), Some("0.0007575"));
    assert_eq!((records[2].cost, records[2].flags.clone()), (None, vec!["unpriced".to_string()]));
    assert_eq!((records[3].cost, records[3].flags.clone()), (None, vec!["usage_unavailable".to_string()]));
    assert_eq!(records[3].input_tokens, None);

    let summary = summarize(records);
    assert_eq!(summary.total.calls, 4);
    assert_eq!(summary.total.known_cost.decimal(), "0.0052575");
    assert_eq!(
        (summary.total.input_tokens, summary.total.output_tokens, summary.total.cached_tokens),
        (2123, 295, 1000)
    );
    assert_eq!((summary.total.unpriced_calls, summary.total.usage_unavailable_calls), (1, 1));
    assert!(!summary.complete);
    // (arbiter-core counts max(unpriced, usage_unavailable) as the calls without cost.)
    assert!(summary.total.describe_cost().starts_with("$0.005258 (partial"), "{}", summary.total.describe_cost());
    assert_eq!(summary.by_backend["gpt"].known_cost.decimal(), "0.0052575");
    assert_eq!(summary.by_model["mock-model"].calls, 4);
    assert_eq!(summary.by_candidate["c01"].calls, 2);
    let json = serde_json::to_value(&summary).unwrap();
    assert_eq!(json["total"]["known_cost"], serde_json::json!("0.0052575"));
}
