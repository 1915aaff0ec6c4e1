//! Engine tasks of several processes (a Prefect task run that starts a few subprocesses):
//! one task span for the engine's task, each of its processes a tool under it. The span
//! covers all of them, sums their usage, fails if one failed, and is exported once the
//! engine's records say the task ended (or the run did).
use super::{Attributor, EntityRef, Finished, ProcKey, TaskInfo};
use crate::{
    accounting::Rollup,
    tree::{Exit, Proc},
};

pub(super) struct Group {
    /// Its first process, stretched over all of them: the task span's times and status.
    leader: Proc,
    info: TaskInfo,
    rollup: Rollup,
}

fn failed(p: &Proc) -> bool {
    p.exit.as_ref().is_some_and(|e| e.code() != 0)
}

impl Attributor {
    pub(super) fn groups_tasks(&self, run: ProcKey) -> bool {
        self.runs.get(&run).is_some_and(|r| r.groups_tasks)
    }

    /// A process of an engine task was named: it is a tool of that task's span.
    pub(super) fn join_group(&mut self, run_key: ProcKey, p: Proc, info: TaskInfo) -> Finished {
        let rollup = self.rollups.remove(&p.key).unwrap_or_default();
        let (start, end) = (p.start_ns, p.end_ns());
        let alternatives = info.alternatives.clone();
        let leader = match self.runs.get_mut(&run_key) {
            Some(run) => {
                let g = run
                    .groups
                    .entry(info.run_id.clone())
                    .or_insert_with(|| Group {
                        leader: p.clone(),
                        info,
                        rollup: Rollup::default(),
                    });
                g.rollup.add_rollup(start, end, &rollup);
                let l = &mut g.leader;
                l.start_ns = l.start_ns.min(start);
                let status = match (failed(l), failed(&p)) {
                    (false, true) => p.exit.as_ref().map_or(0, |e| e.status),
                    _ => l.exit.as_ref().map_or(0, |e| e.status),
                };
                let time_ns = l.end_ns().max(end);
                l.exit = Some(Exit { time_ns, status });
                l.key
            }
            None => p.key,
        };
        Finished::Tool {
            proc: p,
            run: run_key,
            parent: EntityRef::Task(leader),
            verdict: None,
            alternatives,
        }
    }

    /// The engine tasks of run `run_key` that ended (all, with `force`): their spans.
    pub(super) fn finish_groups(&mut self, run_key: ProcKey, force: bool) -> Vec<Finished> {
        let now = self.host.uptime();
        let Some(run) = self.runs.get_mut(&run_key) else {
            return Vec::new();
        };
        // Polls come with every batch of events; an engine's records are read at most every
        // LOOK_EVERY.
        let recent = run
            .groups_look
            .is_some_and(|t| now.saturating_sub(t) < super::pending::LOOK_EVERY);
        if run.groups.is_empty() || (recent && !force) {
            return Vec::new();
        }
        run.groups_look = Some(now);
        let ids: Vec<String> = run.groups.keys().cloned().collect();
        let done: Vec<String> = ids
            .into_iter()
            .filter(|id| force || run.adapter.task_runs().is_none_or(|t| t.group_ended(id)))
            .collect();
        let groups: Vec<Group> = done.iter().filter_map(|id| run.groups.remove(id)).collect();
        let mut out = Vec::new();
        for g in groups {
            self.rollups.insert(g.leader.key, g.rollup);
            out.push(self.task_done(run_key, g.leader, g.info));
        }
        out
    }
}
