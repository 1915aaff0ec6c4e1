//! The loop, as stages with typed hand-offs: lifecycle (the process tree, exits awaiting
//! their usage, containers, scope) → attribution (runs, tasks, tools; allocations) →
//! judgement (stalls, the usual, history) → span building → trace budget → the run's
//! findings → outputs. Each stage returns what it produced and the loop passes it on.
use std::collections::HashSet;
use std::time::Duration;

use crate::summary::Made;
use pipetrace_core::attribution::{Effects, Finished, Settled};
use pipetrace_core::event::{Event, ProcKey};
use pipetrace_export::export::SinkStats;
use pipetrace_export::signals::{ReadySpan, SpanBuilder, fold::Folder, metrics::AgentFigures};
use pipetrace_host::source::KernelLosses;

pub(crate) use attribution::Attribution;
pub(crate) use judgement::Judge;
pub(crate) use lifecycle::Lifecycle;
pub(crate) use ticks::Ticks;

mod attribution;
mod judgement;
mod lifecycle;
mod live;
#[cfg(test)]
mod tests;
mod ticks;

/// The loop's outputs: the sink, and the views beside it, each handing back what it made.
pub type Outputs = pipetrace_export::outputs::Outputs<Made>;

/// The command `pipetrace run` started, as it knows it.
pub struct Spawned {
    pub pid: u32,
    pub argv: Vec<String>,
    /// When it was started, on the events' clock (boot time, ns).
    pub start_ns: u64,
}

/// The stages, each built from its own part of the configuration (`crate::assembly`).
pub(crate) struct Stages {
    /// The clocks and the agent's own memory: the machine, or a test's fake.
    pub(crate) host: pipetrace_core::port::SharedHost,
    pub(crate) life: Lifecycle,
    pub(crate) attr: Attribution,
    pub(crate) judge: Judge,
    pub(crate) build: SpanBuilder,
    /// Keeps each run's trace within `export.max_trace_bytes`.
    pub(crate) budget: Folder,
    pub(crate) ticks: Ticks,
}

pub struct Pipeline {
    host: pipetrace_core::port::SharedHost,
    life: Lifecycle,
    attr: Attribution,
    judge: Judge,
    build: SpanBuilder,
    budget: Folder,
    outputs: Outputs,
    ticks: Ticks,
    /// The sink's counts, for the agent's own figures.
    sink_stats: std::sync::Arc<SinkStats>,
    /// Runs and tasks whose start was exported (`run started`, `task started`).
    announced: HashSet<ProcKey>,
    /// Run spans exported so far.
    runs_finished: u64,
    over_memory_limit: bool,
}

impl Pipeline {
    pub(crate) fn new(
        s: Stages,
        (outputs, sink_stats): (Outputs, std::sync::Arc<SinkStats>),
    ) -> Self {
        Self {
            host: s.host,
            life: s.life,
            attr: s.attr,
            judge: s.judge,
            build: s.build,
            budget: s.budget,
            outputs,
            ticks: s.ticks,
            sink_stats,
            announced: HashSet::new(),
            runs_finished: 0,
            over_memory_limit: false,
        }
    }

    /// Seeds the tree with what runs now, and lets the attribution find runs among it.
    pub(crate) fn seed(&mut self) {
        let keys = self.life.seed();
        let effects = self.attr.seeded(self.life.tree(), &keys);
        self.join(effects);
        self.attr.read_allocations(self.life.tree());
    }

    /// Takes a batch from the ring buffer (`bad`: records that did not decode), then
    /// exports whatever the attribution could name since.
    pub fn ingest(&mut self, batch: &mut Vec<Event>, bad: u64) {
        self.life.undecodable(bad);
        for ev in batch.drain(..) {
            self.handle(ev);
        }
        self.attr.read_allocations(self.life.tree());
        self.poll(false);
    }

    pub(crate) fn handle(&mut self, ev: Event) {
        let step = self.life.take(ev, self.attr.get());
        let effects = self.attr.step(self.life.tree(), step);
        self.join(effects);
    }

