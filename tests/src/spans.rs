//! Received spans, flattened, and the checks the tests make on a trace.
use std::collections::BTreeMap;

use opentelemetry_proto::tonic::{
    collector::trace::v1::ExportTraceServiceRequest,
    common::v1::{AnyValue, KeyValue, any_value::Value},
};

#[derive(Clone, Debug, PartialEq)]
pub enum Val {
    Str(String),
    Int(i64),
    Double(f64),
    Bool(bool),
    List(Vec<Val>),
    Other(String),
}

impl Val {
    pub fn str(&self) -> &str {
        match self {
            Val::Str(s) => s,
            _ => "",
        }
    }
}

#[derive(Clone, Debug)]
pub struct RecvSpan {
    pub trace_id: String,
    pub span_id: String,
    /// None for a root span.
    pub parent: Option<String>,
    pub name: String,
    pub start: u64,
    pub end: u64,
    pub attrs: BTreeMap<String, Val>,
    /// Attributes the exporter left out (OTLP's `dropped_attributes_count`).
    pub dropped_attributes: u32,
    /// OTLP status code: 0 unset, 1 ok, 2 error.
    pub status: i32,
    pub status_message: String,
    pub resource: BTreeMap<String, Val>,
    /// The instrumentation scope's name.
    pub scope: String,
    /// Span events: name, time, attributes.
    pub events: Vec<RecvEvent>,
    /// When a receiver took it (Unix ns); 0 when read from a file.
    pub received: u64,
}

#[derive(Clone, Debug)]
pub struct RecvEvent {
    pub name: String,
    pub time: u64,
    pub attrs: BTreeMap<String, Val>,
}

impl RecvSpan {
    /// Its events that flag something wrong: all but the run's findings that only say what
    /// held the jobs back or the largest over-ask (a clean run has those too).
    pub fn flags(&self) -> Vec<&RecvEvent> {
        let informative = |e: &RecvEvent| {
            e.name == "pipetrace.finding"
                && (e.attrs.get("pipetrace.finding.kind"))
                    .is_some_and(|k| matches!(k.str(), "bottleneck" | "over_ask"))
        };
        self.events.iter().filter(|e| !informative(e)).collect()
    }

    pub fn attr(&self, k: &str) -> Option<&Val> {
        self.attrs.get(k)
    }

    pub fn str(&self, k: &str) -> &str {
        self.attr(k).map(Val::str).unwrap_or("")
    }

    pub fn int(&self, k: &str) -> Option<i64> {
        match self.attr(k) {
            Some(Val::Int(i)) => Some(*i),
            _ => None,
        }
    }

    /// A number attribute as f64 (ints too).
    pub fn num(&self, k: &str) -> Option<f64> {
        match self.attr(k) {
            Some(Val::Int(i)) => Some(*i as f64),
            Some(Val::Double(d)) => Some(*d),
            _ => None,
        }
    }

    pub fn is_task(&self) -> bool {
        self.attrs
            .contains_key(pipetrace_semconv::attr::CICD_PIPELINE_TASK_NAME)
    }

    pub fn is_run(&self) -> bool {
        self.attrs
            .contains_key(pipetrace_semconv::attr::CICD_PIPELINE_NAME)
    }

    pub fn is_tool(&self) -> bool {
        self.attrs.contains_key(pipetrace_semconv::attr::TOOL_NAME)
    }
}

fn val(v: Option<AnyValue>) -> Val {
    match v.and_then(|v| v.value) {
        Some(Value::StringValue(s)) => Val::Str(s),
        Some(Value::IntValue(i)) => Val::Int(i),
        Some(Value::DoubleValue(d)) => Val::Double(d),
        Some(Value::BoolValue(b)) => Val::Bool(b),
        Some(Value::ArrayValue(a)) => {
            Val::List(a.values.into_iter().map(|v| val(Some(v))).collect())
        }
        other => Val::Other(format!("{other:?}")),
    }
}

pub fn attrs(kvs: Vec<KeyValue>) -> BTreeMap<String, Val> {
    kvs.into_iter().map(|kv| (kv.key, val(kv.value))).collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub fn flatten(req: ExportTraceServiceRequest) -> Vec<RecvSpan> {
    let mut out = Vec::new();
    for rs in req.resource_spans {
        let resource = attrs(rs.resource.map(|r| r.attributes).unwrap_or_default());
        for ss in rs.scope_spans {
            let scope = ss.scope.map(|s| s.name).unwrap_or_default();
            for s in ss.spans {
                let status = s.status.unwrap_or_default();
                out.push(RecvSpan {
                    trace_id: hex(&s.trace_id),
                    span_id: hex(&s.span_id),
                    parent: (!s.parent_span_id.is_empty()).then(|| hex(&s.parent_span_id)),
                    name: s.name,
                    start: s.start_time_unix_nano,
                    end: s.end_time_unix_nano,
                    attrs: attrs(s.attributes),
                    dropped_attributes: s.dropped_attributes_count,
                    status: status.code,
                    status_message: status.message,
                    resource: resource.clone(),
                    scope: scope.clone(),
                    received: 0,
                    events: s
                        .events
                        .into_iter()
                        .map(|e| RecvEvent {
                            name: e.name,
                            time: e.time_unix_nano,
                            attrs: attrs(e.attributes),
                        })
                        .collect(),
                });
            }
        }
    }
    out
}

/// A received trace, indexed.
pub struct Trace<'a> {
    pub spans: &'a [RecvSpan],
    by_id: BTreeMap<&'a str, &'a RecvSpan>,
}

