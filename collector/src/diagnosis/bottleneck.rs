//! Bottleneck: what a tool or task spent its wall time on, from CPU time, block I/O and
//! memory waits, run-queue delay and network bytes. Thresholds: `diagnosis.*` in the config.
use pipetrace_config::Diagnosis;

use crate::accounting::{IMPOSSIBLE_BLKIO, Measured, Usage};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    CpuBound,
    IoBound,
    MemoryBound,
    NetworkBound,
    Idle,
    Mixed,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::CpuBound => "cpu-bound",
            Kind::IoBound => "io-bound",
            Kind::MemoryBound => "memory-bound",
            Kind::NetworkBound => "network-bound",
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
    let wall = wall_ns as f64 / 1e9;
    let cpu = u.cpu_ns() as f64 / 1e9;
    let busy = cpu / wall;
    let util = busy / cpus;
    let io_wait = u.blkio_delay_ns as f64 / 1e9;
    let mem_wait = u.memory_delay_ns as f64 / 1e9;
    let queue = u.run_delay_ns as f64 / 1e9;
    let net = (u.net_tx_bytes + u.net_rx_bytes) as f64;
    // Where the kernel reported a wait impossibly (see `Usage::drop_impossible_delays`) the
    // sum of the rest is a lower bound: enough to call a wait, never to rule one out (a
    // CPU wait left out may hide a starved task: no idleness then either).
    let dropped = u.impossible != 0;
    let of = |x: f64| format!("{x:.1} s of {wall:.1} s ({:.0}%)", 100.0 * x / wall);
    // Waits are weighed against the time it was not kept from a CPU by others' load (at
    // least half its life): a writer slowed by a busy machine still waits mostly on storage.
    // Run delay is summed over threads: spread over the work's parallelism first.
    let par = ((cpu + queue + io_wait + mem_wait) / wall).max(1.0);
    let unstarved = (wall - queue / par).max(wall / 2.0);
    let besides = |x: f64| {
        if queue / wall >= 0.1 {
            format!(
                " ({:.0}% of the {unstarved:.1} s it was not waiting for a CPU)",
                100.0 * x / unstarved
            )
        } else {
            String::new()
        }
    };
    let (kind, reason) = if measured.delay_accounting && mem_wait / unstarved >= t.memory_bound {
        (
            Kind::MemoryBound,
            format!(
                "waited for memory (reclaim, swap) {}{}",
                of(mem_wait),
                besides(mem_wait)
            ),
        )
    } else if measured.io_wait && io_wait / unstarved >= t.io_bound {
        (
            Kind::IoBound,
            format!(
                "waited for block I/O {}{}; {busy:.1} CPUs busy on average",
                of(io_wait),
                besides(io_wait)
            ),
        )
    } else if (cpu + queue) / wall / cpus >= t.cpu_bound {
        // Runnable time is time on a CPU plus time waiting for one: a busy machine slows a
        // CPU-bound task without making it anything else.
        let starved = if queue / wall >= 0.1 {
            format!(", and waited for a CPU {}", of(queue))
        } else {
            String::new()
        };
        let of_cpus = if cpus == 1.0 {
            format!("{busy:.1} CPUs busy on average")
        } else {
            format!("{busy:.1} of {cpus} CPUs busy ({:.0}%)", 100.0 * util)
        };
        (
            Kind::CpuBound,
            format!("{of_cpus} over {wall:.1} s{starved}"),
        )
    } else if measured.network && net / wall >= t.network_bound_bytes_per_s as f64 {
        (
            Kind::NetworkBound,
            format!(
                "moved {:.1} MiB/s over the network with {busy:.1} CPUs busy",
                net / wall / 1048576.0
            ),
        )
    } else if util < t.idle_below && !dropped {
        (
            Kind::Idle,
            format!(
                "{busy:.2} CPUs busy over {wall:.1} s, with little I/O or memory wait: \
                 waiting on something else (sleep, lock, child, remote service)"
            ),
        )
    } else {
        let io = if u.impossible & IMPOSSIBLE_BLKIO != 0 {
            format!(
                "at least {} (some processes' figures were impossible)",
                of(io_wait)
            )
        } else {
            of(io_wait)
        };
        (
            Kind::Mixed,
            format!(
                "{busy:.1} of {cpus} CPUs busy ({:.0}%), I/O wait {io}, no single limit",
                100.0 * util
            ),
        )
    };
    Some(Bottleneck { kind, reason })
}

/// A task that made no progress (no CPU, no I/O, nothing starting or ending) for most of its
/// life is idle, whatever it did in the rest and however short each quiet stretch was
/// against `diagnosis.stall_after`. `quiet_ns`: the live sampler's sum of such stretches.
pub fn mostly_quiet(quiet_ns: u64, wall_ns: u64, t: &Diagnosis) -> Option<Bottleneck> {
    if wall_ns < t.min_wall.as_nanos() as u64 || quiet_ns.saturating_mul(2) < wall_ns {
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
        let b = mostly_quiet(6 * s, 75 * s / 10, &d).expect("6 s of 7.5 s quiet");
        assert_eq!(b.kind, Kind::Idle);
        assert!(b.reason.contains("6.0 s of 7.5 s"), "{}", b.reason);
        assert_eq!(mostly_quiet(3 * s, 75 * s / 10, &d), None, "less than half");
        assert_eq!(
            mostly_quiet(s / 2, s / 2, &d),
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

    #[test]
    fn verdicts_follow_the_dominant_signal() {
        assert_eq!(
            kind(usage(9.5, 0.0, 0.0, 0), 10.0, 1.0),
            Some(Kind::CpuBound)
        );
        assert_eq!(kind(usage(9.5, 0.0, 0.0, 0), 10.0, 4.0), Some(Kind::Mixed));
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
    fn unmeasured_waits_do_not_decide() {
        let none = Measured::default();
        let u = usage(1.0, 6.0, 0.0, 0);
        let b = judge(&u, 10_000_000_000, 1.0, none, &Diagnosis::default()).unwrap();
        assert_eq!(b.kind, Kind::Mixed);
    }
}
