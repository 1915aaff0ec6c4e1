//! Slurm jobs that no engine runs: a batch script is a pipeline too. The job is the run,
//! named alike on every node by its user and job id; on the node that runs the batch script
//! the run's root is that script, and each step elsewhere (`srun`) is a task of it from the
//! node that ran it. Slurm's own clients (`srun`, `scontrol`, ...) are the run's engine work.
use super::{Allocates, Class, Engine, EngineKind, EngineRun, MultiNode, Place, Shared};
use crate::attribution::TaskInfo;
use crate::{
    attribution::naming,
    containers::SlurmStep,
    port::AllocCell,
    tree::{Image, Proc},
};

/// A Slurm job no engine runs: always on, not in `attribution.engines`.
pub const KIND: EngineKind = EngineKind::scheduler("slurm");

/// A Slurm job starts with the first process of one of its steps (the batch script, an
/// `srun` step); its processes, but for a workflow engine's, are its tasks and tools.
pub const ENGINE: Engine = Engine {
    allocates: Some(Allocates {
        client: allocates,
        start: |alloc| Box::new(SlurmClient::new(alloc)),
    }),
    ..Engine::scheduler(KIND, |placed, image, _| {
        let job = SlurmJob::start(placed.slurm?, image)?;
        Some(Box::new(job))
    })
};

pub struct SlurmJob {
    job: u64,
    /// What Slurm says of the job, once it has answered.
    record: Option<crate::containers::RecordCell>,
    /// `None`: the batch step, the run's root; else the step's task name.
    part: Option<String>,
}

/// Slurm's clients, run by a batch script to start steps or ask about the job.
const CLIENTS: &[&str] = &[
    "srun", "sbatch", "salloc", "scontrol", "squeue", "sacct", "sbcast", "sattach", "sstat",
    "scancel",
];

impl SlurmJob {
    /// The first process of a job's step: the run (batch step) or a task of it (another
    /// step). The extern step holds no work of the job.
    pub(crate) fn start(step: &SlurmStep, image: &Image) -> Option<Self> {
        let part = match step.step.as_str() {
            "extern" => return None,
            "batch" => None,
            s => {
                let tool = naming::tool_name_of(
                    naming::program_name(&image.path, &image.argv),
                    &image.argv,
                );
                Some(format!("step {s}: {tool}"))
            }
        };
        Some(Self {
            job: step.job,
            record: step.record.clone(),
            part,
        })
    }
}

impl SlurmJob {
    /// As Slurm shows the job: `<array job>_<index>` for a job of an array, else its id.
    fn shown(&self) -> String {
        match self
            .record
            .as_ref()
            .and_then(|c| c.get())
            .and_then(|r| r.array)
        {
            Some((j, i)) => format!("{j}_{i}"),
            None => self.job.to_string(),
        }
    }
}

impl MultiNode for SlurmJob {
    /// The job id alone: cgroup v2 nodes do not show the user, and v1 and v2 nodes of one
    /// cluster must agree.
    fn shared(&self) -> Option<Shared> {
        Some(Shared {
            identity: format!("slurm/{}", self.job),
            part: self.part.clone().map(TaskInfo::named),
        })
    }

    fn awaits_identity(&self) -> bool {
        false
    }
}

impl EngineRun for SlurmJob {
    fn multi_node(&self) -> Option<&dyn MultiNode> {
        Some(self)
    }

    fn engine(&self) -> super::EngineKind {
        KIND
    }

    fn pipeline_name(&self) -> String {
        format!("slurm job {}", self.shown())
    }

    /// Each job is its own pipeline (its script is known only by a spool path): no key, so
    /// no history to compare it with.
    fn pipeline_key(&self) -> String {
        String::new()
    }

    fn run_label(&self) -> Option<String> {
        Some(self.shown())
    }

    /// In a step, what runs is the step's own work (tools of its task).
    fn folds_helpers(&self) -> bool {
        self.part.is_none()
    }

    fn classify(&mut self, _p: &Proc, image: &Image, place: Place) -> Class {
        let program = naming::executable_name(&image.path);
        match (self.part.is_some(), place.under_run) {
            (true, _) => Class::Undecided,
            (false, _) if CLIENTS.contains(&program) => Class::Helper,
            (false, true) => Class::Task,
            (false, false) => Class::Undecided,
        }
    }
}

/// Whether `p` asks Slurm for an allocation of its own: `srun` or `salloc` outside a job.
fn allocates(p: &Proc) -> bool {
    let in_job = (p.container.as_ref()).is_some_and(|c| c.slurm.is_some());
    let program = |i: &Image| naming::executable_name(&i.path).to_string();
    !in_job
        && p.image
            .as_ref()
            .map(program)
            .is_some_and(|n| n == "srun" || n == "salloc")
}

/// A job started by `srun` or `salloc` with no batch script: the client, on the node it was
/// run on, is the job's run root, named alike on every node once Slurm has named the job;
/// its steps run elsewhere as tasks of it. Like a batch script, what the client starts (an
/// `salloc` shell's commands) are its tasks, and Slurm's clients its engine work.
pub struct SlurmClient {
    alloc: AllocCell,
}

impl SlurmClient {
    pub(crate) fn new(alloc: AllocCell) -> Self {
        Self { alloc }
    }

    fn job(&self) -> Option<u64> {
        self.alloc.get().copied().flatten()
    }
}

