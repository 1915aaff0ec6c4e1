//! The agent's core alone: a fork/exec storm as the probes report it (fork, exec, exit,
//! final CPU and the reap-time report per process), fed to the core in the agent's batches,
//! on a fake host, spans written to a trace file. Prints the core's CPU per process (tree,
//! attribution, span building, JSON export) without the kernel, the probes or the wall
//! clock: figures to compare two builds by, steadier than a storm's on a shared VM.
//!
//! `cargo bench -p pipetrace --bench core [-- PROCESSES ROUNDS BATCH]`
use std::time::Duration;

use pipetrace::pipeline::Pipeline;
use pipetrace_core::port::fake::{self, FakeHost};
use pipetrace_core::{
    accounting::{CpuTimes, Switches, Usage},
    attribution::{Attributor, Mode},
    event::{Event, ProcKey},
    redact::Redactor,
};
use pipetrace_export::{export::Sink, signals::SpanBuilder};

const S: u64 = 1_000_000_000;
const BOOT_UNIX_NS: u64 = 1_800_000_000 * S;
const TAG: &str = "pipetrace-storm";

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let n: u32 = args
        .next()
        .map_or(20_000, |a| a.parse().expect("PROCESSES"));
    let rounds: usize = args.next().map_or(5, |a| a.parse().expect("ROUNDS"));
    // By default what the agent reads at a time from a storm of about 1,000 a second.
    let batch: usize = args
        .next()
        .map_or(pipetrace_host::probes::TICK.as_millis() as usize, |a| {
            a.parse().expect("BATCH")
        });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let mut per_proc: Vec<f64> = (0..rounds)
        .map(|_| rt.block_on(round(n, batch)) * 1e6 / f64::from(n))
        .collect();
    println!(
        "core CPU per process, {n}-process storm, {batch} processes a batch: {}",
        (per_proc.iter().map(|v| format!("{v:.1}")))
            .collect::<Vec<_>>()
            .join(" ")
    );
    per_proc.sort_by(f64::total_cmp);
    println!(
        "min {:.1} us, median {:.1} us (all threads: the event loop and the file's writer)",
        per_proc[0],
        per_proc[per_proc.len() / 2]
    );
}

/// One storm through a fresh core; returns the process's CPU seconds it took.
async fn round(n: u32, per_batch: usize) -> f64 {
    let dir = tempfile::tempdir().expect("temporary directory");
    let file = dir.path().join("trace.jsonl");
    let fake = FakeHost::new(BOOT_UNIX_NS, 100 * S);
    let mut pipe = core(&fake, &file);
    let shell = key(1000, 100 * S);
    let mut batch = Vec::new();
    let cpu0 = cpu_seconds();
    batch.extend(fake::fork_exec(
        shell,
        key(1, 0),
        100 * S,
        &["/bin/bash", "-c", "while :; do /bin/true; done", TAG],
    ));
    for i in 0..n {
        let at = 101 * S + u64::from(i) * 1_000_000;
        let k = key(2000 + i, at);
        batch.extend(fake::fork_exec(k, shell, at, &["/bin/true"]));
        batch.extend(end(k, at + 500_000));
        if batch.len() >= per_batch * 5 {
            fake.set_boottime(at + 1_000_000);
            pipe.ingest(&mut batch, 0);
        }
    }
    pipe.ingest(&mut batch, 0);
    pipe.poll(true);
    let (sink, _) = pipe.end();
    assert!(sink.shutdown(Duration::from_secs(30)).await, "flushed");
    let cpu = cpu_seconds() - cpu0;
    // Every process a tool span of the storm's run (a task of its own, too).
    let trace = std::fs::read_to_string(&file).expect("the trace file");
    let spans = trace.matches("\"spanId\"").count();
    assert!(spans > n as usize, "{spans} spans for {n} processes");
    cpu
}

fn core(fake: &FakeHost, file: &std::path::Path) -> Pipeline {
    let yaml = format!(
        "attribution:\n  run_rules:\n    - match: {{ argv: '{TAG}' }}\n      name: storm\n"
    );
    let cfg_file = file.with_extension("yaml");
    std::fs::write(&cfg_file, yaml).expect("write the config");
    let flags = pipetrace_config::Flags {
        output: Some(file.to_path_buf()),
        ..Default::default()
    };
    let mut cfg = pipetrace_config::load(Some(&cfg_file), &flags).expect("config");
    // As measured before the stages: no history on disk, no trace budget.
    cfg.diagnosis.state_dir = None;
    cfg.export.max_trace_bytes = 0;
    let info = pipetrace_core::machine::fake_info(fake);
    let builder = SpanBuilder::new(info.clone(), Redactor::new(true, &[]).expect("redactor"));
    let sink = Sink::start(&cfg, &info, file.to_path_buf()).expect("file sink");
    let attr = Attributor::new(
        Mode::Agent,
        &cfg.attribution,
        BOOT_UNIX_NS as i128,
        fake.shared(),
    )
    .expect("attributor");
    let outputs = pipetrace_export::outputs::Outputs::of_sink(sink);
    pipetrace::assembly::pipeline(&cfg, &info, (attr, builder), outputs, (false, false))
        .expect("the pipeline")
}

fn key(pid: u32, start_ns: u64) -> ProcKey {
    ProcKey::from_ns(pid, start_ns)
}

/// Its exit with the figures read there, its last CPU, and the reap-time report.
fn end(k: ProcKey, at: u64) -> [Event; 3] {
    let usage = Usage {
        cpu_user_ns: 300_000,
        cpu_system_ns: 600_000,
        maxrss_bytes: 1 << 20,
        ..Default::default()
    };
    [
        Event::Exit {
            key: k,
            time_ns: at,
            status: 0,
            image_peak_bytes: 1 << 20,
            at_exit: Some(usage),
        },
        Event::FinalCpu {
            key: k,
            cpu: CpuTimes {
                utime: 300_000,
                stime: 600_000,
                rtime: 900_000,
                prev: (0, 0),
            },
            switches: Switches::default(),
        },
        Event::Usage { key: k, usage },
    ]
}

/// This process's CPU time (every thread), seconds.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(ru.ru_utime) + secs(ru.ru_stime)
}
