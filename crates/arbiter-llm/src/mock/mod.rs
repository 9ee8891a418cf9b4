//! A scriptable mock LLM server for loopback tests and demos (`MockServer`, `MockScript`):
//! plain HTTP/1.1 on a `TcpListener`, speaking `POST /v1/chat/completions` (OpenAI) and
//! `POST /v1/messages` (Anthropic), streamed or not as the request asks, and
//! `GET /v1/models`. Every request is recorded with its key headers masked.
//!
//! Streams are cut the way real servers cut them, and worse: text over several chunks,
//! every tool call's arguments over at least two chunks at awkward byte positions, and,
//! with `write_chunk_bytes`, the whole body written a few bytes at a time (so a cut can
//! fall inside a UTF-8 character).

mod http;
mod render;
mod script;

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use http::{Incoming, Reply, ReplyBody, read_request, write_reply};
use render::Answer;
pub use render::{awkward_pieces, text_pieces};
pub use script::{MockMatch, MockResponse, MockScript, MockScriptError, MockToolCall};

/// One request the mock received.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedRequest {
    /// 1-based, in order of arrival.
    pub number: usize,
    pub method: String,
    pub path: String,
    /// Lower-case names; the values of key-bearing headers (`authorization`, `x-api-key`,
    /// …) are replaced by `[REDACTED]`.
    pub headers: BTreeMap<String, String>,
    /// The JSON body (`null` when empty, a string when not JSON).
    pub body: Value,
    /// When the request had been read completely.
    pub started_at: Instant,
    /// Just before the last bytes of the answer were written.
    pub finished_at: Option<Instant>,
    /// The status answered (0 when the connection was dropped).
    pub status: u16,
}

#[derive(Debug)]
struct State {
    script: MockScript,
    used: Vec<bool>,
    requests: Vec<RecordedRequest>,
}

type Shared = Arc<Mutex<State>>;

fn lock(state: &Shared) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A running mock server. Stops on [`MockServer::shutdown`] or when dropped.
#[derive(Debug)]
pub struct MockServer {
    addr: SocketAddr,
    state: Shared,
    stop: watch::Sender<bool>,
    accept: Option<JoinHandle<()>>,
}

impl MockServer {
    /// Binds `bind` (port 0 picks a free port) and starts serving `script`.
    pub async fn start(script: MockScript, bind: SocketAddr) -> io::Result<MockServer> {
        let listener = TcpListener::bind(bind).await?;
        let addr = listener.local_addr()?;
        let used = vec![false; script.responses.len()];
        let state = Arc::new(Mutex::new(State { script, used, requests: Vec::new() }));
        let (stop, stopped) = watch::channel(false);
        let accept = tokio::spawn(accept_loop(listener, state.clone(), stopped));
        Ok(MockServer { addr, state, stop, accept: Some(accept) })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` (the Anthropic base URL).
    pub fn base_url(&self) -> String {
        let mut addr = self.addr;
        if addr.ip().is_unspecified() {
            addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        format!("http://{addr}")
    }

    /// `http://127.0.0.1:PORT/v1` (the OpenAI-style base URL).
    pub fn openai_base_url(&self) -> String {
        format!("{}/v1", self.base_url())
    }

    /// Every request so far, in order of arrival.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.state).requests.clone()
    }

    /// Scripted responses not used yet (`repeat` ones excluded).
    pub fn remaining(&self) -> usize {
        let state = lock(&self.state);
        state.script.responses.iter().zip(&state.used).filter(|(r, used)| !r.repeat && !**used).count()
    }

    /// Stops accepting and ends every connection.
    pub async fn shutdown(mut self) {
        self.stop.send_replace(true);
        if let Some(accept) = self.accept.take() {
            let _ = accept.await;
        }
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.stop.send_replace(true);
    }
}

async fn accept_loop(listener: TcpListener, state: Shared, mut stopped: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = stopped.changed() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    tokio::spawn(serve_connection(stream, state.clone(), stopped.clone()));
                }
                // Out of file descriptors and the like: wait a little and go on.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
        }
    }
}

async fn serve_connection(mut stream: TcpStream, state: Shared, mut stopped: watch::Receiver<bool>) {
    let mut buffer = Vec::new();
    loop {
        let keep_alive = tokio::select! {
            _ = stopped.changed() => return,
            result = serve_one(&mut stream, &mut buffer, &state) => result,
        };
        if !matches!(keep_alive, Ok(true)) {
            let _ = stream.shutdown().await;
            return;
        }
    }
}

const SECRET_HEADERS: &[&str] = &["authorization", "x-api-key", "api-key", "proxy-authorization", "cookie"];

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Api {
    OpenAi,
    Anthropic,
}

