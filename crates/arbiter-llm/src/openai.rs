//! The OpenAI Chat Completions wire format (api.openai.com and compatible servers): the
//! request body, the headers, and the parsing of both a streamed answer (`StreamParser`:
//! content and tool-call deltas accumulated by `index`, the final usage chunk) and a
//! single JSON answer (`parse_body`).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::sse::SseEvent;
use crate::types::{ChatRequest, Endpoint, Message, Provider, StopReason, ToolCall, Usage};
use crate::wire::{Completion, WireError, check_arguments, count, parse_arguments, shorten};

/// The JSON body of `POST {base}/chat/completions`.
pub fn build_body(endpoint: &Endpoint, request: &ChatRequest, stream: bool) -> Value {
    let mut messages = Vec::new();
    if let Some(system) = &request.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    for message in &request.messages {
        messages.push(match message {
            Message::User(text) => json!({"role": "user", "content": text}),
            Message::Assistant { text, tool_calls } => {
                let mut m = json!({"role": "assistant", "content": if text.is_empty() && !tool_calls.is_empty() { Value::Null } else { json!(text) }});
                if !tool_calls.is_empty() {
                    m["tool_calls"] = tool_calls
                        .iter()
                        .map(|c| {
                            json!({"id": c.id, "type": "function",
                                   "function": {"name": c.name, "arguments": c.arguments.to_string()}})
                        })
                        .collect();
                }
                m
            }
            // The format has no error flag: the content says it.
            Message::ToolResult { tool_call_id, content, is_error } => {
                let content = if *is_error { format!("[tool error] {content}") } else { content.clone() };
                json!({"role": "tool", "tool_call_id": tool_call_id, "content": content})
            }
        });
    }
    let mut body = json!({"model": endpoint.model, "messages": messages});
    let max_tokens = request.max_tokens.unwrap_or(endpoint.max_tokens);
    // api.openai.com deprecated `max_tokens` (reasoning models reject it); other servers
    // mostly know only `max_tokens`.
    let max_key = if endpoint.provider == Provider::OpenAi { "max_completion_tokens" } else { "max_tokens" };
    body[max_key] = json!(max_tokens);
    if let Some(t) = request.temperature {
        body["temperature"] = json!(t);
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
            .collect();
    }
    if stream {
        body["stream"] = json!(true);
        body["stream_options"] = json!({"include_usage": true});
    }
    body
}

/// The request headers; the key goes only here.
pub fn headers(endpoint: &Endpoint) -> Vec<(&'static str, String)> {
    let mut h = vec![("content-type", "application/json".to_string())];
    if let Some(key) = &endpoint.api_key {
        h.push(("authorization", format!("Bearer {key}")));
    }
    h
}

/// Maps `finish_reason`.
pub fn stop_reason(finish: Option<&str>, has_tool_calls: bool) -> StopReason {
    match finish {
        Some("stop") => StopReason::EndTurn,
        Some("tool_calls" | "function_call") => StopReason::ToolUse,
        Some("length") => StopReason::MaxTokens,
        Some(other) => StopReason::Other(other.to_string()),
        None if has_tool_calls => StopReason::ToolUse,
        None => StopReason::EndTurn,
    }
}

/// Reads a `usage` object (`prompt_tokens` includes `prompt_tokens_details.cached_tokens`).
pub fn parse_usage(usage: &Value) -> Option<Usage> {
    let obj = usage.as_object()?;
    Some(Usage {
        input_tokens: count(obj.get("prompt_tokens")),
        output_tokens: count(obj.get("completion_tokens")),
        cached_tokens: count(obj.get("prompt_tokens_details").and_then(|d| d.get("cached_tokens"))),
    })
}

fn provider_error(error: &Value) -> WireError {
    let kind = error
        .get("type")
        .and_then(Value::as_str)
        .or_else(|| error.get("code").and_then(Value::as_str))
        .unwrap_or("error")
        .to_string();
    let message = error.get("message").and_then(Value::as_str).map_or_else(|| error.to_string(), str::to_string);
    WireError::Provider { kind, message: shorten(&message, 500) }
}

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Accumulates a streamed answer, one SSE event at a time.
#[derive(Debug, Default)]
pub struct StreamParser {
    text: String,
    calls: BTreeMap<u64, PartialCall>,
    last_index: Option<u64>,
    finish: Option<String>,
    usage: Option<Usage>,
    done: bool,
}

