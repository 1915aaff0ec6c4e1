//! Per-process accounting against the kernel's own rusage (wait4): workloads of known size
//! run under `pipetrace run`, reaped by a harness that records what wait4 says.
use std::{
    io::{Read, Write},
    path::Path,
};

use pipetrace_e2e::{metrics::flatten_metrics, pipetrace, read_jsonl, spans::RecvSpan, stderr};
use pipetrace_semconv::attr;
use serde_json::Value;

const WORKLOAD: &str = env!("CARGO_BIN_EXE_workload");
const RUSAGE_OF: &str = env!("CARGO_BIN_EXE_rusage-of");

/// Runs the workload under pipetrace; returns its tool span and wait4's rusage for it.
fn traced(dir: &Path, args: &[&str]) -> (RecvSpan, Value) {
    traced_reaped_after(dir, args, None)
}

/// As [`traced`], the workload left unreaped for `reap_after_ms` after it ended.
fn traced_reaped_after(dir: &Path, args: &[&str], reap_after_ms: Option<u64>) -> (RecvSpan, Value) {
    traced_with(dir, args, &[("RUSAGE_OF_REAP_AFTER_MS", reap_after_ms)])
}

/// Runs ARGS under the agent with `rusage-of`'s options set (see tests/src/bin/rusage_of.rs).
fn traced_with(dir: &Path, args: &[&str], options: &[(&str, Option<u64>)]) -> (RecvSpan, Value) {
    let out = dir.join("t.otlp.jsonl");
    let ru = dir.join("rusage.json");
    let mut cmd = pipetrace();
    for (name, value) in options {
        if let Some(v) = value {
            cmd.env(name, v.to_string());
        }
    }
    let o = cmd
        .arg("run")
        .arg("--output")
        .arg(&out)
        .arg("--")
        .arg(RUSAGE_OF)
        .arg(&ru)
        .arg("--")
        .arg(WORKLOAD)
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let truth: Value = serde_json::from_str(&std::fs::read_to_string(&ru).unwrap()).unwrap();
    let spans = read_jsonl(&out);
    let pid = truth["pid"].as_i64().unwrap();
    let tool = spans
        .into_iter()
        .find(|s| s.is_tool() && s.int(attr::PROCESS_PID) == Some(pid))
        .unwrap_or_else(|| panic!("no tool span for pid {pid}"));
    assert!(
        tool.attr(attr::USAGE_MISSING).is_none(),
        "usage reported: {tool:?}"
    );
    (tool, truth)
}

fn within(what: &str, ours: f64, truth: f64, rel: f64, abs: f64) {
    let tol = (truth.abs() * rel).max(abs);
    assert!(
        (ours - truth).abs() <= tol,
        "{what}: pipetrace {ours} vs kernel rusage {truth} (tolerance {tol})"
    );
}

/// CPU: 2% or 20 ms, for user, system and their sum.
fn cpu_matches(tool: &RecvSpan, truth: &Value) {
    let (u, s) = (
        tool.num(attr::CPU_USER_TIME).unwrap(),
        tool.num(attr::CPU_SYSTEM_TIME).unwrap(),
    );
    let (tu, ts) = (
        truth["user_s"].as_f64().unwrap(),
        truth["system_s"].as_f64().unwrap(),
    );
    within("user CPU", u, tu, 0.02, 0.020);
    within("system CPU", s, ts, 0.02, 0.020);
    within("CPU", u + s, tu + ts, 0.02, 0.020);
}

