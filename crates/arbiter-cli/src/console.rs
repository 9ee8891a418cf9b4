//! The one writer of the terminal's stderr while a command runs: the live progress block
//! (redrawn in place) and the lines that go above it — warnings and notes from anywhere in
//! arbiter, which the libraries send through `tracing`, never by printing. A line written
//! while the block is on screen erases the block first; the next draw puts it back below.
//! Without a live block, lines are plain lines.

use std::io::Write;
use std::sync::Mutex;

/// How many lines of the live block are on screen.
static BLOCK: Mutex<usize> = Mutex::new(0);

/// Writes `text` as a line of its own, above the live block if one is drawn.
pub fn line(text: &str) {
    let mut drawn = BLOCK.lock().unwrap_or_else(|p| p.into_inner());
    let mut err = std::io::stderr().lock();
    if *drawn > 0 {
        // Up to the block's first line, and clear from there down.
        let _ = write!(err, "\x1b[{}A\x1b[0J", *drawn);
        *drawn = 0;
    }
    let _ = writeln!(err, "{text}");
    let _ = err.flush();
}

/// Draws the live block in place of the one on screen.
pub fn draw_block(lines: &[String]) {
    let mut drawn = BLOCK.lock().unwrap_or_else(|p| p.into_inner());
    let mut err = std::io::stderr().lock();
    if *drawn > 0 {
        let _ = write!(err, "\x1b[{}A", *drawn);
    }
    for l in lines {
        let _ = writeln!(err, "\x1b[2K{l}");
    }
    if lines.len() < *drawn {
        let _ = write!(err, "\x1b[0J");
    }
    *drawn = lines.len();
    let _ = err.flush();
}

/// Leaves the block on screen as it is: what follows goes below it.
pub fn release_block() {
    *BLOCK.lock().unwrap_or_else(|p| p.into_inner()) = 0;
}
