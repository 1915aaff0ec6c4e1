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

use crate::report::keep::{RunSpans, stands_for};
use pipetrace_core::judgement::Kind;
use pipetrace_export::signals::ReadySpan;

/// Findings put on a run span at most, the most serious first; `pipetrace.run.findings`
/// counts them all.
pub const MAX_EVENTS: usize = 32;

/// Runs kept at once at most: a trace whose run span never comes here (its run ended on
/// another node, or before the agent started) must not hold memory for ever. Past it, the
/// run untouched the longest goes (its run span, should it come, leaves unjudged).
const MAX_OPEN: usize = 1_024;

#[derive(Default)]
pub struct Judging {
    /// Each run's spans, and when a span of it last came (in spans passed).
    runs: HashMap<TraceId, (RunSpans, u64)>,
    passed: u64,
}

impl Judging {
    /// Keeps what the judgement needs of spans on their way out; a run span among them
    /// leaves with its run's findings. Returns each run judged: its pipeline and the kinds
    /// of its findings (for the findings metric).
    pub(crate) fn pass(&mut self, spans: &mut [ReadySpan]) -> Vec<(String, Vec<&'static str>)> {
        let mut judged_runs = Vec::new();
        for s in spans.iter_mut() {
            let trace = s.span.span_context.trace_id();
            match s.kind {
                Kind::Started => {}
                Kind::Run => {
                    let (mut kept, _) = self.runs.remove(&trace).unwrap_or_default();
                    kept.record(&s.span, Kind::Run, 1, |_| {});
                    let judged = Judgement::of(&kept.spans);
                    attach(&mut s.span, &judged.findings);
                    let pipeline = (s.span.attributes.iter())
                        .find(|a| a.key.as_str() == attr::CICD_PIPELINE_NAME)
                        .map(|a| a.value.to_string())
                        .unwrap_or_default();
                    let kinds = judged.findings.iter().map(|f| f.what.kind()).collect();
                    judged_runs.push((pipeline, kinds));
                }
                kind => {
                    let n = stands_for(&s.span);
                    self.passed += 1;
                    if !self.runs.contains_key(&trace) && self.runs.len() >= MAX_OPEN {
                        self.forget_oldest();
                    }
                    let (kept, touched) = self.runs.entry(trace).or_default();
                    *touched = self.passed;
                    kept.record(&s.span, kind, n, |_| {});
                    // A part of a run rooted on another node (a Slurm step's task under a
                    // remote parent) ends here: its run span is that node's.
                    if kind == Kind::Task && s.span.parent_span_is_remote {
                        self.runs.remove(&trace);
                    }
                }
            }
        }
        judged_runs
    }

    fn forget_oldest(&mut self) {
        let oldest = (self.runs.iter())
            .min_by_key(|(_, (_, t))| *t)
            .map(|(k, _)| *k);
        if let Some(k) = oldest {
            self.runs.remove(&k);
        }
    }

    /// Over the memory limit: what is kept goes; those runs leave without findings.
    pub(crate) fn relieve_memory(&mut self) -> u64 {
        let n = self.runs.values().map(|(r, _)| r.spans.len() as u64).sum();
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

#[cfg(test)]
mod tests {
    use opentelemetry::trace::{SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceState};
    use opentelemetry_sdk::trace::{SpanEvents, SpanLinks};

    use super::*;

    fn task_of(trace: u128) -> ReadySpan {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        let span = SpanData {
            span_context: SpanContext::new(
                TraceId::from(trace),
                SpanId::from(7u64),
                TraceFlags::SAMPLED,
                false,
                TraceState::NONE,
            ),
            parent_span_id: SpanId::from(1u64),
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: "align".into(),
            start_time: t,
            end_time: t,
            attributes: vec![KeyValue::new(attr::CICD_PIPELINE_TASK_NAME, "align")],
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: Status::Unset,
            instrumentation_scope: Default::default(),
        };
        ReadySpan {
            kind: Kind::Task,
            span,
        }
    }

    /// Traces whose run span never comes hold at most MAX_OPEN runs, the latest kept.
    #[test]
    fn runs_that_never_end_here_are_bounded_and_the_latest_kept() {
        let mut j = Judging::default();
        let mut spans: Vec<ReadySpan> = (1..=(MAX_OPEN as u128 + 10)).map(task_of).collect();
        j.pass(&mut spans);
        assert_eq!(j.runs.len(), MAX_OPEN);
        let last = TraceId::from(MAX_OPEN as u128 + 10);
        assert!(j.runs.contains_key(&last));
        assert!(
            !j.runs.contains_key(&TraceId::from(1u128)),
            "the oldest went"
        );
    }
}
