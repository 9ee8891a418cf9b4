//! Log lines of the long-running commands (`arbiter serve`, `arbiter worker run`) with
//! `tracing`, on stderr: human lines (coloured on a terminal) or JSON, one object per line.
//! Never a token: what is logged is what the code names, and no secret is ever named.

/// Log lines on stderr, at `ARBITER_LOG` (error, warn, info, debug, trace; default info).
pub fn init(format: &str) {
    use tracing_subscriber::filter::LevelFilter;
    let level =
        std::env::var("ARBITER_LOG").ok().and_then(|l| l.parse::<LevelFilter>().ok()).unwrap_or(LevelFilter::INFO);
    let builder = tracing_subscriber::fmt().with_writer(std::io::stderr).with_max_level(level).with_target(false);
    let _ = if format == "json" {
        builder.json().flatten_event(true).try_init()
    } else {
        builder.with_ansi(crate::terminal::stderr_colour()).try_init()
    };
}
