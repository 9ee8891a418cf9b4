//! A scriptable mock LLM server for loopback tests and demos (`MockServer`, `MockScript`):
//! plain HTTP/1.1 on a `TcpListener`, speaking `POST /v1/chat/completions` (OpenAI) and
//! `POST /v1/messages` (Anthropic), streamed or not as the request asks, and
//! `GET /v1/models`. Every request is recorded with its key headers masked.
//!
//! Streams are cut the way real servers cut them, and worse: text over several chunks,
//! every tool call's arguments over at least two chunks at awkward byte positions, and,
//! with `write_chunk_bytes`, the whole body written a few bytes at a time (so a cut can
//! fall inside a UTF-8 character).

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::types::Usage;

/// What the mock answers, in order. Loaded from JSON or TOML.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MockScript {
    #[serde(default)]
    pub responses: Vec<MockResponse>,
    /// When set, chat requests must carry this key (`Authorization: Bearer` or
    /// `x-api-key`), else they get a 401 that does not consume a response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// The model ids `GET /v1/models` lists (default `["mock"]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
}

/// One scripted answer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MockResponse {
    /// Used only for requests that match; unmatched responses serve the rest in order.
    #[serde(rename = "match", default, skip_serializing_if = "Option::is_none")]
    pub matcher: Option<MockMatch>,
    #[serde(default)]
    pub text: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<MockToolCall>,
    /// Reported usage; when absent, an estimate (bytes / 4) is reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Report no usage at all.
    #[serde(default)]
    pub omit_usage: bool,
    /// `end_turn`, `tool_use`, `max_tokens` or any other word (OpenAI streams get
    /// `stop`, `tool_calls`, `length`); by default `tool_use` when there are tool calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// Answer with this HTTP error status instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// `Retry-After` seconds sent with `status`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<u64>,
    /// The error message sent with `status`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// Never consumed: serves every request it is selected for.
    #[serde(default)]
    pub repeat: bool,
    /// Wait this long before answering.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    /// Write a streamed body in pieces of this many bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_chunk_bytes: Option<usize>,
    /// Close the connection without answering.
    #[serde(default)]
    pub disconnect: bool,
}

/// When a scripted response applies.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MockMatch {
    /// A substring of the request body as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contains: Option<String>,
    /// The request path, e.g. `/v1/messages`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// A scripted tool call.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MockToolCall {
    /// Generated (`call_N_K`, `toolu_N_K`) when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub name: String,
    #[serde(default = "empty_object")]
    pub arguments: Value,
    /// Sent verbatim instead of `arguments` (to script broken JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_arguments: Option<String>,
}

fn empty_object() -> Value {
    json!({})
}

impl MockToolCall {
    fn arguments_text(&self) -> String {
        self.raw_arguments.clone().unwrap_or_else(|| self.arguments.to_string())
    }
}

/// A script file that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum MockScriptError {
    #[error("cannot read mock script {}: {source}; check the path", path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("mock script {} is not a valid script: {message}; see the MockScript format", path.display())]
    Parse { path: PathBuf, message: String },
}

impl MockScript {
    /// Loads a `.toml` file as TOML and anything else as JSON.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, MockScriptError> {
        let path = path.as_ref();
        let text =
            std::fs::read_to_string(path).map_err(|source| MockScriptError::Read { path: path.into(), source })?;
        let parsed = if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("toml")) {
            toml::from_str(&text).map_err(|e| e.to_string())
        } else {
            serde_json::from_str(&text).map_err(|e| e.to_string())
        };
        parsed.map_err(|message| MockScriptError::Parse { path: path.into(), message })
    }

    /// A script of these responses.
    pub fn new(responses: Vec<MockResponse>) -> Self {
        MockScript { responses, ..Default::default() }
    }
}

impl MockResponse {
    /// A plain text answer.
    pub fn text(text: impl Into<String>) -> Self {
        MockResponse { text: text.into(), ..Default::default() }
    }

    /// An HTTP error answer.
    pub fn error(status: u16, message: impl Into<String>) -> Self {
        MockResponse { status: Some(status), error_message: Some(message.into()), ..Default::default() }
    }
}

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

