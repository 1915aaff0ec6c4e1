//! Bottleneck: what a tool or task spent its wall time on, from CPU time, block I/O and
//! memory waits, run-queue delay and network bytes. Thresholds: `diagnosis.*` in the config.
use pipetrace_config::Diagnosis;

use crate::accounting::{IMPOSSIBLE_BLKIO, Measured, Usage};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    CpuBound,
    /// Given several CPUs, kept about one busy: its work does not run in parallel.
    SingleThreaded,
    IoBound,
    MemoryBound,
    NetworkBound,
    /// Kept from its CPUs by the host's other work: waited for a CPU much of its life.
    CpuStarved,
    GpuBound,
    GpuStarved,
    Idle,
    Mixed,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::CpuBound => "cpu-bound",
            Kind::SingleThreaded => "single-threaded",
            Kind::IoBound => "io-bound",
            Kind::MemoryBound => "memory-bound",
            Kind::NetworkBound => "network-bound",
            Kind::CpuStarved => "cpu-starved",
            Kind::GpuBound => "gpu-bound",
            Kind::GpuStarved => "gpu-starved",
            Kind::Idle => "idle",
            Kind::Mixed => "mixed",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Bottleneck {
    pub kind: Kind,
    /// One sentence with the numbers.
    pub reason: String,
}

/// `cpus`: the CPUs it could use (a task's allocation; 1 for a tool, judged per CPU).
pub fn judge(
    u: &Usage,
    wall_ns: u64,
    cpus: f64,
    measured: Measured,
    t: &Diagnosis,
) -> Option<Bottleneck> {
    if wall_ns < t.min_wall.as_nanos() as u64 || cpus <= 0.0 {
        return None;
    }
    let host = host_verdict(u, wall_ns, cpus, measured, t);
    Some(match gpu_verdict(u, &host, t) {
        Some(g) => g,
        None => host,
    })
}

/// What its GPU says where it held one: kept busy (gpu-bound), or left waiting while the
/// CPU, storage or memory was the limit (gpu-starved). None: its GPU decides nothing.
fn gpu_verdict(u: &Usage, host: &Bottleneck, t: &Diagnosis) -> Option<Bottleneck> {
    let g = &u.gpu;
    let sm = g.sm_utilization()?;
    let on_gpu = g.on_gpu_us as f64 / 1e6;
    if sm >= t.gpu_bound {
        let reason = format!(
            "kept its GPU's streaming multiprocessors busy {:.0}% of its {on_gpu:.1} s on it",
            100.0 * sm
        );
        return Some(Bottleneck {
            kind: Kind::GpuBound,
            reason,
        });
    }
    let limited = matches!(
        host.kind,
        Kind::CpuBound | Kind::IoBound | Kind::MemoryBound
    );
    (sm < t.gpu_starved_below && limited).then(|| Bottleneck {
        kind: Kind::GpuStarved,
        reason: format!(
            "held a GPU {on_gpu:.1} s with its SMs busy {:.0}% of it, while {} ({}): the GPU \
             waits on the rest",
            100.0 * sm,
            host.kind.as_str(),
            host.reason
        ),
    })
}

/// A life spent this much waiting for a CPU (run-queue delay over wall time) that is none of
/// the limits above waited for a busy host, not for itself.
const STARVED: f64 = 0.25;

