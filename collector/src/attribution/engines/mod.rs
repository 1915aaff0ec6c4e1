//! Engine adapters: one module per workflow engine, registered in [`ENGINES`].
//!
//! The attribution core is engine-agnostic and does no I/O of its own. For each run it holds
//! one [`EngineRun`], which reads that engine's own records (its log, its metadata, the
//! workflow file it was given) and answers the core's questions: what is the pipeline called,
//! is a new process a task or one of the engine's helpers, and what is an ended task's name.
//! Adding an engine is one module here plus a line in [`ENGINES`].
pub mod argo;
pub mod cwltool;
pub mod generic;
pub mod nextflow;
pub mod prefect;
pub mod slurm;
pub mod snakemake;

use std::time::SystemTime;

use super::TaskInfo;
use crate::files::Bookkeeping;
use crate::host::SharedHost;
use crate::tree::{Image, Proc};

/// What runs a run (`pipetrace.run.engine`): an engine pipetrace models, a scheduler whose
/// job or workflow is the run, or no engine at all (a plain command, a run rule's match).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum EngineKind {
    /// The command given to `pipetrace run`, with no engine of its own.
    #[default]
    Command,
    /// A process a `run_rules` entry matched.
    Rule,
    Snakemake,
    Cwltool,
    Nextflow,
    Prefect,
    /// A Slurm job no engine runs.
    Slurm,
    /// An Argo workflow.
    Argo,
}

impl EngineKind {
    /// As `pipetrace.run.engine` and `attribution.engines` spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Command => "command",
            Self::Rule => "rule",
            Self::Snakemake => "snakemake",
            Self::Cwltool => "cwltool",
            Self::Nextflow => "nextflow",
            Self::Prefect => "prefect",
            Self::Slurm => "slurm",
            Self::Argo => "argo",
        }
    }

    /// A scheduler's run (a Slurm job, an Argo workflow), whose processes may run an
    /// engine of their own.
    pub fn is_scheduler(self) -> bool {
        matches!(self, Self::Slurm | Self::Argo)
    }
}

impl std::fmt::Display for EngineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a process that is in a run but in no task yet is, decided at its exec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// It starts a task: its descendants are the task's tools.
    Task,
    /// The engine's own work (a solver, a probe, a JavaScript evaluator): folded into the
    /// run's engine span, never a task or a tool of its own.
    Helper,
    /// Neither yet: a later exec may decide.
    Undecided,
}

/// Where a process stands in its run when it is classified.
#[derive(Clone, Copy, Debug)]
pub struct Place {
    /// Its parent is the run's root process (the engine).
    pub parent_is_root: bool,
    /// Its nearest ancestor with a span is the run itself.
    pub under_run: bool,
}

/// An ended task root waiting for its name.
pub struct Ended<'a> {
    pub proc: &'a Proc,
    /// It has waited past the engine's usual delay: name it with what is known.
    pub overdue: bool,
    /// Its start and end on the wall clock, to compare with the engine's records.
    pub start: SystemTime,
    pub end: SystemTime,
}

/// A run every node names alike, whichever of its parts it sees.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shared {
    /// What identifies the run on every node (a Slurm job: `slurm/<uid>/<job>`).
    pub identity: String,
    /// This node's part holds not the run's root but one of its tasks (a Slurm step, a
    /// Snakemake cluster job): the task. `None`: this is the run's root.
    pub part: Option<TaskInfo>,
}

/// How far a run is by its engine's records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Tasks ended, failed ones too.
    pub done: u32,
    /// Tasks the run will run, as far as the engine knows now: all of them (Snakemake), or
    /// those it has started or submitted so far (Nextflow, Prefect).
    pub total: u32,
    /// Tasks waiting to run, where the records tell them from running ones (a Slurm job
    /// still pending, a Prefect task run still pending); else (None) those neither done
    /// nor seen running.
    pub queued: Option<u32>,
}

impl Progress {
    /// Tasks running by the records, where they say which are queued.
    pub fn running(&self) -> Option<u32> {
        let q = self.queued?;
        Some(self.total.saturating_sub(self.done.saturating_add(q)))
    }
}