/// A parsed request.
struct Incoming {
    method: String,
    path: String,
    headers: BTreeMap<String, String>,
    body: Vec<u8>,
    keep_alive: bool,
}

const MAX_HEAD: usize = 64 * 1024;
const MAX_BODY: usize = 32 * 1024 * 1024;

/// Reads one request; `Ok(None)` when the client closed the connection between requests.
async fn read_request(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> io::Result<Option<Incoming>> {
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        if buffer.len() > MAX_HEAD {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "request head too large"));
        }
        if read_more(stream, buffer).await? == 0 {
            return if buffer.is_empty() { Ok(None) } else { Err(io::ErrorKind::UnexpectedEof.into()) };
        }
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split_whitespace();
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "bad request line"));
    };
    let mut headers = BTreeMap::new();
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
        }
    }
    if headers.get("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked")) {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "chunked request bodies are not supported"));
    }
    let length: usize = match headers.get("content-length") {
        Some(v) => v.parse().map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad content-length"))?,
        None => 0,
    };
    if length > MAX_BODY {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "request body too large"));
    }
    let body_start = head_end + 4;
    while buffer.len() < body_start + length {
        if read_more(stream, buffer).await? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
    }
    let body = buffer[body_start..body_start + length].to_vec();
    buffer.drain(..body_start + length);
    let connection = headers.get("connection").map(|v| v.to_ascii_lowercase()).unwrap_or_default();
    let keep_alive =
        if version == "HTTP/1.0" { connection.contains("keep-alive") } else { !connection.contains("close") };
    let path = target.split('?').next().unwrap_or(target).to_string();
    Ok(Some(Incoming { method: method.to_string(), path, headers, body, keep_alive }))
}

