//! One direction: events -> process tree -> attribution -> signals -> export.
use std::{
    collections::{HashMap, HashSet},
    time::Duration,
};

use crate::awaiting::Awaiting;
use crate::summary::Made;
use pipetrace_core::accounting::Usage;
use pipetrace_core::attribution::{Attributor, Effects, Finished, Settled};
use pipetrace_core::diagnosis::History;
use pipetrace_core::event::{Event, ProcKey};
use pipetrace_core::tree::Tree;
use pipetrace_export::export::SinkStats;

/// The loop's outputs: the sink, and the views beside it, each handing back what it made.
pub type Outputs = pipetrace_export::outputs::Outputs<Made>;
use pipetrace_export::signals::{
    SpanBuilder,
    metrics::{AgentFigures, Metrics},
};
use pipetrace_host::source::KernelLosses;

mod events;
mod gpu;
mod now;
mod settings;
#[cfg(test)]
mod tests;

/// The command `pipetrace run` started, as it knows it.
pub struct Spawned {
    pub pid: u32,
    pub argv: Vec<String>,
    /// When it was started, on the events' clock (boot time, ns).
    pub start_ns: u64,
}

pub struct Session {
    /// Every read of /proc, cgroups, records and clocks: the machine, or a test's fake.
    host: pipetrace_core::port::SharedHost,
    tree: Tree,
    attr: Attributor,
    builder: SpanBuilder,
    /// Where spans and metrics go (the sink, the summary, the keeper, the endpoint).
    outputs: Outputs,
    /// The sink's counts, for the agent's own figures.
    sink_stats: std::sync::Arc<SinkStats>,
    /// Spans finished in this poll: handed on together at its end (one wake-up of the sink).
    outgoing: Vec<pipetrace_export::signals::ReadySpan>,
    /// Keeps each run's trace within `export.max_trace_bytes`.
    folder: pipetrace_export::signals::fold::Folder,
    /// Judges each run as its spans leave: its findings go on its run span.
    judging: crate::judging::Judging,
    /// Runs and tasks whose start was exported (`run started`, `task started`).
    announced: HashSet<ProcKey>,
    /// Kernel records taken in.
    events: u64,
    /// Exits of processes the tree never saw (started before the agent, exited at once).
    unknown_exits: u64,
    /// Ring-buffer records that could not be decoded (a probe/agent version mismatch).
    undecodable: u64,
    /// Run spans exported so far.
    runs_finished: u64,
    /// Exited processes waiting for their usage report.
    awaiting: Awaiting,
    /// Processes that ended with no figures at all (their exit record was lost).
    usage_missing: u64,
    /// Processes whose figures were taken at exit: the reap-time report did not come.
    usage_at_exit: u64,
    /// Kernel figures dropped as impossible (a wait longer than a life times its threads).
    figures_dropped: u64,
    over_memory_limit: bool,
    procfs: bool,
    /// Exit statuses learnt by waiting for a child (the run's root): polling cannot see them.
    known_exits: HashMap<u32, u32>,
    metrics: Metrics,
    /// Running tasks and tools that stopped making progress.
    stalls: pipetrace_core::diagnosis::watch::StallWatch,
    history: History,
    /// Reads what tasks and runs are allowed (cgroups) as they start.
    limits: pipetrace_host::cgroup::Limits,
    /// Tasks and runs started in this batch whose allocation is still to be read.
    unread_allocations: Vec<ProcKey>,
    /// Containers seen, with what their runtimes record.
    containers: pipetrace_core::containers::Containers,
    /// The processes watched: the node's, or one cgroup's.
    scope: crate::scope::Scope,
    /// A node agent's judge of the host's idleness, and what it last said.
    idle: Option<pipetrace_host::IdleClock>,
    host_idle: Option<Duration>,
    /// Per-process GPU figures, where NVIDIA's driver is, looked at every metrics interval
    /// (µs).
    gpu: Option<pipetrace_host::gpu::GpuSampler>,
    gpu_interval_us: u64,
    /// Runs finished at the last idleness check: a run that came and went between two
    /// checks was work too.
    runs_finished_seen: u64,
    /// Which opened files are kept (`files.*`).
    files: pipetrace_core::files::Filter,
}

