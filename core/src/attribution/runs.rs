//! Where runs start and which engine they are: the wrapped command's process in
//! `pipetrace run`, a recognised engine or a run rule in agent mode, a wrapper the root execs
//! through, or an engine recognised by a child it starts.
use std::{collections::HashMap, time::SystemTime};

use super::{
    Attributor, EngineRun, Helpers, Membership, Mode, ProcKey, Role, Run, RunInfo, engines,
    engines::{EngineKind, generic::Generic},
};
use crate::{
    accounting::Rollup,
    port::{self, AllocCell},
    tree::{Image, Proc, Tree},
};

impl Attributor {
    /// Whether `key`, in no run of a node agent, just exec'd a scheduler's client that asks
    /// for an allocation of its own (`Engine::allocates`: Slurm's `srun` or `salloc` outside
    /// a job). Its allocation is what the caller then asks for
    /// ([`Self::set_client_allocation`]).
    pub fn creates_allocation(&self, tree: &Tree, key: ProcKey) -> bool {
        self.allocation_client(tree, key).is_some()
    }

    fn allocation_client(&self, tree: &Tree, key: ProcKey) -> Option<engines::Allocates> {
        let p = tree.get(&key)?;
        if !matches!(self.mode, Mode::Agent) || self.members.contains_key(&key) {
            return None;
        }
        self.engines.allocates(p)
    }

    /// The allocation client `key` created, as its scheduler will name it.
    pub fn set_client_allocation(&mut self, tree: &Tree, key: ProcKey, cell: AllocCell) {
        if let Some(a) = self.allocation_client(tree, key) {
            self.clients.insert(key, (a, cell));
        }
    }

    /// In `pipetrace run`, the wrapped command's process starts the run when it is first
    /// seen: at its fork, or at its exec should the fork event be lost. Returns true then.
    pub(super) fn claim_run_root(&mut self, key: ProcKey) -> bool {
        let is_root = matches!(self.mode, Mode::Run { root_pid } if root_pid == key.pid);
        if is_root && self.runs.is_empty() {
            let adapter = Box::new(Generic::command(&*self.host, &self.command));
            self.start_run(key, adapter);
            return true;
        }
        false
    }

    pub(super) fn start_run(&mut self, key: ProcKey, mut adapter: Box<dyn EngineRun>) {
        let shared = adapter.multi_node().and_then(|m| m.shared());
        let is_shared = shared.is_some();
        let groups_tasks = adapter.task_runs().is_some();
        if let Some(shared) = shared {
            self.effects.shares.push((key, shared));
        }
        let info = RunInfo {
            name: adapter.pipeline_name(),
            engine: adapter.engine(),
            tasks: 0,
            failed: 0,
            key: adapter.pipeline_key(),
            label: None,
            progress: None,
            engine_version: None,
            log: None,
        };
        let run = Run {
            info,
            adapter,
            rule_names: HashMap::new(),
            pending: Vec::new(),
            ended_root: None,
            last_look: None,
            groups_look: None,
            helpers: Helpers::default(),
            joined: false,
            shared: is_shared,
            groups: HashMap::new(),
            groups_tasks,
        };
        self.runs.insert(key, run);
        self.rollups.insert(key, Rollup::default());
        self.effects.started.push(key);
        self.members.insert(
            key,
            Membership {
                run: key,
                task: None,
                role: Role::RunRoot,
            },
        );
    }

