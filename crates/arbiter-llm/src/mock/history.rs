//! What a request's own history says, read the same way for the three wire formats: its
//! messages in order, the tools it declares, and how many assistant turns in it the mock
//! itself produced (history turn selection).

use serde_json::Value;

use super::Api;

/// The marker in every tool-call id the mock generates in history mode
/// (`call_mock_t2_r5_0`, `toolu_mock_t2_r5_0`).
pub(super) const MARKER: &str = "_mock_t";

/// One message of the history, reduced to what turn selection needs.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Entry {
    /// `system` or `developer`.
    System,
    User,
    /// A tool result: an Anthropic user message holding `tool_result` blocks, a chat
    /// `tool` message, a Responses `*_output` item.
    ToolResult,
    /// An assistant turn: its text and the ids of its tool calls. Consecutive Responses
    /// output items (message, calls, reasoning) make one turn.
    Assistant {
        text: String,
        ids: Vec<String>,
    },
    /// Anything else (an unknown role or item type).
    Other,
}

/// A tool the request declares.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Declared {
    pub name: String,
    /// A Responses API custom (freeform) tool: called with raw text, not JSON.
    pub custom: bool,
}

/// A request's history and tools.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct History {
    pub entries: Vec<Entry>,
    pub tools: Vec<Declared>,
}

impl History {
    pub fn read(api: Api, body: &Value) -> History {
        let mut entries = Vec::new();
        match api {
            Api::Anthropic => {
                for message in array(body, "messages") {
                    entries.push(anthropic_entry(message));
                }
            }
            Api::OpenAi => {
                for message in array(body, "messages") {
                    entries.push(chat_entry(message));
                }
            }
            Api::Responses => match body.get("input") {
                Some(Value::String(_)) => entries.push(Entry::User),
                _ => {
                    for item in array(body, "input") {
                        push_responses_item(&mut entries, item);
                    }
                }
            },
        }
        let mut tools = Vec::new();
        collect_tools(array(body, "tools"), api == Api::Responses, &mut tools);
        History { entries, tools }
    }

    /// Whether the last message that is not a system message is a user message or a tool
    /// result: only such a request is given a scripted turn in history mode.
    pub fn awaits_answer(&self) -> bool {
        matches!(
            self.entries.iter().rev().find(|e| !matches!(e, Entry::System | Entry::Other)),
            Some(Entry::User | Entry::ToolResult)
        )
    }

    /// The assistant turns the mock produced: those with a tool-call id carrying the
    /// mock's marker or equal to one of `ids`, or whose text is exactly (ignoring
    /// surrounding whitespace) one of `texts`.
    pub fn mock_turns(&self, texts: &[&str], ids: &[&str]) -> usize {
        self.entries
            .iter()
            .filter(|e| match e {
                Entry::Assistant { text, ids: seen } => {
                    seen.iter().any(|id| id.contains(MARKER) || ids.contains(&id.as_str()))
                        || (!text.trim().is_empty() && texts.contains(&text.trim()))
                }
                _ => false,
            })
            .count()
    }

    pub fn declares(&self, name: &str) -> bool {
        self.tools.iter().any(|t| t.name == name)
    }

    pub fn is_custom(&self, name: &str) -> bool {
        self.tools.iter().any(|t| t.name == name && t.custom)
    }
}

fn array<'a>(value: &'a Value, key: &str) -> &'a [Value] {
    value.get(key).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn role(message: &Value) -> &str {
    message.get("role").and_then(Value::as_str).unwrap_or_default()
}

fn kind(value: &Value) -> &str {
    value.get("type").and_then(Value::as_str).unwrap_or_default()
}

/// The text of a `content` that is a string or a list of parts with `text`.
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect(),
        _ => String::new(),
    }
}

fn anthropic_entry(message: &Value) -> Entry {
    let blocks = array(message, "content");
    match role(message) {
        "system" => Entry::System,
        "user" if blocks.iter().any(|b| kind(b) == "tool_result") => Entry::ToolResult,
        "user" => Entry::User,
        "assistant" => Entry::Assistant {
            text: match message.get("content") {
                Some(Value::String(text)) => text.clone(),
                _ => blocks.iter().filter(|b| kind(b) == "text").filter_map(|b| b["text"].as_str()).collect(),
            },
            ids: blocks.iter().filter_map(|b| b.get("id").and_then(Value::as_str)).map(String::from).collect(),
        },
        _ => Entry::Other,
    }
}

