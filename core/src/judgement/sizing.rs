//! What a task should ask for next time, from its jobs' figures: one rule for the report
//! page's "ask next time" and `pipetrace suggest`, so that both say the same.

/// How the figures become asks.
#[derive(Clone, Copy, Debug)]
pub struct Policy {
    /// Of the jobs' figures, this percentile (1..=100).
    pub percentile: f64,
    /// Added to memory and time: 0.2 asks 20 % more than the percentile.
    pub margin: f64,
}

impl Policy {
    /// The 95th percentile and 20 % more: what `pipetrace suggest` asks without
    /// `--percentile` and `--margin` (its help shows these values).
    pub const DEFAULT: Policy = Policy {
        percentile: 95.0,
        margin: 0.2,
    };
}

impl Default for Policy {
    fn default() -> Self {
        Policy::DEFAULT
    }
}

/// One job's figures, as the rule reads them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JobFigures {
    /// CPUs kept busy or waited for on average: CPU time and the time its threads waited
    /// for a CPU, over wall time.
    pub busy: f64,
    /// Peak memory, bytes (an OOM kill's own figure where larger).
    pub peak: u64,
    pub wall: f64,
    /// What it was given, where the engine or a cgroup said.
    pub asked_cpus: Option<f64>,
    pub asked_memory: Option<u64>,
    /// Killed for memory, at this limit where known.
    pub oom: bool,
    pub oom_limit: Option<u64>,
}

/// The asks: whole CPUs, bytes in whole MiB, seconds in whole minutes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Asks {
    pub cpus: u32,
    pub memory_bytes: u64,
    pub time_seconds: u64,
    /// The limit a job was killed at (its peak where unknown), when one was.
    pub oom_hit: Option<u64>,
}

/// Busy CPUs over a whole number by at most this are that number.
const CPU_NOISE: f64 = 0.1;
/// A job shorter than this cannot show that it needs more than one CPU: over a few
/// milliseconds a shell and its child overlap, and a wait for a CPU weighs as much as the
/// work, so busy CPUs read 2 for a single-threaded step. Its figure counts up to one CPU.
pub const MIN_CPU_EVIDENCE_SECS: f64 = 1.0;

/// The busy CPUs a job's figures show, as far as its duration can show them.
fn busy_shown(j: &JobFigures) -> f64 {
    match j.wall >= MIN_CPU_EVIDENCE_SECS {
        true => j.busy,
        false => j.busy.min(1.0),
    }
}
/// Memory is asked in whole MiB, and never below this.
const MIN_MEMORY: u64 = 64 << 20;
/// Time is asked in whole minutes, and never below one.
const MIN_TIME_SECS: u64 = 60;

/// The `p`th percentile of `v` (nearest rank).
fn percentile(mut v: Vec<f64>, p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

/// CPUs: the percentile of busy CPUs, whole, without a margin (a job given fewer runs
/// slower, it does not fail), a job too short to show more counted at what it had. Memory: the percentile and the margin, never below a peak
/// seen, and at least twice the limit a job was OOM-killed at (its peak is the limit, not
/// what it wanted). Time: the percentile and the margin.
pub fn asks(jobs: &[JobFigures], policy: Policy) -> Asks {
    let grow = 1.0 + policy.margin;
    let pct =
        |f: fn(&JobFigures) -> f64| percentile(jobs.iter().map(f).collect(), policy.percentile);
    let peak_max = jobs.iter().map(|j| j.peak).max().unwrap_or(0);
    let cpus = ((pct(busy_shown) - CPU_NOISE).ceil() as u32).max(1);
    let mut memory = ((pct(|j| j.peak as f64) * grow) as u64).max(peak_max);
    let oom_hit = (jobs.iter().filter(|j| j.oom))
        .map(|j| j.oom_limit.or(j.asked_memory).unwrap_or(j.peak).max(j.peak))
        .max();
    if let Some(hit) = oom_hit {
        memory = memory.max(2 * hit);
    }
    let time = ((pct(|j| j.wall) * grow).ceil() as u64).max(MIN_TIME_SECS);
    Asks {
        cpus,
        memory_bytes: memory.max(MIN_MEMORY).div_ceil(1 << 20) << 20,
        time_seconds: time.div_ceil(60) * 60,
        oom_hit,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(busy: f64, wall: f64, asked_cpus: Option<f64>) -> JobFigures {
        JobFigures {
            busy,
            wall,
            asked_cpus,
            peak: 10 << 20,
            ..JobFigures::default()
        }
    }

    #[test]
    fn a_job_too_short_to_show_it_never_raises_the_cpus() {
        let short = vec![job(2.0, 0.01, None); 240];
        assert_eq!(
            asks(&short, Policy::default()).cpus,
            1,
            "10 ms jobs: one CPU"
        );
        let given = vec![job(3.0, 0.01, Some(2.0)); 10];
        assert_eq!(
            asks(&given, Policy::default()).cpus,
            1,
            "nor one that had 2: 10 ms cannot show they need it"
        );
        let long = vec![job(2.0, 30.0, None); 10];
        assert_eq!(asks(&long, Policy::default()).cpus, 2, "30 s jobs show it");
    }
}
