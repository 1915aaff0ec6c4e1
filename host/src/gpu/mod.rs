//! Per-process GPU use from NVIDIA's driver (NVML, loaded at run time when present): which
//! GPUs each process of a run holds a context on, its GPU memory now and at its highest,
//! and its share of the driver's per-process utilisation samples, read since the last look
//! so none is missed or counted twice. A GPU is looked at only while a run's process holds
//! a context on it (its process list says so); no device setting is ever changed.
mod nvml;
mod sampler;
#[cfg(test)]
mod tests;

pub use nvml::load;
use pipetrace_core::machine::{DeviceFigures, DeviceNow, Gpu, GpuInventory};
pub use sampler::GpuSampler;

/// One of the driver's per-process utilisation samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    pub pid: u32,
    /// Microseconds since the epoch.
    pub time_us: u64,
    /// Percent of the period its kernels ran on the SMs, and used the memory controller.
    pub sm: u32,
    pub memory: u32,
}

/// Why a GPU could not be looked at.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DriverError(pub String);

/// The driver, as the sampler asks it (NVML, or a script in the tests).
pub trait Driver: Send {
    fn gpus(&mut self) -> Result<Vec<Gpu>, DriverError>;
    /// Processes with a compute or graphics context on GPU `index`: (pid, GPU memory bytes).
    fn processes(&mut self, index: u32) -> Result<Vec<(u32, Option<u64>)>, DriverError>;
    /// Utilisation samples newer than `since_us` (0: whatever the driver still holds).
    fn samples(&mut self, index: u32, since_us: u64) -> Result<Vec<Sample>, DriverError>;
    fn figures(&mut self, index: u32) -> DeviceFigures;
}
