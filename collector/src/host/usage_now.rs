//! Usage of a process still running, for live metrics between its start and its exit (when
//! the kernel's exact figures replace these), as the host reads them (`Host::live`).

/// Counters so far and memory now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Live {
    pub cpu_user_ns: u64,
    pub cpu_system_ns: u64,
    pub rss_bytes: u64,
    pub hwm_bytes: u64,
    pub disk_read_bytes: u64,
    pub disk_write_bytes: u64,
    /// Bytes through read and write calls (pipes and sockets too): progress a tool makes
    /// without touching storage.
    pub io_chars: u64,
    pub run_delay_ns: u64,
}
