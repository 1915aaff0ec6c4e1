//! What the tests share: a config file, and an environment of their own set in figment's
//! test jail.
use std::{io::Write, path::Path};

use crate::{Config, ConfigError, Flags};

/// A YAML config file only its owner may write, as `load` requires.
pub(crate) fn file(yaml: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::Builder::new().suffix(".yaml").tempfile().unwrap();
    f.write_all(yaml.as_bytes()).unwrap();
    f
}

/// Runs `f` with exactly `vars` in the process environment. figment's Jail holds every
/// other jailed test back meanwhile and restores the environment after; clearing it
/// first keeps the developer's own OTEL_* and PIPETRACE_* variables out.
#[expect(
    clippy::result_large_err,
    reason = "figment's Jail takes a closure returning figment's own Result"
)]
pub(crate) fn with_env<T>(vars: &[(&str, &str)], f: impl FnOnce() -> T) -> T {
    let mut out = None;
    figment::Jail::expect_with(|jail| {
        jail.clear_env();
        for (name, value) in vars {
            jail.set_env(name, value);
        }
        out = Some(f());
        Ok(())
    });
    out.expect("the jail ran")
}

/// `load` in an environment of exactly `vars`.
pub(crate) fn load_with(
    file: Option<&Path>,
    vars: &[(&str, &str)],
    flags: &Flags,
) -> Result<Config, ConfigError> {
    with_env(vars, || crate::load(file, flags))
}
