//! Resource accounting: per-process kernel usage, and its roll-up into tasks and runs.
mod by_container;
mod gpu;
mod rollup;
mod usage;

/// Usage of a process still running: the host reads it (`Host::live`), so it lives there.
pub mod live {
    pub use crate::port::RunningUsage;
}

pub use by_container::{ByContainer, ContainerPart};
pub use gpu::GpuFigures;
pub use rollup::{Allocation, Rollup};
pub use usage::{
    CpuTimes, IMPOSSIBLE_BLKIO, IMPOSSIBLE_MEMORY, IMPOSSIBLE_RUN_QUEUE, Switches, Usage,
};

/// Which counters this kernel and these probes measure; the rest are left out of exports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Measured {
    /// sock tracepoints attached.
    pub network: bool,
    /// Delay accounting on: memory waits.
    pub delay_accounting: bool,
    /// sched_switch and sched_wakeup attached: block-I/O waits.
    pub io_wait: bool,
}
