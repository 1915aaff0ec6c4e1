//! The trace budget over synthetic runs: folds where repeats are, parts where they are not,
//! nothing dropped, every trace within its budget.
use std::{
    collections::HashMap,
    time::{Duration, SystemTime},
};

use opentelemetry::{
    KeyValue,
    trace::{SpanContext, SpanId, Status, TraceFlags, TraceId, TraceState},
};
use opentelemetry_sdk::trace::SpanData;
use pipetrace_semconv::attr;

use super::{Folder, group::bytes};
use crate::signals::ReadySpan;
use pipetrace_core::judgement::Kind;

const TRACE: TraceId = TraceId::from_bytes([7; 16]);
const RUN: u64 = 1;

fn span(kind: Kind, id: u64, parent: u64, name: &str, ms: (u64, u64)) -> ReadySpan {
    let t = |ms: u64| SystemTime::UNIX_EPOCH + Duration::from_millis(1_000_000 + ms);
    let ctx = SpanContext::new(
        TRACE,
        SpanId::from_bytes(id.to_be_bytes()),
        TraceFlags::SAMPLED,
        false,
        TraceState::NONE,
    );
    let parent = match parent {
        0 => SpanId::INVALID,
        p => SpanId::from_bytes(p.to_be_bytes()),
    };
    let attributes = vec![
        KeyValue::new(attr::PROCESS_PID, id as i64),
        KeyValue::new(
            attr::PROCESS_COMMAND_LINE,
            format!("/usr/bin/{name} --some args"),
        ),
        KeyValue::new(attr::CPU_USER_TIME, 0.001),
    ];
    let scope = opentelemetry::InstrumentationScope::builder("t").build();
    let span = SpanData {
        span_context: ctx,
        parent_span_id: parent,
        parent_span_is_remote: false,
        span_kind: opentelemetry::trace::SpanKind::Internal,
        name: name.to_string().into(),
        start_time: t(ms.0),
        end_time: t(ms.1),
        attributes,
        dropped_attributes_count: 0,
        events: Default::default(),
        links: Default::default(),
        status: Status::Ok,
        instrumentation_scope: scope,
    };
    ReadySpan { kind, span }
}

/// A task of `processes` processes.
fn task(id: u64, name: &str, processes: i64, ms: (u64, u64)) -> ReadySpan {
    let mut s = span(Kind::Task, id, RUN, name, ms);
    s.span
        .attributes
        .push(KeyValue::new(attr::USAGE_PROCESSES, processes));
    s
}

fn run_span(processes: i64) -> ReadySpan {
    let mut s = span(Kind::Run, RUN, 0, "run x", (0, 10_000_000));
    s.span
        .attributes
        .push(KeyValue::new(attr::USAGE_PROCESSES, processes));
    s
}

fn int(s: &ReadySpan, key: &str) -> Option<i64> {
    s.span
        .attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .and_then(|kv| match kv.value {
            opentelemetry::Value::I64(v) => Some(v),
            _ => None,
        })
}

/// Bytes per trace, as the folder counts them.
fn sizes(out: &[ReadySpan]) -> HashMap<TraceId, usize> {
    let mut m = HashMap::new();
    for s in out {
        *m.entry(s.span.span_context.trace_id()).or_default() += bytes(&s.span);
    }
    m
}

#[test]
fn without_a_budget_every_span_goes_out_as_it_is() {
    let mut f = Folder::new(0, Duration::from_secs(1));
    let mut out = Vec::new();
    for i in 0..1000 {
        f.push(span(Kind::Tool, 100 + i, RUN, "true", (i, i + 1)), &mut out);
    }
    f.push(run_span(1001), &mut out);
    assert_eq!(out.len(), 1001);
}

#[test]
fn a_plain_loop_of_twenty_thousand_folds_into_a_few_spans_and_counts_them_all() {
    let budget = 200_000;
    let mut f = Folder::new(budget, Duration::from_secs(1));
    let mut out = Vec::new();
    for i in 0..20_000u64 {
        // Each child of the script: a task of one process, and the same process as its tool.
        let (id, ms) = (10 + 2 * i, (i, i + 1));
        let mut own = span(Kind::Tool, id + 1, id, "true", ms);
        own.span.attributes[0] = KeyValue::new(attr::PROCESS_PID, id as i64);
        f.push(own, &mut out);
        let failed = i == 777;
        let mut t = task(id, "true", 1, ms);
        if failed {
            t.span.status = Status::error("task true exited with code 1");
        }
        f.push(t, &mut out);
    }
    f.push(run_span(20_001), &mut out);
    for (trace, size) in sizes(&out) {
        assert!(size <= budget as usize, "{trace}: {size} bytes");
    }
    assert_eq!(out.last().unwrap().kind, Kind::Run);
    let tasks: Vec<&ReadySpan> = out.iter().filter(|s| s.kind == Kind::Task).collect();
    let counted: i64 = tasks
        .iter()
        .map(|s| int(s, attr::FOLD_SPANS).unwrap_or(1))
        .sum();
    assert_eq!(counted, 20_000, "every task counted");
    let processes: i64 = tasks
        .iter()
        .map(|s| int(s, attr::USAGE_PROCESSES).unwrap())
        .sum();
    assert_eq!(processes, 20_000);
    assert!(out.len() < 2_000, "{} spans", out.len());
    let failed: Vec<_> = out
        .iter()
        .filter(|s| matches!(s.span.status, Status::Error { .. }))
        .collect();
    assert_eq!(failed.len(), 1, "the failed task keeps its own span");
    assert_eq!(int(failed[0], attr::PROCESS_PID), Some(10 + 2 * 777));
    let folded = tasks
        .iter()
        .find(|s| int(s, attr::FOLD_SPANS).is_some())
        .unwrap();
    assert!(int(folded, attr::FOLD_SLOWEST_PID).is_some());
    assert!(folded.span.end_time > folded.span.start_time);
}

