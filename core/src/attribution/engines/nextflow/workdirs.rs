//! A task whose `.command.run` could not be read as it started (it ended before pipetrace
//! read its working directory: a quick task on a loaded machine) is found afterwards by
//! Nextflow's own records: the work directory whose `.command.begin` was touched as that
//! process ran, and that no other task of the run holds.
use std::{
    collections::HashSet,
    path::{Path, PathBuf},
    time::{Duration, SystemTime},
};

use super::read_task;
use crate::{attribution::TaskInfo, port::Host};

/// The file clock is coarse and the marker is touched by the wrapper a moment after it
/// starts, or left until just before it ends.
const SLACK: Duration = Duration::from_secs(1);

/// The work directory `-w`/`-work-dir` names for a head run with `args`, else `work`, under
/// its working directory `cwd`.
pub(super) fn work_dir(cwd: &Path, args: &[String]) -> PathBuf {
    let given =
        (args.iter().position(|a| a == "-w" || a == "-work-dir")).and_then(|i| args.get(i + 1));
    cwd.join(given.map_or("work", String::as_str))
}

/// The task a `.command.run` that ran from `start` to `end` was: the work directory under
/// `work` whose `.command.begin` was touched then (the nearest to `start`), not among
/// `claimed` (the run ids of tasks already named).
pub(super) fn find(
    host: &dyn Host,
    work: &Path,
    (start, end): (SystemTime, SystemTime),
    claimed: &HashSet<String>,
) -> Option<TaskInfo> {
    let from = start.checked_sub(SLACK).unwrap_or(start);
    let to = end + SLACK;
    let mut best: Option<(Duration, TaskInfo)> = None;
    for prefix in host.list(work).ok()? {
        for dir in host.list(&prefix).unwrap_or_default() {
            let Ok(begin) = host.facts(&dir.join(".command.begin")) else {
                continue;
            };
            let at = begin.modified;
            if at < from || at > to {
                continue;
            }
            let Some(info) = read_task(host, &dir.join(".command.run")) else {
                continue;
            };
            if claimed.contains(&info.run_id) {
                continue;
            }
            let off = at.duration_since(start).unwrap_or_else(|e| e.duration());
            if best.as_ref().is_none_or(|(d, _)| off < *d) {
                best = Some((off, info));
            }
        }
    }
    best.map(|(_, info)| info)
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use crate::disk_host::shared as live;

    /// A quick task on a loaded machine: its `.command.run` ended before pipetrace read its
    /// working directory. Its work directory is found by when Nextflow's wrapper touched
    /// `.command.begin`, and one directory names one task only.
    #[test]
    fn a_task_whose_directory_was_not_read_is_found_by_its_begin_marker() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_800_000_000);
        let secs = |s: f64| t0 + std::time::Duration::from_secs_f64(s);
        for (hash, name, began) in [("ab/0123", "SORT", 1.0), ("cd/4567", "COUNT", 10.0)] {
            let work = dir
                .path()
                .join(format!("work/{hash}89abcdef0123456789abcdef01"));
            std::fs::create_dir_all(&work).unwrap();
            let header = format!("#!/bin/bash\n### ---\n### name: '{name}'\n");
            std::fs::write(work.join(".command.run"), header).unwrap();
            let begin = std::fs::File::create(work.join(".command.begin")).unwrap();
            begin.set_modified(secs(began)).unwrap();
        }
        let head = Image {
            path: "/usr/bin/nextflow".into(),
            argv: ["nextflow", "run", "main.nf"].map(String::from).to_vec(),
            cwd: Some(dir.path().to_path_buf()),
            ..Default::default()
        };
        let mut run = start(&head, t0, live());
        let task = |pid: u32| {
            let key = ProcKey {
                pid,
                start_ticks: u64::from(pid),
            };
            let mut p = Proc::new(key, None, 1, 0, "bash".into());
            p.image = Some(Image {
                path: "/bin/bash".into(),
                argv: ["/bin/bash", "-ue", ".command.run"]
                    .map(String::from)
                    .to_vec(),
                cwd: None,
                ..Default::default()
            });
            p
        };
        let (sort, count, again) = (task(10), task(11), task(12));
        let ended = |p: &'static Proc, from: f64, to: f64| Ended {
            proc: p,
            overdue: false,
            start: secs(from),
            end: secs(to),
        };
        let leak = |p: Proc| &*Box::leak(Box::new(p));
        let (sort, count, again) = (leak(sort), leak(count), leak(again));
        let names = run.resolve(
            &[
                ended(count, 9.8, 11.0),
                ended(sort, 0.9, 2.0),
                ended(again, 0.9, 2.0),
            ],
            false,
        );
        let names: Vec<String> = names.into_iter().map(|t| t.unwrap().name).collect();
        assert_eq!(names, ["COUNT", "SORT", ".command.run"]);
    }
}
