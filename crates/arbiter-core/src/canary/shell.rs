//! Splitting a verify command into words, refusing anything but one simple command: a
//! canary only makes sense when the test runner is the whole command (with `a && b` the
//! canary's failure would keep `b` from running).

use crate::command_line::is_assignment;

/// One word of a simple command: its value after quote removal and where it ends in the text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Word {
    pub(crate) value: String,
    /// Byte offset of the word's first character in the command text.
    pub(crate) start: usize,
    /// Byte offset just past the word in the command text.
    pub(crate) end: usize,
    /// The word holds an unquoted or double-quoted `$` or backquote: the shell expands it.
    pub(crate) expands: bool,
}

/// A simple command: leading `NAME=value` assignments, then the words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SimpleCommand {
    pub(crate) words: Vec<Word>,
}

/// Splits `command` into words, or says why it is not one simple command.
pub(crate) fn split(command: &str) -> Result<SimpleCommand, String> {
    let bytes = command.as_bytes();
    let mut words = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b' ' || b == b'\t' {
            i += 1;
            continue;
        }
        // `2>&1` merges the streams arbiter already reads together: harmless.
        if command[i..].starts_with("2>&1") && command[i + 4..].starts_with([' ', '\t']) | (i + 4 == bytes.len()) {
            i += 4;
            continue;
        }
        let mut value = String::new();
        let mut expands = false;
        let start = i;
        while i < bytes.len() {
            let c = bytes[i];
            match c {
                b' ' | b'\t' => break,
                b'\n' | b';' | b'&' | b'|' | b'<' | b'>' | b'(' | b')' => {
                    return Err(format!(
                        "it is not one test-runner invocation (shell operator `{}`): a canary's failure could stop the rest of the command",
                        c as char
                    ));
                }
                b'#' if value.is_empty() => return Err("it holds a shell comment".into()),
                b'\'' => {
                    let close = command[i + 1..].find('\'').ok_or("it has an unterminated quote")?;
                    value.push_str(&command[i + 1..i + 1 + close]);
                    i += close + 2;
                    continue;
                }
                b'"' => {
                    i += 1;
                    loop {
                        let Some(&d) = bytes.get(i) else { return Err("it has an unterminated quote".into()) };
                        match d {
                            b'"' => {
                                i += 1;
                                break;
                            }
                            b'\\' if matches!(bytes.get(i + 1), Some(b'"' | b'\\' | b'$' | b'`')) => {
                                value.push(bytes[i + 1] as char);
                                i += 2;
                            }
                            b'$' | b'`' => {
                                expands = true;
                                value.push(d as char);
                                i += 1;
                            }
                            _ => {
                                let ch = command[i..].chars().next().unwrap_or(' ');
                                value.push(ch);
                                i += ch.len_utf8();
                            }
                        }
                    }
                    continue;
                }
                b'\\' => {
                    if let Some(ch) = command[i + 1..].chars().next() {
                        value.push(ch);
                        i += 1 + ch.len_utf8();
                    } else {
                        i += 1;
                    }
                    continue;
                }
                b'$' | b'`' => {
                    expands = true;
                    value.push(c as char);
                    i += 1;
                }
                _ => {
                    let ch = command[i..].chars().next().unwrap_or(' ');
                    value.push(ch);
                    i += ch.len_utf8();
                }
            }
        }
        words.push(Word { value, start, end: i, expands });
    }
    Ok(SimpleCommand { words })
}

impl SimpleCommand {
    /// The words after the leading assignments; refuses words the shell would expand there
    /// (an assignment's value may expand: `PYTHONPATH=$PWD pytest`).
    pub(crate) fn program_words(&self) -> Result<&[Word], String> {
        let start = self.words.iter().position(|w| !is_assignment(&w.value)).unwrap_or(self.words.len());
        let rest = &self.words[start..];
        if let Some(w) = rest.iter().find(|w| w.expands) {
            return Err(format!("its word `{}` is expanded by the shell, so what runs cannot be known", w.value));
        }
        Ok(rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(c: &str) -> Vec<String> {
        split(c)
            .map(|s| s.program_words().map(|w| w.iter().map(|w| w.value.clone()).collect()).unwrap_or_default())
            .unwrap_or_default()
    }

    #[test]
    fn splits_simple_commands() {
        assert_eq!(values("CI=1 PYTHONPATH=$PWD pytest -q 'a b' \"c\\\"d\""), ["pytest", "-q", "a b", "c\"d"]);
        assert_eq!(values("python3 -m unittest 2>&1"), ["python3", "-m", "unittest"]);
        assert_eq!(split("cargo test").map(|s| s.words[1].end), Ok(10));
    }

    #[test]
    fn refuses_compound_commands() {
        for c in [
            "pytest && flake8",
            "pytest || true",
            "pytest; echo",
            "pytest | tee log",
            "pytest &",
            "(pytest)",
            "pytest > out.txt",
            "pytest $(echo -x)",
            "pytest \"$ARGS\"",
            "pytest 'unterminated",
            "pytest\nflake8",
        ] {
            let r = split(c).and_then(|s| s.program_words().map(|_| ()));
            assert!(r.is_err(), "{c} should be refused");
        }
    }
}
