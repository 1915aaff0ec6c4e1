//! A host made of memory, for the core's unit tests: processes, files and clocks that a test
//! sets, with no root, no kernel and no /proc.
use std::{
    collections::BTreeMap,
    io,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::{Duration, SystemTime},
};

use super::{
    AllocCell, FileFacts, Host, HostError, ProcSnapshot, RecordCell, RunningUsage, SharedHost,
    TcpLink,
};

#[derive(Default)]
struct State {
    boottime_ns: u64,
    /// Unix time at boot, ns.
    boot_unix_ns: u64,
    processes: BTreeMap<u32, ProcSnapshot>,
    live: BTreeMap<u32, RunningUsage>,
    files: BTreeMap<PathBuf, (Vec<u8>, SystemTime)>,
    busy_ticks: u64,
    open: BTreeMap<u32, Vec<PathBuf>>,
    links: BTreeMap<u32, Vec<TcpLink>>,
    /// Directories whose files are kept as written, and the copies by file name.
    keep_dirs: Vec<PathBuf>,
    kept: BTreeMap<std::ffi::OsString, Vec<u8>>,
    users: BTreeMap<u32, String>,
    databases: Option<Opener>,
}

/// How a fake host opens engines' databases (a test's real SQLite files).
type Opener = Arc<dyn Fn(&Path) -> Option<Box<dyn super::Database>> + Send + Sync>;

/// A fake machine; clones share it (the test keeps one, the core another).
#[derive(Clone, Default)]
pub struct FakeHost(Arc<Mutex<State>>);

fn missing(path: &Path) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, path.display().to_string())
}

impl FakeHost {
    /// Booted at `boot_unix_ns` (Unix time, ns), `boottime_ns` ago.
    pub fn new(boot_unix_ns: u64, boottime_ns: u64) -> Self {
        let h = Self::default();
        {
            let mut s = h.0.lock().unwrap();
            s.boot_unix_ns = boot_unix_ns;
            s.boottime_ns = boottime_ns;
        }
        h
    }

    pub fn shared(&self) -> SharedHost {
        Arc::new(self.clone())
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap()
    }

    /// Moves the clocks on.
    pub fn advance(&self, by: Duration) {
        self.state().boottime_ns += by.as_nanos() as u64;
    }

    /// Sets the clock to `boottime_ns` (never backwards).
    pub fn set_boottime(&self, boottime_ns: u64) {
        let mut s = self.state();
        s.boottime_ns = s.boottime_ns.max(boottime_ns);
    }

    /// The Unix time a boot-clock time stands for.
    pub(crate) fn wall(&self, boottime_ns: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_nanos(self.state().boot_unix_ns + boottime_ns)
    }

    /// Opens engines' databases with `open` (none are open otherwise).
    #[cfg(test)]
    pub(crate) fn open_databases_with(
        &self,
        open: impl Fn(&Path) -> Option<Box<dyn super::Database>> + Send + Sync + 'static,
    ) {
        self.state().databases = Some(Arc::new(open));
    }

    pub fn add_user(&self, uid: u32, name: &str) {
        self.state().users.insert(uid, name.to_string());
    }

    pub fn add_process(&self, p: ProcSnapshot) {
        self.state().processes.insert(p.pid, p);
    }

    /// The files `pid` has open.
    #[cfg(test)]
    pub(crate) fn set_open_files(&self, pid: u32, paths: Vec<PathBuf>) {
        self.state().open.insert(pid, paths);
    }

    /// The TCP connections `pid` holds.
    #[cfg(test)]
    pub(crate) fn set_tcp_links(&self, pid: u32, links: Vec<TcpLink>) {
        self.state().links.insert(pid, links);
    }

    /// Writes a file, changed now (and keeps a copy, if its directory is kept).
    pub fn write(&self, path: impl AsRef<Path>, bytes: impl Into<Vec<u8>>) {
        let (path, bytes, now) = (path.as_ref(), bytes.into(), self.now());
        let mut s = self.state();
        let kept = path
            .parent()
            .is_some_and(|d| s.keep_dirs.iter().any(|k| k == d));
        if let (true, Some(name)) = (kept, path.file_name()) {
            s.kept.insert(name.to_os_string(), bytes.clone());
        }
        s.files.insert(path.to_path_buf(), (bytes, now));
    }
}

impl Host for FakeHost {
    fn boottime_ns(&self) -> u64 {
        self.state().boottime_ns
    }

    fn suspended_ns(&self) -> u64 {
        0
    }

    fn now(&self) -> SystemTime {
        let s = self.state();
        SystemTime::UNIX_EPOCH + Duration::from_nanos(s.boot_unix_ns + s.boottime_ns)
    }

    fn processes(&self) -> Vec<ProcSnapshot> {
        self.state().processes.values().cloned().collect()
    }

    fn cwd(&self, pid: u32) -> Option<PathBuf> {
        self.state().processes.get(&pid)?.cwd.clone()
    }

    fn live(&self, pid: u32) -> Option<RunningUsage> {
        let s = self.state();
        s.processes.get(&pid)?;
        Some(s.live.get(&pid).copied().unwrap_or_default())
    }

