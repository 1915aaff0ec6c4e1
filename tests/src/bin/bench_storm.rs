//! Fork/exec storm benchmark: prints figures, asserts nothing.
//!
//!     make bench        (or: cargo build --release -p pipetrace -p pipetrace-e2e &&
//!                        ./target/release/bench-storm [PROCESSES] [REPEATS] [--files]
//!                        [--memory MAX] [--traces-only])
//!
//! A shell loop starts PROCESSES `/bin/true` processes. Each repeat times it four ways, back
//! to back so that drift on a shared machine hits all alike: alone; under a freshly started
//! `pipetrace agent` that traces it (a run rule matches the loop); wrapped by `pipetrace
//! run` (which includes loading the probes and flushing at the end); under bpftrace
//! printing every exec and exit, when installed. Ratios are per repeat; the median and the
//! range are printed, with the agent's CPU per process, the kernel's count of each probe's
//! runs and run time, and the agent's own report. Then memory in both modes at 1k, 10k,
//! 100k and 1M processes (`--memory MAX` stops earlier; 0 skips it), and a long-lived
//! agent serving 1,000 short runs, the size of its metric export over time; spans and
//! bytes per trace under the default trace budget. `--files`
//! turns on file capture (`files.enabled`) in both modes, for its cost.
use std::{path::Path, time::Duration};

use pipetrace_e2e::{
    Agent,
    bench::{bpftrace, compare, kernel, ladder, median},
};

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

fn print_storms(s: &compare::Storms) {
    println!(
        "  alone (median):            {:.3} s",
        median(s.alone.clone())
    );
    println!(
        "  wall ratio, agent:         {}",
        compare::median_range(&s.agent)
    );
    println!(
        "  wall ratio, pipetrace run: {} (includes probe load, flush)",
        compare::median_range(&s.run)
    );
    println!(
        "    its start and end:       {:.0} and {:.0} ms (medians); less them: {}",
        median(s.run_start.clone()) * 1e3,
        median(s.run_end.clone()) * 1e3,
        compare::median_range(&compare::without_edges(s))
    );
    match &s.bpftrace_mem {
        Some(m) => println!(
            "  wall ratio, bpftrace:      {} (printing every exec and exit, {} lines; peak RSS \
             {:.1} MiB, Pss {:.1} MiB)",
            compare::median_range(&s.bpftrace),
            s.bpftrace_lines,
            m.peak,
            m.pss
        ),
        None => println!(
            "  bpftrace: not installed or did not start ({}): left out",
            bpftrace::INSTALL
        ),
    }
    let (steals, walls) = compare::steal_and_wall(&s.untraced);
    if let Some((slope, r)) = compare::steal_fit(&steals, &walls) {
        let adjusted = |p: &[compare::Paired]| match p.is_empty() {
            true => "-".to_string(),
            false => compare::median_range(&compare::steal_adjusted(p, slope)),
        };
        println!(
            "  steal (untraced storms):   median {:.1}% of the CPUs; wall follows it at r = \
             {r:.2}, {:.2} s per 1%",
            median(steals.clone()) * 100.0,
            slope / 100.0
        );
        println!(
            "  ratios less steal:         agent {}, run {}, bpftrace {}",
            adjusted(&s.agent_storms),
            adjusted(&s.run_storms),
            adjusted(&s.bpftrace_storms)
        );
    } else {
        println!("  steal (untraced storms):   constant or not counted: no ratios less steal");
    }
    println!(
        "  agent CPU per process:     {:.0} µs (median; all its work, file export included)",
        median(s.agent_cpu_us.clone())
    );
    println!(
        "  storm's own CPU per process: {:.0} µs alone, {:.0} µs under the agent (medians)",
        median(s.storm_cpu_alone_us.clone()),
        median(s.storm_cpu_agent_us.clone())
    );
    for (i, r) in s.reports.iter().enumerate() {
        println!("  agent report {}:            {r}", i + 1);
    }
}

fn print_probes(n: usize, cfg: &Path, dir: &Path) {
    let Some(progs) = kernel::under_storm(n, cfg, dir) else {
        println!(
            "  probes' run counts: need kernel.bpf_stats_enabled and bpftool ({})",
            kernel::INSTALL
        );
        return;
    };
    println!("  probes over {n} processes (the kernel's bpf_stats):");
    let mut total = 0.0;
    for (name, p) in &progs {
        let per_process = p.ns as f64 / n as f64;
        total += per_process;
        println!(
            "    {name:<20} {:>8} runs, {:>6.0} ns per run, {:>6.0} ns per process",
            p.runs,
            p.ns as f64 / p.runs.max(1) as f64,
            per_process
        );
    }
    println!("    all probes: {total:.0} ns per process");
}

fn print_memory(max: usize, dir: &Path) {
    let counts: Vec<usize> = [1_000, 10_000, 100_000, 1_000_000]
        .into_iter()
        .filter(|&c| c <= max)
        .collect();
    if counts.is_empty() {
        return;
    }
    let cfg = dir.join("memory.yaml");
    let report = dir.join("memory.report.html");
    std::fs::write(
        &cfg,
        format!("{}report:\n  path: {}\n", STORM_RULE, report.display()),
    )
    .expect("write config");
    println!("memory (MiB), spans over OTLP/gRPC to a sink that keeps nothing:");
    println!("{}", ladder::HEADER);
    let (rungs, said) = ladder::agent(&counts, &cfg);
    for r in &rungs {
        println!("{}", ladder::row("agent", r));
    }
    for &n in &counts {
        let (r, _) = ladder::run(n, &cfg, dir);
        println!("{}", ladder::row("run", &r));
    }
    println!("  agent report: {said}");
}

