//! What a `balanced` check counts: the text with string contents and comments blanked
//! out, so a `(` in a string or a comment is not a parenthesis (orch.py counted them raw).
//!
//! String delimiters stay, so an unterminated `"""` still shows as an odd count; everything
//! between them becomes spaces, newlines kept. Python (`#` comments, `'`/`"` and their
//! triple forms, escapes) and TypeScript/JavaScript (`//` and `/* */` comments, `'`, `"`
//! and template literals) are lexed; Vue and Jinja templates are counted as written.

use super::Language;

/// `text` with the contents of strings and comments replaced by spaces (newlines kept).
pub fn mask(lang: Language, text: &str) -> String {
    match lang {
        Language::Python => mask_with(text, &PYTHON),
        Language::Ts => mask_with(text, &SCRIPT),
        Language::Vue | Language::Jinja => text.to_string(),
    }
}

/// The lexical shape of a language, as far as masking needs it.
struct Syntax {
    line_comment: &'static str,
    block_comment: Option<(&'static str, &'static str)>,
    quotes: &'static [char],
    /// Quotes that open a string spanning lines (`'''`/`"""` tripled; a backtick alone).
    triple_quotes: bool,
    multiline_quote: Option<char>,
}

const PYTHON: Syntax =
    Syntax { line_comment: "#", block_comment: None, quotes: &['\'', '"'], triple_quotes: true, multiline_quote: None };

const SCRIPT: Syntax = Syntax {
    line_comment: "//",
    block_comment: Some(("/*", "*/")),
    quotes: &['\'', '"', '`'],
    triple_quotes: false,
    multiline_quote: Some('`'),
};

fn blank(c: char) -> char {
    if c == '\n' { '\n' } else { ' ' }
}

fn mask_with(text: &str, syntax: &Syntax) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let starts = |i: usize, s: &str| s.chars().enumerate().all(|(k, c)| chars.get(i + k) == Some(&c));
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if starts(i, syntax.line_comment) {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
            continue;
        }
        if let Some((open, close)) = syntax.block_comment
            && starts(i, open)
        {
            let mut j = i + open.chars().count();
            while j < chars.len() && !starts(j, close) {
                j += 1;
            }
            let end = (j + close.chars().count()).min(chars.len());
            out.extend(chars[i..end].iter().map(|&c| blank(c)));
            i = end;
            continue;
        }
        if syntax.quotes.contains(&c) {
            let triple = syntax.triple_quotes && chars.get(i + 1) == Some(&c) && chars.get(i + 2) == Some(&c);
            let delimiter = if triple { 3 } else { 1 };
            let multiline = triple || syntax.multiline_quote == Some(c);
            out.extend(std::iter::repeat_n(c, delimiter));
            let mut j = i + delimiter;
            loop {
                if j >= chars.len() {
                    break;
                }
                let d = chars[j];
                if d == '\\' {
                    out.push(' ');
                    if let Some(&next) = chars.get(j + 1) {
                        out.push(blank(next));
                    }
                    j += 2;
                    continue;
                }
                if d == c && (!triple || (chars.get(j + 1) == Some(&c) && chars.get(j + 2) == Some(&c))) {
                    out.extend(std::iter::repeat_n(c, delimiter));
                    j += delimiter;
                    break;
                }
                if d == '\n' && !multiline {
                    // An unterminated one-line string ends with its line.
                    break;
                }
                out.push(blank(d));
                j += 1;
            }
            i = j.min(chars.len());
            continue;
        }
        out.push(c);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_strings_and_comments_are_blanked_but_delimiters_stay() {
        let text = "x = f(\"(\")  # )\ny = '''a ( \"\"\" b'''\n";
        let m = mask(Language::Python, text);
        assert_eq!(m.matches('(').count(), 1, "{m}");
        assert_eq!(m.matches(')').count(), 1, "{m}");
        assert_eq!(m.matches("'''").count(), 2, "{m}");
        assert_eq!(m.matches("\"\"\"").count(), 0, "{m}");
        assert_eq!(m.lines().count(), text.lines().count());
    }

    #[test]
    fn an_unterminated_triple_quote_stays_odd() {
        let m = mask(Language::Python, "def f() -> None:\n    \"\"\"docs\n    return None\n");
        assert_eq!(m.matches("\"\"\"").count(), 1, "{m}");
    }

    #[test]
    fn escapes_do_not_end_a_string() {
        let m = mask(Language::Python, "s = 'it\\'s ('\nt = (1)\n");
        assert_eq!((m.matches('(').count(), m.matches(')').count()), (1, 1), "{m}");
    }

    #[test]
    fn script_comments_and_template_literals_are_blanked() {
        let m = mask(Language::Ts, "const a = `(${b}`; // )\n/* ( */ f(a);\n");
        assert_eq!((m.matches('(').count(), m.matches(')').count()), (1, 1), "{m}");
    }

    #[test]
    fn templates_are_counted_as_written() {
        assert_eq!(mask(Language::Vue, "<p>{{ f('(') }}</p>"), "<p>{{ f('(') }}</p>");
    }
}
