//! `pipetrace config validate FILE` and `pipetrace config show`.
use std::path::Path;

use pipetrace_config::{Config, ConfigError};

/// Checks `file` (with the environment and flags over it, as a run would read it): exit 0
/// when valid, else 2 with one line naming what is wrong.
pub(crate) fn validate(file: &Path, load: impl FnOnce() -> Result<Config, ConfigError>) -> i32 {
    // The path came from this command, not from --config: say so.
    if !file.is_file() {
        let why = std::fs::metadata(file).map_or_else(|e| e.to_string(), |_| "not a file".into());
        errln!(
            "pipetrace: error: cannot read {}: {why}; check the path given to `config validate`",
            file.display()
        );
        return super::EXIT_USAGE;
    }
    match load() {
        Ok(_) => {
            outln!("{}: valid", file.display());
            0
        }
        Err(e) => super::config_failed(e),
    }
}

/// `pipetrace config show [--json]`: the settings in effect and what set each.
pub fn show(file: Option<&Path>, flags: &pipetrace_config::Flags, json: bool) -> i32 {
    let settings = match pipetrace_config::show::explain(file, flags) {
        Ok(s) => s,
        Err(e) => return super::config_failed(e),
    };
    if json {
        match serde_json::to_string_pretty(&settings) {
            Ok(s) => outln!("{s}"),
            Err(e) => {
                errln!("pipetrace: {e}");
                return 1;
            }
        }
    } else {
        out!("{}", pipetrace_config::show::text(&settings));
    }
    0
}
