//! The performance bench: prints figures and writes them to docs/performance.md; asserts
//! nothing about time.
//!
//!     make bench-perf     (or: cargo build --release -p pipetrace -p pipetrace-e2e &&
//!                          ./target/release/bench-perf [--quick] [--repeats N] [--keep-memory]
//!                          [--out docs/performance.md])
//!
//! In one run, on this machine:
//! 1. the fork/exec storm alone, under a fresh agent, wrapped by `pipetrace run` and under
//!    bpftrace printing every exec and exit, alternated; medians and ranges of the ratios;
//!    the agent's CPU per process, the storm's own, and each probe's runs and run time;
//! 2. a real Snakemake pipeline (the bundled demo) alone and under an agent;
//! 3. kernel events lost at the highest exec rate, with the default ring buffer and
//!    smaller ones;
//! 4. memory of both modes at 1k, 10k, 100k and 1M processes;
//! 5. where the agent's CPU goes (perf, and its core alone on a synthetic storm), end-to-end
//!    spans per second per core and exit-to-backend latency, and OTLP export alone.
use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use pipetrace_e2e::{
    Agent,
    bench::{STORM_TAG, compare, memory::cpu_seconds, storm, time},
    demo_pipeline,
    receiver::Receiver,
};

mod core_alone;
mod export;
mod memory;
mod notes;
mod profile;
mod storm;

/// The figures table, as the bench prints it.
pub struct Doc {
    md: String,
}

impl Doc {
    pub fn row(&mut self, figure: &str, value: &str, how: &str) {
        let line = format!("| {figure} | {value} | {how} |");
        println!("{line}");
        let _ = writeln!(self.md, "{line}");
    }
}

fn snakemake(dir: &Path) -> Command {
    let mut c = Command::new("snakemake");
    c.args(["--cores", "2", "--quiet"]).current_dir(dir);
    c
}

/// A real pipeline alone and under an agent, alternated.
fn pipeline_ratio(doc: &mut Doc, repeats: usize, cfg: &Path, dir: &Path) {
    let mut pipelines = Vec::new();
    let mut make = || {
        let d = demo_pipeline();
        let c = snakemake(d.path());
        pipelines.push(d);
        c
    };
    // Warm caches (binaries, Python's imports) before timing anything.
    time(make());
    let mut ratios = Vec::new();
    for _ in 0..repeats {
        let alone = time(make()).as_secs_f64();
        let out = dir.join("demo.otlp.jsonl");
        let agent = Agent::start(&["-c", cfg.to_str().unwrap(), "-o", out.to_str().unwrap()]);
        let traced = time(make()).as_secs_f64();
        agent.stop();
        ratios.push(traced / alone);
    }
    doc.row(
        "wall ratio, Snakemake demo pipeline (bwa, samtools, python), `pipetrace agent`",
        &compare::median_range(&ratios),
        &format!("median of {repeats} alternated repeats"),
    );
}

/// Spans per second per core of agent CPU end to end, and exit-to-backend latency, over
/// gRPC to a receiver that keeps what it gets.
async fn end_to_end(doc: &mut Doc, n: usize, cfg: &Path) {
    let rx = Receiver::start().await;
    let agent = Agent::start(&["-c", cfg.to_str().unwrap(), "--endpoint", &rx.grpc_url()]);
    let (cpu, t) = (cpu_seconds(agent.pid()), Instant::now());
    tokio::task::spawn_blocking(move || time(storm(n)))
        .await
        .expect("storm");
    let spans = rx
        .wait_for(Duration::from_secs(120), |s| {
            s.iter()
                .filter(|s| s.str("pipetrace.tool.name") == "true")
                .count()
                >= n
        })
        .await;
    let cpu = cpu_seconds(agent.pid()) - cpu;
    agent.stop();
    let mut lat: Vec<f64> = (spans.iter())
        .map(|s| (s.received.saturating_sub(s.end)) as f64 / 1e9)
        .collect();
    lat.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        lat.get(((lat.len().max(1) - 1) as f64 * p) as usize)
            .copied()
    };
    doc.row(
        "agent, spans per second per core, end to end",
        &format!("{:.0}", spans.len() as f64 / cpu.max(1e-9)),
        &format!(
            "{} spans of {n} processes over gRPC in {:.1} s using {cpu:.2} s of agent CPU \
             (all its work: 5 kernel records per process, tree, attribution, span building, \
             export)",
            spans.len(),
            t.elapsed().as_secs_f64()
        ),
    );
    doc.row(
        "exit-to-backend latency",
        &format!(
            "p50 {:.2} s, p99 {:.2} s",
            pct(0.5).unwrap_or(0.0),
            pct(0.99).unwrap_or(0.0)
        ),
        "span end (the kernel's exit time) to arrival at the receiver",
    );
}

