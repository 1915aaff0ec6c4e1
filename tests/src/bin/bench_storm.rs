//! Fork/exec storm benchmark: prints figures, asserts nothing.
//!
//!     make bench        (or: cargo build --release -p pipetrace -p pipetrace-e2e &&
//!                        ./target/release/bench-storm [PROCESSES] [REPEATS] [--files])
//!
//! A shell loop starts PROCESSES `/bin/true` processes. Each repeat times it three ways, back
//! to back so that drift on a shared machine hits all three alike: alone; under a freshly
//! started `pipetrace agent` that traces it (a run rule matches the loop); wrapped by
//! `pipetrace run` (which includes loading the probes and flushing at the end). Ratios are
//! per repeat; the median and the range are printed, with the agent's own report and how
//! many processes had no usage (or figures taken at exit). Then a long-lived agent serves
//! 1,000 short runs and the size of its metric export is printed over time. `--files` turns
//! on file capture (`files.enabled`) in both modes, for its cost.
use std::{path::Path, time::Duration};

use pipetrace_e2e::{
    Agent,
    bench::{median, storm, storm_script, time},
    pipetrace, read_jsonl,
};

/// Times one storm under a fresh agent; returns the time and the agent's final report.
fn under_agent(n: usize, cfg: &Path, out: &Path) -> (Duration, String) {
    let agent = Agent::start(&["-c", cfg.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    let t = time(storm(n));
    (t, agent.stop())
}

/// A long-lived agent serving `runs` short runs, each a pipeline of its own: prints the size
/// of its metric export over time (it follows the work running now, not the runs seen).
fn export_over_runs(runs: usize, dir: &Path) {
    let cfg = dir.join("runs.yaml");
    std::fs::write(
        &cfg,
        "metrics:\n  interval: 250ms\nattribution:\n  run_rules:\n    \
         - match: { argv: 'bench-run-' }\n      name: '{argv3}'\n",
    )
    .expect("write config");
    let out = dir.join("runs.otlp.jsonl");
    let agent = Agent::start(&["-c", cfg.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    for i in 0..runs {
        let _ = std::process::Command::new("bash")
            .args(["-c", "/bin/true; /bin/true", &format!("bench-run-{i}")])
            .status();
    }
    std::thread::sleep(Duration::from_secs(2));
    agent.stop();
    let metrics = dir.join("runs.metrics.otlp.jsonl");
    let text = std::fs::read_to_string(&metrics).unwrap_or_default();
    let sizes: Vec<usize> = text.lines().map(str::len).collect();
    println!("long-lived agent, {runs} runs (one pipeline each), metric export every 250 ms:");
    let step = (sizes.len() / 8).max(1);
    for (i, n) in sizes.iter().enumerate().step_by(step) {
        println!("  export {:>3} of {}: {:>8} bytes", i + 1, sizes.len(), n);
    }
    if let Some(last) = sizes.last() {
        println!("  last export (idle):  {last:>8} bytes");
    }
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let n = args.first().copied().unwrap_or(20_000);
    let repeats = args.get(1).copied().unwrap_or(3).max(1);
    let files = std::env::args().any(|a| a == "--files");
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("bench.yaml");
    let rule =
        "attribution:\n  run_rules:\n    - match: { argv: 'pipetrace-storm' }\n      name: storm\n";
    let capture = if files {
        "files:\n  enabled: true\n"
    } else {
        ""
    };
    std::fs::write(&cfg, format!("{rule}{capture}")).expect("write config");
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let what = if files { ", files captured" } else { "" };
    println!("fork/exec storm: {n} processes x {repeats} repeats, {cpus} CPUs{what}");
    let (mut base, mut agent, mut run, mut reports, mut exported) =
        (vec![], vec![], vec![], vec![], 0);
    let (mut without_usage, mut from_exit) = (0, 0);
    for r in 0..repeats {
        let b = time(storm(n)).as_secs_f64();
        let out = dir.path().join(format!("agent-{r}.otlp.jsonl"));
        let (a, report) = under_agent(n, &cfg, &out);
        let spans = read_jsonl(&out);
        let tools: Vec<_> = spans
            .iter()
            .filter(|s| s.str("pipetrace.tool.name") == "true")
            .collect();
        exported += tools.len();
        without_usage += tools
            .iter()
            .filter(|s| s.attr("pipetrace.usage.missing").is_some())
            .count();
        from_exit += tools
            .iter()
            .filter(|s| s.int("pipetrace.usage.at_exit") == Some(1))
            .count();
        let mut wrapped = pipetrace();
        let run_out = dir.path().join(format!("run-{r}.otlp.jsonl"));
        wrapped.args([
            "-c",
            cfg.to_str().unwrap(),
            "-o",
            run_out.to_str().unwrap(),
            "run",
            "--no-summary",
            "--",
            "bash",
            "-c",
            &storm_script(n),
        ]);
        let w = time(wrapped).as_secs_f64();
        println!(
            "  repeat {}: alone {b:.3} s, under agent {:.3} s, under run {w:.3} s",
            r + 1,
            a.as_secs_f64()
        );
        base.push(b);
        agent.push(a.as_secs_f64() / b);
        run.push(w / b);
        reports.push(report);
    }
    let range = |v: &[f64]| {
        let (lo, hi) = v
            .iter()
            .fold((f64::MAX, f64::MIN), |(l, h), x| (l.min(*x), h.max(*x)));
        format!("{lo:.3}..{hi:.3}")
    };
    println!("  alone (median):            {:.3} s", median(base.clone()));
    println!(
        "  wall ratio, agent:         {:.3} (range {})",
        median(agent.clone()),
        range(&agent)
    );
    println!(
        "  wall ratio, pipetrace run: {:.3} (range {}; includes probe load, flush)",
        median(run.clone()),
        range(&run)
    );
    println!(
        "  tool spans exported:       {exported} of {} processes",
        n * repeats
    );
    println!(
        "  processes without usage:   {without_usage} (figures taken at exit: {from_exit}; \
         the kernel skipped their reap-time report)"
    );
    for (i, r) in reports.iter().enumerate() {
        println!("  agent report {}:            {r}", i + 1);
    }
    if !files {
        export_over_runs(1000, dir.path());
    }
}
