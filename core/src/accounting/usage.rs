//! A process's resource usage as the kernel summed it when the process was reaped.
use pipetrace_probes_common::{Figures, pipetrace_io::*};

/// Threads assumed waiting at once when judging a wait figure possible, where the number of
/// threads the process had is not known (figures polled from /proc).
pub const MAX_WAITING_THREADS: u64 = 256;

/// Bits of [`Usage::impossible`]: which waits were dropped.
pub const IMPOSSIBLE_BLKIO: u8 = 1;
pub const IMPOSSIBLE_MEMORY: u8 = 2;
pub const IMPOSSIBLE_RUN_QUEUE: u8 = 4;

/// Kernel counters of one process (every thread, every image it ran), in plain units.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub cpu_user_ns: u64,
    pub cpu_system_ns: u64,
    /// ru_maxrss: the largest resident set of any image the process ran, including the one
    /// it was forked with (a small job forked from a large engine inherits its size).
    pub maxrss_bytes: u64,
    /// High-water mark of the program the process ended as (0: unknown).
    pub image_peak_bytes: u64,
    pub minor_faults: u64,
    pub major_faults: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    /// Bytes through read/write calls (any file, pipe or socket).
    pub read_chars: u64,
    pub write_chars: u64,
    pub read_calls: u64,
    pub write_calls: u64,
    /// Bytes fetched from and dirtied towards storage.
    pub disk_read_bytes: u64,
    pub disk_write_bytes: u64,
    /// Dirtied bytes that were truncated away before reaching storage.
    pub disk_cancelled_write_bytes: u64,
    pub run_delay_ns: u64,
    pub blkio_delay_ns: u64,
    pub memory_delay_ns: u64,
    pub net_tx_bytes: u64,
    pub net_rx_bytes: u64,
    /// Threads the process had over its life (0: unknown); summed over a roll-up.
    pub threads: u64,
    /// The figures were taken as the last thread exited: the reap-time report never came.
    pub at_exit: bool,
    /// Waits the kernel reported that no process could have, dropped (`IMPOSSIBLE_*` bits).
    pub impossible: u8,
    /// Its GPU use, from the driver (empty without NVIDIA's driver or a GPU).
    pub gpu: super::GpuFigures,
}

impl Usage {
    pub(crate) fn from_figures(e: &Figures, page_size: u64) -> Self {
        // The leader's own plus its exited threads'.
        // Kernel records are trusted for meaning, not for range: nothing here may overflow.
        let io = |i: usize| e.io[i].saturating_add(e.acc.io[i]);
        let (user, system) = CpuTimes {
            utime: e.utime_ns,
            stime: e.stime_ns,
            rtime: e.runtime_ns,
            prev: (e.prev_utime_ns, e.prev_stime_ns),
        }
        .split();
        Self {
            cpu_user_ns: user,
            cpu_system_ns: system,
            maxrss_bytes: e.maxrss_pages.saturating_mul(page_size),
            image_peak_bytes: 0,
            minor_faults: e.min_flt,
            major_faults: e.maj_flt,
            voluntary_switches: e.nvcsw,
            involuntary_switches: e.nivcsw,
            read_chars: io(RCHAR),
            write_chars: io(WCHAR),
            read_calls: io(SYSCR),
            write_calls: io(SYSCW),
            disk_read_bytes: io(READ_BYTES),
            disk_write_bytes: io(WRITE_BYTES),
            disk_cancelled_write_bytes: io(CANCELLED_WRITE_BYTES),
            run_delay_ns: e.acc.run_delay_ns,
            blkio_delay_ns: e.acc.blkio_delay_ns,
            memory_delay_ns: e.acc.mem_delay_ns,
            net_tx_bytes: e.acc.net_tx_bytes,
            net_rx_bytes: e.acc.net_rx_bytes,
            threads: e.acc.threads_exited.saturating_add(1),
            at_exit: false,
            impossible: 0,
            gpu: super::GpuFigures::default(),
        }
    }

