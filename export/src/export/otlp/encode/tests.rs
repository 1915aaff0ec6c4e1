//! The encoder against the request opentelemetry-proto builds of the same spans, encoded by
//! prost: the same bytes, for every kind of value, event, link, status and scope.
use std::{borrow::Cow, time::SystemTime};

use opentelemetry::{
    Array, InstrumentationScope, KeyValue, StringValue, Value,
    trace::{Event, Link, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState},
};
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use prost::Message;

use super::{Resource, trace_request};

fn at(ns: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + std::time::Duration::from_nanos(ns)
}

fn ctx(trace: u128, span: u64, remote: bool, state: &str) -> SpanContext {
    let state = TraceState::from_key_value(
        state
            .split(',')
            .filter(|s| !s.is_empty())
            .filter_map(|kv| kv.split_once('=')),
    )
    .unwrap();
    SpanContext::new(
        TraceId::from(trace),
        SpanId::from(span),
        TraceFlags::SAMPLED,
        remote,
        state,
    )
}

/// Every kind of attribute value, defaults among them (0, false, "", 0.0, empty arrays).
fn attributes(i: i64) -> Vec<KeyValue> {
    let long = "x".repeat(300);
    vec![
        KeyValue::new("s", format!("tool {i}")),
        KeyValue::new("empty", ""),
        KeyValue::new("long", long),
        KeyValue::new("zero", 0_i64),
        KeyValue::new("neg", -5 - i),
        KeyValue::new("big", i64::MAX),
        KeyValue::new("t", true),
        KeyValue::new("f", false),
        KeyValue::new("d", 1.5),
        KeyValue::new("d0", 0.0),
        KeyValue::new("dn", -0.25),
        KeyValue::new("ab", Value::Array(Array::Bool(vec![true, false]))),
        KeyValue::new("ai", Value::Array(Array::I64(vec![0, 1, -1]))),
        KeyValue::new("af", Value::Array(Array::F64(vec![0.0, 2.5]))),
        KeyValue::new(
            "as",
            Value::Array(Array::String(vec![StringValue::from("a"), "".into()])),
        ),
        KeyValue::new("aempty", Value::Array(Array::I64(vec![]))),
    ]
}

fn span(i: u64, scope: InstrumentationScope) -> SpanData {
    let mut events = SpanEvents::default();
    events
        .events
        .push(Event::new("stall", at(5 + i), attributes(1), 2));
    events.events.push(Event::new("", at(0), vec![], 0));
    events.dropped_count = i as u32;
    let mut links = SpanLinks::default();
    links
        .links
        .push(Link::new(ctx(9, 3, true, "k=v"), attributes(2), 1));
    links.links.push(Link::new(ctx(9, 4, false, ""), vec![], 0));
    let status = match i % 3 {
        0 => Status::Unset,
        1 => Status::Ok,
        _ => Status::Error {
            description: Cow::Owned(format!("task {i} failed")),
        },
    };
    SpanData {
        span_context: ctx(
            7,
            i + 1,
            false,
            if i.is_multiple_of(2) { "" } else { "a=b,c=d" },
        ),
        parent_span_id: if i == 0 {
            SpanId::INVALID
        } else {
            SpanId::from(1)
        },
        parent_span_is_remote: i % 2 == 1,
        span_kind: [SpanKind::Internal, SpanKind::Server, SpanKind::Client][i as usize % 3].clone(),
        name: format!("span {i}").into(),
        start_time: at(1_700_000_000_000_000_000 + i),
        end_time: at(1_700_000_001_000_000_000 + i * 300),
        attributes: if i == 2 { vec![] } else { attributes(i as i64) },
        dropped_attributes_count: (i as u32) % 2,
        events: if i == 3 {
            SpanEvents::default()
        } else {
            events
        },
        links: if i == 4 { SpanLinks::default() } else { links },
        status,
        instrumentation_scope: scope,
    }
}

fn resource(schema: Option<&str>) -> ResourceAttributesWithSchema {
    let r = opentelemetry_sdk::Resource::builder_empty().with_attributes([
        KeyValue::new("r.name", "pipetrace"),
        KeyValue::new("r.node", "node1"),
        KeyValue::new("pid", 7_i64),
    ]);
    let r = match schema {
        Some(s) => r.with_schema_url([], s.to_string()),
        None => r,
    };
    ResourceAttributesWithSchema::from(&r.build())
}

/// The request as opentelemetry-proto builds it, encoded by prost.
fn prost_bytes(spans: &[SpanData], res: &ResourceAttributesWithSchema) -> Vec<u8> {
    crate::export::otlp_json::reference::trace_request(spans.to_vec(), res).encode_to_vec()
}

#[test]
fn the_bytes_are_prosts_for_every_field() {
    let plain = InstrumentationScope::builder("pipetrace").build();
    let full = InstrumentationScope::builder("other")
        .with_version("1.2")
        .with_schema_url("https://opentelemetry.io/schemas/1.30.0")
        .with_attributes([KeyValue::new("scope.attr", 3_i64)])
        .build();
    let spans: Vec<SpanData> = (0..8)
        .map(|i| {
            span(
                i,
                if i % 3 == 2 {
                    full.clone()
                } else {
                    plain.clone()
                },
            )
        })
        .collect();
    for schema in [None, Some("https://opentelemetry.io/schemas/1.30.0")] {
        let res = resource(schema);
        let want = prost_bytes(&spans, &res);
        let got = trace_request(&spans, &Resource::encode(&res));
        assert_eq!(got, want, "schema {schema:?}");
        // And one span alone, and none.
        let one = &spans[1..2];
        assert_eq!(
            trace_request(one, &Resource::encode(&res)),
            prost_bytes(one, &res)
        );
        assert_eq!(
            trace_request(&[], &Resource::encode(&res)),
            prost_bytes(&[], &res)
        );
    }
}

#[test]
fn lengths_of_every_width_are_prosts() {
    // Bodies around each varint boundary of a length (127/128, 16383/16384 bytes).
    let scope = InstrumentationScope::builder("pipetrace").build();
    for n in [0, 1, 100, 127, 128, 129, 16_300, 16_383, 16_384, 70_000] {
        let mut s = span(2, scope.clone());
        s.attributes = vec![KeyValue::new("v", "y".repeat(n))];
        let res = resource(None);
        let spans = [s];
        assert_eq!(
            trace_request(&spans, &Resource::encode(&res)),
            prost_bytes(&spans, &res),
            "a value of {n} bytes"
        );
    }
}
