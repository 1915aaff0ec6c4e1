//! The end-of-run summary `pipetrace run` prints to the terminal: the judgement's findings
//! first, then the trace tree (its jobs folded per task when there are many), the table per
//! task, the totals and where the data went.
mod findings;
mod rules;
#[cfg(test)]
mod tests;

/// The findings as the terminal names them, for `report FILE` too.
pub use findings::render as render_findings;

use std::{collections::HashMap, fmt::Write as _, sync::atomic::Ordering::Relaxed, time::Duration};

use opentelemetry::trace::{SpanId, Status};
use pipetrace_core::judgement::Judgement;
use pipetrace_semconv::{attr, event};

use crate::{
    report::{
        Decode, event_from_sdk,
        keep::{RunSpans, int_of, stands_for},
        table::Table,
        tails::Tails,
    },
    sizing::Needs,
};
use pipetrace_core::judgement::{Kind, ReportSpan};
use pipetrace_export::export::{Destinations, Place, SinkStats, StreamStats};
use pipetrace_export::signals::ReadySpan;

/// Where spans and metrics went and what became of them, for the last lines.
pub struct Delivery<'a> {
    pub to: &'a Destinations,
    pub stats: &'a SinkStats,
    pub lost: Loss,
}

/// One line per destination of one signal: how many went there, and how many failed.
fn went(out: &mut String, (one, many): (&str, &str), dest: &Place, stats: &StreamStats) {
    let (otlp, written_file, failed_file) = (&stats.otlp, &stats.written_file, &stats.failed_file);
    let what = |n: u64| crate::print::count(n, one, many);
    if let Some(ep) = &dest.otlp {
        let _ = writeln!(
            out,
            "pipetrace: {} sent over OTLP to {ep} ({} failed, {} retries{})",
            what(otlp.sent.load(Relaxed)),
            otlp.failed.load(Relaxed),
            otlp.retries.load(Relaxed),
            match otlp.spooled.load(Relaxed) {
                0 => String::new(),
                n => format!(", {n} spooled to disk"),
            }
        );
    }
    if let Some(f) = &dest.file {
        let _ = writeln!(
            out,
            "pipetrace: {} written as OTLP JSON to {} ({} failed)",
            what(written_file.load(Relaxed)),
            f.display(),
            failed_file.load(Relaxed)
        );
    }
}

/// Kernel records that never became events.
#[derive(Clone, Copy, Debug, Default)]
pub struct Loss {
    /// Refused by a full ring buffer (the probes' per-kind counters).
    pub kernel: u64,
    /// Updates of the kernel's per-process sums refused by a full map.
    pub accumulator: u64,
    /// In the ring buffer but not decodable.
    pub undecodable: u64,
}

/// Entries kept for the tree at most, whatever its shape; past it only counts grow.
const MAX_ENTRIES: usize = 20_000;
struct Entry {
    kind: Kind,
    name: String,
    start: std::time::SystemTime,
    secs: f64,
    error: Option<String>,
    /// Its events in words (rare: OOM kills, fatal signals, stalls, slower than usual).
    events: Vec<String>,
}

/// The tree's spans, bounded: per parent the `keep` earliest-starting children (the tree
/// shows the first ones by start) and how many it had, so memory follows what is shown, not
/// how many processes ran.
#[derive(Default)]
struct Kept {
    entries: HashMap<SpanId, Entry>,
    children: HashMap<SpanId, Vec<SpanId>>,
    /// Children seen per parent, kept or not.
    counts: HashMap<SpanId, u64>,
    keep: usize,
}

impl Kept {
    fn insert(&mut self, id: SpanId, parent: SpanId, entry: Entry) {
        *self.counts.entry(parent).or_default() += 1;
        self.entries.insert(id, entry);
        let kids = self.children.entry(parent).or_default();
        kids.push(id);
        if kids.len() <= self.keep.max(1) {
            return;
        }
        let entries = &self.entries;
        let latest = (kids.iter().enumerate())
            .max_by_key(|(_, k)| entries.get(k).map(|e| e.start))
            .map(|(i, _)| i);
        if let Some(i) = latest {
            let gone = kids.swap_remove(i);
            self.forget(gone);
        }
    }

