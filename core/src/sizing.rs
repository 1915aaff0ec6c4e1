//! What a task should ask for next time, from its jobs' figures, and whether what it asked
//! was more or less than they needed: one rule for the report page's "ask next time",
//! `pipetrace suggest`, the run's findings and each job's span (`pipetrace.rightsizing`), so
//! that all say the same. Below both the judgement and the span's diagnosis.

/// How the figures become asks.
#[derive(Clone, Copy, Debug)]
pub struct Policy {
    /// Of the jobs' figures, this percentile (1..=100).
    pub percentile: f64,
    /// Added to memory and time: 0.2 asks 20 % more than the percentile.
    pub margin: f64,
    /// An ask is more than needed when the jobs used at most this share of it
    /// (`diagnosis.over_allocation`).
    pub over_share: f64,
}

impl Policy {
    /// The 95th percentile and 20 % more: what `pipetrace suggest` asks without
    /// `--percentile` and `--margin` (its help shows these values).
    pub const DEFAULT: Policy = Policy {
        percentile: 95.0,
        margin: 0.2,
        over_share: 0.5,
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

/// Which way an ask misses what its jobs needed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fit {
    Fits,
    /// The jobs used at most `Policy::over_share` of it, and next time asks for less.
    Over,
    /// Next time asks for more: the jobs kept more CPUs busy than asked, or came within the
    /// margin of their memory limit (or past it: an OOM kill).
    Under,
}

/// How the asks fit, where something was asked.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fitted {
    pub asks: Asks,
    pub cpus: Option<Fit>,
    pub memory: Option<Fit>,
}

/// The one rule of over- and under-asking: a job's span (`pipetrace.rightsizing`), each
/// task's findings, the page's and the terminal's advice read it alike. Never fewer than
/// one CPU, the least one can ask for; nor more CPUs than a job long enough can show.
pub fn fit(jobs: &[JobFigures], policy: Policy) -> Fitted {
    let asks = asks(jobs, policy);
    let pct =
        |f: fn(&JobFigures) -> f64| percentile(jobs.iter().map(f).collect(), policy.percentile);
    let max_of = |f: fn(&JobFigures) -> Option<f64>| {
        (jobs.iter().filter_map(f)).fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
    };
    // Asking more than a job of a few ms used costs nothing: an over-ask needs a job long
    // enough to show it.
    let shown = jobs.iter().any(|j| j.wall >= MIN_CPU_EVIDENCE_SECS);
    let cpus = max_of(|j| j.asked_cpus).map(|a| {
        let next = f64::from(asks.cpus);
        match (next, pct(busy_shown)) {
            (n, _) if n > a => Fit::Under,
            (n, busy) if shown && a > 1.0 && n < a && busy <= a * policy.over_share => Fit::Over,
            _ => Fit::Fits,
        }
    });
    let memory = max_of(|j| j.asked_memory.map(|m| m as f64)).map(|limit| {
        let peak = pct(|j| j.peak as f64);
        let peak_max = jobs.iter().map(|j| j.peak).max().unwrap_or(0) as f64;
        let oom = jobs.iter().any(|j| j.oom);
        match peak * (1.0 + policy.margin) {
            _ if oom => Fit::Under,
            want if want > limit => Fit::Under,
            _ if shown
                && peak_max <= limit * policy.over_share
                && (asks.memory_bytes as f64) < limit =>
            {
                Fit::Over
            }
            _ => Fit::Fits,
        }
    });
    Fitted { asks, cpus, memory }
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

    const MIB: u64 = 1 << 20;

    fn asked(busy: f64, peak_mib: u64, cpus: f64, memory_mib: u64) -> JobFigures {
        JobFigures {
            busy,
            wall: 30.0,
            peak: peak_mib * MIB,
            asked_cpus: Some(cpus),
            asked_memory: Some(memory_mib * MIB),
            ..JobFigures::default()
        }
    }

    #[test]
    fn an_ask_fits_is_over_or_under_by_one_rule() {
        let p = Policy::default();
        let f = |j: JobFigures| {
            let r = fit(&[j], p);
            (r.cpus.unwrap(), r.memory.unwrap())
        };
        // 2 threads for a single-threaded step, 4000 MB for 25 MiB.
        assert_eq!(f(asked(0.6, 25, 2.0, 3815)), (Fit::Over, Fit::Over));
        // 1 CPU is the least one can ask for: never over; 4 threads busy on 1 asked is under.
        assert_eq!(f(asked(0.0, 100, 1.0, 400)).0, Fit::Fits);
        assert_eq!(f(asked(3.8, 100, 1.0, 400)).0, Fit::Under);
        // 310 MiB of 400: fits; 190 of 200 is within the margin: under.
        assert_eq!(f(asked(1.0, 310, 1.0, 400)).1, Fit::Fits);
        assert_eq!(f(asked(1.0, 190, 1.0, 200)).1, Fit::Under);
        // Under half used, but next time's ask could be no less: fits.
        assert_eq!(
            f(asked(1.0, 30, 1.0, 64)).1,
            Fit::Fits,
            "64 MiB is the least ask"
        );
        let oom = JobFigures {
            oom: true,
            ..asked(1.0, 200, 1.0, 200)
        };
        assert_eq!(f(oom).1, Fit::Under);
        // A 10 ms job shows no need of a second CPU, whatever it read; nor that it asked
        // for too much.
        let short = JobFigures {
            wall: 0.01,
            ..asked(2.0, 10, 1.0, 400)
        };
        assert_eq!(f(short).0, Fit::Fits);
        let short = JobFigures {
            wall: 0.01,
            ..asked(0.6, 25, 2.0, 3815)
        };
        assert_eq!(f(short), (Fit::Fits, Fit::Fits));
        let free = JobFigures::default();
        assert_eq!(fit(&[free], p).cpus, None, "nothing asked, nothing to fit");
    }
}