/// The verdict from the kernel's figures: CPU, waits, network.
fn host_verdict(
    u: &Usage,
    wall_ns: u64,
    cpus: f64,
    measured: Measured,
    t: &Diagnosis,
) -> Bottleneck {
    let l = Life::of(u, wall_ns, cpus);
    let (kind, reason) = if measured.delay_accounting && l.mem_wait / l.unstarved >= t.memory_bound
    {
        let why = format!("waited for memory (reclaim, swap) {}", l.waited(l.mem_wait));
        (Kind::MemoryBound, why)
    } else if measured.io_wait && l.io_wait / l.unstarved >= t.io_bound {
        let busy = l.busy;
        let why = format!(
            "waited for block I/O {}; {busy:.1} CPUs busy on average",
            l.waited(l.io_wait)
        );
        (Kind::IoBound, why)
    } else if (l.cpu + l.queue) / l.wall / cpus >= t.cpu_bound {
        // Runnable time is time on a CPU plus time waiting for one: a busy machine slows a
        // CPU-bound task without making it anything else.
        (Kind::CpuBound, l.cpu_bound())
    } else if let Some(why) = l.single_threaded(t) {
        (Kind::SingleThreaded, why)
    } else if measured.network && l.net / l.wall >= t.network_bound_bytes_per_s as f64 {
        let why = format!(
            "moved {:.1} MiB/s over the network with {:.1} CPUs busy",
            l.net / l.wall / 1048576.0,
            l.busy
        );
        (Kind::NetworkBound, why)
    } else if l.queue / l.wall >= STARVED {
        let why = format!(
            "waited for a busy host: {} waiting for a CPU (summed over its threads) while \
             other work held them; {:.1} of {} CPUs busy",
            l.of_wall(l.queue),
            l.busy,
            l.cpus
        );
        (Kind::CpuStarved, why)
    } else if l.util < t.idle_below && u.impossible == 0 {
        // Where the kernel reported a wait impossibly (see `Usage::drop_impossible_delays`)
        // the sum of the rest is a lower bound: enough to call a wait, never to rule one out
        // (a CPU wait left out may hide a starved task: no idleness then).
        let why = format!(
            "{:.2} CPUs busy over {:.1} s, with little I/O or memory wait: waiting on \
             something else (sleep, lock, child, remote service)",
            l.busy, l.wall
        );
        (Kind::Idle, why)
    } else {
        (Kind::Mixed, l.mixed(u))
    };
    Bottleneck { kind, reason }
}

/// A life's figures in seconds, as the verdicts weigh them.
struct Life {
    wall: f64,
    cpus: f64,
    cpu: f64,
    /// CPUs busy on average, and that over the CPUs it had.
    busy: f64,
    util: f64,
    io_wait: f64,
    mem_wait: f64,
    /// Waiting for a CPU (run delay), summed over threads.
    queue: f64,
    net: f64,
    /// The time it was not kept from a CPU by others' load.
    unstarved: f64,
}

impl Life {
    fn of(u: &Usage, wall_ns: u64, cpus: f64) -> Self {
        let wall = wall_ns as f64 / 1e9;
        let cpu = u.cpu_ns() as f64 / 1e9;
        let (io_wait, mem_wait) = (
            u.blkio_delay_ns as f64 / 1e9,
            u.memory_delay_ns as f64 / 1e9,
        );
        let queue = u.run_delay_ns as f64 / 1e9;
        // Waits are weighed against the time it was not kept from a CPU by others' load (at
        // least half its life): a writer slowed by a busy machine still waits mostly on
        // storage. Run delay is summed over threads: spread over the work's parallelism.
        let par = ((cpu + queue + io_wait + mem_wait) / wall).max(1.0);
        Self {
            wall,
            cpus,
            cpu,
            busy: cpu / wall,
            util: cpu / wall / cpus,
            io_wait,
            mem_wait,
            queue,
            net: (u.net_tx_bytes + u.net_rx_bytes) as f64,
            unstarved: (wall - queue / par).max(wall / 2.0),
        }
    }

    fn of_wall(&self, x: f64) -> String {
        format!(
            "{x:.1} s of {:.1} s ({:.0}%)",
            self.wall,
            100.0 * x / self.wall
        )
    }

    /// A wait, and its share of the time it was not starved where others' load was felt.
    fn waited(&self, x: f64) -> String {
        let mut out = self.of_wall(x);
        if self.queue / self.wall >= 0.1 {
            out += &format!(
                " ({:.0}% of the {:.1} s it was not waiting for a CPU)",
                100.0 * x / self.unstarved,
                self.unstarved
            );
        }
        out
    }

    fn cpu_bound(&self) -> String {
        let starved = if self.queue / self.wall >= 0.1 {
            format!(", and waited for a CPU {}", self.of_wall(self.queue))
        } else {
            String::new()
        };
        let (busy, cpus) = (self.busy, self.cpus);
        let of_cpus = if cpus == 1.0 {
            format!("{busy:.1} CPUs busy on average")
        } else {
            format!("{busy:.1} of {cpus} CPUs busy ({:.0}%)", 100.0 * self.util)
        };
        format!("{of_cpus} over {:.1} s{starved}", self.wall)
    }