    /// In agent mode, a process in no run starts one if it runs an engine, a run rule
    /// matches it, it asked Slurm for an allocation of its own (`srun`, `salloc`: the job's
    /// run, rooted here), or it is the first of a scheduler's unit that an engine claims
    /// (`slurm`: the Slurm step it is in, when its parent is not; `argo`: an Argo pod's
    /// container, likewise; `Engine::starts_in`).
    pub(super) fn maybe_start_agent_run(
        &mut self,
        key: ProcKey,
        image: &Image,
        started: SystemTime,
        slurm: Option<&crate::containers::SlurmStep>,
        argo: Option<&crate::containers::Container>,
    ) {
        let client = self.clients.remove(&key);
        let placed = engines::Placed { slurm, argo };
        let adapter: Box<dyn EngineRun> = if let Some(e) = self.engines.detect(image) {
            (e.start)(image, started, self.host.clone())
        } else if let Some(rule) = self.run_rules.iter().find(|r| r.matches(image)) {
            Box::new(Generic::rule(&*self.host, rule.name(image), image))
        } else if let Some((allocates, alloc)) = client {
            (allocates.start)(alloc)
        } else if let Some(run) = self.engines.start_in(&placed, image, &self.host) {
            run
        } else {
            return;
        };
        self.start_run(key, adapter);
    }

    /// `child` runs what only an engine's process starts (Prefect's temporary server): its
    /// parent runs that engine. A plain command becomes a run of it; in
    /// agent mode, a process in no run starts one.
    pub(super) fn engine_by_child(
        &mut self,
        parent: &Proc,
        child: ProcKey,
        engine: &engines::Engine,
    ) {
        let Some(image) = parent.image.as_ref() else {
            return;
        };
        let started = self.unix_time(parent.start_ns);
        match self.members.get(&parent.key).map(|m| m.role) {
            Some(Role::RunRoot) => {
                let Some(run) = self.runs.get_mut(&parent.key) else {
                    return;
                };
                // Tasks it ran before (a setup step before the flow is called) stay its.
                if run.info.engine != EngineKind::COMMAND {
                    return;
                }
                run.switch_to((engine.start)(image, started, self.host.clone()));
            }
            None if matches!(self.mode, Mode::Agent) => {
                self.start_run(
                    parent.key,
                    (engine.start)(image, started, self.host.clone()),
                );
                let m = Membership {
                    run: parent.key,
                    task: None,
                    role: Role::Member,
                };
                self.members.insert(child, m);
            }
            _ => {}
        }
    }

    /// The run root may exec through wrappers (`env`, `time`) before the engine: re-decide
    /// the engine at each of its execs until the run has tasks. An engine found stays
    /// (the nextflow launcher goes on to exec java); a plain command is renamed.
    pub(super) fn root_exec(&mut self, key: ProcKey, image: &Image, started: SystemTime) {
        let engine = self.engines.detect(image);
        let Some(run) = self.runs.get_mut(&key) else {
            return;
        };
        if run.info.tasks > 0 || run.info.engine == EngineKind::RULE {
            return;
        }
        let adapter: Box<dyn EngineRun> = match engine {
            Some(e) if e.kind != run.info.engine => (e.start)(image, started, self.host.clone()),
            None if run.info.engine == EngineKind::COMMAND => {
                Box::new(Generic::command(&*self.host, image))
            }
            _ => return,
        };
        run.switch_to(adapter);
    }

    /// Shows `child`'s exec to the engines that watch every exec; a run one finds starts as
    /// one its child shows (`engine_by_child`).
    pub(super) fn watch_exec(&mut self, tree: &Tree, child: ProcKey) {
        let mut watches = std::mem::take(&mut self.watches);
        for (engine, watch) in &mut watches {
            let cx = engines::Context {
                agent: matches!(self.mode, Mode::Agent),
                may_become_run: &|k| self.may_become_run(k),
            };
            let Some(claim) = watch.exec(tree, child, &cx, &*self.host) else {
                continue;
            };
            let Some(parent) = tree.get(&claim.parent) else {
                continue;
            };
            self.engine_by_child(parent, child, engine);
            if let Some(server) = claim.server
                && let Some(run) = self.runs.get_mut(&claim.parent)
                && run.info.engine == engine.kind
                && let Some(t) = run.adapter.task_runs()
            {
                t.served_by(server);
            }
        }
        self.watches = watches;
    }

