//! The files a tool opened and a task's inputs and outputs, as span attributes: the listed
//! paths (redacted like command lines) and the count of all.
use opentelemetry::{KeyValue, StringValue, Value};
use pipetrace_semconv::attr;

use crate::{files::Files, redact::Redactor};

fn list(key: &'static str, paths: &[String], r: &Redactor, out: &mut Vec<KeyValue>) {
    let v: Vec<StringValue> = paths.iter().map(|p| r.text(p).into()).collect();
    out.push(KeyValue::new(key, Value::Array(v.into())));
}

fn count(key: &'static str, n: u64, out: &mut Vec<KeyValue>) {
    out.push(KeyValue::new(key, i64::try_from(n).unwrap_or(i64::MAX)));
}

/// A tool's files: read (and never written by it) and written. Nothing when it opened none
/// that are kept.
pub fn tool_attrs(files: Option<&Files>, r: &Redactor, out: &mut Vec<KeyValue>) {
    let Some(f) = files.filter(|f| !f.is_empty()) else {
        return;
    };
    let (read, n_read) = f.inputs();
    let (written, n_written) = f.outputs();
    if n_read > 0 {
        list(attr::FILES_READ, &read, r, out);
        count(attr::FILES_READ_COUNT, n_read, out);
    }
    if n_written > 0 {
        list(attr::FILES_WRITTEN, &written, r, out);
        count(attr::FILES_WRITTEN_COUNT, n_written, out);
    }
}

/// A task's inputs (read by its processes, written by none) and outputs (written).
pub fn task_attrs(files: &Files, r: &Redactor, out: &mut Vec<KeyValue>) {
    if files.is_empty() {
        return;
    }
    let (inputs, n_in) = files.inputs();
    let (outputs, n_out) = files.outputs();
    if n_in > 0 {
        list(attr::TASK_INPUTS, &inputs, r, out);
        count(attr::TASK_INPUTS_COUNT, n_in, out);
    }
    if n_out > 0 {
        list(attr::TASK_OUTPUTS, &outputs, r, out);
        count(attr::TASK_OUTPUTS_COUNT, n_out, out);
    }
}
