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
    /// What Slurm says of the job beyond its cgroup (see [`JobRecord`]).
    pub record: Option<std::sync::Arc<JobRecord>>,
}

/// What Slurm says of a job that its cgroup path cannot: its place in a job array and its
/// user's name, from `squeue` on the node, asked once per job when its first step starts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobRecord {
    /// (the array's job id, this job's index in it), for a job of a job array.
    pub array: Option<(u64, u32)>,
    pub user: Option<String>,
}

/// How long `squeue` may take before the step is attributed without its record.
const SQUEUE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// One line of `squeue --format '%F %K %u'`: the array's job id (the job's own id for a job
/// of no array), the index (`N/A` for none) and the user name.
fn parse_squeue(line: &str) -> Option<JobRecord> {
    let mut f = line.split_whitespace();
    let (array_job, index, user) = (f.next()?, f.next()?, f.next()?);
    let array = match (array_job.parse().ok(), index.parse().ok()) {
        (Some(j), Some(i)) => Some((j, i)),
        _ => None,
    };
    Some(JobRecord {
        array,
        user: Some(user.to_string()),
    })
}

/// Asks the node's `squeue` about `job`; None where there is no Slurm client, the job is
/// gone or the controller does not answer in time.
pub fn job_record(job: u64) -> Option<JobRecord> {
    use std::process::{Command, Stdio};
    let mut child = Command::new("squeue")
        .args(["--noheader", "--format", "%F %K %u", "--jobs"])
        .arg(job.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = std::time::Instant::now() + SQUEUE_TIMEOUT;
    while child.try_wait().ok()?.is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            log::warn!("squeue did not answer about job {job} within 2 s: no array ids");
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let mut text = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take()?, &mut text).ok()?;
    text.lines().find_map(parse_squeue)
}

/// A `slurmstepd: [<job>.<step>]` process title (its `/proc/<pid>/cmdline`): the step of a
/// job whose processes Slurm keeps in no cgroup of its own (proctrack/linuxproc).
pub fn from_title(cmdline: &[u8]) -> Option<SlurmStep> {
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
pub fn from_path(path: &str) -> Option<SlurmStep> {
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
pub fn from_proc_cgroup(text: &str) -> Option<SlurmStep> {
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
    fn squeue_names_an_array_jobs_place_and_the_user() {
        let r = parse_squeue("20 0 alice").unwrap();
        assert_eq!((r.array, r.user.as_deref()), (Some((20, 0)), Some("alice")));
        let plain = parse_squeue("4242 N/A root").unwrap();
        assert_eq!((plain.array, plain.user.as_deref()), (None, Some("root")));
        assert_eq!(parse_squeue("20"), None);
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
