//! The configuration model. Every struct denies unknown keys: a typo is an error, not a no-op.
use std::{collections::BTreeMap, path::PathBuf, time::Duration};

use serde::{Deserialize, Serialize};

use crate::export::Export;

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// OTel `service.name` of the exported resource (OTEL_SERVICE_NAME).
    pub service_name: Option<String>,
    /// Extra resource attributes (OTEL_RESOURCE_ATTRIBUTES).
    pub resource_attributes: BTreeMap<String, String>,
    pub probes: Probes,
    pub export: Export,
    pub attribution: Attribution,
    pub redaction: Redaction,
    pub summary: Summary,
    pub metrics: Metrics,
    pub diagnosis: Diagnosis,
    pub cost: Cost,
    pub report: Report,
    pub sizing: Sizing,
    pub host: Host,
    pub files: Files,
    pub gpu: Gpu,
    pub self_telemetry: SelfTelemetry,
    /// The scheduling policy of pipetrace's own threads.
    pub cpu_policy: CpuPolicy,
}

/// Per-process GPU figures from NVIDIA's driver (NVML), where it is installed.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Gpu {
    /// Look for NVML at start; without it (no NVIDIA driver) nothing changes.
    pub enabled: bool,
    /// The NVML library: a name the loader searches for, or a path.
    pub library: String,
}

impl Default for Gpu {
    fn default() -> Self {
        Self {
            enabled: true,
            library: "libnvidia-ml.so.1".into(),
        }
    }
}

/// How pipetrace's own threads share the CPUs with the work they watch.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum CpuPolicy {
    /// SCHED_BATCH: the same fair share of CPU, but waking up never preempts a running
    /// process: the agent catches up when a CPU is free, and the ring buffer holds the
    /// events meanwhile. Applied only when pipetrace starts with the default policy.
    #[default]
    Batch,
    /// SCHED_OTHER, as started: woken, it may preempt the pipeline's processes.
    Normal,
}

/// pipetrace's own work as telemetry of its own, beside the pipelines'.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SelfTelemetry {
    /// Export the agent's own spans (probe attach, each OTLP export attempt and retry, spool
    /// replays) over the traces endpoint's connection, as service and scope
    /// `pipetrace.self`: never in a pipeline's trace, never to the trace file.
    pub traces: bool,
}

/// The files each tool opened (paths only, never contents), captured in the kernel at open.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Files {
    /// Capture them at all: two syscall tracepoints on every openat of the node.
    pub enabled: bool,
    /// Paths listed per tool for reading and for writing, each; the rest are counted.
    pub max_per_tool: usize,
    /// Inputs and outputs listed per task, each; the rest are counted.
    pub max_per_task: usize,
    /// Keep system paths too (/proc, /sys, /dev, /usr, /etc, shared libraries, caches, the
    /// engines' own bookkeeping), left out by default.
    pub system: bool,
    /// Globs a path must match to be kept (empty: every path).
    pub include: Vec<String>,
    /// Globs of paths left out, beside the system ones.
    pub exclude: Vec<String>,
}

impl Default for Files {
    fn default() -> Self {
        Self {
            enabled: false,
            max_per_tool: 16,
            max_per_task: 32,
            system: false,
            include: Vec::new(),
            exclude: Vec::new(),
        }
    }
}

/// The node itself, as a node agent judges it: idle (`pipetrace.host.idle`) once it has run
/// no pipeline work and used almost no CPU for a while (an instance forgotten over a weekend).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Host {
    /// Idle for this long before `pipetrace.host.idle` leaves 0.
    #[serde(with = "humantime_serde")]
    pub idle_after: Duration,
    /// The whole host's busy CPUs (CPU-seconds per second, averaged over each
    /// `metrics.interval`) below which it counts as idle.
    pub idle_cpu_below: f64,
}

impl Default for Host {
    fn default() -> Self {
        Self {
            idle_after: Duration::from_secs(3600),
            idle_cpu_below: 0.1,
        }
    }
}

