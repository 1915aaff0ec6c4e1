//! Planted faults, each run under `pipetrace run`: what ended a process lands on its span.
use std::path::{Path, PathBuf};

use pipetrace_e2e::{
    cgroup::MemoryCgroup,
    metrics::flatten_metrics,
    run_script,
    spans::{RecvSpan, Val},
    stderr,
};
use pipetrace_semconv::{attr, event, metric};

const WORKLOAD: &str = env!("CARGO_BIN_EXE_workload");

fn run(dir: &Path, script: &str) -> (Vec<RecvSpan>, PathBuf, std::process::Output) {
    let (spans, o) = run_script(dir, script);
    (spans, dir.join("t.metrics.otlp.jsonl"), o)
}

fn workload(spans: &[RecvSpan]) -> &RecvSpan {
    spans
        .iter()
        .find(|s| s.is_tool() && s.name == "workload")
        .expect("the workload's span")
}

#[test]
fn an_oom_kill_inside_a_cgroup_limit_lands_on_the_tool_and_its_task() {
    let limit = 64 * 1048576;
    let cg = MemoryCgroup::new(limit);
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "echo $$ > {}/cgroup.procs && {WORKLOAD} alloc 256; true",
        cg.0.display()
    );
    let (spans, metrics_file, o) = run(dir.path(), &script);
    assert!(o.status.success(), "{}", stderr(&o));
    let tool = workload(&spans);
    assert_eq!(tool.status, 2, "ERROR");
    assert!(
        tool.status_message.contains("OOM killer") && tool.status_message.contains("64 MiB"),
        "{}",
        tool.status_message
    );
    assert_eq!(tool.str(attr::PROCESS_SIGNAL), "SIGKILL");
    let oom = tool
        .events
        .iter()
        .find(|e| e.name == event::OOM_KILL)
        .expect("an OOM event");
    assert_eq!(
        oom.attrs.get(attr::MEMORY_LIMIT),
        Some(&Val::Int(limit as i64))
    );
    let rss = match oom.attrs.get(attr::OOM_RSS) {
        Some(Val::Int(b)) => *b,
        other => panic!("{other:?}"),
    };
    // Resident at the kill: up to the limit, plus file pages charged to other cgroups.
    assert!(
        rss > 32 * 1048576 && rss < limit as i64 + 16 * 1048576,
        "rss at the kill: {rss}"
    );
    // Read from the dying process when it can be; else its task's limit stands in.
    if let Some(cgroup) = oom.attrs.get(attr::OOM_CGROUP) {
        let name = cg.0.file_name().unwrap().to_string_lossy().to_string();
        assert!(cgroup.str().ends_with(&name), "{cgroup:?}");
    }
    // Its task (in a plain command run, the run's direct child) failed too.
    let task = spans
        .iter()
        .find(|s| s.is_task() && s.str(attr::CICD_PIPELINE_TASK_NAME) == "workload")
        .unwrap();
    assert_eq!(task.status, 2);
    assert!(
        task.status_message.contains("OOM killer"),
        "{}",
        task.status_message
    );
    // The counter to alert on.
    let text = std::fs::read_to_string(metrics_file).unwrap();
    let last = text.lines().last().unwrap();
    let points = flatten_metrics(serde_json::from_str(last).unwrap());
    let kills: f64 = points
        .iter()
        .filter(|p| p.name == metric::OOM_KILLS && p.str(attr::TOOL_NAME) == "workload")
        .map(|p| p.value)
        .sum();
    assert_eq!(kills, 1.0);
}

