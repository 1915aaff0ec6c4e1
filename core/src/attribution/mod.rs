//! Attribution: which run and task a process belongs to, and where its span hangs.
//!
//! The core is engine-agnostic and reads nothing itself: each run holds an engine adapter
//! ([`engines::EngineRun`]) that reads the engine's own records. Roles are decided from the
//! tree as events arrive: a run root (the wrapped command, or in agent mode a known engine or
//! a run rule), task roots (a `task_rules` match, else what the adapter says), the engine's
//! helpers (folded into one engine span), processes a version-manager shim starts (folded
//! into the tool the shim becomes), and members. Shells that only wrap are transparent:
//! their children hang under the wrapper's parent.
mod deferred;
pub mod engines;
mod groups;
mod held;
mod mains;
pub mod naming;
mod pending;
mod placement;
mod rollups;
pub mod rules;
mod running;
mod runs;
mod starts;
pub mod verdict;

use std::collections::HashMap;

pub use engines::Shared;
use engines::{Class, EngineRun, Place};
use pending::Pending;
use rules::CompiledRule;
pub use verdict::{ExitCodes, Verdict};

use crate::{
    accounting::{Allocation, Rollup},
    event::ProcKey,
    port::AllocCell,
    tree::{Image, Proc, Tree},
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    RunRoot,
    TaskRoot,
    Member,
    /// The engine's own work (and what it starts): counted in the run's engine span.
    Helper,
    /// Started by a version-manager shim: counted in its task, no span of its own.
    Folded,
}

#[derive(Clone, Copy, Debug)]
pub struct Membership {
    pub run: ProcKey,
    pub task: Option<ProcKey>,
    pub role: Role,
}

/// The span an entity hangs under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EntityRef {
    Run(ProcKey),
    Task(ProcKey),
    Tool(ProcKey),
    /// The run's engine span (keyed by the run's root).
    Engine(ProcKey),
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskInfo {
    pub name: String,
    pub run_id: String,
    pub wildcards: Option<String>,
    pub threads: Option<u32>,
    /// Memory the engine gave the job, where its log says (Snakemake's `mem_mib`, else its
    /// `mem_mb` of 10^6 bytes).
    pub memory_bytes: Option<u64>,
    /// The time the engine or its scheduler gave the job, seconds, where it says
    /// (Snakemake's `runtime` in minutes, Slurm's `--time`).
    pub time_limit_s: Option<u64>,
    /// It ran inside the engine's own process (a Snakemake `run:` job).
    pub in_engine: bool,
    /// The engine's label for this instance of the task (a Nextflow task's tag).
    pub tag: Option<String>,
    /// The job's own log files as the engine names them (Snakemake's `log:`, a Nextflow
    /// task's `.command.err` and `.command.log`): where to read why it failed.
    pub logs: Vec<String>,
    /// The engine's own span of the task, where it traces itself (W3C traceparent).
    pub traceparent: Option<String>,
    /// Exit codes the engine judges otherwise than by 0 alone (cwltool's `successCodes`...).
    pub codes: ExitCodes,
    /// Of a process joined to an engine task of several: the other task runs (their ids)
    /// that may as well have started it, where the records cannot tell them apart.
    pub alternatives: Vec<String>,
}

impl TaskInfo {
    /// A task known by its name alone.
    pub fn named(name: String) -> Self {
        Self {
            name,
            ..Default::default()
        }
    }

    /// A task named `name`, its run id made from its process.
    pub(crate) fn fallback(p: &Proc, name: String) -> Self {
        Self {
            name,
            run_id: format!("{}-{}", p.key.pid, p.key.start_ticks),
            ..Default::default()
        }
    }

    /// Names safe for any display, whatever the engine's records hold.
    fn cleaned(mut self) -> Self {
        self.name = naming::clean_name(&self.name);
        self.wildcards = self.wildcards.map(|w| naming::clean_name(&w));
        self.tag = self.tag.map(|t| naming::clean_name(&t));
        self
    }
}

#[derive(Clone, Debug)]
pub struct RunInfo {
    pub name: String,
    pub engine: engines::EngineKind,
    pub tasks: u32,
    pub failed: u32,
    /// What makes runs the same pipeline (history is kept per key).
    pub key: String,
    /// The engine's own name of the run (a Prefect flow run's).
    pub label: Option<String>,
    /// How far it got by its engine's records as it ended, where the engine says.
    pub progress: Option<engines::Progress>,
    /// The engine's version: its records' word (Nextflow's log), else its package's, as the
    /// run ends (None for a plain command).
    pub engine_version: Option<String>,
    /// The engine's own log of the run, where it keeps one (asked as the run ends).
    pub log: Option<String>,
}

