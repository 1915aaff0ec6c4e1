//! A task's or run's containers as span events: when the first of its processes in each
//! container started, and when the last ended with what they used together.
use std::borrow::Cow;

use opentelemetry::{KeyValue, trace::Event};
use pipetrace_semconv::{attr, event};

use pipetrace_core::accounting::ByContainer;
use pipetrace_core::machine::HostInfo;

fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A start and an end event per container, in id order.
pub(crate) fn lifecycle_events(by: &ByContainer, host: &HostInfo) -> Vec<Event> {
    let mut out = Vec::with_capacity(by.parts.len() * 2);
    for part in by.parts.values() {
        let c = &part.container;
        let mut start = vec![KeyValue::new(attr::CONTAINER_ID, c.id.clone())];
        if let Some(r) = c.runtime {
            start.push(KeyValue::new(attr::CONTAINER_RUNTIME, r));
        }
        if let Some(n) = &c.details.name {
            start.push(KeyValue::new(attr::CONTAINER_NAME, n.clone()));
        }
        if let Some(i) = &c.details.image {
            start.push(KeyValue::new(attr::CONTAINER_IMAGE_NAME, i.clone()));
        }
        let r = &part.rollup;
        let end = vec![
            KeyValue::new(attr::CONTAINER_ID, c.id.clone()),
            KeyValue::new(attr::USAGE_PROCESSES, int(r.processes)),
            KeyValue::new(attr::CPU_USER_TIME, r.totals.cpu_user_ns as f64 / 1e9),
            KeyValue::new(attr::CPU_SYSTEM_TIME, r.totals.cpu_system_ns as f64 / 1e9),
            KeyValue::new(attr::MEMORY_PEAK, int(r.peak_memory())),
        ];
        let at = |ns| host.system_time(ns);
        out.push(Event::new(
            Cow::Borrowed(event::CONTAINER_START),
            at(part.start_ns),
            start,
            0,
        ));
        out.push(Event::new(
            Cow::Borrowed(event::CONTAINER_END),
            at(part.end_ns),
            end,
            0,
        ));
    }
    out
}
