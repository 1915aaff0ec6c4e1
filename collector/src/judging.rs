//! The judgement stage of the loop: each run's spans kept as they leave (after the trace
//! budget, as its trace file holds them), judged once when its run span comes, and the
//! findings put on that span as `pipetrace.finding` events. A backend then holds the same
//! answers, in the same order and words, as `pipetrace report` and the run's end give.
use std::collections::HashMap;

use opentelemetry::{
    KeyValue,
    trace::{Event, TraceId},
};
use opentelemetry_sdk::trace::SpanData;
use pipetrace_core::judgement::{Finding, Judgement};
use pipetrace_semconv::{attr, event};

use crate::{
    report::keep::{RunSpans, stands_for},
    signals::{Kind, ReadySpan},
};

/// Findings put on a run span at most, the most serious first; `pipetrace.run.findings`
/// counts them all.
pub const MAX_EVENTS: usize = 32;

#[derive(Default)]
pub struct Judging {
    runs: HashMap<TraceId, RunSpans>,
}

impl Judging {
    /// Keeps what the judgement needs of spans on their way out; a run span among them
    /// leaves with its run's findings.
    pub fn pass(&mut self, spans: &mut [ReadySpan]) {
        for s in spans.iter_mut() {
            let trace = s.span.span_context.trace_id();
            match s.kind {
                Kind::Started => {}
                Kind::Run => {
                    let mut kept = self.runs.remove(&trace).unwrap_or_default();
                    kept.record(&s.span, Kind::Run, 1, |_| {});
                    let judged = Judgement::of(&kept.spans);
                    attach(&mut s.span, &judged.findings);
                }
                kind => {
                    let n = stands_for(&s.span);
                    (self.runs.entry(trace).or_default()).record(&s.span, kind, n, |_| {});
                    // A part of a run rooted on another node (a Slurm step's task under a
                    // remote parent) ends here: its run span is that node's.
                    if kind == Kind::Task && s.span.parent_span_is_remote {
                        self.runs.remove(&trace);
                    }
                }
            }
        }
    }

    /// Over the memory limit: what is kept goes; those runs leave without findings.
    pub fn relieve_memory(&mut self) -> u64 {
        let n = self.runs.values().map(|r| r.spans.len() as u64).sum();
        self.runs.clear();
        n
    }
}

fn attach(span: &mut SpanData, findings: &[Finding]) {
    let n = i64::try_from(findings.len()).unwrap_or(i64::MAX);
    span.attributes.push(KeyValue::new(attr::RUN_FINDINGS, n));
    let at = span.end_time;
    for f in findings.iter().take(MAX_EVENTS) {
        let mut a = vec![
            KeyValue::new(attr::FINDING_KIND, f.what.kind()),
            KeyValue::new(attr::FINDING_TEXT, f.text.clone()),
        ];
        if let Some(j) = &f.job {
            a.push(KeyValue::new(attr::FINDING_JOB, j.label.clone()));
            a.push(KeyValue::new(attr::FINDING_SPAN_ID, j.span_id.clone()));
            a.push(KeyValue::new(attr::CICD_PIPELINE_TASK_NAME, j.task.clone()));
        }
        (span.events.events).push(Event::new(event::FINDING, at, a, 0));
    }
}
