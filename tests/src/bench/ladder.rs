//! Memory at growing process counts, in both modes: one agent serving storms until it has
//! seen each count, and one `pipetrace run` per count. Spans go over OTLP/gRPC to a sink
//! that keeps nothing (a million processes' spans would be gigabytes on disk).
use std::{
    path::Path,
    process::Stdio,
    time::{Duration, Instant},
};

use super::{
    memory::{self, Mem},
    sink::Sink,
    storm, storm_script, time,
};

/// One rung: the memory after (agent) or over (run) `processes` processes.
#[derive(Clone, Debug)]
pub struct Rung {
    pub processes: usize,
    pub mem: Mem,
    /// The agent's CPU per process over this rung, microseconds (agent only).
    pub cpu_us: Option<f64>,
    /// Storm processes per second.
    pub rate: f64,
}

/// Spans each storm process becomes (its task and its tool).
const SPANS_PER_PROCESS: u64 = 2;

/// One agent, storms until it has seen each of `counts`; its memory after each, and its
/// final report.
pub fn agent(counts: &[usize], cfg: &Path) -> (Vec<Rung>, String) {
    let sink = Sink::start();
    let agent = crate::Agent::start(&["-c", cfg.to_str().unwrap(), "--endpoint", sink.url()]);
    let pid = agent.pid();
    let (mut done, mut rungs) = (0, Vec::new());
    for &n in counts {
        let (fresh, cpu) = (n.saturating_sub(done).max(1), memory::cpu_seconds(pid));
        let want = sink.spans() + SPANS_PER_PROCESS * fresh as u64;
        let rate = fresh as f64 / time(storm(fresh)).as_secs_f64();
        done = n;
        // Everything of this rung has left the agent before it is measured.
        if !sink.wait_for(want, Duration::from_secs(300)) {
            eprintln!("  (the sink got {} of {want} spans)", sink.spans());
        }
        let cpu_us = (memory::cpu_seconds(pid) - cpu) / fresh as f64 * 1e6;
        let mem = memory::of(pid).unwrap_or_default();
        rungs.push(Rung {
            processes: n,
            mem,
            cpu_us: Some(cpu_us),
            rate,
        });
    }
    (rungs, agent.stop())
}

/// One `pipetrace run` of a storm of `n` processes: its peak resident set (from the
/// kernel's rusage), its memory at its end, and what it said.
/// `cfg` should send the HTML report into `dir` (`report.path`).
pub fn run(n: usize, cfg: &Path, dir: &Path) -> (Rung, String) {
    let sink = Sink::start();
    let err = dir.join(format!("run-{n}.err"));
    // Started by a small shell that execs it: the kernel's peak resident set of a process
    // includes the image it was forked from (the bench's own), not of a shell.
    let mut c = std::process::Command::new("sh");
    let bin = crate::pipetrace_bin();
    c.args(["-c", "exec \"$0\" \"$@\"", bin.to_str().unwrap()])
        .current_dir(crate::state_dir());
    for (k, v) in crate::pipetrace().get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    c.args(["-c", cfg.to_str().unwrap(), "--endpoint", sink.url()])
        .args(["run", "--", "bash", "-c", &storm_script(n)])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).expect("create the run's log"));
    let t = Instant::now();
    // Reaped by `wait4` below, which also gives its peak resident set.
    #[allow(clippy::zombie_processes)]
    let pid = c.spawn().expect("start pipetrace run").id();
    let sampler = memory::Sampler::start(pid);
    let (status, maxrss_kib) = wait4(pid);
    let wall = t.elapsed();
    // What it holds at its end (every task summed, the report's lists full), and the
    // kernel's high-water mark, exact where sampling may miss the moment.
    let (top, mut mem) = sampler.stop();
    mem.peak = top.peak.max(maxrss_kib as f64 / 1024.0);
    mem.ring = top.ring;
    let said = std::fs::read_to_string(&err).unwrap_or_default();
    assert!(status == 0, "pipetrace run failed ({status}): {said}");
    let rung = Rung {
        processes: n,
        mem,
        cpu_us: None,
        rate: n as f64 / wall.as_secs_f64(),
    };
    (rung, said)
}

/// Waits for child `pid`; its exit status and peak resident set (KiB).
fn wait4(pid: u32) -> (i32, i64) {
    let mut status = 0;
    // SAFETY: zeroed rusage is valid; wait4 fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: our own child, reaped here once.
    let got = unsafe { libc::wait4(pid as i32, &mut status, 0, &mut ru) };
    assert_eq!(got, pid as i32, "wait4");
    (status, ru.ru_maxrss)
}

/// `| 1000 | 44.0 MiB | 28.0 MiB | 6.1 MiB | 27.9 MiB | ... |`: one table row.
pub fn row(mode: &str, r: &Rung) -> String {
    let m = &r.mem;
    let cpu = r.cpu_us.map_or("-".into(), |c| format!("{c:.0} µs"));
    format!(
        "| {mode} | {} | {:.1} MiB | {:.1} MiB | {:.1} MiB | {:.1} MiB | {:.1} MiB | {cpu} | {:.0}/s |",
        r.processes,
        m.peak,
        m.real_peak(),
        m.private,
        m.pss,
        m.ring,
        r.rate
    )
}

pub const HEADER: &str = "| mode | processes | peak RSS | real cost at peak | private | \
    real cost (Pss) | ring buffer (mapped twice) | agent CPU per process | storm rate |\n\
    |---|---|---|---|---|---|---|---|---|";

/// One `pipetrace run` of a storm of `n` processes under the default trace budget, its
/// spans over OTLP/gRPC to a sink that keeps only each trace's size: those sizes, and the
/// run's wall time in seconds.
pub fn trace_sizes(n: usize, dir: &Path) -> (crate::tempo::TraceSizes, f64) {
    traced_sizes(&["bash", "-c", &storm_script(n)], dir)
}

/// `pipetrace run -- COMMAND` in `dir` under the default trace budget, to a sink that keeps
/// each trace's size: those sizes and the run's wall time in seconds.
pub fn traced_sizes(command: &[&str], dir: &Path) -> (crate::tempo::TraceSizes, f64) {
    let sink = Sink::start();
    let t = Instant::now();
    let o = crate::pipetrace()
        .current_dir(dir)
        .args(["--endpoint", sink.url(), "run", "--no-summary", "--"])
        .args(command)
        .output()
        .expect("start pipetrace run");
    assert!(o.status.success(), "{}", crate::stderr(&o));
    (sink.sizes(), t.elapsed().as_secs_f64())
}

/// The agent under the default trace budget, a run rule naming a storm of `n` processes as
/// a run (`cfg`): each trace's size as the sink got it once the agent stopped (its stop
/// flushes all), the storm's wall time, the agent's memory just before it stopped, and its
/// final report.
pub fn agent_trace_sizes(n: usize, cfg: &Path) -> (crate::tempo::TraceSizes, f64, Mem, String) {
    let sink = Sink::start();
    let agent = crate::Agent::start(&["-c", cfg.to_str().unwrap(), "--endpoint", sink.url()]);
    let wall = time(storm(n)).as_secs_f64();
    // Its run span comes once the storm's last process has been taken in.
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(600) && !sink.run_ended() {
        std::thread::sleep(Duration::from_millis(200));
    }
    let mem = memory::of(agent.pid()).unwrap_or_default();
    let said = agent.stop();
    (sink.sizes(), wall, mem, said)
}