impl Session {
    pub fn new(
        host: pipetrace_core::port::SharedHost,
        attr: Attributor,
        builder: SpanBuilder,
        (outputs, sink_stats): (Outputs, std::sync::Arc<SinkStats>),
        metrics: Metrics,
    ) -> Self {
        Self {
            host,
            tree: Tree::default(),
            attr,
            builder,
            outputs,
            sink_stats,
            outgoing: Vec::new(),
            folder: pipetrace_export::signals::fold::Folder::new(0, Duration::ZERO),
            judging: Default::default(),
            events: 0,
            unknown_exits: 0,
            runs_finished: 0,
            undecodable: 0,
            awaiting: Awaiting::new(Duration::from_secs(2)),
            usage_missing: 0,
            usage_at_exit: 0,
            figures_dropped: 0,
            over_memory_limit: false,
            procfs: false,
            known_exits: HashMap::new(),
            metrics,
            stalls: pipetrace_core::diagnosis::watch::StallWatch::new(
                pipetrace_config::Diagnosis::default().stall_after,
            ),
            // No history kept until the caller says where (`with_history`).
            history: History::new(&pipetrace_config::Diagnosis::default(), None),
            announced: HashSet::new(),
            limits: pipetrace_host::cgroup::Limits::default(),
            unread_allocations: Vec::new(),
            containers: Default::default(),
            scope: crate::scope::Scope::new(None),
            idle: None,
            host_idle: None,
            gpu: None,
            gpu_interval_us: 0,
            runs_finished_seen: 0,
            files: pipetrace_core::files::Filter::default()
                .with_engines(pipetrace_core::attribution::engines::bookkeeping()),
        }
    }

    /// The node's idleness now, from the whole host's CPU time and the runs seen.
    fn observe_idle(&mut self) {
        let Some(clock) = self.idle.as_mut() else {
            return;
        };
        let worked = self.attr.runs() > 0 || self.runs_finished != self.runs_finished_seen;
        self.runs_finished_seen = self.runs_finished;
        self.host_idle = match self.host.cpu_busy_ticks() {
            Ok(busy) => {
                let at = Duration::from_nanos(self.host.boottime_ns());
                Some(clock.observe(at, busy, worked))
            }
            Err(e) => {
                // Unknown is not idle: say nothing rather than 0 or a guess.
                log::debug!("host idleness unknown: {e}");
                clock.forget();
                None
            }
        };
    }

    /// The wait status of `pid`, reaped by us: used when the source cannot see it.
    pub(crate) fn known_exit(&mut self, pid: u32, status: u32) {
        if self.procfs {
            self.known_exits.insert(pid, status);
        }
    }

    /// The pid and program of `key`'s parent, if it has exec'd.
    fn parent_program(&self, key: &pipetrace_core::event::ProcKey) -> Option<(u32, &str)> {
        let parent = self.tree.get(&self.tree.get(key)?.parent?)?;
        let i = parent.image.as_ref()?;
        let program = pipetrace_core::attribution::naming::program_name(&i.path, &i.argv);
        Some((parent.key.pid, program))
    }

    /// A file the process opened, kept if the filter keeps it. A relative path is kept as
    /// the process named it: the kernel's record names no directory.
    fn opened(&mut self, key: ProcKey, path: &str, flags: u32) {
        let Some(path) = self.files.keep(path) else {
            return;
        };
        // A process the tree does not hold is traced by no span: its files have no place.
        let access = pipetrace_core::files::Access::of_flags(flags);
        self.tree
            .opened(&key, &path, access, self.files.max_per_tool);
    }

    /// The pid of `pid`'s nearest ancestor still running in the same cgroup (by the
    /// kernel's unified id; the tree's view).
    fn running_ancestor(&self, pid: u32) -> Option<u32> {
        let victim = self.tree.by_pid(pid)?;
        let mut at = victim.parent;
        for _ in 0..64 {
            let p = self.tree.get(&at?)?;
            if p.cgroup_id != victim.cgroup_id || victim.cgroup_id == 0 {
                return None;
            }
            if p.exit.is_none() {
                return Some(p.key.pid);
            }
            at = p.parent;
        }
        None
    }