    /// Forgets a span and what is kept under it.
    fn forget(&mut self, id: SpanId) {
        self.entries.remove(&id);
        self.counts.remove(&id);
        for k in self.children.remove(&id).unwrap_or_default() {
            self.forget(k);
        }
    }
}

impl Entry {
    /// `align (sample=A)  0.05s  ok  [its events]`, after `lead`.
    fn write_line(&self, out: &mut String, lead: &str) {
        let mut state = match &self.error {
            Some(err) => format!("FAILED: {err}"),
            None => "ok".into(),
        };
        if !self.events.is_empty() {
            let _ = write!(state, "  [{}]", self.events.join("; "));
        }
        let _ = writeln!(out, "{lead}{}  {:.2}s  {state}", self.name, self.secs);
    }
}

#[derive(Default)]
pub struct Summary {
    tree: Kept,
    run: Option<SpanId>,
    trace_id: Option<String>,
    pub tasks: u64,
    pub tools: u64,
    pub failed_tasks: u64,
    pub failed_tools: u64,
    pub table: Table,
    /// What each task needed of a machine, every task summed (`sizing`).
    pub needs: Needs,
    /// Spans kept for the judgement and the HTML report, bounded ([`Self::table`] sums
    /// them all).
    pub kept: RunSpans,
    /// Spans that stand for several (`pipetrace.fold.spans`), and how many they stand for.
    pub folded: (u64, u64),
    /// Further traces of the run (`pipetrace.trace.parts`).
    pub parts: u64,
    /// Every job, per task, for the tree of a large run.
    rules: rules::Rules,
    /// The failures' log lines the end shows, where asked.
    tails: Tails,
}

/// `21 helpers (1 exited non-zero)`, from an engine span's attributes.
fn helpers_in_words(span: &opentelemetry_sdk::trace::SpanData) -> String {
    let int = |key: &str| int_of(span, key).unwrap_or(0);
    let (n, failed) = (int(attr::ENGINE_HELPERS), int(attr::ENGINE_HELPERS_FAILED));
    let noun = if n == 1 { "helper" } else { "helpers" };
    match failed {
        0 => format!("{n} {noun}"),
        f => format!("{n} {noun} ({f} exited non-zero)"),
    }
}

/// What a view made by the end of the loop, for the command to print or write. Here, below
/// the loop, as the views that make something are.
pub enum Made {
    /// The end-of-run tree and tables, and what the HTML report is made of.
    Summary(Summary),
}

/// The summary keeps what it will print as the spans leave, and hands it back at the end.
impl pipetrace_export::outputs::Output<Made> for Summary {
    fn spans(&mut self, spans: &[ReadySpan]) {
        spans.iter().for_each(|s| self.record(s));
    }

    fn end(self: Box<Self>) -> Option<Made> {
        Some(Made::Summary(*self))
    }
}

