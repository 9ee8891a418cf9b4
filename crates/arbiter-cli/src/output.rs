//! The one writer of standard output, and the rules for what goes to standard error.
//!
//! - **stdout** is the command's result: human lines ([`out!`], [`text`]) or, with
//!   `--json`, one typed document ([`json`]) whose type names its schema in
//!   `docs/schemas/` and carries `schema_version`. A reader that stops reading
//!   (`arbiter plan show big | head`) ends the output: the process exits at once with the
//!   status a process killed by SIGPIPE has (141), saying nothing.
//! - **stderr** is for people watching: notes ([`note!`]) and the live progress, which
//!   `--quiet` silences, and warnings ([`warning!`]) and errors, which it does not. Every
//!   stderr line goes through [`crate::console`], above the live progress block.
//!
//! Nothing else in the CLI prints (a test holds it to that), and every human line passes
//! [`shown`] on its way out: whatever a message quoted (a file name a candidate chose, a
//! model's words), no control, bidirectional or invisible character reaches the terminal
//! but arbiter's own colours ([`paint`]).

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;

/// The version of every `--json` document's shape (`schema_version`); it grows when a
/// field is removed or changes meaning, not when one is added.
pub const JSON_SCHEMA_VERSION: u32 = 1;

static QUIET: AtomicBool = AtomicBool::new(false);

/// `--quiet`: no notes and no live progress on stderr.
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// Whether `--quiet` was given.
pub fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// A `--json` document: what it is (the file of its schema under `docs/schemas/`, without
/// `.schema.json`).
pub trait JsonDocument: Serialize {
    const SCHEMA: &'static str;
}

#[derive(Serialize)]
struct Versioned<'a, T: Serialize> {
    schema: &'static str,
    schema_version: u32,
    #[serde(flatten)]
    document: &'a T,
}

/// Writes `document` as the command's JSON result, led by the name of its schema and its
/// `schema_version`.
pub fn json<T: JsonDocument>(document: &T) {
    let versioned = Versioned { schema: T::SCHEMA, schema_version: JSON_SCHEMA_VERSION, document };
    // JSON escapes what it must itself; its strings are data, kept as they are.
    match serde_json::to_string_pretty(&versioned) {
        Ok(text) => write_stdout(format_args!("{text}\n")),
        Err(e) => {
            write_warning(&format!("arbiter: error: the JSON result could not be made: {e}"));
            std::process::exit(i32::from(crate::error::exit::ENVIRONMENT));
        }
    }
}

/// Writes `text` and a newline to stdout.
pub fn line(text: &str) {
    write_stdout(format_args!("{}\n", shown(text)));
}

/// Writes `text` to stdout (a rendered table that ends its own lines).
pub fn text(text: &str) {
    write_stdout(format_args!("{}", shown(text)));
}

/// The colours arbiter paints with (SGR parameters): [`shown`] lets these through and
/// nothing else that drives a terminal.
const PALETTE: &[&str] = &["0", "2", "31", "32", "33", "36"];

/// `text` in colour `code` (one of [`PALETTE`]: 2 dim, 31 red, 32 green, 33 yellow, 36 cyan).
pub fn paint(code: &str, text: &str) -> String {
    debug_assert!(PALETTE.contains(&code), "{code} is not in the palette");
    format!("\x1b[{code}m{text}\x1b[0m")
}

/// Text for a person's terminal: line breaks and tabs kept, the colours of [`paint`] kept,
/// every other control, bidirectional and invisible character written out (`\u{1b}`,
/// `\u{202e}`).
pub fn shown(text: &str) -> std::borrow::Cow<'_, str> {
    shown_keeping(text, |sgr| PALETTE.contains(&sgr))
}

/// [`shown`], keeping the colour sequences (SGR parameters) `keep` accepts.
pub fn shown_keeping(text: &str, keep: impl Fn(&str) -> bool) -> std::borrow::Cow<'_, str> {
    let painted = |rest: &str| -> Option<usize> {
        let body = rest.strip_prefix("\x1b[")?;
        let end = body.find('m')?;
        keep(&body[..end]).then_some(2 + end + 1)
    };
    let needs = |c: char| (c.is_control() && c != '\n' && c != '\t') || arbiter_core::text::invisible(c);
    if !text.chars().any(needs) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut i = 0;
    while let Some(c) = text[i..].chars().next() {
        if c == '\x1b'
            && let Some(len) = painted(&text[i..])
        {
            out.push_str(&text[i..i + len]);
            i += len;
            continue;
        }
        if needs(c) {
            out.push_str(&arbiter_core::text::one_line(&c.to_string()));
        } else {
            out.push(c);
        }
        i += c.len_utf8();
    }
    std::borrow::Cow::Owned(out)
}

