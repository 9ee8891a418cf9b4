//! What reaches the mock besides well-formed model requests: `HEAD /` and unknown
//! routes get a 404 (recorded, on a connection that stays usable), query strings are
//! accepted, chunked uploads and `Expect: 100-continue` are read. Over real loopback
//! HTTP, with a bare TCP client where reqwest would hide the bytes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod raw;

use raw::{http, post, raw_exchange, script, start};
use serde_json::json;

#[tokio::test]
async fn head_and_unknown_requests_are_404_and_recorded() {
    let server = start(script(json!({"responses": [{"text": "hi", "repeat": true}]}))).await;
    // HEAD / then a model request on the same connection: the 404 has no body, so the
    // second answer is read cleanly.
    let body = json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}).to_string();
    let request = format!(
        "HEAD / HTTP/1.1\r\nhost: mock\r\n\r\nPOST /v1/messages?beta=true HTTP/1.1\r\nhost: mock\r\n\
         content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let answer = raw_exchange(&server, request.as_bytes()).await;
    let (head, rest) = answer.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 404 Not Found\r\n"), "{answer}");
    assert!(rest.starts_with("HTTP/1.1 200 OK\r\n"), "the HEAD answer carried a body: {answer}");
    assert!(rest.contains(r#""text":"hi""#), "{answer}");

    let client = http();
    for (method, path) in [("GET", "/v1/messages"), ("POST", "/v2/chat"), ("DELETE", "/v1/responses")] {
        let r = client.request(method.parse().unwrap(), format!("{}{path}", server.base_url())).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 404, "{method} {path}");
        let error: serde_json::Value = r.json().await.unwrap();
        let message = error["error"]["message"].as_str().unwrap();
        assert!(message.contains("POST /v1/responses") && message.contains(path), "{message}");
    }
    let r = client.get(format!("{}/v1/models", server.base_url())).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);

    let unknown: Vec<(String, String, u16)> =
        server.unknown_requests().into_iter().map(|r| (r.method, r.path, r.status)).collect();
    assert_eq!(
        unknown,
        [
            ("HEAD".to_string(), "/".to_string(), 404),
            ("GET".into(), "/v1/messages".into(), 404),
            ("POST".into(), "/v2/chat".into(), 404),
            ("DELETE".into(), "/v1/responses".into(), 404)
        ]
    );
    let all = server.requests();
    assert_eq!(all.len(), 6);
    assert!(all[1].routed && all[5].routed && all[0].served.is_none());
}

#[tokio::test]
async fn query_strings_chunked_bodies_and_expect_continue_are_accepted() {
    let server = start(script(json!({"responses": [{"text": "hi", "repeat": true}]}))).await;
    let body = json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]});
    let answer = post(&server, "/v1/messages?beta=true", &body).await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.json()["content"][0]["text"], json!("hi"));
    let seen = &server.requests()[0];
    assert_eq!((seen.path.as_str(), seen.query.as_deref()), ("/v1/messages", Some("beta=true")));
    assert_eq!(seen.body, body);

    // A chunked upload (cut inside the JSON, with a chunk extension and a trailer).
    let text = body.to_string();
    let (a, b) = text.split_at(7);
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: mock\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n\
         {:x}\r\n{a}\r\n{:x};ext=1\r\n{b}\r\n0\r\nx-trailer: 1\r\n\r\n",
        a.len(),
        b.len()
    );
    let answer = raw_exchange(&server, request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(answer.contains(r#""content":"hi""#), "{answer}");
    assert_eq!(server.requests()[1].body, body);

    // Expect: 100-continue gets its interim answer before the body is sent.
    let request = format!(
        "POST /v1/messages HTTP/1.1\r\nhost: mock\r\nexpect: 100-continue\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{text}",
        text.len()
    );
    let answer = raw_exchange(&server, request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(server.unknown_requests().is_empty());
}
