//! Roll-ups: a task's or run's processes summed, and its peak memory.
//!
//! Peak memory of a task is the highest sum, at any moment, of the kernel high-water marks
//! of the processes alive at that moment. Each process counts with its own peak over its
//! whole life, so the figure never falls below the true simultaneous peak and exceeds it only
//! when processes peaked at different times: a safe figure to size a memory request by. A run
//! counts each finished task as one interval weighted by the task's peak.
use std::collections::BTreeMap;

use super::Usage;

/// Intervals kept before older ones are folded into one (bounded memory for huge tasks).
const MAX_INTERVALS: usize = 16_384;

#[derive(Clone, Debug, Default)]
pub struct Rollup {
    /// Counters summed over processes (the memory fields are the single largest).
    pub totals: Usage,
    pub processes: u64,
    /// Processes whose usage the kernel never reported (not reaped in time).
    pub missing: u64,
    /// Processes whose figures were taken at exit (no reap-time report came).
    pub at_exit: u64,
    /// Processes the OOM killer ended.
    pub oom_kills: u64,
    /// Per tool name, for the metrics.
    pub by_tool: BTreeMap<String, Usage>,
    /// (start, end, peak bytes) of each process or sub-rollup.
    intervals: Vec<(u64, u64, u64)>,
    /// Its own processes (not those of sub-rollups) by the container they ran in.
    pub containers: Box<super::ByContainer>,
    /// What its own processes (not those of sub-rollups) opened (`files.enabled`).
    pub files: crate::files::Files,
}

/// The CPUs a task could use, and where that figure came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Allocation {
    pub cpus: f64,
    /// `engine.threads`, `cgroup.cpu.max`, `cpuset` or `host`.
    pub source: &'static str,
    /// The memory limit of its cgroup, if any.
    pub memory_limit: Option<u64>,
    /// CPUs online on the host then: more CPU time than these allow is a broken figure.
    pub host_cpus: u32,
    /// GPUs its devices cgroup allows (bit N: /dev/nvidiaN), where it restricts them.
    pub gpus: Option<u64>,
}

impl Rollup {
    pub fn add_process(&mut self, start_ns: u64, end_ns: u64, tool: &str, usage: Option<&Usage>) {
        self.processes += 1;
        let Some(u) = usage else {
            self.missing += 1;
            return;
        };
        self.at_exit += u64::from(u.at_exit);
        self.totals.add(u);
        self.by_tool.entry(tool.to_string()).or_default().add(u);
        self.push(start_ns, end_ns, u.peak_bytes());
    }

    /// Adds a finished task: its totals, and its peak as one interval.
    pub(crate) fn add_rollup(&mut self, start_ns: u64, end_ns: u64, other: &Rollup) {
        self.totals.add(&other.totals);
        self.processes += other.processes;
        self.missing += other.missing;
        self.at_exit += other.at_exit;
        self.oom_kills += other.oom_kills;
        for (tool, u) in &other.by_tool {
            self.by_tool.entry(tool.clone()).or_default().add(u);
        }
        self.push(start_ns, end_ns, other.peak_memory());
    }

    fn push(&mut self, start: u64, end: u64, peak: u64) {
        if self.intervals.len() >= MAX_INTERVALS {
            // Fold what is kept into one interval with its peak: an over-estimate, never less.
            let peak = self.peak_memory();
            let lo = self.intervals.iter().map(|i| i.0).min().unwrap_or(start);
            let hi = self.intervals.iter().map(|i| i.1).max().unwrap_or(end);
            self.intervals.clear();
            self.intervals.push((lo, hi, peak));
        }
        self.intervals.push((start, end.max(start), peak));
    }