    /// Exports what the attribution could name since the last call (Snakemake jobs wait
    /// for the engine's log); with `force`, everything still waiting. Exits whose usage did
    /// not come within `usage_wait` (a parent that never reaps) end without it.
    pub fn poll(&mut self, force: bool) {
        let mut out = Vec::new();
        for (key, usage) in self.life.ended(force) {
            // Taken even without kernel figures: nothing of an ended pid may stay behind
            // for the next process with its pid.
            let gpu = self.ticks.take_gpu(key.pid);
            self.life.settle(key, usage, gpu);
            let settled = self.attr.ended(self.life.tree(), key);
            (self.ticks).on_exit(self.attr.get(), self.life.tree(), key);
            self.finish(settled, &mut out);
            let dropped = self.life.release(key);
            self.attr.forget(&dropped);
        }
        let settling = self.life.settling_runs(self.attr.get());
        let settled = self.attr.poll(force, &settling);
        self.finish(settled, &mut out);
        if force {
            // Spans waiting for a parent that will not come now go out as they are.
            self.budget.drain(&mut out);
        }
        self.send(out);
    }

    /// What the attribution settled: each record judged, built into its span and put
    /// under its trace's budget (into `out`).
    fn finish(&mut self, settled: Settled, out: &mut Vec<ReadySpan>) {
        self.join(settled.effects);
        self.attr.read_allocations(self.life.tree());
        for mut f in settled.finished {
            // The history keeps tasks and runs by their run's trace id.
            let (kept, ends_run) = match &f {
                Finished::Task { proc, run, .. } => (Some((proc.key, *run)), false),
                Finished::Run { proc, .. } => (Some((proc.key, proc.key)), true),
                _ => (None, false),
            };
            let trace_id =
                (kept.map(|(_, run)| self.build.trace_id(run).to_string())).unwrap_or_default();
            let judged = self.judge.of(&mut f, self.attr.get(), &trace_id);
            let span = self.build.build(&f, &judged);
            if let Some((key, run)) = kept {
                self.announced.remove(&key);
                if ends_run {
                    self.runs_finished += 1;
                    self.build.forget(run);
                }
            }
            self.ticks.on_finished(&f, self.attr.get());
            self.budget.push_span(span, ends_run, out);
        }
    }

    /// Spans past the budget: each run span with its run's findings, then to the outputs.
    fn send(&mut self, mut out: Vec<ReadySpan>) {
        let judged = self.judge.runs(&mut out);
        self.ticks.found(judged);
        self.outputs.spans(out);
    }

    /// Traces to join and runs named alike on every node: before any of their spans is
    /// built.
    fn join(&mut self, effects: Effects) {
        for (run, traceparent) in effects.joins {
            self.build.join(run, &traceparent);
        }
        for (run, shared) in effects.shares {
            self.build.share(run, shared);
        }
    }

    /// The run's root, reaped by `pipetrace run` with `status`.
    pub(crate) fn root_reaped(&mut self, root: &Spawned, status: u32) {
        let never_seen = self.attr.get().runs() == 0 && self.runs_finished == 0;
        for ev in self.life.root_reaped(root, status, never_seen) {
            self.handle(ev);
        }
    }

    /// Samples running processes and GPUs, announces what started, judges the node's
    /// idleness, and sends this interval's metrics. `net` reads what the kernel has counted
    /// so far for a live process.
    pub(crate) fn tick(
        &mut self,
        net: &dyn Fn(u32) -> pipetrace_probes_common::Accumulator,
        lost: KernelLosses,
    ) {
        let now = self.host.boottime_ns();
        self.attr.get_mut().name_running(self.life.tree(), now);
        let (attr, tree) = (self.attr.get(), self.life.tree());
        let parts = self.ticks.sample((attr, tree), now, net);
        self.judge.stalls_mut().observe(attr, tree, &parts, now);
        self.announce_started();
        let running = self.attr.get().runs();
        self.ticks.observe_idle(running, self.runs_finished);
        let figures = self.agent_figures(lost);
        let progress = self.progress();
        let counts = self.judge.stalls().counts();
        if let Some(req) = self
            .ticks
            .collect(&figures, counts, &progress, self.life.tree())
        {
            self.outputs.metrics(req);
        }
    }