/// The engine's helpers of one run, summed.
#[derive(Clone, Debug, Default)]
pub struct EngineInfo {
    pub engine: engines::EngineKind,
    pub helpers: u32,
    pub failed: u32,
    pub start_ns: u64,
    pub end_ns: u64,
}

/// Something that ended and can now be exported.
#[derive(Clone, Debug)]
pub enum Finished {
    Tool {
        proc: Proc,
        run: ProcKey,
        parent: EntityRef,
        /// The engine's verdict on its exit, where it is a task's own process whose exit
        /// a listed code decides.
        verdict: Option<Verdict>,
        /// The other engine tasks (their run ids) that may as well have started it.
        alternatives: Vec<String>,
    },
    Task {
        proc: Proc,
        run: ProcKey,
        info: TaskInfo,
        usage: Box<Totals>,
    },
    /// The engine's helpers (solver, probes, expression evaluator), one span per run.
    Engine {
        run: ProcKey,
        info: EngineInfo,
        usage: Box<Totals>,
    },
    Run {
        proc: Proc,
        info: RunInfo,
        usage: Box<Totals>,
    },
}

/// A task's or run's processes summed, and the CPUs and memory it was allowed.
#[derive(Clone, Debug, Default)]
pub struct Totals {
    pub rollup: Rollup,
    pub allocation: Option<Allocation>,
}

pub enum Mode {
    /// `pipetrace run`: the run is the process with this pid.
    Run { root_pid: u32 },
    /// `pipetrace agent`: runs are found by engine or rule.
    Agent,
}

/// The helpers of a run, summed while it runs.
#[derive(Default)]
struct Helpers {
    rollup: Rollup,
    info: EngineInfo,
}

struct Run {
    info: RunInfo,
    adapter: Box<dyn EngineRun>,
    /// Task names fixed when a task rule matched.
    rule_names: HashMap<ProcKey, String>,
    /// Ended tasks waiting for the engine's records to name them.
    pending: Vec<Pending>,
    /// The root ended while tasks were pending: its span waits for them.
    ended_root: Option<Proc>,
    /// When the engine's records were last read for pending tasks.
    last_look: Option<std::time::Duration>,
    /// When the engine's records were last read for the end of engine tasks.
    groups_look: Option<std::time::Duration>,
    helpers: Helpers,
    /// Its spans were joined to the engine's own trace.
    joined: bool,
    /// It is named alike on every node (its shared identity was handed on).
    shared: bool,
    /// Engine tasks of several processes, by the engine's id, until they end.
    groups: HashMap<String, groups::Group>,
    /// Its engine's tasks are task runs of several processes each (`EngineRun::task_runs`).
    groups_tasks: bool,
}

impl Run {
    /// The run is another engine's from now on (a command that turned out to run one, a
    /// job that turned out to be a run's part): its name, key and capabilities are that
    /// engine's.
    fn switch_to(&mut self, mut adapter: Box<dyn EngineRun>) {
        self.info.name = adapter.pipeline_name();
        self.info.engine = adapter.engine();
        self.info.key = adapter.pipeline_key();
        self.groups_tasks = adapter.task_runs().is_some();
        self.adapter = adapter;
    }
}

/// What a step of the attribution set going beyond its own records, returned by the step
/// for the loop to hand on (never left queued for it to pull).
#[derive(Debug, Default)]
#[must_use]
pub struct Effects {
    /// Tasks and runs that started: the loop reads what each is allowed (its cgroup) while
    /// its process runs, and hands it back with [`Attributor::set_allocation`]. The
    /// attribution itself reads nothing.
    pub started: Vec<ProcKey>,
    /// Runs whose engine traces itself (W3C traceparent of its span of the run): their spans
    /// go into the engine's trace.
    pub joins: Vec<(ProcKey, String)>,
    /// Runs named alike on every node (multi-node runs).
    pub shares: Vec<(ProcKey, engines::Shared)>,
}

/// What a step found can be exported now, and what it set going.
#[must_use]
pub struct Settled {
    pub finished: Vec<Finished>,
    pub effects: Effects,
}

