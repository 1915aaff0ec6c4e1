//! The loop's first stage: each kernel event into the process tree, with what must be read
//! as it happens (a new process's directory and container), the exits waiting for their
//! usage report, and the scope watched. It hands the attribution the step each event was
//! ([`Step`]) and, at each poll, the processes whose end is final ([`Lifecycle::ended`]).
use std::collections::{HashMap, HashSet};
use std::time::Duration;

use crate::awaiting::Awaiting;
use crate::scope::Scope;
use pipetrace_core::accounting::{GpuFigures, Usage};
use pipetrace_core::attribution::Attributor;
use pipetrace_core::event::{Event, Exec, ProcKey};
use pipetrace_core::files::Filter;
use pipetrace_core::port::SharedHost;
use pipetrace_core::tree::{Proc, Tree};

mod fates;

/// What an event was, for the attribution.
pub(super) enum Step {
    /// Nothing the attribution acts on now: an exit waits for its usage report; a file, a
    /// signal, an OOM are the tree's, read when the process ends.
    Nothing,
    Forked(ProcKey),
    /// `uid` and `start_ns`: what a job's allocation is looked up by.
    Execed {
        key: ProcKey,
        uid: u32,
        start_ns: u64,
    },
}

/// What the lifecycle counted of what it was handed.
#[derive(Default, Clone, Copy)]
pub(super) struct Counts {
    /// Kernel records taken in.
    pub(super) events: u64,
    /// Exits of processes the tree never saw (started before the agent, exited at once).
    pub(super) unknown_exits: u64,
    /// Ring-buffer records that could not be decoded (a probe/agent version mismatch).
    pub(super) undecodable: u64,
    /// Processes that ended with no figures at all (their exit record was lost).
    pub(super) usage_missing: u64,
    /// Processes whose figures were taken at exit: the reap-time report did not come.
    pub(super) usage_at_exit: u64,
    /// Kernel figures dropped as impossible (a wait longer than a life times its threads).
    pub(super) figures_dropped: u64,
}

pub(crate) struct Lifecycle {
    /// Every read of /proc, cgroups and clocks: the machine, or a test's fake.
    host: SharedHost,
    tree: Tree,
    /// Exited processes waiting for their usage report.
    awaiting: Awaiting,
    /// Containers seen, with what their runtimes record.
    containers: pipetrace_core::containers::Containers,
    /// The processes watched: the node's, or one cgroup's.
    scope: Scope,
    /// Which opened files are kept (`files.*`).
    files: Filter,
    /// Events come from polling /proc: every process is marked so.
    procfs: bool,
    /// Exit statuses learnt by waiting for a child (the run's root): polling cannot see them.
    known_exits: HashMap<u32, u32>,
    counts: Counts,
}

impl Lifecycle {
    /// `usage_wait`: how long an exited process waits for the kernel's usage report.
    pub(crate) fn new(
        host: SharedHost,
        (scope, files): (Scope, Filter),
        usage_wait: Duration,
        procfs: bool,
    ) -> Self {
        Self {
            host,
            tree: Tree::default(),
            awaiting: Awaiting::new(usage_wait),
            containers: Default::default(),
            scope,
            files,
            procfs,
            known_exits: HashMap::new(),
            counts: Counts::default(),
        }
    }

    pub(super) fn tree(&self) -> &Tree {
        &self.tree
    }

    pub(super) fn counts(&self) -> Counts {
        self.counts
    }

    /// Records of a batch that did not decode.
    pub(super) fn undecodable(&mut self, n: u64) {
        self.counts.undecodable += n;
    }