/// Every process its own span (no trace budget): the per-process cost measured here, and
/// the spans the memory ladder waits for; [`print_trace_sizes`] shows the budget's traces.
const STORM_RULE: &str = "export:\n  max_trace_bytes: 0\nattribution:\n  run_rules:\n    \
     - match: { argv: 'pipetrace-storm' }\n      name: storm\n";

/// Spans and OTLP protobuf bytes per trace, as Grafana Tempo counts them, of `pipetrace run`
/// storms of each count under the default trace budget (`export.max_trace_bytes`).
fn print_trace_sizes(max: usize, at: Option<usize>, dir: &Path) {
    let counts = match at {
        Some(n) => vec![n],
        None => vec![1_000, 20_000, 100_000, 1_000_000],
    };
    println!("traces under the default budget (5,000,000 bytes; pipetrace run, OTLP/gRPC):");
    println!("  processes   traces   spans (all)   largest trace: spans, bytes");
    let row = |what: &str, (sizes, wall): (pipetrace_e2e::tempo::TraceSizes, f64)| {
        let (spans, (bytes, in_it)) = (sizes.spans(), sizes.largest());
        let traces = sizes.traces.len();
        println!(
            "  {what:>9}   {traces:>6}   {spans:>11}   {in_it:>6}, {bytes:>9}   ({wall:.1} s)"
        );
    };
    for n in counts.into_iter().filter(|&c| c <= max) {
        row(&n.to_string(), ladder::trace_sizes(n, dir));
    }
    if at.is_some() {
        return;
    }
    // The demo's Snakemake pipeline, and the real Nextflow's tasks with metrics on.
    let demo = pipetrace_e2e::demo_pipeline();
    row(
        "snakemake",
        ladder::traced_sizes(&["snakemake", "--cores", "2"], demo.path()),
    );
    let nf = tempfile::tempdir().expect("tempdir");
    let main_nf = "process STEP {\n    tag \"s${i}\"\n    input:\n    val i\n    script:\n    \
                   \"\"\"\n    sleep 1.2; sort -r ${projectDir}/in.txt | head -2 > out.txt\n    \
                   \"\"\"\n}\n\nworkflow {\n    STEP(Channel.of(0..7))\n}\n";
    std::fs::write(nf.path().join("main.nf"), main_nf).expect("write main.nf");
    std::fs::write(nf.path().join("in.txt"), "b\na\nc\n").expect("write input");
    let launcher = pipetrace_e2e::nextflow::launcher();
    let nextflow = [launcher.to_str().unwrap(), "run", "main.nf", "-with-trace"];
    row("nextflow", ladder::traced_sizes(&nextflow, nf.path()));
}

/// The agent under the default budget, a run rule naming the storm: its traces' sizes, its
/// memory at the end and its report.
fn print_agent_trace_sizes(n: usize, dir: &Path) {
    let cfg = dir.join("agent-budget.yaml");
    let rule = STORM_RULE.replace("export:\n  max_trace_bytes: 0\n", "");
    std::fs::write(&cfg, rule).expect("write config");
    let (sizes, wall, mem, said) = ladder::agent_trace_sizes(n, &cfg);
    let (spans, (bytes, in_it)) = (sizes.spans(), sizes.largest());
    println!("the agent under the default budget, a storm of {n} processes ({wall:.1} s):");
    println!(
        "  {} traces, {spans} spans, largest {in_it} spans, {bytes} bytes; memory at the end: \
         peak RSS {:.1} MiB, real cost at peak {:.1} MiB, private {:.1} MiB",
        sizes.traces.len(),
        mem.peak,
        mem.real_peak(),
        mem.private
    );
    println!("  agent report: {said}");
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let numbers: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let n = numbers.first().copied().unwrap_or(20_000);
    let repeats = numbers.get(1).copied().unwrap_or(3).max(1);
    let files = args.iter().any(|a| a == "--files");
    let memory_max = (args.iter().position(|a| a == "--memory"))
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir().expect("tempdir");
    // `--traces-only`: the trace budget's rows alone, up to `--memory MAX` processes.
    // `--at N`: only a storm of N processes, under `pipetrace run` and under the agent.
    let at: Option<usize> =
        (args.iter().position(|a| a == "--at")).and_then(|i| args.get(i + 1)?.parse().ok());
    if args.iter().any(|a| a == "--traces-only") {
        print_trace_sizes(memory_max, at, dir.path());
        return print_agent_trace_sizes(at.unwrap_or(n), dir.path());
    }
    let cfg = dir.path().join("bench.yaml");
    let capture = if files {
        "files:\n  enabled: true\n"
    } else {
        ""
    };
    std::fs::write(&cfg, format!("{STORM_RULE}{capture}")).expect("write config");
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let what = if files { ", files captured" } else { "" };
    println!("fork/exec storm: {n} processes x {repeats} repeats, {cpus} CPUs{what}");
    let with_bpftrace = !files && bpftrace::version().is_some();
    let s = compare::storms(n, repeats, &cfg, dir.path(), with_bpftrace);
    print_storms(&s);
    print_probes(n, &cfg, dir.path());
    if !files {
        print_memory(memory_max, dir.path());
        print_trace_sizes(memory_max, None, dir.path());
        export_over_runs(1000, dir.path());
    }
}
