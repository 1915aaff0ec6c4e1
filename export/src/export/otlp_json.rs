//! OTLP trace export requests: built from the SDK's spans without copying them, and written
//! as OTLP/JSON straight from the spans, with the same keys, order and encodings as the
//! serde derive on the protobuf types (ids in hex, 64-bit integers as strings), but without
//! building the protobuf, its allocations per field and serde's flattened maps per value:
//! together the agent's largest cost in a fork/exec storm. Strings and floats still go
//! through serde_json, so their escaping and digits are its own.
use opentelemetry_proto::tonic::common::v1::{
    AnyValue, InstrumentationScope, KeyValue, any_value::Value,
};
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_sdk::trace::SpanData;

/// The request opentelemetry-proto builds of the SDK's spans: what the file's JSON and the
/// sink's protobuf are checked against.
#[cfg(test)]
pub(crate) mod reference {
    use opentelemetry_proto::tonic as proto;
    use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
    use opentelemetry_sdk::trace::SpanData;

    /// One request of `spans` under `resource`, a scope's spans together (in the order each
    /// scope first comes), the spans moved into it rather than copied.
    pub(crate) fn trace_request(
        spans: Vec<SpanData>,
        resource: &ResourceAttributesWithSchema,
    ) -> proto::collector::trace::v1::ExportTraceServiceRequest {
        let mut scopes: Vec<(
            opentelemetry::InstrumentationScope,
            Vec<proto::trace::v1::Span>,
        )> = Vec::new();
        for span in spans {
            let at = match scopes
                .iter()
                .position(|(s, _)| *s == span.instrumentation_scope)
            {
                Some(at) => at,
                None => {
                    scopes.push((span.instrumentation_scope.clone(), Vec::new()));
                    scopes.len() - 1
                }
            };
            scopes[at].1.push(span.into());
        }
        let scope_spans = (scopes.into_iter())
            .map(|(scope, spans)| proto::trace::v1::ScopeSpans {
                schema_url: scope.schema_url().unwrap_or_default().to_string(),
                scope: Some((&scope, None).into()),
                spans,
            })
            .collect();
        proto::collector::trace::v1::ExportTraceServiceRequest {
            resource_spans: vec![proto::trace::v1::ResourceSpans {
                resource: Some(proto::resource::v1::Resource {
                    attributes: resource.attributes.0.clone(),
                    dropped_attributes_count: 0,
                    entity_refs: vec![],
                }),
                scope_spans,
                schema_url: resource.schema_url.clone().unwrap_or_default(),
            }],
        }
    }
}

/// Appends, as one line of OTLP/JSON (without the newline), the request
/// opentelemetry-proto would build of `spans`: written from the spans themselves, for a file
/// that needs no protobuf of them.
pub(crate) fn write_spans(
    out: &mut Vec<u8>,
    spans: &[SpanData],
    res: &ResourceAttributesWithSchema,
) {
    let scopes = super::otlp::encode::by_scope(spans);
    out.extend_from_slice(b"{\"resourceSpans\":[{\"resource\":{\"attributes\":");
    list(out, &res.attributes.0, key_value);
    out.extend_from_slice(b",\"droppedAttributesCount\":0,\"entityRefs\":[]},\"scopeSpans\":[");
    for (i, (scope, of_scope)) in scopes.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"scope\":");
        self::scope(out, &(*scope, None).into());
        out.extend_from_slice(b",\"spans\":");
        list(out, of_scope, |out, s| sdk::span(out, s));
        key_str(out, "schemaUrl", scope.schema_url().unwrap_or_default());
        out.push(b'}');
    }
    out.push(b']');
    key_str(
        out,
        "schemaUrl",
        res.schema_url.as_deref().unwrap_or_default(),
    );
    out.extend_from_slice(b"}]}");
}

fn scope(out: &mut Vec<u8>, s: &InstrumentationScope) {
    out.extend_from_slice(b"{\"name\":");
    string(out, &s.name);
    key_str(out, "version", &s.version);
    out.extend_from_slice(b",\"attributes\":");
    list(out, &s.attributes, key_value);
    key_num(out, "droppedAttributesCount", s.dropped_attributes_count);
    out.push(b'}');
}

