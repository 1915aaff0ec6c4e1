//! The process tree: seeded from /proc, then kept by kernel events.
//!
//! A process stays while it runs or while any process it created still runs (their spans
//! need its place in the hierarchy); after that it is dropped, so memory follows the live
//! process count, not the history.
use std::path::PathBuf;

use crate::{
    accounting::Usage,
    event::{Exec, ProcKey},
    facts::ns_per_tick,
    files::Access,
    port::ProcSnapshot,
};

/// A program image a process executed.
#[derive(Clone, Debug, Default)]
pub struct Image {
    /// What was passed to execve, made absolute where it was relative.
    pub path: String,
    pub argv: Vec<String>,
    pub argv_truncated: bool,
    pub cwd: Option<PathBuf>,
}

#[derive(Clone, Debug)]
pub struct Exit {
    pub time_ns: u64,
    /// Wait status as the kernel encodes it.
    pub status: u32,
}

impl Exit {
    /// The status of an end seen by polling /proc: only the parent learns the real one.
    pub const UNKNOWN: u32 = u32::MAX;

    pub fn known(&self) -> bool {
        self.status != Self::UNKNOWN
    }

    pub fn signal(&self) -> Option<u32> {
        let sig = self.status & 0x7f;
        (self.known() && sig != 0).then_some(sig)
    }

    pub fn code(&self) -> i64 {
        if !self.known() {
            return 0;
        }
        match self.signal() {
            Some(sig) => 128 + sig as i64,
            None => ((self.status >> 8) & 0xff) as i64,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Proc {
    pub key: ProcKey,
    pub parent: Option<ProcKey>,
    pub ppid: u32,
    /// CLOCK_BOOTTIME ns (tick resolution for processes found by the /proc scan).
    pub start_ns: u64,
    pub comm: String,
    /// The first image: what the process was started as (for a job root, the job's command).
    pub first_image: Option<Image>,
    /// The latest image: what the process is (or was when it ended).
    pub image: Option<Image>,
    /// Paths of the images before the latest, in order.
    pub earlier: Vec<String>,
    pub exit: Option<Exit>,
    pub live_children: u32,
    /// Known from /proc (the start-up scan, or polling without eBPF) rather than the kernel.
    pub seeded: bool,
    /// What the kernel reported when the process was reaped.
    pub usage: Option<Usage>,
    /// Its end is final: usage arrived or was waited for long enough.
    pub settled: bool,
    /// Set when the OOM killer chose it.
    pub oom: Option<Oom>,
    /// Fatal signals delivered to it, latest last (a few at most).
    pub signals: Vec<FatalSignal>,
    /// The parent's thread that forked it (tid; 0: unknown).
    pub forked_by: u32,
    /// When it last exec'd (0: never): a child forked before then ran what it inherited.
    pub exec_ns: u64,
    /// Its cgroup (v2 id) at its last exec, or its parent's (0: unknown).
    pub cgroup_id: u64,
    /// The container it runs in, read when its cgroup differed from its parent's; else its
    /// parent's.
    pub container: Option<std::sync::Arc<crate::containers::Container>>,
    /// The files it opened (`files.enabled`), kept ones only; None until the first.
    pub files: Option<Box<crate::files::Files>>,
    /// The real user id it runs as (its parent's until it execs; None: not known).
    pub uid: Option<u32>,
}

/// The OOM killer's choice of a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Oom {
    pub time_ns: u64,
    /// Resident memory when chosen.
    pub rss_bytes: u64,
    /// Its memory cgroup and that cgroup's limit, read when it was chosen.
    pub cgroup: Option<String>,
    pub limit_bytes: Option<u64>,
    /// The process whose allocation set the OOM killer off (pid, name): the victim itself,
    /// or another process in the same memory cgroup.
    pub trigger: Option<(u32, String)>,
}

/// A fatal signal delivered to a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FatalSignal {
    pub time_ns: u64,
    pub sig: u32,
    /// Raised by the kernel (a fault, or the kernel on its own) rather than sent by a process.
    pub by_kernel: bool,
    pub sender_pid: u32,
    pub sender_comm: String,
    /// Sent by a process of the same run as the target: the pipeline ended its own process
    /// on purpose (a script stopping its background job, an engine cancelling a job).
    pub from_own_run: bool,
}

/// Signals kept per process: the last ones explain its end.
const SIGNALS_KEPT: usize = 4;

impl Proc {
    /// It ended by a signal that a process of its own run sent: a stop the pipeline chose,
    /// recorded with its sender but not a failure of its own.
    pub fn ended_on_purpose(&self) -> bool {
        let Some(sig) = self.exit.as_ref().and_then(Exit::signal) else {
            return false;
        };
        self.signals
            .iter()
            .rev()
            .find(|s| s.sig == sig)
            .is_some_and(|s| s.from_own_run && !s.by_kernel)
    }

