//! Usage for every process: a storm of more processes than the machine has pids (so pids
//! recur), beside a second storm that loads both CPUs and the probes, traced by `pipetrace run`
//! and by `pipetrace agent`. Every process has its kernel figures, and each one's CPU and
//! memory equal what wait4 said.
use std::{collections::HashMap, path::Path, process::Command};

use pipetrace_e2e::{Agent, Background, each_jsonl_span, pipetrace, stderr};
use pipetrace_semconv::attr;
use serde_json::Value;

const STORM_OF: &str = env!("CARGO_BIN_EXE_storm-of");

/// A storm past the machine's pid space (so its own pids recur, whatever else runs), of
/// 50,000 at most where that space is larger.
fn processes() -> usize {
    (pid_max() + 1_000).min(50_000)
}

fn pid_max() -> usize {
    std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(32_768)
}

/// An untraced storm of its own on the same machine, until dropped.
fn second_storm() -> Background {
    Background::shell("while :; do /bin/true; done")
}

/// One storm process as wait4 saw it and as its span says.
struct Pair {
    truth: Value,
    span: pipetrace_e2e::spans::RecvSpan,
}

/// The storm's `/bin/true` spans matched to wait4's records: pids recur (the machine's pid
/// space wraps), so the n-th span of a pid, by start, is the n-th process wait4 reaped with it.
fn pair_up(truth: &Path, spans: &Path) -> (Vec<Pair>, usize) {
    let text = std::fs::read_to_string(truth).unwrap();
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let n = records.len();
    assert_eq!(n, processes(), "the storm ran every process");
    let pids: std::collections::HashSet<i64> =
        records.iter().filter_map(|r| r["pid"].as_i64()).collect();
    assert!(
        n <= pid_max() || pids.len() < n,
        "{n} processes and no pid recurred"
    );
    let mut by_pid: HashMap<i64, Vec<pipetrace_e2e::spans::RecvSpan>> = HashMap::new();
    let mut tools = 0;
    each_jsonl_span(spans, |s| {
        if s.is_tool() && s.str(attr::TOOL_NAME) == "true" {
            tools += 1;
            by_pid
                .entry(s.int(attr::PROCESS_PID).unwrap())
                .or_default()
                .push(s);
        }
    });
    for v in by_pid.values_mut() {
        v.sort_by_key(|s| std::cmp::Reverse(s.start));
    }
    let mut pairs = Vec::new();
    for r in records {
        let pid = r["pid"].as_i64().unwrap();
        let span = by_pid
            .get_mut(&pid)
            .and_then(Vec::pop)
            .unwrap_or_else(|| panic!("no span for the storm's process {r}"));
        pairs.push(Pair { truth: r, span });
    }
    (pairs, tools)
}

/// Every process has figures, and they are wait4's: memory to the page, faults exactly, CPU
/// to its microsecond. wait4 may read a process on another CPU before its last switch-out
/// (the parent wakes while the child still leaves, and under load the child may wait for a
/// CPU to finish leaving): the reap-time figures then exceed it by those microseconds (up to
/// a millisecond is allowed), and are the process's true total. Figures taken at exit (the
/// reap-time report did not come) are completed by the last switch's, and judged alike.
fn judge(pairs: &[Pair]) {
    let (mut at_exit, mut exact) = (0, 0);
    // The most any process's figures exceeded wait4's, in µs.
    let (mut most_over_at_exit, mut most_over_at_reap) = (0i64, 0i64);
    for Pair { truth, span } in pairs {
        assert!(
            span.attr(attr::USAGE_MISSING).is_none(),
            "a process without figures: {span:?}"
        );
        let us = |k| (span.num(k).unwrap() * 1e9).round() as i64 / 1000;
        let cpu = us(attr::CPU_USER_TIME) + us(attr::CPU_SYSTEM_TIME);
        let t_cpu = truth["user_us"].as_i64().unwrap() + truth["system_us"].as_i64().unwrap();
        let maxrss = span.num(attr::MEMORY_MAXRSS).unwrap() as i64 / 1024;
        assert_eq!(
            maxrss,
            truth["maxrss_kib"].as_i64().unwrap(),
            "maxrss KiB: {truth}"
        );
        let minflt = span.num(attr::MEMORY_MINOR_FAULTS).unwrap() as i64;
        assert_eq!(
            minflt,
            truth["minflt"].as_i64().unwrap(),
            "minor faults: {truth}"
        );
        if span.int(attr::USAGE_AT_EXIT) == Some(1) {
            at_exit += 1;
            most_over_at_exit = most_over_at_exit.max(cpu - t_cpu);
            assert!(
                (0..=1_000).contains(&(cpu - t_cpu)),
                "figures at exit: CPU {cpu} µs vs wait4's {t_cpu} µs: {truth} {span:?}"
            );
            continue;
        }
        most_over_at_reap = most_over_at_reap.max(cpu - t_cpu);
        assert!(
            (0..=1_000).contains(&(cpu - t_cpu)),
            "CPU {cpu} µs vs wait4's {t_cpu} µs: {truth} {span:?}"
        );
        exact += usize::from(cpu == t_cpu);
    }
    let reaped = pairs.len() - at_exit;
    eprintln!(
        "{} processes compared with wait4: {exact} of {reaped} reap-time figures equal to the \
         microsecond, {at_exit} taken at exit; most over wait4's: {most_over_at_exit} µs at \
         exit, {most_over_at_reap} µs at reap",
        pairs.len()
    );
    assert!(
        exact * 100 >= reaped * 99,
        "{exact} of {reaped} equal to wait4's"
    );
}

#[test]
fn a_storm_under_pipetrace_run_has_every_processes_figures() {
    let dir = tempfile::tempdir().unwrap();
    let (truth, out) = (
        dir.path().join("truth.jsonl"),
        dir.path().join("t.otlp.jsonl"),
    );
    let _load = second_storm();
    // Every process its own span, to pair each with its truth (a trace budget folds them).
    let o = pipetrace()
        .env("PIPETRACE_EXPORT__MAX_TRACE_BYTES", "0")
        .args(["-o", out.to_str().unwrap(), "run", "--no-summary", "--"])
        .args([
            "sh",
            "-c",
            &format!("{STORM_OF} {} {}; true", processes(), truth.display()),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let (pairs, tools) = pair_up(&truth, &out);
    assert_eq!(tools, processes(), "one tool span per process");
    judge(&pairs);
}

#[test]
fn a_storm_under_the_agent_has_every_processes_figures() {
    let dir = tempfile::tempdir().unwrap();
    let (truth, out) = (
        dir.path().join("truth.jsonl"),
        dir.path().join("a.otlp.jsonl"),
    );
    let cfg = dir.path().join("agent.yaml");
    std::fs::write(
        &cfg,
        "export:\n  max_trace_bytes: 0\nattribution:\n  run_rules:\n    - match: { executable: storm-of }\n      name: storm\n",
    )
    .unwrap();
    let agent = Agent::start(&["-c", cfg.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    let load = second_storm();
    let st = Command::new(STORM_OF)
        .arg(processes().to_string())
        .arg(&truth)
        .status()
        .unwrap();
    assert!(st.success());
    drop(load);
    let report = agent.stop();
    eprintln!("agent: {report}");
    let (pairs, tools) = pair_up(&truth, &out);
    assert_eq!(tools, processes(), "one tool span per process");
    judge(&pairs);
}