impl<'a> Trace<'a> {
    pub fn new(spans: &'a [RecvSpan]) -> Self {
        let by_id = spans.iter().map(|s| (s.span_id.as_str(), s)).collect();
        Self { spans, by_id }
    }

    pub fn parent(&self, s: &RecvSpan) -> Option<&'a RecvSpan> {
        self.by_id.get(s.parent.as_deref()?).copied()
    }

    /// The nearest task span above `s`.
    pub fn task_of(&self, s: &RecvSpan) -> Option<&'a RecvSpan> {
        let mut cur = self.parent(s);
        while let Some(p) = cur {
            if p.is_task() {
                return Some(p);
            }
            cur = self.parent(p);
        }
        None
    }

    pub fn tasks(&self) -> Vec<&'a RecvSpan> {
        self.spans.iter().filter(|s| s.is_task()).collect()
    }

    pub fn tools(&self) -> Vec<&'a RecvSpan> {
        self.spans.iter().filter(|s| s.is_tool()).collect()
    }

    /// The structural checks every trace must pass; panics with the first failure.
    pub fn assert_well_formed(&self) {
        let traces: std::collections::BTreeSet<_> =
            self.spans.iter().map(|s| &s.trace_id).collect();
        assert_eq!(traces.len(), 1, "one trace expected, got {traces:?}");
        let roots: Vec<_> = self.spans.iter().filter(|s| s.parent.is_none()).collect();
        assert_eq!(
            roots.len(),
            1,
            "one root expected: {:?}",
            roots.iter().map(|r| &r.name).collect::<Vec<_>>()
        );
        assert!(roots[0].is_run(), "the root is the run span");
        let ids: std::collections::BTreeSet<_> = self.spans.iter().map(|s| &s.span_id).collect();
        assert_eq!(ids.len(), self.spans.len(), "span ids are unique");
        for s in self.spans {
            if let Some(p) = s.parent.as_deref() {
                let parent = self
                    .by_id
                    .get(p)
                    .unwrap_or_else(|| panic!("{} has no parent span {p}", s.name));
                assert!(
                    parent.start <= s.start && s.end <= parent.end,
                    "{} [{}, {}] is not inside its parent {} [{}, {}]",
                    s.name,
                    s.start,
                    s.end,
                    parent.name,
                    parent.start,
                    parent.end
                );
            }
            assert!(s.start <= s.end && s.start > 0, "{} has bad times", s.name);
            if s.is_tool() {
                assert!(
                    self.task_of(s).is_some() || self.parent(s).is_some_and(|p| p.is_run()),
                    "tool {} hangs under neither a task nor the run",
                    s.name
                );
            }
        }
    }

    /// Every attribute name emitted is documented in the semconv registry (`users_own`: keys
    /// the user asked for, e.g. through OTEL_RESOURCE_ATTRIBUTES).
    pub fn assert_names_registered(&self, users_own: &[&str]) {
        let registry = pipetrace_semconv::registry::Registry::embedded();
        let known: std::collections::BTreeSet<&str> = registry.attribute_ids().collect();
        for s in self.spans {
            for k in s
                .attrs
                .keys()
                .chain(s.resource.keys())
                .filter(|k| !users_own.contains(&k.as_str()))
            {
                assert!(
                    known.contains(k.as_str()),
                    "`{k}` on span {} is not in semconv/model/registry.yaml",
                    s.name
                );
            }
        }
    }
}

/// A clean run of workflows whose jobs do little I/O raises no flag it does not deserve: no
/// stall, OOM, slower-than-usual or signal event on any span; no memory-bound verdict; and
/// io-bound only where storage was really read or written (on a fresh machine the engine
/// reads its Python modules from disk: a real wait), never for a wait alone, such as one the
/// kernel counted from boot.
pub fn assert_no_false_flags(what: &str, spans: &[RecvSpan]) {
    for s in spans {
        assert!(
            s.flags().is_empty(),
            "{what}: {} has events {:?}",
            s.name,
            s.flags()
        );
        let (b, why) = (
            s.str("pipetrace.bottleneck"),
            s.str("pipetrace.bottleneck.reason"),
        );
        assert_ne!(b, "memory-bound", "{what}: {}: {why}", s.name);
        if b == "io-bound" {
            let bytes = s.num("pipetrace.disk.read_bytes").unwrap_or(0.0)
                + s.num("pipetrace.disk.write_bytes").unwrap_or(0.0);
            assert!(
                bytes > 0.0,
                "{what}: {} io-bound without block I/O: {why}",
                s.name
            );
        }
    }
}
