//! Repeats of one program under one parent, folded into one span, and what a span costs a
//! trace in OTLP protobuf bytes.
use std::time::{Duration, SystemTime};

use opentelemetry::{KeyValue, Value, trace::Status};
use opentelemetry_sdk::trace::SpanData;
use pipetrace_semconv::attr;

use crate::signals::ReadySpan;
use pipetrace_core::judgement::Kind;

/// Figures a folded span sums over the spans it stands for.
const SUMMED: &[&str] = &[
    attr::CPU_USER_TIME,
    attr::CPU_SYSTEM_TIME,
    attr::CPU_RUN_QUEUE_DELAY,
    attr::MEMORY_MINOR_FAULTS,
    attr::MEMORY_MAJOR_FAULTS,
    attr::MEMORY_WAIT_TIME,
    attr::CONTEXT_SWITCHES_VOLUNTARY,
    attr::CONTEXT_SWITCHES_INVOLUNTARY,
    attr::IO_READ_BYTES,
    attr::IO_WRITE_BYTES,
    attr::IO_READ_CALLS,
    attr::IO_WRITE_CALLS,
    attr::DISK_READ_BYTES,
    attr::DISK_WRITE_BYTES,
    attr::DISK_CANCELLED_WRITE_BYTES,
    attr::DISK_WAIT_TIME,
    attr::NETWORK_TRANSMIT_BYTES,
    attr::NETWORK_RECEIVE_BYTES,
    attr::USAGE_MISSING,
    attr::COST,
];

/// Figures a folded span takes the largest of.
const LARGEST: &[&str] = &[attr::MEMORY_PEAK, attr::MEMORY_MAXRSS];

fn int_attr(s: &SpanData, key: &str) -> Option<i64> {
    s.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .and_then(|kv| match kv.value {
            Value::I64(v) => Some(v),
            _ => None,
        })
}

/// The processes a span stands for: a task's or run's count, else its own one.
pub(super) fn processes(s: &SpanData) -> i64 {
    int_attr(s, attr::USAGE_PROCESSES).unwrap_or(1)
}

pub(super) fn pid(s: &SpanData) -> Option<i64> {
    int_attr(s, attr::PROCESS_PID)
}

fn wall(s: &SpanData) -> Duration {
    (s.end_time.duration_since(s.start_time)).unwrap_or_default()
}

/// Whether a span may stand among its repeats in one folded span: short, ended well,
/// nothing flagged on it (an OOM kill, a signal, a stall are events), one process of its
/// own (a task of more keeps its span and its tools).
pub(super) fn foldable(s: &ReadySpan, under: Duration) -> bool {
    let d = &s.span;
    matches!(s.kind, Kind::Tool | Kind::Task)
        && !matches!(d.status, Status::Error { .. })
        && d.events.events.is_empty()
        && processes(d) == 1
        && wall(d) < under
}

/// Spans of one program under one parent, folded.
pub(super) struct Group {
    first: ReadySpan,
    spans: i64,
    processes: i64,
    slowest: (Duration, Option<i64>),
    end: SystemTime,
}

impl Group {
    pub(super) fn new(s: ReadySpan) -> Self {
        Self {
            spans: 1,
            processes: processes(&s.span),
            slowest: (wall(&s.span), pid(&s.span)),
            end: s.span.end_time,
            first: s,
        }
    }

    pub(super) fn add(&mut self, s: &ReadySpan) {
        let d = &s.span;
        self.spans += 1;
        self.processes += processes(d);
        if wall(d) > self.slowest.0 {
            self.slowest = (wall(d), pid(d));
        }
        let first = &mut self.first.span;
        first.start_time = first.start_time.min(d.start_time);
        self.end = self.end.max(d.end_time);
        for kv in &d.attributes {
            let key = kv.key.as_str();
            let (sum, largest) = (SUMMED.contains(&key), LARGEST.contains(&key));
            if !(sum || largest) {
                continue;
            }
            match first.attributes.iter_mut().find(|f| f.key == kv.key) {
                Some(f) => f.value = merge(&f.value, &kv.value, sum),
                None => first.attributes.push(kv.clone()),
            }
        }
    }

    /// One span: the first one alone, or the folded span of all.
    pub(super) fn into_span(self) -> ReadySpan {
        let mut s = self.first;
        if self.spans == 1 {
            return s;
        }
        let d = &mut s.span;
        d.end_time = self.end.max(d.start_time);
        d.attributes
            .retain(|kv| kv.key.as_str() != attr::USAGE_PROCESSES);
        d.attributes.extend([
            KeyValue::new(attr::FOLD_SPANS, self.spans),
            KeyValue::new(attr::USAGE_PROCESSES, self.processes),
            KeyValue::new(attr::FOLD_SLOWEST_DURATION, self.slowest.0.as_secs_f64()),
        ]);
        if let Some(pid) = self.slowest.1 {
            d.attributes
                .push(KeyValue::new(attr::FOLD_SLOWEST_PID, pid));
        }
        s
    }
}

fn merge(a: &Value, b: &Value, sum: bool) -> Value {
    match (a, b) {
        (Value::I64(x), Value::I64(y)) if sum => Value::I64(x.saturating_add(*y)),
        (Value::I64(x), Value::I64(y)) => Value::I64(*x.max(y)),
        (Value::F64(x), Value::F64(y)) if sum => Value::F64(x + y),
        (Value::F64(x), Value::F64(y)) => Value::F64(x.max(*y)),
        _ => a.clone(),
    }
}

fn value_bytes(v: &Value) -> usize {
    match v {
        Value::String(s) => s.as_str().len() + 4,
        Value::Array(a) => {
            use opentelemetry::Array;
            match a {
                Array::String(v) => v.iter().map(|s| s.as_str().len() + 6).sum(),
                Array::I64(v) => v.len() * 12,
                Array::F64(v) => v.len() * 12,
                Array::Bool(v) => v.len() * 4,
                _ => 16,
            }
        }
        _ => 11,
    }
}

fn attrs_bytes(attrs: &[KeyValue]) -> usize {
    (attrs.iter())
        .map(|kv| kv.key.as_str().len() + value_bytes(&kv.value) + 8)
        .sum()
}

/// What a span adds to its trace in OTLP protobuf, a little over (ids, times, kind, status,
/// tags and lengths by their largest size).
pub(super) fn bytes(s: &SpanData) -> usize {
    let events: usize = (s.events.events.iter())
        .map(|e| e.name.len() + attrs_bytes(&e.attributes) + 20)
        .sum();
    let links: usize = (s.links.links.iter())
        .map(|l| 40 + attrs_bytes(&l.attributes))
        .sum();
    let status = match &s.status {
        Status::Error { description } => description.len() + 8,
        _ => 4,
    };
    80 + s.name.len() + attrs_bytes(&s.attributes) + events + links + status
}
