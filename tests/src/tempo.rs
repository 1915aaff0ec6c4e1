//! What Grafana Tempo would refuse of the traces a receiver took: a trace past
//! `max_bytes_per_trace` (5,000,000 bytes of OTLP protobuf by default: TRACE_TOO_LARGE, its
//! spans discarded), counted as Tempo counts, the trace's spans with the resource and scope
//! they came under, per request.
use std::collections::BTreeMap;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;

/// Tempo's default `max_bytes_per_trace`.
pub const MAX_BYTES_PER_TRACE: usize = 5_000_000;

#[derive(Clone, Debug, Default)]
pub struct TraceSizes {
    /// Trace id (hex) -> (protobuf bytes, spans) taken so far.
    pub traces: BTreeMap<String, (usize, usize)>,
}

impl TraceSizes {
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