/// The self-contained HTML report `pipetrace run` writes at the end.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Report {
    pub html: bool,
    /// Where; by default beside the trace file (`X.report.html`), or
    /// `./pipetrace-<time>.report.html` when traces go only over OTLP.
    pub path: Option<PathBuf>,
    /// The last lines of a failed job's own log (as its engine names it) shown under its
    /// finding on the terminal, the page and `report --json`; 0: none, pipetrace reads no
    /// file. Redacted as command lines are; never exported over OTLP.
    pub failure_log_lines: usize,
}

impl Default for Report {
    fn default() -> Self {
        Self {
            html: true,
            path: None,
            failure_log_lines: 0,
        }
    }
}

/// Which cloud machines would have run each task, from a table of instance shapes and
/// prices (docs/sizing.md): shown in the end-of-run table and the report.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Sizing {
    pub enabled: bool,
    /// The user's own table (same format as the shipped one); None: the shipped table.
    pub instances: Option<PathBuf>,
    /// Clouds to choose from (e.g. `aws`); empty: every cloud in the table.
    pub clouds: Vec<String>,
    /// Regions to choose from (e.g. `us-east-1`, `europe-west4`); empty: every region.
    pub regions: Vec<String>,
}

impl Default for Sizing {
    fn default() -> Self {
        Self {
            enabled: true,
            instances: None,
            clouds: Vec::new(),
            regions: Vec::new(),
        }
    }
}

/// Prices, to put a cost on runs, tasks and tools. Off until `prices` has an entry.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Cost {
    pub currency: String,
    /// Which row of `prices` applies on this host. Left at `default`, the row of the host's
    /// detected instance type (OTel `host.type`, e.g. `m5.large`) when there is one, else
    /// the `default` row.
    pub host_type: String,
    pub prices: BTreeMap<String, Price>,
    /// The resource attribute (`resource_attributes`, `OTEL_RESOURCE_ATTRIBUTES`) whose
    /// value is the cost centre of what runs here, where no Slurm account or container
    /// label says otherwise.
    pub centre_attribute: String,
    /// The container label whose value is the cost centre of what runs in the container.
    pub centre_label: String,
}

impl Default for Cost {
    fn default() -> Self {
        Self {
            currency: "USD".into(),
            host_type: Self::DEFAULT_HOST_TYPE.into(),
            prices: BTreeMap::new(),
            centre_attribute: "pipetrace.cost.centre".into(),
            centre_label: "cost-centre".into(),
        }
    }
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Per CPU-hour.
    pub cpu_hour: f64,
    /// Per GiB-hour of memory.
    pub gib_hour: f64,
}

impl Cost {
    /// `host_type` when the config does not name one.
    pub const DEFAULT_HOST_TYPE: &str = "default";

    /// The price row for this host, if any is configured.
    pub fn price(&self) -> Option<Price> {
        self.prices.get(&self.host_type).copied()
    }

    /// These prices on a host of the `detected` instance type: a `host_type` left at its
    /// default takes the detected type's row when `prices` has one; a configured one stands.
    pub fn on_host(mut self, detected: Option<&str>) -> Self {
        if self.host_type == Self::DEFAULT_HOST_TYPE
            && let Some(t) = detected.filter(|t| self.prices.contains_key(*t))
        {
            self.host_type = t.to_string();
        }
        self
    }
}

#[cfg(test)]
mod cost_tests {
    use super::*;

    #[test]
    fn the_detected_host_type_chooses_the_row_unless_one_is_configured() {
        let row = |p: f64| Price {
            cpu_hour: p,
            gib_hour: 0.0,
        };
        let cost = Cost {
            prices: [("default".into(), row(1.0)), ("m5.large".into(), row(2.0))].into(),
            ..Default::default()
        };
        let on = |c: &Cost, t| c.clone().on_host(t).price().map(|p| p.cpu_hour);
        assert_eq!(on(&cost, Some("m5.large")), Some(2.0));
        let other = on(&cost, Some("c5.xlarge"));
        assert_eq!(other, Some(1.0), "no row: the default");
        assert_eq!(on(&cost, None), Some(1.0));
        let named = Cost {
            host_type: "default".into(),
            ..cost.clone()
        };
        assert_eq!(on(&named, Some("m5.large")), Some(2.0));
        let small = Cost {
            host_type: "small".into(),
            prices: [("small".into(), row(3.0)), ("m5.large".into(), row(2.0))].into(),
            ..Default::default()
        };
        assert_eq!(on(&small, Some("m5.large")), Some(3.0), "configured wins");
    }
}