    /// The highest sum of peaks over processes alive at the same moment.
    pub fn peak_memory(&self) -> u64 {
        let mut edges: Vec<(u64, bool, u64)> = Vec::with_capacity(self.intervals.len() * 2);
        for &(s, e, p) in &self.intervals {
            edges.push((s, true, p));
            edges.push((e, false, p));
        }
        // At equal times, ends before starts: a process replaced by its successor (exec,
        // sequential steps) does not count twice.
        edges.sort_by_key(|&(t, start, _)| (t, start));
        let (mut now, mut peak) = (0u64, 0u64);
        for (_, start, p) in edges {
            if start {
                now += p;
                peak = peak.max(now);
            } else {
                now = now.saturating_sub(p);
            }
        }
        peak
    }

    /// CPU time over (wall time x CPUs allowed), 0..1 for a task held to its allocation
    /// (above 1 only where the allocation is a request nothing enforces, `engine.threads`).
    /// None when the CPU time does not fit in the wall time times the host's CPUs
    /// (`host_cpus`): no task can use more, so such a figure is not shown.
    pub fn cpu_utilization(&self, wall_ns: u64, alloc: &Allocation) -> Option<f64> {
        let host_cpus = alloc.host_cpus;
        let cpu = self.totals.cpu_ns() as f64;
        // A millisecond of slack: a process's CPU time includes its last moments after exit.
        let possible = cpu <= (wall_ns as f64 + 1e6) * f64::from(host_cpus.max(1));
        (wall_ns > 0 && alloc.cpus > 0.0 && possible).then(|| cpu / (wall_ns as f64 * alloc.cpus))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_peak(bytes: u64) -> Usage {
        Usage {
            maxrss_bytes: bytes,
            cpu_user_ns: 10,
            ..Default::default()
        }
    }

    #[test]
    fn peak_sums_only_overlapping_processes() {
        let mut r = Rollup::default();
        r.add_process(0, 100, "bash", Some(&with_peak(5)));
        r.add_process(10, 20, "bwa", Some(&with_peak(100)));
        r.add_process(15, 30, "samtools", Some(&with_peak(40)));
        // Sequential: starts when samtools ends.
        r.add_process(30, 40, "sort", Some(&with_peak(120)));
        assert_eq!(r.peak_memory(), 145);
        assert_eq!(r.totals.cpu_ns(), 40);
        assert_eq!(r.by_tool.len(), 4);
        r.add_process(50, 60, "lost", None);
        assert_eq!((r.processes, r.missing), (5, 1));
    }

    #[test]
    fn folding_keeps_a_bound_that_is_never_low() {
        let mut r = Rollup::default();
        for i in 0..(MAX_INTERVALS as u64 + 10) {
            r.add_process(i * 10, i * 10 + 5, "t", Some(&with_peak(7)));
        }
        assert!(r.intervals.len() < MAX_INTERVALS);
        assert!(r.peak_memory() >= 7);
        assert!(r.peak_memory() <= 14);
    }

    #[test]
    fn utilization_is_cpu_over_wall_times_cpus() {
        let mut r = Rollup::default();
        let u = Usage {
            cpu_user_ns: 3_000,
            cpu_system_ns: 1_000,
            ..Default::default()
        };
        r.add_process(0, 1_000, "x", Some(&u));
        let a = Allocation {
            cpus: 4.0,
            source: "host",
            memory_limit: None,
            host_cpus: 4,
            gpus: None,
        };
        assert_eq!(r.cpu_utilization(1_000, &a), Some(1.0));
        assert_eq!(r.cpu_utilization(0, &a), None);
        // 10 s of CPU in 1 s on a 2-CPU host: impossible, not shown.
        let mut r = Rollup::default();
        let u = Usage {
            cpu_user_ns: 10_000_000_000,
            ..Default::default()
        };
        r.add_process(0, 1_000_000_000, "x", Some(&u));
        let on = |host_cpus| Allocation { host_cpus, ..a };
        assert_eq!(r.cpu_utilization(1_000_000_000, &on(2)), None);
        assert!(r.cpu_utilization(1_000_000_000, &on(16)).is_some());
    }
}
