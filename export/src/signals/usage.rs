//! Resource usage as span attributes: a tool's own, a task's or run's roll-up.
use opentelemetry::KeyValue;
use pipetrace_semconv::attr;

use pipetrace_config::Diagnosis;

use pipetrace_core::accounting::{Measured, Usage};
use pipetrace_core::attribution::Totals;
use pipetrace_core::diagnosis;
use pipetrace_core::machine::{Gpu, GpuInventory};

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The container a process ran in, and what its runtime records of it.
pub(crate) fn container_attrs(c: &pipetrace_core::containers::Container, out: &mut Vec<KeyValue>) {
    if let Some(s) = &c.slurm {
        out.push(KeyValue::new(attr::SLURM_JOB_ID, s.job.to_string()));
        out.push(KeyValue::new(attr::SLURM_STEP_ID, s.step.clone()));
        if let Some(t) = s.task {
            out.push(KeyValue::new(attr::SLURM_TASK_ID, i64::from(t)));
        }
        if let Some(u) = s.uid {
            out.push(KeyValue::new(attr::SLURM_USER_ID, i64::from(u)));
        }
        let record = s.record();
        if let Some(user) = record.and_then(|r| r.user.clone()) {
            out.push(KeyValue::new(attr::SLURM_USER_NAME, user));
        }
        if let Some((job, index)) = record.and_then(|r| r.array) {
            out.push(KeyValue::new(attr::SLURM_ARRAY_JOB_ID, job.to_string()));
            out.push(KeyValue::new(attr::SLURM_ARRAY_TASK_ID, i64::from(index)));
        }
    }
    if c.id.is_empty() {
        return;
    }
    out.push(KeyValue::new(attr::CONTAINER_ID, c.id.clone()));
    if let Some(r) = c.runtime {
        out.push(KeyValue::new(attr::CONTAINER_RUNTIME, r));
    }
    if let Some(uid) = &c.pod_uid {
        out.push(KeyValue::new(attr::K8S_POD_UID, uid.clone()));
    }
    let d = &c.details;
    if let Some(n) = &d.name {
        out.push(KeyValue::new(attr::CONTAINER_NAME, n.clone()));
    }
    if let Some(i) = &d.image {
        out.push(KeyValue::new(attr::CONTAINER_IMAGE_NAME, i.clone()));
    }
    for (k, v) in &d.labels {
        out.push(KeyValue::new(
            format!("{}.{k}", attr::CONTAINER_LABEL),
            v.clone(),
        ));
    }
    if let Some(k) = &d.k8s {
        out.push(KeyValue::new(attr::K8S_NAMESPACE_NAME, k.namespace.clone()));
        out.push(KeyValue::new(attr::K8S_POD_NAME, k.pod.clone()));
        if let Some(name) = &k.container {
            out.push(KeyValue::new(attr::K8S_CONTAINER_NAME, name.clone()));
        }
    }
    if let Some(a) = &d.argo {
        out.push(KeyValue::new(attr::ARGO_WORKFLOW_NAME, a.workflow.clone()));
        out.push(KeyValue::new(attr::ARGO_NODE_NAME, a.node.clone()));
    }
}

/// Where a tool's figures came from: taken at exit, and which impossible waits were dropped
/// (left out of the span rather than shown as 0).
pub(crate) fn provenance_attrs(u: &Usage, out: &mut Vec<KeyValue>) {
    if u.at_exit {
        out.push(KeyValue::new(attr::USAGE_AT_EXIT, 1i64));
    }
    impossible_attrs(u, true, out);
}

/// Names the waits the kernel reported impossibly in `u` or in a process summed into it. A
/// process's own (`own`) is left out of its span rather than shown as 0; a task's or run's
/// sum of the rest stays, a lower bound that the name marks as such.
fn impossible_attrs(u: &Usage, own: bool, out: &mut Vec<KeyValue>) {
    use pipetrace_core::accounting::{IMPOSSIBLE_BLKIO, IMPOSSIBLE_MEMORY, IMPOSSIBLE_RUN_QUEUE};
    let dropped: Vec<&'static str> = [
        (IMPOSSIBLE_BLKIO, attr::DISK_WAIT_TIME),
        (IMPOSSIBLE_MEMORY, attr::MEMORY_WAIT_TIME),
        (IMPOSSIBLE_RUN_QUEUE, attr::CPU_RUN_QUEUE_DELAY),
    ]
    .into_iter()
    .filter(|(bit, _)| u.impossible & bit != 0)
    .map(|(_, name)| name)
    .collect();
    if dropped.is_empty() {
        return;
    }
    if own {
        out.retain(|kv| !dropped.contains(&kv.key.as_str()));
    }
    let names: Vec<opentelemetry::StringValue> = dropped.iter().map(|n| (*n).into()).collect();
    out.push(KeyValue::new(
        attr::USAGE_IMPOSSIBLE,
        opentelemetry::Value::Array(names.into()),
    ));
}

