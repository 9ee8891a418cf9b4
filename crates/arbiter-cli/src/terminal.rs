//! What the terminal allows: colour only on a terminal, and never with `NO_COLOR` set (to
//! anything, <https://no-color.org>) or `TERM=dumb`; live redraws (cursor movement) only on
//! a terminal that is not dumb.

use std::io::IsTerminal;

/// Whether output to a stream that `is_terminal` may be coloured.
fn colour_allowed(is_terminal: bool) -> bool {
    is_terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && !dumb()
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
