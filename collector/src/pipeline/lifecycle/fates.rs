//! What ended a process, as the kernel says it happens (the OOM killer's choice, a fatal
//! signal), and the command `pipetrace run` reaped where polling /proc never saw it.
use super::Lifecycle;
use crate::pipeline::Spawned;
use pipetrace_core::attribution::Attributor;
use pipetrace_core::event::{Event, Exec, ProcKey};

impl Lifecycle {
    /// The OOM killer chose the process holding `pid`, then holding `rss_bytes`, in a memory
    /// cgroup limited to `kernel_limit` (as the probe read it, where it could), set off by
    /// `trigger`'s allocation.
    pub(super) fn oom(
        &mut self,
        pid: u32,
        (time_ns, rss_bytes): (u64, u64),
        (kernel_limit, trigger): (Option<u64>, Option<(u32, String)>),
        attr: &Attributor,
    ) {
        // The victim is dying: read its cgroup now. If it is already gone (the kernel
        // then shows the root), the cgroup it was forked in (its nearest running
        // ancestor's), else its task's limit read at the task's start stands in. The limit
        // the probe read as the victim was chosen is the one that bound it: it comes first.
        let (mut cgroup, mut limit_bytes) = pipetrace_host::cgroup::memory_cgroup(&*self.host, pid);
        let gone = cgroup.as_deref().is_none_or(|c| c == "/");
        if gone && let Some(a) = self.running_ancestor(pid) {
            (cgroup, limit_bytes) = pipetrace_host::cgroup::memory_cgroup(&*self.host, a);
        }
        if limit_bytes.is_none()
            && let Some(p) = self.tree.by_pid(pid)
            && let Some(m) = attr.membership(&p.key)
            && let Some(a) = attr.allocation(&m.task.unwrap_or(m.run))
        {
            limit_bytes = a.memory_limit;
            cgroup = None;
        }
        limit_bytes = kernel_limit.or(limit_bytes);
        let oom = pipetrace_core::tree::Oom {
            time_ns,
            rss_bytes,
            cgroup,
            limit_bytes,
            trigger,
        };
        self.tree.oom(pid, oom);
    }

    /// The pid of `pid`'s nearest ancestor still running in the same cgroup (by the
    /// kernel's unified id; the tree's view).
    fn running_ancestor(&self, pid: u32) -> Option<u32> {
        let victim = self.tree.by_pid(pid)?;
        let mut at = victim.parent;
        for _ in 0..64 {
            let p = self.tree.get(&at?)?;
            if p.cgroup_id != victim.cgroup_id || victim.cgroup_id == 0 {
                return None;
            }
            if p.exit.is_none() {
                return Some(p.key.pid);
            }
            at = p.parent;
        }
        None
    }

    /// A fatal signal delivered to thread `target` by `(pid, comm)`.
    pub(super) fn signalled(
        &mut self,
        target: u32,
        (time_ns, sig, code): (u64, u32, i32),
        (sender_pid, sender_comm): (u32, String),
        attr: &Attributor,
    ) {
        let run_of = |pid: u32| {
            let p = self.tree.by_pid(pid)?;
            attr.membership(&p.key).map(|m| m.run)
        };
        // Not one it sent itself (abort(), `kill $$`): that is its own failure.
        let from_own_run = sender_pid != target
            && run_of(target).is_some()
            && run_of(target) == run_of(sender_pid);
        let s = pipetrace_core::tree::FatalSignal {
            time_ns,
            sig,
            // si_code > 0: a fault; SI_KERNEL (0x80): the kernel on its own.
            by_kernel: code > 0,
            sender_pid,
            sender_comm,
            from_own_run,
        };
        self.tree.signal(target, s);
    }

    /// The run's root, reaped by `pipetrace run` with `status`; `never_seen`: no run was
    /// found yet. Polling /proc sees no command shorter than one look: then what `run`
    /// knows of it (its command line, when it started it, the wait's status) are its exec
    /// and exit, returned for the loop to take in.
    pub(in crate::pipeline) fn root_reaped(
        &mut self,
        root: &Spawned,
        status: u32,
        never_seen: bool,
    ) -> Vec<Event> {
        if !(self.procfs && never_seen && self.tree.by_pid(root.pid).is_none()) {
            self.known_exit(root.pid, status);
            return Vec::new();
        }
        // As the poller keys a process: by its start in clock ticks since boot.
        let ns_per_tick = 1_000_000_000 / self.host.ticks_per_s().max(1);
        let key = ProcKey {
            pid: root.pid,
            start_ticks: root.start_ns / ns_per_tick,
        };
        let start_ns = key.start_ticks * ns_per_tick;
        let exec = Event::Exec(Exec {
            key,
            start_ns,
            time_ns: start_ns,
            ppid: std::process::id(),
            // SAFETY: getuid(2) cannot fail.
            uid: unsafe { libc::getuid() },
            cgroup_id: 0,
            filename: root.argv.first().cloned().unwrap_or_default(),
            argv: root.argv.clone(),
            argv_truncated: false,
        });
        let exit = Event::Exit {
            key,
            time_ns: self.host.boottime_ns().max(start_ns),
            status,
            image_peak_bytes: 0,
            at_exit: None,
        };
        vec![exec, exit]
    }
}
