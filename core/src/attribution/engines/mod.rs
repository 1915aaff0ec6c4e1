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
mod run;
mod sbatch;
pub mod slurm;
pub mod snakemake;

use std::time::SystemTime;

pub use run::{EngineRun, MultiNode, TaskRuns, Wrapper};

use super::TaskInfo;
use crate::event::ProcKey;
use crate::files::Bookkeeping;
use crate::port::{Host, SharedHost};
use crate::tree::{Image, Proc, Tree};

/// What runs a run (`pipetrace.run.engine`): an engine pipetrace models (each engine's
/// module names its own, `KIND`), a scheduler whose job or workflow is the run, or no engine
/// at all (a plain command, a run rule's match).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EngineKind {
    name: &'static str,
    scheduler: bool,
}

impl EngineKind {
    /// The command given to `pipetrace run`, with no engine of its own.
    pub const COMMAND: Self = Self::engine("command");
    /// A process a `run_rules` entry matched.
    pub const RULE: Self = Self::engine("rule");

    /// A workflow engine, as `pipetrace.run.engine` and `attribution.engines` spell it.
    pub(crate) const fn engine(name: &'static str) -> Self {
        Self {
            name,
            scheduler: false,
        }
    }

    /// A scheduler (a Slurm job, an Argo workflow), whose processes may run an engine of
    /// their own.
    pub(crate) const fn scheduler(name: &'static str) -> Self {
        Self {
            name,
            scheduler: true,
        }
    }

    pub fn as_str(self) -> &'static str {
        self.name
    }

    pub(crate) fn is_scheduler(self) -> bool {
        self.scheduler
    }
}

impl Default for EngineKind {
    fn default() -> Self {
        Self::COMMAND
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
    /// Of `done`, the tasks the engine took from its cache instead of running them
    /// (Nextflow's `-resume`).
    pub cached: u32,
}

impl Progress {
    /// Tasks running by the records, where they say which are queued.
    pub fn running(&self) -> Option<u32> {
        let q = self.queued?;
        Some(self.total.saturating_sub(self.done.saturating_add(q)))
    }
}

/// An engine: how to recognise its process, and how to follow one of its runs. The core
/// asks every engine in [`ENGINES`] order; the optional capabilities are `None` for an
/// engine that has no need of them.
pub struct Engine {
    /// The engine's kind, a constant in its own module (`snakemake::KIND`): its
    /// `pipetrace.run.engine` value and its name in `attribution.engines`
    /// (`EngineKind::scheduler` for a scheduler, which is always on).
    pub kind: EngineKind,
    /// Whether an exec (its program, or an interpreter's script) runs this engine.
    pub recognises: fn(tool: &str, image: &Image) -> bool,
    /// The `EngineRun` for one of its runs, started by an exec it recognised.
    pub start: fn(image: &Image, started: SystemTime, host: SharedHost) -> Box<dyn EngineRun>,
    /// The engine's own files among those its tasks open: never a task's inputs or outputs.
    pub bookkeeping: Bookkeeping,
    /// For an engine recognised by what its process starts rather than by its own command
    /// line: whether a child that runs `image` makes `parent` a run of this engine.
    pub started_by_parent: Option<fn(image: &Image, parent: &Proc) -> bool>,
    /// For a scheduler, or an engine whose tasks a scheduler runs: the run that the first
    /// process of a scheduler's unit (a Slurm step, an Argo pod's container) starts, where
    /// it is this engine's. Asked after `recognises` and the run rules found nothing.
    pub starts_in: Option<StartsIn>,
    /// For an engine whose runs are found by watching every exec rather than by their own
    /// command line (Prefect's flows, by their connection to a standing server): makes the
    /// watcher, one per attribution.
    pub watches: Option<fn() -> Box<dyn Watch>>,
    /// For a scheduler whose clients ask for an allocation of their own outside any job
    /// (Slurm's `srun`, `salloc`): such a client roots a run, named once the scheduler has
    /// named the allocation (the host asks it: `Host::slurm_allocation`).
    pub allocates: Option<Allocates>,
    /// For an engine written in Python: its distribution's name, whose installed version
    /// (beside the program or its interpreter) is the run's engine version where the
    /// engine's records do not say it.
    pub python_package: Option<&'static str>,
}

/// A scheduler's allocation clients (`Engine::allocates`).
#[derive(Clone, Copy)]
pub struct Allocates {
    /// Whether a process in no run that just exec'd is a client that asks for one.
    pub client: fn(p: &Proc) -> bool,
    /// The run such a client roots, named by the allocation once it is known.
    pub start: fn(alloc: crate::port::AllocCell) -> Box<dyn EngineRun>,
}

/// What a watcher may know of the attribution.
pub struct Context<'a> {
    /// Under the agent (else `pipetrace run`).
    pub agent: bool,
    /// Whether a process may become a run of the engine: the root of a plain command's
    /// run, or, under the agent, a process in no run.
    pub may_become_run: &'a dyn Fn(ProcKey) -> bool,
}

