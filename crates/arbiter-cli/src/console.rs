//! The one writer of stderr while a command runs: the live progress block (on a terminal,
//! through indicatif, each line cut to the terminal's width so nothing wraps) and the lines
//! that go above it — warnings and notes from anywhere in arbiter, which the libraries send
//! through `tracing`, never by printing. Without a live block, lines are plain lines.

use std::sync::Mutex;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The live block, while one is drawn.
struct Live {
    multi: MultiProgress,
    bars: Vec<ProgressBar>,
}

static LIVE: Mutex<Option<Live>> = Mutex::new(None);

/// Writes `text` as a line of its own, above the live block if one is drawn.
pub fn line(text: &str) {
    let text = &*crate::output::shown(text);
    let live = LIVE.lock().unwrap_or_else(|p| p.into_inner());
    match live.as_ref() {
        Some(l) => {
            let _ = l.multi.println(text);
        }
        // A reader of stderr that went away (`2>&1 | head`) is no reason to stop, let alone
        // panic as `eprintln!` would: the line is dropped.
        None => {
            use std::io::Write;
            let _ = writeln!(std::io::stderr().lock(), "{text}");
        }
    }
}

/// Shows `lines` as the live block (line `i` in the block's `i`-th row).
pub fn draw_block(lines: &[String]) {
    let mut live = LIVE.lock().unwrap_or_else(|p| p.into_inner());
    let l = live.get_or_insert_with(|| Live {
        multi: MultiProgress::with_draw_target(ProgressDrawTarget::stderr_with_hz(10)),
        bars: Vec::new(),
    });
    while l.bars.len() < lines.len() {
        let bar = l.multi.add(ProgressBar::new_spinner());
        bar.set_style(ProgressStyle::with_template("{wide_msg}").unwrap_or_else(|_| ProgressStyle::default_spinner()));
        l.bars.push(bar);
    }
    for (bar, text) in l.bars.iter().zip(lines) {
        // One row each: a line break in it would break the block too.
        bar.set_message(crate::output::shown(&text.replace('\n', "\\n")).into_owned());
    }
}

/// Leaves the block on screen as it last was: what follows goes below it.
pub fn release_block() {
    if let Some(l) = LIVE.lock().unwrap_or_else(|p| p.into_inner()).take() {
        for bar in &l.bars {
            bar.finish();
        }
    }
}