struct Args {
    quick: bool,
    /// Keep the memory table of the page at `out` (measured by an earlier run) and measure
    /// the rest: the ladder is not load-sensitive and takes most of the hour.
    keep_memory: bool,
    /// Alternated repeats of each storm (20 unless given): more narrow a noisy VM's median's
    /// interval.
    repeats: Option<usize>,
    out: Option<PathBuf>,
}

fn args() -> Args {
    let args: Vec<String> = std::env::args().skip(1).collect();
    Args {
        quick: args.iter().any(|a| a == "--quick"),
        keep_memory: args.iter().any(|a| a == "--keep-memory"),
        repeats: (args.iter().position(|a| a == "--repeats"))
            .and_then(|i| args.get(i + 1))
            .map(|n| match n.parse() {
                Ok(n) if n > 0 => n,
                _ => {
                    eprintln!("bench-perf: --repeats takes a count above 0, not {n:?}");
                    std::process::exit(2)
                }
            }),
        out: (args.iter().position(|a| a == "--out"))
            .and_then(|i| args.get(i + 1))
            .map(PathBuf::from),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let a = args();
    let dir = tempfile::tempdir().expect("tempdir");
    // Every process its own span (no trace budget): the per-process cost these figures
    // measure, comparable across runs; bench-storm prints what the budget makes of a trace.
    let rule = format!(
        "export:\n  max_trace_bytes: 0\nattribution:\n  run_rules:\n    - match: {{ argv: '{STORM_TAG}' }}\n      name: storm\n"
    );
    let cfg = dir.path().join("bench.yaml");
    std::fs::write(&cfg, &rule).expect("write config");
    let (storm_n, repeats, counts): (usize, usize, &[usize]) = match a.quick {
        true => (2_000, 1, &[1_000, 2_000]),
        false => (20_000, 20, &[1_000, 10_000, 100_000, 1_000_000]),
    };
    let repeats = a.repeats.unwrap_or(repeats);
    let d = dir.path();
    // Memory first: it is not load-sensitive, and takes longest (a few minutes per mode at
    // a million processes), while a shared machine's other work may quiet down.
    let table = match (a.keep_memory, &a.out) {
        (true, Some(out)) => notes::kept_memory_table(out).unwrap_or_else(|e| {
            eprintln!("bench-perf: --keep-memory: {e}");
            std::process::exit(2)
        }),
        (true, None) => {
            eprintln!("bench-perf: --keep-memory keeps the table of the --out page: give --out");
            std::process::exit(2)
        }
        _ => tokio::task::block_in_place(|| memory::ladder(counts, &rule, d)),
    };
    let mut doc = Doc { md: String::new() };
    doc.md.push_str(&notes::head(a.quick, a.keep_memory));
    doc.row("figure", "value", "how");
    doc.row("---", "---", "---");
    tokio::task::block_in_place(|| {
        storm::ratios(&mut doc, storm_n, repeats, &cfg, d);
        storm::probes(&mut doc, storm_n / 4, &cfg, d);
        profile::agent(&mut doc, storm_n / 4, &cfg, d);
        core_alone::row(&mut doc, storm_n);
        pipeline_ratio(&mut doc, repeats * 3, &cfg, d);
        memory::lost_at_max_rate(&mut doc, storm_n, &rule, d);
    });
    end_to_end(&mut doc, storm_n / 2, &cfg).await;
    let n = if a.quick { 20_000 } else { 200_000 };
    let (rate, sent, wall) = export::throughput(n).await;
    doc.row(
        "OTLP export, spans per second per core",
        &format!("{rate:.0}"),
        &format!(
            "{sent} tool spans (30 attributes each) encoded, queued and sent over gRPC to the \
             rotel collector in {:.1} s; per second of the exporter's CPU",
            wall.as_secs_f64()
        ),
    );
    doc.md.push_str(notes::MEMORY);
    doc.md.push_str(&table);
    doc.md.push_str(notes::NOTES);
    if let Some(path) = a.out {
        doc.md.push_str(&notes::by_hand(&path));
        std::fs::write(&path, &doc.md).expect("write the figures");
        println!("written to {}", path.display());
    }
}
