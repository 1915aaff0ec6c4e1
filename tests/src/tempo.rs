//! What Grafana Tempo refuses of the traces it is sent: a trace past `max_bytes_per_trace`
//! (5,000,000 bytes of OTLP protobuf by default: TRACE_TOO_LARGE, its further spans
//! discarded), counted as Tempo counts, the trace's spans with the resource and scope they
//! came under, per request; and attribute values past `max_attribute_bytes` (2,048), cut
//! without a mark. A receiver that behaves so (`Receiver::start_as_tempo`) makes a budget
//! regression fail a test, not just a count.
use std::collections::BTreeMap;

use opentelemetry_proto::tonic::{
    collector::trace::v1::ExportTraceServiceRequest,
    common::v1::{AnyValue, KeyValue, any_value::Value},
};
use prost::Message;

/// Tempo's default `max_bytes_per_trace`.
pub const MAX_BYTES_PER_TRACE: usize = 5_000_000;

/// Tempo's default `max_attribute_bytes`.
pub const MAX_ATTRIBUTE_BYTES: usize = 2_048;

/// Keeps of `req` what Tempo keeps: attribute values cut to `MAX_ATTRIBUTE_BYTES`, and each
/// span only while its trace stays within `max_bytes` (counted in `sizes` as kept so far).
/// Returns how many spans it discarded.
pub fn admit(sizes: &mut TraceSizes, req: &mut ExportTraceServiceRequest, max_bytes: usize) -> u64 {
    let mut discarded = 0;
    for rs in &mut req.resource_spans {
        if let Some(r) = rs.resource.as_mut() {
            cut(&mut r.attributes);
        }
        let resource = rs.resource.as_ref().map_or(0, |r| r.encoded_len());
        for ss in &mut rs.scope_spans {
            let scope = ss.scope.as_ref().map_or(0, |s| s.encoded_len());
            let mut seen = std::collections::BTreeSet::new();
            ss.spans.retain_mut(|span| {
                cut(&mut span.attributes);
                span.events.iter_mut().for_each(|e| cut(&mut e.attributes));
                let id = hex(&span.trace_id);
                let first = !seen.contains(&id);
                let cost = span.encoded_len() + 4 + if first { resource + scope + 8 } else { 0 };
                let e = sizes.traces.entry(id.clone()).or_default();
                if e.0 + cost > max_bytes {
                    *sizes.discarded.entry(id).or_default() += 1;
                    discarded += 1;
                    return false;
                }
                seen.insert(id);
                e.0 += cost;
                e.1 += 1;
                true
            });
        }
    }
    discarded
}

/// String values past Tempo's attribute limit, cut at a character boundary, unmarked.
fn cut(attrs: &mut [KeyValue]) {
    for kv in attrs {
        if let Some(AnyValue {
            value: Some(Value::StringValue(s)),
        }) = kv.value.as_mut()
            && s.len() > MAX_ATTRIBUTE_BYTES
        {
            let mut at = MAX_ATTRIBUTE_BYTES;
            while !s.is_char_boundary(at) {
                at -= 1;
            }
            s.truncate(at);
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct TraceSizes {
    /// Trace id (hex) -> (protobuf bytes, spans) taken so far.
    pub traces: BTreeMap<String, (usize, usize)>,
    /// Trace id (hex) -> spans discarded as TRACE_TOO_LARGE (`admit`).
    pub discarded: BTreeMap<String, u64>,
}

impl TraceSizes {
    /// Spans in all traces.
    pub fn spans(&self) -> usize {
        self.traces.values().map(|(_, s)| s).sum()
    }

    /// The largest trace's (bytes, spans); (0, 0) of none.
    pub fn largest(&self) -> (usize, usize) {
        (self.traces.values().max_by_key(|(b, _)| *b)).map_or((0, 0), |&(b, s)| (b, s))
    }

    pub fn add(&mut self, req: &ExportTraceServiceRequest) {
        for rs in &req.resource_spans {
            let resource = rs.resource.as_ref().map_or(0, |r| r.encoded_len());
            for ss in &rs.scope_spans {
                let scope = ss.scope.as_ref().map_or(0, |s| s.encoded_len());
                let mut seen = std::collections::BTreeSet::new();
                for span in &ss.spans {
                    let id = hex(&span.trace_id);
                    let e = self.traces.entry(id.clone()).or_default();
                    // Each trace pays once per request for the resource and scope it came under.
                    if seen.insert(id) {
                        e.0 += resource + scope + 8;
                    }
                    e.0 += span.encoded_len() + 4;
                    e.1 += 1;
                }
            }
        }
    }

    /// Traces Tempo would refuse at `max_bytes`: id -> bytes.
    pub fn over(&self, max_bytes: usize) -> BTreeMap<String, usize> {
        (self.traces.iter())
            .filter(|(_, (b, _))| *b > max_bytes)
            .map(|(id, (b, _))| (id.clone(), *b))
            .collect()
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