/// Reads, records and answers one request; `Ok(true)` to keep the connection.
async fn serve_one(stream: &mut TcpStream, buffer: &mut Vec<u8>, state: &Shared) -> io::Result<bool> {
    let Some(request) = read_request(stream, buffer).await? else { return Ok(false) };
    let body_text = String::from_utf8_lossy(&request.body).into_owned();
    let body: Value = if body_text.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&body_text).unwrap_or_else(|_| Value::String(body_text.clone()))
    };
    let headers = request
        .headers
        .iter()
        .map(|(k, v)| {
            let v = if SECRET_HEADERS.contains(&k.as_str()) { "[REDACTED]".to_string() } else { v.clone() };
            (k.clone(), v)
        })
        .collect();
    let (index, number) = {
        let mut s = lock(state);
        let number = s.requests.len() + 1;
        s.requests.push(RecordedRequest {
            number,
            method: request.method.clone(),
            path: request.path.clone(),
            headers,
            body: body.clone(),
            started_at: Instant::now(),
            finished_at: None,
            status: 0,
        });
        (number - 1, number)
    };
    let api = match (request.method.as_str(), request.path.as_str()) {
        ("POST", "/v1/chat/completions") => Some(Api::OpenAi),
        ("POST", "/v1/messages") => Some(Api::Anthropic),
        _ => None,
    };
    let reply = match api {
        Some(api) => answer_chat(api, &request, &body_text, &body, number, state).await,
        None if request.method == "GET" && request.path == "/v1/models" => {
            let s = lock(state);
            let models = if s.script.models.is_empty() { vec!["mock".to_string()] } else { s.script.models.clone() };
            let data: Vec<Value> =
                models.iter().map(|m| json!({"id": m, "object": "model", "created": 0, "owned_by": "mock"})).collect();
            Reply::json(200, &json!({"object": "list", "data": data}))
        }
        None => Reply::json(
            404,
            &json!({"error": {"type": "not_found_error", "message": format!(
                "the mock serves POST /v1/chat/completions, POST /v1/messages and GET /v1/models, not {} {}",
                request.method, request.path)}}),
        ),
    };
    let finished = |status: u16| {
        let mut s = lock(state);
        if let Some(r) = s.requests.get_mut(index) {
            r.status = status;
            r.finished_at = Some(Instant::now());
        }
    };
    write_reply(stream, reply, request.keep_alive, finished).await?;
    Ok(request.keep_alive)
}