    /// Given 2 CPUs or more, runnable about one CPU's worth (on a CPU or waiting for one):
    /// the work ran one thread at a time, so the CPUs past the first did nothing.
    fn single_threaded(&self, t: &Diagnosis) -> Option<String> {
        let runnable = (self.cpu + self.queue) / self.wall;
        let one = runnable >= t.cpu_bound && runnable < 1.0 + (1.0 - t.cpu_bound);
        (self.cpus >= 2.0 && one).then(|| {
            format!(
                "kept one CPU of the {} asked for busy ({:.2} runnable on average over {:.1} \
                 s): its work runs one thread at a time; ask for 1",
                self.cpus, runnable, self.wall
            )
        })
    }

    fn mixed(&self, u: &Usage) -> String {
        let io = if u.impossible & IMPOSSIBLE_BLKIO != 0 {
            let w = self.of_wall(self.io_wait);
            format!("at least {w} (some processes' figures were impossible)")
        } else {
            self.of_wall(self.io_wait)
        };
        format!(
            "{:.1} of {} CPUs busy ({:.0}%), I/O wait {io}, no single limit",
            self.busy,
            self.cpus,
            100.0 * self.util
        )
    }
}

/// A task that made no progress (no CPU, no I/O, nothing starting or ending) for most of its
/// life is idle, whatever it did in the rest and however short each quiet stretch was
/// against `diagnosis.stall_after`. `quiet_ns`: the live sampler's sum of such stretches.
/// `starved_ns`: for a job judged kept from its CPUs, how long it waited for one; such a job
/// is idle still when it slept longer than it waited and a third of its life or more (on a
/// busy host its bit of work takes longer, the sleep does not).
pub fn mostly_quiet(
    quiet_ns: u64,
    wall_ns: u64,
    starved_ns: u64,
    t: &Diagnosis,
) -> Option<Bottleneck> {
    let most = quiet_ns.saturating_mul(2) >= wall_ns;
    let slept_more = starved_ns > 0 && quiet_ns >= starved_ns && quiet_ns * 3 >= wall_ns;
    if wall_ns < t.min_wall.as_nanos() as u64 || !(most || slept_more) {
        return None;
    }
    let (quiet, wall) = (quiet_ns as f64 / 1e9, wall_ns as f64 / 1e9);
    Some(Bottleneck {
        kind: Kind::Idle,
        reason: format!(
            "made no progress (no CPU, no I/O, nothing started or ended) for {quiet:.1} s of \
             {wall:.1} s ({:.0}%): waiting on something else (sleep, lock, child, remote \
             service)",
            100.0 * quiet / wall
        ),
    })
}

#[cfg(test)]
mod tests {

    #[test]
    fn quiet_for_most_of_its_life_is_idle_whatever_the_stall_window() {
        let d = Diagnosis::default();
        let s = 1_000_000_000u64;
        let b = mostly_quiet(6 * s, 75 * s / 10, 0, &d).expect("6 s of 7.5 s quiet");
        assert_eq!(b.kind, Kind::Idle);
        assert!(b.reason.contains("6.0 s of 7.5 s"), "{}", b.reason);
        assert_eq!(
            mostly_quiet(3 * s, 75 * s / 10, 0, &d),
            None,
            "less than half"
        );
        // Kept from a CPU 5 s while it slept 6 s of 13: it slept more than it waited.
        let b = mostly_quiet(6 * s, 13 * s, 5 * s, &d).expect("slept more than it waited");
        assert_eq!(b.kind, Kind::Idle);
        assert_eq!(mostly_quiet(4 * s, 13 * s, 5 * s, &d), None, "waited more");
        assert_eq!(
            mostly_quiet(s / 2, s / 2, 0, &d),
            None,
            "shorter than min_wall"
        );
    }

    use super::*;

