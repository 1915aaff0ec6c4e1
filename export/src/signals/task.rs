//! What a task's span says of its task: its name with wildcards or tag, and the engine's
//! details. A task of a run and a part of a run rooted on another node say it alike.
use opentelemetry::KeyValue;
use pipetrace_semconv::attr;

use pipetrace_core::attribution::TaskInfo;

/// A task span's name: the task's, with its wildcards or tag.
pub(crate) fn task_span_name(info: &TaskInfo) -> String {
    match info.wildcards.as_ref().or(info.tag.as_ref()) {
        Some(w) => format!("{} ({w})", info.name),
        None => info.name.clone(),
    }
}

/// What a task's span says of it beyond its name.
pub(crate) fn task_attrs(info: &TaskInfo, a: &mut Vec<KeyValue>) {
    if let Some(w) = &info.wildcards {
        a.push(KeyValue::new(attr::TASK_WILDCARDS, w.clone()));
    }
    if let Some(t) = info.threads {
        a.push(KeyValue::new(attr::TASK_THREADS, t as i64));
    }
    if let Some(t) = info.time_limit_s {
        a.push(KeyValue::new(attr::TASK_TIME_LIMIT, t as i64));
    }
    if info.in_engine {
        a.push(KeyValue::new(attr::TASK_IN_ENGINE, true));
    }
    if let Some(tag) = &info.tag {
        a.push(KeyValue::new(attr::TASK_TAG, tag.clone()));
    }
}