    /// Seeds the tree with what runs now, and lets the attribution find runs among it.
    pub(crate) fn seed(&mut self) {
        let mut snap = self.host.processes();
        if !self.scope.whole_node() {
            let (inside, outside): (Vec<_>, Vec<_>) = snap
                .into_iter()
                .partition(|s| self.scope.holds_pid(&*self.host, s.pid));
            for s in outside {
                self.scope.leave_out(pipetrace_core::event::ProcKey {
                    pid: s.pid,
                    start_ticks: s.start_ticks,
                });
            }
            snap = inside;
        }
        snap.sort_by_key(|s| s.start_ticks);
        let keys: Vec<_> = snap
            .iter()
            .map(|s| pipetrace_core::event::ProcKey {
                pid: s.pid,
                start_ticks: s.start_ticks,
            })
            .collect();
        self.tree.seed(snap);
        // Their containers (and Slurm steps) too, as if each had just exec'd.
        for k in &keys {
            if let Ok(c) = self.containers.of_pid(&*self.host, k.pid) {
                self.tree.set_container(k, c);
            }
        }
        let effects = self.attr.on_seed(&self.tree, &keys);
        self.hand_on(effects);
        self.read_allocations();
    }

    /// The tasks and runs that just started, whose allocation is read once the batch is in
    /// (see [`Self::read_allocations`]); and the runs whose engine traces itself, joined to
    /// its trace before any of their spans is built.
    /// Hands on what an attribution step set going: allocations to read, traces to join,
    /// runs named alike on every node.
    fn hand_on(&mut self, effects: Effects) {
        self.unread_allocations.extend(effects.started);
        for (run, traceparent) in effects.joins {
            self.builder.join(run, &traceparent);
        }
        for (run, shared) in effects.shares {
            self.builder.share(run, shared);
        }
    }

    /// What the tasks and runs started in the batch are allowed, read while they run. Read
    /// after the batch, not at each exec: a task that already ended by then (most of a fork
    /// storm's, each a few ms) is gone or about to be, and gets the host's without the
    /// reads, as a failed read would give it.
    fn read_allocations(&mut self) {
        for key in std::mem::take(&mut self.unread_allocations) {
            let ended = self.tree.get(&key).is_none_or(|p| p.exit.is_some());
            let a = match ended {
                true => self.limits.allocation_of_gone(&*self.host),
                false => self.limits.allocation(&*self.host, key.pid),
            };
            self.attr.set_allocation(key, a);
        }
    }

    /// Takes a batch from the ring buffer (`bad`: records that did not decode), then
    /// exports whatever the attribution could name since.
    pub fn ingest(&mut self, batch: &mut Vec<Event>, bad: u64) {
        self.undecodable += bad;
        for ev in batch.drain(..) {
            self.handle(ev);
        }
        self.read_allocations();
        self.poll(false);
    }

    pub(crate) fn handle(&mut self, ev: Event) {
        self.events += 1;
        if !self.scope.admit(&*self.host, &ev, &self.tree) {
            return;
        }
        match ev {
            Event::Fork {
                key,
                start_ns,
                parent,
                parent_tid,
                comm,
            } => {
                self.tree.fork(key, start_ns, parent, comm);
                self.tree.set_forked_by(&key, parent_tid);
                if self.procfs {
                    self.tree.mark_procfs(&key);
                }
                let effects = self.attr.on_fork(&self.tree, key);
                self.hand_on(effects);
            }
            Event::Exec(e) => self.exec(e),
            Event::Exit {
                key,
                time_ns,
                status,
                image_peak_bytes,
                at_exit,
            } => self.exited(key, time_ns, status, image_peak_bytes, at_exit),
            Event::Oom {
                pid,
                time_ns,
                anon_rss_bytes,
                file_rss_bytes,
                shmem_rss_bytes,
                limit_bytes,
                trigger,
            } => {
                let rss = anon_rss_bytes + file_rss_bytes + shmem_rss_bytes;
                self.oom(pid, time_ns, rss, (limit_bytes, trigger))
            }
            Event::Signal {
                target,
                time_ns,
                sig,
                code,
                sender_pid,
                sender_comm,
            } => {
                let sender = (sender_pid, sender_comm);
                self.signalled(target, time_ns, sig, code, sender);
            }
            Event::Open { key, path, flags } => self.opened(key, &path, flags),
            Event::FinalCpu { key, cpu, switches } => self.awaiting.final_cpu(key, &cpu, &switches),
            Event::Usage { key, usage } => {
                // Settled in `poll`, once the process's exited descendants are.
                if !self.awaiting.reported(key, usage) {
                    log::debug!("usage of {key:?} matches no exit waiting for it");
                }
            }
        }
    }