/// Memory, faults and context switches (2%, or 2 faults or switches) as wait4 gives them.
fn counters_match(tool: &RecvSpan, truth: &Value) {
    let switches = 2.0;
    let n = |k| tool.num(k).unwrap();
    let t = |k: &str| truth[k].as_f64().unwrap();
    within(
        "maxrss",
        n(attr::MEMORY_MAXRSS),
        t("maxrss_kib") * 1024.0,
        0.02,
        0.0,
    );
    // The program's own peak never exceeds maxrss, which also counts the image it was
    // forked with.
    assert!(n(attr::MEMORY_PEAK) <= n(attr::MEMORY_MAXRSS) * 1.02);
    within(
        "minor faults",
        n(attr::MEMORY_MINOR_FAULTS),
        t("minflt"),
        0.02,
        2.0,
    );
    within(
        "major faults",
        n(attr::MEMORY_MAJOR_FAULTS),
        t("majflt"),
        0.02,
        2.0,
    );
    within(
        "voluntary switches",
        n(attr::CONTEXT_SWITCHES_VOLUNTARY),
        t("nvcsw"),
        0.02,
        switches,
    );
    within(
        "involuntary switches",
        n(attr::CONTEXT_SWITCHES_INVOLUNTARY),
        t("nivcsw"),
        0.02,
        switches,
    );
    within(
        "storage reads",
        n(attr::DISK_READ_BYTES),
        t("inblock") * 512.0,
        0.02,
        0.0,
    );
    within(
        "storage writes",
        n(attr::DISK_WRITE_BYTES),
        t("oublock") * 512.0,
        0.02,
        0.0,
    );
}

#[test]
fn a_known_allocation_touched_page_by_page() {
    let dir = tempfile::tempdir().unwrap();
    let (tool, truth) = traced(dir.path(), &["alloc", "256"]);
    counters_match(&tool, &truth);
    cpu_matches(&tool, &truth);
    let peak = tool.num(attr::MEMORY_PEAK).unwrap();
    assert!(peak >= 256.0 * 1048576.0, "256 MiB touched, peak {peak}");
    // Its own image dominates: its peak is the kernel's maxrss.
    let maxrss = truth["maxrss_kib"].as_f64().unwrap() * 1024.0;
    within("peak", peak, maxrss, 0.02, 0.0);
    // One minor fault per touched page at least.
    assert!(tool.num(attr::MEMORY_MINOR_FAULTS).unwrap() >= 65536.0);
}

#[test]
fn a_cpu_burner_single_and_multi_threaded() {
    let dir = tempfile::tempdir().unwrap();
    let (tool, truth) = traced(dir.path(), &["burn", "400"]);
    cpu_matches(&tool, &truth);
    counters_match(&tool, &truth);
    let cpu = tool.num(attr::CPU_USER_TIME).unwrap() + tool.num(attr::CPU_SYSTEM_TIME).unwrap();
    assert!(cpu >= 0.4, "400 ms of CPU: {cpu}");
    // Threads' time is the process's: summed over every thread, as wait4 does.
    let (tool, truth) = traced(dir.path(), &["threads", "2", "300"]);
    cpu_matches(&tool, &truth);
    let cpu = tool.num(attr::CPU_USER_TIME).unwrap() + tool.num(attr::CPU_SYSTEM_TIME).unwrap();
    assert!(cpu >= 0.6, "two threads of 300 ms CPU each: {cpu}");
}

/// A parent that reaps late (here 3 s, past `probes.usage_wait`) gets no reap-time report in
/// time: the figures taken as the last thread exited stand in, and match wait4's. CPU to the
/// microsecond, the exit's own way out included (unmapping 128 MiB takes milliseconds after
/// the exit tracepoint), and the split held to what a /proc read reported mid-run.
#[test]
fn figures_taken_at_exit_match_wait4_when_the_reap_comes_late() {
    let dir = tempfile::tempdir().unwrap();
    for args in [&["threads", "3", "200"][..], &["alloc", "128"][..]] {
        // Read as `ps` would while it runs: the kernel's final split keeps what was read.
        let options = [
            ("RUSAGE_OF_REAP_AFTER_MS", Some(3000)),
            ("RUSAGE_OF_READ_STAT_MS", Some(5)),
        ];
        let (tool, truth) = traced_with(dir.path(), args, &options);
        assert_eq!(tool.int(attr::USAGE_AT_EXIT), Some(1), "{args:?}: {tool:?}");
        for (ours, theirs) in [
            (attr::CPU_USER_TIME, "user_s"),
            (attr::CPU_SYSTEM_TIME, "system_s"),
        ] {
            // wait4 gives microseconds, cut; ours are nanoseconds.
            let (ours, truth) = (tool.num(ours).unwrap(), truth[theirs].as_f64().unwrap());
            assert!(
                (ours - truth).abs() < 2e-6,
                "{args:?} {theirs}: pipetrace {ours} s vs wait4's {truth} s"
            );
        }
        // Preemptions on the way out, after the exit tracepoint, are booked by the last
        // switch: even under load the counts match.
        counters_match(&tool, &truth);
    }
}