/// The victim's limit as the OOM killer chose it, read by the probe: by the time user space
/// looks the victim has gone from its cgroup, and here nothing else of its task is left in
/// it (the shell that joined it became the victim), so only the kernel can say.
#[tokio::test]
async fn the_probe_reads_the_oom_victims_limit_as_it_is_chosen() {
    let limit = 48 * 1048576;
    let cg = MemoryCgroup::new(limit);
    let strict = pipetrace_config::Probes {
        strict: true,
        ..Default::default()
    };
    let (mut events, _probes) = pipetrace_host::source::open(&strict, false).unwrap();
    // `tail` keeps a line that never ends: all of /dev/zero, until the limit stops it.
    let script = format!(
        "echo $$ > {}/cgroup.procs && exec tail /dev/zero",
        cg.0.display()
    );
    let mut child = std::process::Command::new("sh")
        .args(["-c", &script])
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut out = Vec::new();
    let (found, trigger) = loop {
        assert!(
            std::time::Instant::now() < deadline,
            "no OOM event for {}",
            child.id()
        );
        events.next_batch(&mut out).await.unwrap();
        let oom = out.drain(..).find_map(|e| match e {
            pipetrace_core::event::Event::Oom {
                pid,
                limit_bytes,
                trigger,
                ..
            } if pid == child.id() => Some((limit_bytes, trigger)),
            _ => None,
        });
        if let Some(found) = oom {
            break found;
        }
    };
    let status = child.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    assert_eq!(found, Some(limit));
    // `tail` itself asked for the memory that was not there.
    assert_eq!(trigger, Some((child.id(), "tail".to_string())));
}