    /// Whether `key` may become an engine's run: the root of a plain command's run, or,
    /// under the agent, a process in no run.
    fn may_become_run(&self, key: ProcKey) -> bool {
        match self.members.get(&key).map(|m| m.role) {
            Some(Role::RunRoot) => {
                (self.runs.get(&key)).is_some_and(|r| r.info.engine == EngineKind::COMMAND)
            }
            None => matches!(self.mode, Mode::Agent),
            Some(_) => false,
        }
    }

    pub(super) fn unix_time(&self, boot_ns: u64) -> SystemTime {
        port::system_time(boot_ns, self.boot_to_unix_ns)
    }
}

impl Attributor {
    /// An engine a batch script or a step pod runs (`snakemake` under sbatch) is a run of its
    /// own, named by the engine's records rather than a task of the job; but an engine's
    /// job that is part of a run rooted elsewhere (a Snakemake cluster job) is the job
    /// itself: the job's run becomes that part, its batch script the task's first process.
    pub(super) fn engine_under_scheduler(&mut self, p: &Proc, job: ProcKey, e: &engines::Engine) {
        let Some(image) = p.image.as_ref() else {
            return;
        };
        let adapter = (e.start)(image, self.unix_time(p.start_ns), self.host.clone());
        let shared = adapter
            .multi_node()
            .and_then(|m| m.shared())
            .filter(|s| s.part.is_some());
        match (shared, self.runs.get_mut(&job)) {
            (Some(shared), Some(run)) if run.info.tasks == 0 => {
                run.switch_to(adapter);
                run.shared = true;
                self.effects.shares.push((job, shared));
            }
            _ => {
                self.members.remove(&p.key);
                self.start_run(p.key, adapter);
            }
        }
    }

    /// Whether the run is a scheduler's (a Slurm job, an Argo workflow), whose processes
    /// may run an engine of their own.
    pub(super) fn under_scheduler(&self, run: ProcKey) -> bool {
        self.runs
            .get(&run)
            .is_some_and(|r| r.info.engine.is_scheduler())
    }
}

/// The container of an Argo pod `p` runs in, if `p` is the container's first process: its
/// parent is outside the container (the runtime's shim, or not seen).
pub(super) fn first_in_argo_pod<'a>(
    tree: &crate::tree::Tree,
    p: &'a crate::tree::Proc,
) -> Option<&'a crate::containers::Container> {
    let c = p.container.as_deref()?;
    c.details.argo.as_ref()?;
    let parents = p
        .parent
        .and_then(|k| tree.get(&k))
        .and_then(|q| q.container.as_deref());
    parents.is_none_or(|q| q.id != c.id).then_some(c)
}

/// The Slurm step `p` runs in, if `p` is the step's first process: slurmstepd started it
/// (or, for an agent scoped to the step, its parent is outside).
pub(super) fn first_of_step<'a>(
    tree: &crate::tree::Tree,
    p: &'a crate::tree::Proc,
) -> Option<&'a crate::containers::SlurmStep> {
    let step = p.container.as_ref()?.slurm.as_ref()?;
    started_by_stepd(tree, p).then_some(step)
}

/// Whether slurmstepd started `p` (or, for an agent scoped to a step, its parent is
/// outside what the agent sees): it may be the first process of a Slurm step.
pub(super) fn started_by_stepd(tree: &crate::tree::Tree, p: &crate::tree::Proc) -> bool {
    match p.parent.and_then(|k| tree.get(&k)) {
        None => true,
        Some(q) => match q.image.as_ref() {
            Some(i) => {
                super::naming::program_name(&i.path, &i.argv) == "slurmstepd"
                    || i.argv.first().is_some_and(|a| a.starts_with("slurmstepd:"))
            }
            // A forked slurmstepd that has not exec'd: the step's task starter.
            None => q.comm.starts_with("slurmstepd"),
        },
    }
}
