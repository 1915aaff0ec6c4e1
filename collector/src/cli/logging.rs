//! pipetrace's own logs: `tracing`, with the `log` crate's records bridged in so that every
//! `log::` call site keeps working. On stderr, filtered by -q/-v, else PIPETRACE_LOG, else
//! RUST_LOG (`warn` unless set; `info`, `pipetrace=debug,h2=off`, ...), one line per event
//! as env_logger wrote them:
//! `[2025-01-31T12:00:00Z WARN  pipetrace::cli::agent] message`. Beside them, the agent's
//! own spans, exported when `self_telemetry.traces` asks (`pipetrace_export::export::own`).
use std::{fmt, io::IsTerminal, time::SystemTime};

use tracing::{Event, Level, Subscriber};
use tracing_log::NormalizeEvent;
use tracing_subscriber::{
    EnvFilter, Layer,
    filter::LevelFilter,
    fmt::{FmtContext, FormatEvent, FormatFields, format::Writer},
    layer::SubscriberExt,
    registry::LookupSpan,
    util::SubscriberInitExt,
};

/// The variables holding the filter: pipetrace's own first, then the Rust convention's.
const VARS: [&str; 2] = ["PIPETRACE_LOG", "RUST_LOG"];

/// What the command line asked of the logs: `-v` (counted) or `-q`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Asked {
    pub verbose: u8,
    pub quiet: bool,
}

impl Asked {
    /// The filter the flags set, if any: they are the most specific ask.
    fn spec(self) -> Option<&'static str> {
        match (self.quiet, self.verbose) {
            (true, _) => Some("error"),
            (_, 0) => None,
            (_, 1) => Some("info"),
            (_, 2) => Some("debug"),
            _ => Some("trace"),
        }
    }
}

/// One line per event: time, level, target, message and fields.
struct Line {
    color: bool,
}

fn level_color(level: &Level) -> &'static str {
    match *level {
        Level::ERROR => "\x1b[31m",
        Level::WARN => "\x1b[33m",
        Level::INFO => "\x1b[32m",
        Level::DEBUG => "\x1b[34m",
        Level::TRACE => "\x1b[36m",
    }
}

impl<S, N> FormatEvent<S, N> for Line
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        // A bridged `log` record names its own target, not the bridge's.
        let normalized = event.normalized_metadata();
        let meta = normalized.as_ref().unwrap_or_else(|| event.metadata());
        let time = humantime::format_rfc3339_seconds(SystemTime::now());
        let (level, target) = (meta.level(), meta.target());
        if self.color {
            let (dim, on, off) = ("\x1b[2m", level_color(level), "\x1b[0m");
            write!(
                w,
                "{dim}[{off}{time} {on}{level:<5}{off} {target}{dim}]{off} "
            )?;
        } else {
            write!(w, "[{time} {level:<5} {target}] ")?;
        }
        ctx.field_format().format_fields(w.by_ref(), event)?;
        writeln!(w)
    }
}

/// The flags' filter, else the first variable set and not empty; else warnings and errors.
fn spec(asked: Asked, var: impl Fn(&str) -> Option<String>) -> String {
    let from_env = || {
        (VARS.iter())
            .filter_map(|v| var(v))
            .map(|s| s.trim().to_string())
            .find(|s| !s.is_empty())
    };
    (asked.spec().map(str::to_string))
        .or_else(from_env)
        .unwrap_or_else(|| "warn".into())
}

fn filter(asked: Asked) -> EnvFilter {
    let spec = spec(asked, |v| std::env::var(v).ok());
    let builder = EnvFilter::builder().with_default_directive(LevelFilter::WARN.into());
    builder.parse_lossy(spec)
}

/// Installs the logger for the whole process. A second call changes nothing.
pub(crate) fn init(asked: Asked) {
    let color = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    // A closed stderr loses the lines, quietly: the fmt layer's own report of a failed
    // write would go to stderr too, and panic there.
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .log_internal_errors(false)
        .event_format(Line { color })
        .with_filter(filter(asked));
    // Fails only when a logger is already installed (tests); that one stays.
    let own = pipetrace_export::export::own::layer(Default::default());
    let _ = tracing_subscriber::registry()
        .with(stderr)
        .with(own)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flags_win_then_pipetraces_variable_then_rusts() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                (vars.iter())
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        let both = env(&[("PIPETRACE_LOG", "debug"), ("RUST_LOG", "trace")]);
        assert_eq!(spec(Asked::default(), both), "debug");
        assert_eq!(
            spec(Asked::default(), env(&[("RUST_LOG", "h2=off,info")])),
            "h2=off,info"
        );
        let empty_first = env(&[("PIPETRACE_LOG", " "), ("RUST_LOG", "info")]);
        assert_eq!(spec(Asked::default(), empty_first), "info");
        assert_eq!(spec(Asked::default(), env(&[])), "warn");
        let quiet = Asked {
            quiet: true,
            verbose: 0,
        };
        assert_eq!(spec(quiet, both), "error");
        let vv = Asked {
            quiet: false,
            verbose: 2,
        };
        assert_eq!(spec(vv, env(&[("PIPETRACE_LOG", "error")])), "debug");
    }

    #[test]
    fn lines_read_as_env_logger_wrote_them() {
        let buf = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
        let out = buf.clone();
        let make = move || Capture(out.clone());
        let layer = tracing_subscriber::fmt::layer()
            .with_writer(make)
            .event_format(Line { color: false });
        let sub = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(sub, || {
            tracing::warn!(target: "pipetrace::export", items = 3, "export failed");
        });
        let text = String::from_utf8(buf.lock().unwrap().clone()).unwrap();
        let re = regex::Regex::new(
            r"^\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ WARN  pipetrace::export\] export failed items=3\n$",
        )
        .unwrap();
        assert!(re.is_match(&text), "{text:?}");
    }

    struct Capture(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Capture {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
}
