//! Text from outside (a worker's report, an agent's reason, a plan's title, a patch) made
//! safe to show: control characters and the invisible characters that reorder or hide text
//! (bidirectional overrides and isolates, zero-width characters — "Trojan Source") are
//! written as escapes (`\u{1b}`, `\u{202e}`), so what a person reads is what the bytes say.
//! Such text is an [`Untrusted`] wherever arbiter holds it to show; every place that shows
//! text to a person (the printer, the logs, the report, the viewer, the dashboards) also
//! passes what it writes through [`visible`], so a message that quoted such text as a
//! plain string still cannot drive a terminal.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Text that came from outside arbiter — a file name a candidate chose, a reason an agent
/// gave, a test's name, a model's words, a plan's title, a worker's report — as a type of its
/// own: shown (`{}`), it is one line with its control, bidirectional and invisible characters
/// escaped, so no message that quotes it can forget to. Stored and sent as the plain string
/// it is; [`Untrusted::raw`] is for what must use its bytes (a file to open), never for a
/// person to read.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Untrusted(String);

impl Untrusted {
    pub fn new(text: impl Into<String>) -> Self {
        Untrusted(text.into())
    }

    /// The text as it came, for what must use its bytes (never to show).
    pub fn raw(&self) -> &str {
        &self.0
    }

    /// Whether it holds `pattern`.
    pub fn contains(&self, pattern: &str) -> bool {
        self.0.contains(pattern)
    }

    /// Whether it says nothing but white space.
    pub fn is_blank(&self) -> bool {
        self.0.trim().is_empty()
    }

    /// Shown over several lines: line breaks and tabs kept, everything else escaped.
    pub fn visible(&self) -> String {
        visible(&self.0)
    }
}

impl fmt::Display for Untrusted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&one_line(&self.0))
    }
}

impl fmt::Debug for Untrusted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", one_line(&self.0))
    }
}

impl From<String> for Untrusted {
    fn from(text: String) -> Self {
        Untrusted(text)
    }
}

impl From<&str> for Untrusted {
    fn from(text: &str) -> Self {
        Untrusted(text.to_string())
    }
}

impl PartialEq<str> for Untrusted {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for Untrusted {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// Whether `c` changes how the text around it reads without showing itself.
pub fn invisible(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
}

fn escaped(text: &str, keep: impl Fn(char) -> bool) -> String {
    if !text.chars().any(|c| (c.is_control() || invisible(c)) && !keep(c)) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() && !keep(c) {
            out.extend(c.escape_default());
        } else if invisible(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// On one line: every control character escaped, line breaks too (a terminal table, a log).
pub fn one_line(text: &str) -> String {
    escaped(text, |_| false)
}

/// Over several lines: line breaks and tabs kept, every other control and invisible
/// character escaped (a page, a block of output).
pub fn visible(text: &str) -> String {
    escaped(text, |c| c == '\n' || c == '\t')
}

/// Free text (an agent's reason) as every store keeps it: a NUL character, which Postgres
/// holds in no text column, written as `\u{0}`; everything else as it is.
pub fn storable(text: &str) -> String {
    text.replace('\0', "\\u{0}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_and_controlling_characters_are_shown() {
        assert_eq!(one_line("a\u{1b}[2Jb\nc"), "a\\u{1b}[2Jb\\nc");
        assert_eq!(visible("a\nb\tc\u{7}"), "a\nb\tc\\u{7}");
        // A right-to-left override that would show `admin` as something else, and a
        // zero-width space inside a name.
        assert_eq!(visible("if user == \u{202e}nimda\u{202c}"), "if user == \\u{202e}nimda\\u{202c}");
        assert_eq!(one_line("ad\u{200b}min"), "ad\\u{200b}min");
        assert_eq!(visible("plain ünïcode ✓"), "plain ünïcode ✓");
    }

    #[test]
    fn untrusted_text_shows_escaped_and_keeps_its_bytes() {
        let name = Untrusted::new("lnk\u{1b}]0;pwned\u{7}\u{1b}[2J\r\u{202e}txt.exe");
        assert_eq!(name.to_string(), "lnk\\u{1b}]0;pwned\\u{7}\\u{1b}[2J\\r\\u{202e}txt.exe");
        assert_eq!(format!("rejected: {name} is a link"), format!("rejected: {} is a link", one_line(name.raw())));
        assert!(format!("{name:?}").contains("\\u{1b}"));
        assert_eq!(name.raw(), "lnk\u{1b}]0;pwned\u{7}\u{1b}[2J\r\u{202e}txt.exe");
        // The wire and the disk keep the text as it is.
        let json = serde_json::to_string(&name).unwrap();
        assert_eq!(serde_json::from_str::<Untrusted>(&json).unwrap(), name);
        assert_eq!(json, serde_json::to_string(name.raw()).unwrap());
        // Escaping is idempotent: a message made of shown text shows the same.
        assert_eq!(Untrusted::new(name.to_string()).to_string(), name.to_string());
    }

    #[test]
    fn text_is_storable_once_its_nul_characters_are_written_out() {
        assert_eq!(storable("exit 1: a\0b"), "exit 1: a\\u{0}b");
        assert_eq!(storable("plain ünïcode ✓"), "plain ünïcode ✓");
    }
}