    /// Seeds the tree with what runs now (in scope), their containers read as if each had
    /// just exec'd; returns them, oldest first, for the attribution to find runs among.
    pub(super) fn seed(&mut self) -> Vec<ProcKey> {
        let mut snap = self.host.processes();
        if !self.scope.whole_node() {
            let (inside, outside): (Vec<_>, Vec<_>) = snap
                .into_iter()
                .partition(|s| self.scope.holds_pid(&*self.host, s.pid));
            for s in outside {
                self.scope.leave_out(ProcKey {
                    pid: s.pid,
                    start_ticks: s.start_ticks,
                });
            }
            snap = inside;
        }
        snap.sort_by_key(|s| s.start_ticks);
        let keys: Vec<_> = (snap.iter())
            .map(|s| ProcKey {
                pid: s.pid,
                start_ticks: s.start_ticks,
            })
            .collect();
        self.tree.seed(snap);
        for k in &keys {
            if let Ok(c) = self.containers.of_pid(&*self.host, k.pid) {
                self.tree.set_container(k, c);
            }
        }
        keys
    }

    /// One kernel event into the tree. `attr` is asked what it needs read as it happens
    /// (a new process's directory) and whom a victim or a sender belongs to.
    pub(super) fn take(&mut self, ev: Event, attr: &Attributor) -> Step {
        self.counts.events += 1;
        if !self.scope.admit(&*self.host, &ev, &self.tree) {
            return Step::Nothing;
        }
        match ev {
            Event::Fork {
                key,
                start_ns,
                parent,
                parent_tid,
                comm,
            } => {
                self.tree.fork(key, start_ns, parent, comm);
                self.tree.set_forked_by(&key, parent_tid);
                if self.procfs {
                    self.tree.mark_procfs(&key);
                }
                return Step::Forked(key);
            }
            Event::Exec(e) => return self.exec(e, attr),
            Event::Exit {
                key,
                time_ns,
                status,
                image_peak_bytes,
                at_exit,
            } => self.exited(key, (time_ns, status), image_peak_bytes, at_exit),
            Event::Oom {
                pid,
                time_ns,
                anon_rss_bytes,
                file_rss_bytes,
                shmem_rss_bytes,
                limit_bytes,
                trigger,
            } => {
                let rss = anon_rss_bytes + file_rss_bytes + shmem_rss_bytes;
                self.oom(pid, (time_ns, rss), (limit_bytes, trigger), attr)
            }
            Event::Signal {
                target,
                time_ns,
                sig,
                code,
                sender_pid,
                sender_comm,
            } => self.signalled(
                target,
                (time_ns, sig, code),
                (sender_pid, sender_comm),
                attr,
            ),
            Event::Open { key, path, flags } => self.opened(key, &path, flags),
            Event::FinalCpu { key, cpu, switches } => self.awaiting.final_cpu(key, &cpu, &switches),
            Event::Usage { key, usage } => {
                // Settled in `ended`, once the process's exited descendants are.
                if !self.awaiting.reported(key, usage) {
                    log::debug!("usage of {key:?} matches no exit waiting for it");
                }
            }
        }
        Step::Nothing
    }

    fn exec(&mut self, e: Exec, attr: &Attributor) -> Step {
        // Only a process that moved to another cgroup can have entered a container.
        // Runtimes that move what they start in cgroup v1 hierarchies only (Slurm's
        // cgroup/v1 plugin, runtimes on a v1-only host) leave the unified cgroup id
        // unchanged: a process a runtime started reads its cgroup too, and one that
        // slurmstepd started may find its step in slurmstepd's title.
        let parent = self.parent_program(&e.key);
        let by_runtime = parent.is_some_and(|(_, p)| pipetrace_core::containers::is_runtime(p));
        let stepd = (parent.filter(|(_, p)| *p == "slurmstepd")).map(|(pid, _)| pid);
        let cwd = (attr.wants_cwd(&self.tree, &e))
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
        Step::Execed { key, uid, start_ns }
    }

    /// The pid and program of `key`'s parent, if it has exec'd.
    fn parent_program(&self, key: &ProcKey) -> Option<(u32, &str)> {
        let parent = self.tree.get(&self.tree.get(key)?.parent?)?;
        let i = parent.image.as_ref()?;
        let program = pipetrace_core::attribution::naming::program_name(&i.path, &i.argv);
        Some((parent.key.pid, program))
    }

