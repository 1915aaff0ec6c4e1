//! The trace file a command writes or reads when the user names none.
use std::path::{Path, PathBuf};

/// `pipetrace-<UTC time>.otlp.jsonl` in `dir` (or here): one per run, never overwritten.
pub(super) fn default_file(dir: Option<&Path>) -> PathBuf {
    let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        .to_string()
        .replace([':', '-'], "");
    dir.unwrap_or(Path::new("."))
        .join(format!("pipetrace-{stamp}.otlp.jsonl"))
}