/// One run of one engine.
pub trait EngineRun: Send {
    /// The engine's name (`pipetrace.run.engine`).
    fn engine(&self) -> EngineKind;
    /// What users call the pipeline (`cicd.pipeline.name`).
    fn pipeline_name(&self) -> String;
    /// What makes two runs the same pipeline, for history: the same key, the same pipeline.
    fn pipeline_key(&self) -> String;
    /// The engine's own name of this run, where it has one (a Prefect flow run's name).
    fn run_label(&self) -> Option<String> {
        None
    }
    /// How far the run is, where the engine's records say (Snakemake's log, Nextflow's
    /// log, Prefect's database).
    fn progress(&mut self) -> Option<Progress> {
        None
    }
    /// Whether an engine task may start several processes (siblings): each is then a tool of
    /// one task span per engine task (`TaskInfo::run_id`), exported once the task ended.
    fn groups_tasks(&self) -> bool {
        false
    }
    /// Whether the engine's records say task `id` ended (so no process of it is to come).
    fn group_ended(&mut self, _id: &str) -> bool {
        true
    }
    /// The engine's own span of this run where it traces itself (W3C traceparent): asked as
    /// tasks start, so that the run's spans join that trace before any is built.
    fn trace_parent(&mut self) -> Option<String> {
        None
    }
    /// Whether every node names this run alike (its spans from several nodes form one trace).
    /// Asked at its start, and as its processes start until it answers.
    fn shared(&self) -> Option<Shared> {
        None
    }
    /// Whether the run will be named alike on every node but does not know by what yet (a
    /// Snakemake cluster head before its first submission): its spans wait until it does.
    fn awaits_identity(&self) -> bool {
        false
    }
    /// Whether processes of the run outside any task are the engine's helpers (engines) or
    /// the run's own tools (a plain command).
    fn folds_helpers(&self) -> bool {
        true
    }
    /// The engine's server process this run talks to, found by its connection to it (a
    /// standing Prefect server), where the engine keeps its records.
    fn served_by(&mut self, _server: u32) {}
    /// What `p` (in the run, in no task, just exec'd `image`) is.
    fn classify(&mut self, p: &Proc, image: &Image, place: Place) -> Class;
    /// Whether the engine needs the working directory of a new process of the run that runs
    /// `argv` (its records are found relative to it).
    fn needs_cwd(&self, _argv: &[String]) -> bool {
        false
    }
    /// Whether `image`, exec'd by a process of a task whose parent runs `parent`, is the
    /// engine's work rather than the task's (a job run by an engine subprocess).
    fn helper_in_task(&self, _image: &Image, _parent: &Image) -> bool {
        false
    }
    /// Whether `image`, exec'd in the run by a process whose nearest ancestor that exec'd
    /// runs `runner` (the run's root, when `runner_is_root`), is the engine's own per-task
    /// plumbing: what its task wrapper runs for itself (staging, output capture, metrics
    /// sampling), counted in the engine span, never a tool of the task.
    fn plumbing(&self, _image: &Image, _runner: &Image, _runner_is_root: bool) -> bool {
        false
    }
    /// Whether `image` runs a task's own script, as the engine's wrapper starts it: it and
    /// what it starts are the task's work, even under the wrapper's plumbing, and the script
    /// itself is no tool (the commands it runs are).
    fn task_script(&self, _image: &Image) -> bool {
        false
    }
    /// The name a running task will most likely end with, if the records tell already
    /// (without records of its own: its tool's).
    fn provisional(&mut self, task: &Proc) -> Option<String> {
        Some(super::naming::proc_tool_name(task))
    }
    /// Names ended tasks from the engine's records: None for one whose record is not
    /// written yet (it is asked again). An overdue task, or any with `force`, gets a name.
    /// (Without records of its own: each by its tool.)
    fn resolve(&mut self, ended: &[Ended], _force: bool) -> Vec<Option<TaskInfo>> {
        ended.iter().map(|e| Some(by_tool(e.proc))).collect()
    }
}

/// An engine: how to recognise its process, and how to follow one of its runs.
pub struct Engine {
    pub name: &'static str,
    pub kind: EngineKind,
    /// Whether an exec (its program, or an interpreter's script) runs this engine.
    pub recognises: fn(tool: &str, image: &Image) -> bool,
    pub start: fn(image: &Image, started: SystemTime, host: SharedHost) -> Box<dyn EngineRun>,
    /// The engine's own files among those its tasks open: never a task's inputs or outputs.
    pub bookkeeping: Bookkeeping,
    /// For an engine recognised by what its process starts rather than by its own command
    /// line: whether a child that runs `image` makes `parent` a run of this engine.
    pub started_by_parent: Option<fn(image: &Image, parent: &Proc) -> bool>,
}

/// Every engine pipetrace models. `attribution.engines` says which of them start runs.
pub const ENGINES: &[Engine] = &[
    snakemake::ENGINE,
    cwltool::ENGINE,
    nextflow::ENGINE,
    prefect::ENGINE,
];

/// Every engine's bookkeeping, for the file filter.
pub fn bookkeeping() -> impl Iterator<Item = Bookkeeping> {
    ENGINES.iter().map(|e| e.bookkeeping)
}

/// The engine, among those enabled, whose process (`parent`) is known by starting a child
/// that runs `image` (`Engine::started_by_parent`).
pub fn of_parent(enabled: &[String], image: &Image, parent: &Proc) -> Option<&'static Engine> {
    let on = |e: &&Engine| enabled.iter().any(|n| n == e.name);
    (ENGINES.iter().filter(on)).find(|e| {
        e.started_by_parent
            .is_some_and(|starts| starts(image, parent))
    })
}

/// The engine an exec runs, among those enabled.
pub fn detect(enabled: &[String], image: &Image) -> Option<&'static Engine> {
    let tool = super::naming::tool_name_of(
        super::naming::program_name(&image.path, &image.argv),
        &image.argv,
    );
    ENGINES
        .iter()
        .filter(|e| enabled.iter().any(|n| n == e.name))
        .find(|e| (e.recognises)(&tool, image))
}

/// A task named by its tool, its run id made from its process.
pub fn by_tool(p: &Proc) -> TaskInfo {
    TaskInfo::fallback(p, super::naming::proc_tool_name(p))
}

/// A short stable digest (FNV-1a) for pipeline keys.
pub fn digest(parts: &[&str]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain([0]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{:08x}", h >> 32)
}

/// Calls engines make to a container runtime to prepare a task (`docker inspect`,
/// `podman pull`, `singularity --version`): the engine's work, not the task's.
pub fn is_container_query(image: &Image) -> bool {
    let exe = super::naming::executable_name(&image.path);
    let runtime = matches!(
        exe,
        "docker" | "podman" | "singularity" | "apptainer" | "nerdctl" | "crictl"
    );
    let sub = image.argv.get(1).map(String::as_str).unwrap_or("");
    runtime
        && matches!(
            sub,
            "inspect" | "pull" | "images" | "image" | "version" | "--version" | "info" | "build"
        )
}
