//! A unified diff as highlighted HTML: added, removed, hunk and file lines coloured, and in
//! the code itself strings, comments, numbers and the keywords common to the languages
//! agents edit (Rust, Python, JavaScript/TypeScript, Go, C-like). Everything is escaped; the
//! highlighter only wraps escaped text in spans.

use std::fmt::Write;

use maud::{Markup, PreEscaped};

const KEYWORDS: &[&str] = &[
    "as",
    "async",
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "def",
    "default",
    "defer",
    "del",
    "do",
    "elif",
    "else",
    "enum",
    "except",
    "export",
    "extends",
    "false",
    "False",
    "finally",
    "fn",
    "for",
    "from",
    "func",
    "function",
    "go",
    "if",
    "impl",
    "import",
    "in",
    "interface",
    "is",
    "lambda",
    "let",
    "loop",
    "match",
    "mod",
    "mut",
    "new",
    "nil",
    "None",
    "not",
    "null",
    "or",
    "and",
    "package",
    "pass",
    "pub",
    "raise",
    "return",
    "self",
    "Self",
    "static",
    "struct",
    "super",
    "switch",
    "this",
    "throw",
    "trait",
    "true",
    "True",
    "try",
    "type",
    "undefined",
    "use",
    "var",
    "where",
    "while",
    "with",
    "yield",
];

/// Appends `s`, its control and invisible characters shown and its markup escaped (a line
/// of a diff keeps its tabs).
fn escape_into(out: &mut String, s: &str) {
    out.push_str(&arbiter_core::viewer::escape(&arbiter_core::text::visible(s)));
}

fn span(out: &mut String, class: &str, text: &str) {
    let _ = write!(out, "<span class=\"{class}\">");
    escape_into(out, text);
    out.push_str("</span>");
}

/// Highlights one line of code.
fn code(out: &mut String, line: &str) {
    let chars: Vec<(usize, char)> = line.char_indices().collect();
    let mut i = 0;
    let slice = |from: usize, to: usize| -> &str {
        let start = chars.get(from).map_or(line.len(), |c| c.0);
        let end = chars.get(to).map_or(line.len(), |c| c.0);
        &line[start..end]
    };
    while i < chars.len() {
        let c = chars[i].1;
        let next = chars.get(i + 1).map(|c| c.1);
        if c == '#' || (c == '/' && next == Some('/')) || (c == '-' && next == Some('-') && i == 0) {
            span(out, "com", slice(i, chars.len()));
            return;
        }
        if c == '"' || c == '\'' || c == '`' {
            let mut j = i + 1;
            while j < chars.len() && chars[j].1 != c {
                if chars[j].1 == '\\' {
                    j += 1;
                }
                j += 1;
            }
            let end = (j + 1).min(chars.len());
            span(out, "str", slice(i, end));
            i = end;
            continue;
        }
        if c.is_ascii_digit() && (i == 0 || !chars[i - 1].1.is_alphanumeric()) {
            let mut j = i;
            while j < chars.len() && (chars[j].1.is_ascii_alphanumeric() || chars[j].1 == '.' || chars[j].1 == '_') {
                j += 1;
            }
            span(out, "num", slice(i, j));
            i = j;
            continue;
        }
        if c.is_alphabetic() || c == '_' {
            let mut j = i;
            while j < chars.len() && (chars[j].1.is_alphanumeric() || chars[j].1 == '_') {
                j += 1;
            }
            let word = slice(i, j);
            if KEYWORDS.contains(&word) {
                span(out, "kw", word);
            } else {
                escape_into(out, word);
            }
            i = j;
            continue;
        }
        escape_into(out, slice(i, i + 1));
        i += 1;
    }
}

/// The lines git writes about a file (not its content).
const META: &[&str] = &[
    "+++",
    "---",
    "diff ",
    "index ",
    "new file mode",
    "deleted file mode",
    "old mode",
    "new mode",
    "similarity index",
    "dissimilarity index",
    "rename from",
    "rename to",
    "copy from",
    "copy to",
    "Binary files",
    "GIT binary patch",
];

/// The diff, highlighted.
pub fn highlighted_diff(diff: &str) -> Markup {
    let mut out = String::with_capacity(diff.len() * 2);
    for line in diff.lines() {
        if META.iter().any(|m| line.starts_with(m)) {
            span(&mut out, "meta", line);
        } else if line.starts_with("@@") {
            span(&mut out, "hunk", line);
        } else if let Some(rest) = line.strip_prefix('+') {
            out.push_str("<span class=\"add\">+");
            code(&mut out, rest);
            out.push_str("</span>");
        } else if let Some(rest) = line.strip_prefix('-') {
            out.push_str("<span class=\"del\">-");
            code(&mut out, rest);
            out.push_str("</span>");
        } else {
            code(&mut out, line);
        }
        out.push('\n');
    }
    PreEscaped(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diffs_are_highlighted_and_escaped() {
        let diff = "diff --git a/x.py b/x.py\n@@ -1 +1 @@\n-    return a - b  # wrong\n+    return a + b if a > 0 else \"<b>\"\n";
        let html = highlighted_diff(diff).into_string();
        assert!(html.contains("<span class=\"meta\">diff --git"), "{html}");
        assert!(html.contains("<span class=\"hunk\">@@ -1 +1 @@</span>"), "{html}");
        assert!(html.contains("<span class=\"del\">-    <span class=\"kw\">return</span>"), "{html}");
        assert!(html.contains("<span class=\"com\"># wrong</span>"), "{html}");
        assert!(html.contains("<span class=\"str\">&quot;&lt;b&gt;&quot;</span>"), "{html}");
        assert!(!html.contains("<b>"));
    }

    #[test]
    fn hostile_text_stays_text() {
        let html = highlighted_diff("+<script>alert('x')</script>\u{1b}[2J\n+if role == \u{202e}nimda\n").into_string();
        assert!(!html.contains("<script>"), "{html}");
        assert!(html.contains("\\u{1b}"), "{html}");
        assert!(
            html.contains("\\u{202e}") && !html.contains('\u{202e}'),
            "a right-to-left override is shown, not obeyed: {html}"
        );
    }
}