    /// When it ended (CLOCK_BOOTTIME ns); its start while it still runs.
    pub fn end_ns(&self) -> u64 {
        self.exit.as_ref().map_or(self.start_ns, |e| e.time_ns)
    }

    pub fn new(
        key: ProcKey,
        parent: Option<ProcKey>,
        ppid: u32,
        start_ns: u64,
        comm: String,
    ) -> Self {
        Self {
            key,
            parent,
            ppid,
            start_ns,
            comm,
            first_image: None,
            image: None,
            earlier: Vec::new(),
            exit: None,
            live_children: 0,
            seeded: false,
            usage: None,
            settled: false,
            oom: None,
            signals: Vec::new(),
            forked_by: 0,
            exec_ns: 0,
            cgroup_id: 0,
            uid: None,
            container: None,
            files: None,
        }
    }

    /// A bare process for unit tests elsewhere in the crate.
    #[cfg(any(test, feature = "fake-host"))]
    pub fn in_test(key: ProcKey, start_ns: u64) -> Self {
        Self::new(key, None, 1, start_ns, "test".into())
    }
}

#[derive(Default)]
pub struct Tree {
    procs: crate::event::ProcMap<ProcKey, Proc>,
    /// The live process holding each pid.
    by_pid: crate::event::ProcMap<u32, ProcKey>,
}

impl Tree {
    pub fn len(&self) -> usize {
        self.procs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.procs.is_empty()
    }

    pub fn get(&self, key: &ProcKey) -> Option<&Proc> {
        self.procs.get(key)
    }

    pub fn by_pid(&self, pid: u32) -> Option<&Proc> {
        self.procs.get(self.by_pid.get(&pid)?)
    }

    /// Ancestors from the parent up, as far as the tree knows them.
    pub fn ancestors(&self, key: &ProcKey) -> impl Iterator<Item = &Proc> {
        let mut next = self.procs.get(key).and_then(|p| p.parent);
        std::iter::from_fn(move || {
            let p = self.procs.get(&next?)?;
            next = p.parent;
            Some(p)
        })
    }

    fn insert(&mut self, p: Proc) {
        if let Some(parent) = p.parent.and_then(|k| self.procs.get_mut(&k)) {
            parent.live_children += 1;
        }
        self.by_pid.insert(p.key.pid, p.key);
        self.procs.insert(p.key, p);
    }

    /// Processes running when the agent starts; parents before children.
    pub fn seed(&mut self, mut snapshot: Vec<ProcSnapshot>) {
        snapshot.sort_by_key(|s| s.start_ticks);
        for s in snapshot {
            let key = ProcKey {
                pid: s.pid,
                start_ticks: s.start_ticks,
            };
            let parent = self.by_pid.get(&s.ppid).copied();
            let mut p = Proc::new(key, parent, s.ppid, s.start_ticks * ns_per_tick(), s.comm);
            let path = s.exe.map(|e| e.display().to_string()).unwrap_or_default();
            let image = Image {
                path,
                argv: s.argv,
                argv_truncated: false,
                cwd: s.cwd,
            };
            p.first_image = Some(image.clone());
            p.image = Some(image);
            p.seeded = true;
            p.uid = s.uid;
            self.insert(p);
        }
    }

