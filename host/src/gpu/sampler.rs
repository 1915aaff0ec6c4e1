//! The sampler the metrics tick drives: each GPU a run's process holds a context on is
//! looked at, its processes' figures kept until they end.
use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::{DeviceNow, Driver, Gpu, GpuInventory};
use pipetrace_core::accounting::GpuFigures;

/// One process's figures while it runs: the totals, and its memory per GPU now.
#[derive(Default)]
struct Running {
    figures: GpuFigures,
    memory_now: BTreeMap<u32, u64>,
}

pub struct GpuSampler {
    driver: Box<dyn Driver>,
    gpus: Vec<Gpu>,
    /// Per GPU: the newest sample taken, and when it was last looked at (µs).
    newest: HashMap<u32, u64>,
    looked: HashMap<u32, u64>,
    /// GPUs that stopped answering (fell off the bus): left alone from then on.
    lost: BTreeSet<u32>,
    running: HashMap<u32, Running>,
    /// The GPUs in use by a run at the last look.
    pub devices: Vec<DeviceNow>,
    /// Looks the driver refused (a GPU lost, a call failed): counted, and exported.
    pub errors: u64,
}

impl GpuSampler {
    #[cfg(test)]
    pub(crate) fn gpus(&self) -> &[Gpu] {
        &self.gpus
    }

    /// The sampler of the GPUs `driver` lists, which it sets `inventory` to.
    pub fn new(
        mut driver: Box<dyn Driver>,
        inventory: &GpuInventory,
    ) -> Result<Self, super::DriverError> {
        let gpus = driver.gpus()?;
        inventory.set(&gpus);
        Ok(Self {
            driver,
            gpus,
            newest: HashMap::new(),
            looked: HashMap::new(),
            lost: BTreeSet::new(),
            running: HashMap::new(),
            devices: Vec::new(),
            errors: 0,
        })
    }

    /// Looks at every GPU: `ours` says whether a pid is a process of a run. `now_us`:
    /// the wall clock; `interval_us`: the time since the previous look.
    pub fn tick(&mut self, ours: &dyn Fn(u32) -> bool, now_us: u64, interval_us: u64) {
        self.devices.clear();
        for gpu in self.gpus.clone() {
            if self.lost.contains(&gpu.index) {
                continue;
            }
            if let Err(e) = self.look(&gpu, ours, now_us, interval_us) {
                log::warn!(
                    "GPU {} ({}) stopped answering ({e}): its processes keep the figures \
                     taken so far",
                    gpu.index,
                    gpu.name
                );
                self.errors += 1;
                self.lost.insert(gpu.index);
            }
        }
    }

    fn look(
        &mut self,
        gpu: &Gpu,
        ours: &dyn Fn(u32) -> bool,
        now_us: u64,
        interval_us: u64,
    ) -> Result<(), super::DriverError> {
        let i = gpu.index;
        let since = self.looked.insert(i, now_us);
        let window = since.map_or(interval_us, |s| now_us.saturating_sub(s));
        let on: Vec<(u32, Option<u64>)> = (self.driver.processes(i)?.into_iter())
            .filter(|(pid, _)| ours(*pid))
            .collect();
        if on.is_empty() {
            // Nothing of a run on it: no samples read (the next look starts here).
            self.newest.insert(i, now_us);
            return Ok(());
        }
        let newest = self.newest.get(&i).copied().unwrap_or(0);
        let mut samples = self.driver.samples(i, newest)?;
        samples.sort_by_key(|s| s.time_us);
        let start = if newest > 0 {
            newest
        } else {
            now_us.saturating_sub(window)
        };
        // Each sample stands for the time since the one before it (on this GPU). Those
        // the driver stamped after this look's time wait for the next look, whose window
        // holds their time: busy and on-GPU time are then on one clock, however late the
        // driver answers under load.
        let mut busy: HashMap<u32, (u64, u64)> = HashMap::new();
        let mut prev = start;
        let counted = samples
            .iter()
            .filter(|s| s.time_us > start && s.time_us <= now_us);
        for s in counted {
            let period = s.time_us.saturating_sub(prev).min(window);
            let b = busy.entry(s.pid).or_default();
            b.0 += period * u64::from(s.sm.min(100)) / 100;
            b.1 += period * u64::from(s.memory.min(100)) / 100;
            if s.time_us > prev {
                prev = s.time_us;
            }
        }
        if prev > newest {
            self.newest.insert(i, prev);
        }
        // A process that left this GPU holds none of its memory any more.
        for (pid, r) in self.running.iter_mut() {
            if !on.iter().any(|(p, _)| p == pid)
                && let Some(m) = r.memory_now.get_mut(&i)
            {
                *m = 0;
            }
        }
        for (pid, bytes) in on {
            let r = self.running.entry(pid).or_default();
            r.figures.devices |= 1u64.checked_shl(i).unwrap_or(0);
            r.figures.on_gpu_us += window;
            let (sm, mem) = busy.get(&pid).copied().unwrap_or_default();
            // Busy at most all its time so far: a look's samples may stand for some of the
            // window before it, so the bound is on the sum, not on each look's share.
            let f = &mut r.figures;
            f.sm_busy_us = (f.sm_busy_us + sm).min(f.on_gpu_us);
            f.memory_busy_us = (f.memory_busy_us + mem).min(f.on_gpu_us);
            r.memory_now.insert(i, bytes.unwrap_or(0));
            let total: u64 = r.memory_now.values().sum();
            r.figures.memory_peak_bytes = r.figures.memory_peak_bytes.max(total);
        }
        let figures = self.driver.figures(i);
        self.devices.push(DeviceNow {
            gpu: gpu.clone(),
            figures,
        });
        Ok(())
    }

    /// A process's figures, once it has ended (nothing if it never held a GPU).
    pub fn take(&mut self, pid: u32) -> Option<GpuFigures> {
        self.running.remove(&pid).map(|r| r.figures)
    }

    /// Running processes holding GPU memory now: (pid, bytes over their GPUs).
    pub fn holding(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        (self.running.iter())
            .map(|(pid, r)| (*pid, r.memory_now.values().sum::<u64>()))
            .filter(|(_, b)| *b > 0)
    }

    /// What a running process holds now: its GPU memory, and its figures so far.
    pub fn now(&self, pid: u32) -> Option<(u64, GpuFigures)> {
        let r = self.running.get(&pid)?;
        Some((r.memory_now.values().sum(), r.figures))
    }
}
