//! A span as the SDK holds it, written as the OTLP/JSON its protobuf conversion would give
//! (the opentelemetry-proto crate's `From<SpanData>`): the same flags, kinds, status codes
//! and values, without building the protobuf first.
use opentelemetry::{
    Array, KeyValue, Value,
    trace::{SpanContext, Status},
};
use opentelemetry_sdk::trace::SpanData;

use super::{hex, key_num, key_str, key_u64_str, list, string, u64_str};

/// `SpanFlags`: the context says whether it is remote, and is it.
const HAS_IS_REMOTE: u32 = 0x100;
const IS_REMOTE: u32 = 0x200;

fn flags(remote: bool, ctx: &SpanContext) -> u32 {
    let flags = u32::from(ctx.trace_flags().to_u8()) | HAS_IS_REMOTE;
    if remote { flags | IS_REMOTE } else { flags }
}

fn nanos(t: std::time::SystemTime) -> u64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos() as u64
}

/// Opens a span's or a link's object with the ids and state of its context.
fn context(out: &mut Vec<u8>, ctx: &SpanContext) {
    out.extend_from_slice(b"{\"traceId\":");
    hex(out, &ctx.trace_id().to_bytes());
    out.extend_from_slice(b",\"spanId\":");
    hex(out, &ctx.span_id().to_bytes());
    key_str(out, "traceState", &ctx.trace_state().header());
}

pub(super) fn span(out: &mut Vec<u8>, s: &SpanData) {
    let ctx = &s.span_context;
    context(out, ctx);
    out.extend_from_slice(b",\"parentSpanId\":");
    match s.parent_span_id == opentelemetry::trace::SpanId::INVALID {
        true => hex(out, &[]),
        false => hex(out, &s.parent_span_id.to_bytes()),
    }
    key_num(out, "flags", flags(s.parent_span_is_remote, ctx));
    key_str(out, "name", &s.name);
    key_num(out, "kind", crate::export::otlp::encode::kind(&s.span_kind));
    key_u64_str(out, "startTimeUnixNano", nanos(s.start_time));
    key_u64_str(out, "endTimeUnixNano", nanos(s.end_time));
    out.extend_from_slice(b",\"attributes\":");
    list(out, &s.attributes, key_value);
    key_num(out, "droppedAttributesCount", s.dropped_attributes_count);
    out.extend_from_slice(b",\"events\":");
    list(out, &s.events.events, event);
    key_num(out, "droppedEventsCount", s.events.dropped_count);
    out.extend_from_slice(b",\"links\":");
    list(out, &s.links.links, link);
    key_num(out, "droppedLinksCount", s.links.dropped_count);
    let (message, code) = match &s.status {
        Status::Unset => ("", 0),
        Status::Ok => ("", 1),
        Status::Error { description } => (description.as_ref(), 2),
    };
    out.extend_from_slice(b",\"status\":{\"message\":");
    string(out, message);
    key_num(out, "code", code);
    out.extend_from_slice(b"}}");
}

fn event(out: &mut Vec<u8>, e: &opentelemetry::trace::Event) {
    out.extend_from_slice(b"{\"timeUnixNano\":");
    u64_str(out, nanos(e.timestamp));
    key_str(out, "name", &e.name);
    out.extend_from_slice(b",\"attributes\":");
    list(out, &e.attributes, key_value);
    key_num(out, "droppedAttributesCount", e.dropped_attributes_count);
    out.push(b'}');
}

fn link(out: &mut Vec<u8>, l: &opentelemetry::trace::Link) {
    let ctx = &l.span_context;
    context(out, ctx);
    out.extend_from_slice(b",\"attributes\":");
    list(out, &l.attributes, key_value);
    key_num(out, "droppedAttributesCount", l.dropped_attributes_count);
    key_num(out, "flags", flags(ctx.is_remote(), ctx));
    out.push(b'}');
}

fn key_value(out: &mut Vec<u8>, kv: &KeyValue) {
    out.extend_from_slice(b"{\"key\":");
    string(out, kv.key.as_str());
    out.extend_from_slice(b",\"value\":");
    value(out, &kv.value);
    out.push(b'}');
}

fn value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Bool(b) => bool_value(out, *b),
        Value::I64(i) => int_value(out, *i),
        Value::F64(f) => double_value(out, *f),
        Value::String(s) => string_value(out, s.as_str()),
        Value::Array(Array::Bool(v)) => array(out, |out| {
            list(out, v, |out, b| bool_value(out, *b));
        }),
        Value::Array(Array::I64(v)) => array(out, |out| {
            list(out, v, |out, i| int_value(out, *i));
        }),
        Value::Array(Array::F64(v)) => array(out, |out| {
            list(out, v, |out, f| double_value(out, *f));
        }),
        Value::Array(Array::String(v)) => array(out, |out| {
            list(out, v, |out, s| string_value(out, s.as_str()));
        }),
        // A kind this version does not know: as the protobuf conversion makes it.
        other => super::any_value(out, &other.clone().into()),
    }
}

fn array(out: &mut Vec<u8>, values: impl FnOnce(&mut Vec<u8>)) {
    out.extend_from_slice(b"{\"arrayValue\":{\"values\":");
    values(out);
    out.extend_from_slice(b"}}");
}

fn string_value(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(b"{\"stringValue\":");
    string(out, s);
    out.push(b'}');
}

fn bool_value(out: &mut Vec<u8>, b: bool) {
    out.extend_from_slice(if b {
        b"{\"boolValue\":true}"
    } else {
        b"{\"boolValue\":false}"
    });
}

fn int_value(out: &mut Vec<u8>, i: i64) {
    out.extend_from_slice(b"{\"intValue\":\"");
    out.extend_from_slice(itoa::Buffer::new().format(i).as_bytes());
    out.extend_from_slice(b"\"}");
}

fn double_value(out: &mut Vec<u8>, f: f64) {
    out.extend_from_slice(b"{\"doubleValue\":");
    serde_json::to_writer(&mut *out, &f).expect("writing to memory");
    out.push(b'}');
}