    /// Marks a process as known from /proc rather than from the kernel's events.
    pub fn mark_procfs(&mut self, key: &ProcKey) {
        if let Some(p) = self.procs.get_mut(key) {
            p.seeded = true;
        }
    }

    /// Which of its parent's threads forked it (its tid; 0: unknown).
    pub fn set_forked_by(&mut self, key: &ProcKey, tid: u32) {
        if let Some(p) = self.procs.get_mut(key) {
            p.forked_by = tid;
        }
    }

    pub fn fork(&mut self, key: ProcKey, start_ns: u64, parent: ProcKey, comm: String) {
        if self.procs.contains_key(&key) {
            return;
        }
        let known = self.procs.contains_key(&parent).then_some(parent);
        let mut p = Proc::new(key, known, parent.pid, start_ns, comm);
        // A child starts in its parent's cgroup, and so in its container.
        if let Some(parent) = known.and_then(|k| self.procs.get(&k)) {
            p.cgroup_id = parent.cgroup_id;
            p.container = parent.container.clone();
            p.uid = parent.uid;
        }
        self.insert(p);
    }

    /// Whether `key` execs in another cgroup than the one it has been in (then its container
    /// is read again).
    pub fn cgroup_changed(&self, key: &ProcKey, cgroup_id: u64) -> bool {
        self.procs
            .get(key)
            .is_none_or(|p| p.cgroup_id == 0 || p.cgroup_id != cgroup_id)
    }

    /// Its cgroup is not known: the next exec of it or of a child reads it.
    pub fn forget_cgroup(&mut self, key: &ProcKey) {
        if let Some(p) = self.procs.get_mut(key) {
            p.cgroup_id = 0;
            p.container = None;
        }
    }

    pub fn set_container(
        &mut self,
        key: &ProcKey,
        container: Option<std::sync::Arc<crate::containers::Container>>,
    ) {
        if let Some(p) = self.procs.get_mut(key) {
            p.container = container;
        }
    }

    /// Records an exec; creates the process if its fork was not seen (it predates the agent).
    pub fn exec(&mut self, e: Exec, cwd: Option<PathBuf>) {
        if !self.procs.contains_key(&e.key) {
            let parent = self.by_pid.get(&e.ppid).copied();
            let comm = e
                .filename
                .rsplit('/')
                .next()
                .unwrap_or_default()
                .to_string();
            self.insert(Proc::new(e.key, parent, e.ppid, e.start_ns, comm));
        }
        let p = self.procs.get_mut(&e.key).expect("inserted above");
        let path = match (&cwd, e.filename.starts_with('/')) {
            (Some(dir), false) => dir.join(&e.filename).display().to_string(),
            _ => e.filename,
        };
        let image = Image {
            path,
            argv: e.argv,
            argv_truncated: e.argv_truncated,
            cwd,
        };
        // The first exec (most processes' only one) is both the first image and the latest.
        if p.first_image.is_none() {
            p.first_image = Some(image.clone());
        }
        if let Some(old) = p.image.replace(image) {
            p.earlier.push(old.path);
        }
        p.exec_ns = e.time_ns;
        p.cgroup_id = e.cgroup_id;
        p.uid = Some(e.uid);
    }

    /// Marks the exit. Returns false for a process the tree does not know.
    pub fn exit(&mut self, key: &ProcKey, time_ns: u64, status: u32) -> bool {
        match self.procs.get_mut(key) {
            Some(p) => {
                p.exit = Some(Exit { time_ns, status });
                if self.by_pid.get(&key.pid) == Some(key) {
                    self.by_pid.remove(&key.pid);
                }
                true
            }
            None => false,
        }
    }

