//! Host-level idle detection: a node that ran no pipeline work and used almost no CPU for
//! `host.idle_after` is idle, the instance forgotten over a weekend (`pipetrace.host.idle`).
//!
//! Pure: the caller reads the host's busy CPU time and knows its runs, and hands both in with
//! the time.
use std::time::Duration;

/// How long the host has been idle, judged at each observation over the interval since the
/// previous one.
#[derive(Debug)]
pub struct IdleClock {
    after: Duration,
    cpu_below: f64,
    ticks_per_s: f64,
    /// The previous observation: when, and the busy ticks then.
    last: Option<(Duration, u64)>,
    /// When the current quiet stretch began.
    since: Option<Duration>,
    /// Whether pipeline work ran since the previous judged observation.
    worked: bool,
}

/// Shorter intervals are not judged (their work carries over to the next): after the agent
/// was held up, missed ticks come back to back, and one clock tick of CPU in microseconds
/// would read as a busy host.
const MIN_INTERVAL: Duration = Duration::from_millis(500);

impl IdleClock {
    /// `ticks_per_s`: the kernel's USER_HZ, the unit of /proc/stat.
    pub fn new(cfg: &pipetrace_config::Host, ticks_per_s: u64) -> Self {
        Self {
            after: cfg.idle_after,
            cpu_below: cfg.idle_cpu_below,
            ticks_per_s: ticks_per_s.max(1) as f64,
            last: None,
            since: None,
            worked: false,
        }
    }

    /// The host at `at` (a clock that runs through suspend), with `busy` ticks so far, and
    /// whether any pipeline work ran since the previous observation. Gives how long it has
    /// been idle once that reached `idle_after`, zero before.
    pub fn observe(&mut self, at: Duration, busy: u64, worked: bool) -> Duration {
        self.worked |= worked;
        let short = |(t0, _): (Duration, u64)| at.checked_sub(t0).is_some_and(|d| d < MIN_INTERVAL);
        if self.last.is_some_and(short) && at > self.last.map_or(at, |l| l.0) {
            return self.idle(at);
        }
        let worked = std::mem::take(&mut self.worked);
        let prev = self.last.replace((at, busy));
        // The first observation has no interval to judge: idleness starts after it.
        let quiet_since = prev.and_then(|(t0, b0)| {
            // A clock that went back or stood still gives no interval: not quiet.
            let secs = at.checked_sub(t0).filter(|d| !d.is_zero())?.as_secs_f64();
            let cpus = busy.saturating_sub(b0) as f64 / self.ticks_per_s / secs;
            (!worked && cpus < self.cpu_below).then_some(t0)
        });
        self.since = match quiet_since {
            Some(t0) => Some(self.since.unwrap_or(t0)),
            None => None,
        };
        self.idle(at)
    }

    /// What is known is no longer continuous (the CPU figures could not be read): start over.
    pub fn forget(&mut self) {
        self.last = None;
        self.since = None;
    }

