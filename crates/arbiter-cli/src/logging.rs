//! Log lines with `tracing`, on stderr. The long-running commands (`arbiter serve`,
//! `arbiter worker run`): human lines (coloured on a terminal) or JSON, one object per line.
//! Every other command: warnings as `arbiter: warning: ...` lines, above its live progress.
//! Never a token: what is logged is what the code names, and no secret is ever named.

/// Log lines on stderr, at `ARBITER_LOG` (error, warn, info, debug, trace; default info).
pub fn init(format: &str) {
    use tracing_subscriber::filter::LevelFilter;
    let level =
        std::env::var("ARBITER_LOG").ok().and_then(|l| l.parse::<LevelFilter>().ok()).unwrap_or(LevelFilter::INFO);
    let builder = tracing_subscriber::fmt().with_writer(Shown).with_max_level(level).with_target(false);
    let _ = if format == "json" {
        builder.json().flatten_event(true).try_init()
    } else {
        builder.with_ansi(crate::terminal::stderr_colour()).try_init()
    };
}

/// For every other command: what the libraries report through `tracing` (a file that could
/// not be written, a store that could not record an event) as `arbiter: warning: ...` lines
/// above the live progress, at warning level and up (`ARBITER_LOG` lowers or raises it).
pub fn init_notes() {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::filter::LevelFilter;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let level =
        std::env::var("ARBITER_LOG").ok().and_then(|l| l.parse::<LevelFilter>().ok()).unwrap_or(LevelFilter::WARN);
    // Arbiter's own reports only: a dependency's (sqlx's slow statements) is not the user's news.
    let ours = tracing_subscriber::filter::filter_fn(move |m| m.target().starts_with("arbiter") && *m.level() <= level);
    let _ = tracing_subscriber::registry().with(Notes.with_filter(ours)).try_init();
}

/// A layer writing each event as one line through [`crate::console`].
struct Notes;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Notes {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let mut text = NoteText::default();
        event.record(&mut text);
        let level = match *event.metadata().level() {
            tracing::Level::ERROR => "error",
            tracing::Level::WARN => "warning",
            _ => "note",
        };
        crate::console::line(&format!("arbiter: {level}: {}{}", text.message, text.fields));
    }
}

/// An event's message, then its other fields as `; name: value`.
#[derive(Default)]
struct NoteText {
    message: String,
    fields: String,
}

impl tracing::field::Visit for NoteText {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        } else {
            self.fields.push_str(&format!("; {}: {value:?}", field.name()));
        }
    }

    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_string();
        } else {
            self.fields.push_str(&format!("; {}: {value}", field.name()));
        }
    }
}

/// Standard error for the log lines, each written as [`crate::output::shown_keeping`] shows
/// text: what a log line quotes (a worker's reason, a task's title) cannot drive the
/// terminal of whoever reads the log, while the logger's own colours stay.
#[derive(Clone, Copy)]
struct Shown;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Shown {
    type Writer = ShownWriter;

    fn make_writer(&'a self) -> Self::Writer {
        ShownWriter
    }
}

struct ShownWriter;

impl std::io::Write for ShownWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        // The logger's own colours are plain SGR parameters (digits and ';').
        let shown = crate::output::shown_keeping(&text, |sgr| sgr.chars().all(|c| c.is_ascii_digit() || c == ';'));
        std::io::stderr().lock().write_all(shown.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().lock().flush()
    }
}