/// A run a watcher found: `parent` is a run of the watcher's engine from now on, the
/// process that just exec'd its first; `server` the engine's server it talks to.
pub struct Claim {
    pub parent: ProcKey,
    pub server: Option<u32>,
}

/// Watches every exec for runs of one engine (`Engine::watches`).
pub trait Watch: Send {
    /// `key` just exec'd: the run it shows, if any.
    fn exec(&mut self, tree: &Tree, key: ProcKey, cx: &Context, host: &dyn Host) -> Option<Claim>;
    /// Processes gone from the tree.
    fn forget(&mut self, dropped: &[Proc]);
}

impl Engine {
    /// A scheduler (Slurm, Argo): no command line of its own to recognise; its runs start
    /// only in its units (`starts_in`).
    pub(crate) const fn scheduler(kind: EngineKind, starts_in: StartsIn) -> Self {
        Self {
            kind,
            recognises: |_, _| false,
            start: |_, _, _| unreachable!("a scheduler's runs start in its units (starts_in)"),
            bookkeeping: Bookkeeping {
                parts: &[],
                names: &[],
            },
            started_by_parent: None,
            starts_in: Some(starts_in),
            watches: None,
            allocates: None,
            python_package: None,
        }
    }
}

/// How an engine starts a run in a scheduler's unit (`Engine::starts_in`).
pub type StartsIn = fn(&Placed, image: &Image, host: &SharedHost) -> Option<Box<dyn EngineRun>>;

/// Where a process that starts a scheduler's unit stands: the Slurm step it is the first of
/// (its parent is not in it), the Argo pod container it is the first of.
#[derive(Clone, Copy, Default)]
pub struct Placed<'a> {
    pub slurm: Option<&'a crate::containers::SlurmStep>,
    pub argo: Option<&'a crate::containers::Container>,
}

/// Every engine pipetrace models, in the order they are asked. `attribution.engines` says
/// which workflow engines start runs (all, unless it is set); schedulers always do.
/// A new engine is one module in this folder and one line here.
pub const ENGINES: &[Engine] = &[
    snakemake::ENGINE,
    cwltool::ENGINE,
    // Before Slurm: a batch job that is a Nextflow task is that task, not a job of its own.
    nextflow::ENGINE,
    prefect::ENGINE,
    slurm::ENGINE,
    argo::ENGINE,
];

/// The Python distribution that is engine `kind` (`Engine::python_package`).
pub fn python_package(kind: EngineKind) -> Option<&'static str> {
    ENGINES.iter().find(|e| e.kind == kind)?.python_package
}

/// The workflow engines `attribution.engines` may name.
pub(crate) fn names() -> impl Iterator<Item = &'static str> {
    (ENGINES.iter().filter(|e| !e.kind.is_scheduler())).map(|e| e.kind.as_str())
}

