//! Roll-ups: every ended process counted in its task (or its run, once the task is done),
//! and the totals handed over with a finished task or run.
use super::{Attributor, Finished, Membership, Proc, ProcKey, RunInfo, TaskInfo, Totals};
use crate::accounting::Allocation;

impl Attributor {
    pub(super) fn task_done(&mut self, run_key: ProcKey, p: Proc, info: TaskInfo) -> Finished {
        let failed = p.exit.as_ref().is_some_and(|e| e.code() != 0);
        if let Some(run) = self.runs.get_mut(&run_key) {
            run.info.tasks += 1;
            run.info.failed += u32::from(failed);
        }
        let rollup = self.rollups.remove(&p.key).unwrap_or_default();
        let end = p.end_ns();
        if let Some(run) = self.rollups.get_mut(&run_key) {
            run.add_rollup(p.start_ns, end, &rollup);
        }
        // What the engine asked for, where it said, within what the kernel allows.
        let allocation = self.allocations.remove(&p.key).map(|a| {
            let memory_limit = match (info.memory_bytes, a.memory_limit) {
                (Some(asked), Some(limit)) => Some(asked.min(limit)),
                (asked, limit) => asked.or(limit),
            };
            match info.threads {
                Some(t) if f64::from(t) <= a.cpus => Allocation {
                    cpus: f64::from(t),
                    source: "engine.threads",
                    memory_limit,
                },
                _ => Allocation { memory_limit, ..a },
            }
        });
        Finished::Task {
            proc: p,
            run: run_key,
            info,
            usage: Box::new(Totals {
                rollup,
                allocation,
                stalls: Vec::new(),
                slower: None,
            }),
        }
    }

    pub(super) fn run_done(&mut self, root: Proc, info: RunInfo) -> Finished {
        let usage = Totals {
            rollup: self.rollups.remove(&root.key).unwrap_or_default(),
            allocation: self.allocations.remove(&root.key),
            stalls: Vec::new(),
            slower: None,
        };
        Finished::Run {
            proc: root,
            info,
            usage: Box::new(usage),
        }
    }

    /// Counts an ended process in its task's roll-up, or its run's once the task is done.
    pub(super) fn account(&mut self, p: &Proc, m: Membership) {
        let target = m
            .task
            .filter(|t| self.rollups.contains_key(t))
            .unwrap_or(m.run);
        if let Some(r) = self.rollups.get_mut(&target) {
            let end = p.end_ns();
            r.add_process(p.start_ns, end, &Self::task_name(p), p.usage.as_ref());
            r.oom_kills += u64::from(p.oom.is_some());
        }
    }
}
