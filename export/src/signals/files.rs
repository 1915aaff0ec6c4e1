//! The files a tool opened and a task's inputs and outputs, as span attributes: the listed
//! paths (redacted like command lines) and the count of all.
use opentelemetry::{KeyValue, StringValue, Value};
use pipetrace_semconv::attr;

use pipetrace_core::files::Files;
use pipetrace_core::redact::Redactor;

fn list(key: &'static str, paths: &[String], r: &Redactor, out: &mut Vec<KeyValue>) {
    let v: Vec<StringValue> = paths.iter().map(|p| r.text(p).into()).collect();
    out.push(KeyValue::new(key, Value::Array(v.into())));
}

fn count(key: &'static str, n: u64, out: &mut Vec<KeyValue>) {
    out.push(KeyValue::new(key, i64::try_from(n).unwrap_or(i64::MAX)));
}

/// Two lists of paths with their counts, each only when it holds any.
fn pair(
    keys: [(&'static str, &'static str); 2],
    sets: [(Vec<String>, u64); 2],
    r: &Redactor,
    out: &mut Vec<KeyValue>,
) {
    for ((list_key, count_key), (paths, n)) in keys.into_iter().zip(sets) {
        if n > 0 {
            list(list_key, &paths, r, out);
            count(count_key, n, out);
        }
    }
}

/// A task's own log files as its engine names them, where it names any.
pub(crate) fn log_attrs(logs: &[String], r: &Redactor, out: &mut Vec<KeyValue>) {
    if !logs.is_empty() {
        list(attr::TASK_LOGS, logs, r, out);
    }
}

/// A tool's files: read (and never written by it) and written. Nothing when it opened none
/// that are kept.
pub(crate) fn tool_attrs(files: Option<&Files>, r: &Redactor, out: &mut Vec<KeyValue>) {
    let Some(f) = files.filter(|f| !f.is_empty()) else {
        return;
    };
    let keys = [
        (attr::FILES_READ, attr::FILES_READ_COUNT),
        (attr::FILES_WRITTEN, attr::FILES_WRITTEN_COUNT),
    ];
    pair(keys, [f.inputs(), f.outputs()], r, out);
}

/// A task's inputs (read by its processes, written by none) and outputs (written).
pub(crate) fn task_attrs(files: &Files, r: &Redactor, out: &mut Vec<KeyValue>) {
    if files.is_empty() {
        return;
    }
    let keys = [
        (attr::TASK_INPUTS, attr::TASK_INPUTS_COUNT),
        (attr::TASK_OUTPUTS, attr::TASK_OUTPUTS_COUNT),
    ];
    pair(keys, [files.inputs(), files.outputs()], r, out);
}