impl MultiNode for SlurmClient {
    fn shared(&self) -> Option<Shared> {
        Some(Shared {
            identity: format!("slurm/{}", self.job()?),
            part: None,
        })
    }

    /// Until Slurm has answered which job it is (or that it cannot tell).
    fn awaits_identity(&self) -> bool {
        self.alloc.get().is_none()
    }
}

impl EngineRun for SlurmClient {
    fn multi_node(&self) -> Option<&dyn MultiNode> {
        Some(self)
    }

    fn engine(&self) -> super::EngineKind {
        KIND
    }

    fn pipeline_name(&self) -> String {
        match self.job() {
            Some(j) => format!("slurm job {j}"),
            None => "slurm allocation".into(),
        }
    }

    fn pipeline_key(&self) -> String {
        String::new()
    }

    fn run_label(&self) -> Option<String> {
        self.job().map(|j| j.to_string())
    }

    fn classify(&mut self, _p: &Proc, image: &Image, place: Place) -> Class {
        let program = naming::executable_name(&image.path);
        match place.under_run {
            _ if CLIENTS.contains(&program) => Class::Helper,
            true => Class::Task,
            false => Class::Undecided,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(path: &str) -> Image {
        Image {
            path: path.into(),
            argv: vec![path.into()],
            ..Default::default()
        }
    }

    fn step(s: &str) -> SlurmStep {
        SlurmStep {
            job: 42,
            step: s.into(),
            task: Some(0),
            uid: Some(1000),
            record: None,
        }
    }

    #[test]
    fn a_jobs_batch_step_is_its_run_and_other_steps_are_tasks_of_it_on_every_node() {
        let batch = SlurmJob::start(&step("batch"), &image("/var/spool/slurm_script")).unwrap();
        let step0 = SlurmJob::start(&step("0"), &image("/usr/bin/hostname")).unwrap();
        let (run, part) = (batch.shared().unwrap(), step0.shared().unwrap());
        assert_eq!(run.identity, part.identity, "one run, whichever node");
        assert_eq!(run.part, None);
        assert_eq!(part.part.unwrap().name, "step 0: hostname");
        assert!(SlurmJob::start(&step("extern"), &image("/bin/sleep")).is_none());
    }

    #[test]
    fn a_job_of_an_array_is_named_as_slurm_shows_it_and_shares_by_its_own_id() {
        let mut s = step("batch");
        let cell = crate::containers::RecordCell::default();
        let _ = cell.set(crate::containers::JobRecord {
            array: Some((40, 2)),
            user: Some("alice".into()),
            account: None,
        });
        s.record = Some(cell);
        let job = SlurmJob::start(&s, &image("/x/slurm_script")).unwrap();
        assert_eq!(job.pipeline_name(), "slurm job 40_2");
        assert_eq!(job.run_label().as_deref(), Some("40_2"));
        assert_eq!(job.shared().unwrap().identity, "slurm/42");
    }

    #[test]
    fn an_allocation_clients_run_is_named_by_its_job_once_slurm_says() {
        let cell = AllocCell::default();
        let client = SlurmClient::new(cell.clone());
        assert!(client.awaits_identity() && client.shared().is_none());
        assert_eq!(client.pipeline_name(), "slurm allocation");
        let _ = cell.set(Some(42));
        let step0 = SlurmJob::start(&step("0"), &image("/usr/bin/hostname")).unwrap();
        assert_eq!(
            client.shared().unwrap().identity,
            step0.shared().unwrap().identity
        );
        assert_eq!(client.shared().unwrap().part, None, "the run's root");
        assert_eq!(client.pipeline_name(), "slurm job 42");
        assert!(!client.awaits_identity());
        let unknown = SlurmClient::new(AllocCell::new(std::sync::OnceLock::from(None)));
        assert!(!unknown.awaits_identity() && unknown.shared().is_none());
    }

    #[test]
    fn srun_and_salloc_outside_a_job_ask_for_an_allocation() {
        let running = |path: &str, in_job: bool| {
            let key = crate::event::ProcKey {
                pid: 2,
                start_ticks: 1,
            };
            let mut p = Proc::new(key, None, 1, 0, "x".into());
            p.image = Some(image(path));
            p.container = in_job.then(|| {
                std::sync::Arc::new(crate::containers::Container {
                    id: String::new(),
                    slurm: Some(step("0")),
                    runtime: None,
                    pod_uid: None,
                    details: Default::default(),
                })
            });
            p
        };
        assert!(allocates(&running("/usr/bin/srun", false)));
        assert!(allocates(&running("salloc", false)));
        assert!(!allocates(&running("/usr/bin/sbatch", false)));
        assert!(!allocates(&running("/usr/bin/srun", true)), "a step's srun");
    }

    #[test]
    fn slurms_clients_are_the_jobs_engine_work() {
        let mut batch = SlurmJob::start(&step("batch"), &image("/x/slurm_script")).unwrap();
        let p = Proc::new(
            crate::event::ProcKey {
                pid: 2,
                start_ticks: 1,
            },
            None,
            1,
            0,
            "srun".into(),
        );
        let place = Place {
            parent_is_root: true,
            under_run: true,
        };
        assert_eq!(
            batch.classify(&p, &image("/usr/bin/srun"), place),
            Class::Helper
        );
        assert_eq!(batch.classify(&p, &image("/bin/gzip"), place), Class::Task);
    }
}
