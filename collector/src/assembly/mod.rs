//! The one place that builds the running graph from the configuration, for `pipetrace run`
//! (and `demo`, which is a run) and the agent alike: the probes and the span builder first
//! ([`prepare`], before the command starts, so that a failure starts nothing), then the
//! attribution, the outputs and the pipeline around them ([`assemble`]). The commands pass
//! what is theirs (the command's pid and argv, the trace file's stem); nothing else reads
//! the configuration to wire the loop.
mod outputs;

use std::sync::Arc;

use anyhow::Context;
use pipetrace_config::Config;
use pipetrace_core::machine::HostInfo;

use crate::pipeline::{Attribution, Judge, Lifecycle, Outputs, Pipeline, Stages, Ticks};
use crate::scope::Scope;
use pipetrace_core::attribution::{Attributor, Mode};
use pipetrace_core::redact::Redactor;
use pipetrace_export::export::{Sink, SinkStats, prometheus::Bound, resource};
use pipetrace_export::signals::{SpanBuilder, fold::Folder, metrics::Metrics};
use pipetrace_host::gpu::GpuSampler;
use pipetrace_host::source::{Events, ProbeState};

/// What the graph is built for.
pub enum For<'a> {
    /// `pipetrace run`: the command started (`root_pid`, `argv`); `summary`: the end-of-run
    /// tree and tables are printed.
    Run {
        root_pid: u32,
        argv: &'a [String],
        summary: bool,
    },
    /// The agent: every run on the host.
    Agent,
}

/// Everything needed before the user's command may start: nothing is started when any of
/// it fails.
pub struct Prepared {
    pub host: HostInfo,
    pub events: Events,
    pub taps: ProbeState,
    pub builder: SpanBuilder,
}

/// The host's identity, the probes loaded (or the /proc fallback) and the span builder.
pub fn prepare(cfg: &Config) -> anyhow::Result<Prepared> {
    let host = pipetrace_host::host_info().context("reading host identity")?;
    let redactor = Redactor::new(cfg.redaction.enabled, &cfg.redaction.patterns)?;
    let (events, taps) = pipetrace_host::source::open(&cfg.probes, cfg.files.enabled)?;
    let measured = taps.measured();
    Ok(Prepared {
        builder: SpanBuilder::new(host.clone(), redactor)
            .with_measured(measured)
            .with_diagnosis(cfg.diagnosis.clone())
            .with_cost(cfg.cost.clone())
            .with_who(
                pipetrace_host::this_machine(),
                pipetrace_export::signals::who::Centre::of_config(cfg),
            ),
        host,
        events,
        taps,
    })
}

/// The pipeline for `of`: its attribution, its outputs (the views `of` wants, Prometheus
/// where bound, the sink last) and its metrics, reading through one host.
pub(crate) fn assemble(
    cfg: &Config,
    of: For,
    (host, builder, polling): (&HostInfo, SpanBuilder, bool),
    (sink, prometheus): (Sink, Option<Bound>),
) -> anyhow::Result<Pipeline> {
    let machine = pipetrace_host::this_machine();
    let (mode, argv, view) = match of {
        For::Run {
            root_pid,
            argv,
            summary,
        } => (
            Mode::Run { root_pid },
            Some(argv),
            outputs::View::Run { summary },
        ),
        For::Agent => (Mode::Agent, None, outputs::View::Agent),
    };
    let mut attr = Attributor::new(mode, &cfg.attribution, host.boot_to_unix_ns, machine)?;
    if let Some(argv) = argv {
        attr = attr.with_command(argv);
    }
    let outputs = outputs::list(cfg, view, sink, prometheus)?;
    // The whole node's idleness is a node agent's to judge: one scoped to a cgroup (a
    // sidecar) sees neither the node's runs nor only its own CPU.
    let idle = matches!(view, outputs::View::Agent) && cfg.probes.scope_cgroup.is_none();
    pipeline(cfg, host, (attr, builder), outputs, (polling, idle))
}

/// The loop's stages, each built from its own section of `cfg`, feeding `outputs`;
/// `polling`: events come from polling /proc; `idle`: the node's idleness is judged.
pub fn pipeline(
    cfg: &Config,
    host: &HostInfo,
    (mut attr, builder): (Attributor, SpanBuilder),
    outputs: (Outputs, Arc<SinkStats>),
    (polling, idle): (bool, bool),
) -> anyhow::Result<Pipeline> {
    // Every stage reads through the attribution's host: the machine, or a test's fake.
    let shared = attr.host();
    let metrics = Metrics::new(
        &cfg.metrics,
        builder.measured(),
        &resource(cfg, host),
        shared.clone(),
    );
    let files = files_filter(cfg)?;
    attr.files_per_task = files.max_per_task;
    let scope = Scope::new(crate::scope::resolve(cfg.probes.scope_cgroup.as_deref())?);
    let gpu = gpu_driver(&cfg.gpu).and_then(|d| match GpuSampler::new(d, &host.gpus) {
        Ok(s) => Some(s),
        Err(e) => {
            log::warn!("NVML answers but lists no GPU ({e}): GPU figures off");
            None
        }
    });
    let idle = idle.then(|| pipetrace_host::IdleClock::new(&cfg.host, shared.ticks_per_s()));
    let stages = Stages {
        host: shared.clone(),
        life: Lifecycle::new(
            shared.clone(),
            (scope, files),
            cfg.probes.usage_wait,
            polling,
        ),
        attr: Attribution::new(shared.clone(), attr, host.boot_to_unix_ns),
        judge: Judge::new(shared.clone(), &cfg.diagnosis),
        build: builder,
        budget: Folder::new(cfg.export.max_trace_bytes, cfg.export.fold_under),
        ticks: Ticks::new(shared, metrics, (gpu, cfg.metrics.interval), idle),
    };
    Ok(Pipeline::new(stages, outputs))
}

/// Which opened files are kept: the user's globs, never the system's or an engine's own.
fn files_filter(cfg: &Config) -> anyhow::Result<pipetrace_core::files::Filter> {
    let f = pipetrace_core::files::Filter::new(&cfg.files).context("files.include/exclude")?;
    Ok(f.with_engines(pipetrace_core::attribution::engines::bookkeeping()))
}

/// NVML where NVIDIA's driver is; nothing (and one line in the log) where it is not.
fn gpu_driver(cfg: &pipetrace_config::Gpu) -> Option<Box<dyn pipetrace_host::gpu::Driver>> {
    if !cfg.enabled {
        return None;
    }
    match pipetrace_host::gpu::load(&cfg.library) {
        Ok(d) => Some(d),
        Err(e) => {
            log::info!("no GPU figures: NVML ({}) not usable: {e}", cfg.library);
            None
        }
    }
}
