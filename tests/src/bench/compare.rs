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
    /// Every untraced storm once (those between two traced ones serve both as neighbours),
    /// for the steal fit.
    pub untraced: Vec<Timed>,
    /// Each ratio's three storms, in the order of `agent`, `run` and `bpftrace`.
    pub agent_storms: Vec<Paired>,
    pub run_storms: Vec<Paired>,
    /// `pipetrace run`'s own start and end in each of its storms (seconds): from its start
    /// to the storm's first line, and from the storm's last line to its exit.
    pub run_start: Vec<f64>,
    pub run_end: Vec<f64>,
    pub bpftrace_storms: Vec<Paired>,
}

/// A traced storm and the untraced ones just before and just after it.
#[derive(Clone, Copy)]
pub struct Paired {
    pub traced: Timed,
    pub before: Timed,
    pub after: Timed,
}

/// One timed command: wall seconds, the CPU seconds of what it started, and the share of
/// the machine's CPU time the hypervisor gave to others meanwhile (steal, /proc/stat).
#[derive(Clone, Copy)]
pub struct Timed {
    pub wall: f64,
    pub cpu: f64,
    pub steal: f64,
}

/// Steal time so far (ms, all CPUs) and the number of CPUs; None where the kernel does not
/// count it.
fn steal_ms() -> Option<(u64, usize)> {
    use procfs::CurrentSI;
    let stats = procfs::KernelStats::current().ok()?;
    Some((stats.total.steal_ms()?, stats.cpu_time.len().max(1)))
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

/// Times `run`, which runs one command to its end and returns its wall seconds.
fn timed_by(run: impl FnOnce() -> f64) -> Timed {
    let (cpu, steal) = (children_cpu(), steal_ms());
    let wall = run();
    let steal = match (steal, steal_ms()) {
        (Some((a, cpus)), Some((b, _))) => b.saturating_sub(a) as f64 / 1e3 / (wall * cpus as f64),
        _ => 0.0,
    };
    Timed {
        wall,
        cpu: children_cpu() - cpu,
        steal,
    }
}

fn timed(c: std::process::Command) -> Timed {
    timed_by(|| super::time(c).as_secs_f64())
}

/// `repeats` rounds of the `n`-process storm four ways (three without bpftrace). Each traced
/// storm runs between two untraced ones and is compared with their mean: the VM's speed
/// drifts over minutes, and a baseline from one side only took that drift for overhead.
pub fn storms(n: usize, repeats: usize, cfg: &Path, dir: &Path, with_bpftrace: bool) -> Storms {
    let mut s = Storms::default();
    // Warm caches (the binaries, the page cache) before timing anything.
    super::time(storm(n / 10));
    let mut alone = timed(storm(n));
    s.untraced.push(alone);
    for r in 0..repeats {
        let before = alone;
        s.storm_cpu_alone_us.push(before.cpu / n as f64 * 1e6);
        let agent = under_agent(n, cfg, dir, &mut s);
        s.storm_cpu_agent_us.push(agent.cpu / n as f64 * 1e6);
        let mid = timed(storm(n));
        s.untraced.push(mid);
        push(&mut s.agent, &mut s.agent_storms, agent, before, mid);
        let mut edges = (0.0, 0.0);
        let run = timed_by(|| {
            let (wall, start, end) = wrapped(n, cfg, dir);
            edges = (start, end);
            wall
        });
        s.run_start.push(edges.0);
        s.run_end.push(edges.1);
        alone = timed(storm(n));
        s.untraced.push(alone);
        push(&mut s.run, &mut s.run_storms, run, mid, alone);
        let secs = |t: Timed| format!("{:.2} s ({:.1}% stolen)", t.wall, t.steal * 100.0);
        let mut line = format!(
            "  repeat {}: alone {}, agent {}, alone {}, run {}, alone {}",
            r + 1,
            secs(before),
            secs(agent),
            secs(mid),
            secs(run),
            secs(alone)
        );
        if let Some(b) = with_bpftrace
            .then(|| under_bpftrace(n, dir, &mut s))
            .flatten()
        {
            let last = alone;
            alone = timed(storm(n));
            s.untraced.push(alone);
            push(&mut s.bpftrace, &mut s.bpftrace_storms, b, last, alone);
            line += &format!(", bpftrace {}, alone {}", secs(b), secs(alone));
        }
        println!("{line}");
        s.alone.extend([before.wall, mid.wall]);
    }
    s
}

/// One repeat's ratio: the traced storm against the mean of its untraced neighbours.
fn push(
    ratios: &mut Vec<f64>,
    storms: &mut Vec<Paired>,
    traced: Timed,
    before: Timed,
    after: Timed,
) {
    ratios.push(traced.wall / ((before.wall + after.wall) / 2.0));
    storms.push(Paired {
        traced,
        before,
        after,
    });
}

fn under_agent(n: usize, cfg: &Path, dir: &Path, s: &mut Storms) -> Timed {
    let out = dir.join("agent.otlp.jsonl");
    let agent = crate::Agent::start(&["-c", cfg.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    let cpu = memory::cpu_seconds(agent.pid());
    let storm = timed(storm(n));
    // Its work for the storm is done once the last spans are written (a batch waits
    // `export.batch_timeout`).
    std::thread::sleep(Duration::from_secs(2));
    s.agent_cpu_us
        .push((memory::cpu_seconds(agent.pid()) - cpu) / n as f64 * 1e6);
    s.reports.push(agent.stop());
    let _ = std::fs::remove_file(&out);
    storm
}

/// The storm under `pipetrace run`: its wall time, and `pipetrace run`'s own start and end
/// around it, told by the storm's shell printing the wall clock (`$EPOCHREALTIME`, the same
/// clock as `SystemTime`) as it starts and as it ends.
fn wrapped(n: usize, cfg: &Path, dir: &Path) -> (f64, f64, f64) {
    let out = dir.join("run.otlp.jsonl");
    let script = format!(
        "echo $EPOCHREALTIME; {}; echo $EPOCHREALTIME",
        storm_script(n)
    );
    let mut c = crate::pipetrace();
    c.args(["-c", cfg.to_str().unwrap(), "-o", out.to_str().unwrap()])
        .args(["run", "--", "bash", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let clock = || {
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        since.expect("a clock after 1970").as_secs_f64()
    };
    let (t0, started) = (clock(), std::time::Instant::now());
    let o = c.output().expect("run");
    let (wall, t1) = (started.elapsed().as_secs_f64(), clock());
    assert!(o.status.success(), "workload failed: {:?}", o.status);
    let _ = std::fs::remove_file(&out);
    let said: Vec<f64> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    match said[..] {
        [first, last] => (wall, first - t0, t1 - last),
        _ => panic!("the storm printed no start and end: {said:?}"),
    }
}

/// The ratios with `pipetrace run`'s own start and end taken out of its storms' wall
/// times: what tracing costs while the command runs.
pub fn without_edges(s: &Storms) -> Vec<f64> {
    let edges = s.run_start.iter().zip(&s.run_end);
    (s.run_storms.iter().zip(edges))
        .map(|(p, (a, b))| (p.traced.wall - a - b) / ((p.before.wall + p.after.wall) / 2.0))
        .collect()
}

fn under_bpftrace(n: usize, dir: &Path, s: &mut Storms) -> Option<Timed> {
    let b = bpftrace::Bpftrace::start(dir)?;
    let storm = timed(storm(n));
    let (mem, lines) = b.stop();
    let top = s.bpftrace_mem.get_or_insert(mem);
    top.peak = top.peak.max(mem.peak);
    top.private = top.private.max(mem.private);
    top.pss = top.pss.max(mem.pss);
    s.bpftrace_lines = s.bpftrace_lines.max(lines);
    Some(storm)
}

/// The untraced storms' steal shares and wall times, for [`steal_fit`].
pub fn steal_and_wall(untraced: &[Timed]) -> (Vec<f64>, Vec<f64>) {
    untraced.iter().map(|t| (t.steal, t.wall)).unzip()
}

/// How the untraced storms' wall time goes with steal: the least-squares slope (seconds
/// per unit of steal share) and Pearson's correlation. None when either does not vary.
pub fn steal_fit(steals: &[f64], walls: &[f64]) -> Option<(f64, f64)> {
    let r = correlation(steals, walls)?;
    let (sxy, sxx, _) = co_moments(steals, walls);
    Some((sxy / sxx, r))
}

/// The ratios with each storm's wall time less what its steal explains (`slope` from
/// [`steal_fit`] on the untraced storms).
pub fn steal_adjusted(storms: &[Paired], slope: f64) -> Vec<f64> {
    let adj = |t: Timed| t.wall - slope * t.steal;
    storms
        .iter()
        .map(|p| adj(p.traced) / ((adj(p.before) + adj(p.after)) / 2.0))
        .collect()
}

/// Pearson's correlation of two equally long series; None when either does not vary.
pub fn correlation(x: &[f64], y: &[f64]) -> Option<f64> {
    let (sxy, sxx, syy) = co_moments(x, y);
    (sxx > 0.0 && syy > 0.0).then(|| sxy / (sxx * syy).sqrt())
}

/// The sums of products of deviations from the means: (xy, xx, yy).
fn co_moments(x: &[f64], y: &[f64]) -> (f64, f64, f64) {
    let n = x.len().min(y.len()) as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx) * (a - mx);
        syy += (b - my) * (b - my);
    }
    (sxy, sxx, syy)
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
    fn the_runs_start_and_end_come_out_of_its_storm_only() {
        let t = |wall| Timed {
            wall,
            cpu: 0.0,
            steal: 0.0,
        };
        let mut s = Storms::default();
        // 20 s neighbours; the traced storm 20.4 s, 0.1 s of it the start and 0.2 s the end.
        push(&mut s.run, &mut s.run_storms, t(20.4), t(19.0), t(21.0));
        s.run_start.push(0.1);
        s.run_end.push(0.2);
        assert!((s.run[0] - 1.02).abs() < 1e-12);
        let less = without_edges(&s);
        assert_eq!(less.len(), 1);
        assert!((less[0] - 1.005).abs() < 1e-12, "{less:?}");
    }

    #[test]
    fn steal_is_taken_out_by_the_fitted_slope() {
        // Untraced storms of 20 s plus 3 s per 1% of steal: the fit finds exactly that.
        let steals = [0.0, 0.01, 0.02, 0.005];
        let walls: Vec<f64> = steals.iter().map(|s| 20.0 + 300.0 * s).collect();
        let (slope, r) = steal_fit(&steals, &walls).unwrap();
        assert!((slope - 300.0).abs() < 1e-9 && (r - 1.0).abs() < 1e-12);
        let t = |wall, steal| Timed {
            wall,
            cpu: 0.0,
            steal,
        };
        // A traced storm 2% slower than its neighbours once each one's steal is out.
        let p = Paired {
            traced: t(20.4 + 300.0 * 0.02, 0.02),
            before: t(20.0, 0.0),
            after: t(20.0 + 300.0 * 0.01, 0.01),
        };
        let adjusted = steal_adjusted(&[p], slope);
        assert!((adjusted[0] - 1.02).abs() < 1e-9, "{adjusted:?}");
        assert_eq!(steal_fit(&[0.01; 4], &walls), None);
    }

    #[test]
    fn correlation_is_pearsons() {
        let x = [1.0, 2.0, 3.0, 4.0];
        assert!((correlation(&x, &[2.0, 4.0, 6.0, 8.0]).unwrap() - 1.0).abs() < 1e-12);
        assert!((correlation(&x, &[8.0, 6.0, 4.0, 2.0]).unwrap() + 1.0).abs() < 1e-12);
        // x = 1..4 against y = 1, 3, 2, 4: r = 0.8 (sxy 4, sxx 5, syy 5).
        assert!((correlation(&x, &[1.0, 3.0, 2.0, 4.0]).unwrap() - 0.8).abs() < 1e-12);
        assert_eq!(correlation(&x, &[1.0; 4]), None);
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
