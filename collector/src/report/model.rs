//! The few span fields a report needs, from the SDK's spans or from OTLP protobuf spans.
use std::collections::BTreeMap;

use opentelemetry::{Array, KeyValue, Value, trace::Status};
use opentelemetry_proto::tonic::{
    common::v1::{AnyValue, KeyValue as ProtoKeyValue, any_value},
    trace::v1::Span,
};
use opentelemetry_sdk::trace::SpanData;
use pipetrace_semconv::{attr, event};

use pipetrace_core::judgement::{Kind, ReportEvent, ReportSpan};

/// The judgement's spans and events decoded from the SDK's spans (a run as it exports them)
/// and from OTLP protobuf spans (a trace file read back): the judgement sees neither. The
/// run's own findings (`pipetrace.finding` events) are left out: the judgement makes them
/// again by the same rule, and no view shows them twice.
pub trait Decode: Sized {
    fn from_sdk(s: &SpanData) -> Self;
    /// A span of a known kind with only the attributes in `keep`: what a run keeps of
    /// each task and tool for its end, without copying the rest of their attributes.
    fn from_sdk_keeping(s: &SpanData, kind: Kind, keep: &[&str]) -> Self;
    fn from_proto(s: &Span) -> Self;
}

/// An SDK span event, with its figures.
pub fn event_from_sdk(e: &opentelemetry::trace::Event) -> ReportEvent {
    let Attrs { numbers, texts, .. } = sdk_attrs(&e.attributes, None);
    ReportEvent {
        name: e.name.to_string(),
        time: unix_nanos(e.timestamp),
        numbers,
        texts,
    }
}

/// A span's or event's attributes the report reads: numbers, texts and lists of texts.
#[derive(Default)]
struct Attrs {
    numbers: BTreeMap<String, f64>,
    texts: BTreeMap<String, String>,
    lists: BTreeMap<String, Vec<String>>,
}

/// What the table and the page read of a task; the rest of its span is in the trace.
/// (Waits and cost too, for `pipetrace compare`'s kept runs; CPU wait, allocation, network
/// and GPUs for the machines, `sizing`; tag, exit, signal and what was asked for the page's
/// jobs table.)
pub const TASK_KEYS: [&str; 41] = [
    attr::CICD_PIPELINE_TASK_NAME,
    attr::TASK_TIME_LIMIT,
    attr::PROCESS_PID,
    attr::TASK_LOGS,
    attr::CICD_PIPELINE_TASK_RUN_ID,
    attr::TASK_TAG,
    attr::TASK_WILDCARDS,
    attr::TASK_THREADS,
    attr::PROCESS_EXIT_CODE,
    attr::PROCESS_SIGNAL,
    attr::MEMORY_LIMIT,
    attr::CPU_ALLOCATION_SOURCE,
    attr::RECOMMENDATION_MEMORY,
    attr::RECOMMENDATION_CPUS,
    attr::FOLD_SPANS,
    attr::CPU_USER_TIME,
    attr::CPU_SYSTEM_TIME,
    attr::CPU_RUN_QUEUE_DELAY,
    attr::CPU_ALLOCATED,
    attr::NETWORK_RECEIVE_BYTES,
    attr::NETWORK_TRANSMIT_BYTES,
    attr::GPU_IDS,
    attr::MEMORY_PEAK,
    attr::DISK_READ_BYTES,
    attr::DISK_WRITE_BYTES,
    attr::BOTTLENECK,
    attr::BOTTLENECK_REASON,
    attr::RIGHTSIZING,
    attr::TASK_INPUTS,
    attr::TASK_INPUTS_COUNT,
    attr::TASK_OUTPUTS,
    attr::TASK_OUTPUTS_COUNT,
    attr::GPU_TIME,
    attr::GPU_UTILIZATION,
    attr::GPU_MEMORY_PEAK,
    attr::GPU_RIGHTSIZING,
    attr::GPU_RECOMMENDATION,
    attr::DISK_WAIT_TIME,
    attr::MEMORY_WAIT_TIME,
    attr::COST,
    attr::COST_CURRENCY,
];

/// What the page draws of a tool (a run may have many thousands), and the I/O and waits
/// `pipetrace compare` reads of it; its pid, by which an OOM kill names the job whose
/// allocation set it off.
pub const TOOL_KEYS: [&str; 12] = [
    attr::PROCESS_PID,
    attr::TOOL_TASK_RUN_ALTERNATIVES,
    attr::CPU_USER_TIME,
    attr::CPU_SYSTEM_TIME,
    attr::MEMORY_PEAK,
    attr::BOTTLENECK,
    attr::BOTTLENECK_REASON,
    attr::DISK_READ_BYTES,
    attr::DISK_WRITE_BYTES,
    attr::CPU_RUN_QUEUE_DELAY,
    attr::DISK_WAIT_TIME,
    attr::MEMORY_WAIT_TIME,
];

