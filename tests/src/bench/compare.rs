//! The fork/exec storm alone, under a fresh agent, wrapped by `pipetrace run` and under
//! bpftrace printing every exec and exit: back to back in each repeat, so that drift on a
//! shared machine hits all alike. Ratios are per repeat.
use std::{path::Path, process::Stdio, time::Duration};

use super::{bpftrace, memory, storm, storm_script};

/// What the repeats measured.
#[derive(Default)]
pub struct Storms {
    pub alone: Vec<f64>,
    pub agent: Vec<f64>,
    pub run: Vec<f64>,
    pub bpftrace: Vec<f64>,
    /// The agent's own CPU per process (µs), every repeat.
    pub agent_cpu_us: Vec<f64>,
    /// The storm's own CPU (its shell and processes, µs per process) alone and under the
    /// agent: what the probes add in the processes' own context.
    pub storm_cpu_alone_us: Vec<f64>,
    pub storm_cpu_agent_us: Vec<f64>,
    /// The agents' final reports.
    pub reports: Vec<String>,
    /// bpftrace at its highest, and the lines it printed.
    pub bpftrace_mem: Option<memory::Mem>,
    pub bpftrace_lines: usize,
}

/// CPU seconds of this process's reaped children so far.
fn children_cpu() -> f64 {
    // SAFETY: zeroed rusage is valid; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    s(ru.ru_utime) + s(ru.ru_stime)
}

/// Wall seconds and the CPU seconds of what it started.
fn timed(c: std::process::Command) -> (f64, f64) {
    let cpu = children_cpu();
    let wall = super::time(c).as_secs_f64();
    (wall, children_cpu() - cpu)
}

/// `repeats` rounds of the `n`-process storm four ways (three without bpftrace). Each traced
/// storm runs between two untraced ones and is compared with their mean: the VM's speed
/// drifts over minutes, and a baseline from one side only took that drift for overhead.
pub fn storms(n: usize, repeats: usize, cfg: &Path, dir: &Path, with_bpftrace: bool) -> Storms {
    let mut s = Storms::default();
    // Warm caches (the binaries, the page cache) before timing anything.
    super::time(storm(n / 10));
    let mut alone = timed(storm(n));
    for r in 0..repeats {
        let before = alone.0;
        s.storm_cpu_alone_us.push(alone.1 / n as f64 * 1e6);
        let (agent, cpu_agent) = under_agent(n, cfg, dir, &mut s);
        s.storm_cpu_agent_us.push(cpu_agent / n as f64 * 1e6);
        alone = timed(storm(n));
        s.agent.push(agent / ((before + alone.0) / 2.0));
        let mid = alone.0;
        let run = wrapped(n, cfg, dir);
        alone = timed(storm(n));
        s.run.push(run / ((mid + alone.0) / 2.0));
        let mut line = format!(
            "  repeat {}: alone {before:.2} s, agent {agent:.2} s, alone {mid:.2} s, run {run:.2} s, \
             alone {:.2} s",
            r + 1,
            alone.0
        );
        if let Some(b) = with_bpftrace
            .then(|| under_bpftrace(n, dir, &mut s))
            .flatten()
        {
            let last = alone.0;
            alone = timed(storm(n));
            s.bpftrace.push(b / ((last + alone.0) / 2.0));
            line += &format!(", bpftrace {b:.2} s, alone {:.2} s", alone.0);
        }
        println!("{line}");
        s.alone.extend([before, mid]);
    }
    s
}