/// The kernel's figures; values this kernel cannot measure are left out, not reported as 0.
/// `gpus`: the node's, which name the GPUs a process used.
pub(crate) fn usage_attrs(
    u: &Usage,
    peak: u64,
    m: Measured,
    gpus: &[Gpu],
    out: &mut Vec<KeyValue>,
) {
    out.extend([
        KeyValue::new(attr::CPU_USER_TIME, secs(u.cpu_user_ns)),
        KeyValue::new(attr::CPU_SYSTEM_TIME, secs(u.cpu_system_ns)),
        KeyValue::new(attr::CPU_RUN_QUEUE_DELAY, secs(u.run_delay_ns)),
        KeyValue::new(attr::MEMORY_PEAK, int(peak)),
        KeyValue::new(attr::MEMORY_MINOR_FAULTS, int(u.minor_faults)),
        KeyValue::new(attr::MEMORY_MAJOR_FAULTS, int(u.major_faults)),
        KeyValue::new(attr::CONTEXT_SWITCHES_VOLUNTARY, int(u.voluntary_switches)),
        KeyValue::new(
            attr::CONTEXT_SWITCHES_INVOLUNTARY,
            int(u.involuntary_switches),
        ),
        KeyValue::new(attr::IO_READ_BYTES, int(u.read_chars)),
        KeyValue::new(attr::IO_WRITE_BYTES, int(u.write_chars)),
        KeyValue::new(attr::IO_READ_CALLS, int(u.read_calls)),
        KeyValue::new(attr::IO_WRITE_CALLS, int(u.write_calls)),
        KeyValue::new(attr::DISK_READ_BYTES, int(u.disk_read_bytes)),
        KeyValue::new(attr::DISK_WRITE_BYTES, int(u.disk_write_bytes)),
        KeyValue::new(
            attr::DISK_CANCELLED_WRITE_BYTES,
            int(u.disk_cancelled_write_bytes),
        ),
    ]);
    if m.io_wait {
        out.push(KeyValue::new(attr::DISK_WAIT_TIME, secs(u.blkio_delay_ns)));
    }
    if m.delay_accounting {
        out.push(KeyValue::new(
            attr::MEMORY_WAIT_TIME,
            secs(u.memory_delay_ns),
        ));
    }
    if m.network {
        out.push(KeyValue::new(
            attr::NETWORK_TRANSMIT_BYTES,
            int(u.net_tx_bytes),
        ));
        out.push(KeyValue::new(
            attr::NETWORK_RECEIVE_BYTES,
            int(u.net_rx_bytes),
        ));
    }
    gpu_attrs(&u.gpu, gpus, out);
}

/// A task given GPUs by its devices cgroup: how many, and whether it used them.
fn gpu_rightsizing_attrs(
    name: &str,
    given: u64,
    used: &pipetrace_core::accounting::GpuFigures,
    wall_ns: u64,
    d: &Diagnosis,
    out: &mut Vec<KeyValue>,
) {
    let Some(v) = diagnosis::gpu_rightsizing(name, given, used, wall_ns, d) else {
        return;
    };
    let flag = if v.over_allocated {
        "over-allocated"
    } else {
        "fits"
    };
    out.push(KeyValue::new(attr::GPU_ALLOCATED, i64::from(v.allocated)));
    out.push(KeyValue::new(attr::GPU_RIGHTSIZING, flag));
    out.push(KeyValue::new(attr::GPU_RECOMMENDATION, v.sentence));
    out.push(KeyValue::new(
        attr::GPU_RECOMMENDATION_COUNT,
        i64::from(v.recommend_gpus),
    ));
}