    /// The process's end is final: attribute it, export what that finished, forget it.
    fn settle(&mut self, key: ProcKey, mut usage: Option<Usage>) {
        match &usage {
            None => self.usage_missing += 1,
            Some(u) if u.at_exit => self.usage_at_exit += 1,
            Some(_) => {}
        }
        if let (Some(u), Some(p)) = (usage.as_mut(), self.tree.get(&key)) {
            let end = p.end_ns();
            let since_boot = p.start_ns.saturating_sub(self.host.suspended_ns());
            let dropped = u.drop_impossible_delays(end.saturating_sub(p.start_ns), since_boot);
            self.figures_dropped += u64::from(dropped);
        }
        // What it did on GPUs, looked at while it ran (taken even without kernel figures:
        // nothing of an ended pid may stay behind for the next process with its pid).
        let gpu = self.gpu.as_mut().and_then(|g| g.take(key.pid));
        if let (Some(u), Some(g)) = (usage.as_mut(), gpu) {
            u.gpu = g;
        }
        self.tree.settle(&key, usage);
        let settled = self.attr.on_exit(&self.tree, key);
        self.metrics.on_exit(&self.attr, &self.tree, key);
        self.emit(settled);
        let dropped = self.tree.release(key);
        self.attr.forget(&dropped);
    }

    /// Exports what the attribution could name since the last call (Snakemake jobs wait
    /// for the engine's log); with `force`, everything still waiting. Exits whose usage did
    /// not come within `usage_wait` (a parent that never reaps) end without it.
    pub fn poll(&mut self, force: bool) {
        self.settle_exits(force);
        let settling: HashSet<ProcKey> = self
            .awaiting
            .keys()
            .filter_map(|k| self.attr.membership(k).map(|m| m.run))
            .collect();
        let settled = self.attr.poll(force, &settling);
        self.emit(settled);
        if force {
            // Spans waiting for a parent that will not come now go out as they are.
            self.folder.drain(&mut self.outgoing);
        }
        for (pipeline, kinds) in self.judging.pass(&mut self.outgoing) {
            self.metrics.found(&pipeline, kinds.into_iter());
        }
        self.outputs.spans(std::mem::take(&mut self.outgoing));
    }

    /// The longest a usage report that came took after its process's exit.
    pub(crate) fn slowest_usage_report(&self) -> Duration {
        self.awaiting.slowest_report()
    }

    /// From now on each exit waits `wait` after its exit for its usage report; the next
    /// poll ends the exits already past it with their figures from exit (counted).
    pub(crate) fn wait_for_usage(&mut self, wait: Duration) {
        self.awaiting.set_wait(wait);
    }

    /// Processes that exited and wait for the kernel's usage report.
    pub(crate) fn awaiting_usage(&self) -> usize {
        self.awaiting.len()
    }

    /// Kernel records taken in so far.
    pub(crate) fn events(&self) -> u64 {
        self.events
    }

    /// Whether a run ended and all of it is settled: no task waits for its engine's
    /// records, no exit for its usage.
    pub fn run_settled(&self) -> bool {
        self.runs_finished > 0 && self.attr.pending() == 0 && self.awaiting_usage() == 0
    }

    /// The processes of runs that still run, as the tree knows them, by pid.
    pub(crate) fn still_running(&self) -> Vec<ProcKey> {
        let mut keys: Vec<ProcKey> = (self.attr.members())
            .map(|(k, _)| k)
            .filter(|k| self.tree.get(k).is_some_and(|p| p.exit.is_none()))
            .collect();
        keys.sort_by_key(|k| (k.pid, k.start_ticks));
        keys
    }

    /// Settles the exits whose usage report came, or (with `give_up`, or past the wait) all.
    fn settle_exits(&mut self, give_up: bool) {
        for (key, usage) in self.awaiting.ready(&self.tree, give_up) {
            self.settle(key, usage);
        }
    }

    /// Samples running processes for the live metrics and returns the request to export,
    /// if any. `net` reads what the kernel has counted so far for a live process.
    pub(crate) fn metrics_tick(
        &mut self,
        net: &dyn Fn(u32) -> pipetrace_probes_common::Accumulator,
        lost: KernelLosses,
    ) -> Option<opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest>
    {
        let now = self.host.boottime_ns();
        self.attr.name_running(&self.tree, now);
        let parts = (self.metrics).sample(&*self.host, &self.attr, &self.tree, now, net);
        self.sample_gpus();
        self.stalls.observe(&self.attr, &self.tree, &parts, now);
        self.announce_started();
        self.observe_idle();
        let figures = self.agent_figures(lost);
        let mut req = self.metrics.collect(&figures, self.stalls.counts())?;
        if let Some(scope) =
            (req.resource_metrics.first_mut()).and_then(|r| r.scope_metrics.first_mut())
        {
            scope.metrics.extend(self.gpu_metrics());
            let progress = self.progress();
            scope
                .metrics
                .extend(pipetrace_export::signals::metrics::progress::metrics(
                    &progress,
                    self.host.now(),
                ));
        }
        Some(req)
    }

