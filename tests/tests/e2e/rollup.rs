//! Task and run roll-ups: totals over processes, peak memory of concurrent processes, and
//! CPU utilisation against the allocation the kernel enforces (a cgroup CPU quota).
use std::path::{Path, PathBuf};

use pipetrace_e2e::{pipetrace, read_jsonl, run_script, spans::RecvSpan, stderr};
use pipetrace_semconv::attr;

const WORKLOAD: &str = env!("CARGO_BIN_EXE_workload");

fn run(dir: &Path, script: &str) -> Vec<RecvSpan> {
    let (spans, o) = run_script(dir, script);
    assert!(o.status.success(), "{}", stderr(&o));
    spans
}

fn cpu(s: &RecvSpan) -> f64 {
    s.num(attr::CPU_USER_TIME).unwrap() + s.num(attr::CPU_SYSTEM_TIME).unwrap()
}

#[test]
fn run_totals_sum_every_process_and_peak_counts_only_concurrent_ones() {
    let dir = tempfile::tempdir().unwrap();
    // Two 64 MiB allocations at the same time, then one of 96 MiB alone.
    let script = format!(
        "{w} alloc 64 & {w} alloc 64 & wait; {w} alloc 96; {w} burn 200; \
         {w} write {f} 8388608; true",
        w = WORKLOAD,
        f = dir.path().join("out.bin").display()
    );
    let spans = run(dir.path(), &script);
    let run = spans.iter().find(|s| s.is_run()).unwrap();
    let tools: Vec<_> = spans.iter().filter(|s| s.is_tool()).collect();
    let workloads: Vec<_> = tools.iter().filter(|s| s.name == "workload").collect();
    assert_eq!(
        workloads.len(),
        5,
        "{:?}",
        tools.iter().map(|t| &t.name).collect::<Vec<_>>()
    );
    // The run holds the shell and its subshells too: at least the sum of its tools.
    let tools_cpu: f64 = tools.iter().map(|t| cpu(t)).sum();
    assert!(
        cpu(run) >= tools_cpu - 1e-6,
        "run {} < tools {tools_cpu}",
        cpu(run)
    );
    let processes = run.int(attr::USAGE_PROCESSES).unwrap();
    assert!(processes >= 5, "shell + 4 workloads: {processes}");
    assert_eq!(run.int(attr::USAGE_MISSING), Some(0));
    // Peak: the two concurrent 64 MiB processes (plus the shell) exceed the 96 MiB one
    // alone, and the sum of all three is never reached.
    let peaks: Vec<f64> = workloads
        .iter()
        .map(|w| w.num(attr::MEMORY_PEAK).unwrap())
        .collect();
    let peak = run.num(attr::MEMORY_PEAK).unwrap();
    let mib = 1048576.0;
    assert!(peak >= 128.0 * mib, "two 64 MiB at once: {peak}");
    assert!(
        peak < peaks.iter().sum::<f64>(),
        "not every process at once: {peak}"
    );
    // Each process counts its own I/O only: the kernel's per-process total also holds the
    // children it reaped, which would count the writer twice (once more in the shell).
    let disk: f64 = tools
        .iter()
        .map(|t| t.num(attr::DISK_WRITE_BYTES).unwrap())
        .sum();
    let run_disk = run.num(attr::DISK_WRITE_BYTES).unwrap();
    assert!(disk >= 8388608.0, "the writer's 8 MiB: {disk}");
    assert!(
        run_disk < disk + 1048576.0,
        "run {run_disk} vs its tools' {disk}"
    );
    let written: f64 = tools
        .iter()
        .map(|t| t.num(attr::IO_READ_CALLS).unwrap())
        .sum();
    assert!(run.num(attr::IO_READ_CALLS).unwrap() >= written);
}

/// A cgroup directory for `controller` (v1 hierarchy, or v2 with the controller enabled).
fn make_cgroup(controller: &str, name: &str) -> PathBuf {
    let v1 = Path::new("/sys/fs/cgroup").join(controller);
    let base = if v1.join("cgroup.procs").exists() {
        v1
    } else {
        let root = PathBuf::from("/sys/fs/cgroup");
        std::fs::write(
            root.join("cgroup.subtree_control"),
            format!("+{controller}"),
        )
        .expect("enable the controller in the cgroup v2 root");
        root
    };
    let dir = base.join(name);
    let _ = std::fs::create_dir(&dir);
    dir
}

