//! The one error type of loading: its own module, so that the loader and the checks it runs
//! (and the layers and environment readers) all name it without importing each other.

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// One line: where, which key, what is wrong.
    #[error("{source_name}: key `{key}`: {message}")]
    Invalid {
        source_name: String,
        key: String,
        message: String,
    },
    #[error("config file {path}: {message}")]
    File { path: String, message: String },
    /// A file that does not parse: where, and what the parser said (no key to name).
    #[error("{source_name}: {message}")]
    Malformed {
        source_name: String,
        message: String,
    },
}
