//! Each kernel event into the tree, the attribution and what they read as it happens (a new
//! process's directory and container, an OOM victim's cgroup, an allocation's job), and the
//! command `pipetrace run` reaped where polling /proc never saw it.
use super::{Session, Spawned};
use pipetrace_core::accounting::Usage;
use pipetrace_core::event::{Event, Exec, ProcKey};

impl Session {
    pub(super) fn exec(&mut self, e: Exec) {
        // Only a process that moved to another cgroup can have entered a container.
        // Runtimes that move what they start in cgroup v1 hierarchies only (Slurm's
        // cgroup/v1 plugin, runtimes on a v1-only host) leave the unified cgroup id
        // unchanged: a process a runtime started reads its cgroup too, and one that
        // slurmstepd started may find its step in slurmstepd's title.
        let parent = self.parent_program(&e.key);
        let by_runtime = parent.is_some_and(|(_, p)| pipetrace_core::containers::is_runtime(p));
        let stepd = parent
            .filter(|(_, p)| *p == "slurmstepd")
            .map(|(pid, _)| pid);
        let cwd = (self.attr.wants_cwd(&self.tree, &e))
            .then(|| self.host.cwd(e.key.pid))
            .flatten();
        let moved = self.tree.cgroup_changed(&e.key, e.cgroup_id) || by_runtime;
        let (key, start_ns, uid) = (e.key, e.start_ns, e.uid);
        self.tree.exec(e, cwd);
        if moved {
            match self.containers.of_pid_under(&*self.host, key.pid, stepd) {
                Ok(c) => self.tree.set_container(&key, c),
                // Ended before its cgroup was read (a runtime's short-lived helper):
                // its children read theirs when they exec.
                Err(_) => self.tree.forget_cgroup(&key),
            }
        }
        if self.attr.creates_allocation(&self.tree, key) {
            let started = self.builder.host().system_time(start_ns);
            let unix = started.duration_since(std::time::UNIX_EPOCH);
            let secs = unix.map_or(0, |d| d.as_secs() as i64);
            let cell = self.host.slurm_allocation(key.pid, uid, secs);
            self.attr.set_client_allocation(&self.tree, key, cell);
        }
        let effects = self.attr.on_exec(&self.tree, key);
        self.hand_on(effects);
    }

    pub(super) fn exited(
        &mut self,
        key: ProcKey,
        time_ns: u64,
        status: u32,
        image_peak_bytes: u64,
        at_exit: Option<Usage>,
    ) {
        let status = match self.known_exits.remove(&key.pid) {
            Some(known) if status == pipetrace_core::tree::Exit::UNKNOWN => known,
            _ => status,
        };
        if !self.tree.exit(&key, time_ns, status) {
            self.unknown_exits += 1;
            return;
        }
        // The kernel reports usage once the process is reaped, a moment later.
        self.awaiting.exited(key, image_peak_bytes, at_exit);
    }

    /// The OOM killer chose the process holding `pid`, then holding `rss_bytes`, in a memory
    /// cgroup limited to `kernel_limit` (as the probe read it, where it could), set off by
    /// `trigger`'s allocation.
    pub(super) fn oom(
        &mut self,
        pid: u32,
        time_ns: u64,
        rss_bytes: u64,
        (kernel_limit, trigger): (Option<u64>, Option<(u32, String)>),
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
            && let Some(m) = self.attr.membership(&p.key)
            && let Some(a) = self.attr.allocation(&m.task.unwrap_or(m.run))
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

    /// A fatal signal delivered to thread `target` by `(pid, comm)`.
    pub(super) fn signalled(
        &mut self,
        target: u32,
        time_ns: u64,
        sig: u32,
        code: i32,
        (sender_pid, sender_comm): (u32, String),
    ) {
        let run_of = |pid: u32| {
            let p = self.tree.by_pid(pid)?;
            self.attr.membership(&p.key).map(|m| m.run)
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

    /// The run's root, reaped by `pipetrace run` with `status`. Polling /proc sees no
    /// command shorter than one look: then what `run` knows of it (its command line, when
    /// it started it, the wait's status) are its exec and exit, and the run has its span.
    pub fn root_reaped(&mut self, root: &Spawned, status: u32) {
        let never_seen = self.attr.runs() == 0 && self.runs_finished == 0;
        if !(self.procfs && never_seen && self.tree.by_pid(root.pid).is_none()) {
            return self.known_exit(root.pid, status);
        }
        // As the poller keys a process: by its start in clock ticks since boot.
        let ns_per_tick = 1_000_000_000 / self.host.ticks_per_s().max(1);
        let key = ProcKey {
            pid: root.pid,
            start_ticks: root.start_ns / ns_per_tick,
        };
        let start_ns = key.start_ticks * ns_per_tick;
        self.handle(Event::Exec(Exec {
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
        }));
        let time_ns = self.host.boottime_ns().max(start_ns);
        self.handle(Event::Exit {
            key,
            time_ns,
            status,
            image_peak_bytes: 0,
            at_exit: None,
        });
    }
}