    /// What the agent lost, dropped, retried and holds now.
    pub(crate) fn agent_figures(&self, lost: KernelLosses) -> AgentFigures {
        use std::sync::atomic::Ordering::Relaxed;
        let st = &self.sink_stats;
        AgentFigures {
            lost_events: lost.events,
            accumulator_lost: lost.accumulator_updates,
            undecodable: self.undecodable,
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
            usage_missing: self.usage_missing,
            usage_at_exit: self.usage_at_exit,
            figures_dropped: self.figures_dropped,
            gpu_errors: self.gpu.as_ref().map_or(0, |g| g.errors),
            series_overflowed: self.metrics.overflowed(),
            processes_known: self.tree.len() as u64,
            processes_tracked: self.attr.tracked() as u64,
            rss_bytes: self.host.own_rss_bytes().unwrap_or(0),
            host_idle_s: self.host_idle.map(|d| d.as_secs()),
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
        let moved = self.outputs.relieve_memory() + self.judging.relieve_memory();
        if !std::mem::replace(&mut self.over_memory_limit, true) {
            log::warn!(
                "resident memory {} MiB is over export.memory_limit ({} MiB): {moved} queued \
                 items moved to the spool or dropped (counted)",
                rss >> 20,
                limit_bytes >> 20
            );
        }
    }

    fn emit(&mut self, settled: Settled) {
        // Runs named alike on every node since the last look: before any span is built.
        self.hand_on(settled.effects);
        self.read_allocations();
        for mut f in settled.finished {
            if let Finished::Run { proc, info, .. } = &mut f {
                info.engine_version =
                    (info.engine_version.take()).or_else(|| now::engine_version(proc, info));
            }
            let mut judged = pipetrace_core::diagnosis::Judgement::default();
            match &f {
                Finished::Task {
                    proc,
                    usage,
                    info,
                    run,
                } => {
                    let end = proc.end_ns();
                    (judged.stalls, judged.quiet_ns) = self.stalls.take_task(proc.key, end);
                    let pipeline = self.attr.run_key(*run).unwrap_or_default().to_string();
                    let (wall, r) = (
                        end.saturating_sub(proc.start_ns) as f64 / 1e9,
                        &usage.rollup,
                    );
                    let run_id = self.builder.trace_id(*run).to_string();
                    let job = pipetrace_core::diagnosis::Job {
                        pipeline: &pipeline,
                        task: &info.name,
                        run: &run_id,
                        wall_s: wall,
                        cpu_s: r.totals.cpu_ns() as f64 / 1e9,
                        peak_bytes: r.peak_memory(),
                        // An unknown status (polling /proc) counts as success, as elsewhere.
                        succeeded: (proc.exit.as_ref()).is_some_and(|e| info.succeeded(e)),
                    };
                    // A pipeline with no key of its own (a Slurm job) has no history.
                    if !pipeline.is_empty() {
                        judged.usual = self.history.judge(&job);
                    }
                }
                Finished::Run { proc, info, usage } => self.record_run(proc, info, usage),
                Finished::Engine { .. } => {}
                Finished::Tool { proc, .. } => {
                    let end = proc.end_ns();
                    judged.stalls = self.stalls.take_tool(proc.key, end);
                }
            }
            match &f {
                Finished::Task { proc, .. } | Finished::Run { proc, .. } => {
                    self.announced.remove(&proc.key);
                }
                _ => {}
            }
            let signal = self.builder.build(&f, &judged);
            if let Finished::Run { proc, .. } = &f {
                self.runs_finished += 1;
                self.builder.forget(proc.key);
            }
            self.metrics.on_finished(&f, &self.attr);
            let ends_run = matches!(f, Finished::Run { .. });
            self.folder.push_span(signal, ends_run, &mut self.outgoing);
        }
    }

    /// A metrics tick's request, to every output.
    pub(crate) fn send_metrics(
        &mut self,
        req: opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest,
    ) {
        self.outputs.metrics(req);
    }

    /// The loop ended: the sink, to flush, and what the views made (history saved first).
    pub fn end(mut self) -> (pipetrace_export::export::Sink, Vec<Made>) {
        self.history.save();
        self.outputs.end()
    }
}