impl Summary {
    /// A summary whose tree shows `max_tasks` tasks and `max_tools` tools under each.
    pub(crate) fn new(max_tasks: usize, max_tools: usize) -> Self {
        Self {
            tree: Kept {
                keep: max_tasks.max(max_tools),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// Shows each failure's last log lines as `tails` asks.
    pub(crate) fn with_tails(mut self, tails: Tails) -> Self {
        self.tails = tails;
        self
    }

    pub(crate) fn record(&mut self, s: &ReadySpan) {
        // A started span only announces what its own span says in full at the end.
        if s.kind == Kind::Started {
            return;
        }
        let span = &s.span;
        let error = match &span.status {
            Status::Error { description } => Some(description.to_string()),
            _ => None,
        };
        // A folded span counts every span it stands for.
        let n = stands_for(span);
        if n > 1 {
            self.folded = (self.folded.0 + 1, self.folded.1 + n);
        }
        match s.kind {
            Kind::Run => {
                // As the report reads it back from the file, to the last digit.
                self.needs
                    .record(&ReportSpan::from_sdk_keeping(span, Kind::Run, &[]));
                self.run = Some(span.span_context.span_id());
                self.trace_id = Some(span.span_context.trace_id().to_string());
                self.parts = int_of(span, attr::TRACE_PARTS).unwrap_or(0) as u64;
            }
            Kind::Task => {
                self.tasks += n;
                self.failed_tasks += u64::from(error.is_some());
            }
            Kind::Tool => {
                self.tools += n;
                self.failed_tools += u64::from(error.is_some());
            }
            Kind::Engine | Kind::Started => {}
        }
        let (table, needs, rules) = (&mut self.table, &mut self.needs, &mut self.rules);
        self.kept.record(span, s.kind, n, |r| {
            table.record_task(r);
            needs.record(r);
            let name = r.text(attr::CICD_PIPELINE_TASK_NAME).unwrap_or(&r.name);
            rules.record(name, r.start, r.secs(), error.is_some(), n);
        });
        if self.tree.entries.len() >= MAX_ENTRIES {
            return;
        }
        let secs = span
            .end_time
            .duration_since(span.start_time)
            .unwrap_or_default()
            .as_secs_f64();
        let id = span.span_context.span_id();
        // The run's findings are the end's first section, not a line of the tree.
        let mut events: Vec<String> = (span.events.iter())
            .filter(|e| e.name != event::FINDING)
            .map(|e| event_from_sdk(e).describe())
            .collect();
        if s.kind == Kind::Engine {
            events.push(helpers_in_words(span));
        }
        let entry = Entry {
            kind: s.kind,
            name: span.name.to_string(),
            start: span.start_time,
            secs,
            error,
            events,
        };
        self.tree.insert(id, span.parent_span_id, entry);
    }

    /// Whether the tree folds the run's jobs per task: more tasks than it shows one by one.
    fn folds(&self, max_tasks: usize) -> bool {
        self.tasks > max_tasks as u64
    }

    pub(crate) fn trace_id(&self) -> Option<&str> {
        self.trace_id.as_deref()
    }

    fn line(
        &self,
        out: &mut String,
        prefix: &str,
        id: SpanId,
        last: bool,
        depth: usize,
        limits: (usize, usize),
    ) {
        let Some(e) = self.tree.entries.get(&id) else {
            return;
        };
        let branch = if depth == 0 {
            ""
        } else if last {
            "└─ "
        } else {
            "├─ "
        };
        e.write_line(out, &format!("{prefix}{branch}"));
        if depth == 0 && limits.0 == 0 {
            return;
        }
        let child_prefix = match depth {
            0 => String::new(),
            _ if last => format!("{prefix}   "),
            _ => format!("{prefix}│  "),
        };
        let mut kids: Vec<SpanId> = self.tree.children.get(&id).cloned().unwrap_or_default();
        kids.sort_by_key(|k| self.tree.entries.get(k).map(|e| e.start));
        let cap = if e.kind == Kind::Run {
            limits.0
        } else {
            limits.1
        };
        let total = self.tree.counts.get(&id).copied().unwrap_or(0) as usize;
        let shown = kids.len().min(cap);
        for (i, k) in kids.iter().take(shown).enumerate() {
            let is_last = i + 1 == shown && shown == total;
            self.line(out, &child_prefix, *k, is_last, depth + 1, limits);
        }
        if total > shown {
            let _ = writeln!(out, "{child_prefix}└─ … and {} more", total - shown);
        }
    }

    /// The tree (tasks and tools under the run), then the table, `machines` (lines under
    /// it), the totals and where data went.
    pub(crate) fn render(
        &self,
        judged: &Judgement,
        (max_tasks, max_tools): (usize, usize),
        wall: Duration,
        machines: &str,
        d: &Delivery,
    ) -> String {
        let mut out = self.body(judged, (max_tasks, max_tools), machines);
        crate::report::who::ByWho::of(&self.kept.spans).render(&mut out);
        let _ = writeln!(
            out,
            "\npipetrace: {} ({} failed), {} ({} exited non-zero) in {:.1}s",
            crate::print::count(self.tasks, "task", "tasks"),
            self.failed_tasks,
            crate::print::count(self.tools, "tool", "tools"),
            self.failed_tools,
            wall.as_secs_f64()
        );
        if let Some(t) = &self.trace_id {
            let _ = writeln!(out, "pipetrace: trace id {t}");
        }
        self.render_folds(&mut out);
        d.render(&mut out);
        out
    }
}

impl Summary {
    /// The run's judgement, once for the terminal and the page: its spans as kept, each
    /// failure's log lines where the tails ask for them.
    pub(crate) fn judge(&self) -> Judgement<'_> {
        self.tails.judge(&self.kept.spans)
    }

    /// The findings, the tree and the table: what the run's end says of its jobs.
    fn body(
        &self,
        judged: &Judgement,
        (max_tasks, max_tools): (usize, usize),
        machines: &str,
    ) -> String {
        let mut out = String::new();
        findings::render(&judged.findings, &mut out);
        if let Some(run) = self.run {
            match self.folds(max_tasks) {
                true => {
                    self.line(&mut out, "", run, true, 0, (0, 0));
                    self.rules.render(&mut out);
                }
                false => self.line(&mut out, "", run, true, 0, (max_tasks, max_tools)),
            }
        }
        if !self.table.is_empty() {
            out.push('\n');
            self.table.render(&judged.advice(), &mut out);
            out.push_str(machines);
        }
        out
    }

    /// What the trace budget folded or split, where it did.
    fn render_folds(&self, out: &mut String) {
        let (spans, stood_for) = self.folded;
        if spans > 0 {
            let _ = writeln!(
                out,
                "pipetrace: {stood_for} short repeated tasks and tools folded into {spans} spans \
                 (export.max_trace_bytes)"
            );
        }
        if self.parts > 0 {
            let _ = writeln!(
                out,
                "pipetrace: the run's trace continues in {} more traces, linked to its run span",
                self.parts
            );
        }
    }
}

impl Delivery<'_> {
    /// Whether anything failed, was dropped or lost on the way: said even under `-q`.
    pub(crate) fn troubled(&self) -> bool {
        let (s, l) = (self.stats, self.lost);
        let export =
            s.spans.failed() + s.spans.dropped() + s.metrics.failed() + s.metrics.dropped();
        export + l.kernel + l.accumulator + l.undecodable > 0
    }

    /// Where the spans and metric exports went, and what was lost on the way.
    pub(crate) fn render(&self, out: &mut String) {
        let (to, stats) = (self.to, self.stats);
        went(out, ("span", "spans"), &to.spans, &stats.spans);
        went(
            out,
            ("metric export", "metric exports"),
            &to.metrics,
            &stats.metrics,
        );
        if let Some(ep) = &to.own_spans {
            let own = &stats.own_spans;
            let _ = writeln!(
                out,
                "pipetrace: {} of pipetrace's own spans sent over OTLP to {ep} ({} failed, {} \
                 dropped)",
                own.otlp.sent.load(Relaxed),
                own.failed(),
                own.dropped()
            );
        }
        let dropped = stats.spans.dropped();
        let metrics_dropped = stats.metrics.dropped();
        let lost = self.lost;
        if dropped > 0 || metrics_dropped > 0 || lost.kernel > 0 || lost.undecodable > 0 {
            let _ = writeln!(
                out,
                "pipetrace: WARNING {} kernel events lost, {} undecodable, {dropped} spans \
                 dropped, {metrics_dropped} metric exports dropped (queue full or unsent at the \
                 end); raise probes.ring_buffer_bytes / export.queue_spans / \
                 export.queue_bytes, or set export.spool.dir",
                lost.kernel, lost.undecodable
            );
        }
        if lost.accumulator > 0 {
            let _ = writeln!(
                out,
                "pipetrace: WARNING {} updates of per-process sums lost (network bytes, exited \
                 threads' waits and I/O): the kernel's map of live processes was full; those \
                 processes' figures are short by them",
                lost.accumulator
            );
        }
    }
}
