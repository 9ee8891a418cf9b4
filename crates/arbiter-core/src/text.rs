//! Text from outside (a worker's report, an agent's reason, a plan's title, a patch) made
//! safe to show: control characters and the invisible characters that reorder or hide text
//! (bidirectional overrides and isolates, zero-width characters — "Trojan Source") are
//! written as escapes (`\u{1b}`, `\u{202e}`), so what a person reads is what the bytes say.

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
    fn text_is_storable_once_its_nul_characters_are_written_out() {
        assert_eq!(storable("exit 1: a\0b"), "exit 1: a\\u{0}b");
        assert_eq!(storable("plain ünïcode ✓"), "plain ünïcode ✓");
    }
}
