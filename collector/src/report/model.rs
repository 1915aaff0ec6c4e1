//! The few span fields a report needs, from the SDK's spans or from OTLP protobuf spans.
use std::collections::BTreeMap;

use opentelemetry::{KeyValue, Value, trace::Status};
use opentelemetry_proto::tonic::{
    common::v1::{KeyValue as ProtoKeyValue, any_value},
    trace::v1::Span,
};
use opentelemetry_sdk::trace::SpanData;
use pipetrace_semconv::attr;

pub use crate::signals::Kind;

#[derive(Clone, Debug)]
pub struct ReportSpan {
    /// The trace, one per run.
    pub trace: String,
    pub id: String,
    pub parent: Option<String>,
    pub kind: Kind,
    pub name: String,
    /// Unix nanoseconds.
    pub start: u64,
    pub end: u64,
    pub error: Option<String>,
    pub numbers: BTreeMap<String, f64>,
    pub texts: BTreeMap<String, String>,
    pub events: Vec<ReportEvent>,
}

/// A span event with its figures, so the report can say what happened in words.
#[derive(Clone, Debug)]
pub struct ReportEvent {
    pub name: String,
    /// Unix nanoseconds.
    pub time: u64,
    pub numbers: BTreeMap<String, f64>,
    pub texts: BTreeMap<String, String>,
}

impl ReportEvent {
    pub fn from_sdk(e: &opentelemetry::trace::Event) -> Self {
        let (numbers, texts) = sdk_attrs(&e.attributes);
        Self {
            name: e.name.to_string(),
            time: unix_nanos(e.timestamp),
            numbers,
            texts,
        }
    }
}

type Attrs = (BTreeMap<String, f64>, BTreeMap<String, String>);

fn sdk_attrs(kvs: &[KeyValue]) -> Attrs {
    let (mut numbers, mut texts) = (BTreeMap::new(), BTreeMap::new());
    for kv in kvs {
        let k = kv.key.as_str().to_string();
        match &kv.value {
            Value::F64(v) => {
                numbers.insert(k, *v);
            }
            Value::I64(v) => {
                numbers.insert(k, *v as f64);
            }
            Value::String(v) => {
                texts.insert(k, v.to_string());
            }
            _ => {}
        }
    }
    (numbers, texts)
}

fn proto_attrs(kvs: &[ProtoKeyValue]) -> Attrs {
    let (mut numbers, mut texts) = (BTreeMap::new(), BTreeMap::new());
    for kv in kvs {
        match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
            Some(any_value::Value::DoubleValue(v)) => {
                numbers.insert(kv.key.clone(), *v);
            }
            Some(any_value::Value::IntValue(v)) => {
                numbers.insert(kv.key.clone(), *v as f64);
            }
            Some(any_value::Value::StringValue(v)) => {
                texts.insert(kv.key.clone(), v.clone());
            }
            _ => {}
        }
    }
    (numbers, texts)
}

fn unix_nanos(t: std::time::SystemTime) -> u64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// What a span is, from the attributes each kind carries.
fn kind_of(texts: &BTreeMap<String, String>) -> Kind {
    if texts.contains_key(attr::STARTED_NAME) {
        Kind::Started
    } else if texts.contains_key(attr::RUN_ENGINE) {
        Kind::Run
    } else if texts.contains_key(attr::CICD_PIPELINE_TASK_NAME) {
        Kind::Task
    } else if texts.contains_key(attr::ENGINE_HELPERS) {
        Kind::Engine
    } else {
        Kind::Tool
    }
}

impl ReportSpan {
    /// Keeps only what the report draws for a tool (a run may have many thousands).
    pub fn slim(mut self) -> Self {
        const KEEP: [&str; 5] = [
            attr::CPU_USER_TIME,
            attr::CPU_SYSTEM_TIME,
            attr::MEMORY_PEAK,
            attr::BOTTLENECK,
            attr::BOTTLENECK_REASON,
        ];
        self.numbers.retain(|k, _| KEEP.contains(&k.as_str()));
        self.texts.retain(|k, _| KEEP.contains(&k.as_str()));
        self
    }

    pub fn num(&self, key: &str) -> f64 {
        self.numbers.get(key).copied().unwrap_or(0.0)
    }

    pub fn text(&self, key: &str) -> Option<&str> {
        self.texts.get(key).map(String::as_str)
    }

    pub fn secs(&self) -> f64 {
        self.end.saturating_sub(self.start) as f64 / 1e9
    }

    pub fn cpu(&self) -> f64 {
        self.num(attr::CPU_USER_TIME) + self.num(attr::CPU_SYSTEM_TIME)
    }

    pub fn from_sdk(s: &SpanData) -> Self {
        let (numbers, texts) = sdk_attrs(&s.attributes);
        let parent = (s.parent_span_id != opentelemetry::trace::SpanId::INVALID)
            .then(|| s.parent_span_id.to_string());
        Self {
            trace: s.span_context.trace_id().to_string(),
            id: s.span_context.span_id().to_string(),
            parent,
            kind: kind_of(&texts),
            name: s.name.to_string(),
            start: unix_nanos(s.start_time),
            end: unix_nanos(s.end_time),
            error: match &s.status {
                Status::Error { description } => Some(description.to_string()),
                _ => None,
            },
            numbers,
            texts,
            events: s.events.iter().map(ReportEvent::from_sdk).collect(),
        }
    }

    pub fn from_proto(s: &Span) -> Self {
        let (numbers, texts) = proto_attrs(&s.attributes);
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        let status = s.status.clone().unwrap_or_default();
        Self {
            trace: hex(&s.trace_id),
            id: hex(&s.span_id),
            parent: (!s.parent_span_id.is_empty()).then(|| hex(&s.parent_span_id)),
            kind: kind_of(&texts),
            name: s.name.clone(),
            start: s.start_time_unix_nano,
            end: s.end_time_unix_nano,
            error: (status.code == 2).then_some(status.message),
            numbers,
            texts,
            events: s
                .events
                .iter()
                .map(|e| {
                    let (numbers, texts) = proto_attrs(&e.attributes);
                    ReportEvent {
                        name: e.name.clone(),
                        time: e.time_unix_nano,
                        numbers,
                        texts,
                    }
                })
                .collect(),
        }
    }
}
