//! A selected response made concrete for one request, in each wire format, whole or as
//! the frames of a stream.

use serde_json::{Value, json};

use super::history::History;
use super::script::MockResponse;
use crate::types::Usage;

/// A selected response made concrete for one request.
pub(super) struct Answer {
    number: usize,
    model: String,
    text: String,
    calls: Vec<Call>,
    stop: String,
    usage: Option<Usage>,
}

/// A tool call made concrete.
struct Call {
    id: String,
    name: String,
    /// The JSON arguments text.
    arguments: String,
    /// The raw input, when the request declares the tool as a custom (freeform) tool.
    custom: Option<String>,
}

impl Call {
    fn payload(&self) -> &str {
        self.custom.as_deref().unwrap_or(&self.arguments)
    }
}

impl Answer {
    /// Generated tool-call ids are `{id_base}_{k}`.
    pub fn new(
        response: &MockResponse,
        id_base: &str,
        history: &History,
        body: &Value,
        body_len: usize,
        number: usize,
    ) -> Answer {
        let calls: Vec<Call> = response
            .tool_calls
            .iter()
            .enumerate()
            .map(|(k, c)| Call {
                id: c.id.clone().unwrap_or_else(|| format!("{id_base}_{k}")),
                name: c.name.clone(),
                arguments: c.arguments_text(),
                custom: history.is_custom(&c.name).then(|| c.custom_input()),
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
                let out: usize = response.text.len() + calls.iter().map(|c| c.payload().len()).sum::<usize>();
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
                   "total_tokens": u.input_tokens.saturating_add(u.output_tokens),
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

    pub fn openai_body(&self) -> Value {
        let mut message = json!({"role": "assistant", "content": if self.text.is_empty() && !self.calls.is_empty() { Value::Null } else { json!(self.text) }});
        if !self.calls.is_empty() {
            message["tool_calls"] = self
                .calls
                .iter()
                .map(|Call { id, name, arguments: args, .. }| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}))
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

    pub fn openai_frames(&self, include_usage: bool) -> Vec<String> {
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
        for (k, Call { id: call_id, name, arguments: args, .. }) in self.calls.iter().enumerate() {
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

    pub fn anthropic_body(&self) -> Value {
        let mut content = Vec::new();
        if !self.text.is_empty() {
            content.push(json!({"type": "text", "text": self.text}));
        }
        for Call { id, name, arguments: args, .. } in &self.calls {
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

    pub fn anthropic_frames(&self) -> Vec<String> {
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
        for Call { id, name, arguments: args, .. } in &self.calls {
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

    /// Responses API usage; cached tokens are part of `input_tokens`.
    fn responses_usage(&self) -> Value {
        self.usage.map_or(Value::Null, |u| {
            json!({"input_tokens": u.input_tokens, "input_tokens_details": {"cached_tokens": u.cached_tokens},
                   "output_tokens": u.output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
                   "total_tokens": u.input_tokens.saturating_add(u.output_tokens)})
        })
    }

    /// The output items, complete: a `message` for the text, then a `function_call` or a
    /// `custom_tool_call` per tool call.
    fn responses_items(&self) -> Vec<Value> {
        let mut items = Vec::new();
        if !self.text.is_empty() {
            items.push(json!({"id": format!("msg_mock_{}", self.number), "type": "message", "status": "completed",
                "role": "assistant", "content": [{"type": "output_text", "text": self.text, "annotations": []}]}));
        }
        for (k, call) in self.calls.iter().enumerate() {
            items.push(match &call.custom {
                Some(input) => json!({"id": format!("ctc_mock_{}_{k}", self.number), "type": "custom_tool_call",
                    "status": "completed", "call_id": call.id, "name": call.name, "input": input}),
                None => json!({"id": format!("fc_mock_{}_{k}", self.number), "type": "function_call",
                    "status": "completed", "call_id": call.id, "name": call.name, "arguments": call.arguments}),
            });
        }
        items
    }

    fn responses_object(&self, status: &str, output: Vec<Value>, usage: Value) -> Value {
        let incomplete = (self.stop == "max_tokens").then(|| json!({"reason": "max_output_tokens"}));
        json!({"id": format!("resp_mock_{}", self.number), "object": "response", "created_at": 0,
            "status": status, "model": self.model, "output": output, "incomplete_details": incomplete,
            "error": null, "usage": usage})
    }

    /// The whole Responses API answer (`stream: false`).
    pub fn responses_body(&self) -> Value {
        let status = if self.stop == "max_tokens" { "incomplete" } else { "completed" };
        self.responses_object(status, self.responses_items(), self.responses_usage())
    }

    /// The Responses API stream: `response.created`; per output item
    /// `response.output_item.added`, its deltas (`response.output_text.delta` inside a
    /// content part, `response.function_call_arguments.delta`,
    /// `response.custom_tool_call_input.delta`) and their `.done`, then
    /// `response.output_item.done` with the complete item; last `response.completed`.
    pub fn responses_frames(&self) -> Vec<String> {
        let mut frames = Vec::new();
        let mut push = |mut value: Value| {
            let name = value["type"].as_str().unwrap_or_default().to_string();
            value["sequence_number"] = json!(frames.len());
            frames.push(format!("event: {name}\ndata: {value}\n\n"));
        };
        push(
            json!({"type": "response.created", "response": self.responses_object("in_progress", Vec::new(), Value::Null)}),
        );
        for (index, item) in self.responses_items().into_iter().enumerate() {
            let id = item["id"].clone();
            let mut added = item.clone();
            added["status"] = json!("in_progress");
            match item["type"].as_str() {
                Some("message") => {
                    added["content"] = json!([]);
                    push(json!({"type": "response.output_item.added", "output_index": index, "item": added}));
                    let part = |text: &str| json!({"type": "output_text", "text": text, "annotations": []});
                    push(json!({"type": "response.content_part.added", "item_id": id, "output_index": index,
                        "content_index": 0, "part": part("")}));
                    for piece in text_pieces(&self.text) {
                        push(json!({"type": "response.output_text.delta", "item_id": id, "output_index": index,
                            "content_index": 0, "delta": piece}));
                    }
                    push(json!({"type": "response.output_text.done", "item_id": id, "output_index": index,
                        "content_index": 0, "text": self.text}));
                    push(json!({"type": "response.content_part.done", "item_id": id, "output_index": index,
                        "content_index": 0, "part": part(&self.text)}));
                }
                Some("custom_tool_call") => {
                    let input = item["input"].as_str().unwrap_or_default().to_string();
                    added["input"] = json!("");
                    push(json!({"type": "response.output_item.added", "output_index": index, "item": added}));
                    for piece in awkward_pieces(&input) {
                        push(json!({"type": "response.custom_tool_call_input.delta", "item_id": id,
                            "output_index": index, "delta": piece}));
                    }
                    push(json!({"type": "response.custom_tool_call_input.done", "item_id": id,
                        "output_index": index, "input": input}));
                }
                _ => {
                    let arguments = item["arguments"].as_str().unwrap_or_default().to_string();
                    added["arguments"] = json!("");
                    push(json!({"type": "response.output_item.added", "output_index": index, "item": added}));
                    for piece in awkward_pieces(&arguments) {
                        push(json!({"type": "response.function_call_arguments.delta", "item_id": id,
                            "output_index": index, "delta": piece}));
                    }
                    push(json!({"type": "response.function_call_arguments.done", "item_id": id,
                        "output_index": index, "arguments": arguments}));
                }
            }
            push(json!({"type": "response.output_item.done", "output_index": index, "item": item}));
        }
        let done = self.responses_body();
        push(json!({"type": "response.completed", "response": done}));
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
