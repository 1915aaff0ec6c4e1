//! The loop's second stage: the lifecycle's steps into runs, tasks and tools (the core's
//! attributor), with what a task or run that started is allowed read from its cgroup while
//! it runs and, for a Slurm client, its job. It hands span building the traces to join and
//! the runs shared across nodes, and the records that can be exported ([`Settled`]).
use pipetrace_core::attribution::{Attributor, Effects, Settled};
use pipetrace_core::event::ProcKey;
use pipetrace_core::port::SharedHost;
use pipetrace_core::tree::{Proc, Tree};

use super::lifecycle::Step;

pub(crate) struct Attribution {
    host: SharedHost,
    attr: Attributor,
    /// Reads what tasks and runs are allowed (cgroups) as they start.
    limits: pipetrace_host::cgroup::Limits,
    /// Tasks and runs started in this batch whose allocation is still to be read.
    unread: Vec<ProcKey>,
    /// Unix time at boot, ns: when a Slurm client started, for its job's lookup.
    boot_to_unix_ns: i128,
}

impl Attribution {
    pub(crate) fn new(host: SharedHost, attr: Attributor, boot_to_unix_ns: i128) -> Self {
        Self {
            host,
            attr,
            limits: Default::default(),
            unread: Vec::new(),
            boot_to_unix_ns,
        }
    }

    /// The attributor, to be asked.
    pub(super) fn get(&self) -> &Attributor {
        &self.attr
    }

    pub(super) fn get_mut(&mut self) -> &mut Attributor {
        &mut self.attr
    }

    /// The processes found running at the start.
    pub(super) fn seeded(&mut self, tree: &Tree, keys: &[ProcKey]) -> Effects {
        let effects = self.attr.on_seed(tree, keys);
        self.keep(effects)
    }

    /// One step of the lifecycle.
    pub(super) fn step(&mut self, tree: &Tree, step: Step) -> Effects {
        let effects = match step {
            Step::Nothing => return Effects::default(),
            Step::Forked(key) => self.attr.on_fork(tree, key),
            Step::Execed { key, uid, start_ns } => {
                if self.attr.creates_allocation(tree, key) {
                    let unix_ns = (self.boot_to_unix_ns + i128::from(start_ns)).max(0);
                    let secs = (unix_ns / 1_000_000_000) as i64;
                    let cell = self.host.slurm_allocation(key.pid, uid, secs);
                    self.attr.set_client_allocation(tree, key, cell);
                }
                self.attr.on_exec(tree, key)
            }
        };
        self.keep(effects)
    }

    /// A process's end, final in the tree.
    pub(super) fn ended(&mut self, tree: &Tree, key: ProcKey) -> Settled {
        let settled = self.attr.on_exit(tree, key);
        self.settled(settled)
    }

    /// What can be exported now (Snakemake's jobs wait for the engine's log); with
    /// `force`, everything still waiting. `settling`: runs with an exit still to settle.
    pub(super) fn poll(
        &mut self,
        force: bool,
        settling: &std::collections::HashSet<ProcKey>,
    ) -> Settled {
        let settled = self.attr.poll(force, settling);
        self.settled(settled)
    }

    /// Processes the tree let go of.
    pub(super) fn forget(&mut self, dropped: &[Proc]) {
        self.attr.forget(dropped);
    }

    fn settled(&mut self, mut s: Settled) -> Settled {
        s.effects = self.keep(s.effects);
        s
    }

    /// The tasks and runs that started are this stage's to read the allocation of; the
    /// rest goes on.
    fn keep(&mut self, mut effects: Effects) -> Effects {
        self.unread.append(&mut effects.started);
        effects
    }

    /// What the tasks and runs started since the last call are allowed, read while they
    /// run. Read after a batch, not at each exec: a task that already ended by then (most
    /// of a fork storm's, each a few ms) is gone or about to be, and gets the host's
    /// without the reads, as a failed read would give it.
    pub(super) fn read_allocations(&mut self, tree: &Tree) {
        for key in std::mem::take(&mut self.unread) {
            let ended = tree.get(&key).is_none_or(|p| p.exit.is_some());
            let a = match ended {
                true => self.limits.allocation_of_gone(&*self.host),
                false => self.limits.allocation(&*self.host, key.pid),
            };
            self.attr.set_allocation(key, a);
        }
    }
}
