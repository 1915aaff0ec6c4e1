//! Per-process GPU figures under the real agent, against the test NVML library
//! (tests/fake-nvml: NVML's C ABI, its "hardware" set by the test as the run goes): a busy
//! and an idle GPU process told apart, a GPU that falls off the bus, a GPU no run uses left
//! unsampled, and no library at all. What only a real GPU can prove is in docs/gpu.md.
use std::{
    path::{Path, PathBuf},
    process::{Child, Stdio},
    time::{Duration, Instant},
};

use pipetrace_e2e::{
    fake_gpu::{self, device, process},
    metrics::{RecvPoint, flatten_metrics},
    pipetrace, read_jsonl,
    spans::{RecvSpan, Val},
    stderr,
};
use pipetrace_semconv::{attr, metric};

const GIB: u64 = 1 << 30;

/// `pipetrace run` of a script starting two `sleep`s that write their pids to `pids`, with
/// the test NVML library answering from `state`.
fn start(dir: &Path, library: &Path, seconds: u32) -> Child {
    let script = format!(
        "sleep {seconds} & echo $! > {d}/pids.tmp; sleep {seconds} & echo $! >> {d}/pids.tmp; \
         mv {d}/pids.tmp {d}/pids; wait",
        d = dir.display()
    );
    pipetrace()
        .env("FAKE_NVML_STATE", dir.join("state.json"))
        .env("PIPETRACE_GPU__LIBRARY", library)
        .env("PIPETRACE_METRICS__INTERVAL", "200ms")
        .args(["run", "--output"])
        .arg(dir.join("t.otlp.jsonl"))
        .args(["--", "sh", "-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn pids(dir: &Path) -> (u32, u32) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(text) = std::fs::read_to_string(dir.join("pids")) {
            let p: Vec<u32> = text.lines().map(|l| l.trim().parse().unwrap()).collect();
            return (p[0], p[1]);
        }
        assert!(Instant::now() < deadline, "the script never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn finish(child: Child, dir: &Path) -> (Vec<RecvSpan>, Vec<RecvPoint>) {
    let (spans, points, _) = finish_saying(child, dir);
    (spans, points)
}

/// As [`finish`], with what `pipetrace run` printed (its summary and table).
fn finish_saying(child: Child, dir: &Path) -> (Vec<RecvSpan>, Vec<RecvPoint>, String) {
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let spans = read_jsonl(&dir.join("t.otlp.jsonl"));
    let text = std::fs::read_to_string(dir.join("t.metrics.otlp.jsonl")).unwrap_or_default();
    let points = (text.lines())
        .flat_map(|l| flatten_metrics(serde_json::from_str(l).unwrap()))
        .collect();
    let said = String::from_utf8_lossy(&o.stdout).to_string() + &stderr(&o);
    (spans, points, said)
}

fn tool(spans: &[RecvSpan], pid: u32) -> &RecvSpan {
    (spans.iter())
        .find(|s| s.is_tool() && s.int(attr::PROCESS_PID) == Some(i64::from(pid)))
        .unwrap_or_else(|| panic!("no tool span of pid {pid}"))
}

fn strings(s: &RecvSpan, k: &str) -> Vec<String> {
    match s.attr(k) {
        Some(Val::List(v)) => v.iter().map(|x| x.str().to_string()).collect(),
        other => panic!("{k}: {other:?}"),
    }
}

fn setup() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    fake_gpu::write(&dir.path().join("state.json"), vec![device(0, vec![])]);
    (dir, fake_gpu::library())
}

#[test]
fn a_busy_and_an_idle_gpu_process_are_told_apart() {
    let (dir, lib) = setup();
    let child = start(dir.path(), &lib, 4);
    let (busy, idle) = pids(dir.path());
    let state = dir.path().join("state.json");
    let on_gpu = vec![process(busy, 6 * GIB, 93, 41), process(idle, GIB, 0, 0)];
    fake_gpu::write(&state, vec![device(0, on_gpu)]);
    std::thread::sleep(Duration::from_secs(1));
    // It grows: the peak is the most it held.
    let on_gpu = vec![process(busy, 8 * GIB, 93, 41), process(idle, GIB, 0, 0)];
    fake_gpu::write(&state, vec![device(0, on_gpu)]);
    let (spans, points) = finish(child, dir.path());
    let (b, i) = (tool(&spans, busy), tool(&spans, idle));
    assert_eq!(b.int(attr::GPU_MEMORY_PEAK), Some(8 * GIB as i64), "{b:?}");
    assert_eq!(i.int(attr::GPU_MEMORY_PEAK), Some(GIB as i64));
    let (bu, iu) = (
        b.num(attr::GPU_UTILIZATION).unwrap(),
        i.num(attr::GPU_UTILIZATION).unwrap(),
    );
    assert!((bu - 0.93).abs() < 0.08, "busy: {bu}");
    assert!(iu < 0.01, "idle: {iu}");
    let mu = b.num(attr::GPU_MEMORY_UTILIZATION).unwrap();
    assert!((mu - 0.41).abs() < 0.08, "memory controller: {mu}");
    assert_eq!(
        strings(b, attr::GPU_IDS),
        ["GPU-fa4e0000-0000-0000-0000-000000000000"]
    );
    assert_eq!(strings(b, attr::GPU_NAMES), ["Fake H200"]);
    assert!(b.num(attr::GPU_TIME).unwrap() > 2.0, "{b:?}");
    assert_eq!(b.str(attr::BOTTLENECK), "gpu-bound", "{b:?}");
    assert_ne!(i.str(attr::BOTTLENECK), "gpu-bound");
    // The run sums its processes: the peak is the largest, the utilisation over both.
    let run = spans.iter().find(|s| s.is_run()).unwrap();
    assert_eq!(run.int(attr::GPU_MEMORY_PEAK), Some(8 * GIB as i64));
    let ru = run.num(attr::GPU_UTILIZATION).unwrap();
    assert!(ru > 0.3 && ru < 0.6, "half the GPU time busy: {ru}");
    // Live: the device while the run used it, and the GPU memory each tool held.
    let util: Vec<&RecvPoint> = points
        .iter()
        .filter(|p| p.name == metric::HW_GPU_UTILIZATION)
        .collect();
    assert!(
        !util.is_empty() && util.iter().all(|p| (p.value - 0.9).abs() < 1e-9),
        "{util:?}"
    );
    assert!(
        points
            .iter()
            .any(|p| p.name == metric::HW_POWER && (p.value - 612.0).abs() < 1e-9)
    );
    let held = (points.iter())
        .filter(|p| p.name == metric::PROCESS_GPU_MEMORY_USAGE && p.str(attr::TOOL_NAME) == "sleep")
        .map(|p| p.value)
        .fold(0.0, f64::max);
    assert_eq!(held, 9.0 * GIB as f64, "both sleeps' GPU memory at once");
}

#[test]
fn a_gpu_that_falls_off_the_bus_keeps_what_was_taken_and_the_other_goes_on() {
    let (dir, lib) = setup();
    let state = dir.path().join("state.json");
    // Two GPUs from the start (the driver lists a node's GPUs once).
    fake_gpu::write(&state, vec![device(0, vec![]), device(1, vec![])]);
    let child = start(dir.path(), &lib, 4);
    let (a, b) = pids(dir.path());
    let two = |lost: bool| {
        let mut lost_one = device(1, vec![process(b, 3 * GIB, 60, 10)]);
        lost_one["lost"] = lost.into();
        vec![device(0, vec![process(a, 2 * GIB, 80, 20)]), lost_one]
    };
    fake_gpu::write(&state, two(false));
    std::thread::sleep(Duration::from_millis(1500));
    fake_gpu::write(&state, two(true));
    let (spans, _) = finish(child, dir.path());
    let (sa, sb) = (tool(&spans, a), tool(&spans, b));
    assert_eq!(
        sb.int(attr::GPU_MEMORY_PEAK),
        Some(3 * GIB as i64),
        "{sb:?}"
    );
    assert!(strings(sb, attr::GPU_IDS)[0].ends_with('1'));
    let (ta, tb) = (
        sa.num(attr::GPU_TIME).unwrap(),
        sb.num(attr::GPU_TIME).unwrap(),
    );
    assert!(
        ta > tb + 1.0,
        "GPU 0 looked at to the end ({ta} s), GPU 1 until lost ({tb} s)"
    );
    let ua = sa.num(attr::GPU_UTILIZATION).unwrap();
    assert!((ua - 0.8).abs() < 0.08, "{ua}");
}

#[test]
fn a_gpu_no_run_uses_is_only_listed_and_no_library_changes_nothing() {
    let (dir, lib) = setup();
    let state = dir.path().join("state.json");
    // Someone else's process (pid 1) on the GPU: listed, never sampled.
    fake_gpu::write(&state, vec![device(0, vec![process(1, GIB, 100, 50)])]);
    let child = start(dir.path(), &lib, 2);
    pids(dir.path());
    let (spans, points) = finish(child, dir.path());
    let calls = std::fs::read_to_string(dir.path().join("state.json.calls")).unwrap();
    assert!(calls.contains("ComputeRunningProcesses"), "{calls}");
    assert!(
        !calls.contains("nvmlDeviceGetProcessUtilization"),
        "{calls}"
    );
    assert!(!calls.contains("nvmlDeviceGetUtilizationRates"), "{calls}");
    assert!(spans.iter().all(|s| s.attr(attr::GPU_IDS).is_none()));
    assert!(points.iter().all(|p| !p.name.starts_with("hw.")));
    // No NVML at all (a node without NVIDIA's driver): the same run, the same spans.
    let dir2 = tempfile::tempdir().unwrap();
    let child = start(dir2.path(), Path::new("/nonexistent/libnvidia-ml.so.1"), 1);
    pids(dir2.path());
    let (spans, _) = finish(child, dir2.path());
    assert!(spans.iter().filter(|s| s.is_tool()).count() >= 2);
    assert!(spans.iter().all(|s| s.attr(attr::GPU_IDS).is_none()));
}

/// A v1 devices cgroup letting its processes open the usual character devices and
/// /dev/nvidia0 and /dev/nvidia1 only, as Slurm's ConstrainDevices does for a 2-GPU gres.
struct GpuCgroup(PathBuf);

impl GpuCgroup {
    fn new() -> Self {
        let dir = Path::new("/sys/fs/cgroup/devices")
            .join(format!("pipetrace-test-gpu-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a v1 devices cgroup (cgroups are v1 hybrid here)");
        let write = |f: &str, v: &str| std::fs::write(dir.join(f), v).unwrap();
        write("devices.deny", "a");
        for rule in [
            "c 1:* rwm",
            "c 5:* rwm",
            "c 136:* rwm",
            "c 195:0 rw",
            "c 195:1 rw",
            "c 195:255 rw",
        ] {
            write("devices.allow", rule);
        }
        Self(dir)
    }
}

impl Drop for GpuCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
fn a_snakemake_task_given_two_gpus_that_used_one_is_told_to_ask_for_one() {
    let (dir, lib) = setup();
    let state = dir.path().join("state.json");
    fake_gpu::write(&state, vec![device(0, vec![]), device(1, vec![])]);
    let cg = GpuCgroup::new();
    let work = dir.path().join("wf");
    std::fs::create_dir_all(&work).unwrap();
    let pidfile = dir.path().join("trainer.pid");
    std::fs::write(
        work.join("Snakefile"),
        format!(
            "rule all:\n    input: 'model.pt'\nrule train:\n    output: 'model.pt'\n    \
             shell: 'sleep 4 & echo $! > {}; wait; touch {{output}}'\n",
            pidfile.display()
        ),
    )
    .unwrap();
    let script = format!(
        "echo $$ > {}/cgroup.procs && exec snakemake --cores 1",
        cg.0.display()
    );
    let child = pipetrace()
        .env("FAKE_NVML_STATE", &state)
        .env("PIPETRACE_GPU__LIBRARY", &lib)
        .env("PIPETRACE_METRICS__INTERVAL", "200ms")
        .args(["run", "--output"])
        .arg(dir.path().join("t.otlp.jsonl"))
        .args(["--", "sh", "-c", &script])
        .current_dir(&work)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let trainer: u32 = loop {
        if let Some(p) = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            break p;
        }
        assert!(Instant::now() < deadline, "the task never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    fake_gpu::write(
        &state,
        vec![
            device(0, vec![process(trainer, 5 * GIB, 91, 30)]),
            device(1, vec![]),
        ],
    );
    let (spans, _, said) = finish_saying(child, dir.path());
    // The end-of-run table and the HTML report show the task's GPU use and the advice.
    let table = (said.split_once("gpu busy/mem"))
        .unwrap_or_else(|| panic!("no GPU column in the table:\n{said}"))
        .1;
    let row = (table.lines())
        .find(|l| l.starts_with("train "))
        .unwrap_or_else(|| panic!("no table row for train:\n{said}"));
    assert!(
        row.contains("5.0 GiB") && row.contains("given 2 GPUs, used 1"),
        "{row}"
    );
    let html = std::fs::read_to_string(dir.path().join("t.report.html")).unwrap();
    assert!(
        html.contains("<th>GPU busy, memory</th>"),
        "the report's task table"
    );
    // Snakemake's own record names the task.
    let records = pipetrace_e2e::snakemake::metadata(&work);
    assert!(
        records.iter().any(|(_, m)| m["rule"] == "train"),
        "{records:?}"
    );
    let task = (spans.iter())
        .find(|s| s.is_task() && s.str(attr::CICD_PIPELINE_TASK_NAME) == "train")
        .expect("the train task");
    assert_eq!(task.int(attr::GPU_ALLOCATED), Some(2), "{task:?}");
    assert_eq!(task.str(attr::GPU_RIGHTSIZING), "over-allocated");
    assert_eq!(task.int(attr::GPU_RECOMMENDATION_COUNT), Some(1));
    assert!(
        task.str(attr::GPU_RECOMMENDATION)
            .contains("given 2 GPUs, used 1"),
        "{task:?}"
    );
    assert_eq!(task.int(attr::GPU_MEMORY_PEAK), Some(5 * GIB as i64));
    assert_eq!(task.str(attr::BOTTLENECK), "gpu-bound", "{task:?}");
    drop(cg);
}
