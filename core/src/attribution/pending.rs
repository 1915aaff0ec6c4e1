//! Tasks waiting for their names: an engine writes its record of a job a moment after the
//! job's process ends, and only then can the two be matched with certainty.
use std::collections::HashSet;

use super::{Attributor, Finished, ProcKey, Settled, engines::Ended};
use crate::tree::Proc;

pub(super) struct Pending {
    pub(super) proc: Proc,
    /// When it ended, on the host's uptime clock.
    pub(super) since: std::time::Duration,
}

/// How often pending tasks look at the engine's records again.
pub(super) const LOOK_EVERY: std::time::Duration = std::time::Duration::from_millis(50);

/// How long an ended task waits for the engine's record before it is named anyway.
const RECORD_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

impl Attributor {
    /// Names the pending tasks the engines' records now account for; with `force`, all of them (at the end of `pipetrace run`). Also
    /// releases run spans that waited for them. `settling`: runs with processes that ended
    /// but whose end is not final yet: their pending tasks wait, as one of those processes
    /// may be a better match for a record.
    pub fn poll(&mut self, force: bool, settling: &HashSet<ProcKey>) -> Settled {
        self.newly_shared();
        let mut out = self.resolved(force, settling);
        if force {
            out.extend(self.flush_deferred());
        }
        let finished = self.unheld(out);
        let effects = self.effects();
        Settled { finished, effects }
    }

    /// Runs that learnt since their identity on every node (an `srun` whose job Slurm has
    /// named) without a process starting: named alike from here on, what they held released.
    fn newly_shared(&mut self) {
        let unshared: Vec<ProcKey> = (self.runs.iter())
            .filter(|(_, r)| !r.shared)
            .map(|(k, _)| *k)
            .collect();
        for run in unshared {
            self.share_if_named(run);
        }
    }

    /// Run `run` learnt what names it on every node: its spans are built in that trace
    /// from here on, and what it held goes out.
    pub(super) fn share_if_named(&mut self, run: ProcKey) {
        let Some(r) = self.runs.get_mut(&run).filter(|r| !r.shared) else {
            return;
        };
        if let Some(shared) = r.adapter.multi_node().and_then(|m| m.shared()) {
            r.shared = true;
            self.effects.shares.push((run, shared));
            self.release(run);
        }
    }

    fn resolved(&mut self, force: bool, settling: &HashSet<ProcKey>) -> Vec<Finished> {
        let mut out = Vec::new();
        let keys: Vec<ProcKey> = self.runs.keys().copied().collect();
        for key in keys {
            if !force && settling.contains(&key) {
                continue;
            }
            let grouped = self.groups_tasks(key);
            for (p, info) in self.resolve(key, force) {
                match grouped {
                    true => out.push(self.join_group(key, p, info)),
                    false => out.extend(self.task_ended(key, p, info)),
                }
            }
            out.extend(self.finish_groups(key, false));
            let Some(run) = self.runs.get_mut(&key) else {
                continue;
            };
            let ended = match run.pending.is_empty() {
                true => run.ended_root.take().map(|root| (root, run.info.clone())),
                false => None,
            };
            if let Some((root, info)) = ended {
                out.extend(self.finish_groups(key, true));
                out.extend(self.run_done(root, info));
            }
        }
        out
    }

    /// The pending tasks of run `key` that can be named now, with their names.
    fn resolve(&mut self, key: ProcKey, force: bool) -> Vec<(Proc, super::TaskInfo)> {
        let boot = self.boot_to_unix_ns;
        let now = self.host.uptime();
        let Some(run) = self.runs.get_mut(&key) else {
            return Vec::new();
        };
        // Polls come with every batch of events: read the engine's records at most every
        // LOOK_EVERY.
        let recent = run
            .last_look
            .is_some_and(|t| now.saturating_sub(t) < LOOK_EVERY);
        if run.pending.is_empty() || (recent && !force) {
            return Vec::new();
        }
        run.last_look = Some(now);
        // Equal matches go to the task that started first: ended tasks reach this list in
        // the order their usage reports arrive, which is not always the order they ran in.
        run.pending
            .sort_by_key(|p| (p.proc.start_ns, p.proc.key.pid));
        let wall = |ns: u64| crate::port::system_time(ns, boot);
        let ended: Vec<Ended> = run
            .pending
            .iter()
            .map(|p| Ended {
                proc: &p.proc,
                overdue: force || now.saturating_sub(p.since) > RECORD_WAIT,
                start: wall(p.proc.start_ns),
                end: wall(p.proc.end_ns()),
            })
            .collect();
        let names = run.adapter.resolve(&ended, force);
        let mut resolved = Vec::new();
        for (pending, name) in std::mem::take(&mut run.pending).into_iter().zip(names) {
            match name {
                Some(info) => resolved.push((pending.proc, info.cleaned())),
                None => run.pending.push(pending),
            }
        }
        resolved
    }

    /// Tasks waiting for their names, across runs.
    pub fn pending(&self) -> usize {
        self.runs
            .values()
            .map(|r| r.pending.len() + usize::from(r.ended_root.is_some()))
            .sum()
    }
}