#[test]
fn what_cannot_fold_goes_into_linked_parts_with_its_task_nothing_dropped() {
    let budget = 100_000;
    let mut f = Folder::new(budget, Duration::from_secs(1));
    let mut out = Vec::new();
    let mut pushed = 0;
    for i in 0..2_000u64 {
        // Distinct long tasks of three tools each: nothing folds.
        let id = 10 + 4 * i;
        for k in 1..=3 {
            let name = format!("tool{k}");
            f.push(
                span(Kind::Tool, id + k, id, &name, (i * 10, i * 10 + 5_000)),
                &mut out,
            );
        }
        f.push(
            task(id, &format!("job{i}"), 3, (i * 10, i * 10 + 6_000)),
            &mut out,
        );
        pushed += 4;
    }
    f.push(run_span(6_001), &mut out);
    let parts: Vec<&ReadySpan> = out.iter().filter(|s| s.kind == Kind::Started).collect();
    assert!(parts.len() >= 2, "{} parts", parts.len());
    assert_eq!(out.len(), pushed + 1 + parts.len(), "nothing dropped");
    for (trace, size) in sizes(&out) {
        assert!(size <= budget as usize, "{trace}: {size} bytes");
    }
    let run = out.last().unwrap();
    assert_eq!(int(run, attr::TRACE_PARTS), Some(parts.len() as i64));
    // Each tool sits in its task's trace, under it; each part's root links to the run span.
    let by_id: HashMap<SpanId, &ReadySpan> = out
        .iter()
        .map(|s| (s.span.span_context.span_id(), s))
        .collect();
    for s in out.iter().filter(|s| s.kind == Kind::Tool) {
        let parent = by_id[&s.span.parent_span_id];
        assert_eq!(parent.kind, Kind::Task);
        assert_eq!(
            parent.span.span_context.trace_id(),
            s.span.span_context.trace_id()
        );
    }
    for p in parts {
        assert_eq!(p.span.parent_span_id, SpanId::INVALID);
        let link = &p.span.links.links[0];
        assert_eq!(link.span_context.span_id(), run.span.span_context.span_id());
        assert_eq!(link.span_context.trace_id(), TRACE);
    }
}

#[test]
fn an_agent_stopping_mid_run_sends_what_waited() {
    let mut f = Folder::new(20_000, Duration::from_secs(1));
    let mut out = Vec::new();
    for i in 0..400u64 {
        f.push(span(Kind::Tool, 100 + i, 50, "true", (i, i + 1)), &mut out);
    }
    let sent = out.len();
    assert!(
        sent < 400,
        "past half the budget the rest waits for its parent"
    );
    f.drain(&mut out);
    let counted: i64 = (out.iter())
        .filter(|s| s.kind == Kind::Tool)
        .map(|s| int(s, attr::FOLD_SPANS).unwrap_or(1))
        .sum();
    assert_eq!(counted, 400, "every tool out at the stop");
}

/// A node's part of a run rooted on another node ends with a task span of that run: what
/// waited in the trace goes out with it, nothing is held for a run span that never comes.
#[test]
fn a_part_of_a_run_rooted_elsewhere_ends_with_its_own_span() {
    let mut f = Folder::new(20_000, Duration::from_secs(1));
    let mut out = Vec::new();
    for i in 0..400u64 {
        f.push(span(Kind::Tool, 100 + i, 50, "true", (i, i + 1)), &mut out);
    }
    let mut part = task(50, "step", 401, (0, 500));
    part.span.parent_span_id = SpanId::from_bytes(9u64.to_be_bytes());
    f.push_span(part, true, &mut out);
    let counted: i64 = (out.iter())
        .filter(|s| s.kind == Kind::Tool)
        .map(|s| int(s, attr::FOLD_SPANS).unwrap_or(1))
        .sum();
    assert_eq!(counted, 400, "every tool out with the part's own span");
    assert_eq!(out.last().unwrap().kind, Kind::Task);
    assert!(f.traces.is_empty(), "nothing kept of the trace");
}
