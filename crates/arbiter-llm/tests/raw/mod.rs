//! A raw client for the mock, the way agent CLIs talk to it: JSON posted with reqwest,
//! SSE bodies split into events and reassembled per wire format, and a bare TCP
//! connection for what reqwest hides (HEAD bodies, chunked uploads).

#![allow(dead_code)]

use arbiter_llm::{LlmClient, MockScript, MockServer};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub async fn start(script: MockScript) -> MockServer {
    MockServer::start(script, "127.0.0.1:0".parse().unwrap()).await.unwrap()
}

pub fn script(json: Value) -> MockScript {
    serde_json::from_value(json).unwrap()
}

/// A reqwest client (the crate's client installs the TLS provider reqwest needs).
pub fn http() -> reqwest::Client {
    let _ = LlmClient::new().unwrap();
    reqwest::Client::new()
}

/// What came back: status, content type, headers and body text.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub content_type: String,
    pub retry_after: Option<String>,
    pub body: String,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

/// POSTs `body` to `path` (with any query string) on the mock.
pub async fn post(server: &MockServer, path: &str, body: &Value) -> Answer {
    let response = http()
        .post(format!("{}{path}", server.base_url()))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(String::from);
    let content_type = header("content-type").unwrap_or_default();
    let retry_after = header("retry-after");
    let body = response.text().await.unwrap();
    Answer { status, content_type, retry_after, body }
}

/// One server-sent event: its `event:` name (empty without one) and `data:` JSON (a
/// string when not JSON, like `[DONE]`).
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    pub name: String,
    pub data: Value,
}

pub fn events(body: &str) -> Vec<Event> {
    body.split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let mut event = Event { name: String::new(), data: Value::Null };
            for line in block.lines() {
                if let Some(name) = line.strip_prefix("event: ") {
                    event.name = name.to_string();
                } else if let Some(data) = line.strip_prefix("data: ") {
                    event.data = serde_json::from_str(data).unwrap_or_else(|_| json!(data));
                }
            }
            event
        })
        .collect()
}

/// Event names with each run of one name shortened to `name*`: the shape of a stream
/// whatever the number of delta pieces.
pub fn shape(events: &[Event]) -> Vec<String> {
    let mut shape: Vec<String> = Vec::new();
    for (i, e) in events.iter().enumerate() {
        let repeated =
            events.get(i + 1).is_some_and(|next| next.name == e.name) || (i > 0 && events[i - 1].name == e.name);
        let name = if repeated { format!("{}*", e.name) } else { e.name.clone() };
        if shape.last() != Some(&name) {
            shape.push(name);
        }
    }
    shape
}

/// An Anthropic stream reassembled into the message it carries (`content` blocks with
/// parsed tool inputs, `stop_reason`).
pub fn anthropic_message(body: &str) -> Value {
    let mut message = json!({});
    let mut partial: Vec<String> = Vec::new();
    for e in events(body) {
        let index = e.data["index"].as_u64().unwrap_or(0) as usize;
        match e.name.as_str() {
            "message_start" => message = e.data["message"].clone(),
            "content_block_start" => {
                message["content"].as_array_mut().unwrap().push(e.data["content_block"].clone());
                partial.push(String::new());
            }
            "content_block_delta" => match e.data["delta"]["type"].as_str() {
                Some("text_delta") => {
                    let block = &mut message["content"][index];
                    let text =
                        format!("{}{}", block["text"].as_str().unwrap(), e.data["delta"]["text"].as_str().unwrap());
                    block["text"] = json!(text);
                }
                _ => partial[index].push_str(e.data["delta"]["partial_json"].as_str().unwrap()),
            },
            "content_block_stop" if message["content"][index]["type"] == "tool_use" => {
                message["content"][index]["input"] = serde_json::from_str(&partial[index]).unwrap();
            }
            "message_delta" => message["stop_reason"] = e.data["delta"]["stop_reason"].clone(),
            _ => {}
        }
    }
    message
}

/// A chat-completions stream reassembled into its assistant message (`content`,
/// `tool_calls` with whole `arguments`).
pub fn chat_message(body: &str) -> Value {
    let mut content = String::new();
    let mut calls: Vec<Value> = Vec::new();
    for e in events(body) {
        let Some(delta) = e.data["choices"].get(0).map(|c| c["delta"].clone()) else { continue };
        if let Some(text) = delta["content"].as_str() {
            content.push_str(text);
        }
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            let k = call["index"].as_u64().unwrap() as usize;
            if k == calls.len() {
                calls.push(json!({"id": call["id"], "type": "function",
                    "function": {"name": call["function"]["name"], "arguments": ""}}));
            }
            let args = format!(
                "{}{}",
                calls[k]["function"]["arguments"].as_str().unwrap(),
                call["function"]["arguments"].as_str().unwrap_or_default()
            );
            calls[k]["function"]["arguments"] = json!(args);
        }
    }
    let mut message = json!({"role": "assistant", "content": content});
    if !calls.is_empty() {
        message["tool_calls"] = json!(calls);
    }
    message
}

/// The complete items of a Responses API stream (`response.output_item.done`).
pub fn responses_items(body: &str) -> Vec<Value> {
    events(body).into_iter().filter(|e| e.name == "response.output_item.done").map(|e| e.data["item"].clone()).collect()
}

/// Writes `request` on a fresh connection and reads until the server closes it.
pub async fn raw_exchange(server: &MockServer, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(server.addr()).await.unwrap();
    stream.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    String::from_utf8(answer).unwrap()
}
