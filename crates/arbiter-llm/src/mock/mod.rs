//! A scriptable mock LLM server for loopback tests, demos and real agent CLIs
//! (`MockServer`, `MockScript`): plain HTTP/1.1 on a `TcpListener`, speaking
//! `POST /v1/chat/completions` (OpenAI chat completions), `POST /v1/messages` (Anthropic
//! Messages) and `POST /v1/responses` (OpenAI Responses API), streamed or not as the
//! request asks, and `GET /v1/models`. Anything else is answered 404. Every request is
//! recorded with its key headers masked.
//!
//! A script answers in order (`queue` turns) or, for clients that run in parallel against
//! one mock, by each request's own history (`history` turns); `conversations` give
//! requests of one model (or path, or body) their own responses.
//!
//! Streams are cut the way real servers cut them, and worse: text over several chunks,
//! every tool call's arguments over at least two chunks at awkward byte positions, and,
//! with `write_chunk_bytes`, the whole body written a few bytes at a time (so a cut can
//! fall inside a UTF-8 character).
//!
//! Map: `script` (the format: [`MockScript`]), `http` (requests and answers on the wire),
//! `history` (a request's messages in one shape for the three formats), `select` (which
//! response answers), `render` (the answer in each format). docs/mock-llm.md has the
//! script format with examples for Claude Code, Codex and aider.

mod history;
mod http;
mod render;
mod script;
mod select;

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

use history::History;
use http::{Incoming, Reply, ReplyBody, read_request, write_reply};
use render::Answer;
pub use render::{awkward_pieces, text_pieces};
pub use script::{
    MockConversation, MockConversationMatch, MockMatch, MockResponse, MockScript, MockScriptError, MockToolCall,
    MockTurns,
};
use select::{Choice, Selected};

/// One request the mock received.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedRequest {
    /// 1-based, in order of arrival.
    pub number: usize,
    pub method: String,
    /// The path without the query string.
    pub path: String,
    /// What followed `?` (`beta=true`), if anything.
    pub query: Option<String>,
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
    /// False when no route serves the method and path: the request was answered 404.
    pub routed: bool,
    /// For model requests, what answered it, for people and failure messages (not a
    /// stable format): `response 2 of the script`, `turn 3 of conversation 1 (model
    /// "fixer")`, `OK: turn 1 … calls Read, which the request does not declare`, …
    pub served: Option<String>,
}

#[derive(Debug)]
struct State {
    script: MockScript,
    /// Per list of responses (see [`select::used_flags`]): which were served.
    used: Vec<Vec<bool>>,
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
    /// Binds `bind` (port 0 picks a free port) and starts serving `script`; an
    /// inconsistent script (see [`MockScript::check`]) is an `InvalidInput` error.
    pub async fn start(script: MockScript, bind: SocketAddr) -> io::Result<MockServer> {
        script.check().map_err(|message| io::Error::new(io::ErrorKind::InvalidInput, message))?;
        let listener = TcpListener::bind(bind).await?;
        let addr = listener.local_addr()?;
        let used = select::used_flags(&script);
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

    /// `http://127.0.0.1:PORT/v1` (the OpenAI-style base URL, chat completions and
    /// Responses API alike).
    pub fn openai_base_url(&self) -> String {
        format!("{}/v1", self.base_url())
    }

    /// Every request so far, in order of arrival.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.state).requests.clone()
    }

    /// The requests no route serves (each answered 404), e.g. Claude Code's `HEAD /`.
    pub fn unknown_requests(&self) -> Vec<RecordedRequest> {
        lock(&self.state).requests.iter().filter(|r| !r.routed).cloned().collect()
    }