fn key_value(out: &mut Vec<u8>, kv: &KeyValue) {
    out.extend_from_slice(b"{\"key\":");
    string(out, &kv.key);
    out.extend_from_slice(b",\"value\":");
    option(out, kv.value.as_ref(), any_value);
    out.push(b'}');
}

/// `{"stringValue":"x"}`, `{"intValue":"7"}`, ...; `{}` when empty.
fn any_value(out: &mut Vec<u8>, v: &AnyValue) {
    out.push(b'{');
    match &v.value {
        None => {}
        Some(Value::StringValue(s)) => {
            out.extend_from_slice(b"\"stringValue\":");
            string(out, s);
        }
        Some(Value::BoolValue(b)) => {
            out.extend_from_slice(b"\"boolValue\":");
            out.extend_from_slice(if *b { b"true" } else { b"false" });
        }
        Some(Value::IntValue(i)) => {
            out.extend_from_slice(b"\"intValue\":\"");
            out.extend_from_slice(itoa::Buffer::new().format(*i).as_bytes());
            out.push(b'"');
        }
        Some(Value::DoubleValue(d)) => {
            out.extend_from_slice(b"\"doubleValue\":");
            serde_json::to_writer(&mut *out, d).expect("writing to memory");
        }
        Some(Value::ArrayValue(a)) => {
            out.extend_from_slice(b"\"arrayValue\":{\"values\":");
            list(out, &a.values, any_value);
            out.push(b'}');
        }
        Some(Value::KvlistValue(kv)) => {
            out.extend_from_slice(b"\"kvlistValue\":{\"values\":");
            list(out, &kv.values, key_value);
            out.push(b'}');
        }
        Some(v @ Value::BytesValue(_)) => {
            // Never set by pipetrace: serde's own base64 writing.
            let whole = AnyValue {
                value: Some(v.clone()),
            };
            let text = serde_json::to_vec(&whole).expect("writing to memory");
            out.extend_from_slice(&text[1..text.len() - 1]);
        }
    }
    out.push(b'}');
}

fn list<T>(out: &mut Vec<u8>, items: &[T], each: fn(&mut Vec<u8>, &T)) {
    out.push(b'[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        each(out, item);
    }
    out.push(b']');
}

fn option<T>(out: &mut Vec<u8>, v: Option<&T>, each: fn(&mut Vec<u8>, &T)) {
    match v {
        Some(v) => each(out, v),
        None => out.extend_from_slice(b"null"),
    }
}

fn string(out: &mut Vec<u8>, s: &str) {
    // serde_json escapes only quotes, backslashes and control characters: a string without
    // them (nearly every key and value) is written as it is, without its writer's per-call
    // cost.
    if s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        serde_json::to_writer(&mut *out, s).expect("writing to memory");
        return;
    }
    out.reserve(s.len() + 2);
    out.push(b'"');
    out.extend_from_slice(s.as_bytes());
    out.push(b'"');
}

fn key(out: &mut Vec<u8>, k: &str) {
    out.extend_from_slice(b",\"");
    out.extend_from_slice(k.as_bytes());
    out.extend_from_slice(b"\":");
}

fn key_str(out: &mut Vec<u8>, k: &str, v: &str) {
    key(out, k);
    string(out, v);
}

fn key_num(out: &mut Vec<u8>, k: &str, v: impl itoa::Integer) {
    key(out, k);
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

fn key_u64_str(out: &mut Vec<u8>, k: &str, v: u64) {
    key(out, k);
    u64_str(out, v);
}

fn u64_str(out: &mut Vec<u8>, v: u64) {
    out.push(b'"');
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
    out.push(b'"');
}

fn hex(out: &mut Vec<u8>, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)]);
        out.push(DIGITS[usize::from(b & 0xf)]);
    }
    out.push(b'"');
}

mod sdk;
#[cfg(test)]
mod tests;