/// Its GPUs and what it did on them, where a process held a GPU context.
pub(crate) fn gpu_attrs(
    g: &pipetrace_core::accounting::GpuFigures,
    gpus: &[Gpu],
    out: &mut Vec<KeyValue>,
) {
    use opentelemetry::{Array, StringValue, Value};
    if !g.used() {
        return;
    }
    let (mut ids, mut names) = (Vec::new(), Vec::new());
    for i in g.indices() {
        let known = gpus.iter().find(|x| x.index == i);
        ids.push(StringValue::from(
            known.map_or(i.to_string(), |x| x.uuid.clone()),
        ));
        names.push(StringValue::from(
            known.map_or("GPU".into(), |x| x.name.clone()),
        ));
    }
    out.push(KeyValue::new(
        attr::GPU_IDS,
        Value::Array(Array::String(ids)),
    ));
    out.push(KeyValue::new(
        attr::GPU_NAMES,
        Value::Array(Array::String(names)),
    ));
    out.push(KeyValue::new(
        attr::GPU_MEMORY_PEAK,
        int(g.memory_peak_bytes),
    ));
    out.push(KeyValue::new(attr::GPU_TIME, g.on_gpu_us as f64 / 1e6));
    if let Some(u) = g.sm_utilization() {
        out.push(KeyValue::new(attr::GPU_UTILIZATION, u));
    }
    if let Some(u) = g.memory_utilization() {
        out.push(KeyValue::new(attr::GPU_MEMORY_UTILIZATION, u));
    }
}

/// What it cost at the configured prices: what it used (CPU-hours, peak GiB-hours), and for
/// a task with a request, what it reserved.
pub(crate) fn cost_attrs(
    c: &pipetrace_config::Cost,
    cpu_ns: u64,
    peak_bytes: u64,
    wall_ns: u64,
    alloc: Option<&pipetrace_core::accounting::Allocation>,
    out: &mut Vec<KeyValue>,
) {
    let Some(price) = c.price() else { return };
    let hours = |ns: u64| ns as f64 / 3.6e12;
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    let used = hours(cpu_ns) * price.cpu_hour + gib(peak_bytes) * hours(wall_ns) * price.gib_hour;
    out.push(KeyValue::new(attr::COST, used));
    out.push(KeyValue::new(attr::COST_CURRENCY, c.currency.clone()));
    if let Some(a) = alloc.filter(|a| a.source != "host") {
        let mem = a.memory_limit.unwrap_or(peak_bytes);
        let reserved = (a.cpus * price.cpu_hour + gib(mem) * price.gib_hour) * hours(wall_ns);
        out.push(KeyValue::new(attr::COST_ALLOCATED, reserved));
    }
}

/// What held the process or task back: tools are judged per CPU, tasks against their
/// allocation.
pub(crate) fn bottleneck_attrs(
    u: &Usage,
    wall_ns: u64,
    cpus: f64,
    m: Measured,
    d: &Diagnosis,
    out: &mut Vec<KeyValue>,
) {
    if let Some(b) = diagnosis::bottleneck(u, wall_ns, cpus, m, d) {
        out.push(KeyValue::new(attr::BOTTLENECK, b.kind.as_str()));
        out.push(KeyValue::new(attr::BOTTLENECK_REASON, b.reason));
    }
}