impl StreamParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// `data: [DONE]` arrived: nothing more will come.
    pub fn is_done(&self) -> bool {
        self.done
    }

    pub fn on_event(&mut self, event: &SseEvent) -> Result<(), WireError> {
        let data = event.data.trim();
        if data.is_empty() || self.done {
            return Ok(());
        }
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| WireError::Malformed(format!("a stream chunk is not JSON ({e}): {}", shorten(data, 200))))?;
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            return Err(provider_error(error));
        }
        if let Some(usage) = chunk.get("usage").and_then(parse_usage) {
            self.usage = Some(usage);
        }
        // The usage chunk carries `choices: []`, `null`, or none at all.
        let Some(choice) = chunk.get("choices").and_then(Value::as_array).and_then(|c| c.first()) else {
            return Ok(());
        };
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish = Some(reason.to_string());
        }
        let Some(delta) = choice.get("delta") else { return Ok(()) };
        if let Some(text) = delta.get("content").and_then(Value::as_str) {
            self.text.push_str(text);
        }
        for call in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
            self.on_tool_delta(call);
        }
        Ok(())
    }

    fn on_tool_delta(&mut self, call: &Value) {
        let id = call.get("id").and_then(Value::as_str).filter(|s| !s.is_empty());
        // Accumulate by `index`; a server that omits it starts a new call when a new id
        // appears and otherwise continues the last one.
        let index = match call.get("index").and_then(Value::as_u64) {
            Some(i) => i,
            None => match (self.last_index, id) {
                (Some(last), Some(id)) if self.calls.get(&last).is_some_and(|c| c.id != id) => {
                    self.calls.keys().next_back().map_or(0, |k| k + 1)
                }
                (Some(last), _) => last,
                (None, _) => 0,
            },
        };
        self.last_index = Some(index);
        let entry = self.calls.entry(index).or_default();
        if let Some(id) = id
            && entry.id.is_empty()
        {
            entry.id = id.to_string();
        }
        let function = call.get("function");
        if let Some(name) = function.and_then(|f| f.get("name")).and_then(Value::as_str)
            && entry.name.is_empty()
        {
            entry.name = name.to_string();
        }
        if let Some(arguments) = function.and_then(|f| f.get("arguments")).and_then(Value::as_str) {
            entry.arguments.push_str(arguments);
        }
    }

    /// The answer; fails when the stream ended before any finish reason or `[DONE]`, or
    /// when a tool call's arguments are not a JSON object.
    pub fn finish(self) -> Result<Completion, WireError> {
        if !self.done && self.finish.is_none() {
            return Err(WireError::Truncated("the stream ended before the answer was complete".into()));
        }
        let mut tool_calls = Vec::with_capacity(self.calls.len());
        for (index, call) in self.calls {
            let id = if call.id.is_empty() { format!("call_{index}") } else { call.id };
            let arguments = parse_arguments(&call.name, &id, &call.arguments)?;
            tool_calls.push(ToolCall { id, name: call.name, arguments });
        }
        let stop_reason = stop_reason(self.finish.as_deref(), !tool_calls.is_empty());
        Ok(Completion { text: self.text, tool_calls, stop_reason, usage: self.usage })
    }
}

