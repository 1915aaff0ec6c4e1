//! An OTLP trace export request written as protobuf straight from the SDK's spans, with the
//! bytes prost gives for the request opentelemetry-proto would build of them (fields by tag,
//! proto3 defaults left out, oneof members always written), but
//! without that request: no owned copy of every key, value and id first. The resource is
//! encoded once per sink ([`Resource::encode`]) and copied into each request.
use opentelemetry::{
    Array, KeyValue, Value,
    trace::{Event, Link, SpanContext, SpanId, SpanKind, Status},
};
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_sdk::trace::SpanData;
use prost::Message;

/// Wire types.
const VARINT: u32 = 0;
const FIXED64: u32 = 1;
const LEN: u32 = 2;
const FIXED32: u32 = 5;

/// `SpanFlags`: the context says whether the parent is remote, and whether it is.
const HAS_IS_REMOTE: u32 = 0x100;
const IS_REMOTE: u32 = 0x200;

/// The resource's fields of `ResourceSpans`, encoded once: its `resource` and `schema_url`.
pub struct Resource {
    resource: Vec<u8>,
    schema_url: String,
}

impl Resource {
    pub fn encode(r: &ResourceAttributesWithSchema) -> Self {
        let resource = opentelemetry_proto::tonic::resource::v1::Resource {
            attributes: r.attributes.0.clone(),
            dropped_attributes_count: 0,
            entity_refs: vec![],
        };
        Self {
            resource: resource.encode_to_vec(),
            schema_url: r.schema_url.clone().unwrap_or_default(),
        }
    }
}

/// `ExportTraceServiceRequest` of `spans` under `resource`: one `ResourceSpans`, a scope's
/// spans together in the order each scope first comes.
pub fn trace_request(spans: &[SpanData], resource: &Resource) -> Vec<u8> {
    let scopes = by_scope(spans);
    let mut out = Vec::with_capacity(spans.len() * 1024 + resource.resource.len() + 64);
    message(&mut out, 1, |out| {
        bytes_field(out, 1, &resource.resource);
        for (scope, of_scope) in &scopes {
            message(out, 2, |out| {
                message(out, 1, |out| instrumentation_scope(out, scope));
                for s in of_scope {
                    message(out, 2, |out| span(out, s));
                }
                string(out, 3, scope.schema_url().unwrap_or_default());
            });
        }
        string(out, 3, &resource.schema_url);
    });
    out
}

/// The spans of each scope together, the scopes in the order each first comes (as a request
/// holds them, in protobuf and in JSON alike).
pub(crate) fn by_scope(
    spans: &[SpanData],
) -> Vec<(&opentelemetry::InstrumentationScope, Vec<&SpanData>)> {
    let mut scopes: Vec<(&opentelemetry::InstrumentationScope, Vec<&SpanData>)> = Vec::new();
    for span in spans {
        let scope = &span.instrumentation_scope;
        match scopes.iter_mut().find(|(s, _)| *s == scope) {
            Some((_, of_scope)) => of_scope.push(span),
            None => scopes.push((scope, vec![span])),
        }
    }
    scopes
}

fn instrumentation_scope(out: &mut Vec<u8>, s: &opentelemetry::InstrumentationScope) {
    string(out, 1, s.name());
    string(out, 2, s.version().unwrap_or_default());
    for kv in s.attributes() {
        message(out, 3, |out| key_value(out, kv));
    }
}

fn span(out: &mut Vec<u8>, s: &SpanData) {
    let ctx = &s.span_context;
    context(out, ctx);
    if s.parent_span_id != SpanId::INVALID {
        bytes_field(out, 4, &s.parent_span_id.to_bytes());
    }
    string(out, 5, &s.name);
    uint(out, 6, kind(&s.span_kind) as u64);
    fixed64(out, 7, nanos(s.start_time));
    fixed64(out, 8, nanos(s.end_time));
    for kv in &s.attributes {
        message(out, 9, |out| key_value(out, kv));
    }
    uint(out, 10, u64::from(s.dropped_attributes_count));
    for e in &s.events.events {
        message(out, 11, |out| event(out, e));
    }
    uint(out, 12, u64::from(s.events.dropped_count));
    for l in &s.links.links {
        message(out, 13, |out| link(out, l));
    }
    uint(out, 14, u64::from(s.links.dropped_count));
    message(out, 15, |out| {
        let (text, code) = match &s.status {
            Status::Unset => ("", 0),
            Status::Ok => ("", 1),
            Status::Error { description } => (description.as_ref(), 2),
        };
        string(out, 2, text);
        uint(out, 3, code);
    });
    // prost writes fields by tag: `flags` (16) comes last.
    fixed32(out, 16, flags(s.parent_span_is_remote, ctx));
}