    const ALL: Measured = Measured {
        network: true,
        delay_accounting: true,
        io_wait: true,
    };

    fn usage(cpu_s: f64, io_s: f64, mem_s: f64, net: u64) -> Usage {
        Usage {
            cpu_user_ns: (cpu_s * 1e9) as u64,
            blkio_delay_ns: (io_s * 1e9) as u64,
            memory_delay_ns: (mem_s * 1e9) as u64,
            net_tx_bytes: net,
            ..Default::default()
        }
    }

    fn kind(u: Usage, wall_s: f64, cpus: f64) -> Option<Kind> {
        judge(&u, (wall_s * 1e9) as u64, cpus, ALL, &Diagnosis::default()).map(|b| b.kind)
    }

    fn on_gpu(mut u: Usage, seconds: u64, sm: f64) -> Usage {
        u.gpu = crate::accounting::GpuFigures {
            devices: 1,
            memory_peak_bytes: 1 << 30,
            on_gpu_us: seconds * 1_000_000,
            sm_busy_us: (seconds as f64 * sm * 1e6) as u64,
            memory_busy_us: 0,
        };
        u
    }

    #[test]
    fn a_gpu_kept_busy_is_gpu_bound_and_one_left_waiting_on_the_cpu_is_starved() {
        // A feeder process: one core busy, the GPU's SMs busy 90%: the GPU is the limit.
        let busy = on_gpu(usage(9.5, 0.0, 0.0, 0), 10, 0.9);
        assert_eq!(kind(busy, 10.0, 1.0), Some(Kind::GpuBound));
        // The CPU decodes images while the GPU waits: starved.
        let starved = on_gpu(usage(9.5, 0.0, 0.0, 0), 10, 0.05);
        let b = judge(&starved, 10_000_000_000, 1.0, ALL, &Diagnosis::default()).unwrap();
        assert_eq!(b.kind, Kind::GpuStarved);
        assert!(
            b.reason.contains("cpu-bound") && b.reason.contains("5%"),
            "{}",
            b.reason
        );
        // Storage as the limit starves it too.
        assert_eq!(
            kind(on_gpu(usage(1.0, 6.0, 0.0, 0), 10, 0.0), 10.0, 1.0),
            Some(Kind::GpuStarved)
        );
        // A context held while sleeping: idle, not starved (nothing else was the limit).
        assert_eq!(
            kind(on_gpu(usage(0.1, 0.0, 0.0, 0), 10, 0.0), 10.0, 1.0),
            Some(Kind::Idle)
        );
        // In between: the kernel's verdict stands.
        assert_eq!(
            kind(on_gpu(usage(9.5, 0.0, 0.0, 0), 10, 0.5), 10.0, 1.0),
            Some(Kind::CpuBound)
        );
    }

    #[test]
    fn verdicts_follow_the_dominant_signal() {
        assert_eq!(
            kind(usage(9.5, 0.0, 0.0, 0), 10.0, 1.0),
            Some(Kind::CpuBound)
        );
        // One CPU busy of the 4 asked: single-threaded, on a busy host too (runnable, waiting
        // for a CPU half the time); two of 4 is no single limit.
        assert_eq!(
            kind(usage(9.5, 0.0, 0.0, 0), 10.0, 4.0),
            Some(Kind::SingleThreaded)
        );
        let mut starved = usage(5.0, 0.0, 0.0, 0);
        starved.run_delay_ns = 4_500_000_000;
        assert_eq!(kind(starved, 10.0, 2.0), Some(Kind::SingleThreaded));
        assert_eq!(kind(usage(20.0, 0.0, 0.0, 0), 10.0, 4.0), Some(Kind::Mixed));
        assert_eq!(
            kind(usage(1.0, 6.0, 0.0, 0), 10.0, 1.0),
            Some(Kind::IoBound)
        );
        assert_eq!(
            kind(usage(5.0, 0.0, 2.0, 0), 10.0, 1.0),
            Some(Kind::MemoryBound)
        );
        assert_eq!(
            kind(usage(0.5, 0.0, 0.0, 50 << 20), 10.0, 1.0),
            Some(Kind::NetworkBound)
        );
        assert_eq!(kind(usage(0.1, 0.0, 0.0, 0), 10.0, 1.0), Some(Kind::Idle));
        // Too short to judge.
        assert_eq!(kind(usage(0.1, 0.0, 0.0, 0), 0.5, 1.0), None);
    }

