//! A trace a backend keeps: every run's trace within `export.max_trace_bytes` of OTLP
//! protobuf (Grafana Tempo refuses a larger one whole), however many processes it had,
//! dropping nothing. Design (docs/trace-size.md): spans go out exactly, one per process,
//! while the run's trace is under half its budget. Past that, spans wait for their parent's
//! and repeats fold: spans of one program under one parent that were short, ended well and
//! were flagged for nothing become one span that counts them (`pipetrace.fold.spans`),
//! with their summed figures, first start, last end and slowest; a task of one process is
//! its own tool's span. What still does not fit goes, a task with its tools together, into
//! further traces of the run (`<run> (part N)`), each linked to the run span. Run and task
//! spans keep their exact roll-ups; metrics never see this.
mod group;

use std::collections::{HashMap, HashSet};

use opentelemetry::{
    KeyValue,
    trace::{Link, SpanContext, SpanId, Status, TraceFlags, TraceId, TraceState},
};
use opentelemetry_sdk::trace::SpanData;
use pipetrace_semconv::attr;

use super::{Kind, ReadySpan};
use group::{Group, bytes, foldable, pid, processes};

/// Spans waiting for their parent's span at most, per parent: past it, those that cannot
/// fold go out (a tool under the run itself would otherwise wait for the run's end).
const MAX_WAITING: usize = 256;

pub struct Folder {
    /// 0: no limit.
    max: usize,
    fold_under: std::time::Duration,
    traces: HashMap<TraceId, RunTrace>,
}

/// One run's trace, while its spans come.
#[derive(Default)]
struct RunTrace {
    bytes: usize,
    /// Past half the budget: spans wait for their parent, repeats fold.
    folding: bool,
    waiting: HashMap<SpanId, Waiting>,
    parts: Vec<Part>,
}

/// Spans waiting for the span of their parent.
#[derive(Default)]
struct Waiting {
    groups: HashMap<(String, bool), Group>,
    kept: Vec<ReadySpan>,
}

/// A further trace of a run.
struct Part {
    trace: TraceId,
    root: SpanId,
    bytes: usize,
    spans: HashSet<SpanId>,
    start: Option<std::time::SystemTime>,
    end: Option<std::time::SystemTime>,
    /// Its first span, for a root made without the run span (an agent stopping mid-run).
    first: Option<SpanData>,
}

/// Derived ids for part `n` of `trace`: stable, distinct from every span's.
fn part_ids(trace: TraceId, n: usize) -> (TraceId, SpanId) {
    let h = super::ids::of_identity(&format!("{trace}/part/{n}"));
    (TraceId::from_bytes(h.0), SpanId::from_bytes(h.1))
}

impl Folder {
    pub fn new(max_trace_bytes: u64, fold_under: std::time::Duration) -> Self {
        Self {
            max: usize::try_from(max_trace_bytes).unwrap_or(usize::MAX),
            fold_under,
            traces: HashMap::new(),
        }
    }

    /// What the run's own trace may take, leaving room for the run span and a margin for
    /// the resource and scope each export request repeats.
    fn main_cap(&self) -> usize {
        self.part_cap().saturating_sub(self.max / 20)
    }

    fn part_cap(&self) -> usize {
        self.max / 10 * 9
    }

    /// A built span: out now (into `out`), or later, folded or placed with its parent.
    #[cfg(test)]
    pub(crate) fn push(&mut self, s: ReadySpan, out: &mut Vec<ReadySpan>) {
        let ends_run = s.kind == Kind::Run;
        self.push_span(s, ends_run, out);
    }

    /// As [`Self::push`], `ends_run` saying it is the span of a run's root: on a node that
    /// holds a part of a run rooted elsewhere (a Slurm step), that is a task span, and
    /// what waited in the trace goes out with it.
    pub fn push_span(&mut self, s: ReadySpan, ends_run: bool, out: &mut Vec<ReadySpan>) {
        if self.max == 0 {
            return out.push(s);
        }
        let trace = s.span.span_context.trace_id();
        if ends_run {
            return self.finish(trace, s, out);
        }
        let half = self.max / 2;
        let t = self.traces.entry(trace).or_default();
        if !t.folding && t.bytes + bytes(&s.span) <= half {
            t.bytes += bytes(&s.span);
            return out.push(s);
        }
        t.folding = true;
        match s.kind {
            Kind::Tool | Kind::Task => self.arrived(trace, s, out),
            _ => self.place(trace, vec![s], out),
        }
    }

