//! What Slurm says of a job that its cgroup path cannot (its place in a job array, its
//! user's name), from `squeue` on the node: asked once per job by a thread of its own, so a
//! slow controller never holds up the events, and filled in when Slurm answers.
use std::{collections::HashMap, sync::mpsc};

use pipetrace_core::port::{JobRecord, RecordCell};

/// Jobs asked about at most at once; past it a job goes without its record.
const QUEUE: usize = 256;
/// Jobs remembered at most; past it the memory starts afresh.
const MAX_JOBS: usize = 4096;

/// The node's jobs asked about: one per machine, whoever asks.
pub(crate) fn cell(job: u64) -> RecordCell {
    static RECORDS: std::sync::Mutex<Option<JobRecords>> = std::sync::Mutex::new(None);
    let mut records = RECORDS.lock().unwrap_or_else(|e| e.into_inner());
    records.get_or_insert_with(JobRecords::default).cell(job)
}

#[derive(Default)]
struct JobRecords {
    cells: HashMap<u64, RecordCell>,
    asker: Option<mpsc::SyncSender<(u64, RecordCell)>>,
}

impl JobRecords {
    /// `job`'s record cell; the first call for a job asks Slurm about it.
    pub(crate) fn cell(&mut self, job: u64) -> RecordCell {
        if let Some(c) = self.cells.get(&job) {
            return c.clone();
        }
        if self.cells.len() >= MAX_JOBS {
            self.cells.clear();
        }
        let cell = RecordCell::default();
        self.cells.insert(job, cell.clone());
        let asker = self.asker.get_or_insert_with(start_asker);
        if asker.try_send((job, cell.clone())).is_err() {
            log::warn!("too many Slurm jobs waiting for squeue: job {job} has no array ids");
        }
        cell
    }
}

fn start_asker() -> mpsc::SyncSender<(u64, RecordCell)> {
    let (tx, rx) = mpsc::sync_channel::<(u64, RecordCell)>(QUEUE);
    let spawned = std::thread::Builder::new()
        .name("pipetrace-squeue".into())
        .spawn(move || {
            for (job, cell) in rx {
                if let Some(r) = ask(job) {
                    let _ = cell.set(r);
                }
            }
        });
    if let Err(e) = spawned {
        log::warn!("cannot start the thread that asks squeue about jobs: {e}");
    }
    tx
}

/// Asks the node's `squeue` about `job` (5 s at most); None where there is no Slurm
/// client, the job is gone or the controller does not answer.
fn ask(job: u64) -> Option<JobRecord> {
    let o = std::process::Command::new("timeout")
        .args(["--kill-after=1", "5", "squeue", "--noheader", "--array"])
        .args(["--format", "%A %F %K %t %u %a", "--jobs"])
        .arg(job.to_string())
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let found = parse(&String::from_utf8_lossy(&o.stdout), job);
    if found.is_none() {
        log::info!("squeue told nothing of job {job}: no array ids or user name");
    }
    found
}

/// The line of `squeue --array --format '%A %F %K %t %u %a'` about `job` itself: its array's
/// job id (its own id for a job of no array), its index (`N/A` for none), its state, its
/// user's name and its account (`(null)` for none). A job of an array lists the array's other jobs too, and the array's pending
/// jobs share the id of the array's last job until each starts: the one not pending is it.
fn parse(text: &str, job: u64) -> Option<JobRecord> {
    let mut ours: Vec<[&str; 5]> = text
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let [id, array_job, index, state, user, account] = f[..] else {
                return None;
            };
            (id.parse::<u64>().ok()? == job).then_some([array_job, index, state, user, account])
        })
        .collect();
    ours.sort_by_key(|[_, _, state, _, _]| *state == "PD");
    let [array_job, index, _, user, account] = *ours.first()?;
    let array = match (array_job.parse().ok(), index.parse().ok()) {
        (Some(j), Some(i)) => Some((j, i)),
        _ => None,
    };
    Some(JobRecord {
        array,
        user: Some(user.to_string()),
        account: (account != "(null)").then(|| account.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squeue_names_the_asked_jobs_array_place_and_user_among_its_siblings() {
        // The array's other jobs are listed too; its pending ones share the last job's id.
        let text = "40 40 3 PD alice lab\n43 40 2 CG alice lab\n42 40 1 R alice lab\n40 40 4 R alice lab\n";
        let r = parse(text, 42).unwrap();
        assert_eq!((r.array, r.user.as_deref()), (Some((40, 1)), Some("alice")));
        assert_eq!(r.account.as_deref(), Some("lab"));
        assert_eq!(
            parse(text, 40).unwrap().array,
            Some((40, 4)),
            "not the pending one"
        );
        let plain = parse("4242 4242 N/A R root (null)\n", 4242).unwrap();
        assert_eq!((plain.array, plain.user.as_deref()), (None, Some("root")));
        assert_eq!(plain.account, None, "no account");
        assert_eq!(parse("", 7), None);
        assert_eq!(parse("7 7 N/A R alice", 7), None, "a short line");
    }
}
