//! What the terminal allows: colour only on a terminal, and never with `NO_COLOR` set (to
//! anything, <https://no-color.org>) or `TERM=dumb`; live redraws (cursor movement) only on
//! a terminal that is not dumb.

use std::io::IsTerminal;

/// Whether output to a stream that `is_terminal` may be coloured.
fn colour_allowed(is_terminal: bool) -> bool {
    colour_with(is_terminal, std::env::var_os("NO_COLOR").as_deref(), std::env::var("TERM").ok().as_deref())
}

/// The rule, given `NO_COLOR` and `TERM`.
fn colour_with(is_terminal: bool, no_color: Option<&std::ffi::OsStr>, term: Option<&str>) -> bool {
    is_terminal && no_color.is_none_or(|v| v.is_empty()) && term != Some("dumb")
}

fn dumb() -> bool {
    std::env::var("TERM").is_ok_and(|t| t == "dumb")
}

/// Colour on standard output.
pub fn stdout_colour() -> bool {
    colour_allowed(std::io::stdout().is_terminal())
}

/// Colour on standard error.
pub fn stderr_colour() -> bool {
    colour_allowed(std::io::stderr().is_terminal())
}

/// Live progress (lines redrawn in place) on standard error.
pub fn live_progress() -> bool {
    std::io::stderr().is_terminal() && !dumb()
}

#[cfg(test)]
mod tests {
    use super::colour_with;
    use std::ffi::OsStr;

    #[test]
    fn colour_only_on_a_terminal_without_no_color_or_a_dumb_term() {
        assert!(colour_with(true, None, Some("xterm-256color")));
        assert!(!colour_with(false, None, Some("xterm")));
        assert!(!colour_with(true, Some(OsStr::new("1")), Some("xterm")));
        assert!(colour_with(true, Some(OsStr::new("")), None), "an empty NO_COLOR does not count");
        assert!(!colour_with(true, None, Some("dumb")));
    }
}
