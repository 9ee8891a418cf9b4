//! The API key travels only in headers: the mock checks it, records it masked, and no error
//! (wrong key, provider echo, broken connection, chain failure) ever shows it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use arbiter_llm::{ChatRequest, LlmClient, MockResponse, MockScript, Provider, chat_with_fallback};
use common::{PROVIDERS, endpoint, fast_client, start};

const KEY: &str = "sk-test-SECRETSECRETSECRET-1234567890";

#[tokio::test]
async fn the_right_key_is_accepted_and_recorded_masked() {
    for provider in PROVIDERS {
        let script = MockScript { api_key: Some(KEY.into()), ..MockScript::new(vec![MockResponse::text("in")]) };
        let server = start(script).await;
        let e = endpoint("m", provider, &server).with_api_key(KEY);
        let r = fast_client().chat(&e, &ChatRequest::user("hi")).await.unwrap();
        assert_eq!(r.text, "in");
        for request in server.requests() {
            assert!(!format!("{request:?}").contains("SECRET"), "{request:?}");
            let header = if provider == Provider::Anthropic { "x-api-key" } else { "authorization" };
            assert_eq!(request.headers.get(header).map(String::as_str), Some("[REDACTED]"));
            assert!(!request.path.contains("SECRET"));
        }
    }
}

#[tokio::test]
async fn no_error_shows_the_key() {
    let client = fast_client();
    for provider in PROVIDERS {
        // A wrong key: 401.
        let script = MockScript { api_key: Some("the-expected-key-000".into()), ..MockScript::default() };
        let server = start(script).await;
        let err = client.chat(&endpoint("m", provider, &server).with_api_key(KEY), &ChatRequest::user("x")).await;
        let text = err.unwrap_err().to_string();
        assert!(text.contains("HTTP 401") && !text.contains("SECRET"), "{text}");

        // A provider that echoes the key in its message.
        let echo = MockResponse::error(400, format!("Incorrect API key provided: {KEY}"));
        let server = start(MockScript::new(vec![echo])).await;
        let err = client.chat(&endpoint("m", provider, &server).with_api_key(KEY), &ChatRequest::user("x")).await;
        let err = err.unwrap_err();
        assert!(!err.to_string().contains("SECRET") && !format!("{err:?}").contains("SECRET"), "{err}");
        assert!(err.to_string().contains("[REDACTED]"), "{err}");

        // Nobody listening.
        let server = start(MockScript::default()).await;
        let e = endpoint("gone", provider, &server).with_api_key(KEY);
        server.shutdown().await;
        let chain = chat_with_fallback(&client, &[e], &ChatRequest::user("x"), |f| {
            assert!(!f.reason.contains("SECRET"), "{}", f.reason);
        })
        .await
        .unwrap_err();
        let text = chain.to_string();
        assert!(text.contains("could not talk to endpoint 'gone'") && !text.contains("SECRET"), "{text}");
        assert!(!format!("{chain:?}").contains("SECRET"));
    }
    let _ = LlmClient::new().unwrap();
}