/// The attributes in `keep` (all of them when None).
fn sdk_attrs(kvs: &[KeyValue], keep: Option<&[&str]>) -> Attrs {
    let mut a = Attrs::default();
    for kv in kvs {
        if keep.is_some_and(|keep| !keep.contains(&kv.key.as_str())) {
            continue;
        }
        let k = kv.key.as_str().to_string();
        match &kv.value {
            Value::F64(v) => {
                a.numbers.insert(k, *v);
            }
            Value::I64(v) => {
                a.numbers.insert(k, *v as f64);
            }
            Value::String(v) => {
                a.texts.insert(k, v.to_string());
            }
            Value::Array(Array::String(v)) => {
                a.lists.insert(k, v.iter().map(|s| s.to_string()).collect());
            }
            _ => {}
        }
    }
    a
}

fn proto_attrs(kvs: &[ProtoKeyValue]) -> Attrs {
    let mut a = Attrs::default();
    for kv in kvs {
        match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
            Some(any_value::Value::DoubleValue(v)) => {
                a.numbers.insert(kv.key.clone(), *v);
            }
            Some(any_value::Value::IntValue(v)) => {
                a.numbers.insert(kv.key.clone(), *v as f64);
            }
            Some(any_value::Value::StringValue(v)) => {
                a.texts.insert(kv.key.clone(), v.clone());
            }
            Some(any_value::Value::ArrayValue(v)) => {
                let text = |x: &AnyValue| match &x.value {
                    Some(any_value::Value::StringValue(s)) => Some(s.clone()),
                    _ => None,
                };
                a.lists
                    .insert(kv.key.clone(), v.values.iter().filter_map(text).collect());
            }
            _ => {}
        }
    }
    a
}