    /// Now and then the kernel ends a wait it never saw start (one under way when delay
    /// accounting was switched on, and, seen on 6.18, an occasional first block-I/O wait of
    /// a new process): the wait then counts from boot. No thread can wait longer than it
    /// lives, so a wait longer than the process lived times its threads is impossible and
    /// dropped (with [`MAX_WAITING_THREADS`] where the threads are not known); so is one
    /// longer than the process lived and at least as long as the time from boot to the
    /// process's start (`since_boot_ns`, on the kernel's monotonic clock), the mark of a
    /// wait counted from boot. Returns how many waits were dropped.
    pub fn drop_impossible_delays(&mut self, lifetime_ns: u64, since_boot_ns: u64) -> u32 {
        let threads = match self.threads {
            0 => MAX_WAITING_THREADS,
            n => n,
        };
        // A millisecond of slack: the clocks of a start, an exit and a wait are read apart.
        let bound = lifetime_ns
            .saturating_add(1_000_000)
            .saturating_mul(threads);
        let mut dropped = 0;
        for (bit, d) in [
            (IMPOSSIBLE_BLKIO, &mut self.blkio_delay_ns),
            (IMPOSSIBLE_MEMORY, &mut self.memory_delay_ns),
            (IMPOSSIBLE_RUN_QUEUE, &mut self.run_delay_ns),
        ] {
            // Where the threads are known the bound is exact; the from-boot mark is for the
            // rest (a multi-threaded process's real waits can exceed its life).
            let from_boot = self.threads == 0 && *d > lifetime_ns && *d >= since_boot_ns;
            if *d > bound || from_boot {
                log::info!(
                    "dropped an impossible wait of {} ms in a process of {threads} threads \
                     that lived {} ms",
                    *d / 1_000_000,
                    lifetime_ns / 1_000_000
                );
                *d = 0;
                self.impossible |= bit;
                dropped += 1;
            }
        }
        dropped
    }

    /// Takes the CPU and the context switches the kernel booked by the last switch of a
    /// thread of this process where they are more than these figures hold: figures taken at
    /// exit lack the way out (a heap unmapped, preemptions there under load). Never lowers
    /// them: a thread leaving while another's release is still under way reports less than
    /// the end.
    pub fn take_final(&mut self, cpu: &CpuTimes, switches: &Switches) {
        if cpu.rtime > self.cpu_user_ns.saturating_add(self.cpu_system_ns) {
            (self.cpu_user_ns, self.cpu_system_ns) = cpu.split();
        }
        self.voluntary_switches = self.voluntary_switches.max(switches.voluntary);
        self.involuntary_switches = self.involuntary_switches.max(switches.involuntary);
    }

    /// The memory this process's program used at its peak: its image's high-water mark when
    /// known, else maxrss.
    pub fn peak_bytes(&self) -> u64 {
        if self.image_peak_bytes > 0 {
            self.image_peak_bytes
        } else {
            self.maxrss_bytes
        }
    }

    pub fn cpu_ns(&self) -> u64 {
        self.cpu_user_ns + self.cpu_system_ns
    }

    /// Sums counters; the peak is the larger one (use [`super::Rollup`] for concurrent peaks).
    pub(crate) fn add(&mut self, o: &Usage) {
        self.cpu_user_ns += o.cpu_user_ns;
        self.cpu_system_ns += o.cpu_system_ns;
        self.maxrss_bytes = self.maxrss_bytes.max(o.maxrss_bytes);
        self.image_peak_bytes = self.image_peak_bytes.max(o.image_peak_bytes);
        self.minor_faults += o.minor_faults;
        self.major_faults += o.major_faults;
        self.voluntary_switches += o.voluntary_switches;
        self.involuntary_switches += o.involuntary_switches;
        self.read_chars += o.read_chars;
        self.write_chars += o.write_chars;
        self.read_calls += o.read_calls;
        self.write_calls += o.write_calls;
        self.disk_read_bytes += o.disk_read_bytes;
        self.disk_write_bytes += o.disk_write_bytes;
        self.disk_cancelled_write_bytes += o.disk_cancelled_write_bytes;
        self.run_delay_ns += o.run_delay_ns;
        self.blkio_delay_ns += o.blkio_delay_ns;
        self.memory_delay_ns += o.memory_delay_ns;
        self.net_tx_bytes += o.net_tx_bytes;
        self.net_rx_bytes += o.net_rx_bytes;
        self.threads += o.threads;
        self.at_exit |= o.at_exit;
        self.impossible |= o.impossible;
        self.gpu.add(&o.gpu);
    }
}

/// A process's context switches as the kernel counts them (`nvcsw`, `nivcsw`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Switches {
    pub voluntary: u64,
    pub involuntary: u64,
}

/// A process's CPU as the kernel keeps it, nanoseconds: tick-sampled user and system time,
/// the exact runtime they split, and the split the kernel last reported
/// (`signal_struct.prev_cputime`, kept by every /proc read, getrusage and wait4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    pub utime: u64,
    pub stime: u64,
    pub rtime: u64,
    pub prev: (u64, u64),
}