pub struct Attributor {
    /// Where engines read their records, and the clocks their waits run on.
    host: crate::port::SharedHost,
    mode: Mode,
    members: crate::event::ProcMap<ProcKey, Membership>,
    runs: crate::event::ProcMap<ProcKey, Run>,
    engines: engines::Enabled,
    run_rules: Vec<CompiledRule>,
    task_rules: Vec<CompiledRule>,
    boot_to_unix_ns: i128,
    /// Usage summed per task and per run (by root), while they run.
    rollups: crate::event::ProcMap<ProcKey, Rollup>,
    /// What each task and run was allowed, read when it started.
    allocations: crate::event::ProcMap<ProcKey, Allocation>,
    /// What the step under way set going beyond these records: handed back when it ends.
    effects: Effects,
    /// Spans of runs waiting for their identity.
    held: held::Held,
    /// Inputs and outputs listed per task (`files.max_per_task`).
    pub files_per_task: usize,
    /// Allocation clients (`Engine::allocates`) and the allocation their scheduler will name.
    clients: HashMap<ProcKey, (engines::Allocates, AllocCell)>,
    /// Running tasks' likely names, found by `name_running`.
    running_names: crate::event::ProcMap<ProcKey, String>,
    /// Main commands of tasks whose shell only wraps them, by task, until the task ends.
    mains: crate::event::ProcMap<ProcKey, Finished>,
    /// Tools waiting for a forked-only ancestor that may still exec (`deferred`).
    deferred: HashMap<ProcKey, Vec<Finished>>,
    /// The enabled engines' watchers of every exec (`Engine::watches`).
    watches: Vec<(&'static engines::Engine, Box<dyn engines::Watch>)>,
    /// `pipetrace run`'s command as it was given: the run's name until its root's exec is
    /// seen (polling /proc can miss a short command's exec).
    command: Image,
}

/// What in `attribution` configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("a run or task rule's regex does not compile: {0}")]
    Rule(#[from] regex::Error),
    #[error("attribution.engines: {0}")]
    Engine(#[from] engines::UnknownEngine),
}

impl Attributor {
    pub fn new(
        mode: Mode,
        cfg: &pipetrace_config::Attribution,
        boot_to_unix_ns: i128,
        host: crate::port::SharedHost,
    ) -> Result<Self, ConfigError> {
        let engines = engines::Enabled::from_config(cfg.engines.as_deref())?;
        let watches = engines.watches();
        Ok(Self {
            host,
            mode,
            members: Default::default(),
            runs: Default::default(),
            engines,
            run_rules: rules::compile(&cfg.run_rules)?,
            task_rules: rules::compile(&cfg.task_rules)?,
            boot_to_unix_ns,
            rollups: Default::default(),
            allocations: Default::default(),
            effects: Effects::default(),
            files_per_task: pipetrace_config::Files::default().max_per_task,
            clients: HashMap::new(),
            held: held::Held::default(),
            running_names: Default::default(),
            mains: Default::default(),
            deferred: HashMap::new(),
            watches,
            command: Image::default(),
        })
    }

    /// `pipetrace run`'s command line (program first), named by the run from its start.
    pub fn with_command(mut self, argv: &[String]) -> Self {
        self.command = Image {
            path: argv.first().cloned().unwrap_or_default(),
            argv: argv.to_vec(),
            ..Image::default()
        };
        self
    }

    /// The host the attribution reads through (the pipeline reads through the same).
    pub fn host(&self) -> crate::port::SharedHost {
        self.host.clone()
    }

    /// Processes in runs now, for the agent's own figures.
    pub fn tracked(&self) -> usize {
        self.members.len()
    }

    /// Runs not over yet (a run whose root ended stays while its tasks wait for names).
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    pub fn membership(&self, key: &ProcKey) -> Option<Membership> {
        self.members.get(key).copied()
    }

    /// Every process in a run now, with its place.
    pub fn members(&self) -> impl Iterator<Item = (ProcKey, Membership)> + '_ {
        self.members.iter().map(|(k, m)| (*k, *m))
    }

    pub fn run_name(&self, run: ProcKey) -> Option<&str> {
        self.runs.get(&run).map(|r| r.info.name.as_str())
    }

    /// Runs not over yet, by root, with their names; a run still waiting for its identity
    /// (a Snakemake cluster head before its first submission) is left out.
    pub fn named_runs(&self) -> impl Iterator<Item = (ProcKey, &str)> + '_ {
        (self.runs.iter())
            .filter(|(_, r)| !r.adapter.multi_node().is_some_and(|m| m.awaits_identity()))
            .map(|(k, r)| (*k, r.info.name.as_str()))
    }