/// Parses a non-streamed `chat.completion` body.
pub fn parse_body(body: &Value) -> Result<Completion, WireError> {
    if let Some(error) = body.get("error").filter(|e| !e.is_null()) {
        return Err(provider_error(error));
    }
    let choice = body.get("choices").and_then(Value::as_array).and_then(|c| c.first()).ok_or_else(|| {
        WireError::Malformed(format!("the answer has no choices: {}", shorten(&body.to_string(), 200)))
    })?;
    let message = choice.get("message").unwrap_or(&Value::Null);
    let text = match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect(),
        _ => String::new(),
    };
    let mut tool_calls = Vec::new();
    for (index, call) in message.get("tool_calls").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let id = call.get("id").and_then(Value::as_str).map_or_else(|| format!("call_{index}"), str::to_string);
        let function = call.get("function").unwrap_or(&Value::Null);
        let name = function.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
        let arguments = match function.get("arguments") {
            Some(Value::String(raw)) => parse_arguments(&name, &id, raw)?,
            Some(Value::Null) | None => parse_arguments(&name, &id, "")?,
            Some(other) => check_arguments(&name, &id, other.clone())?,
        };
        tool_calls.push(ToolCall { id, name, arguments });
    }
    let finish = choice.get("finish_reason").and_then(Value::as_str);
    Ok(Completion {
        stop_reason: stop_reason(finish, !tool_calls.is_empty()),
        text,
        tool_calls,
        usage: body.get("usage").and_then(parse_usage),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sse::SseDecoder;
    use crate::types::ToolSpec;

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
        if let Some(event) = decoder.finish() {
            parser.on_event(&event)?;
        }
        parser.finish()
    }

    const STREAM: &str = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Ré\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"sumé ✓\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":\"read\",\"arguments\":\"\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_b\",\"type\":\"function\",\"function\":{\"name\":\"write\",\"arguments\":\"{\\\"p\\\":\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"path\\\":\\\"a\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"function\":{\"arguments\":\"\\\"é\\\"}\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\".txt\\\"}\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":5,\"prompt_tokens_details\":{\"cached_tokens\":4}}}\n\n",
        "data: [DONE]\n\n",
    );

    #[test]
    fn interleaved_tool_deltas_reassemble_at_every_split() {
        let bytes = STREAM.as_bytes();
        let expected = feed(bytes, &[]).unwrap();
        assert_eq!(expected.text, "Résumé ✓");
        assert_eq!(expected.stop_reason, StopReason::ToolUse);
        assert_eq!(expected.usage, Some(Usage { input_tokens: 10, output_tokens: 5, cached_tokens: 4 }));
        assert_eq!(
            expected.tool_calls,
            vec![
                ToolCall { id: "call_a".into(), name: "read".into(), arguments: json!({"path": "a.txt"}) },
                ToolCall { id: "call_b".into(), name: "write".into(), arguments: json!({"p": "é"}) },
            ]
        );
        for cut in 1..bytes.len() {
            assert_eq!(feed(bytes, &[cut]).unwrap(), expected, "split at {cut}");
        }
        let every: Vec<usize> = (1..bytes.len()).collect();
        assert_eq!(feed(bytes, &every).unwrap(), expected);
    }

    #[test]
    fn null_choices_usage_chunk_and_bad_arguments() {
        let s = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: {\"choices\":null,\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}\n\n";
        let c = feed(s.as_bytes(), &[]).unwrap();
        assert_eq!(c.usage, Some(Usage { input_tokens: 3, output_tokens: 1, cached_tokens: 0 }));
        assert_eq!(c.stop_reason, StopReason::EndTurn);
        let bad = "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"x\",\"function\":{\"name\":\"f\",\"arguments\":\"{oops\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n";
        assert!(matches!(feed(bad.as_bytes(), &[]), Err(WireError::Malformed(m)) if m.contains("not valid JSON")));
        let cut = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n";
        assert!(matches!(feed(cut.as_bytes(), &[]), Err(WireError::Truncated(_))));
        let err = "data: {\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\"}}\n\n";
        assert_eq!(
            feed(err.as_bytes(), &[]),
            Err(WireError::Provider { kind: "server_error".into(), message: "overloaded".into() })
        );
    }

    #[test]
    fn body_carries_tools_results_and_the_right_token_limit() {
        let request = ChatRequest {
            system: Some("be brief".into()),
            messages: vec![
                Message::user("read a"),
                Message::Assistant {
                    text: String::new(),
                    tool_calls: vec![ToolCall { id: "c1".into(), name: "read".into(), arguments: json!({"p": "a"}) }],
                },
                Message::ToolResult { tool_call_id: "c1".into(), content: "no such file".into(), is_error: true },
            ],
            tools: vec![ToolSpec {
                name: "read".into(),
                description: "Read".into(),
                parameters: json!({"type": "object"}),
            }],
            temperature: Some(0.0),
            max_tokens: None,
        };
        let e = Endpoint::new("o", Provider::OpenAi, "gpt-x");
        let b = build_body(&e, &request, true);
        assert_eq!(b["max_completion_tokens"], json!(4096));
        assert_eq!(b["messages"][0], json!({"role": "system", "content": "be brief"}));
        assert_eq!(b["messages"][2]["content"], Value::Null);
        assert_eq!(b["messages"][2]["tool_calls"][0]["function"]["arguments"], json!("{\"p\":\"a\"}"));
        assert_eq!(
            b["messages"][3],
            json!({"role": "tool", "tool_call_id": "c1", "content": "[tool error] no such file"})
        );
        assert_eq!(b["tools"][0]["function"]["name"], json!("read"));
        assert_eq!(b["stream_options"], json!({"include_usage": true}));
        let e = Endpoint::new("c", Provider::OpenAiCompatible, "m");
        let b = build_body(&e, &request, false);
        assert_eq!(b["max_tokens"], json!(4096));
        assert!(b.get("stream").is_none());
    }

    #[test]
    fn non_streamed_body_parses() {
        let body = json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{\"x\":1}"}}]},
            "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": 7, "completion_tokens": 2}});
        let c = parse_body(&body).unwrap();
        assert_eq!(c.tool_calls[0].arguments, json!({"x": 1}));
        assert_eq!(c.stop_reason, StopReason::ToolUse);
        assert_eq!(c.usage.map(|u| u.input_tokens), Some(7));
        assert!(parse_body(&json!({"choices": []})).is_err());
    }
}