/// Writes `data` to stdout as it is (a generated man page or completion script).
pub fn bytes(data: &[u8]) {
    let mut out = std::io::stdout().lock();
    settle(out.write_all(data).and_then(|()| out.flush()));
}

fn write_stdout(args: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    settle(out.write_fmt(args).and_then(|()| out.flush()));
}

/// What a write to stdout that failed means: a reader that stopped reading ends the command
/// quietly; any other failure is an error.
fn settle(written: std::io::Result<()>) {
    match written {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(141),
        // A full disk or a failing device: the result did not reach its reader, which must
        // not take the exit code for success.
        Err(e) => {
            write_warning(&format!("arbiter: error: the result could not be written to standard output: {e}"));
            std::process::exit(i32::from(crate::error::exit::ENVIRONMENT));
        }
    }
}

/// A table as text: the header, then each row, columns padded to their widest cell (the
/// last column unpadded).
pub fn columns(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate().take(widths.len()) {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let line = |cells: &[&str]| -> String {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                let pad = widths.get(i).copied().unwrap_or(0).saturating_sub(c.chars().count());
                s.push_str(c);
                s.push_str(&" ".repeat(pad + 2));
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(header);
    for r in rows {
        out.push_str(&line(&r.iter().map(String::as_str).collect::<Vec<_>>()));
    }
    out
}

/// `text` with its control and invisible characters escaped (`\u{1b}`, `\u{a}`,
/// `\u{202e}`): text that came from outside (a worker's report, an agent's reason) printed on
/// one line can neither fake lines, drive the terminal nor read as something it is not.
pub fn printable(text: &str) -> String {
    arbiter_core::text::one_line(text)
}

/// A note for whoever watches stderr (what arbiter decided, where it wrote): silenced by
/// `--quiet`.
pub fn write_note(text: &str) {
    if !quiet() {
        crate::console::line(text);
    }
}

/// A warning: always on stderr, `--quiet` or not.
pub fn write_warning(text: &str) {
    crate::console::line(text);
}

/// `out!("...", args)`: one line of the command's human result on stdout.
macro_rules! out {
    () => {
        $crate::output::line("")
    };
    ($($arg:tt)*) => {
        $crate::output::line(&format!($($arg)*))
    };
}
pub(crate) use out;

/// `note!("...", args)`: a note on stderr, silenced by `--quiet`.
macro_rules! note {
    ($($arg:tt)*) => {
        $crate::output::write_note(&format!($($arg)*))
    };
}
pub(crate) use note;

/// `warning!("...", args)`: a warning on stderr, printed even with `--quiet`.
macro_rules! warning {
    ($($arg:tt)*) => {
        $crate::output::write_warning(&format!($($arg)*))
    };
}
pub(crate) use warning;

/// A question on stderr, the answer to be typed after it on the same line.
pub fn prompt(question: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(question.as_bytes()).and_then(|()| err.flush());
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn text_from_outside_prints_on_its_line_without_driving_the_terminal() {
        assert_eq!(printable("lease lost"), "lease lost");
        assert_eq!(printable("ok\n     9  forged line\u{1b}[2J"), "ok\\n     9  forged line\\u{1b}[2J");
    }

    /// What reaches the terminal: arbiter's own colours and line breaks, nothing else that
    /// drives it, whatever a message quoted.
    #[test]
    fn the_printer_lets_through_its_own_colours_only() {
        use super::{paint, shown};
        let ours = format!("{} {}\n\tnext", paint("32", "done"), paint("2", "blocked"));
        assert_eq!(shown(&ours), ours);
        let hostile = "a\u{1b}]0;pwned\u{7}\u{1b}[2J\r\u{1b}[8mhidden\u{202e}z";
        assert_eq!(shown(hostile), "a\\u{1b}]0;pwned\\u{7}\\u{1b}[2J\\r\\u{1b}[8mhidden\\u{202e}z");
        // A colour sequence cut short is no colour.
        assert_eq!(shown("\u{1b}[32"), "\\u{1b}[32");
        assert_eq!(shown("plain ünïcode ✓"), "plain ünïcode ✓");
    }
}