async fn read_more(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> io::Result<usize> {
    let mut chunk = [0u8; 8192];
    let n = stream.read(&mut chunk).await?;
    buffer.extend_from_slice(&chunk[..n]);
    Ok(n)
}

const SECRET_HEADERS: &[&str] = &["authorization", "x-api-key", "api-key", "proxy-authorization", "cookie"];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Api {
    OpenAi,
    Anthropic,
}

/// An answer to write.
struct Reply {
    status: u16,
    content_type: &'static str,
    headers: Vec<(&'static str, String)>,
    body: ReplyBody,
}

enum ReplyBody {
    Full(Vec<u8>),
    /// Written with chunked transfer encoding, one HTTP chunk per piece.
    Pieces(Vec<Vec<u8>>),
    /// Close without answering.
    Drop,
}

impl Reply {
    fn json(status: u16, value: &Value) -> Reply {
        Reply {
            status,
            content_type: "application/json",
            headers: Vec::new(),
            body: ReplyBody::Full(value.to_string().into_bytes()),
        }
    }
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
    write_reply(stream, reply, request.keep_alive, state, index).await?;
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

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}

async fn write_reply(
    stream: &mut TcpStream,
    reply: Reply,
    keep_alive: bool,
    state: &Shared,
    index: usize,
) -> io::Result<()> {
    let finished = |status: u16| {
        let mut s = lock(state);
        if let Some(r) = s.requests.get_mut(index) {
            r.status = status;
            r.finished_at = Some(Instant::now());
        }
    };
    let mut head = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: {}\r\n",
        reply.status,
        reason_phrase(reply.status),
        reply.content_type
    );
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(if keep_alive { "connection: keep-alive\r\n" } else { "connection: close\r\n" });
    match reply.body {
        ReplyBody::Drop => {
            finished(0);
            Err(io::Error::new(io::ErrorKind::ConnectionAborted, "scripted disconnect"))
        }
        ReplyBody::Full(body) => {
            head.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
            let mut bytes = head.into_bytes();
            bytes.extend_from_slice(&body);
            finished(reply.status);
            stream.write_all(&bytes).await?;
            stream.flush().await
        }
        ReplyBody::Pieces(pieces) => {
            head.push_str("transfer-encoding: chunked\r\n\r\n");
            stream.write_all(head.as_bytes()).await?;
            stream.flush().await?;
            let last = pieces.len().saturating_sub(1);
            for (i, piece) in pieces.iter().enumerate() {
                if i == last {
                    finished(reply.status);
                }
                let mut chunk = format!("{:x}\r\n", piece.len()).into_bytes();
                chunk.extend_from_slice(piece);
                chunk.extend_from_slice(b"\r\n");
                stream.write_all(&chunk).await?;
                stream.flush().await?;
                tokio::task::yield_now().await;
            }
            if pieces.is_empty() {
                finished(reply.status);
            }
            stream.write_all(b"0\r\n\r\n").await?;
            stream.flush().await
        }
    }
}

/// A selected response made concrete for one request.
struct Answer {
    number: usize,
    model: String,
    text: String,
    calls: Vec<(String, String, String)>,
    stop: String,
    usage: Option<Usage>,
}

impl Answer {
    fn new(response: &MockResponse, api: Api, body: &Value, body_len: usize, number: usize) -> Answer {
        let prefix = if api == Api::OpenAi { "call" } else { "toolu" };
        let calls: Vec<(String, String, String)> = response
            .tool_calls
            .iter()
            .enumerate()
            .map(|(k, c)| {
                let id = c.id.clone().unwrap_or_else(|| format!("{prefix}_{number}_{k}"));
                (id, c.name.clone(), c.arguments_text())
            })
            .collect();
        let stop = response
            .stop_reason
            .clone()
            .unwrap_or_else(|| if calls.is_empty() { "end_turn".into() } else { "tool_use".into() });
        let usage = if response.omit_usage {
            None
        } else {
            Some(response.usage.unwrap_or_else(|| {
                let out: usize = response.text.len() + calls.iter().map(|c| c.2.len()).sum::<usize>();
                Usage {
                    input_tokens: (body_len as u64).div_ceil(4).max(1),
                    output_tokens: (out as u64).div_ceil(4).max(1),
                    cached_tokens: 0,
                }
            }))
        };
        let model = body.get("model").and_then(Value::as_str).unwrap_or("mock").to_string();
        Answer { number, model, text: response.text.clone(), calls, stop, usage }
    }

    fn openai_finish(&self) -> &str {
        match self.stop.as_str() {
            "end_turn" => "stop",
            "tool_use" => "tool_calls",
            "max_tokens" => "length",
            other => other,
        }
    }

    fn openai_usage(&self) -> Option<Value> {
        self.usage.map(|u| {
            json!({"prompt_tokens": u.input_tokens, "completion_tokens": u.output_tokens,
                   "total_tokens": u.input_tokens + u.output_tokens,
                   "prompt_tokens_details": {"cached_tokens": u.cached_tokens}})
        })
    }

    /// Anthropic counts cache reads apart from `input_tokens`.
    fn anthropic_usage(&self, output: u64) -> Option<Value> {
        self.usage.map(|u| {
            json!({"input_tokens": u.input_tokens.saturating_sub(u.cached_tokens), "output_tokens": output,
                   "cache_creation_input_tokens": 0, "cache_read_input_tokens": u.cached_tokens})
        })
    }

    fn openai_body(&self) -> Value {
        let mut message = json!({"role": "assistant", "content": if self.text.is_empty() && !self.calls.is_empty() { Value::Null } else { json!(self.text) }});
        if !self.calls.is_empty() {
            message["tool_calls"] = self
                .calls
                .iter()
                .map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}))
                .collect();
        }
        let mut body = json!({"id": format!("chatcmpl-mock-{}", self.number), "object": "chat.completion",
            "created": 0, "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": self.openai_finish()}]});
        if let Some(usage) = self.openai_usage() {
            body["usage"] = usage;
        }
        body
    }

    fn openai_frames(&self, include_usage: bool) -> Vec<String> {
        let id = format!("chatcmpl-mock-{}", self.number);
        let chunk = |delta: Value, finish: Value| {
            let value = json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": self.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
            format!("data: {value}\n\n")
        };
        let mut frames = vec![chunk(json!({"role": "assistant", "content": ""}), Value::Null)];
        for piece in text_pieces(&self.text) {
            frames.push(chunk(json!({"content": piece}), Value::Null));
        }
        for (k, (call_id, name, args)) in self.calls.iter().enumerate() {
            frames.push(chunk(
                json!({"tool_calls": [{"index": k, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
                Value::Null,
            ));
            for piece in awkward_pieces(args) {
                frames
                    .push(chunk(json!({"tool_calls": [{"index": k, "function": {"arguments": piece}}]}), Value::Null));
            }
        }
        frames.push(chunk(json!({}), json!(self.openai_finish())));
        if include_usage && let Some(usage) = self.openai_usage() {
            let value = json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": self.model,
                "choices": [], "usage": usage});
            frames.push(format!("data: {value}\n\n"));
        }
        frames.push("data: [DONE]\n\n".to_string());
        frames
    }

    fn anthropic_body(&self) -> Value {
        let mut content = Vec::new();
        if !self.text.is_empty() {
            content.push(json!({"type": "text", "text": self.text}));
        }
        for (id, name, args) in &self.calls {
            let input = serde_json::from_str::<Value>(args).unwrap_or_else(|_| json!(args));
            content.push(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
        }
        let mut body = json!({"id": format!("msg_mock_{}", self.number), "type": "message", "role": "assistant",
            "model": self.model, "content": content, "stop_reason": self.stop, "stop_sequence": null});
        if let Some(usage) = self.anthropic_usage(self.usage.map_or(0, |u| u.output_tokens)) {
            body["usage"] = usage;
        }
        body
    }

    fn anthropic_frames(&self) -> Vec<String> {
        let frame = |value: Value| {
            let name = value.get("type").and_then(Value::as_str).unwrap_or("message").to_string();
            format!("event: {name}\ndata: {value}\n\n")
        };
        let mut message = json!({"id": format!("msg_mock_{}", self.number), "type": "message", "role": "assistant",
            "model": self.model, "content": [], "stop_reason": null, "stop_sequence": null});
        if let Some(usage) = self.anthropic_usage(1) {
            message["usage"] = usage;
        }
        let mut frames =
            vec![frame(json!({"type": "message_start", "message": message})), frame(json!({"type": "ping"}))];
        let mut index = 0;
        if !self.text.is_empty() {
            frames.push(frame(
                json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
            ));
            for piece in text_pieces(&self.text) {
                frames.push(frame(json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}})));
            }
            frames.push(frame(json!({"type": "content_block_stop", "index": index})));
            index += 1;
        }
        for (id, name, args) in &self.calls {
            frames.push(frame(json!({"type": "content_block_start", "index": index,
                "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}})));
            let pieces = std::iter::once("").chain(awkward_pieces(args));
            for piece in pieces {
                frames.push(frame(json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": piece}})));
            }
            frames.push(frame(json!({"type": "content_block_stop", "index": index})));
            index += 1;
        }
        let mut delta = json!({"type": "message_delta", "delta": {"stop_reason": self.stop, "stop_sequence": null}});
        if let Some(u) = self.usage {
            delta["usage"] = json!({"output_tokens": u.output_tokens});
        }
        frames.push(frame(delta));
        frames.push(frame(json!({"type": "message_stop"})));
        frames
    }
}

/// Text in up to three pieces (whole characters: JSON strings must stay valid).
pub fn text_pieces(text: &str) -> Vec<&str> {
    let chars = text.chars().count();
    if chars == 0 {
        return Vec::new();
    }
    let per_piece = chars.div_ceil(3).max(1);
    let mut pieces = Vec::new();
    let mut start = 0;
    for (n, (at, _)) in text.char_indices().enumerate() {
        if n > 0 && n % per_piece == 0 {
            pieces.push(&text[start..at]);
            start = at;
        }
    }
    pieces.push(&text[start..]);
    pieces
}

/// A JSON text cut after its first byte, at a third, at the half and before its last byte
/// (moved to character boundaries): at least two pieces whenever it has two characters.
pub fn awkward_pieces(text: &str) -> Vec<&str> {
    let len = text.len();
    let mut cuts: Vec<usize> = [1, len / 3, len / 2, len.saturating_sub(1)]
        .into_iter()
        .map(|mut at| {
            while at < len && !text.is_char_boundary(at) {
                at += 1;
            }
            at
        })
        .filter(|&at| at > 0 && at < len)
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    let mut pieces = Vec::with_capacity(cuts.len() + 1);
    let mut start = 0;
    for at in cuts {
        pieces.push(&text[start..at]);
        start = at;
    }
    pieces.push(&text[start..]);
    pieces
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