    /// Records the OOM killer's choice of the process holding `pid`.
    pub fn oom(&mut self, pid: u32, oom: Oom) -> bool {
        let Some(key) = self.by_pid.get(&pid).copied() else {
            return false;
        };
        let p = self.procs.get_mut(&key).expect("by_pid points into procs");
        p.oom = Some(oom);
        true
    }

    /// Records a file the process opened (a path already kept by the filter).
    pub fn opened(&mut self, key: &ProcKey, path: &str, access: Access, limit: usize) {
        if let Some(p) = self.procs.get_mut(key) {
            p.files.get_or_insert_default().add(path, access, limit);
        }
    }

    /// Records a fatal signal delivered to the process holding `pid`.
    pub fn signal(&mut self, pid: u32, s: FatalSignal) -> bool {
        let Some(key) = self.by_pid.get(&pid).copied() else {
            return false;
        };
        let p = self.procs.get_mut(&key).expect("by_pid points into procs");
        if p.signals.len() == SIGNALS_KEPT {
            p.signals.remove(0);
        }
        p.signals.push(s);
        true
    }

    /// Makes the end of an exited process final, with the kernel's usage if it came.
    pub fn settle(&mut self, key: &ProcKey, usage: Option<Usage>) {
        if let Some(p) = self.procs.get_mut(key) {
            p.usage = usage.or(p.usage);
            p.settled = true;
        }
    }

    /// Drops `key` if it has ended and nothing it created still runs, then its ancestors
    /// likewise. Returns the dropped processes, for their last word to the attribution.
    pub fn release(&mut self, key: ProcKey) -> Vec<Proc> {
        let mut dropped = Vec::new();
        let mut next = Some(key);
        while let Some(k) = next.take() {
            let Some(p) = self.procs.get(&k) else { break };
            if !p.settled || p.live_children > 0 {
                break;
            }
            let p = self.procs.remove(&k).expect("present");
            if let Some(parent) = p.parent.and_then(|pk| self.procs.get_mut(&pk)) {
                parent.live_children -= 1;
                next = Some(parent.key);
            }
            dropped.push(p);
        }
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(pid: u32) -> ProcKey {
        ProcKey {
            pid,
            start_ticks: pid as u64,
        }
    }

    #[test]
    fn wait_status_decoding() {
        assert_eq!(
            Exit {
                time_ns: 0,
                status: 3 << 8
            }
            .code(),
            3
        );
        let killed = Exit {
            time_ns: 0,
            status: 9,
        };
        assert_eq!((killed.code(), killed.signal()), (137, Some(9)));
        let core = Exit {
            time_ns: 0,
            status: 0x80 | 11,
        };
        assert_eq!(core.signal(), Some(11));
    }

    #[test]
    fn parents_stay_while_children_run_then_go() {
        let mut t = Tree::default();
        t.fork(key(1), 0, key(0), "root".into());
        t.fork(key(2), 0, key(1), "child".into());
        t.exit(&key(1), 5, 0);
        t.settle(&key(1), None);
        assert!(
            t.release(key(1)).is_empty(),
            "parent kept while its child runs"
        );
        assert_eq!(t.ancestors(&key(2)).next().map(|p| p.key), Some(key(1)));
        t.exit(&key(2), 6, 0);
        assert!(
            t.release(key(2)).is_empty(),
            "kept until its end is settled"
        );
        t.settle(&key(2), None);
        let dropped: Vec<_> = t.release(key(2)).into_iter().map(|p| p.key).collect();
        assert_eq!(dropped, [key(2), key(1)]);
        assert!(t.is_empty());
    }

    #[test]
    fn pid_reuse_makes_a_new_process() {
        let mut t = Tree::default();
        t.fork(key(7), 0, key(0), "a".into());
        t.exit(&key(7), 1, 0);
        let reused = ProcKey {
            pid: 7,
            start_ticks: 99,
        };
        t.fork(reused, 0, key(0), "b".into());
        assert_eq!(t.by_pid(7).map(|p| p.comm.as_str()), Some("b"));
        assert_eq!(t.get(&key(7)).map(|p| p.comm.as_str()), Some("a"));
    }
}