/// A task's or run's totals, peak, allocation and utilisation over `wall_ns`; for a task
/// (`name`), its bottleneck and rightsizing verdicts.
/// `task`: a task's name and how long it made no progress (ns), to judge it by.
pub(crate) fn totals_attrs(
    t: &Totals,
    wall_ns: u64,
    task: Option<(&str, u64)>,
    m: Measured,
    gpus: &GpuInventory,
    d: &Diagnosis,
    out: &mut Vec<KeyValue>,
) {
    let r = &t.rollup;
    usage_attrs(&r.totals, r.peak_memory(), m, gpus.get(), out);
    impossible_attrs(&r.totals, false, out);
    if let (Some((name, quiet_ns)), Some(a)) = (task, &t.allocation) {
        // Without a request of its own a task is judged per CPU, like a tool: one core
        // kept busy is CPU-bound whatever the size of the host.
        let cpus = if a.source == "host" { 1.0 } else { a.cpus };
        // Quiet stretches spent waiting for storage, memory or a CPU are such waits, not
        // idleness.
        let waits = r.totals.blkio_delay_ns + r.totals.memory_delay_ns + r.totals.run_delay_ns;
        let quiet = quiet_ns.saturating_sub(waits);
        let waits_known = r.totals.impossible == 0;
        let verdict = match diagnosis::bottleneck(&r.totals, wall_ns, cpus, m, d) {
            // Neither busy nor waiting on one resource, or kept from a CPU part of the time:
            // idle if it did nothing most of the time (a job asleep most of its life is idle
            // whatever its busy part waited for), unless its quiet stretches may be waits the
            // kernel miscounted.
            Some(b)
                if matches!(
                    b.kind,
                    diagnosis::BottleneckKind::Mixed | diagnosis::BottleneckKind::CpuStarved
                ) && waits_known =>
            {
                let starved = match b.kind {
                    diagnosis::BottleneckKind::CpuStarved => r.totals.run_delay_ns,
                    _ => 0,
                };
                diagnosis::mostly_quiet(quiet, wall_ns, starved, d).or(Some(b))
            }
            v => v,
        };
        if let Some(b) = verdict {
            out.push(KeyValue::new(attr::BOTTLENECK, b.kind.as_str()));
            out.push(KeyValue::new(attr::BOTTLENECK_REASON, b.reason));
        }
        let verdict = diagnosis::rightsizing(
            name,
            r.totals.cpu_ns(),
            r.totals.run_delay_ns,
            r.peak_memory(),
            wall_ns,
            a,
            d,
        );
        if let Some(v) = verdict {
            let flag = match (v.over_allocated, v.under_allocated) {
                (true, _) => "over-allocated",
                (false, true) => "under-allocated",
                (false, false) => "fits",
            };
            out.push(KeyValue::new(attr::RIGHTSIZING, flag));
            out.push(KeyValue::new(attr::RECOMMENDATION, v.sentence));
            out.push(KeyValue::new(
                attr::RECOMMENDATION_CPUS,
                i64::from(v.recommend_cpus),
            ));
            if let Some(mem) = v.recommend_memory {
                out.push(KeyValue::new(attr::RECOMMENDATION_MEMORY, int(mem)));
            }
        }
    }
    if let (Some((name, _)), Some(minors)) = (task, t.allocation.as_ref().and_then(|a| a.gpus)) {
        let given = gpus.indices_of_minors(minors);
        gpu_rightsizing_attrs(name, given, &r.totals.gpu, wall_ns, d, out);
    }
    out.push(KeyValue::new(attr::USAGE_PROCESSES, int(r.processes)));
    out.push(KeyValue::new(attr::USAGE_MISSING, int(r.missing)));
    if r.at_exit > 0 {
        out.push(KeyValue::new(attr::USAGE_AT_EXIT, int(r.at_exit)));
    }
    if let Some(a) = &t.allocation {
        out.push(KeyValue::new(attr::CPU_ALLOCATED, a.cpus));
        out.push(KeyValue::new(attr::CPU_ALLOCATION_SOURCE, a.source));
        if let Some(u) = r.cpu_utilization(wall_ns, a) {
            out.push(KeyValue::new(attr::CPU_UTILIZATION, u));
        }
        if let Some(limit) = a.memory_limit {
            out.push(KeyValue::new(attr::MEMORY_LIMIT, int(limit)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipetrace_core::accounting::{Allocation, IMPOSSIBLE_BLKIO};

    /// A task of three sub-second writers, all of whose block-I/O waits the kernel counted
    /// from boot: quiet to the sampler, yet no proof of idleness.
    #[test]
    fn a_task_short_of_impossible_waits_is_marked_and_never_called_idle() {
        let s = 1_000_000_000u64;
        let mut t = Totals {
            allocation: Some(Allocation {
                cpus: 2.0,
                source: "host",
                memory_limit: None,
                host_cpus: 2,
                gpus: None,
            }),
            ..Default::default()
        };
        let writer = Usage {
            cpu_system_ns: s / 100,
            impossible: IMPOSSIBLE_BLKIO,
            ..Default::default()
        };
        for i in 0..3 {
            t.rollup
                .add_process(i * s, i * s + s, "workload", Some(&writer));
        }
        let m = Measured {
            network: true,
            delay_accounting: true,
            io_wait: true,
        };
        let mut out = Vec::new();
        let task = Some(("io", 2 * s));
        let gpus = Default::default();
        totals_attrs(&t, 3 * s, task, m, &gpus, &Diagnosis::default(), &mut out);
        let get = |k: &str| {
            out.iter()
                .find(|kv| kv.key.as_str() == k)
                .map(|kv| kv.value.to_string())
        };
        assert_eq!(get(attr::BOTTLENECK).as_deref(), Some("mixed"));
        assert!(
            get(attr::USAGE_IMPOSSIBLE)
                .unwrap()
                .contains(attr::DISK_WAIT_TIME)
        );
        // The sum of the rest stays, a lower bound.
        assert_eq!(get(attr::DISK_WAIT_TIME).as_deref(), Some("0"));
    }
}