/// Two processes under one memory limit: a large one that holds its memory and sleeps, and
/// a small one that keeps allocating. The OOM killer takes the large one (the most memory),
/// though the small one's allocation set it off: the probe names both.
#[tokio::test]
async fn the_probe_names_the_process_whose_allocation_set_off_the_oom_killer() {
    let cg = MemoryCgroup::new(96 * 1048576);
    let strict = pipetrace_config::Probes {
        strict: true,
        ..Default::default()
    };
    let (mut events, _probes) = pipetrace_host::source::open(&strict, false).unwrap();
    let procs = cg.0.join("cgroup.procs");
    let join = |what: &str| format!("echo $$ > {} && exec {what}", procs.display());
    // 72 MiB written (so resident), then a sleep; python's own memory on top.
    let holder =
        join("python3 -c 'b = bytes(range(256)) * (72 << 12); import time; time.sleep(120)'");
    let mut holder = std::process::Command::new("sh")
        .args(["-c", &holder])
        .spawn()
        .unwrap();
    let held = std::time::Instant::now() + std::time::Duration::from_secs(20);
    // cgroup v2's figure, else v1's.
    let used = || {
        (["memory.current", "memory.usage_in_bytes"].iter())
            .find_map(|f| std::fs::read_to_string(cg.0.join(f)).ok())
            .map_or(0, |s| s.trim().parse::<u64>().unwrap_or(0))
    };
    while used() < 72 << 20 {
        assert!(
            std::time::Instant::now() < held,
            "the holder never held 72 MiB"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let mut grower = std::process::Command::new("sh")
        .args(["-c", &join("tail /dev/zero")])
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut out = Vec::new();
    let trigger = loop {
        assert!(std::time::Instant::now() < deadline, "no OOM event");
        events.next_batch(&mut out).await.unwrap();
        let oom = out.drain(..).find_map(|e| match e {
            pipetrace_core::event::Event::Oom { pid, trigger, .. } if pid == holder.id() => {
                Some(trigger)
            }
            _ => None,
        });
        if let Some(t) = oom {
            break t;
        }
    };
    let _ = grower.kill();
    let _ = (grower.wait(), holder.wait());
    assert_eq!(trigger, Some((grower.id(), "tail".to_string())));
}

#[test]
fn a_killed_tool_names_the_signal_and_its_sender() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "{WORKLOAD} sleep 30000 & p=$!; sleep 0.3; kill -TERM $p; wait $p; echo $$ > {}/shpid",
        dir.path().display()
    );
    let (spans, _, o) = run(dir.path(), &script);
    assert!(o.status.success(), "{}", stderr(&o));
    let tool = workload(&spans);
    assert_eq!(tool.str(attr::PROCESS_SIGNAL), "SIGTERM");
    let ev = tool
        .events
        .iter()
        .find(|e| e.name == event::SIGNAL)
        .expect("a signal event");
    let sh: i64 = std::fs::read_to_string(dir.path().join("shpid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(
        ev.attrs.get(attr::PROCESS_SIGNAL),
        Some(&Val::Str("SIGTERM".into()))
    );
    assert_eq!(ev.attrs.get(attr::SIGNAL_SENDER_PID), Some(&Val::Int(sh)));
    assert_eq!(
        ev.attrs.get(attr::SIGNAL_SENDER),
        Some(&Val::Str("sh".into()))
    );
    assert_eq!(
        ev.attrs.get(attr::SIGNAL_ORIGIN),
        Some(&Val::Str("process".into()))
    );
    assert!(tool.events.iter().all(|e| e.name != event::OOM_KILL));
}

#[test]
fn a_segfault_is_raised_by_the_kernel() {
    let dir = tempfile::tempdir().unwrap();
    let (spans, _, o) = run(dir.path(), &format!("{WORKLOAD} segv; true"));
    assert!(o.status.success(), "{}", stderr(&o));
    let tool = workload(&spans);
    assert_eq!(tool.str(attr::PROCESS_SIGNAL), "SIGSEGV");
    let ev = tool
        .events
        .iter()
        .find(|e| e.name == event::SIGNAL)
        .unwrap();
    assert_eq!(
        ev.attrs.get(attr::SIGNAL_ORIGIN),
        Some(&Val::Str("kernel".into()))
    );
}

#[test]
fn a_clean_run_has_no_end_events() {
    let dir = tempfile::tempdir().unwrap();
    let (spans, _, o) = run(
        dir.path(),
        &format!("{WORKLOAD} burn 100; {WORKLOAD} alloc 16; true"),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(spans.len() >= 3);
    for s in &spans {
        assert!(s.flags().is_empty(), "{}: {:?}", s.name, s.flags());
        assert_ne!(s.status, 2, "{}", s.name);
    }
}

/// Stalls come from the live sampler, which runs with metric export off too: turning
/// metrics off must not silently turn stall detection off.
#[test]
fn a_stall_is_found_with_metrics_turned_off() {
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("PIPETRACE_METRICS__ENABLED", "false"),
        ("PIPETRACE_METRICS__INTERVAL", "250ms"),
        ("PIPETRACE_DIAGNOSIS__STALL_AFTER", "1s"),
    ];
    let script = format!("{WORKLOAD} sleep 3000");
    let (spans, o) = pipetrace_e2e::run_script_with(dir.path(), &script, &env);
    assert!(o.status.success(), "{}", stderr(&o));
    let stalled: Vec<&RecvSpan> = spans
        .iter()
        .filter(|s| s.events.iter().any(|e| e.name == event::STALL))
        .collect();
    assert!(
        !stalled.is_empty(),
        "no stall event with metrics off: {:?}",
        spans
            .iter()
            .map(|s| (&s.name, &s.events))
            .collect::<Vec<_>>()
    );
    assert!(
        !dir.path().join("t.metrics.otlp.jsonl").exists(),
        "metrics were off, yet a metrics file was written"
    );
}

/// A task that works 1.5 s, then sleeps 6 s: its CPU use alone (20%) is neither busy nor idle,
/// and no single quiet stretch reaches `diagnosis.stall_after`; it did nothing most of its
/// life, so it is idle. A sleep alone, likewise; neither has a wait the kernel counted from
/// boot (this runs minutes after boot in CI).
#[test]
fn a_task_that_does_nothing_most_of_its_life_is_idle() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!("sh -c '{WORKLOAD} burn 1500; sleep 6'; sh -c 'sleep 4'; true");
    let (spans, o) = pipetrace_e2e::run_script_with(
        dir.path(),
        &script,
        &[("PIPETRACE_METRICS__INTERVAL", "250ms")],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let tasks: Vec<&RecvSpan> = spans.iter().filter(|s| s.is_task()).collect();
    assert_eq!(tasks.len(), 2, "{tasks:?}");
    for t in tasks {
        assert_eq!(
            t.str(attr::BOTTLENECK),
            "idle",
            "{}: {}",
            t.str("process.command_line"),
            t.str(attr::BOTTLENECK_REASON)
        );
    }
    // No tool shows a wait longer than it lived.
    for t in spans.iter().filter(|s| s.is_tool()) {
        let life = (t.end - t.start) as f64 / 1e9;
        for k in [
            attr::DISK_WAIT_TIME,
            attr::MEMORY_WAIT_TIME,
            attr::CPU_RUN_QUEUE_DELAY,
        ] {
            assert!(t.num(k).unwrap_or(0.0) <= life + 0.001, "{k} of {t:?}");
        }
    }
}
