//! `pipetrace agent`: watch the host; every pipeline that starts here becomes a trace.
use std::{path::PathBuf, time::Duration};

use anyhow::Context;
use pipetrace_config::Config;
use tokio::signal::unix::{SignalKind, signal};

use super::serve::Core;
use crate::{
    assembly::{For, Prepared, assemble, prepare},
    pipeline::Pipeline,
    registry::{AgentLock, AgentStatus},
};
use pipetrace_host::source::KernelLosses;

/// Where the one-agent lock lives when no state directory is configured.
const RUNTIME_DIR: &str = "/run/pipetrace";

/// The agent's figures in its log, every minute.
fn log_figures(pipe: &Pipeline, lost: KernelLosses) {
    let f = pipe.agent_figures(lost);
    log::info!(
        "{} events, {} processes known, {} in runs; lost {} kernel events and {} updates of \
         per-process sums, dropped {} spans, {} failed, {} spooled; metric exports {} dropped, \
         {} failed, {} spooled; {} export retries, {} bytes queued",
        pipe.events(),
        f.processes_known,
        f.processes_tracked,
        f.lost_events,
        f.accumulator_lost,
        f.spans_dropped,
        f.export_failures,
        f.spans_spooled,
        f.metric_exports_dropped,
        f.metric_exports_failed,
        f.metric_exports_spooled,
        f.export_retries,
        f.export_queue_bytes
    );
}

pub(crate) async fn run(cfg: &Config) -> anyhow::Result<i32> {
    // The probes' PIDs are the host's: in a PID namespace of its own the agent would load
    // them and trace nothing. Refused before anything is loaded, saying how to run it.
    pipetrace_host::pidns::check()?;
    // One agent per state directory (per node with the default): refused before anything
    // is loaded or exported.
    let lock_dir = (cfg.diagnosis.state_dir.clone()).unwrap_or_else(|| PathBuf::from(RUNTIME_DIR));
    let _lock = match AgentLock::take(&lock_dir) {
        Ok(lock) => Some(lock),
        Err(e @ crate::registry::LockError::Held { .. }) => return Err(e.into()),
        // A read-only or unwritable state directory (the /proc fallback without privileges):
        // it runs, unguarded, as before.
        Err(e) => {
            log::warn!("{e}; running without the one-agent guard");
            None
        }
    };
    // A taken port starts nothing: bound before the probes load.
    let prometheus = pipetrace_export::export::prometheus::Bound::bind(&cfg.metrics.prometheus)?;
    let Prepared {
        host,
        events,
        taps,
        builder,
    } = prepare(cfg)?;
    let default_file = PathBuf::from(pipetrace_config::defaults::AGENT_TRACE_FILE);
    let exporter = pipetrace_export::export::Sink::start(cfg, &host, default_file)?;
    let dest = exporter.destinations.spans.clone();
    let target = (dest.otlp.clone())
        .or(dest.file.as_ref().map(|f| f.display().to_string()))
        .unwrap_or_default();
    let built = (&host, builder, events.is_polling());
    let mut pipe = assemble(cfg, For::Agent, built, (exporter, prometheus))?;
    pipe.seed();
    // Before saying it watches: a stop that comes right after must find the handlers.
    let mut term = signal(SignalKind::terminate()).context("installing SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing SIGINT handler")?;
    let scope = match crate::scope::resolve(cfg.probes.scope_cgroup.as_deref())? {
        Some(cg) => format!(" in cgroup {cg}"),
        None => String::new(),
    };
    let mode = if events.is_polling() {
        "procfs"
    } else {
        "ebpf"
    };
    // Registered before it says it watches: `pipetrace status` right after finds it.
    let f = pipe.agent_figures(KernelLosses::default());
    let state_dir = cfg.diagnosis.state_dir.as_deref();
    publish(&AgentStatus::new(mode, target.clone(), f), state_dir);
    log::warn!(
        "pipetrace agent watching {} processes{scope} ({} in runs); exporting to {target}",
        f.processes_known,
        f.processes_tracked,
    );
    let mut core = Core::new(pipe, events, &taps, cfg, Duration::from_millis(250));
    let stop = async {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    };
    serve_until(&mut core, stop, (mode, target), state_dir).await?;
    AgentStatus::unregister();
    // Records may wait up to a tick without waking us: take them before stopping.
    core.drain_now();
    core.pipe.poll(true);
    core.export_metrics();
    let lost = taps.losses();
    let Core { pipe, .. } = core;
    stop_and_say(cfg, pipe, lost).await;
    Ok(0)
}

