//! The one interface between the core (tree, attribution, span building, diagnosis) and the
//! machine: every read of /proc, of cgroups, of an engine's or a runtime's records, and of the
//! clocks goes through a [`Host`] the core is handed. The agent hands it the host crate's `LiveHost`;
//! unit tests hand it a fake one and drive the core with synthetic events, without root.
use std::{
    io,
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, SystemTime},
};

#[cfg(any(test, feature = "fake-host"))]
pub mod fake;

/// A file's facts the core looks at: when it changed, who owns it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileFacts {
    pub modified: SystemTime,
    pub uid: u32,
    pub is_dir: bool,
    pub len: u64,
}

/// An established TCP connection a process holds: its own end and the far end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpLink {
    pub local: std::net::SocketAddr,
    pub remote: std::net::SocketAddr,
}

/// The machine, as the core may see it.
pub trait Host: Send + Sync {
    /// CLOCK_BOOTTIME now, ns: the kernel's event clock.
    fn boottime_ns(&self) -> u64;
    /// Time the machine spent suspended since boot, ns.
    fn suspended_ns(&self) -> u64;
    /// The wall clock, to compare with engines' records.
    fn now(&self) -> SystemTime;

    /// Every process running now (kernel threads left out).
    fn processes(&self) -> Vec<ProcSnapshot>;
    /// A process's working directory now.
    fn cwd(&self, pid: u32) -> Option<PathBuf>;
    /// A running process's usage so far: None when it is gone.
    fn live(&self, pid: u32) -> Option<RunningUsage>;
    /// The files a process has open (its descriptors' targets).
    fn open_files(&self, pid: u32) -> Vec<PathBuf>;
    /// The established TCP connections a process holds: its sockets' addresses, never what
    /// they carry.
    fn tcp_links(&self, pid: u32) -> Vec<TcpLink>;
    /// How many CPUs `pid` may run on (its affinity), None when it is gone.
    fn affinity(&self, pid: u32) -> Option<u32>;
    /// CPUs online on the machine.
    fn online_cpus(&self) -> u32;
    /// The whole machine's busy CPU time since boot, in clock ticks.
    fn cpu_busy_ticks(&self) -> Result<u64, HostError>;
    /// The unit of /proc's CPU times (USER_HZ).
    fn ticks_per_s(&self) -> u64;
    /// This process's own resident memory now, bytes.
    fn own_rss_bytes(&self) -> Option<u64>;

    /// Asks Slurm which job allocation client `pid` (user `uid`, started at `started` Unix
    /// seconds) created; the answer fills the cell when it comes.
    fn slurm_allocation(&self, pid: u32, uid: u32, started: i64) -> AllocCell;
    /// Asks Slurm about `job` (its array ids, its user); the answer fills the cell.
    fn slurm_job(&self, job: u64) -> RecordCell;

    /// A file's bytes: /proc/PID/cgroup, cgroup controls, engines' and runtimes' records.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// At most `max` bytes of a file from `offset` on (a log read as it grows).
    fn read_from(&self, path: &Path, offset: u64, max: usize) -> io::Result<Vec<u8>>;
    /// The entries of a directory, as paths.
    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>>;
    fn facts(&self, path: &Path) -> io::Result<FileFacts>;
    fn read_link(&self, path: &Path) -> io::Result<PathBuf>;
    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf>;
    /// Keeps, from now on, a copy of each file written into `dir` (created later, in its
    /// parent, too): an engine's records that live shorter than the agent takes to look.
    /// Bounded; the copies never leave the agent.
    fn keep_written(&self, dir: &Path);
    /// The copy kept of a file written into such a directory, by its file name (its first
    /// MiB).
    fn kept(&self, name: &std::ffi::OsStr) -> Option<Vec<u8>>;
    /// The name of user `uid` in the host's user database (NSS: /etc/passwd, LDAP, SSSD).
    fn user_name(&self, uid: u32) -> Option<String>;
    /// An engine's own database file (Prefect's SQLite), opened read-only; None where it
    /// cannot be opened.
    fn open_database(&self, path: &Path) -> Option<Box<dyn Database>>;
    /// The version of the Python distribution `package` (an engine's) installed beside
    /// the program `image_path` run with `argv`, or beside its interpreter.
    fn engine_version(&self, image_path: &str, argv: &[String], package: &str) -> Option<String>;

