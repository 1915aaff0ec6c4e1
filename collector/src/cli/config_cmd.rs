//! `pipetrace config validate FILE`.
use std::path::Path;

use pipetrace_config::{Config, ConfigError};

/// Checks `file` (with the environment and flags over it, as a run would read it): exit 0
/// when valid, else 2 with one line naming what is wrong.
pub fn validate(file: &Path, load: impl FnOnce() -> Result<Config, ConfigError>) -> i32 {
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
