//! Defaults that live in code rather than in the model's `Default` (a value of null means
//! "pipetrace picks"), named once here so that the help, the docs and the code say the same.
use std::time::Duration;

macro_rules! state_dir {
    () => {
        "/var/lib/pipetrace"
    };
}

/// Where the agent keeps what outlives it (history, spool) unless `diagnosis.state_dir` says.
pub const STATE_DIR: &str = state_dir!();

/// The trace file the agent writes when neither an endpoint nor `export.file` is set.
pub const AGENT_TRACE_FILE: &str = concat!(state_dir!(), "/traces.otlp.jsonl");

/// How a trace file's name ends; its metrics file ends `.metrics` + this.
pub const TRACE_EXTENSION: &str = ".otlp.jsonl";

/// How `pipetrace run`'s own trace file's name starts (`pipetrace-<UTC time>[-N]`).
pub const RUN_TRACE_PREFIX: &str = "pipetrace-";

/// How long one OTLP export may take when `export.otlp.timeout` is null.
pub const OTLP_TIMEOUT: Duration = Duration::from_secs(10);

/// `pipetrace run`'s trace file, as the help and the docs write it.
pub fn run_trace_file() -> String {
    format!("./{RUN_TRACE_PREFIX}<time>{TRACE_EXTENSION}")
}

/// `text` with each `{name}` of a default replaced by its value: how the configuration's
/// documentation and the command line's help name a default without copying it.
pub(crate) fn fill(text: &str) -> String {
    let values = [
        ("{agent_trace_file}", AGENT_TRACE_FILE.to_string()),
        ("{run_trace_file}", run_trace_file()),
        (
            "{otlp_timeout}",
            humantime::format_duration(OTLP_TIMEOUT).to_string(),
        ),
        ("{default_count}", crate::limits::DEFAULT_COUNT.to_string()),
    ];
    values
        .iter()
        .fold(text.to_string(), |t, (name, value)| t.replace(name, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each default and how the docs name it.
    fn named() -> Vec<(&'static str, String)> {
        let names = [
            "{agent_trace_file}",
            "{run_trace_file}",
            "{otlp_timeout}",
            "{default_count}",
        ];
        names.into_iter().map(|n| (n, fill(n))).collect()
    }

    #[test]
    fn the_docs_name_each_default_and_never_copy_it() {
        let texts: Vec<&str> = crate::docs::KEYS.iter().map(|(_, t)| *t).collect();
        for (name, value) in named() {
            assert_ne!(value, name, "{name} is not filled");
            assert!(texts.iter().any(|t| t.contains(name)), "{name} unused");
            let copied = texts
                .iter()
                .find(|t| t.contains(&format!("null: {value}.")));
            assert!(copied.is_none(), "{value} written by hand: {copied:?}");
        }
        assert!(!texts.iter().any(|t| t.contains(AGENT_TRACE_FILE)));
        assert_eq!(fill("{otlp_timeout}, {default_count}"), "10s, 128");
    }
}
