//! The table `arbiter config show` prints, derived from [`RunSettings`] itself: every field
//! that is a [`Sourced`] value is a row, in the order the type declares them, so a new
//! setting appears in the table the moment it exists.

use std::fmt::Write as _;

use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::*;

/// One row: the setting's key, its value as shown, and where it came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Row {
    pub key: String,
    pub value: String,
    pub origin: Origin,
}

impl RunSettings {
    /// The rows of `arbiter config show`: each setting with its value and its origin.
    pub fn rows(&self) -> Vec<Row> {
        // Serialized, the fields come in the order the struct declares them; read back as
        // an ordered list of fields, that order is kept.
        let Ok(text) = serde_json::to_string(self) else { return Vec::new() };
        let Ok(Fields(fields)) = serde_json::from_str::<Fields>(&text) else { return Vec::new() };
        fields
            .into_iter()
            .filter_map(|(key, field)| {
                let Value::Object(sourced) = field else { return None };
                let origin = serde_json::from_value::<Origin>(sourced.get("origin")?.clone()).ok()?;
                let value = shown(&key, sourced.get("value")?);
                Some(Row { key, value, origin })
            })
            .collect()
    }
}

/// A setting's value as the table shows it: the glob and rule lists by their size, the
/// patch limits in words, the sandbox's paths and the apply mode as their flags write them,
/// everything else as written.
fn shown(key: &str, value: &Value) -> String {
    match (key, value) {
        ("protected_paths" | "build_outputs", Value::Array(globs)) => format!("{} globs", globs.len()),
        ("cross_test_rules", Value::Array(rules)) => format!("{} rules", rules.len()),
        ("limits", Value::Object(l)) => format!(
            "patch ≤ {} bytes, ≤ {} files, each ≤ {} bytes",
            l.get("max_patch_bytes").map_or_else(String::new, |v| shown("", v)),
            l.get("max_patch_files").map_or_else(String::new, |v| shown("", v)),
            l.get("max_file_bytes").map_or_else(String::new, |v| shown("", v)),
        ),
        ("sandbox_paths", Value::Object(p)) => format!(
            "writable {}, hidden {}",
            p.get("writable").map_or_else(String::new, |v| shown("", v)),
            p.get("hidden").map_or_else(String::new, |v| shown("", v)),
        ),
        ("apply", mode) => {
            serde_json::from_value::<ApplyMode>(mode.clone()).map_or_else(|_| mode.to_string(), |m| m.to_string())
        }
        (_, Value::Null) => "(none)".into(),
        (_, Value::String(s)) => s.clone(),
        (_, Value::Array(items)) => {
            let items: Vec<String> = items.iter().map(|v| format!("{:?}", shown("", v))).collect();
            format!("[{}]", items.join(", "))
        }
        (_, Value::Object(fields)) => {
            let mut text = String::new();
            for (i, (k, v)) in fields.iter().enumerate() {
                let _ = write!(text, "{}{k} {}", if i == 0 { "" } else { ", " }, shown("", v));
            }
            text
        }
        (_, other) => other.to_string(),
    }
}

/// A JSON object's fields in the order they were written.
struct Fields(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for Fields {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct InOrder;
        impl<'de> Visitor<'de> for InOrder {
            type Value = Fields;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields, A::Error> {
                let mut fields = Vec::new();
                while let Some(entry) = map.next_entry::<String, Value>()? {
                    fields.push(entry);
                }
                Ok(Fields(fields))
            }
        }
        d.deserialize_map(InOrder)
    }
}
