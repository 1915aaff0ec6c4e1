//! What the core asks of one run of an engine: a small interface every engine answers, and
//! capabilities an engine opts into by returning itself from their accessor. A capability
//! has no defaults of its own: an engine that has it answers all of its questions.
use super::{Class, Ended, EngineKind, Place, Progress, Shared, by_tool};
use crate::attribution::TaskInfo;
use crate::tree::{Image, Proc};

/// One run of one engine.
pub trait EngineRun: Send {
    /// The engine's name (`pipetrace.run.engine`).
    fn engine(&self) -> EngineKind;
    /// What users call the pipeline (`cicd.pipeline.name`).
    fn pipeline_name(&self) -> String;
    /// What makes two runs the same pipeline, for history: the same key, the same pipeline.
    fn pipeline_key(&self) -> String;
    /// What `p` (in the run, in no task, just exec'd `image`) is.
    fn classify(&mut self, p: &Proc, image: &Image, place: Place) -> Class;
    /// The engine's own name of this run, where it has one (a Prefect flow run's name).
    fn run_label(&self) -> Option<String> {
        None
    }
    /// How far the run is, where the engine's records say (Snakemake's log, Nextflow's
    /// log, Prefect's database).
    fn progress(&mut self) -> Option<Progress> {
        None
    }
    /// The engine's version, where its records say (Nextflow's log); asked as the run ends.
    fn engine_version(&self) -> Option<String> {
        None
    }
    /// The engine's own log of the run (Snakemake's `.snakemake/log/…`, Nextflow's
    /// `.nextflow.log`): where to read why it failed; asked as the run ends.
    fn run_log(&self) -> Option<String> {
        None
    }
    /// Whether processes of the run outside any task are the engine's helpers (engines) or
    /// the run's own tools (a plain command).
    fn folds_helpers(&self) -> bool {
        true
    }
    /// Whether the engine needs the working directory of a new process of the run that runs
    /// `argv` (its records are found relative to it).
    fn needs_cwd(&self, _argv: &[String]) -> bool {
        false
    }
    /// The name a running task will most likely end with, if the records tell already
    /// (without records of its own: its tool's).
    fn provisional(&mut self, task: &Proc) -> Option<String> {
        Some(crate::attribution::naming::proc_tool_name(task))
    }
    /// Names ended tasks from the engine's records: None for one whose record is not
    /// written yet (it is asked again). An overdue task, or any with `force`, gets a name.
    /// (Without records of its own: each by its tool.)
    fn resolve(&mut self, ended: &[Ended], _force: bool) -> Vec<Option<TaskInfo>> {
        ended.iter().map(|e| Some(by_tool(e.proc))).collect()
    }
    /// A run whose parts on several nodes are one trace (a Slurm job, a cluster run).
    fn multi_node(&self) -> Option<&dyn MultiNode> {
        None
    }
    /// An engine that runs each task through a wrapper of its own, some of whose work is
    /// the engine's rather than the task's.
    fn wrapper(&self) -> Option<&dyn Wrapper> {
        None
    }
    /// An engine whose tasks are task runs of its own server (Prefect).
    fn task_runs(&mut self) -> Option<&mut dyn TaskRuns> {
        None
    }
}

/// A run every node names alike (`EngineRun::multi_node`).
pub trait MultiNode {
    /// What names this run on every node (its spans from several nodes form one trace):
    /// asked at its start, and as its processes start until it answers.
    fn shared(&self) -> Option<Shared>;
    /// Whether the run will be named alike on every node but does not know by what yet (a
    /// Snakemake cluster head before its first submission): its spans wait until it does.
    fn awaits_identity(&self) -> bool;
}

/// What of a task's processes is the engine's own work (`EngineRun::wrapper`).
pub trait Wrapper {
    /// Whether `image`, exec'd by a process of a task whose parent runs `parent`, is the
    /// engine's work rather than the task's (a job run by an engine subprocess).
    fn helper_in_task(&self, image: &Image, parent: &Image) -> bool;
    /// Whether `image`, exec'd in the run by a process whose nearest ancestor that exec'd
    /// runs `runner` (the run's root, when `runner_is_root`), is the engine's own per-task
    /// plumbing: what its task wrapper runs for itself (staging, output capture, metrics
    /// sampling), counted in the engine span, never a tool of the task.
    fn plumbing(&self, image: &Image, runner: &Image, runner_is_root: bool) -> bool;
    /// Whether `image` runs a task's own script, as the engine's wrapper starts it: it and
    /// what it starts are the task's work, even under the wrapper's plumbing, and the script
    /// itself is no tool (the commands it runs are).
    fn task_script(&self, image: &Image) -> bool;
}

/// Tasks that are the engine's task runs (`EngineRun::task_runs`): one task may start
/// several processes (siblings), each a tool of one task span per task run
/// (`TaskInfo::run_id`), exported once the task run ended.
pub trait TaskRuns {
    /// Whether the engine's records say task run `id` ended (so no process of it is to come).
    fn group_ended(&mut self, id: &str) -> bool;
    /// The engine's own span of this run where it traces itself (W3C traceparent): asked as
    /// tasks start, so that the run's spans join that trace before any is built.
    fn trace_parent(&mut self) -> Option<String>;
    /// The engine's server process this run talks to, found by its connection to it (a
    /// standing server), where the engine keeps its records.
    fn served_by(&mut self, server: u32);
}
