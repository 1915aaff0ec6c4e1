//! Verdicts from the kernel's figures: what held a tool or task back (its bottleneck),
//! whether a task asked for much more than it used (rightsizing), and whether it stopped
//! making progress (stalls).
mod bottleneck;
mod history;
mod rightsizing;
mod stalls;
pub mod watch;

pub use bottleneck::{Kind as BottleneckKind, judge as bottleneck, mostly_quiet};
pub use history::{
    Against, History, Job, Kept as HistoryKept, MIN_RUNS, RunFigures, median,
    read_all as read_history,
};
pub use rightsizing::{gpus as gpu_rightsizing, judge as rightsizing};
pub use stalls::{Stall, Stalls};

/// Diagnosis's verdicts on one finished tool or task, beside attribution's record of it:
/// what the live sampler saw while it ran and what its history says of its time.
#[derive(Clone, Debug, Default)]
pub struct Judgement {
    /// Periods without progress while it ran.
    pub stalls: Vec<Stall>,
    /// How long it made no progress in all, stall or not (ns).
    pub quiet_ns: u64,
    /// A task against its usual, where its history has one (slower or not).
    pub usual: Option<Against>,
}

pub fn gib(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= 1024.0 * 1048576.0 {
        format!("{:.1} GiB", b / (1024.0 * 1048576.0))
    } else {
        format!("{:.0} MiB", b / 1048576.0)
    }
}