    /// The run's name and its tasks ended so far, and failed.
    pub fn run_now(&self, run: ProcKey) -> Option<(String, u32, u32)> {
        let r = self.runs.get(&run)?;
        Some((r.info.name.clone(), r.info.tasks, r.info.failed))
    }

    /// How far each run is whose engine says, with its pipeline name.
    pub fn progress(&mut self) -> Vec<(ProcKey, String, engines::Progress)> {
        (self.runs.iter_mut())
            .filter_map(|(k, r)| Some((*k, r.info.name.clone(), r.adapter.progress()?)))
            .collect()
    }

    /// What makes the run's pipeline itself (its history key).
    pub fn run_key(&self, run: ProcKey) -> Option<&str> {
        self.runs.get(&run).map(|r| r.info.key.as_str())
    }

    /// What the step that ends now set going (and anything an earlier call between steps
    /// did), for its caller to hand on.
    fn effects(&mut self) -> Effects {
        std::mem::take(&mut self.effects)
    }

    pub fn set_allocation(&mut self, key: ProcKey, a: Allocation) {
        if self.rollups.contains_key(&key) {
            self.allocations.insert(key, a);
        }
    }

    /// What a task or run was allowed when it started.
    pub fn allocation(&self, key: &ProcKey) -> Option<&Allocation> {
        self.allocations.get(key)
    }

    /// Processes of a running task counted so far (those that ended).
    pub(crate) fn ended_in(&self, task: &ProcKey) -> u64 {
        self.rollups.get(task).map_or(0, |r| r.processes)
    }

    /// The tool a process is counted as in metrics and roll-ups.
    pub fn tool_of(p: &Proc) -> String {
        naming::proc_tool_name(p)
    }

    /// A process forked: it joins its parent's run, task and role.
    pub fn on_fork(&mut self, tree: &Tree, key: ProcKey) -> Effects {
        self.fork(tree, key);
        self.effects()
    }

    fn fork(&mut self, tree: &Tree, key: ProcKey) {
        let Some(p) = tree.get(&key) else { return };
        if self.claim_run_root(key) {
            return;
        }
        let Some(parent) = p.parent.and_then(|pk| tree.get(&pk)) else {
            return;
        };
        let Some(pm) = self.members.get(&parent.key).copied() else {
            return;
        };
        // A shim's children are its own plumbing: folded into the tool it becomes.
        let role = match pm.role {
            Role::Helper | Role::Folded => pm.role,
            _ if parent.image.as_ref().is_some_and(naming::is_shim) => Role::Folded,
            _ => Role::Member,
        };
        let m = Membership {
            run: pm.run,
            task: pm.task,
            role,
        };
        self.members.insert(key, m);
    }

    /// Replays the /proc seed: processes in start order, as if each had just started.
    pub fn on_seed(&mut self, tree: &Tree, keys: &[ProcKey]) -> Effects {
        for &k in keys {
            self.fork(tree, k);
            self.exec(tree, k);
        }
        self.effects()
    }

    /// A process executed a program: it may start a run, a task or a helper.
    pub fn on_exec(&mut self, tree: &Tree, key: ProcKey) -> Effects {
        self.exec(tree, key);
        self.effects()
    }

    fn exec(&mut self, tree: &Tree, key: ProcKey) {
        let Some(p) = tree.get(&key) else { return };
        let Some(image) = p.image.as_ref() else {
            return;
        };
        if !self.members.contains_key(&key) {
            self.claim_run_root(key);
        }
        if let Some(parent) = p.parent.and_then(|k| tree.get(&k))
            && let Some(engine) = self.engines.of_parent(image, parent)
        {
            self.engine_by_child(parent, key, engine);
        }
        self.watch_exec(tree, key);
        let Some(m) = self.members.get(&key).copied() else {
            if matches!(self.mode, Mode::Agent) {
                let started = self.unix_time(p.start_ns);
                let step = runs::first_of_step(tree, p);
                let argo = runs::first_in_argo_pod(tree, p);
                self.maybe_start_agent_run(key, image, started, step, argo);
            }
            return;
        };
        match m.role {
            Role::RunRoot => {
                let started = self.unix_time(p.start_ns);
                self.root_exec(key, image, started);
            }
            Role::Member => self.member_exec(tree, key, m, image),
            // A process is what it executed last: a helper may exec a task (a JVM's spawn
            // helper becomes the task's wrapper) or the task's own script.
            Role::Helper => self.helper_exec(tree, key, m, image),
            Role::TaskRoot | Role::Folded => {}
        }
    }