    fn open_files(&self, pid: u32) -> Vec<PathBuf> {
        self.state().open.get(&pid).cloned().unwrap_or_default()
    }

    fn tcp_links(&self, pid: u32) -> Vec<TcpLink> {
        self.state().links.get(&pid).cloned().unwrap_or_default()
    }

    fn affinity(&self, pid: u32) -> Option<u32> {
        self.state().processes.get(&pid).map(|_| 2)
    }

    fn online_cpus(&self) -> u32 {
        2
    }

    fn cpu_busy_ticks(&self) -> Result<u64, HostError> {
        Ok(self.state().busy_ticks)
    }

    fn ticks_per_s(&self) -> u64 {
        100
    }

    fn own_rss_bytes(&self) -> Option<u64> {
        Some(32 << 20)
    }

    /// No Slurm here: no client's job is ever known.
    fn slurm_allocation(&self, _pid: u32, _uid: u32, _started: i64) -> AllocCell {
        let cell = AllocCell::default();
        let _ = cell.set(None);
        cell
    }

    /// No Slurm here: a job's record never comes.
    fn slurm_job(&self, _job: u64) -> RecordCell {
        RecordCell::default()
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let s = self.state();
        s.files
            .get(path)
            .map(|f| f.0.clone())
            .ok_or_else(|| missing(path))
    }

    fn read_from(&self, path: &Path, offset: u64, max: usize) -> io::Result<Vec<u8>> {
        let bytes = self.read(path)?;
        let from = (offset as usize).min(bytes.len());
        Ok(bytes[from..bytes.len().min(from.saturating_add(max))].to_vec())
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let s = self.state();
        let mut out: Vec<PathBuf> = (s.files.keys())
            .filter_map(|p| {
                let rest = p.strip_prefix(dir).ok()?;
                Some(dir.join(rest.components().next()?))
            })
            .collect();
        out.dedup();
        if out.is_empty() {
            return Err(missing(dir));
        }
        Ok(out)
    }

    fn facts(&self, path: &Path) -> io::Result<FileFacts> {
        let s = self.state();
        if let Some((bytes, modified)) = s.files.get(path) {
            return Ok(FileFacts {
                modified: *modified,
                uid: 0,
                is_dir: false,
                len: bytes.len() as u64,
            });
        }
        // A directory changed when its newest file did.
        let newest = (s.files.iter())
            .filter(|(p, _)| p.starts_with(path))
            .map(|(_, (_, m))| *m)
            .max()
            .ok_or_else(|| missing(path))?;
        Ok(FileFacts {
            modified: newest,
            uid: 0,
            is_dir: true,
            len: 0,
        })
    }

    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        Err(missing(path))
    }

    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        Ok(path.to_path_buf())
    }

    fn keep_written(&self, dir: &Path) {
        let mut s = self.state();
        if !s.keep_dirs.iter().any(|d| d == dir) {
            s.keep_dirs.push(dir.to_path_buf());
        }
    }

    fn kept(&self, name: &std::ffi::OsStr) -> Option<Vec<u8>> {
        self.state().kept.get(name).cloned()
    }

    fn user_name(&self, uid: u32) -> Option<String> {
        self.state().users.get(&uid).cloned()
    }

    fn open_database(&self, path: &Path) -> Option<Box<dyn super::Database>> {
        let open = self.state().databases.clone()?;
        open(path)
    }

    // The fake machine has no Python installed.
    fn engine_version(&self, _: &str, _: &[String], _: &str) -> Option<String> {
        None
    }
}

/// The kernel's two records of a process forked by `parent` at `at` (boot clock, ns) that
/// execs `argv` at once.
pub fn fork_exec(
    k: crate::event::ProcKey,
    parent: crate::event::ProcKey,
    at: u64,
    argv: &[&str],
) -> [crate::event::Event; 2] {
    let fork = crate::event::Event::Fork {
        key: k,
        start_ns: at,
        parent,
        parent_tid: parent.pid,
        comm: "x".into(),
    };
    let exec = crate::event::Event::Exec(crate::event::Exec {
        key: k,
        start_ns: at,
        time_ns: at + 1000,
        ppid: parent.pid,
        uid: 1000,
        cgroup_id: 7,
        filename: argv[0].into(),
        argv: argv.iter().map(|a| a.to_string()).collect(),
        argv_truncated: false,
    });
    [fork, exec]
}

/// A store of memory; clones share it.
#[derive(Clone, Default)]
pub struct MemoryStore(Arc<Mutex<BTreeMap<String, Vec<u8>>>>);

impl super::Store for MemoryStore {
    fn load(&self, name: &str) -> Option<Vec<u8>> {
        self.0.lock().unwrap().get(name).cloned()
    }

    fn save(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        self.0.lock().unwrap().insert(name.into(), bytes.to_vec());
        Ok(())
    }

    fn names(&self) -> Vec<String> {
        self.0.lock().unwrap().keys().cloned().collect()
    }

    fn place(&self) -> String {
        "memory".into()
    }
}
