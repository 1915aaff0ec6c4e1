//! Per-process GPU use from NVIDIA's driver (NVML, loaded at run time when present): which
//! GPUs each process of a run holds a context on, its GPU memory now and at its highest,
//! and its share of the driver's per-process utilisation samples, read since the last look
//! so none is missed or counted twice. A GPU is looked at only while a run's process holds
//! a context on it (its process list says so); no device setting is ever changed.
mod nvml;
mod sampler;
#[cfg(test)]
mod tests;

use std::sync::OnceLock;

pub use nvml::load;
pub use sampler::{DeviceNow, GpuSampler};

/// One GPU as the driver names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gpu {
    /// NVML's index.
    pub index: u32,
    pub uuid: String,
    pub name: String,
    /// Its device file's minor number (/dev/nvidiaN), as a devices cgroup names it.
    pub minor: Option<u32>,
}

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

/// A device's own figures, each absent where the device does not report it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeviceFigures {
    /// Percent of the last period any kernel ran, and the memory controller was busy.
    pub utilization: Option<u32>,
    pub memory_utilization: Option<u32>,
    pub memory_used_bytes: Option<u64>,
    pub memory_total_bytes: Option<u64>,
    pub power_watts: Option<f64>,
    pub temperature_celsius: Option<u32>,
    pub sm_clock_mhz: Option<u32>,
    /// Why its clocks are held down now (NVML's reasons, by name).
    pub throttle_reasons: Vec<&'static str>,
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

/// The node's GPUs as found at start: a host fact spans name their GPUs by.
static INVENTORY: OnceLock<Vec<Gpu>> = OnceLock::new();

pub fn inventory() -> &'static [Gpu] {
    INVENTORY.get().map(Vec::as_slice).unwrap_or(&[])
}

/// The NVML indices of the GPUs whose device minors are in `minors` (bit N: /dev/nvidiaN);
/// a GPU whose minor is unknown is taken to have its index as minor.
pub fn indices_of_minors(minors: u64) -> u64 {
    let by_minor = |g: &Gpu| g.minor.unwrap_or(g.index);
    match inventory() {
        [] => minors,
        gpus => (gpus.iter())
            .filter(|g| by_minor(g) < 64 && minors & (1 << by_minor(g)) != 0)
            .fold(0, |m, g| m | 1u64.checked_shl(g.index).unwrap_or(0)),
    }
}

fn set_inventory(gpus: &[Gpu]) {
    let _ = INVENTORY.set(gpus.to_vec());
}
