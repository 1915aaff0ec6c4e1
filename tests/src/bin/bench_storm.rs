//! Fork/exec storm benchmark: prints figures, asserts nothing.
//!
//!     cargo build --release -p pipetrace && \
//!     cargo run --release -p pipetrace-e2e --bin bench-storm -- [PROCESSES] [REPEATS]
//!
//! Times a shell loop starting PROCESSES `/bin/true` processes: alone, then under a running
//! `pipetrace agent` that traces it (a run rule matches the loop), then wrapped by
//! `pipetrace run`. Reports the ratios, the agent's lost events and its peak RSS.
use std::{
    io::BufRead,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use pipetrace_e2e::{pipetrace, read_jsonl};

fn storm(n: usize) -> Command {
    let mut c = Command::new("bash");
    let script = format!("i=0; while [ $i -lt {n} ]; do /bin/true; i=$((i+1)); done");
    // $0 names the loop so the agent's run rule can find it.
    c.args(["-c", &script, "pipetrace-storm"]);
    c
}

fn time(mut c: Command) -> Duration {
    let t = Instant::now();
    let st = c.stdout(Stdio::null()).status().expect("run storm");
    assert!(st.success(), "storm failed: {st:?}");
    t.elapsed()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let n = args.first().copied().unwrap_or(20_000);
    let repeats = args.get(1).copied().unwrap_or(3);
    let dir = tempfile::tempdir().expect("tempdir");
    println!(
        "fork/exec storm: {n} processes, median of {repeats} runs, {} CPUs",
        num_cpus()
    );

    let base = median((0..repeats).map(|_| time(storm(n))).collect());
    println!("  without pipetrace:        {:>8.3} s", base.as_secs_f64());

    // Agent mode: the steady state of a node agent.
    let cfg = dir.path().join("bench.yaml");
    std::fs::write(
        &cfg,
        "attribution:\n  run_rules:\n    - match: { argv: 'pipetrace-storm' }\n      name: storm\n",
    )
    .expect("write config");
    let out = dir.path().join("agent.otlp.jsonl");
    let mut agent = pipetrace()
        .env("PIPETRACE_LOG", "info")
        .args([
            "-c",
            cfg.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "agent",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .expect("start agent (build it: cargo build --release -p pipetrace)");
    let mut lines = std::io::BufReader::new(agent.stderr.take().unwrap()).lines();
    for line in lines.by_ref() {
        let line = line.expect("agent stderr");
        if line.contains("pipetrace agent watching") {
            break;
        }
    }
    let with_agent = median((0..repeats).map(|_| time(storm(n))).collect());
    std::thread::sleep(Duration::from_secs(2));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(agent.id() as i32, libc::SIGTERM) };
    let final_line = lines
        .map_while(Result::ok)
        .find(|l| l.contains("pipetrace agent stopped"))
        .unwrap_or_default();
    agent.wait().expect("agent exit");
    let spans = read_jsonl(&out);
    let tools = spans
        .iter()
        .filter(|s| s.str("pipetrace.tool.name") == "true")
        .count();
    println!(
        "  under pipetrace agent:    {:>8.3} s   ratio {:.3}",
        with_agent.as_secs_f64(),
        with_agent.as_secs_f64() / base.as_secs_f64()
    );
    println!(
        "  tool spans exported:      {tools} of {} processes",
        n * repeats
    );
    let tail = final_line
        .split("stopped: ")
        .nth(1)
        .unwrap_or("(no final report)");
    println!("  agent report:             {tail}");

    // Run mode: includes loading the probes and flushing at the end.
    let wrapped = median(
        (0..repeats)
            .map(|_| {
                let mut c = pipetrace();
                let out = dir.path().join("run.otlp.jsonl");
                let script = format!("i=0; while [ $i -lt {n} ]; do /bin/true; i=$((i+1)); done");
                c.args([
                    "-o",
                    out.to_str().unwrap(),
                    "run",
                    "--no-summary",
                    "--",
                    "bash",
                    "-c",
                    &script,
                ]);
                time(c)
            })
            .collect(),
    );
    println!(
        "  under pipetrace run:      {:>8.3} s   ratio {:.3} (includes probe load and flush)",
        wrapped.as_secs_f64(),
        wrapped.as_secs_f64() / base.as_secs_f64()
    );
}

fn num_cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}