    /// What the agent lost, dropped, retried and holds now.
    pub(crate) fn agent_figures(&self, lost: KernelLosses) -> AgentFigures {
        use std::sync::atomic::Ordering::Relaxed;
        let (st, c) = (&self.sink_stats, self.life.counts());
        let (gpu_errors, series_overflowed, host_idle) = self.ticks.own();
        AgentFigures {
            lost_events: lost.events,
            accumulator_lost: lost.accumulator_updates,
            undecodable: c.undecodable,
            spans_dropped: st.spans.dropped(),
            export_failures: st.spans.failed(),
            export_retries: st.retries(),
            spans_spooled: st.spans.otlp.spooled.load(Relaxed),
            export_queue_bytes: st.queued_bytes(),
            attributes_truncated: st.limits.values_truncated.load(Relaxed),
            limits_dropped: st.limits.dropped(),
            metric_exports_failed: st.metrics.failed(),
            metric_exports_dropped: st.metrics.dropped(),
            metric_exports_spooled: st.metrics.otlp.spooled.load(Relaxed),
            usage_missing: c.usage_missing,
            usage_at_exit: c.usage_at_exit,
            figures_dropped: c.figures_dropped,
            gpu_errors,
            series_overflowed,
            processes_known: self.life.tree().len() as u64,
            processes_tracked: self.attr.get().tracked() as u64,
            rss_bytes: self.host.own_rss_bytes().unwrap_or(0),
            host_idle_s: host_idle.map(|d| d.as_secs()),
        }
    }

    /// Past the memory limit, telemetry waiting in memory goes to the spool, or is dropped
    /// and counted: the agent must not grow without bound while a backend is away.
    pub(crate) fn enforce_memory_limit(&mut self, limit_bytes: u64) {
        let Some(rss) = self.host.own_rss_bytes() else {
            return;
        };
        if rss <= limit_bytes {
            self.over_memory_limit = false;
            return;
        }
        let moved = self.outputs.relieve_memory() + self.judge.relieve_memory();
        if !std::mem::replace(&mut self.over_memory_limit, true) {
            log::warn!(
                "resident memory {} MiB is over export.memory_limit ({} MiB): {moved} queued \
                 items moved to the spool or dropped (counted)",
                rss >> 20,
                limit_bytes >> 20
            );
        }
    }

    /// Kernel records taken in so far.
    pub(crate) fn events(&self) -> u64 {
        self.life.counts().events
    }

    /// Whether a run ended and all of it is settled: no task waits for its engine's
    /// records, no exit for its usage.
    pub(crate) fn run_settled(&self) -> bool {
        self.runs_finished > 0 && self.attr.get().pending() == 0 && self.awaiting_usage() == 0
    }

    /// The processes of runs that still run, as the tree knows them, by pid.
    pub(crate) fn still_running(&self) -> Vec<ProcKey> {
        self.life.still_running(self.attr.get())
    }

    /// The longest a usage report that came took after its process's exit.
    pub(crate) fn slowest_usage_report(&self) -> Duration {
        self.life.slowest_usage_report()
    }

    /// From now on each exit waits `wait` after its exit for its usage report; the next
    /// poll ends the exits already past it with their figures from exit (counted).
    pub(crate) fn wait_for_usage(&mut self, wait: Duration) {
        self.life.wait_for_usage(wait);
    }

    /// Processes that exited and wait for the kernel's usage report.
    pub(crate) fn awaiting_usage(&self) -> usize {
        self.life.awaiting_usage()
    }

    /// The loop ended: the sink, to flush, and what the views made (history saved first).
    pub fn end(mut self) -> (pipetrace_export::export::Sink, Vec<Made>) {
        self.judge.save();
        self.outputs.end()
    }
}