fn unix_nanos(t: std::time::SystemTime) -> u64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// What a span is, from the attributes each kind carries.
fn kind_of(texts: &BTreeMap<String, String>, numbers: &BTreeMap<String, f64>) -> Kind {
    // A further trace's root (`pipetrace.trace.part`) only holds spans, as a started span
    // only announces.
    if texts.contains_key(attr::STARTED_NAME) || numbers.contains_key(attr::TRACE_PART) {
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

impl Decode for ReportSpan {
    fn from_sdk(s: &SpanData) -> Self {
        let a = sdk_attrs(&s.attributes, None);
        let kind = kind_of(&a.texts, &a.numbers);
        of_sdk(s, kind, a)
    }

    fn from_sdk_keeping(s: &SpanData, kind: Kind, keep: &[&str]) -> Self {
        of_sdk(s, kind, sdk_attrs(&s.attributes, Some(keep)))
    }

    fn from_proto(s: &Span) -> Self {
        let Attrs {
            numbers,
            texts,
            lists,
        } = proto_attrs(&s.attributes);
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        let status = s.status.clone().unwrap_or_default();
        ReportSpan {
            trace: hex(&s.trace_id),
            id: hex(&s.span_id),
            parent: (!s.parent_span_id.is_empty()).then(|| hex(&s.parent_span_id)),
            kind: kind_of(&texts, &numbers),
            name: s.name.clone(),
            start: s.start_time_unix_nano,
            end: s.end_time_unix_nano,
            error: (status.code == 2).then_some(status.message),
            numbers,
            texts,
            lists,
            events: (s.events.iter())
                .filter(|e| e.name != event::FINDING)
                .map(proto_event)
                .collect(),
        }
    }
}

fn proto_event(e: &opentelemetry_proto::tonic::trace::v1::span::Event) -> ReportEvent {
    let Attrs { numbers, texts, .. } = proto_attrs(&e.attributes);
    ReportEvent {
        name: e.name.clone(),
        time: e.time_unix_nano,
        numbers,
        texts,
    }
}

fn of_sdk(s: &SpanData, kind: Kind, a: Attrs) -> ReportSpan {
    let Attrs {
        numbers,
        texts,
        lists,
    } = a;
    let parent = (s.parent_span_id != opentelemetry::trace::SpanId::INVALID)
        .then(|| s.parent_span_id.to_string());
    ReportSpan {
        trace: s.span_context.trace_id().to_string(),
        id: s.span_context.span_id().to_string(),
        parent,
        kind,
        name: s.name.to_string(),
        start: unix_nanos(s.start_time),
        end: unix_nanos(s.end_time),
        error: match &s.status {
            Status::Error { description } => Some(description.to_string()),
            _ => None,
        },
        numbers,
        texts,
        lists,
        events: (s.events.iter())
            .filter(|e| e.name != event::FINDING)
            .map(event_from_sdk)
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use opentelemetry_proto::tonic::{
        collector::trace::v1::ExportTraceServiceRequest, common::v1::ArrayValue,
    };

    use super::*;

    fn kv(key: &str, value: any_value::Value) -> ProtoKeyValue {
        ProtoKeyValue {
            key: key.into(),
            value: Some(AnyValue { value: Some(value) }),
        }
    }

    fn strings(paths: &[&str]) -> any_value::Value {
        let values = paths
            .iter()
            .map(|p| AnyValue {
                value: Some(any_value::Value::StringValue(p.to_string())),
            })
            .collect();
        any_value::Value::ArrayValue(ArrayValue { values })
    }

    #[test]
    fn a_task_read_back_from_otlp_json_has_its_inputs_and_outputs() {
        let span = Span {
            trace_id: vec![1; 16],
            span_id: vec![2; 8],
            name: "align (s1)".into(),
            attributes: vec![
                kv(
                    attr::CICD_PIPELINE_TASK_NAME,
                    any_value::Value::StringValue("align".into()),
                ),
                kv(attr::TASK_INPUTS, strings(&["/d/a.fq", "/d/b.fq"])),
                kv(attr::TASK_INPUTS_COUNT, any_value::Value::IntValue(7)),
                kv(attr::TASK_OUTPUTS, strings(&["/o/a.bam"])),
                kv(attr::TASK_OUTPUTS_COUNT, any_value::Value::IntValue(1)),
            ],
            ..Default::default()
        };
        let req = crate::report::read::request_of(vec![span]);
        // As `pipetrace report` reads it: a line of OTLP JSON.
        let line = serde_json::to_string(&req).unwrap();
        let back: ExportTraceServiceRequest = serde_json::from_str(&line).unwrap();
        let s = ReportSpan::from_proto(&back.resource_spans[0].scope_spans[0].spans[0]);
        assert_eq!(s.kind, Kind::Task);
        let f = crate::report::files::files_of(&s).expect("files");
        assert_eq!(f.inputs, ["/d/a.fq", "/d/b.fq"]);
        assert_eq!(f.outputs, ["/o/a.bam"]);
        assert_eq!((f.inputs_count, f.outputs_count), (7, 1));
    }

    #[test]
    fn a_span_kept_for_the_end_of_a_run_holds_only_what_is_shown() {
        use opentelemetry::trace::{SpanContext, SpanId, SpanKind, TraceFlags, TraceId};
        let span = SpanData {
            span_context: SpanContext::new(
                TraceId::from_bytes([1; 16]),
                SpanId::from_bytes([2; 8]),
                TraceFlags::SAMPLED,
                false,
                Default::default(),
            ),
            parent_span_id: SpanId::from_bytes([3; 8]),
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: "bwa".into(),
            start_time: std::time::UNIX_EPOCH,
            end_time: std::time::UNIX_EPOCH,
            attributes: vec![
                KeyValue::new(attr::CPU_USER_TIME, 1.5),
                KeyValue::new(attr::PROCESS_COMMAND_LINE, "bwa mem ref.fa A.fq"),
                KeyValue::new(
                    attr::TASK_INPUTS,
                    Value::Array(Array::String(vec!["A.fq".into()])),
                ),
            ],
            dropped_attributes_count: 0,
            events: Default::default(),
            links: Default::default(),
            status: Status::Unset,
            instrumentation_scope: Default::default(),
        };
        let tool = ReportSpan::from_sdk_keeping(&span, Kind::Tool, &TOOL_KEYS);
        assert_eq!((tool.kind, tool.cpu()), (Kind::Tool, 1.5));
        assert!(tool.texts.is_empty() && tool.lists.is_empty(), "{tool:?}");
        assert_eq!(tool.parent.as_deref(), Some("0303030303030303"));
        let task = ReportSpan::from_sdk_keeping(&span, Kind::Task, &TASK_KEYS);
        assert_eq!(task.lists[attr::TASK_INPUTS], ["A.fq"]);
        assert!(task.text(attr::PROCESS_COMMAND_LINE).is_none());
    }
}