fn chat_entry(message: &Value) -> Entry {
    match role(message) {
        "system" | "developer" => Entry::System,
        "user" => Entry::User,
        "tool" | "function" => Entry::ToolResult,
        "assistant" => Entry::Assistant {
            text: content_text(message.get("content")),
            ids: array(message, "tool_calls")
                .iter()
                .filter_map(|c| c.get("id").and_then(Value::as_str))
                .map(String::from)
                .collect(),
        },
        _ => Entry::Other,
    }
}

/// Responses `input` items: messages (typed or not), `*_call` items the model produced,
/// their `*_output` items, `reasoning`.
fn push_responses_item(entries: &mut Vec<Entry>, item: &Value) {
    let item_kind = kind(item);
    let (text, ids) = match item_kind {
        "message" | "" => match role(item) {
            "system" | "developer" => return entries.push(Entry::System),
            "user" => return entries.push(Entry::User),
            "assistant" => (content_text(item.get("content")), Vec::new()),
            _ => return entries.push(Entry::Other),
        },
        "reasoning" => (String::new(), Vec::new()),
        k if k.ends_with("_output") => return entries.push(Entry::ToolResult),
        k if k.ends_with("_call") => {
            let ids = ["call_id", "id"].iter().filter_map(|key| item.get(*key).and_then(Value::as_str));
            (String::new(), ids.map(String::from).collect())
        }
        _ => return entries.push(Entry::Other),
    };
    if let Some(Entry::Assistant { text: turn_text, ids: turn_ids }) = entries.last_mut() {
        turn_text.push_str(&text);
        turn_ids.extend(ids);
    } else {
        entries.push(Entry::Assistant { text, ids });
    }
}

/// `tools[]` of any format: `name` (Anthropic, Responses) or `function.name` (chat);
/// in the Responses API `"type": "custom"` marks a freeform tool (Anthropic uses the same
/// word for ordinary tools); nested `tools` lists (namespaces) count too.
fn collect_tools(tools: &[Value], freeform: bool, into: &mut Vec<Declared>) {
    for tool in tools {
        let name = tool.get("name").or_else(|| tool.get("function").and_then(|f| f.get("name")));
        if let Some(name) = name.and_then(Value::as_str) {
            into.push(Declared { name: name.to_string(), custom: freeform && kind(tool) == "custom" });
        }
        collect_tools(array(tool, "tools"), freeform, into);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_last_non_system_message_decides_and_mock_turns_are_recognised() {
        let body = json!({"tools": [{"name": "Read"}], "messages": [
            {"role": "user", "content": "fix it"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_mock_t1_r1_0", "name": "Read"}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_mock_t1_r1_0"}]},
            {"role": "assistant", "content": [{"type": "text", "text": " Done \n"}]},
            {"role": "assistant", "content": "not mine"},
            {"role": "user", "content": "and now?"},
            {"role": "system", "content": "reminder"}]});
        let h = History::read(Api::Anthropic, &body);
        assert!(h.awaits_answer());
        assert_eq!(h.mock_turns(&["Done"], &[]), 2);
        assert_eq!(h.mock_turns(&[], &[]), 1);
        assert!(h.declares("Read") && !h.declares("Edit") && !h.is_custom("Read"));
        let anthropic_custom = json!({"tools": [{"type": "custom", "name": "Read", "input_schema": {}}]});
        assert!(!History::read(Api::Anthropic, &anthropic_custom).is_custom("Read"));

        let body = json!({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]});
        assert!(!History::read(Api::OpenAi, &body).awaits_answer());
        assert!(!History::read(Api::OpenAi, &json!({})).awaits_answer());
    }

    #[test]
    fn consecutive_responses_items_are_one_turn() {
        let body = json!({"tools": [{"type": "function", "name": "exec_command"},
                                    {"type": "custom", "name": "apply_patch"},
                                    {"type": "namespace", "name": "ns", "tools": [{"type": "function", "name": "inner"}]}],
            "input": [
                {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "rules"}]},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix"}]},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Looking."}]},
                {"type": "function_call", "call_id": "call_mock_t1_r1_0", "name": "exec_command", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "call_mock_t1_r1_0", "output": "ok"},
                {"type": "custom_tool_call", "call_id": "scripted-id", "name": "apply_patch", "input": "…"},
                {"type": "custom_tool_call_output", "call_id": "scripted-id", "output": "done"}]});
        let h = History::read(Api::Responses, &body);
        assert_eq!(h.entries.len(), 6);
        assert!(h.awaits_answer());
        assert_eq!(h.mock_turns(&[], &[]), 1);
        assert_eq!(h.mock_turns(&[], &["scripted-id"]), 2);
        assert!(h.is_custom("apply_patch") && !h.is_custom("exec_command") && h.declares("inner"));
        assert!(History::read(Api::Responses, &json!({"input": "hi"})).awaits_answer());
    }
}