    /// A task's or tool's span in a folding trace: with what waited for it, it waits for
    /// its own parent (tools, and repeats that fold) or goes out (a task and its tools).
    fn arrived(&mut self, trace: TraceId, s: ReadySpan, out: &mut Vec<ReadySpan>) {
        let Some(t) = self.traces.get_mut(&trace) else {
            return;
        };
        let mut below = take_below(t, s.span.span_context.span_id());
        // A task of one process: its one tool is the same process, the task span says it.
        if s.kind == Kind::Task && processes(&s.span) == 1 {
            below.retain(|c| !(c.kind == Kind::Tool && pid(&c.span) == pid(&s.span)));
        }
        let parent = s.span.parent_span_id;
        if below.is_empty() && foldable(&s, self.fold_under) {
            let w = t.waiting.entry(parent).or_default();
            let key = (s.span.name.to_string(), s.kind == Kind::Task);
            match w.groups.get_mut(&key) {
                Some(g) => g.add(&s),
                None => {
                    w.groups.insert(key, Group::new(s));
                }
            }
            return;
        }
        below.push(s);
        if below.last().is_some_and(|s| s.kind == Kind::Tool) && parent != SpanId::INVALID {
            let w = t.waiting.entry(parent).or_default();
            w.kept.extend(below);
            if w.kept.len() >= MAX_WAITING {
                let spans = std::mem::take(&mut w.kept);
                self.place(trace, spans, out);
            }
            return;
        }
        self.place(trace, below, out);
    }

    /// Spans out together: in the run's trace while it has room, else in its current part.
    fn place(&mut self, trace: TraceId, spans: Vec<ReadySpan>, out: &mut Vec<ReadySpan>) {
        let (main_cap, part_cap) = (self.main_cap(), self.part_cap());
        let Some(t) = self.traces.get_mut(&trace) else {
            return out.extend(spans);
        };
        let size: usize = spans.iter().map(|s| bytes(&s.span)).sum();
        if t.parts.is_empty() && t.bytes + size <= main_cap {
            t.bytes += size;
            return out.extend(spans);
        }
        let ids: HashSet<SpanId> = spans
            .iter()
            .map(|s| s.span.span_context.span_id())
            .collect();
        // Together into one part where they fit one; split only what no part could hold.
        let mut room = size;
        for mut s in spans {
            let size = bytes(&s.span);
            let full = |p: &Part| p.bytes > 0 && p.bytes + room.max(size) > part_cap;
            if t.parts.last().is_none_or(full) {
                let (trace, root) = part_ids(trace, t.parts.len() + 1);
                t.parts.push(Part {
                    trace,
                    root,
                    bytes: 0,
                    spans: HashSet::new(),
                    start: None,
                    end: None,
                    first: None,
                });
            }
            let part = t.parts.last_mut().expect("pushed above");
            into_part(&mut s.span, part, &ids);
            part.bytes += size;
            room = size;
            out.push(s);
        }
    }

    /// Everything still waiting goes out (the agent stops before these runs ended): each
    /// part's root then stands for the run span not seen.
    pub fn drain(&mut self, out: &mut Vec<ReadySpan>) {
        let traces: Vec<TraceId> = self.traces.keys().copied().collect();
        for trace in traces {
            let t = self.flush_waiting(trace, out);
            for (i, p) in t.parts.iter().enumerate() {
                if let Some(mut first) = p.first.clone() {
                    first.name = "run".into();
                    out.push(part_root(&first, None, p, i + 1));
                }
            }
        }
    }