#[test]
fn a_writer_of_known_bytes_with_fsync() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("out.bin");
    let n = 20 * 1024 * 1024;
    let (tool, truth) = traced(
        dir.path(),
        &["write", file.to_str().unwrap(), &n.to_string()],
    );
    counters_match(&tool, &truth);
    cpu_matches(&tool, &truth);
    assert_eq!(tool.num(attr::IO_WRITE_BYTES).unwrap(), n as f64);
    within(
        "bytes dirtied towards storage",
        tool.num(attr::DISK_WRITE_BYTES).unwrap(),
        n as f64,
        0.02,
        0.0,
    );
}

#[test]
fn a_two_millisecond_process_is_measured_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let (tool, truth) = traced(dir.path(), &["short"]);
    cpu_matches(&tool, &truth);
    counters_match(&tool, &truth);
    let cpu = tool.num(attr::CPU_USER_TIME).unwrap() + tool.num(attr::CPU_SYSTEM_TIME).unwrap();
    assert!(cpu >= 0.002, "it used 2 ms of CPU: {cpu}");
    let wall = (tool.end - tool.start) as f64 / 1e9;
    assert!(wall < 0.5, "a short process: {wall} s");
}

#[test]
fn a_socket_sender_of_known_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let peer = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).unwrap();
        s.write_all(&(buf.len() as u32).to_le_bytes()).unwrap();
        buf.len()
    });
    let n = 3 * 1024 * 1024 + 17;
    let (tool, truth) = traced(dir.path(), &["send", &addr, &n.to_string()]);
    assert_eq!(peer.join().unwrap(), n);
    cpu_matches(&tool, &truth);
    assert_eq!(tool.num(attr::NETWORK_TRANSMIT_BYTES), Some(n as f64));
    assert_eq!(tool.num(attr::NETWORK_RECEIVE_BYTES), Some(4.0));
}

/// A map of per-process sums too small for what runs at once (4 entries, 16 processes whose
/// threads exit) drops updates: the run says how many in its summary and in its metrics,
/// apart from the ring buffer's losses. With the default size nothing is lost.
#[test]
fn a_full_map_of_per_process_sums_is_counted_and_said() {
    let script = format!("for i in $(seq 16); do {WORKLOAD} threads 3 300 & done; wait");
    let lost = |entries: &str| {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("t.otlp.jsonl");
        let o = pipetrace()
            .env("PIPETRACE_PROBES__ACCUMULATOR_ENTRIES", entries)
            .args(["run", "-o"])
            .arg(&out)
            .args(["--", "sh", "-c", &script])
            .current_dir(dir.path())
            .output()
            .unwrap();
        let err = stderr(&o);
        assert!(o.status.success(), "{err}");
        let said = (err.lines())
            .find_map(|l| l.strip_prefix("pipetrace: WARNING "))
            .and_then(|l| l.split_once(" updates of per-process sums lost"))
            .map(|(n, _)| n.parse::<u64>().unwrap());
        let metrics = std::fs::read_to_string(dir.path().join("t.metrics.otlp.jsonl")).unwrap();
        let counted = (metrics.lines())
            .flat_map(|l| flatten_metrics(serde_json::from_str(l).unwrap()))
            .filter(|p| p.name == pipetrace_semconv::metric::AGENT_ACCUMULATOR_LOST)
            .map(|p| p.value as u64)
            .max()
            .expect("the counter is exported");
        (said, counted)
    };
    let (said, counted) = lost("4");
    assert!(counted > 0, "a map of 4 overflowed: {counted}");
    assert_eq!(
        said,
        Some(counted),
        "the summary says what the metric counts"
    );
    assert_eq!(lost("65536"), (None, 0), "the default holds them all");
}
