//! The pipeline's GPU sampler and the runs' progress: what the metrics tick adds beside the
//! processes' own figures.
use std::time::Duration;

use super::Session;

impl Session {
    /// Samples GPUs through `driver` (NVML): per-process figures on the spans, live metrics.
    /// The GPUs found go to `inventory`, which span building names them by.
    pub(crate) fn with_gpu(
        mut self,
        driver: Option<Box<dyn pipetrace_host::gpu::Driver>>,
        interval: Duration,
        inventory: &pipetrace_core::machine::GpuInventory,
    ) -> Self {
        self.gpu_interval_us = interval.as_micros() as u64;
        self.gpu = driver.and_then(
            |d| match pipetrace_host::gpu::GpuSampler::new(d, inventory) {
                Ok(s) => Some(s),
                Err(e) => {
                    log::warn!("NVML answers but lists no GPU ({e}): GPU figures off");
                    None
                }
            },
        );
        self
    }

    /// Looks at the GPUs a run's process holds a context on.
    pub(super) fn sample_gpus(&mut self) {
        let Some(gpu) = self.gpu.as_mut() else { return };
        let (tree, attr) = (&self.tree, &self.attr);
        let ours = |pid: u32| (tree.by_pid(pid)).is_some_and(|p| attr.membership(&p.key).is_some());
        let now_us = (self.host.now())
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        gpu.tick(&ours, now_us, self.gpu_interval_us);
    }

    /// How far each run is whose engine says: done, in all, running now.
    pub fn progress(&mut self) -> Vec<pipetrace_export::signals::metrics::progress::Progress> {
        let (running, _) = self.stalls.counts();
        (self.attr.progress().into_iter())
            .map(|(_, pipeline, p)| {
                let seen = (running.iter())
                    .filter(|((name, _), _)| *name == pipeline)
                    .map(|(_, n)| *n as u32)
                    .sum();
                pipetrace_export::signals::metrics::progress::Progress {
                    pipeline,
                    done: p.done,
                    total: p.total,
                    running: p.running().unwrap_or(seen),
                    waiting: p.queued,
                }
            })
            .collect()
    }

    /// GPU memory each series holds now, and the GPUs the runs used at the last look.
    pub(super) fn gpu_metrics(&self) -> Vec<opentelemetry_proto::tonic::metrics::v1::Metric> {
        let Some(gpu) = self.gpu.as_ref() else {
            return Vec::new();
        };
        let mut held = std::collections::BTreeMap::new();
        for (pid, bytes) in gpu.holding() {
            let series = (self.tree.by_pid(pid)).and_then(|p| self.metrics.series_of(&p.key));
            if let Some(k) = series {
                *held.entry(k.clone()).or_insert(0) += bytes;
            }
        }
        pipetrace_export::signals::metrics::gpu::metrics(&held, &gpu.devices, self.host.now())
    }
}