    fn read_to_string(&self, path: &Path) -> io::Result<String> {
        let bytes = self.read(path)?;
        String::from_utf8(bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    /// The monotonic clock (boot time) as a duration, for waits and caches.
    fn uptime(&self) -> Duration {
        Duration::from_nanos(self.boottime_ns())
    }
}

/// What pipetrace keeps between runs (each pipeline's task history): documents by name. The
/// host crate keeps them as files in the state directory; tests keep them in memory.
pub trait Store: Send {
    fn load(&self, name: &str) -> Option<Vec<u8>>;
    /// Whole or not at all: a reader never sees half a document.
    fn save(&self, name: &str, bytes: &[u8]) -> io::Result<()>;
    /// The names of the documents kept.
    fn names(&self) -> Vec<String>;
    /// Where they are kept, for messages.
    fn place(&self) -> String;
}

/// The host handed around the core: one, shared.
pub type SharedHost = Arc<dyn Host>;

/// A database an engine keeps its records in, opened read-only by the host: the core asks
/// it questions in SQL and reads the answers as cells.
pub trait Database: Send {
    /// The rows `sql` selects, `?1`, `?2`... bound to `params`.
    fn rows(&self, sql: &str, params: &[&str]) -> Result<Vec<Vec<Cell>>, HostError>;
}

/// One value of a database row, typed as SQLite types it.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl Cell {
    pub(crate) fn text(&self) -> Option<String> {
        match self {
            Cell::Text(s) => Some(s.clone()),
            _ => None,
        }
    }

    pub(crate) fn int(&self) -> Option<i64> {
        match self {
            Cell::Int(i) => Some(*i),
            _ => None,
        }
    }
}
/// What the host could not read.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} has no line of CPU totals")]
    NoCpuTotals { path: String },
    #[error("cannot query the database {path}: {message}")]
    Query { path: String, message: String },
}

/// A process as the /proc scan sees it.
#[derive(Clone, Debug)]
pub struct ProcSnapshot {
    pub pid: u32,
    pub ppid: u32,
    pub start_ticks: u64,
    pub comm: String,
    pub exe: Option<PathBuf>,
    pub argv: Vec<String>,
    pub cwd: Option<PathBuf>,
    /// Its real user id.
    pub uid: Option<u32>,
}

/// Usage of a process still running, for live metrics between its start and its exit (when
/// the kernel's exact figures replace these), as the host reads them (`Host::live`):
/// counters so far and memory now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunningUsage {
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

/// The Slurm job allocation a client created: empty until Slurm has answered.
pub type AllocCell = Arc<std::sync::OnceLock<Option<u64>>>;

/// What Slurm says of a job that its cgroup path cannot.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobRecord {
    /// (the array's job id, this job's index in it), for a job of a job array.
    pub array: Option<(u64, u32)>,
    pub user: Option<String>,
    /// The account it is charged to (`--account`, or the user's default association).
    pub account: Option<String>,
}

/// A job's record: empty until Slurm has answered (and for good if it never does).
pub type RecordCell = Arc<std::sync::OnceLock<JobRecord>>;

/// Wall-clock time of a CLOCK_BOOTTIME timestamp, given the offset between the clocks.
pub(crate) fn system_time(boot_ns: u64, boot_to_unix_ns: i128) -> SystemTime {
    let ns = (boot_ns as i128 + boot_to_unix_ns).max(0) as u64;
    SystemTime::UNIX_EPOCH + Duration::from_nanos(ns)
}
