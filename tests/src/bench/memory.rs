//! A process's memory four ways: its resident set (what `ps` and most monitors show), its
//! peak, what is private to it, and what it really costs the machine.
//!
//! The kernel maps a BPF ring buffer's data pages twice, back to back, so that a record
//! wrapping around the end reads as one: a 16 MiB ring adds 32 MiB to the resident set but
//! 16 MiB to the machine's RAM. The real cost is therefore the proportional set size (Pss,
//! /proc/PID/smaps_rollup): each page divided by how many times it is mapped, which counts
//! the ring once and a shared library by its share. At the peak only the resident set's
//! high-water mark is known: its real cost there is that mark minus the ring's second
//! mapping (the ring is resident from the start, so the mark always holds it twice).
/// Memory of one process, MiB.
#[derive(Clone, Copy, Debug, Default)]
pub struct Mem {
    /// Resident set now (VmRSS).
    pub rss: f64,
    /// Highest resident set so far (VmHWM).
    pub peak: f64,
    /// Private anonymous memory now (RssAnon): the heap, stacks.
    pub private: f64,
    /// Proportional set size now (Pss): the real cost.
    pub pss: f64,
    /// The ring buffer's data, counted twice in `rss` and `peak`.
    pub ring: f64,
}

impl Mem {
    /// The real cost at the peak: the peak resident set with the ring counted once.
    pub fn real_peak(&self) -> f64 {
        self.peak - self.ring
    }
}

fn kib_field(text: &str, field: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}

/// The ring buffer's data size, MiB: its read-only shared mapping holds a page of
/// positions and the data twice.
fn ring_mib(pid: u32) -> f64 {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    let bytes: u64 = maps
        .lines()
        .filter(|l| l.ends_with("anon_inode:bpf-map") && l.contains(" r--s "))
        .filter_map(|l| {
            let (lo, hi) = l.split_whitespace().next()?.split_once('-')?;
            let size = u64::from_str_radix(hi, 16).ok()? - u64::from_str_radix(lo, 16).ok()?;
            Some(size.saturating_sub(4096) / 2)
        })
        .sum();
    bytes as f64 / (1024.0 * 1024.0)
}

/// `pid`'s memory now; None once it is gone.
pub fn of(pid: u32) -> Option<Mem> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    Some(Mem {
        rss: kib_field(&status, "VmRSS:"),
        peak: kib_field(&status, "VmHWM:"),
        private: kib_field(&status, "RssAnon:"),
        pss: kib_field(&rollup, "Pss:"),
        ring: ring_mib(pid),
    })
}

/// Samples a process's memory every 100 ms while it lives.
pub struct Sampler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<(Mem, Mem)>,
}

impl Sampler {
    pub fn start(pid: u32) -> Self {
        use std::sync::atomic::Ordering::Relaxed;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let (mut top, mut last) = (Mem::default(), Mem::default());
            while !stopped.load(Relaxed) {
                let Some(m) = of(pid) else { break };
                top = Mem {
                    rss: top.rss.max(m.rss),
                    peak: top.peak.max(m.peak),
                    private: top.private.max(m.private),
                    pss: top.pss.max(m.pss),
                    ring: top.ring.max(m.ring),
                };
                // Its last figures with the probes loaded (not as it unloads them).
                if m.ring > 0.0 {
                    last = m;
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            (top, last)
        });
        Self { stop, thread }
    }

    /// The highest of each figure, and the last sample with the ring buffer mapped (within
    /// 100 ms of the probes' unloading).
    pub fn stop(self) -> (Mem, Mem) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

/// CPU seconds (user + system) a process has used so far.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, r)| r.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        rest.get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (ticks(11) + ticks(12)) / hz
}
