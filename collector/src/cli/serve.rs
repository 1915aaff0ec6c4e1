//! The event loop `run` and `agent` share: kernel events into the pipeline, its polls and
//! memory limit, and the metrics ticks. Each mode waits on its own occasions beside them (a
//! terminal redraw and the command's end; the agent's status, log and stop signals), which
//! [`Core::serve`] hands back.
use std::{future::Future, time::Duration};

use anyhow::Context;

use crate::pipeline::Pipeline;
use pipetrace_core::event::Event;
use pipetrace_host::source::{Events, ProbeState};

/// The pipeline with its source and sinks, and the ticks common to both modes.
pub(super) struct Core<'a> {
    pub pipe: Pipeline,
    pub events: Events,
    pub buf: Vec<Event>,
    pub taps: &'a ProbeState,
    memory_limit: u64,
    poll: tokio::time::Interval,
    metrics: tokio::time::Interval,
}

impl<'a> Core<'a> {
    /// `poll`: how often waiting names are looked for; `metrics`: `metrics.interval`.
    pub(crate) fn new(
        pipe: Pipeline,
        events: Events,
        taps: &'a ProbeState,
        cfg: &pipetrace_config::Config,
        poll: Duration,
    ) -> Self {
        Self {
            pipe,
            events,
            buf: Vec::new(),
            taps,
            memory_limit: cfg.export.memory_limit.as_u64(),
            poll: tokio::time::interval(poll),
            metrics: tokio::time::interval(cfg.metrics.interval),
        }
    }

    /// Serves events, polls and metrics until `until` is ready, and returns what it gave.
    pub(crate) async fn serve<T>(&mut self, until: impl Future<Output = T>) -> anyhow::Result<T> {
        tokio::pin!(until);
        loop {
            tokio::select! {
                r = self.events.next_batch(&mut self.buf) => {
                    let bad = r.context("reading kernel events")?;
                    self.pipe.ingest(&mut self.buf, bad);
                }
                _ = self.poll.tick() => {
                    self.pipe.poll(false);
                    self.pipe.enforce_memory_limit(self.memory_limit);
                }
                // Samples for stalls even when metrics are off; exports only when on.
                _ = self.metrics.tick() => self.export_metrics(),
                out = &mut until => return Ok(out),
            }
        }
    }

    /// Samples what runs (stalls, live figures) and sends the metrics, if on.
    pub(crate) fn export_metrics(&mut self) {
        let taps = self.taps;
        let net = move |pid| taps.accumulated(pid);
        let lost = taps.losses();
        self.pipe.tick(&net, lost);
    }

    /// What is queued now, taken without waiting.
    pub fn drain_now(&mut self) {
        let bad = self.events.drain_now(&mut self.buf);
        self.pipe.ingest(&mut self.buf, bad);
    }
}
