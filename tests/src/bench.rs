//! What the benchmarks share: the fork/exec storm, timing a command, medians, memory
//! figures, the kernel's own counts of the probes' runs, and bpftrace for comparison.
pub mod bpftrace;
pub mod compare;
pub mod kernel;
pub mod ladder;
pub mod memory;
pub mod sink;

use std::{
    process::{Command, Stdio},
    time::{Duration, Instant},
};

/// `$0` of the storm's shell: the benchmarks' run rule matches it.
pub const STORM_TAG: &str = "pipetrace-storm";

/// A shell loop starting `n` `/bin/true` one after another.
pub fn storm_script(n: usize) -> String {
    format!("i=0; while [ $i -lt {n} ]; do /bin/true; i=$((i+1)); done")
}

pub fn storm(n: usize) -> Command {
    let mut c = Command::new("bash");
    c.args(["-c", &storm_script(n), STORM_TAG]);
    c
}

/// Runs the command to its end, quietly; its wall time. A failure stops the benchmark.
pub fn time(mut c: Command) -> Duration {
    let t = Instant::now();
    let st = c
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run");
    assert!(st.success(), "workload failed: {st:?}");
    t.elapsed()
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
