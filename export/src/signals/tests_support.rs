//! Spans for the unit tests of what takes them (the sink, the outputs).
use opentelemetry::trace::{SpanContext, SpanKind, Status, TraceFlags, TraceState};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};

use super::{Kind, ReadySpan};

/// A tool span `tool N` of trace 7, span id `n`.
pub(crate) fn ready_span(n: u64) -> ReadySpan {
    let ctx = SpanContext::new(
        opentelemetry::trace::TraceId::from(7u128),
        opentelemetry::trace::SpanId::from(n),
        TraceFlags::SAMPLED,
        false,
        TraceState::default(),
    );
    ReadySpan {
        kind: Kind::Tool,
        span: SpanData {
            span_context: ctx,
            parent_span_id: opentelemetry::trace::SpanId::INVALID,
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: format!("tool {n}").into(),
            start_time: std::time::SystemTime::now(),
            end_time: std::time::SystemTime::now(),
            attributes: Vec::new(),
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: Status::Unset,
            instrumentation_scope: Default::default(),
        },
    }
}
