//! Containers: which one a process runs in (its cgroup path) and what its runtime records of
//! it (name, image, labels). Read at the edge, when a process's cgroup differs from its
//! parent's; the core sees only [`Container`].
mod argo;
mod cgroup_path;
mod kubelet;
mod records;
mod slurm;

use std::{collections::HashMap, path::Path, sync::Arc};

use crate::port::Host;

pub use crate::port::{JobRecord, RecordCell};
pub use argo::ArgoPod;
pub use cgroup_path::Placement;
pub(crate) use cgroup_path::from_proc_cgroup;
pub use kubelet::K8s;
pub use records::Details;
pub use slurm::SlurmStep;

/// A container a process runs in; or, for a Slurm job step's processes, the step (`id`
/// empty when the step is not also in a container).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Container {
    pub id: String,
    pub slurm: Option<SlurmStep>,
    pub runtime: Option<&'static str>,
    pub pod_uid: Option<String>,
    pub details: Details,
}

/// Programs that start a container's (or a Slurm step's) first process.
pub fn is_runtime(tool: &str) -> bool {
    matches!(
        tool,
        "runc" | "crun" | "runsc" | "youki" | "conmon" | "docker-init" | "tini" | "slurmstepd"
    ) || tool.starts_with("containerd-shim")
        || tool.starts_with("runc:")
}

/// Whether a program (its path and argv, as exec'd) starts containers or steps.
pub fn runs_runtime(path: &str, argv: &[String]) -> bool {
    is_runtime(crate::facts::program_name(path, argv))
}

/// Containers seen so far, by id: each runtime record is read once.
#[derive(Default)]
pub struct Containers {
    known: HashMap<String, Arc<Container>>,
    kubelet: kubelet::Paths,
}

/// Containers remembered at most; past it the memory starts afresh (records are re-read).
const MAX_KNOWN: usize = 4096;

impl Containers {
    /// The container process `pid` runs in now: `Err` when its cgroup could not be read (it
    /// ended first), `Ok(None)` on the host.
    pub fn of_pid(
        &mut self,
        host: &dyn Host,
        pid: u32,
    ) -> Result<Option<Arc<Container>>, std::io::Error> {
        self.of_pid_under(host, pid, None)
    }

    /// As [`Self::of_pid`], for a process `slurmstepd` (pid `stepd`) started: where no cgroup
    /// names its step, the slurmstepd's process title does.
    pub fn of_pid_under(
        &mut self,
        host: &dyn Host,
        pid: u32,
        stepd: Option<u32>,
    ) -> Result<Option<Arc<Container>>, std::io::Error> {
        let text = host.read_to_string(Path::new(&format!("/proc/{pid}/cgroup")))?;
        let titled = || {
            // Anyone can title a program so: only root's slurmstepd (slurmd's) is believed.
            let stepd = Path::new("/proc").join(stepd?.to_string());
            if host.facts(&stepd).ok()?.uid != 0 {
                return None;
            }
            slurm::from_title(&host.read(&stepd.join("cmdline")).ok()?)
        };
        let step = slurm::from_proc_cgroup(&text).or_else(titled);
        let step = step.map(|s| with_record(host, s));
        Ok(self.of_cgroup(host, &text, step))
    }

    fn of_cgroup(
        &mut self,
        host: &dyn Host,
        text: &str,
        slurm: Option<SlurmStep>,
    ) -> Option<Arc<Container>> {
        let Some(p) = from_proc_cgroup(text) else {
            return slurm.map(|s| {
                Arc::new(Container {
                    id: String::new(),
                    slurm: Some(s),
                    runtime: None,
                    pod_uid: None,
                    details: Details::default(),
                })
            });
        };
        if let Some(c) = self.known.get(&p.id) {
            // A record written after the container's first process: read it once more.
            if c.details.name.is_some() {
                return Some(c.clone());
            }
        }
        if self.known.len() >= MAX_KNOWN {
            self.known.clear();
        }
        let c = Arc::new(Container {
            details: records::read(host, p.runtime, &p.id, p.pod_uid.as_deref(), &self.kubelet),
            slurm,
            id: p.id.clone(),
            runtime: p.runtime,
            pod_uid: p.pod_uid,
        });
        self.known.insert(p.id, c.clone());
        Some(c)
    }
}

/// `step` with what Slurm says (or will say) of its job.
fn with_record(host: &dyn Host, mut step: SlurmStep) -> SlurmStep {
    step.record = Some(host.slurm_job(step.job));
    step
}