/// The status others read, in the node's registry and the state directory.
fn publish(status: &AgentStatus, state_dir: Option<&std::path::Path>) {
    status.register(state_dir);
    if let Some(dir) = state_dir
        && let Err(e) = status.write(dir)
    {
        log::debug!("cannot write the agent status to {}: {e}", dir.display());
    }
}

/// Serves the node until `stop`: every 2 s the status others read (`pipetrace status`,
/// `top`), every minute the agent's own figures in its log.
async fn serve_until(
    core: &mut Core<'_>,
    stop: impl std::future::Future<Output = ()>,
    (mode, target): (&'static str, String),
    state_dir: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    let mut tick = tokio::time::interval(Duration::from_secs(60));
    let mut status_tick = tokio::time::interval(Duration::from_secs(2));
    let mut watcher = crate::live_view::Watcher::default();
    tokio::pin!(stop);
    loop {
        let next = core.serve(async {
            tokio::select! {
                _ = status_tick.tick() => Some(true),
                _ = tick.tick() => Some(false),
                _ = &mut stop => None,
            }
        });
        let next = next.await?;
        let lost = core.taps.losses();
        match next {
            Some(true) => {
                let pipe = &mut core.pipe;
                if crate::registry::runs_wanted() {
                    crate::registry::write_runs(&pipe.live_now(&mut watcher));
                }
                let status = AgentStatus::new(mode, target.clone(), pipe.agent_figures(lost));
                publish(&status, state_dir);
            }
            Some(false) => log_figures(&core.pipe, lost),
            None => return Ok(()),
        }
    }
}

/// Sends what is left and says what the agent did and lost.
async fn stop_and_say(cfg: &Config, pipe: Pipeline, lost: KernelLosses) {
    let (events, f) = (pipe.events(), pipe.agent_figures(lost));
    let (bad, usage_missing, overflowed) = (f.undecodable, f.usage_missing, f.series_overflowed);
    let at_exit = f.usage_at_exit;
    let (exporter, _) = pipe.end();
    let stats = exporter.stats();
    let flushed = exporter.shutdown(cfg.export.flush_timeout).await;
    if usage_missing > 0 || overflowed > 0 {
        log::warn!(
            "{usage_missing} processes ended with no resource figures (their exit record was \
             lost); {overflowed} metric attribute sets went to the overflow series"
        );
    }
    use std::sync::atomic::Ordering::Relaxed;
    log::warn!(
        "pipetrace agent stopped: {events} events, {} kernel events lost, {} updates of \
         per-process sums lost, {bad} undecodable, {usage_missing} processes without figures, \
         {at_exit} with figures from exit, \
         {} spans queued, \
         {} dropped (queue full), {} OTLP failures; metric exports {} dropped, {} failed; \
         peak RSS {} KiB, private {} KiB{}",
        lost.events,
        lost.accumulator_updates,
        stats.spans.queued.load(Relaxed),
        stats.spans.dropped(),
        stats.spans.otlp.failed.load(Relaxed),
        stats.metrics.dropped(),
        stats.metrics.failed(),
        pipetrace_host::peak_rss_kib().unwrap_or(0),
        pipetrace_host::private_rss_kib().unwrap_or(0),
        if flushed { "" } else { "; flush timed out" }
    );
}
