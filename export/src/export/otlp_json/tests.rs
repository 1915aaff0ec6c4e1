use std::{borrow::Cow, time::Duration};

use opentelemetry::{
    Array, InstrumentationScope, KeyValue, StringValue, Value as OtelValue,
    trace::{SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState},
};
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_sdk::{
    Resource,
    trace::{SpanData, SpanEvents, SpanLinks},
};

use super::{reference::trace_request, *};

fn scope(name: &'static str) -> InstrumentationScope {
    InstrumentationScope::builder(name)
        .with_version("1.2.3")
        .with_schema_url("https://opentelemetry.io/schemas/1.30.0")
        .with_attributes([KeyValue::new("scope.attr", 1)])
        .build()
}

/// A span with every kind of value, an escaped string, events and a link.
fn span(id: u64, scope: InstrumentationScope, status: Status) -> SpanData {
    let ctx = SpanContext::new(
        TraceId::from(0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10 + u128::from(id)),
        SpanId::from(0xa1b2_c3d4_e5f6_0718 + id),
        TraceFlags::SAMPLED,
        false,
        TraceState::default(),
    );
    let mut events = SpanEvents::default();
    events.events.push(opentelemetry::trace::Event::new(
        pipetrace_semconv::event::SIGNAL,
        std::time::UNIX_EPOCH + Duration::from_nanos(1_795_000_000_123_456_789),
        vec![KeyValue::new("signal.name", "SIGKILL")],
        2,
    ));
    let mut links = SpanLinks::default();
    links
        .links
        .push(opentelemetry::trace::Link::new(ctx.clone(), vec![], 0));
    SpanData {
        span_context: ctx,
        parent_span_id: if id == 0 {
            SpanId::INVALID
        } else {
            SpanId::from(7)
        },
        parent_span_is_remote: id == 2,
        span_kind: SpanKind::Internal,
        name: Cow::Owned(format!("task \"quoted\" \\ é\n{id}")),
        start_time: std::time::UNIX_EPOCH + Duration::from_nanos(1_795_000_000_000_000_001),
        end_time: std::time::UNIX_EPOCH + Duration::from_nanos(u64::MAX / 2),
        attributes: vec![
            KeyValue::new("s", "tab\there \u{1} ctl"),
            KeyValue::new("i", -42i64),
            KeyValue::new("big", i64::MAX),
            KeyValue::new("f", 0.1 + 0.2),
            KeyValue::new("whole", 2.0),
            KeyValue::new("nan", f64::NAN),
            KeyValue::new("b", true),
            KeyValue::new(
                "arr",
                OtelValue::Array(Array::String(vec![StringValue::from("a"), "b".into()])),
            ),
            KeyValue::new("ints", OtelValue::Array(Array::I64(vec![1, -2]))),
            KeyValue::new("floats", OtelValue::Array(Array::F64(vec![1.5]))),
            KeyValue::new("bools", OtelValue::Array(Array::Bool(vec![false]))),
        ],
        dropped_attributes_count: 3,
        events,
        links,
        status,
        instrumentation_scope: scope,
    }
}

fn resource() -> ResourceAttributesWithSchema {
    let r = Resource::builder_empty()
        .with_attributes([
            KeyValue::new(pipetrace_semconv::attr::SERVICE_NAME, "pipetrace"),
            KeyValue::new(pipetrace_semconv::attr::HOST_NAME, "node-1"),
        ])
        .build();
    (&r).into()
}

fn spans() -> Vec<SpanData> {
    let error = Status::error("tool exited with code 3: \"oops\"");
    vec![
        span(0, scope("pipetrace"), Status::Unset),
        span(1, scope("pipetrace.self"), error),
        span(2, scope("pipetrace"), Status::Ok),
    ]
}

#[test]
fn the_trace_file_line_is_byte_for_byte_what_serde_writes_of_the_request() {
    let resource = resource();
    let mut ours = Vec::new();
    write_spans(&mut ours, &spans(), &resource);
    let serde = serde_json::to_vec(&trace_request(spans(), &resource)).unwrap();
    assert_eq!(
        String::from_utf8(ours).unwrap(),
        String::from_utf8(serde).unwrap()
    );
}

#[test]
fn an_empty_or_unusual_value_is_written_as_serde_does() {
    let values = [
        AnyValue { value: None },
        AnyValue {
            value: Some(Value::BytesValue(vec![0, 255, 7])),
        },
        AnyValue {
            value: Some(Value::KvlistValue(
                opentelemetry_proto::tonic::common::v1::KeyValueList {
                    values: vec![opentelemetry_proto::tonic::common::v1::KeyValue {
                        key: "k".into(),
                        value: None,
                    }],
                },
            )),
        },
    ];
    for v in values {
        let mut ours = Vec::new();
        any_value(&mut ours, &v);
        assert_eq!(ours, serde_json::to_vec(&v).unwrap());
    }
}

#[test]
fn spans_are_grouped_by_scope_in_the_order_scopes_first_come_and_none_is_lost() {
    let resource = resource();
    let req = trace_request(spans(), &resource);
    let rs = &req.resource_spans;
    assert_eq!(rs.len(), 1);
    let scopes: Vec<(&str, usize)> = (rs[0].scope_spans.iter())
        .map(|s| (s.scope.as_ref().unwrap().name.as_str(), s.spans.len()))
        .collect();
    assert_eq!(scopes, [("pipetrace", 2), ("pipetrace.self", 1)]);
    // What the SDK's own grouping makes of the same spans, scope by scope (compared
    // encoded: a NaN is never equal to itself).
    use prost::Message;
    let theirs = opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope(
        spans(),
        &resource,
    );
    for ours in &rs[0].scope_spans {
        let same = theirs[0].scope_spans.iter().find(|s| s.scope == ours.scope);
        assert_eq!(ours.encode_to_vec(), same.unwrap().encode_to_vec());
    }
    assert_eq!(rs[0].resource, theirs[0].resource);
}

#[test]
fn strings_are_written_as_serde_json_writes_them() {
    let mut all: Vec<String> = ["", "plain", "sp ace/slash", "é ü 🧬", "tab\there", "nl\n"]
        .map(String::from)
        .into();
    all.extend(["q\"uote", "back\\slash", "\u{7f}del", "\u{1}ctl"].map(String::from));
    all.extend((0u8..128).map(|b| format!("a{}z", char::from(b))));
    for s in all {
        let mut out = Vec::new();
        string(&mut out, &s);
        assert_eq!(out, serde_json::to_vec(&s).unwrap(), "{s:?}");
    }
}
