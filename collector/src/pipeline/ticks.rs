//! What the loop samples every metrics interval beside its stages: the running processes'
//! figures as live metrics, the GPUs (per-process figures for the spans, device metrics),
//! the node's idleness, and the runs' progress; and the metrics' own counts of what
//! finished.
use std::time::Duration;

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use pipetrace_core::accounting::GpuFigures;
use pipetrace_core::attribution::{Attributor, Finished};
use pipetrace_core::diagnosis::watch::{Parts, TaskCounts};
use pipetrace_core::event::ProcKey;
use pipetrace_core::port::SharedHost;
use pipetrace_core::tree::Tree;
use pipetrace_export::signals::metrics::{AgentFigures, Metrics, progress::Progress};
use pipetrace_host::gpu::GpuSampler;

pub(crate) struct Ticks {
    host: SharedHost,
    metrics: Metrics,
    /// Per-process GPU figures, where NVIDIA's driver is, looked at every interval (µs).
    gpu: Option<GpuSampler>,
    gpu_interval_us: u64,
    /// A node agent's judge of the host's idleness, and what it last said.
    idle: Option<pipetrace_host::IdleClock>,
    host_idle: Option<Duration>,
    /// Runs finished at the last idleness check: a run that came and went between two
    /// checks was work too.
    runs_finished_seen: u64,
}

impl Ticks {
    /// `gpu`: the sampler, looked at every `interval`; `idle`: a node agent's judge of the
    /// node's idleness.
    pub(crate) fn new(
        host: SharedHost,
        metrics: Metrics,
        (gpu, interval): (Option<GpuSampler>, Duration),
        idle: Option<pipetrace_host::IdleClock>,
    ) -> Self {
        Self {
            host,
            metrics,
            gpu,
            gpu_interval_us: interval.as_micros() as u64,
            idle,
            host_idle: None,
            runs_finished_seen: 0,
        }
    }

    /// The running processes sampled for the live metrics, and the GPUs a run's process
    /// holds a context on looked at. `net` reads what the kernel has counted so far for a
    /// live process.
    pub(super) fn sample(
        &mut self,
        (attr, tree): (&Attributor, &Tree),
        now: u64,
        net: &dyn Fn(u32) -> pipetrace_probes_common::Accumulator,
    ) -> Parts {
        let parts = self.metrics.sample(&*self.host, attr, tree, now, net);
        if let Some(gpu) = self.gpu.as_mut() {
            let ours =
                |pid: u32| (tree.by_pid(pid)).is_some_and(|p| attr.membership(&p.key).is_some());
            let now_us = (self.host.now())
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_micros() as u64);
            gpu.tick(&ours, now_us, self.gpu_interval_us);
        }
        parts
    }

    /// The node's idleness now, from the whole host's CPU time; `running`: runs running
    /// now, `finished`: runs finished so far.
    pub(super) fn observe_idle(&mut self, running: usize, finished: u64) {
        let Some(clock) = self.idle.as_mut() else {
            return;
        };
        let worked = running > 0 || finished != self.runs_finished_seen;
        self.runs_finished_seen = finished;
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

    /// This interval's request: the processes' series, the agent's own figures, the GPUs'
    /// memory held per series, and each run's progress.
    pub(super) fn collect(
        &mut self,
        figures: &AgentFigures,
        counts: (&TaskCounts, &TaskCounts),
        progress: &[Progress],
        tree: &Tree,
    ) -> Option<ExportMetricsServiceRequest> {
        let mut req = self.metrics.collect(figures, counts)?;
        if let Some(scope) =
            (req.resource_metrics.first_mut()).and_then(|r| r.scope_metrics.first_mut())
        {
            scope.metrics.extend(self.gpu_metrics(tree));
            let now = self.host.now();
            (scope.metrics).extend(pipetrace_export::signals::metrics::progress::metrics(
                progress, now,
            ));
        }
        Some(req)
    }

    /// GPU memory each series holds now, and the GPUs the runs used at the last look.
    fn gpu_metrics(&self, tree: &Tree) -> Vec<opentelemetry_proto::tonic::metrics::v1::Metric> {
        let Some(gpu) = self.gpu.as_ref() else {
            return Vec::new();
        };
        let mut held = std::collections::BTreeMap::new();
        for (pid, bytes) in gpu.holding() {
            let series = (tree.by_pid(pid)).and_then(|p| self.metrics.series_of(&p.key));
            if let Some(k) = series {
                *held.entry(k.clone()).or_insert(0) += bytes;
            }
        }
        pipetrace_export::signals::metrics::gpu::metrics(&held, &gpu.devices, self.host.now())
    }

    /// What ended process `pid` did on GPUs, looked at while it ran: taken even without
    /// kernel figures, so nothing of it stays for the next process with its pid.
    pub(super) fn take_gpu(&mut self, pid: u32) -> Option<GpuFigures> {
        self.gpu.as_mut().and_then(|g| g.take(pid))
    }

    /// What GPUs process `pid` holds now, for the live view.
    pub(super) fn gpu_now(&self, pid: u32) -> Option<(u64, GpuFigures)> {
        self.gpu.as_ref().and_then(|g| g.now(pid))
    }

    pub(super) fn on_exit(&mut self, attr: &Attributor, tree: &Tree, key: ProcKey) {
        self.metrics.on_exit(attr, tree, key);
    }

    pub(super) fn on_finished(&mut self, f: &Finished, attr: &Attributor) {
        self.metrics.on_finished(f, attr);
    }

    /// The findings of runs judged, counted by kind.
    pub(super) fn found(&mut self, judged: Vec<(String, Vec<&'static str>)>) {
        for (pipeline, kinds) in judged {
            self.metrics.found(&pipeline, kinds.into_iter());
        }
    }

    /// Running tasks the metrics have a name for: (task, run, name).
    pub(super) fn labelled(&self) -> impl Iterator<Item = (ProcKey, ProcKey, &str)> + '_ {
        self.metrics.labelled()
    }

    /// (NVML errors, series past the cap, the node idle for so long).
    pub(super) fn own(&self) -> (u64, u64, Option<Duration>) {
        let gpu_errors = self.gpu.as_ref().map_or(0, |g| g.errors);
        (gpu_errors, self.metrics.overflowed(), self.host_idle)
    }
}
