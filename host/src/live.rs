//! The machine this runs on, read with the procfs crate and the C library's clocks.
use std::{
    fs,
    io::{Read, Seek, SeekFrom},
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
    time::SystemTime,
};

use procfs::{CurrentSI, KernelStats, process::Process};

use pipetrace_core::port::{
    AllocCell, Database, FileFacts, Host, HostError, ProcSnapshot, RecordCell, RunningUsage,
    TcpLink,
};

use super::{slurm_alloc, slurm_jobs};

/// This machine: /proc, its files, its clocks.
pub struct LiveHost;

impl Host for LiveHost {
    fn boottime_ns(&self) -> u64 {
        super::boottime_ns()
    }

    fn suspended_ns(&self) -> u64 {
        super::suspended_ns()
    }

    fn now(&self) -> SystemTime {
        SystemTime::now()
    }

    fn processes(&self) -> Vec<ProcSnapshot> {
        super::scan()
    }

    fn cwd(&self, pid: u32) -> Option<PathBuf> {
        super::cwd(pid)
    }

    fn live(&self, pid: u32) -> Option<RunningUsage> {
        live(pid)
    }

    fn open_files(&self, pid: u32) -> Vec<PathBuf> {
        // Each descriptor's link alone: nothing else of the descriptor is read, so one that
        // closes meanwhile costs only itself.
        let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
            return Vec::new();
        };
        (fds.filter_map(|e| fs::read_link(e.ok()?.path()).ok()))
            .filter(|p| p.is_absolute())
            .collect()
    }

    fn tcp_links(&self, pid: u32) -> Vec<TcpLink> {
        tcp_links(pid)
    }

    fn affinity(&self, pid: u32) -> Option<u32> {
        affinity(pid)
    }

    fn online_cpus(&self) -> u32 {
        online_cpus()
    }

    fn cpu_busy_ticks(&self) -> Result<u64, HostError> {
        super::cpu_busy_ticks()
    }

    fn ticks_per_s(&self) -> u64 {
        procfs::ticks_per_second()
    }

    fn own_rss_bytes(&self) -> Option<u64> {
        super::rss_kib().map(|k| k * 1024)
    }

    fn slurm_allocation(&self, pid: u32, uid: u32, started: i64) -> AllocCell {
        slurm_alloc::lookup(pid, uid, started)
    }

    fn slurm_job(&self, job: u64) -> RecordCell {
        slurm_jobs::cell(job)
    }

    fn read(&self, path: &Path) -> std::io::Result<Vec<u8>> {
        fs::read(path)
    }

    fn read_from(&self, path: &Path, offset: u64, max: usize) -> std::io::Result<Vec<u8>> {
        let mut f = fs::File::open(path)?;
        f.seek(SeekFrom::Start(offset))?;
        let mut out = Vec::new();
        f.take(max as u64).read_to_end(&mut out)?;
        Ok(out)
    }

    fn list(&self, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
        fs::read_dir(dir)?.map(|e| e.map(|e| e.path())).collect()
    }

    fn facts(&self, path: &Path) -> std::io::Result<FileFacts> {
        let m = fs::metadata(path)?;
        Ok(FileFacts {
            modified: m.modified()?,
            uid: m.uid(),
            is_dir: m.is_dir(),
            len: m.len(),
        })
    }

    fn read_link(&self, path: &Path) -> std::io::Result<PathBuf> {
        fs::read_link(path)
    }

    fn keep_written(&self, dir: &Path) {
        super::kept::keep_written(dir)
    }

    fn kept(&self, name: &std::ffi::OsStr) -> Option<Vec<u8>> {
        super::kept::kept(name)
    }

    fn user_name(&self, uid: u32) -> Option<String> {
        let user = uzers::get_user_by_uid(uid)?;
        Some(user.name().to_string_lossy().into_owned())
    }

    fn canonicalize(&self, path: &Path) -> std::io::Result<PathBuf> {
        fs::canonicalize(path)
    }

    fn open_database(&self, path: &Path) -> Option<Box<dyn Database>> {
        Some(Box::new(super::database::Sqlite::open(path)?))
    }

    fn engine_version(&self, image_path: &str, argv: &[String], package: &str) -> Option<String> {
        super::python_dist::engine_version(image_path, argv, package)
    }
}

/// A process's established TCP connections: its socket descriptors looked up in the TCP
/// tables of its own network namespace (`/proc/PID/net/tcp{,6}`).
fn tcp_links(pid: u32) -> Vec<TcpLink> {
    use procfs::{net::TcpState, process::FDTarget};
    let Ok(p) = Process::new(pid as i32) else {
        return Vec::new();
    };
    let Ok(fds) = p.fd() else {
        return Vec::new();
    };
    let sockets: std::collections::HashSet<u64> = (fds.filter_map(Result::ok))
        .filter_map(|fd| match fd.target {
            FDTarget::Socket(inode) => Some(inode),
            _ => None,
        })
        .collect();
    if sockets.is_empty() {
        return Vec::new();
    }
    let tables = [p.tcp(), p.tcp6()];
    (tables.into_iter().flat_map(Result::unwrap_or_default))
        .filter(|e| e.state == TcpState::Established && sockets.contains(&e.inode))
        .map(|e| TcpLink {
            local: e.local_address,
            remote: e.remote_address,
        })
        .collect()
}

/// A running process's usage so far from /proc: never `environ`, never contents.
fn live(pid: u32) -> Option<RunningUsage> {
    let p = Process::new(pid as i32).ok()?;
    let stat = p.stat().ok()?;
    let ns = pipetrace_core::facts::ns_per_tick();
    let mut live = RunningUsage {
        cpu_user_ns: stat.utime * ns,
        cpu_system_ns: stat.stime * ns,
        ..Default::default()
    };
    if let Ok(status) = p.status() {
        live.rss_bytes = status.vmrss.unwrap_or(0) * 1024;
        live.hwm_bytes = status.vmhwm.unwrap_or(0) * 1024;
    }
    // Per thread: /proc/PID/io also counts every child the process has reaped, whose own
    // figures are counted where they belong.
    if let Ok(tasks) = p.tasks() {
        for io in tasks.filter_map(|t| t.ok()?.io().ok()) {
            live.disk_read_bytes += io.read_bytes;
            live.disk_write_bytes += io.write_bytes;
            live.io_chars += io.rchar + io.wchar;
        }
    }
    if let Ok(s) = p.schedstat() {
        live.run_delay_ns = s.run_delay;
    }
    Some(live)
}

/// The whole machine's busy CPU ticks: idle and I/O wait are not work; guest time is
/// already inside user and nice.
pub(super) fn busy_ticks() -> Result<u64, HostError> {
    let t = KernelStats::current()
        .map_err(|e| HostError::NoCpuTotals {
            path: format!("/proc/stat ({e})"),
        })?
        .total;
    let extra: u64 = [t.irq, t.softirq, t.steal]
        .iter()
        .map(|v| v.unwrap_or(0))
        .sum();
    Ok(t.user + t.nice + t.system + extra)
}

/// CPUs online on this host: what any process here could use at most.
fn online_cpus() -> u32 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    n.max(1) as u32
}

fn affinity(pid: u32) -> Option<u32> {
    // SAFETY: a zeroed cpu_set_t is valid; the kernel fills at most its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::sched_getaffinity(pid as i32, size_of::<libc::cpu_set_t>(), &mut set) };
    // SAFETY: `set` was filled by the kernel.
    (rc == 0).then(|| unsafe { libc::CPU_COUNT(&set) } as u32)
}
