//! A process's GPU use, as the NVIDIA driver reports it per process: which GPUs it held a
//! context on, its GPU memory at its highest, and its time on them, busy and not.

/// Summed over a roll-up: devices joined, peaks the largest, times added.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpuFigures {
    /// Bit i: the GPU of NVML index i (the first 64).
    pub devices: u64,
    /// GPU memory it held at its highest, over its GPUs together (bytes).
    pub memory_peak_bytes: u64,
    /// Time it held a context, summed over its GPUs (microseconds).
    pub on_gpu_us: u64,
    /// Of that, the time its kernels kept the streaming multiprocessors busy, and the
    /// memory controller (the driver's per-process percentages times their periods).
    pub sm_busy_us: u64,
    pub memory_busy_us: u64,
}

impl GpuFigures {
    pub fn used(&self) -> bool {
        self.devices != 0
    }

    pub fn add(&mut self, o: &GpuFigures) {
        self.devices |= o.devices;
        self.memory_peak_bytes = self.memory_peak_bytes.max(o.memory_peak_bytes);
        self.on_gpu_us += o.on_gpu_us;
        self.sm_busy_us += o.sm_busy_us;
        self.memory_busy_us += o.memory_busy_us;
    }

    /// Time-weighted SM utilisation over its time on its GPUs, 0 to 1.
    pub fn sm_utilization(&self) -> Option<f64> {
        ratio(self.sm_busy_us, self.on_gpu_us)
    }

    pub fn memory_utilization(&self) -> Option<f64> {
        ratio(self.memory_busy_us, self.on_gpu_us)
    }

    /// NVML indices of its GPUs.
    pub fn indices(&self) -> impl Iterator<Item = u32> + '_ {
        (0..64).filter(|i| self.devices & (1 << i) != 0)
    }
}

fn ratio(busy: u64, of: u64) -> Option<f64> {
    (of > 0).then(|| (busy as f64 / of as f64).min(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rollup_joins_devices_keeps_the_peak_and_weighs_utilisation_by_time() {
        let busy = GpuFigures {
            devices: 0b01,
            memory_peak_bytes: 8 << 30,
            on_gpu_us: 10_000_000,
            sm_busy_us: 9_000_000,
            memory_busy_us: 4_000_000,
        };
        let idle = GpuFigures {
            devices: 0b10,
            memory_peak_bytes: 1 << 30,
            on_gpu_us: 30_000_000,
            ..Default::default()
        };
        assert_eq!(busy.sm_utilization(), Some(0.9));
        assert_eq!(idle.sm_utilization(), Some(0.0));
        let mut both = busy;
        both.add(&idle);
        assert_eq!(both.indices().collect::<Vec<_>>(), [0, 1]);
        assert_eq!(both.memory_peak_bytes, 8 << 30);
        assert_eq!(both.sm_utilization(), Some(9.0 / 40.0));
        assert_eq!(GpuFigures::default().sm_utilization(), None);
    }
}