async fn answer_chat(
    api: Api,
    request: &Incoming,
    body_text: &str,
    body: &Value,
    number: usize,
    state: &Shared,
) -> Reply {
    let selected = {
        let mut s = lock(state);
        if let Some(key) = s.script.api_key.clone() {
            let bearer = request.headers.get("authorization").and_then(|v| v.strip_prefix("Bearer "));
            let x_api_key = request.headers.get("x-api-key").map(String::as_str);
            if bearer != Some(key.as_str()) && x_api_key != Some(key.as_str()) {
                return error_reply(api, 401, "authentication_error", "invalid or missing API key", None);
            }
        }
        select(&mut s, &request.path, body_text)
    };
    let Some(response) = selected else {
        let message = format!(
            "mock script exhausted: request #{number} ({} {}) matched no unused response; \
             add responses to the script or mark one \"repeat\": true",
            request.method, request.path
        );
        return error_reply(api, 500, "api_error", &message, None);
    };
    if let Some(ms) = response.delay_ms {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    if response.disconnect {
        return Reply { status: 0, content_type: "", headers: Vec::new(), body: ReplyBody::Drop };
    }
    if let Some(status) = response.status.filter(|s| !(200..300).contains(s)) {
        let kind = match status {
            401 => "authentication_error",
            429 => "rate_limit_error",
            529 => "overloaded_error",
            500..=599 => "api_error",
            _ => "invalid_request_error",
        };
        let message = response.error_message.as_deref().unwrap_or("scripted error");
        return error_reply(api, status, kind, message, response.retry_after);
    }
    let answer = Answer::new(&response, api, body, body_text.len(), number);
    let streamed = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    if !streamed {
        let value = match api {
            Api::OpenAi => answer.openai_body(),
            Api::Anthropic => answer.anthropic_body(),
        };
        return Reply::json(200, &value);
    }
    let frames = match api {
        Api::OpenAi => {
            let include_usage = body
                .get("stream_options")
                .and_then(|o| o.get("include_usage"))
                .and_then(Value::as_bool)
                .unwrap_or(false);
            answer.openai_frames(include_usage)
        }
        Api::Anthropic => answer.anthropic_frames(),
    };
    let pieces = match response.write_chunk_bytes.filter(|n| *n > 0) {
        Some(n) => frames.concat().into_bytes().chunks(n).map(<[u8]>::to_vec).collect(),
        None => frames.into_iter().map(String::into_bytes).collect(),
    };
    Reply {
        status: 200,
        content_type: "text/event-stream",
        headers: vec![("cache-control", "no-cache".into())],
        body: ReplyBody::Pieces(pieces),
    }
}

/// The first unused response whose match fits, else the next unused one without a match.
fn select(state: &mut State, path: &str, body: &str) -> Option<MockResponse> {
    let available = |i: usize, r: &MockResponse| r.repeat || !state.used[i];
    let fits = |m: &MockMatch| {
        m.contains.as_ref().is_none_or(|c| body.contains(c.as_str())) && m.path.as_ref().is_none_or(|p| p == path)
    };
    let responses = &state.script.responses;
    let index = responses
        .iter()
        .enumerate()
        .position(|(i, r)| available(i, r) && r.matcher.as_ref().is_some_and(fits))
        .or_else(|| responses.iter().enumerate().position(|(i, r)| available(i, r) && r.matcher.is_none()))?;
    let response = responses[index].clone();
    if !response.repeat {
        state.used[index] = true;
    }
    Some(response)
}

fn error_reply(api: Api, status: u16, kind: &str, message: &str, retry_after: Option<u64>) -> Reply {
    let value = match api {
        Api::OpenAi => json!({"error": {"message": message, "type": kind, "code": null}}),
        Api::Anthropic => json!({"type": "error", "error": {"type": kind, "message": message}}),
    };
    let mut reply = Reply::json(status, &value);
    if let Some(seconds) = retry_after {
        reply.headers.push(("retry-after", seconds.to_string()));
    }
    reply
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cover_the_text() {
        for text in ["", "a", "ab", "{\"path\":\"é.txt\"}", "héllo wörld ✓ 𝄞"] {
            assert_eq!(text_pieces(text).concat(), text);
            assert_eq!(awkward_pieces(text).concat(), text);
            if text.chars().count() >= 2 {
                assert!(awkward_pieces(text).len() >= 2, "{text}");
            }
        }
        assert_eq!(awkward_pieces("{}"), vec!["{", "}"]);
        assert_eq!(text_pieces("abcdefg"), vec!["abc", "def", "g"]);
    }

    #[test]
    fn selection_prefers_matches_then_order_and_consumes() {
        let mut matched = MockResponse::text("matched");
        matched.matcher = Some(MockMatch { contains: Some("special".into()), path: None });
        let mut repeat = MockResponse::text("again");
        repeat.repeat = true;
        let script = MockScript::new(vec![MockResponse::text("first"), matched, repeat]);
        let mut state = State { used: vec![false; 3], script, requests: Vec::new() };
        let pick = |s: &mut State, body: &str| select(s, "/v1/messages", body).map(|r| r.text);
        assert_eq!(pick(&mut state, "a special body").as_deref(), Some("matched"));
        assert_eq!(pick(&mut state, "a special body").as_deref(), Some("first"));
        assert_eq!(pick(&mut state, "x").as_deref(), Some("again"));
        assert_eq!(pick(&mut state, "x").as_deref(), Some("again"));
        let mut state =
            State { used: vec![false], script: MockScript::new(vec![MockResponse::text("one")]), requests: Vec::new() };
        assert!(pick(&mut state, "x").is_some());
        assert!(pick(&mut state, "x").is_none());
    }

    #[test]
    fn scripts_parse_from_json_and_toml() {
        let json = r#"{"responses": [{"match": {"contains": "hi"}, "text": "hello",
            "tool_calls": [{"name": "read", "arguments": {"path": "a"}}],
            "usage": {"input_tokens": 3, "output_tokens": 4, "cached_tokens": 0}},
            {"status": 429, "retry_after": 1, "error_message": "slow down"}]}"#;
        let from_json: MockScript = serde_json::from_str(json).unwrap();
        let toml_text = r#"
[[responses]]
match = { contains = "hi" }
text = "hello"
tool_calls = [{ name = "read", arguments = { path = "a" } }]
usage = { input_tokens = 3, output_tokens = 4, cached_tokens = 0 }

[[responses]]
status = 429
retry_after = 1
error_message = "slow down"
"#;
        let from_toml: MockScript = toml::from_str(toml_text).unwrap();
        assert_eq!(from_json, from_toml);
        assert!(serde_json::from_str::<MockScript>(r#"{"responses": [{"txt": "typo"}]}"#).is_err());
    }
}