    /// Scripted responses never served yet (`repeat` ones excluded), over all
    /// conversations.
    pub fn remaining(&self) -> usize {
        let state = lock(&self.state);
        let lists =
            std::iter::once(&state.script.responses).chain(state.script.conversations.iter().map(|c| &c.responses));
        lists
            .zip(&state.used)
            .map(|(responses, used)| responses.iter().zip(used).filter(|(r, used)| !r.repeat && !**used).count())
            .sum()
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

/// The wire format of a model route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Api {
    /// `POST /v1/chat/completions`.
    OpenAi,
    /// `POST /v1/messages`.
    Anthropic,
    /// `POST /v1/responses`.
    Responses,
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
    let api = match (request.method.as_str(), request.path.as_str()) {
        ("POST", "/v1/chat/completions") => Some(Api::OpenAi),
        ("POST", "/v1/messages") => Some(Api::Anthropic),
        ("POST", "/v1/responses") => Some(Api::Responses),
        _ => None,
    };
    let models_route = request.method == "GET" && request.path == "/v1/models";
    let (index, number) = {
        let mut s = lock(state);
        let number = s.requests.len() + 1;
        s.requests.push(RecordedRequest {
            number,
            method: request.method.clone(),
            path: request.path.clone(),
            query: request.query.clone(),
            headers,
            body: body.clone(),
            started_at: Instant::now(),
            finished_at: None,
            status: 0,
            routed: api.is_some() || models_route,
            served: None,
        });
        (number - 1, number)
    };
    let reply = match api {
        Some(api) => answer_model_request(api, &request, &body_text, &body, number, state).await,
        None if models_route => {
            let s = lock(state);
            let models = if s.script.models.is_empty() {
                let mut models = vec!["mock".to_string()];
                for m in s.script.conversations.iter().filter_map(|c| c.matcher.model.clone()) {
                    if !models.contains(&m) {
                        models.push(m);
                    }
                }
                models
            } else {
                s.script.models.clone()
            };
            let data: Vec<Value> =
                models.iter().map(|m| json!({"id": m, "object": "model", "created": 0, "owned_by": "mock"})).collect();
            Reply::json(200, &json!({"object": "list", "data": data}))
        }
        None => Reply::json(
            404,
            &json!({"error": {"type": "not_found_error", "message": format!(
                "the mock serves POST /v1/chat/completions, POST /v1/messages, POST /v1/responses and \
                 GET /v1/models, not {} {}",
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
    write_reply(stream, reply, request.keep_alive, request.method == "HEAD", finished).await?;
    Ok(request.keep_alive)
}

/// Answers a request to one of the three model routes.
async fn answer_model_request(
    api: Api,
    request: &Incoming,
    body_text: &str,
    body: &Value,
    number: usize,
    state: &Shared,
) -> Reply {
    let history = History::read(api, body);
    let choice = {
        let mut s = lock(state);
        let selected = match s.script.api_key.clone() {
            Some(key) if !carries_key(request, &key) => None,
            _ => {
                let State { script, used, .. } = &mut *s;
                let view = select::Request {
                    api,
                    method: &request.method,
                    path: &request.path,
                    body_text,
                    body,
                    history: &history,
                    number,
                };
                Some(select::select(script, used, &view))
            }
        };
        let (choice, served) = match selected {
            Some(Selected { choice, served }) => (Some(choice), served),
            None => (None, "refused: invalid or missing API key".to_string()),
        };
        if let Some(r) = s.requests.get_mut(number - 1) {
            r.served = Some(served);
        }
        match choice {
            Some(choice) => choice,
            None => return error_reply(api, 401, "authentication_error", "invalid or missing API key", None),
        }
    };
    let (response, id_base) = match choice {
        Choice::Scripted { response, id_base } => (*response, id_base),
        Choice::Ok => (MockResponse::text("OK"), String::new()),
        Choice::Exhausted { status, message } => {
            let kind = if status == 400 { "invalid_request_error" } else { "api_error" };
            return error_reply(api, status, kind, &message, None);
        }
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
    let answer = Answer::new(&response, &id_base, &history, body, body_text.len(), number);
    let streamed = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    if !streamed {
        let value = match api {
            Api::OpenAi => answer.openai_body(),
            Api::Anthropic => answer.anthropic_body(),
            Api::Responses => answer.responses_body(),
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
        Api::Responses => answer.responses_frames(),
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

/// Whether the request carries `key` as `Authorization: Bearer` or `x-api-key`.
fn carries_key(request: &Incoming, key: &str) -> bool {
    let bearer = request.headers.get("authorization").and_then(|v| v.strip_prefix("Bearer "));
    let x_api_key = request.headers.get("x-api-key").map(String::as_str);
    bearer == Some(key) || x_api_key == Some(key)
}

/// An error in the route's own shape; the Responses API one carries an OpenAI `code`.
fn error_reply(api: Api, status: u16, kind: &str, message: &str, retry_after: Option<u64>) -> Reply {
    let value = match api {
        Api::OpenAi => json!({"error": {"message": message, "type": kind, "code": null}}),
        Api::Anthropic => json!({"type": "error", "error": {"type": kind, "message": message}}),
        Api::Responses => {
            let code = match status {
                401 => json!("invalid_api_key"),
                429 => json!("rate_limit_exceeded"),
                500..=599 => json!("server_error"),
                _ => Value::Null,
            };
            json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
        }
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

    #[test]
    fn conversations_and_history_turns_parse_from_json_and_toml() {
        let json = r#"{"turns": "history", "conversations": [{"match": {"model": "fixer"},
            "responses": [{"tool_calls": [{"name": "apply_patch", "arguments": "*** Begin Patch"}]}, {"text": "Done"}]}],
            "responses": [{"text": "OK"}]}"#;
        let from_json: MockScript = serde_json::from_str(json).unwrap();
        let toml_text = r#"
turns = "history"

[[responses]]
text = "OK"

[[conversations]]
match = { model = "fixer" }

[[conversations.responses]]
tool_calls = [{ name = "apply_patch", arguments = "*** Begin Patch" }]

[[conversations.responses]]
text = "Done"
"#;
        let from_toml: MockScript = toml::from_str(toml_text).unwrap();
        assert_eq!(from_json, from_toml);
        assert_eq!(from_json.turns, MockTurns::History);
        assert_eq!(from_json.conversations[0].matcher.model.as_deref(), Some("fixer"));
        assert_eq!(from_json.conversations[0].responses[0].tool_calls[0].custom_input(), "*** Begin Patch");
        assert!(from_json.check().is_ok());
        assert!(serde_json::from_str::<MockScript>(r#"{"turns": "random"}"#).is_err());
        assert!(serde_json::from_str::<MockScript>(r#"{"conversations": [{"match": {"modle": "x"}}]}"#).is_err());
        // Serialising leaves the defaults out, so old scripts round-trip unchanged.
        let old = MockScript::new(vec![MockResponse::text("hi")]);
        assert_eq!(
            serde_json::to_value(&old).unwrap(),
            json!({"responses": [{"text": "hi", "omit_usage": false,
            "repeat": false, "disconnect": false}]})
        );
    }

    #[test]
    fn a_response_match_in_history_mode_is_refused() {
        let mut matched = MockResponse::text("x");
        matched.matcher = Some(MockMatch { contains: Some("y".into()), path: None });
        let mut script = MockScript::new(vec![matched]);
        assert!(script.check().is_ok());
        script.turns = MockTurns::History;
        let err = script.check().unwrap_err();
        assert!(err.contains("response 1 of the responses") && err.contains("conversations"), "{err}");
    }
}