    /// A process ended: what can now be exported.
    pub fn on_exit(&mut self, tree: &Tree, key: ProcKey) -> Settled {
        let out = self.ended(tree, key);
        let finished = self.unheld(out);
        let effects = self.effects();
        Settled { finished, effects }
    }

    fn ended(&mut self, tree: &Tree, key: ProcKey) -> Vec<Finished> {
        let Some(m) = self.members.get(&key).copied() else {
            return Vec::new();
        };
        let Some(p) = tree.get(&key) else {
            return Vec::new();
        };
        self.account(p, m);
        let mut out = self.release_deferred(tree, p);
        let folds = |s: &Self| {
            s.runs
                .get(&m.run)
                .is_some_and(|r| r.adapter.folds_helpers())
        };
        match m.role {
            Role::RunRoot => {
                let ready = match self.runs.get_mut(&key) {
                    Some(run) if run.pending.is_empty() => Some(run.info.clone()),
                    Some(run) => {
                        run.ended_root = Some(p.clone());
                        None
                    }
                    None => None,
                };
                if let Some(info) = ready {
                    out.extend(self.finish_groups(key, true));
                    out.extend(self.run_done(p.clone(), info));
                }
            }
            Role::TaskRoot if self.groups_tasks(m.run) => {
                if let Some(info) = self.task_info_now(m.run, p) {
                    out.push(self.join_group(m.run, p.clone(), info));
                }
            }
            Role::TaskRoot => {
                if let Some(info) = self.task_info_now(m.run, p) {
                    out.extend(self.task_ended(m.run, p.clone(), info));
                }
            }
            Role::Helper => self.count_helper(m.run, p),
            Role::Member if m.task.is_none() && folds(self) => self.count_helper(m.run, p),
            Role::Folded => {}
            Role::Member if self.transparent(tree, p) => {}
            Role::Member => out.extend(self.member_ended(tree, p, m)),
        }
        out
    }

    /// The task's name now, or None when it must wait for the engine's records.
    fn task_info_now(&mut self, run_key: ProcKey, p: &Proc) -> Option<TaskInfo> {
        let run = self.runs.get_mut(&run_key)?;
        if let Some(name) = run.rule_names.get(&p.key) {
            return Some(TaskInfo::fallback(p, name.clone()));
        }
        let (start, end) = (self.unix_time(p.start_ns), self.unix_time(p.end_ns()));
        let run = self.runs.get_mut(&run_key)?;
        let ended = engines::Ended {
            proc: p,
            overdue: false,
            start,
            end,
        };
        if let Some(Some(info)) = run.adapter.resolve(&[ended], false).pop() {
            return Some(info.cleaned());
        }
        run.pending.push(Pending {
            proc: p.clone(),
            since: self.host.uptime(),
        });
        None
    }

    /// The tree dropped these processes: forget them, and runs whose root is gone.
    pub fn forget(&mut self, dropped: &[Proc]) {
        for (_, w) in &mut self.watches {
            w.forget(dropped);
        }
        for p in dropped {
            self.members.remove(&p.key);
            self.running_names.remove(&p.key);
            self.forget_deferred(&p.key);
        }
        // A run whose root is gone stays only while its task spans wait for names.
        self.runs.retain(|k, r| {
            self.members.contains_key(k) || !r.pending.is_empty() || r.ended_root.is_some()
        });
        // Roll-ups stay while their task or run is live or waits for its name.
        let (members, runs) = (&self.members, &self.runs);
        let waiting: std::collections::HashSet<ProcKey> = runs
            .values()
            .flat_map(|r| r.pending.iter().map(|p| p.proc.key))
            .collect();
        let live =
            |k: &ProcKey| members.contains_key(k) || runs.contains_key(k) || waiting.contains(k);
        self.rollups.retain(|k, _| live(k));
        self.allocations.retain(|k, _| live(k));
    }
}

#[cfg(test)]
mod tests;