struct Cgroups(Vec<PathBuf>);

impl Drop for Cgroups {
    fn drop(&mut self) {
        for d in &self.0 {
            let _ = std::fs::remove_dir(d);
        }
    }
}

#[test]
fn utilisation_is_measured_against_the_cgroup_cpu_quota_and_memory_limit() {
    let name = format!("pipetrace-test-{}", std::process::id());
    let cpu_dir = make_cgroup("cpu", &name);
    let mem_dir = make_cgroup("memory", &name);
    let cgroups = Cgroups(vec![cpu_dir.clone(), mem_dir.clone()]);
    // Half a CPU, 512 MiB.
    if cpu_dir.join("cpu.max").exists() {
        std::fs::write(cpu_dir.join("cpu.max"), "50000 100000").unwrap();
        std::fs::write(mem_dir.join("memory.max"), "536870912").unwrap();
    } else {
        std::fs::write(cpu_dir.join("cpu.cfs_quota_us"), "50000").unwrap();
        std::fs::write(mem_dir.join("memory.limit_in_bytes"), "536870912").unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "echo $$ > {c}/cgroup.procs && echo $$ > {m}/cgroup.procs && {w} burn 400; true",
        c = cpu_dir.display(),
        m = mem_dir.display(),
        w = WORKLOAD
    );
    let spans = run(dir.path(), &script);
    drop(cgroups);
    let task = spans
        .iter()
        .find(|s| s.is_task() && s.str(attr::CICD_PIPELINE_TASK_NAME) == "workload")
        .expect("the workload is a task of the run");
    assert_eq!(task.num(attr::CPU_ALLOCATED), Some(0.5));
    assert_eq!(task.str(attr::CPU_ALLOCATION_SOURCE), "cgroup.cpu.max");
    assert_eq!(task.int(attr::MEMORY_LIMIT), Some(536870912));
    // Held to half a CPU, a CPU-bound task uses all of it.
    let util = task.num(attr::CPU_UTILIZATION).unwrap();
    assert!((0.8..=1.1).contains(&util), "utilisation {util}");
}

#[test]
fn cost_follows_the_price_table() {
    let dir = tempfile::tempdir().unwrap();
    // 3600 per CPU-hour is 1 per CPU-second; 36 per GiB-hour.
    let cfg = dir.path().join("pipetrace.yaml");
    std::fs::write(
        &cfg,
        "cost:\n  currency: EUR\n  host_type: small\n  prices:\n    small: { cpu_hour: 3600, gib_hour: 36 }\n",
    )
    .unwrap();
    let out = dir.path().join("t.otlp.jsonl");
    let o = pipetrace()
        .arg("-c")
        .arg(&cfg)
        .arg("run")
        .arg("--output")
        .arg(&out)
        .args(["--", "sh", "-c", &format!("{WORKLOAD} burn 300; true")])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let spans = read_jsonl(&out);
    let tool = spans
        .iter()
        .find(|s| s.is_tool() && s.name == "workload")
        .unwrap();
    let gib_hours = tool.num(attr::MEMORY_PEAK).unwrap() / (1u64 << 30) as f64
        * ((tool.end - tool.start) as f64 / 3.6e12);
    let want = cpu(tool) + 36.0 * gib_hours;
    let cost = tool.num(attr::COST).unwrap();
    assert!((cost - want).abs() < 1e-6, "cost {cost} vs {want}");
    assert_eq!(tool.str(attr::COST_CURRENCY), "EUR");
    // A price row the host type does not name is a config error, before anything runs.
    std::fs::write(
        &cfg,
        "cost:\n  host_type: big\n  prices:\n    small: { cpu_hour: 1, gib_hour: 1 }\n",
    )
    .unwrap();
    let o = pipetrace()
        .arg("config")
        .arg("validate")
        .arg(&cfg)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cost.host_type"), "{}", stderr(&o));
}
