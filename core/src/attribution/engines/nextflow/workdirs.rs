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