    fn exited(
        &mut self,
        key: ProcKey,
        (time_ns, status): (u64, u32),
        image_peak_bytes: u64,
        at_exit: Option<Usage>,
    ) {
        let status = match self.known_exits.remove(&key.pid) {
            Some(known) if status == pipetrace_core::tree::Exit::UNKNOWN => known,
            _ => status,
        };
        if !self.tree.exit(&key, time_ns, status) {
            self.counts.unknown_exits += 1;
            return;
        }
        // The kernel reports usage once the process is reaped, a moment later.
        self.awaiting.exited(key, image_peak_bytes, at_exit);
    }

    /// A file the process opened, kept if the filter keeps it. A relative path is kept as
    /// the process named it: the kernel's record names no directory.
    fn opened(&mut self, key: ProcKey, path: &str, flags: u32) {
        let Some(path) = self.files.keep(path) else {
            return;
        };
        // A process the tree does not hold is traced by no span: its files have no place.
        let access = pipetrace_core::files::Access::of_flags(flags);
        self.tree
            .opened(&key, &path, access, self.files.max_per_tool);
    }

    /// The exits whose usage report came (or, with `give_up` or past the wait, all), in
    /// the order they are to be settled: each is settled, attributed and released before
    /// the next (releasing one can let go of what the next still names).
    pub(super) fn ended(&mut self, give_up: bool) -> Vec<(ProcKey, Option<Usage>)> {
        self.awaiting.ready(&self.tree, give_up)
    }

    /// An end final in the tree, with its figures and what it did on GPUs.
    pub(super) fn settle(
        &mut self,
        key: ProcKey,
        mut usage: Option<Usage>,
        gpu: Option<GpuFigures>,
    ) {
        match &usage {
            None => self.counts.usage_missing += 1,
            Some(u) if u.at_exit => self.counts.usage_at_exit += 1,
            Some(_) => {}
        }
        if let (Some(u), Some(p)) = (usage.as_mut(), self.tree.get(&key)) {
            let end = p.end_ns();
            let since_boot = p.start_ns.saturating_sub(self.host.suspended_ns());
            let dropped = u.drop_impossible_delays(end.saturating_sub(p.start_ns), since_boot);
            self.counts.figures_dropped += u64::from(dropped);
        }
        if let (Some(u), Some(g)) = (usage.as_mut(), gpu) {
            u.gpu = g;
        }
        self.tree.settle(&key, usage);
    }

    /// A process attributed and exported: forgotten, with what it alone kept; returns what
    /// went.
    pub(super) fn release(&mut self, key: ProcKey) -> Vec<Proc> {
        self.tree.release(key)
    }

    /// The runs with an exit still waiting for its usage report: their ends are not final.
    pub(super) fn settling_runs(&self, attr: &Attributor) -> HashSet<ProcKey> {
        (self.awaiting.keys())
            .filter_map(|k| attr.membership(k).map(|m| m.run))
            .collect()
    }

    /// The processes of runs that still run, as the tree knows them, by pid.
    pub(super) fn still_running(&self, attr: &Attributor) -> Vec<ProcKey> {
        let mut keys: Vec<ProcKey> = (attr.members())
            .map(|(k, _)| k)
            .filter(|k| self.tree.get(k).is_some_and(|p| p.exit.is_none()))
            .collect();
        keys.sort_by_key(|k| (k.pid, k.start_ticks));
        keys
    }

    /// The longest a usage report that came took after its process's exit.
    pub(super) fn slowest_usage_report(&self) -> Duration {
        self.awaiting.slowest_report()
    }

    /// From now on each exit waits `wait` for its usage report.
    pub(super) fn wait_for_usage(&mut self, wait: Duration) {
        self.awaiting.set_wait(wait);
    }

    /// Processes that exited and wait for the kernel's usage report.
    pub(super) fn awaiting_usage(&self) -> usize {
        self.awaiting.len()
    }

    /// The wait status of `pid`, reaped by us: used when the source cannot see it.
    pub(super) fn known_exit(&mut self, pid: u32, status: u32) {
        if self.procfs {
            self.known_exits.insert(pid, status);
        }
    }
}