impl CpuTimes {
    /// User and system time as wait4 reports them (`cputime_adjust`): the exact runtime
    /// split by the samples' ratio, never below a split reported before. Anyone reading
    /// /proc/PID/stat mid-run (`ps`, `top`, another agent) moves the final split; without
    /// the earlier split, ours and wait4's then differ by microseconds.
    pub(crate) fn split(&self) -> (u64, u64) {
        let (prev_user, prev_system) = self.prev;
        let rtime = self.rtime;
        if prev_user.saturating_add(prev_system) >= rtime {
            return self.prev;
        }
        let mut system = match (self.utime, self.stime) {
            (_, 0) => 0,
            (0, _) => rtime,
            (u, s) => (u128::from(s) * u128::from(rtime) / (u128::from(s) + u128::from(u))) as u64,
        };
        system = system.max(prev_system).min(rtime);
        let mut user = rtime - system;
        if user < prev_user {
            user = prev_user;
            system = rtime - user;
        }
        (user, system)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_counted_from_boot_are_dropped_even_soon_after_boot() {
        let s = 1_000_000_000u64;
        let with = |blkio: u64| Usage {
            blkio_delay_ns: blkio,
            ..Usage::default()
        };
        // Booted 15 minutes ago; a 4 s process started at 896 s reports a 900 s wait.
        let mut u = with(900 * s);
        u.drop_impossible_delays(4 * s, 896 * s);
        assert_eq!(u.blkio_delay_ns, 0, "counted from boot");
        // A real wait: 3 s of 4 s, or 6 s over two threads.
        for real in [3 * s, 6 * s] {
            let mut u = with(real);
            u.drop_impossible_delays(4 * s, 896 * s);
            assert_eq!(u.blkio_delay_ns, real);
        }
        // Longer than the process lived times the threads that could wait: impossible.
        let mut u = with(2000 * s);
        assert_eq!(u.drop_impossible_delays(s, 5000 * s), 1);
        assert_eq!(u.blkio_delay_ns, 0);
        assert_eq!(u.impossible, IMPOSSIBLE_BLKIO);
    }

    #[test]
    fn a_wait_is_bounded_by_the_threads_that_could_wait() {
        let s = 1_000_000_000u64;
        // Seen on a machine up 9 minutes: `sleep 25` (one thread) reported 543 s of
        // block-I/O wait, started 8 minutes after boot (so not caught as from-boot alone).
        let mut u = Usage {
            blkio_delay_ns: 543 * s,
            run_delay_ns: s / 10,
            threads: 1,
            ..Usage::default()
        };
        assert_eq!(u.drop_impossible_delays(25 * s, 600 * s), 1);
        assert_eq!((u.blkio_delay_ns, u.run_delay_ns), (0, s / 10));
        // Eight threads waiting 20 s each in a 25 s life: possible, kept, even a minute
        // after boot.
        let mut u = Usage {
            blkio_delay_ns: 160 * s,
            memory_delay_ns: 30 * s,
            threads: 8,
            ..Usage::default()
        };
        assert_eq!(u.drop_impossible_delays(25 * s, 60 * s), 0);
        assert_eq!(u.blkio_delay_ns, 160 * s);
        // The same with one thread: both impossible.
        u.threads = 1;
        assert_eq!(u.drop_impossible_delays(25 * s, 3600 * s), 2);
        assert_eq!(u.impossible, IMPOSSIBLE_BLKIO | IMPOSSIBLE_MEMORY);
        // A run-queue delay counted from boot.
        let mut u = Usage {
            run_delay_ns: 300 * s,
            threads: 1,
            ..Usage::default()
        };
        assert_eq!(u.drop_impossible_delays(2 * s, 290 * s), 1);
        assert_eq!(u.impossible, IMPOSSIBLE_RUN_QUEUE);
    }

    fn split(utime: u64, stime: u64, rtime: u64, prev: (u64, u64)) -> (u64, u64) {
        CpuTimes {
            utime,
            stime,
            rtime,
            prev,
        }
        .split()
    }

    #[test]
    fn cpu_split_follows_the_kernel() {
        // No tick landed in system mode: all of the exact time is user time.
        assert_eq!(split(4_000_000, 0, 5_123_456, (0, 0)), (5_123_456, 0));
        assert_eq!(split(0, 0, 700, (0, 0)), (700, 0));
        assert_eq!(split(0, 8, 900, (0, 0)), (0, 900));
        // 3:1 samples split 4 ms exactly 3:1.
        assert_eq!(split(3, 1, 4_000_000, (0, 0)), (3_000_000, 1_000_000));
    }

    #[test]
    fn an_earlier_reported_split_holds_as_the_kernel_keeps_it() {
        // A /proc read mid-run reported 1 ms system of 2 ms; the final samples say 3:1 of
        // 4 ms, 1 ms system: system stays at least what was reported, user takes the rest.
        assert_eq!(
            split(3, 1, 4_000_000, (1_000_000, 1_000_000)),
            (3_000_000, 1_000_000)
        );
        assert_eq!(
            split(3, 1, 4_000_000, (500_000, 1_500_000)),
            (2_500_000, 1_500_000)
        );
        // User time reported before cannot fall either.
        assert_eq!(
            split(1, 3, 4_000_000, (1_800_000, 200_000)),
            (1_800_000, 2_200_000)
        );
        // Once wait4 or a read saw the whole runtime, its split is the split.
        assert_eq!(
            split(3, 1, 4_000_000, (2_000_000, 2_000_000)),
            (2_000_000, 2_000_000)
        );
    }
}