    fn idle(&self, at: Duration) -> Duration {
        let idle = self
            .since
            .and_then(|s| at.checked_sub(s))
            .unwrap_or_default();
        if idle >= self.after {
            idle
        } else {
            Duration::ZERO
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HZ: u64 = 100;

    fn clock(after_s: u64, cpu_below: f64) -> IdleClock {
        let cfg = pipetrace_config::Host {
            idle_after: Duration::from_secs(after_s),
            idle_cpu_below: cpu_below,
        };
        IdleClock::new(&cfg, HZ)
    }

    /// Observes every `step_s` seconds from `t0_s` for `n` steps, the host busy on `cpus`
    /// CPUs, with work or not; gives the last reading (s) and the ticks reached.
    fn feed(
        c: &mut IdleClock,
        t0_s: u64,
        step_s: u64,
        n: u64,
        cpus: f64,
        worked: bool,
        ticks: &mut u64,
    ) -> u64 {
        let mut last = 0;
        for i in 1..=n {
            *ticks += (cpus * (step_s * HZ) as f64) as u64;
            let at = Duration::from_secs(t0_s + i * step_s);
            last = c.observe(at, *ticks, worked).as_secs();
        }
        last
    }

    #[test]
    fn a_quiet_host_is_idle_once_it_lasted_idle_after() {
        let mut c = clock(60, 0.1);
        let mut ticks = 1_000_000;
        assert_eq!(
            c.observe(Duration::from_secs(100), ticks, false),
            Duration::ZERO
        );
        // 55 s quiet: not yet.
        assert_eq!(feed(&mut c, 100, 5, 11, 0.05, false, &mut ticks), 0);
        // 60 s quiet: idle for those 60 s, counted from the first quiet interval's start.
        assert_eq!(feed(&mut c, 155, 5, 1, 0.05, false, &mut ticks), 60);
        assert_eq!(feed(&mut c, 160, 5, 8, 0.05, false, &mut ticks), 100);
    }

    #[test]
    fn ticks_back_to_back_after_a_hold_up_neither_reset_it_nor_hide_work() {
        let mut c = clock(10, 0.1);
        let mut ticks = 0;
        c.observe(Duration::ZERO, ticks, false);
        assert!(feed(&mut c, 0, 5, 4, 0.0, false, &mut ticks) >= 10);
        // Missed ticks fire microseconds apart; one clock tick of CPU lands in between.
        ticks += 1;
        let at = Duration::from_secs(20) + Duration::from_micros(50);
        assert!(c.observe(at, ticks, false) >= Duration::from_secs(10));
        // Work seen in so short an interval still counts at the next judged one.
        c.observe(at + Duration::from_micros(50), ticks, true);
        assert_eq!(feed(&mut c, 20, 5, 1, 0.0, false, &mut ticks), 0);
    }

    #[test]
    fn pipeline_work_or_cpu_use_resets_it() {
        let mut c = clock(10, 0.1);
        let mut ticks = 0;
        c.observe(Duration::ZERO, ticks, false);
        assert!(feed(&mut c, 0, 5, 4, 0.0, false, &mut ticks) >= 10);
        // A run, however idle the CPU: not idle, and the count starts over.
        assert_eq!(feed(&mut c, 20, 5, 1, 0.0, true, &mut ticks), 0);
        assert_eq!(feed(&mut c, 25, 5, 1, 0.0, false, &mut ticks), 0);
        assert_eq!(feed(&mut c, 30, 5, 1, 0.0, false, &mut ticks), 10);
        // Half a CPU busy with no pipeline: someone uses the node.
        assert_eq!(feed(&mut c, 35, 5, 1, 0.5, false, &mut ticks), 0);
        assert_eq!(feed(&mut c, 40, 5, 1, 0.0, false, &mut ticks), 0);
    }

    #[test]
    fn the_threshold_is_an_average_over_each_interval() {
        let mut c = clock(1, 0.5);
        let mut ticks = 0;
        c.observe(Duration::ZERO, ticks, false);
        // Just below and at the threshold.
        assert!(feed(&mut c, 0, 10, 3, 0.49, false, &mut ticks) >= 1);
        assert_eq!(feed(&mut c, 30, 10, 1, 0.5, false, &mut ticks), 0);
        // A burst of 4 s on one CPU in a 10 s interval averages 0.4 CPUs: quiet enough.
        ticks += 4 * HZ;
        let idle = c.observe(Duration::from_secs(50), ticks, false);
        assert_eq!(idle, Duration::from_secs(10));
    }

    #[test]
    fn a_lost_reading_or_a_clock_going_back_starts_over() {
        let mut c = clock(5, 0.1);
        let mut ticks = 0;
        c.observe(Duration::ZERO, ticks, false);
        assert!(feed(&mut c, 0, 5, 2, 0.0, false, &mut ticks) >= 5);
        c.forget();
        assert_eq!(feed(&mut c, 10, 5, 1, 0.0, false, &mut ticks), 0);
        assert_eq!(feed(&mut c, 15, 5, 1, 0.0, false, &mut ticks), 5);
        let back = c.observe(Duration::from_secs(1), ticks, false);
        assert_eq!(back, Duration::ZERO);
    }
}