/// Thresholds for the bottleneck and rightsizing verdicts on task and tool spans. Rates are
/// per second of wall time.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Diagnosis {
    /// Tasks and tools that ran shorter than this get no verdict.
    #[serde(with = "humantime_serde")]
    pub min_wall: Duration,
    /// cpu-bound: runnable CPUs (on a CPU or waiting for one) / allocated CPUs at least this
    /// (a tool: per one CPU).
    pub cpu_bound: f64,
    /// io-bound: seconds waiting for block I/O per second at least this.
    pub io_bound: f64,
    /// memory-bound: seconds waiting for memory (reclaim, swap, thrashing) per second.
    pub memory_bound: f64,
    /// network-bound: bytes sent + received per second at least this, with the CPU not busy.
    pub network_bound_bytes_per_s: u64,
    /// idle: busy CPUs / allocated below this, with no wait above its threshold.
    pub idle_below: f64,
    /// over-allocated: a task used at most this share of the CPUs or memory it asked for.
    pub over_allocation: f64,
    /// Headroom added to observed peaks in recommendations.
    pub headroom: f64,
    /// stall: a running task with no CPU, no I/O and no process starting or ending for this
    /// long (checked at every `metrics.interval`).
    #[serde(with = "humantime_serde")]
    pub stall_after: Duration,
    /// Where per-pipeline task history is kept (durations and peaks, the last
    /// `history_runs` of each task); none: no history.
    pub state_dir: Option<PathBuf>,
    pub history_runs: usize,
    /// slower than usual: at least this many times the median of the task's history (and
    /// `min_wall` longer), once it has three runs or more.
    pub slower_factor: f64,
    /// gpu-bound: share of its GPU time its kernels kept the SMs busy at least this.
    pub gpu_bound: f64,
    /// gpu-starved: held a GPU with the SMs busy less than this share of the time, while
    /// its CPU, storage or memory was the limit.
    pub gpu_starved_below: f64,
}