/// A span's or a link's trace id, span id and trace state (fields 1 to 3 of both).
fn context(out: &mut Vec<u8>, ctx: &SpanContext) {
    bytes_field(out, 1, &ctx.trace_id().to_bytes());
    bytes_field(out, 2, &ctx.span_id().to_bytes());
    string(out, 3, &ctx.trace_state().header());
}

fn flags(remote: bool, ctx: &SpanContext) -> u32 {
    let flags = u32::from(ctx.trace_flags().to_u8()) | HAS_IS_REMOTE;
    if remote { flags | IS_REMOTE } else { flags }
}

fn event(out: &mut Vec<u8>, e: &Event) {
    fixed64(out, 1, nanos(e.timestamp));
    string(out, 2, &e.name);
    for kv in &e.attributes {
        message(out, 3, |out| key_value(out, kv));
    }
    uint(out, 4, u64::from(e.dropped_attributes_count));
}

fn link(out: &mut Vec<u8>, l: &Link) {
    let ctx = &l.span_context;
    context(out, ctx);
    for kv in &l.attributes {
        message(out, 4, |out| key_value(out, kv));
    }
    uint(out, 5, u64::from(l.dropped_attributes_count));
    fixed32(out, 6, flags(ctx.is_remote(), ctx));
}

fn key_value(out: &mut Vec<u8>, kv: &KeyValue) {
    string(out, 1, kv.key.as_str());
    message(out, 2, |out| any_value(out, &kv.value));
}

/// An `AnyValue`: its oneof member is written even when it holds the default.
fn any_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::String(s) => {
            key(out, 1, LEN);
            bytes(out, s.as_str().as_bytes());
        }
        Value::Bool(b) => {
            key(out, 2, VARINT);
            varint(out, u64::from(*b));
        }
        Value::I64(i) => {
            key(out, 3, VARINT);
            varint(out, *i as u64);
        }
        Value::F64(f) => {
            key(out, 4, FIXED64);
            out.extend_from_slice(&f.to_le_bytes());
        }
        Value::Array(a) => message(out, 5, |out| array(out, a)),
        // Values of kinds this crate does not know have no AnyValue member (as the
        // SDK's own conversion, which cannot build them either).
        _ => {}
    }
}

fn array(out: &mut Vec<u8>, a: &Array) {
    let mut each = |v: Value| message(out, 1, |out| any_value(out, &v));
    match a {
        Array::Bool(vs) => vs.iter().for_each(|v| each(Value::Bool(*v))),
        Array::I64(vs) => vs.iter().for_each(|v| each(Value::I64(*v))),
        Array::F64(vs) => vs.iter().for_each(|v| each(Value::F64(*v))),
        Array::String(vs) => vs.iter().for_each(|v| each(Value::String(v.clone()))),
        _ => {}
    }
}

/// OTLP's `SpanKind` number.
pub(crate) fn kind(k: &SpanKind) -> i32 {
    match k {
        SpanKind::Internal => 1,
        SpanKind::Server => 2,
        SpanKind::Client => 3,
        SpanKind::Producer => 4,
        SpanKind::Consumer => 5,
    }
}

fn nanos(t: std::time::SystemTime) -> u64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos() as u64
}

fn key(out: &mut Vec<u8>, field: u32, wire: u32) {
    varint(out, u64::from(field << 3 | wire));
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn bytes(out: &mut Vec<u8>, b: &[u8]) {
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// A string field, left out when empty (proto3's default).
fn string(out: &mut Vec<u8>, field: u32, s: &str) {
    bytes_field(out, field, s.as_bytes());
}

fn bytes_field(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    if !b.is_empty() {
        key(out, field, LEN);
        bytes(out, b);
    }
}

fn uint(out: &mut Vec<u8>, field: u32, v: u64) {
    if v != 0 {
        key(out, field, VARINT);
        varint(out, v);
    }
}

fn fixed32(out: &mut Vec<u8>, field: u32, v: u32) {
    if v != 0 {
        key(out, field, FIXED32);
        out.extend_from_slice(&v.to_le_bytes());
    }
}

fn fixed64(out: &mut Vec<u8>, field: u32, v: u64) {
    if v != 0 {
        key(out, field, FIXED64);
        out.extend_from_slice(&v.to_le_bytes());
    }
}

/// A message field (written even when empty, as a set `Option` is): its body is written in
/// place after a one-byte length, which grows in place when the body is 128 bytes or more.
fn message(out: &mut Vec<u8>, field: u32, body: impl FnOnce(&mut Vec<u8>)) {
    key(out, field, LEN);
    let at = out.len();
    out.push(0);
    body(out);
    let len = out.len() - at - 1;
    if len < 0x80 {
        out[at] = len as u8;
        return;
    }
    let mut prefix = Vec::with_capacity(10);
    varint(&mut prefix, len as u64);
    out[at] = prefix[0];
    out.splice(at + 1..at + 1, prefix[1..].iter().copied());
}

#[cfg(test)]
mod tests;
