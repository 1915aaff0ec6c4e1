//! Bad input from the user, told apart from failures: `pipetrace` exits 2 on it.

/// Bad input from the user: exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);