impl Default for Diagnosis {
    fn default() -> Self {
        Self {
            min_wall: Duration::from_secs(1),
            cpu_bound: 0.7,
            io_bound: 0.3,
            memory_bound: 0.1,
            network_bound_bytes_per_s: 1 << 20,
            idle_below: 0.1,
            over_allocation: 0.5,
            headroom: 0.2,
            stall_after: Duration::from_secs(300),
            state_dir: Some(PathBuf::from(crate::defaults::STATE_DIR)),
            history_runs: 20,
            slower_factor: 2.0,
            gpu_bound: 0.7,
            gpu_starved_below: 0.2,
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Probes {
    /// Kernel ring buffer size in bytes: a power of two, at least one page. The kernel maps
    /// it twice into the reader (twice this in its resident set, once in RAM). The 4 MiB
    /// default lost nothing at 2,400 processes a second on 2 CPUs; 1 MiB did not either.
    pub ring_buffer_bytes: u32,
    /// Processes the kernel keeps per-process sums for at once (network bytes, exited
    /// threads' waits and I/O; and threads asleep in I/O wait): past it those updates are
    /// dropped and counted (`pipetrace.agent.accumulator.lost`). About 100 bytes each.
    pub accumulator_entries: u32,
    /// How long an exited process waits for the kernel's usage report, sent when its parent
    /// reaps it; past it, the figures taken at exit stand in (`pipetrace.usage.at_exit`).
    #[serde(with = "humantime_serde")]
    pub usage_wait: Duration,
    /// Refuse to start without eBPF instead of falling back to polling /proc.
    pub strict: bool,
    /// How often /proc is read when falling back (shorter processes may be missed).
    #[serde(with = "humantime_serde")]
    pub poll_interval: Duration,
    /// Watch only the processes in this cgroup and below it (a path as `/proc/PID/cgroup`
    /// shows it, in any hierarchy): an agent beside one container, pod or Slurm step. `..`:
    /// the cgroup around the agent's own (a sidecar's pod). Unset: the whole node.
    pub scope_cgroup: Option<String>,
}

impl Default for Probes {
    fn default() -> Self {
        Self {
            ring_buffer_bytes: 4 << 20,
            accumulator_entries: 65536,
            usage_wait: Duration::from_secs(2),
            strict: false,
            poll_interval: Duration::from_millis(200),
            scope_cgroup: None,
        }
    }
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Temporality {
    /// Totals since the series started (Prometheus, Grafana Mimir, most backends).
    #[default]
    Cumulative,
    /// Changes since the previous export (Datadog); up-down counters stay cumulative.
    Delta,
}

/// Live metrics of running work, every `interval`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Metrics {
    pub enabled: bool,
    /// OTEL_METRIC_EXPORT_INTERVAL (milliseconds there).
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE.
    pub temporality: Temporality,
    /// Attribute sets (pipeline, task, tool) kept at most; the rest share one overflow series.
    pub max_series: usize,
    /// The same metrics served for Prometheus to scrape.
    pub prometheus: Prometheus,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            enabled: true,
            interval: Duration::from_secs(5),
            temporality: Temporality::Cumulative,
            max_series: 1000,
            prometheus: Prometheus::default(),
        }
    }
}

/// A scrape endpoint (`GET /metrics`, OpenMetrics text) beside or instead of OTLP metrics.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Prometheus {
    /// Address and port to serve on, e.g. 127.0.0.1:9464; None: no endpoint.
    pub listen: Option<String>,
    /// Resource attributes put on every series as labels (all of them are on `target_info`).
    pub promote_resource_attributes: Vec<String>,
    /// How long an ended series' counters stay at their final value for scrapes to see.
    #[serde(with = "humantime_serde")]
    pub keep_ended: Duration,
}

impl Default for Prometheus {
    fn default() -> Self {
        Self {
            listen: None,
            promote_resource_attributes: vec!["host.name".into()],
            keep_ended: Duration::from_secs(300),
        }
    }
}

/// What to match on a process. Every field given must match; regexes are searched.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Match {
    /// The tool name (executable or, for interpreters, script), exactly.
    pub executable: Option<String>,
    /// Regex over the command line joined by spaces.
    pub argv: Option<String>,
    /// Regex over the working directory.
    pub cwd: Option<String>,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    #[serde(rename = "match")]
    pub matches: Match,
    /// Name template: `{tool}`, `{executable}`, `{argv0}`..`{argv9}`, `{cwd}`, `{cwd_name}`.
    #[serde(default = "Rule::default_name")]
    pub name: String,
}

impl Rule {
    fn default_name() -> String {
        "{tool}".into()
    }
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Attribution {
    /// Engines recognised as runs in agent mode; unset, every engine pipetrace models.
    pub engines: Option<Vec<String>>,
    pub run_rules: Vec<Rule>,
    pub task_rules: Vec<Rule>,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Redaction {
    pub enabled: bool,
    /// Extra regexes; every match in a command line becomes `[REDACTED]`.
    pub patterns: Vec<String>,
}

impl Default for Redaction {
    fn default() -> Self {
        Self {
            enabled: true,
            patterns: Vec::new(),
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Summary {
    /// Tasks the terminal tree lists one by one; a run of more shows its jobs folded per
    /// task (`run --all` lists every one).
    pub max_tasks: usize,
    /// Tools listed under each task.
    pub max_tools_per_task: usize,
    /// While `pipetrace run` runs on a terminal, the running tasks in the terminal's last
    /// lines, updated every second (the command's output scrolls above them).
    pub live: bool,
    /// Running tasks the live view lists before it says "and N more".
    pub live_tasks: usize,
}

impl Default for Summary {
    fn default() -> Self {
        Self {
            max_tasks: 30,
            max_tools_per_task: 8,
            live: true,
            live_tasks: 6,
        }
    }
}
