//! Reading a JSON-lines stream: numbering the lines, telling a JSON object from a banner,
//! a truncated object or garbage, and reading fields without trusting their types.
//!
//! Shared by every parser of a JSON-emitting CLI so they all report unreadable lines the
//! same way and none of them can panic on a field of an unexpected type.

use serde_json::{Map, Value};

use crate::event::AgentEvent;

/// One line of a JSON-lines stream, classified.
pub(crate) enum JsonLine {
    /// Empty or whitespace only: nothing to report.
    Blank,
    Object(Map<String, Value>),
    /// Not a JSON object; the event says why.
    Unreadable(AgentEvent),
}

/// Numbers the lines of one stream (1-based, every line counted, blank ones included).
#[derive(Default)]
pub(crate) struct JsonLines {
    line_no: usize,
}

/// How much of an unreadable line its `Unparsed` reason quotes.
const QUOTE_LIMIT: usize = 80;

impl JsonLines {
    pub(crate) fn read(&mut self, line: &str) -> JsonLine {
        self.line_no += 1;
        // A BOM or a CRLF terminator is transport noise, not content.
        let text = line.trim_start_matches('\u{feff}').trim();
        if text.is_empty() {
            return JsonLine::Blank;
        }
        let reason = if !text.starts_with('{') {
            format!("not JSON: {}", quote(text))
        } else {
            match serde_json::from_str::<Value>(text) {
                Ok(Value::Object(obj)) => return JsonLine::Object(obj),
                Ok(_) => "not a JSON object".to_string(),
                Err(e) if e.is_eof() => format!("truncated JSON ({e})"),
                Err(e) => format!("malformed JSON ({e})"),
            }
        };
        JsonLine::Unreadable(AgentEvent::Unparsed { line: self.line_no, reason })
    }

    /// The next line as a JSON object, or the events to report instead (none for a blank
    /// line, the reason for an unreadable one).
    pub(crate) fn object(&mut self, line: &str) -> Result<Value, Vec<AgentEvent>> {
        match self.read(line) {
            JsonLine::Object(obj) => Ok(Value::Object(obj)),
            JsonLine::Blank => Err(Vec::new()),
            JsonLine::Unreadable(event) => Err(vec![event]),
        }
    }
}

/// The start of `text`, for a diagnostic.
fn quote(text: &str) -> String {
    match text.char_indices().nth(QUOTE_LIMIT) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// The string at `pointer` (JSON Pointer syntax), if it is a string.
pub(crate) fn text<'a>(value: &'a Value, pointer: &str) -> Option<&'a str> {
    value.pointer(pointer).and_then(Value::as_str)
}

/// The non-empty string at `pointer`.
pub(crate) fn non_empty_text<'a>(value: &'a Value, pointer: &str) -> Option<&'a str> {
    text(value, pointer).filter(|s| !s.is_empty())
}

/// The count at `pointer`; 0 when absent, negative or not a number (a token count the
/// CLI did not report adds nothing).
pub(crate) fn count(value: &Value, pointer: &str) -> u64 {
    value
        .pointer(pointer)
        .and_then(|v| v.as_u64().or_else(|| v.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64)))
        .unwrap_or(0)
}

/// The boolean at `pointer`, if it is one.
pub(crate) fn flag(value: &Value, pointer: &str) -> Option<bool> {
    value.pointer(pointer).and_then(Value::as_bool)
}

/// The integer at `pointer` as an exit code, if it is one that fits.
pub(crate) fn exit_code(value: &Value, pointer: &str) -> Option<i32> {
    value.pointer(pointer).and_then(Value::as_i64).and_then(|n| i32::try_from(n).ok())
}

/// A tool's output as text: a string as is, a list of text blocks joined, anything else
/// as compact JSON.
pub(crate) fn content_text(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => s.clone(),
                other => text(other, "/text").map_or_else(|| other.to_string(), str::to_string),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn reason(event: JsonLine) -> (usize, String) {
        match event {
            JsonLine::Unreadable(AgentEvent::Unparsed { line, reason }) => (line, reason),
            JsonLine::Object(o) => panic!("parsed {o:?}"),
            _ => panic!("not unreadable"),
        }
    }

    #[test]
    fn classifies_lines_and_counts_every_one() {
        let mut lines = JsonLines::default();
        assert!(matches!(lines.read(""), JsonLine::Blank));
        assert!(matches!(lines.read("{\"type\":\"x\"}\r"), JsonLine::Object(_)));
        let (n, why) = reason(lines.read("YOLO mode is enabled."));
        assert_eq!(n, 3);
        assert_eq!(why, "not JSON: YOLO mode is enabled.");
        let (n, why) = reason(lines.read("{\"type\":\"result\",\"usage\":{\"input"));
        assert_eq!(n, 4);
        assert!(why.starts_with("truncated JSON"), "{why}");
        let (_, why) = reason(lines.read("{\"a\":1,}"));
        assert!(why.starts_with("malformed JSON"), "{why}");
        let (_, why) = reason(lines.read(&"x".repeat(200)));
        assert_eq!(why.chars().count(), "not JSON: ".len() + QUOTE_LIMIT + 1);
    }

    #[test]
    fn field_readers_never_trust_types() {
        let v = json!({"n": 5, "neg": -1, "f": 2.0, "s": "x", "e": "", "b": true, "code": 300000000000i64,
                       "blocks": [{"type": "text", "text": "a"}, "b", {"type": "image"}]});
        assert_eq!(count(&v, "/n"), 5);
        assert_eq!(count(&v, "/neg"), 0);
        assert_eq!(count(&v, "/f"), 2);
        assert_eq!(count(&v, "/s"), 0);
        assert_eq!(count(&v, "/missing"), 0);
        assert_eq!(text(&v, "/n"), None);
        assert_eq!(non_empty_text(&v, "/e"), None);
        assert_eq!(flag(&v, "/b"), Some(true));
        assert_eq!(exit_code(&v, "/n"), Some(5));
        assert_eq!(exit_code(&v, "/code"), None);
        assert_eq!(content_text(&v["blocks"]), "a\nb\n{\"type\":\"image\"}");
        assert_eq!(content_text(&Value::Null), "");
    }
}