/// The engines that start runs: schedulers, and the workflow engines enabled (`None`:
/// all of them).
#[derive(Clone)]
pub struct Enabled(Vec<&'static Engine>);

/// An `attribution.engines` entry that names no engine.
#[derive(Debug, thiserror::Error)]
#[error("`{name}` is no engine pipetrace models: name some of {known}, or leave it unset for all")]
pub struct UnknownEngine {
    pub name: String,
    pub known: String,
}

impl Enabled {
    pub fn from_config(names: Option<&[String]>) -> Result<Self, UnknownEngine> {
        if let Some(names) = names
            && let Some(bad) = names.iter().find(|n| !self::names().any(|k| k == *n))
        {
            let known: Vec<_> = self::names().collect();
            return Err(UnknownEngine {
                name: bad.clone(),
                known: known.join(", "),
            });
        }
        let on = |e: &&Engine| {
            e.kind.is_scheduler() || names.is_none_or(|n| n.iter().any(|n| n == e.kind.as_str()))
        };
        Ok(Self(ENGINES.iter().filter(on).collect()))
    }

    /// The engine, among those enabled, whose process (`parent`) is known by starting a
    /// child that runs `image` (`Engine::started_by_parent`).
    /// Whether engine `kind` starts runs.
    #[cfg(test)]
    fn has(&self, kind: EngineKind) -> bool {
        self.0.iter().any(|e| e.kind == kind)
    }

    pub(crate) fn of_parent(&self, image: &Image, parent: &Proc) -> Option<&'static Engine> {
        (self.0.iter().copied()).find(|e| e.started_by_parent.is_some_and(|s| s(image, parent)))
    }

    /// The engine an exec runs, among those enabled.
    pub(crate) fn detect(&self, image: &Image) -> Option<&'static Engine> {
        let tool = super::naming::tool_name_of(
            super::naming::program_name(&image.path, &image.argv),
            &image.argv,
        );
        (self.0.iter().copied()).find(|e| (e.recognises)(&tool, image))
    }

    /// The allocation clients `p` is one of (`Engine::allocates`).
    pub(crate) fn allocates(&self, p: &Proc) -> Option<Allocates> {
        (self.0.iter()).find_map(|e| e.allocates.filter(|a| (a.client)(p)))
    }

    /// A watcher for each engine enabled that watches execs.
    pub(crate) fn watches(&self) -> Vec<(&'static Engine, Box<dyn Watch>)> {
        (self.0.iter())
            .filter_map(|e| Some((*e, e.watches?())))
            .collect()
    }

    /// The run the first process of a scheduler's unit starts, by the first engine that
    /// claims it (`Engine::starts_in`).
    pub(crate) fn start_in(
        &self,
        placed: &Placed,
        image: &Image,
        host: &SharedHost,
    ) -> Option<Box<dyn EngineRun>> {
        (self.0.iter()).find_map(|e| e.starts_in.and_then(|start| start(placed, image, host)))
    }
}

/// Every engine's bookkeeping, for the file filter.
pub fn bookkeeping() -> impl Iterator<Item = Bookkeeping> {
    ENGINES.iter().map(|e| e.bookkeeping)
}

/// A task named by its tool, its run id made from its process.
pub(crate) fn by_tool(p: &Proc) -> TaskInfo {
    TaskInfo::fallback(p, super::naming::proc_tool_name(p))
}

/// A short stable digest (FNV-1a) for pipeline keys.
pub(crate) fn digest(parts: &[&str]) -> String {
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
pub(crate) fn is_container_query(image: &Image) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn snakemake() -> Image {
        let argv = ["/venv/bin/python", "/venv/bin/snakemake", "-c1"];
        Image {
            path: "/venv/bin/python".into(),
            argv: argv.map(String::from).to_vec(),
            ..Default::default()
        }
    }

    #[test]
    fn unset_enables_every_engine_and_a_list_only_those_it_names() {
        let all = Enabled::from_config(None).unwrap();
        assert!(ENGINES.iter().all(|e| all.has(e.kind)));
        assert_eq!(
            all.detect(&snakemake()).map(|e| e.kind),
            Some(snakemake::KIND)
        );
        let some = Enabled::from_config(Some(&["nextflow".to_string()])).unwrap();
        assert!(some.detect(&snakemake()).is_none());
        assert!(some.has(nextflow::KIND) && !some.has(snakemake::KIND));
        // Schedulers are not the list's to turn off.
        let none = Enabled::from_config(Some(&[])).unwrap();
        assert!(none.has(slurm::KIND) && none.has(argo::KIND));
        assert!(!names().any(|n| n == "slurm" || n == "argo"));
    }

    #[test]
    fn a_name_no_engine_has_is_an_error_listing_those_there_are() {
        let bad = ["snakemake".to_string(), "snakemak".to_string()];
        let err = Enabled::from_config(Some(&bad)).err().unwrap().to_string();
        assert!(err.contains("`snakemak`"), "{err}");
        for name in names() {
            assert!(err.contains(name), "{err}");
        }
    }

    #[test]
    fn every_engine_is_registered_once_under_its_own_name() {
        let mut seen: Vec<_> = ENGINES.iter().map(|e| e.kind.as_str()).collect();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), ENGINES.len());
        let reserved = [EngineKind::COMMAND, EngineKind::RULE];
        assert!(ENGINES.iter().all(|e| !reserved.contains(&e.kind)));
    }
}
