//! Which Slurm job and step a process runs in, from its cgroup path: slurmd's cgroup plugin
//! puts each step's processes in `/slurm[_<node>]/uid_<u>/job_<j>/step_<s>[/task_<t>]`
//! (cgroup v1) or `.../slurmstepd.scope/job_<j>/step_<s>/user/task_<t>` (cgroup v2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlurmStep {
    pub job: u64,
    /// A number, or `batch`, `extern`, `interactive` for the job's special steps.
    pub step: String,
    pub task: Option<u32>,
    pub uid: Option<u32>,
    /// What Slurm says of the job beyond its cgroup, once it has answered.
    pub record: Option<super::RecordCell>,
}

impl SlurmStep {
    pub fn record(&self) -> Option<&super::JobRecord> {
        self.record.as_ref()?.get()
    }
}

/// A `slurmstepd: [<job>.<step>]` process title (its `/proc/<pid>/cmdline`): the step of a
/// job whose processes Slurm keeps in no cgroup of its own (proctrack/linuxproc).
pub(crate) fn from_title(cmdline: &[u8]) -> Option<SlurmStep> {
    let first = cmdline.split(|b| *b == 0).next()?;
    let title = std::str::from_utf8(first).ok()?.trim();
    let inner = title.strip_prefix("slurmstepd: [")?.strip_suffix(']')?;
    let (job, step) = inner.split_once('.')?;
    Some(SlurmStep {
        job: job.parse().ok()?,
        step: step.to_string(),
        task: None,
        uid: None,
        record: None,
    })
}

fn number<T: std::str::FromStr>(part: &str, prefix: &str) -> Option<T> {
    part.strip_prefix(prefix)?.parse().ok()
}

/// One cgroup path's Slurm job and step, if it has them.
pub(crate) fn from_path(path: &str) -> Option<SlurmStep> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let under_slurm = parts
        .iter()
        .any(|p| *p == "slurm" || p.starts_with("slurm_") || *p == "slurmstepd.scope");
    if !under_slurm {
        return None;
    }
    let at = parts.iter().position(|p| p.starts_with("job_"))?;
    let job = number(parts[at], "job_")?;
    let step = parts.get(at + 1)?.strip_prefix("step_")?.to_string();
    if step.is_empty() {
        return None;
    }
    Some(SlurmStep {
        job,
        step,
        task: parts[at..].iter().find_map(|p| number(p, "task_")),
        uid: parts[..at].iter().find_map(|p| number(p, "uid_")),
        record: None,
    })
}

/// The text of `/proc/<pid>/cgroup`: the first line whose path names a Slurm step.
pub(crate) fn from_proc_cgroup(text: &str) -> Option<SlurmStep> {
    text.lines()
        .filter_map(|l| l.splitn(3, ':').nth(2))
        .find_map(from_path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_and_v2_layouts_name_the_job_step_task_and_user() {
        let v1 = from_path("/slurm_node1/uid_1000/job_4242/step_0/task_3").unwrap();
        assert_eq!(
            v1,
            SlurmStep {
                job: 4242,
                step: "0".into(),
                task: Some(3),
                uid: Some(1000),
                record: None,
            }
        );
        let plain = from_path("/slurm/uid_0/job_7/step_batch").unwrap();
        assert_eq!(
            (plain.job, plain.step.as_str(), plain.task, plain.uid),
            (7, "batch", None, Some(0))
        );
        let v2 = from_path("/system.slice/slurmstepd.scope/job_9/step_extern/user/task_0").unwrap();
        assert_eq!(
            (v2.job, v2.step.as_str(), v2.task, v2.uid),
            (9, "extern", Some(0), None)
        );
    }

    #[test]
    fn a_slurmstepd_title_names_the_job_and_step() {
        let s = from_title(b"slurmstepd: [77.0]\0\0").unwrap();
        assert_eq!((s.job, s.step.as_str()), (77, "0"));
        let batch = from_title(b"slurmstepd: [21.batch]                 ").unwrap();
        assert_eq!((batch.job, batch.step.as_str()), (21, "batch"));
        assert_eq!(from_title(b"slurmstepd\0"), None, "not yet titled");
        assert_eq!(from_title(b"slurmd\0-D\0"), None);
    }

    #[test]
    fn a_jobs_own_cgroup_or_another_tree_is_no_step() {
        assert_eq!(from_path("/slurm/uid_0/job_7"), None, "the job, not a step");
        assert_eq!(from_path("/mine/job_7/step_0"), None, "not Slurm's");
        assert_eq!(from_path("/system.slice/slurmstepd.scope/system"), None);
        let text = "4:memory:/slurm/uid_0/job_12/step_1/task_0\n0::/\n";
        assert_eq!(from_proc_cgroup(text).map(|s| s.job), Some(12));
    }
}
