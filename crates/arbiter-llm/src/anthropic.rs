//! The Anthropic Messages wire format: the request body (system as a top-level field, tool
//! results as `tool_result` blocks of a user message), the headers (`x-api-key`,
//! `anthropic-version`), and the parsing of both a streamed answer (`StreamParser` over the
//! `message_start` … `message_stop` event sequence) and a single JSON answer (`parse_body`).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::sse::SseEvent;
use crate::types::{ChatRequest, Endpoint, Message, StopReason, ToolCall, Usage};
use crate::wire::{Completion, WireError, check_arguments, count, parse_arguments, shorten};

/// The `anthropic-version` header value.
pub const API_VERSION: &str = "2023-06-01";

/// The JSON body of `POST {base}/v1/messages`. Consecutive turns of the same role are
/// merged into one message (the API wants user and assistant to alternate).
pub fn build_body(endpoint: &Endpoint, request: &ChatRequest, stream: bool) -> Value {
    let mut turns: Vec<(&str, Vec<Value>)> = Vec::new();
    for message in &request.messages {
        let (role, blocks) = match message {
            Message::User(text) => ("user", vec![json!({"type": "text", "text": text})]),
            Message::Assistant { text, tool_calls } => {
                let mut blocks = Vec::new();
                if !text.is_empty() {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for c in tool_calls {
                    blocks.push(json!({"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}));
                }
                ("assistant", blocks)
            }
            Message::ToolResult { tool_call_id, content, is_error } => {
                let mut block = json!({"type": "tool_result", "tool_use_id": tool_call_id, "content": content});
                if *is_error {
                    block["is_error"] = json!(true);
                }
                ("user", vec![block])
            }
        };
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last, existing)) if *last == role => existing.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    let messages: Vec<Value> =
        turns.into_iter().map(|(role, content)| json!({"role": role, "content": content})).collect();
    let mut body = json!({
        "model": endpoint.model,
        "max_tokens": request.max_tokens.unwrap_or(endpoint.max_tokens),
        "messages": messages,
    });
    if let Some(system) = &request.system {
        body["system"] = json!(system);
    }
    if let Some(t) = request.temperature {
        body["temperature"] = json!(t);
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
    }
    if stream {
        body["stream"] = json!(true);
    }
    body
}

/// The request headers; the key goes only here.
pub fn headers(endpoint: &Endpoint) -> Vec<(&'static str, String)> {
    let mut h = vec![("content-type", "application/json".to_string()), ("anthropic-version", API_VERSION.to_string())];
    if let Some(key) = &endpoint.api_key {
        h.push(("x-api-key", key.clone()));
    }
    h
}

/// Maps `stop_reason`.
pub fn stop_reason(reason: Option<&str>, has_tool_calls: bool) -> StopReason {
    match reason {
        Some("end_turn") => StopReason::EndTurn,
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens") => StopReason::MaxTokens,
        Some(other) => StopReason::Other(other.to_string()),
        None if has_tool_calls => StopReason::ToolUse,
        None => StopReason::EndTurn,
    }
}

/// Token counts as the API reports them: `input_tokens` excludes cache reads and writes,
/// which are counted apart.
#[derive(Clone, Copy, Debug, Default)]
struct RawUsage {
    input: u64,
    cache_read: u64,
    cache_write: u64,
    output: u64,
}

impl RawUsage {
    /// Updates with the fields present in `usage` (message_delta repeats only some).
    fn update(&mut self, usage: &Value) {
        let field = |name: &str| usage.get(name).and_then(Value::as_u64);
        if let Some(v) = field("input_tokens") {
            self.input = v;
        }
        if let Some(v) = field("cache_read_input_tokens") {
            self.cache_read = v;
        }
        if let Some(v) = field("cache_creation_input_tokens") {
            self.cache_write = v;
        }
        if let Some(v) = field("output_tokens") {
            self.output = v;
        }
    }

    /// Our `Usage`: every prompt token in `input_tokens`, cache reads also in `cached_tokens`.
    fn usage(self) -> Usage {
        Usage {
            input_tokens: self.input + self.cache_read + self.cache_write,
            output_tokens: self.output,
            cached_tokens: self.cache_read,
        }
    }
}

/// Reads a non-streamed `usage` object.
pub fn parse_usage(usage: &Value) -> Option<Usage> {
    usage.as_object()?;
    let mut raw = RawUsage::default();
    raw.update(usage);
    Some(raw.usage())
}

fn provider_error(value: &Value) -> WireError {
    let error = value.get("error").unwrap_or(value);
    let kind = error.get("type").and_then(Value::as_str).unwrap_or("error").to_string();
    let message = error.get("message").and_then(Value::as_str).map_or_else(|| error.to_string(), str::to_string);
    WireError::Provider { kind, message: shorten(&message, 500) }
}

#[derive(Debug)]
enum Block {
    Text(String),
    Tool { id: String, name: String, json: String, initial: Value },
    Other,
}

/// Accumulates a streamed answer, one SSE event at a time.
#[derive(Debug, Default)]
pub struct StreamParser {
    blocks: BTreeMap<u64, Block>,
    usage: Option<RawUsage>,
    stop: Option<String>,
    done: bool,
}

impl StreamParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// `message_stop` arrived: nothing more will come.
    pub fn is_done(&self) -> bool {
        self.done
    }

    pub fn on_event(&mut self, event: &SseEvent) -> Result<(), WireError> {
        let data = event.data.trim();
        if data.is_empty() || self.done {
            return Ok(());
        }
        let value: Value = serde_json::from_str(data).map_err(|e| {
            WireError::Malformed(format!("a stream event's data is not JSON ({e}): {}", shorten(data, 200)))
        })?;
        let kind = value.get("type").and_then(Value::as_str).or(event.event.as_deref()).unwrap_or_default();
        let index = count(value.get("index"));
        match kind {
            "message_start" => {
                if let Some(usage) = value.get("message").and_then(|m| m.get("usage")).filter(|u| u.is_object()) {
                    self.usage.get_or_insert_with(RawUsage::default).update(usage);
                }
            }
            "content_block_start" => {
                let block = value.get("content_block").unwrap_or(&Value::Null);
                let text = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or_default().to_string();
                let new = match block.get("type").and_then(Value::as_str) {
                    Some("text") => Block::Text(text("text")),
                    Some("tool_use") => Block::Tool {
                        id: text("id"),
                        name: text("name"),
                        json: String::new(),
                        initial: block.get("input").cloned().unwrap_or(Value::Null),
                    },
                    _ => Block::Other,
                };
                self.blocks.insert(index, new);
            }
            "content_block_delta" => {
                let delta = value.get("delta").unwrap_or(&Value::Null);
                let piece = |key: &str| delta.get(key).and_then(Value::as_str).unwrap_or_default();
                match (self.blocks.get_mut(&index), delta.get("type").and_then(Value::as_str)) {
                    (Some(Block::Text(text)), Some("text_delta")) => text.push_str(piece("text")),
                    (Some(Block::Tool { json, .. }), Some("input_json_delta")) => json.push_str(piece("partial_json")),
                    (None, Some("text_delta" | "input_json_delta")) => {
                        return Err(WireError::Malformed(format!("a delta arrived for unknown content block {index}")));
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(reason) = value.get("delta").and_then(|d| d.get("stop_reason")).and_then(Value::as_str) {
                    self.stop = Some(reason.to_string());
                }
                if let Some(usage) = value.get("usage").filter(|u| u.is_object()) {
                    self.usage.get_or_insert_with(RawUsage::default).update(usage);
                }
            }
            "message_stop" => self.done = true,
            "error" => return Err(provider_error(&value)),
            // ping, content_block_stop, and event types added later.
            _ => {}
        }
        Ok(())
    }

    /// The answer; fails when the stream ended before `message_stop` or a stop reason, or
    /// when a tool call's input is not a JSON object.
    pub fn finish(self) -> Result<Completion, WireError> {
        if !self.done && self.stop.is_none() {
            return Err(WireError::Truncated("the stream ended before message_stop".into()));
        }
        let mut text = String::new();
        let mut tool_calls = Vec::new();
        for (index, block) in self.blocks {
            match block {
                Block::Text(t) => text.push_str(&t),
                Block::Tool { id, name, json, initial } => {
                    let id = if id.is_empty() { format!("toolu_{index}") } else { id };
                    let arguments = if json.trim().is_empty() && initial.is_object() {
                        check_arguments(&name, &id, initial)?
                    } else {
                        parse_arguments(&name, &id, &json)?
                    };
                    tool_calls.push(ToolCall { id, name, arguments });
                }
                Block::Other => {}
            }
        }
        Ok(Completion {
            stop_reason: stop_reason(self.stop.as_deref(), !tool_calls.is_empty()),
            text,
            tool_calls,
            usage: self.usage.map(RawUsage::usage),
        })
    }
}

/// Parses a non-streamed `message` body.
pub fn parse_body(body: &Value) -> Result<Completion, WireError> {
    if body.get("type").and_then(Value::as_str) == Some("error") {
        return Err(provider_error(body));
    }
    let content = body.get("content").and_then(Value::as_array).ok_or_else(|| {
        WireError::Malformed(format!("the answer has no content: {}", shorten(&body.to_string(), 200)))
    })?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for (index, block) in content.iter().enumerate() {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => text.push_str(block.get("text").and_then(Value::as_str).unwrap_or_default()),
            Some("tool_use") => {
                let id =
                    block.get("id").and_then(Value::as_str).map_or_else(|| format!("toolu_{index}"), str::to_string);
                let name = block.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
                let input = block.get("input").cloned().unwrap_or_else(|| json!({}));
                let arguments = check_arguments(&name, &id, input)?;
                tool_calls.push(ToolCall { id, name, arguments });
            }
            _ => {}
        }
    }
    Ok(Completion {
        stop_reason: stop_reason(body.get("stop_reason").and_then(Value::as_str), !tool_calls.is_empty()),
        text,
        tool_calls,
        usage: body.get("usage").and_then(parse_usage),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sse::SseDecoder;
    use crate::types::Provider;

    fn feed(bytes: &[u8], cuts: &[usize]) -> Result<Completion, WireError> {
        let mut decoder = SseDecoder::new();
        let mut parser = StreamParser::new();
        let mut last = 0;
        for &cut in cuts.iter().chain(std::iter::once(&bytes.len())) {
            for event in decoder.push(&bytes[last..cut]).unwrap() {
                parser.on_event(&event)?;
            }
            last = cut;
        }
        parser.finish()
    }

    const STREAM: &str = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":6,\"output_tokens\":1,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":4}}}\n\n",
        "event: ping\ndata: {\"type\":\"ping\"}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Voilà \"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"𝄞✓\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_x\",\"name\":\"edit\",\"input\":{}}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"path\\\": \\\"b\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"é.txt\\\"}\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":9}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );

    #[test]
    fn the_event_sequence_reassembles_at_every_split() {
        let bytes = STREAM.as_bytes();
        let expected = feed(bytes, &[]).unwrap();
        assert_eq!(expected.text, "Voilà 𝄞✓");
        assert_eq!(
            expected.tool_calls,
            vec![ToolCall { id: "toolu_x".into(), name: "edit".into(), arguments: json!({"path": "bé.txt"}) }]
        );
        assert_eq!(expected.stop_reason, StopReason::ToolUse);
        assert_eq!(expected.usage, Some(Usage { input_tokens: 10, output_tokens: 9, cached_tokens: 4 }));
        for cut in 1..bytes.len() {
            assert_eq!(feed(bytes, &[cut]).unwrap(), expected, "split at {cut}");
        }
        let every: Vec<usize> = (1..bytes.len()).collect();
        assert_eq!(feed(bytes, &every).unwrap(), expected);
    }

    #[test]
    fn error_events_and_truncation_are_reported() {
        let s = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
        assert_eq!(
            feed(s.as_bytes(), &[]),
            Err(WireError::Provider { kind: "overloaded_error".into(), message: "Overloaded".into() })
        );
        let cut = &STREAM[..STREAM.find("event: message_delta").unwrap()];
        assert!(matches!(feed(cut.as_bytes(), &[]), Err(WireError::Truncated(_))));
    }

    #[test]
    fn body_merges_tool_results_into_one_user_turn() {
        let request = ChatRequest {
            system: Some("sys".into()),
            messages: vec![
                Message::user("go"),
                Message::Assistant {
                    text: "ok".into(),
                    tool_calls: vec![
                        ToolCall { id: "t1".into(), name: "a".into(), arguments: json!({}) },
                        ToolCall { id: "t2".into(), name: "b".into(), arguments: json!({"x": 1}) },
                    ],
                },
                Message::ToolResult { tool_call_id: "t1".into(), content: "done".into(), is_error: false },
                Message::ToolResult { tool_call_id: "t2".into(), content: "boom".into(), is_error: true },
            ],
            tools: vec![],
            temperature: None,
            max_tokens: Some(100),
        };
        let b = build_body(&Endpoint::new("a", Provider::Anthropic, "claude"), &request, true);
        assert_eq!(b["system"], json!("sys"));
        assert_eq!(b["max_tokens"], json!(100));
        assert_eq!(b["stream"], json!(true));
        let messages = b["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 3);
        assert_eq!(messages[1]["content"][2], json!({"type": "tool_use", "id": "t2", "name": "b", "input": {"x": 1}}));
        assert_eq!(
            messages[2],
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "done"},
                {"type": "tool_result", "tool_use_id": "t2", "content": "boom", "is_error": true}]})
        );
    }

    #[test]
    fn non_streamed_body_parses() {
        let body = json!({"type": "message", "content": [{"type": "text", "text": "hi"},
            {"type": "tool_use", "id": "t", "name": "f", "input": {"a": 1}}], "stop_reason": "tool_use",
            "usage": {"input_tokens": 3, "output_tokens": 2, "cache_read_input_tokens": 5}});
        let c = parse_body(&body).unwrap();
        assert_eq!(c.text, "hi");
        assert_eq!(c.usage, Some(Usage { input_tokens: 8, output_tokens: 2, cached_tokens: 5 }));
        let err = json!({"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}});
        assert!(matches!(parse_body(&err), Err(WireError::Provider { kind, .. }) if kind == "invalid_request_error"));
    }
}