fn under_agent(n: usize, cfg: &Path, dir: &Path, s: &mut Storms) -> (f64, f64) {
    let out = dir.join("agent.otlp.jsonl");
    let agent = crate::Agent::start(&["-c", cfg.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    let cpu = memory::cpu_seconds(agent.pid());
    let (wall, storm_cpu) = timed(storm(n));
    // Its work for the storm is done once the last spans are written (a batch waits
    // `export.batch_timeout`).
    std::thread::sleep(Duration::from_secs(2));
    s.agent_cpu_us
        .push((memory::cpu_seconds(agent.pid()) - cpu) / n as f64 * 1e6);
    s.reports.push(agent.stop());
    let _ = std::fs::remove_file(&out);
    (wall, storm_cpu)
}

fn wrapped(n: usize, cfg: &Path, dir: &Path) -> f64 {
    let out = dir.join("run.otlp.jsonl");
    let mut c = crate::pipetrace();
    c.args(["-c", cfg.to_str().unwrap(), "-o", out.to_str().unwrap()])
        .args(["run", "--", "bash", "-c", &storm_script(n)])
        .stdout(Stdio::null());
    let wall = super::time(c).as_secs_f64();
    let _ = std::fs::remove_file(&out);
    wall
}

fn under_bpftrace(n: usize, dir: &Path, s: &mut Storms) -> Option<f64> {
    let b = bpftrace::Bpftrace::start(dir)?;
    let wall = super::time(storm(n)).as_secs_f64();
    let (mem, lines) = b.stop();
    let top = s.bpftrace_mem.get_or_insert(mem);
    top.peak = top.peak.max(mem.peak);
    top.private = top.private.max(mem.private);
    top.pss = top.pss.max(mem.pss);
    s.bpftrace_lines = s.bpftrace_lines.max(lines);
    Some(wall)
}

/// `1.046 (95% CI 1.035..1.058, range 1.031..1.062)`: the median, the interval that holds
/// the true median with at least 95% confidence (from the repeats' order, no assumption on
/// the noise's shape; left out below 6 repeats, where none exists), and the extremes.
pub fn median_range(v: &[f64]) -> String {
    if v.is_empty() {
        return "-".into();
    }
    let mut sorted = v.to_vec();
    sorted.sort_by(f64::total_cmp);
    let (lo, hi) = (sorted[0], sorted[sorted.len() - 1]);
    let ci = match median_ci_ranks(sorted.len()) {
        Some((a, b)) => format!("95% CI {:.3}..{:.3}, ", sorted[a], sorted[b]),
        None => String::new(),
    };
    format!(
        "{:.3} ({ci}range {lo:.3}..{hi:.3})",
        super::median(v.to_vec())
    )
}

/// The 0-based ranks of the sorted repeats that bound a distribution-free 95% confidence
/// interval for the median: the widest `k` with P(Binomial(n, 1/2) < k) <= 2.5%, giving
/// ranks `k - 1` and `n - k`. None when even the extremes do not reach 95% (n < 6).
pub fn median_ci_ranks(n: usize) -> Option<(usize, usize)> {
    // P(X <= j) for X ~ Binomial(n, 1/2), summed term by term.
    let mut term = 0.5f64.powi(n as i32);
    let mut below = 0.0;
    let mut k = 0;
    for j in 0..n {
        below += term;
        if below > 0.025 {
            break;
        }
        k = j + 1;
        term *= (n - j) as f64 / (j + 1) as f64;
    }
    (k >= 1).then(|| (k - 1, n - k))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_interval_ranks_are_the_binomial_tables() {
        // Tables of the sign test: n = 6 gives the extremes (coverage 96.9%), n = 10 the
        // 2nd and 9th (97.9%), n = 15 the 4th and 12th (96.5%), n = 20 the 6th and 15th.
        assert_eq!(median_ci_ranks(5), None);
        assert_eq!(median_ci_ranks(6), Some((0, 5)));
        assert_eq!(median_ci_ranks(10), Some((1, 8)));
        assert_eq!(median_ci_ranks(15), Some((3, 11)));
        assert_eq!(median_ci_ranks(20), Some((5, 14)));
    }

    #[test]
    fn the_interval_is_shown_where_it_exists() {
        let five = [1.0, 1.1, 1.2, 1.3, 1.4];
        assert_eq!(median_range(&five), "1.200 (range 1.000..1.400)");
        let ten: Vec<f64> = (0..10).map(|i| 1.0 + i as f64 / 100.0).rev().collect();
        assert_eq!(
            median_range(&ten),
            "1.050 (95% CI 1.010..1.080, range 1.000..1.090)"
        );
    }
}
