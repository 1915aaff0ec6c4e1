//! A run's spans as the judgement reads them while they leave, bounded: every task and tool
//! up to a count, past it only those the judgement needs (failed, or with events, and the
//! spans between such a tool and its task). The same bounds for the run's end on the
//! terminal and for the findings the run span carries, so both judge the same spans.
use std::collections::HashSet;

use opentelemetry::trace::{SpanId, Status};
use opentelemetry_sdk::trace::SpanData;

use pipetrace_semconv::attr;

use super::{Decode, TASK_KEYS, TOOL_KEYS};
use pipetrace_core::judgement::Kind;
use pipetrace_core::judgement::ReportSpan;

/// Tools kept at most (the HTML report's timeline).
const MAX_TOOLS: u64 = 5_000;
/// Tasks kept in full at most (the report's table sums every task); past it they are
/// counted.
const MAX_TASKS: u64 = 2_000;
/// Tasks and tools past those bounds kept all the same, at most, because the judgement
/// needs them.
const MAX_FLAGGED: usize = 20_000;

#[derive(Default)]
pub struct RunSpans {
    pub spans: Vec<ReportSpan>,
    /// Tasks left out of [`Self::spans`].
    pub omitted: u64,
    tasks: u64,
    tools: u64,
    /// Spans kept past the bounds, and the ids of the parents still to come of such spans
    /// (a tool ends before the shell above it).
    flagged: usize,
    wanted: HashSet<SpanId>,
}

impl RunSpans {
    /// Keeps what the judgement needs of a span that stands for `n` (a folded span counts
    /// every span it stands for). A task's decoded span is shown to `task`, kept or not.
    pub(crate) fn record(
        &mut self,
        span: &SpanData,
        kind: Kind,
        n: u64,
        task: impl FnOnce(&ReportSpan),
    ) {
        match kind {
            Kind::Run => self.spans.push(ReportSpan::from_sdk(span)),
            Kind::Task => {
                self.tasks += n;
                let r = ReportSpan::from_sdk_keeping(span, Kind::Task, &TASK_KEYS);
                task(&r);
                match self.tasks <= MAX_TASKS || self.judged_anyway(span) {
                    true => self.spans.push(r),
                    false => self.omitted += 1,
                }
            }
            Kind::Tool => {
                self.tools += n;
                if self.tools <= MAX_TOOLS || self.judged_anyway(span) {
                    let r = ReportSpan::from_sdk_keeping(span, Kind::Tool, &TOOL_KEYS);
                    self.spans.push(r);
                }
            }
            Kind::Engine | Kind::Started => {}
        }
    }

    /// Whether a span past the bounds is kept for the judgement: it failed or has events,
    /// or such a span is under it. Its parent is wanted then.
    fn judged_anyway(&mut self, span: &SpanData) -> bool {
        let id = span.span_context.span_id();
        let flagged = !span.events.is_empty() || matches!(span.status, Status::Error { .. });
        let wanted = self.wanted.remove(&id);
        if !(flagged || wanted) || self.flagged >= MAX_FLAGGED {
            return false;
        }
        self.flagged += 1;
        if span.parent_span_id != SpanId::INVALID && self.wanted.len() < MAX_FLAGGED {
            self.wanted.insert(span.parent_span_id);
        }
        true
    }
}

/// An integer attribute of a span.
pub(crate) fn int_of(span: &SpanData, key: &str) -> Option<i64> {
    let kv = span.attributes.iter().find(|kv| kv.key.as_str() == key);
    match kv.map(|kv| &kv.value) {
        Some(opentelemetry::Value::I64(n)) => Some(*n),
        _ => None,
    }
}

/// How many spans a span stands for: a folded span counts every span it stands for.
pub(crate) fn stands_for(span: &SpanData) -> u64 {
    int_of(span, attr::FOLD_SPANS).map_or(1, |n| n.max(1) as u64)
}
