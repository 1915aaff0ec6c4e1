//! What each task needed of a machine, from its spans' exact figures: the largest job of a
//! task decides, as every job of it must fit the machine chosen for it.
use std::collections::BTreeMap;

use pipetrace_semconv::attr;
use serde::{Deserialize, Serialize};

use pipetrace_core::judgement::Kind;
use pipetrace_core::judgement::ReportSpan;

/// Disk throughput above which a task wants local NVMe even without an io-bound verdict:
/// about what a general-purpose network volume sustains (AWS gp3's baseline is 125 MiB/s).
pub const LOCAL_DISK_ABOVE: f64 = 125.0 * 1048576.0;

/// Task names kept at most, against runaway naming (as the end-of-run table).
const MAX_TASKS: usize = 1000;

/// One task's needs, the largest of its jobs' in each figure.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Need {
    pub jobs: u64,
    /// Wall seconds of all its jobs: what a machine of its own would be paid for.
    pub wall_s: f64,
    /// CPUs it kept busy (CPU time plus the time it waited for a CPU, over wall time).
    pub cpus_used: f64,
    /// CPUs it was given (`pipetrace.cpu.allocated`), where known.
    pub cpus_allocated: Option<f64>,
    pub memory_peak_bytes: u64,
    pub disk_bytes_per_s: f64,
    /// Bytes one job wrote at most: the local disk it needs when it needs one.
    pub disk_written_bytes: u64,
    pub network_bytes_per_s: f64,
    pub gpus: u32,
    pub gpu_memory_peak_bytes: u64,
    /// The bottleneck of most of its wall time.
    pub bottleneck: Option<String>,
    /// Why it needs local NVMe, if it does.
    pub local_disk: Option<String>,
    #[serde(skip)]
    verdicts: BTreeMap<String, f64>,
}

/// Needs per task name, summed as spans come (a run may have many thousands of tasks).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Needs {
    pub tasks: BTreeMap<String, Need>,
    /// The run's wall seconds, when its span was seen.
    pub run_wall_s: Option<f64>,
}

impl Needs {
    pub(crate) fn of(spans: &[ReportSpan]) -> Self {
        let mut n = Self::default();
        for s in spans {
            n.record(s);
        }
        n
    }

    pub fn record(&mut self, s: &ReportSpan) {
        match s.kind {
            Kind::Run => self.run_wall_s = Some(s.secs()),
            Kind::Task => self.record_task(s),
            _ => {}
        }
    }

    fn record_task(&mut self, s: &ReportSpan) {
        let name = s.text(attr::CICD_PIPELINE_TASK_NAME).unwrap_or(&s.name);
        if !self.tasks.contains_key(name) && self.tasks.len() >= MAX_TASKS {
            return;
        }
        let n = self.tasks.entry(name.to_string()).or_default();
        let wall = s.secs();
        // A folded span stands for its repeats, short successful jobs of one task.
        n.jobs += (s.num(attr::FOLD_SPANS) as u64).max(1);
        n.wall_s += wall;
        let per_s = |v: f64| if wall > 0.0 { v / wall } else { 0.0 };
        let busy = per_s(s.cpu() + s.num(attr::CPU_RUN_QUEUE_DELAY));
        n.cpus_used = n.cpus_used.max(busy);
        if let Some(&a) = s.numbers.get(attr::CPU_ALLOCATED) {
            n.cpus_allocated = Some(n.cpus_allocated.unwrap_or(0.0).max(a));
        }
        n.memory_peak_bytes = n.memory_peak_bytes.max(s.num(attr::MEMORY_PEAK) as u64);
        let (read, written) = (s.num(attr::DISK_READ_BYTES), s.num(attr::DISK_WRITE_BYTES));
        let disk = per_s(read + written);
        n.disk_bytes_per_s = n.disk_bytes_per_s.max(disk);
        n.disk_written_bytes = n.disk_written_bytes.max(written as u64);
        let net = s.num(attr::NETWORK_RECEIVE_BYTES) + s.num(attr::NETWORK_TRANSMIT_BYTES);
        n.network_bytes_per_s = n.network_bytes_per_s.max(per_s(net));
        if s.num(attr::GPU_TIME) > 0.0 {
            let held = s.lists.get(attr::GPU_IDS).map_or(0, Vec::len) as u32;
            n.gpus = n.gpus.max(held.max(1));
            n.gpu_memory_peak_bytes =
                (n.gpu_memory_peak_bytes).max(s.num(attr::GPU_MEMORY_PEAK) as u64);
        }
        let verdict = s.text(attr::BOTTLENECK);
        if let Some(b) = verdict {
            *n.verdicts.entry(b.to_string()).or_default() += wall;
            let most = n.verdicts.iter().max_by(|a, b| a.1.total_cmp(b.1));
            n.bottleneck = most.map(|(b, _)| b.clone());
        }
        if verdict == Some("io-bound") {
            n.local_disk = Some("io-bound".into());
        } else if disk >= LOCAL_DISK_ABOVE && n.local_disk.is_none() {
            n.local_disk = Some(format!("{:.0} MiB/s of disk I/O", disk / 1048576.0));
        }
    }
}

impl Need {
    /// vCPUs to ask for: what it kept busy with `headroom` on top, rounded up, at least 1.
    pub(crate) fn vcpus(&self, headroom: f64) -> u32 {
        ((self.cpus_used * (1.0 + headroom) - 1e-9).ceil() as u32).max(1)
    }

    /// GiB of memory to ask for: its peak with `headroom` on top.
    pub(crate) fn memory_gib(&self, headroom: f64) -> f64 {
        self.memory_peak_bytes as f64 * (1.0 + headroom) / GIB
    }

    /// The largest of each figure over `tasks`: a machine that runs them one at a time.
    pub(crate) fn largest<'a>(tasks: impl Iterator<Item = &'a Need>) -> Need {
        let mut m = Need::default();
        for t in tasks {
            m.jobs += t.jobs;
            m.cpus_used = m.cpus_used.max(t.cpus_used);
            m.memory_peak_bytes = m.memory_peak_bytes.max(t.memory_peak_bytes);
            m.disk_bytes_per_s = m.disk_bytes_per_s.max(t.disk_bytes_per_s);
            m.disk_written_bytes = m.disk_written_bytes.max(t.disk_written_bytes);
            m.network_bytes_per_s = m.network_bytes_per_s.max(t.network_bytes_per_s);
            m.gpus = m.gpus.max(t.gpus);
            m.gpu_memory_peak_bytes = m.gpu_memory_peak_bytes.max(t.gpu_memory_peak_bytes);
            m.local_disk = m.local_disk.clone().or_else(|| t.local_disk.clone());
        }
        m
    }
}

pub const GIB: f64 = 1024.0 * 1048576.0;