    /// The run ended: what waited goes out, then each part's root, then the run span.
    fn finish(&mut self, trace: TraceId, mut run: ReadySpan, out: &mut Vec<ReadySpan>) {
        let t = self.flush_waiting(trace, out);
        let run_ctx = run.span.span_context.clone();
        for (i, p) in t.parts.iter().enumerate() {
            out.push(part_root(&run.span, Some(&run_ctx), p, i + 1));
        }
        if !t.parts.is_empty() {
            let n = i64::try_from(t.parts.len()).unwrap_or(i64::MAX);
            run.span
                .attributes
                .push(KeyValue::new(attr::TRACE_PARTS, n));
        }
        out.push(run);
    }

    /// Every span still waiting in `trace` goes out, placed; the trace is done with.
    fn flush_waiting(&mut self, trace: TraceId, out: &mut Vec<ReadySpan>) -> RunTrace {
        let waiting: Vec<Waiting> = match self.traces.get_mut(&trace) {
            Some(t) => t.waiting.drain().map(|(_, w)| w).collect(),
            None => Vec::new(),
        };
        for w in waiting {
            let spans = (w.groups.into_values().map(Group::into_span))
                .chain(w.kept)
                .collect();
            self.place(trace, spans, out);
        }
        self.traces.remove(&trace).unwrap_or_default()
    }
}

/// What waited for `parent`'s span, folded, and what waited for those in turn.
fn take_below(t: &mut RunTrace, parent: SpanId) -> Vec<ReadySpan> {
    let Some(w) = t.waiting.remove(&parent) else {
        return Vec::new();
    };
    let mut out: Vec<ReadySpan> = w.groups.into_values().map(Group::into_span).collect();
    out.extend(w.kept);
    let mut i = 0;
    while i < out.len() {
        let id = out[i].span.span_context.span_id();
        if let Some(more) = t.waiting.remove(&id) {
            out.extend(more.groups.into_values().map(Group::into_span));
            out.extend(more.kept);
        }
        i += 1;
    }
    out
}

/// A span into a part's trace: under the part's root, linked to its parent, where that
/// parent is not in the part.
fn into_part(d: &mut SpanData, part: &mut Part, with: &HashSet<SpanId>) {
    let ctx = &d.span_context;
    let (old_trace, id) = (ctx.trace_id(), ctx.span_id());
    d.span_context = SpanContext::new(part.trace, id, TraceFlags::SAMPLED, false, TraceState::NONE);
    let parent = d.parent_span_id;
    if !(with.contains(&parent) || part.spans.contains(&parent)) {
        if parent != SpanId::INVALID {
            let to = SpanContext::new(
                old_trace,
                parent,
                TraceFlags::SAMPLED,
                true,
                TraceState::NONE,
            );
            d.links.links.push(Link::new(to, Vec::new(), 0));
        }
        d.parent_span_id = part.root;
        d.parent_span_is_remote = false;
    }
    part.spans.insert(id);
    if part.first.is_none() {
        part.first = Some(d.clone());
    }
    part.start = Some(part.start.map_or(d.start_time, |s| s.min(d.start_time)));
    part.end = Some(part.end.map_or(d.end_time, |e| e.max(d.end_time)));
}

/// The root span of part `n`, linked to the run span.
fn part_root(run: &SpanData, run_ctx: Option<&SpanContext>, p: &Part, n: usize) -> ReadySpan {
    let mut span = run.clone();
    span.span_context = SpanContext::new(
        p.trace,
        p.root,
        TraceFlags::SAMPLED,
        false,
        TraceState::NONE,
    );
    span.parent_span_id = SpanId::INVALID;
    span.parent_span_is_remote = false;
    span.name = format!("{} (part {n})", run.name).into();
    span.start_time = p.start.unwrap_or(run.start_time);
    span.end_time = p.end.unwrap_or(run.end_time);
    let keep = |kv: &KeyValue| kv.key.as_str() == attr::CICD_PIPELINE_RUN_ID;
    span.attributes.retain(keep);
    let n = i64::try_from(n).unwrap_or(i64::MAX);
    span.attributes.push(KeyValue::new(attr::TRACE_PART, n));
    span.events = Default::default();
    span.links = Default::default();
    if let Some(ctx) = run_ctx {
        span.links.links.push(Link::new(ctx.clone(), Vec::new(), 0));
    }
    span.status = Status::Ok;
    ReadySpan {
        kind: Kind::Started,
        span,
    }
}

#[cfg(test)]
mod tests;