    #[test]
    fn waits_are_weighed_against_the_time_not_spent_waiting_for_a_cpu() {
        // A writer on a busy machine: 0.3 s on a CPU, 0.8 s waiting for one, 0.6 s for
        // storage over 2.1 s. Against its 1.3 s unstarved, storage is 46%.
        let mut u = usage(0.3, 0.6, 0.0, 0);
        u.run_delay_ns = 800_000_000;
        let b = judge(&u, 2_100_000_000, 1.0, ALL, &Diagnosis::default()).unwrap();
        assert_eq!(b.kind, Kind::IoBound, "{}", b.reason);
        assert!(b.reason.contains("46% of the 1.3 s"), "{}", b.reason);
        // Never weighed against less than half its life.
        // (0.25 s of 0.1 s would be io-bound; of 1.0 s it is not.)
        let mut u = usage(0.1, 0.25, 0.0, 0);
        u.run_delay_ns = 1_900_000_000;
        assert_eq!(kind(u, 2.0, 1.0), Some(Kind::CpuBound));
    }

    #[test]
    fn a_parallel_tools_summed_cpu_wait_does_not_inflate_its_io_share() {
        // 16 threads on a busy node: 12x wall of CPU, 4x of run delay, 0.2x of I/O wait.
        let mut u = usage(120.0, 2.0, 0.0, 0);
        u.run_delay_ns = 40_000_000_000;
        assert_eq!(kind(u, 10.0, 16.0), Some(Kind::CpuBound));
    }

    #[test]
    fn a_sum_short_of_impossible_waits_can_prove_a_wait_but_never_idleness() {
        // Three writers, two of whose block-I/O waits the kernel counted from boot: the
        // third's 0.7 s of 2.1 s is still io-bound.
        let mut u = usage(0.03, 0.7, 0.0, 0);
        u.impossible = IMPOSSIBLE_BLKIO;
        assert_eq!(kind(u, 2.1, 1.0), Some(Kind::IoBound));
        // All dropped: little CPU is no proof of idleness, and the reason says what is known.
        let mut u = usage(0.03, 0.0, 0.0, 0);
        u.impossible = IMPOSSIBLE_BLKIO;
        let b = judge(&u, 2_100_000_000, 1.0, ALL, &Diagnosis::default()).unwrap();
        assert_eq!(b.kind, Kind::Mixed);
        assert!(b.reason.contains("I/O wait at least 0.0 s"), "{}", b.reason);
    }

    #[test]
    fn a_job_kept_from_its_cpus_by_other_work_waited_for_a_busy_host() {
        // 4 CPUs asked, 3.0 s on a CPU and 5.0 s waiting for one (summed over its threads)
        // over 5 s: neither CPU-bound (1.6 of 4 runnable) nor single-threaded: the host was
        // busy.
        let mut u = usage(3.0, 0.0, 0.0, 0);
        u.run_delay_ns = 5_000_000_000;
        let b = judge(&u, 5_000_000_000, 4.0, ALL, &Diagnosis::default()).unwrap();
        assert_eq!(b.kind, Kind::CpuStarved, "{}", b.reason);
        assert!(
            b.reason
                .starts_with("waited for a busy host: 5.0 s of 5.0 s"),
            "{}",
            b.reason
        );
        // A little waiting is no verdict: mixed, as before.
        let mut u = usage(6.0, 0.0, 0.0, 0);
        u.run_delay_ns = 500_000_000;
        assert_eq!(kind(u, 5.0, 4.0), Some(Kind::Mixed));
    }

    #[test]
    fn unmeasured_waits_do_not_decide() {
        let none = Measured::default();
        let u = usage(1.0, 6.0, 0.0, 0);
        let b = judge(&u, 10_000_000_000, 1.0, none, &Diagnosis::default()).unwrap();
        assert_eq!(b.kind, Kind::Mixed);
    }
}
