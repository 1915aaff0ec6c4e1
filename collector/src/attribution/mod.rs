//! Attribution: which run and task a process belongs to, and where its span hangs.
//!
//! Roles are decided from the tree as events arrive: a run root (the wrapped command, or in
//! agent mode a known engine or a run rule), task roots (a Snakemake job, a task rule's match,
//! else each direct child of the run), and members. Shells that only wrap are transparent:
//! their children hang under the wrapper's parent.
pub mod naming;
mod pending;
mod rollups;
pub mod rules;
pub mod snakemake;

use std::{collections::HashMap, time::SystemTime};

use naming::{executable_name, is_shell, is_single_command, shell_command, tool_name_of};
use pending::Pending;
use rules::CompiledRule;
use snakemake::SnakemakeLog;

use crate::{
    accounting::{Allocation, Rollup},
    cgroup,
    event::ProcKey,
    host,
    tree::{Image, Proc, Tree},
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    RunRoot,
    TaskRoot,
    Member,
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
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskInfo {
    pub name: String,
    pub run_id: String,
    pub wildcards: Option<String>,
    pub threads: Option<u32>,
    /// Memory the engine gave the job, where its log says (Snakemake's `mem_mb`).
    pub memory_bytes: Option<u64>,
}

#[derive(Clone, Debug)]
pub struct RunInfo {
    pub name: String,
    pub engine: String,
    pub tasks: u32,
    pub failed: u32,
}

/// Something that ended and can now be exported.
#[derive(Clone, Debug)]
pub enum Finished {
    Tool {
        proc: Proc,
        run: ProcKey,
        parent: EntityRef,
        /// Periods without progress while it ran (filled in from the live sampler).
        stalls: Vec<crate::diagnosis::Stall>,
    },
    Task {
        proc: Proc,
        run: ProcKey,
        info: TaskInfo,
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
    /// Periods without progress while it ran (filled in from the live sampler).
    pub stalls: Vec<crate::diagnosis::Stall>,
    /// Set when it took far longer than its history says is usual.
    pub slower: Option<crate::diagnosis::Slower>,
}

pub enum Mode {
    /// `pipetrace run`: the run is the process with this pid.
    Run { root_pid: u32 },
    /// `pipetrace agent`: runs are found by engine or rule.
    Agent,
}

struct Run {
    info: RunInfo,
    snakemake: Option<SnakemakeLog>,
    /// Task names fixed when a task rule matched.
    rule_names: HashMap<ProcKey, String>,
    /// Ended Snakemake jobs waiting for the log to say which job they were.
    pending: Vec<Pending>,
    /// The root ended while tasks were pending: its span waits for them.
    ended_root: Option<Proc>,
    /// When the engine's files were last read for pending tasks.
    last_look: Option<std::time::Instant>,
}

pub struct Attributor {
    mode: Mode,
    members: HashMap<ProcKey, Membership>,
    runs: HashMap<ProcKey, Run>,
    engines: Vec<String>,
    run_rules: Vec<CompiledRule>,
    task_rules: Vec<CompiledRule>,
    boot_to_unix_ns: i128,
    /// Usage summed per task and per run (by root), while they run.
    rollups: HashMap<ProcKey, Rollup>,
    /// What each task and run was allowed, read when it started.
    allocations: HashMap<ProcKey, Allocation>,
    limits: cgroup::Limits,
}

impl Attributor {
    pub fn new(
        mode: Mode,
        cfg: &pipetrace_config::Attribution,
        boot_to_unix_ns: i128,
    ) -> Result<Self, regex::Error> {
        Ok(Self {
            mode,
            members: HashMap::new(),
            runs: HashMap::new(),
            engines: cfg.engines.clone(),
            run_rules: rules::compile(&cfg.run_rules)?,
            task_rules: rules::compile(&cfg.task_rules)?,
            boot_to_unix_ns,
            rollups: HashMap::new(),
            allocations: HashMap::new(),
            limits: cgroup::Limits::default(),
        })
    }

    /// Processes in runs now, for the agent's own figures.
    pub fn tracked(&self) -> usize {
        self.members.len()
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

    /// What a task or run was allowed when it started.
    pub fn allocation(&self, key: &ProcKey) -> Option<&Allocation> {
        self.allocations.get(key)
    }

    /// The name a running task will most likely end with: a task rule's, the rule the
    /// Snakemake log's job blocks agree on for its command, or its tool's. None while the
    /// log cannot tell.
    pub fn provisional_task_name(&mut self, tree: &Tree, task: ProcKey) -> Option<String> {
        let m = self.members.get(&task).copied()?;
        let p = tree.get(&task)?;
        let run = self.runs.get_mut(&m.run)?;
        if let Some(name) = run.rule_names.get(&task) {
            return Some(name.clone());
        }
        let Some(log) = run.snakemake.as_mut() else {
            return Some(Self::task_name(p));
        };
        let command = p
            .first_image
            .as_ref()
            .and_then(|i| shell_command(&i.argv))?;
        log.likely_rule(snakemake::strip_prefix(command))
    }

    /// Processes of a running task counted so far (those that ended).
    pub fn ended_in(&self, task: &ProcKey) -> u64 {
        self.rollups.get(task).map_or(0, |r| r.processes)
    }

    /// The tool a process is counted as in metrics and roll-ups.
    pub fn tool_of(p: &Proc) -> String {
        Self::task_name(p)
    }

    /// Whether an exec needs the process's working directory (a readlink per exec, so
    /// only where it is used): a run root's (engine workdir, name), a member's with a
    /// relative path or when task rules may match on it, an exec that may start a run.
    pub fn wants_cwd(&self, tree: &Tree, e: &crate::event::Exec) -> bool {
        let member = self.members.get(&e.key).copied().or_else(|| {
            let parent = tree.by_pid(e.ppid)?;
            self.members.get(&parent.key).copied()
        });
        if let Some(m) = member {
            return m.role == Role::RunRoot
                || !e.filename.starts_with('/')
                || !self.task_rules.is_empty();
        }
        match self.mode {
            Mode::Run { root_pid } => root_pid == e.key.pid,
            Mode::Agent => {
                let tool = tool_name_of(executable_name(&e.filename), &e.argv);
                self.engines.contains(&tool) || !self.run_rules.is_empty()
            }
        }
    }

    /// In `pipetrace run`, the wrapped command's process starts the run when it is first
    /// seen: at its fork, or at its exec should the fork event be lost. Returns true then.
    fn claim_run_root(&mut self, key: ProcKey) -> bool {
        let is_root = matches!(self.mode, Mode::Run { root_pid } if root_pid == key.pid);
        if is_root && self.runs.is_empty() {
            self.start_run(key, "command".into(), String::new());
            return true;
        }
        false
    }

    pub fn on_fork(&mut self, tree: &Tree, key: ProcKey) {
        let Some(p) = tree.get(&key) else { return };
        if self.claim_run_root(key) {
            return;
        }
        if let Some(parent) = p.parent.and_then(|pk| self.members.get(&pk)).copied() {
            let m = Membership {
                run: parent.run,
                task: parent.task,
                role: Role::Member,
            };
            self.members.insert(key, m);
        }
    }

    /// Replays the /proc seed: processes in start order, as if each had just started.
    pub fn on_seed(&mut self, tree: &Tree, keys: &[ProcKey]) {
        for &k in keys {
            self.on_fork(tree, k);
            self.on_exec(tree, k);
        }
    }

    fn start_run(&mut self, key: ProcKey, engine: String, name: String) {
        let info = RunInfo {
            name,
            engine,
            tasks: 0,
            failed: 0,
        };
        let run = Run {
            info,
            snakemake: None,
            rule_names: HashMap::new(),
            pending: Vec::new(),
            ended_root: None,
            last_look: None,
        };
        self.runs.insert(key, run);
        self.rollups.insert(key, Rollup::default());
        self.allocations
            .insert(key, self.limits.allocation(key.pid));
        self.members.insert(
            key,
            Membership {
                run: key,
                task: None,
                role: Role::RunRoot,
            },
        );
    }

    fn engine_of(&self, image: &Image) -> Option<String> {
        let tool = tool_name_of(executable_name(&image.path), &image.argv);
        self.engines.iter().find(|e| **e == tool).cloned()
    }

    pub fn on_exec(&mut self, tree: &Tree, key: ProcKey) {
        let Some(p) = tree.get(&key) else { return };
        let Some(image) = p.image.clone() else { return };
        if !self.members.contains_key(&key) {
            self.claim_run_root(key);
        }
        let Some(m) = self.members.get(&key).copied() else {
            if matches!(self.mode, Mode::Agent) {
                let started = self.unix_time(p.start_ns);
                self.maybe_start_agent_run(key, &image, started);
            }
            return;
        };
        match m.role {
            Role::RunRoot => self.name_run(key, p, &image),
            Role::TaskRoot => {}
            Role::Member if m.task.is_none() => self.maybe_start_task(tree, key, m.run, &image),
            Role::Member => {}
        }
    }

    fn maybe_start_agent_run(&mut self, key: ProcKey, image: &Image, started: SystemTime) {
        if let Some(engine) = self.engine_of(image) {
            self.start_run(key, engine, String::new());
        } else if let Some(rule) = self.run_rules.iter().find(|r| r.matches(image)) {
            let name = rule.name(image);
            self.start_run(key, "rule".into(), name);
        } else {
            return;
        }
        self.name_run_with(key, image, started);
    }

    fn name_run(&mut self, key: ProcKey, p: &Proc, image: &Image) {
        let started = self.unix_time(p.start_ns);
        self.name_run_with(key, image, started);
    }

    /// The run root may exec through wrappers (`env`, `time`) before the engine: re-decide
    /// the engine at each of its execs until the run has tasks. An engine found stays
    /// (the nextflow launcher goes on to exec java).
    fn name_run_with(&mut self, key: ProcKey, image: &Image, started: SystemTime) {
        let engine = self.engine_of(image);
        let Some(run) = self.runs.get_mut(&key) else {
            return;
        };
        if run.info.tasks > 0 {
            return;
        }
        if engine.is_none() && !matches!(run.info.engine.as_str(), "command" | "rule") {
            return;
        }
        if run.info.engine != "rule" {
            run.info.engine = engine.unwrap_or_else(|| "command".into());
        }
        let workdir = image.cwd.clone().unwrap_or_default();
        if run.info.engine == "snakemake" {
            run.info.name = workdir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "snakemake".into());
            run.snakemake = Some(SnakemakeLog::new(workdir, started));
        } else if run.info.engine != "rule" {
            run.info.name = pipeline_name(&run.info.engine, image);
        }
    }

    fn unix_time(&self, boot_ns: u64) -> SystemTime {
        host::system_time(boot_ns, self.boot_to_unix_ns)
    }

    fn maybe_start_task(&mut self, tree: &Tree, key: ProcKey, run_key: ProcKey, image: &Image) {
        let Some(engine) = self.runs.get(&run_key).map(|r| r.info.engine.clone()) else {
            return;
        };
        let rule_name = self
            .task_rules
            .iter()
            .find(|r| r.matches(image))
            .map(|r| r.name(image));
        let is_task = rule_name.is_some()
            || if engine == "snakemake" {
                let parent = tree.get(&key).and_then(|p| p.parent);
                parent == Some(run_key) && shell_command(&image.argv).is_some()
            } else {
                self.placement(tree, &key, run_key, None) == EntityRef::Run(run_key)
            };
        if !is_task {
            return;
        }
        if let (Some(name), Some(run)) = (rule_name, self.runs.get_mut(&run_key)) {
            run.rule_names.insert(key, name);
        }
        let m = Membership {
            run: run_key,
            task: Some(key),
            role: Role::TaskRoot,
        };
        self.members.insert(key, m);
        self.rollups.insert(key, Rollup::default());
        self.allocations
            .insert(key, self.limits.allocation(key.pid));
    }

    /// A member whose span would be empty: a subshell that never exec'd, or a shell that
    /// only wraps one command.
    fn transparent(&self, tree: &Tree, p: &Proc) -> bool {
        match &p.image {
            None => p
                .parent
                .and_then(|k| tree.get(&k))
                .and_then(|parent| parent.image.as_ref())
                .is_some_and(|img| is_shell(&img.path)),
            Some(img) => shell_command(&img.argv).is_some_and(is_single_command),
        }
    }

    /// A task root that is a `sh -c` job script: the task span stands for it. Judged by what
    /// it started as: a script's shell may exec its last command at the end (`...; touch x`),
    /// while a single-command job's shell execs the command at once and is that tool.
    fn task_root_is_script(p: &Proc) -> bool {
        let first = p.first_image.as_ref();
        let script = first.and_then(|img| shell_command(&img.argv).map(snakemake::strip_prefix));
        match script {
            Some(script) if !is_single_command(script) => true,
            _ => p
                .image
                .as_ref()
                .is_some_and(|img| shell_command(&img.argv).is_some()),
        }
    }

    /// The nearest ancestor with a span of its own.
    fn placement(
        &self,
        tree: &Tree,
        key: &ProcKey,
        run: ProcKey,
        task: Option<ProcKey>,
    ) -> EntityRef {
        for a in tree.ancestors(key) {
            let Some(m) = self.members.get(&a.key) else {
                break;
            };
            match m.role {
                Role::RunRoot => return EntityRef::Run(a.key),
                Role::TaskRoot if Self::task_root_is_script(a) => return EntityRef::Task(a.key),
                Role::TaskRoot => return EntityRef::Tool(a.key),
                Role::Member if self.transparent(tree, a) => continue,
                Role::Member => return EntityRef::Tool(a.key),
            }
        }
        task.map(EntityRef::Task).unwrap_or(EntityRef::Run(run))
    }

    fn task_name(p: &Proc) -> String {
        p.image
            .as_ref()
            .map(|i| tool_name_of(executable_name(&i.path), &i.argv))
            .unwrap_or_else(|| p.comm.clone())
    }

    fn fallback_info(p: &Proc, name: String) -> TaskInfo {
        let run_id = format!("{}-{}", p.key.pid, p.key.start_ticks);
        TaskInfo {
            name,
            run_id,
            wildcards: None,
            threads: None,
            memory_bytes: None,
        }
    }

    /// The task's name now, or None when it must wait for the Snakemake log.
    fn task_info_now(&mut self, run_key: ProcKey, p: &Proc) -> Option<TaskInfo> {
        let run = self.runs.get_mut(&run_key)?;
        if let Some(name) = run.rule_names.get(&p.key) {
            return Some(Self::fallback_info(p, name.clone()));
        }
        let command = p.first_image.as_ref().and_then(|i| shell_command(&i.argv));
        if let (Some(_), Some(command)) = (&run.snakemake, command) {
            let command = snakemake::strip_prefix(command).to_string();
            let since = std::time::Instant::now();
            run.pending.push(Pending {
                proc: p.clone(),
                command,
                since,
            });
            return None;
        }
        Some(Self::fallback_info(p, Self::task_name(p)))
    }

    /// A process ended: what can now be exported.
    pub fn on_exit(&mut self, tree: &Tree, key: ProcKey) -> Vec<Finished> {
        let Some(m) = self.members.get(&key).copied() else {
            return Vec::new();
        };
        let Some(p) = tree.get(&key) else {
            return Vec::new();
        };
        self.account(p, m);
        let mut out = Vec::new();
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
                    out.push(self.run_done(p.clone(), info));
                }
            }
            Role::TaskRoot => {
                if !Self::task_root_is_script(p) {
                    let parent = EntityRef::Task(key);
                    out.push(Finished::Tool {
                        proc: p.clone(),
                        run: m.run,
                        parent,
                        stalls: Vec::new(),
                    });
                }
                if let Some(info) = self.task_info_now(m.run, p) {
                    out.push(self.task_done(m.run, p.clone(), info));
                }
            }
            Role::Member if self.transparent(tree, p) => {}
            Role::Member => {
                let parent = self.placement(tree, &key, m.run, m.task);
                out.push(Finished::Tool {
                    proc: p.clone(),
                    run: m.run,
                    parent,
                    stalls: Vec::new(),
                });
            }
        }
        out
    }

    /// The tree dropped these processes: forget them, and runs whose root is gone.
    pub fn forget(&mut self, dropped: &[Proc]) {
        for p in dropped {
            self.members.remove(&p.key);
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

/// What users call the pipeline: the workflow a CWL or Nextflow run runs, else the program.
fn pipeline_name(engine: &str, image: &Image) -> String {
    let args = image.argv.get(1..).unwrap_or(&[]);
    let named = match engine {
        "cwltool" => args
            .iter()
            .find(|a| a.ends_with(".cwl"))
            .map(|a| executable_name(a)),
        "nextflow" => args
            .iter()
            .position(|a| a == "run")
            .and_then(|i| args.get(i + 1))
            .map(String::as_str),
        _ => None,
    };
    named
        .map(str::to_string)
        .unwrap_or_else(|| tool_name_of(executable_name(&image.path), &image.argv))
}

#[cfg(test)]
mod tests;
