//! Roll-ups: every ended process counted in its task (or its run, once the task is done),
//! and the totals handed over with a finished task or run.
use super::{
    Attributor, EntityRef, Finished, Membership, Proc, ProcKey, RunInfo, TaskInfo, Totals,
};
use crate::accounting::Allocation;
use crate::attribution::naming;

impl Attributor {
    /// A task ended and is named: the span of its own process (unless a script that only
    /// wraps; then of the one command such a shell wraps), then its own. Those wait for the
    /// name with the task's, as the task's exit codes judge their exit (grep's 1 a task
    /// counts as success is no error).
    pub(super) fn task_ended(&mut self, run: ProcKey, p: Proc, info: TaskInfo) -> Vec<Finished> {
        let mut out: Vec<Finished> = self.main_of(&p, &info).into_iter().collect();
        if !Self::task_root_is_script(&p) {
            out.push(Finished::Tool {
                proc: p.clone(),
                run,
                parent: EntityRef::Task(p.key),
                verdict: info.verdict(&p),
                alternatives: Vec::new(),
            });
        }
        out.push(self.task_done(run, p, info));
        out
    }

    pub(super) fn task_done(&mut self, run_key: ProcKey, p: Proc, info: TaskInfo) -> Finished {
        let failed = info.failed(&p);
        if let Some(run) = self.runs.get_mut(&run_key) {
            run.info.tasks += 1;
            run.info.failed += u32::from(failed);
        }
        let rollup = self.rollups.remove(&p.key).unwrap_or_default();
        let end = p.end_ns();
        if let Some(run) = self.rollups.get_mut(&run_key) {
            run.add_rollup(p.start_ns, end, &rollup);
        }
        let allocation = (self.allocations.remove(&p.key)).map(|a| asked_within(&info, a));
        Finished::Task {
            proc: p,
            run: run_key,
            info,
            usage: Box::new(Totals { rollup, allocation }),
        }
    }

    /// The run's span, after its engine span if the engine had helpers.
    pub(super) fn run_done(&mut self, root: Proc, mut info: RunInfo) -> Vec<Finished> {
        let mut out = Vec::new();
        // The engine may have learnt the run's names from its records since it started.
        if let Some(run) = self.runs.get(&root.key)
            && run.info.engine != super::engines::EngineKind::RULE
        {
            info.name = run.adapter.pipeline_name();
            info.label = run.adapter.run_label();
        }
        if let Some(run) = self.runs.get_mut(&root.key) {
            info.progress = run.adapter.progress();
            info.engine_version = run.adapter.engine_version();
            info.log = run.adapter.run_log();
        }
        if let Some(run) = self.runs.get_mut(&root.key)
            && run.helpers.info.helpers > 0
        {
            let mut helpers = std::mem::take(&mut run.helpers);
            // A helper may outlive the engine by a moment (cwltool's JavaScript server ends
            // when cwltool does): the engine span stays within the run's.
            let (start, end) = (root.start_ns, root.end_ns().max(root.start_ns));
            helpers.info.start_ns = helpers.info.start_ns.clamp(start, end);
            helpers.info.end_ns = helpers.info.end_ns.clamp(helpers.info.start_ns, end);
            let usage = Totals {
                rollup: helpers.rollup,
                ..Default::default()
            };
            out.push(Finished::Engine {
                run: root.key,
                info: helpers.info,
                usage: Box::new(usage),
            });
        }
        // A part of a run rooted on another node is a task of it: what it asked for counts.
        let part = (self.runs.get(&root.key))
            .and_then(|r| r.adapter.multi_node()?.shared())
            .and_then(|s| s.part);
        let allocation = self.allocations.remove(&root.key);
        let usage = Totals {
            rollup: self.rollups.remove(&root.key).unwrap_or_default(),
            allocation: match &part {
                Some(task) => allocation.map(|a| asked_within(task, a)),
                None => allocation,
            },
        };
        out.push(Finished::Run {
            proc: root,
            info,
            usage: Box::new(usage),
        });
        out
    }

    /// An engine helper ended: its time and usage go to the run's engine span.
    pub(super) fn count_helper(&mut self, run: ProcKey, p: &Proc) {
        let Some(run) = self.runs.get_mut(&run) else {
            return;
        };
        let h = &mut run.helpers;
        let end = p.end_ns();
        h.rollup.add_process(
            p.start_ns,
            end,
            &naming::proc_tool_name(p),
            p.usage.as_ref(),
        );
        if h.info.helpers == 0 || p.start_ns < h.info.start_ns {
            h.info.start_ns = p.start_ns;
        }
        h.info.end_ns = h.info.end_ns.max(end);
        h.info.helpers += 1;
        h.info.failed += u32::from(p.exit.as_ref().is_some_and(|e| e.code() != 0));
        h.info.engine = run.info.engine;
    }

    /// Counts an ended process in its task's roll-up, or its run's once the task is done.
    pub(super) fn account(&mut self, p: &Proc, m: Membership) {
        let target = m
            .task
            .filter(|t| self.rollups.contains_key(t))
            .unwrap_or(m.run);
        if let Some(r) = self.rollups.get_mut(&target) {
            let (end, tool) = (p.end_ns(), naming::proc_tool_name(p));
            r.add_process(p.start_ns, end, &tool, p.usage.as_ref());
            r.oom_kills += u64::from(p.oom.is_some());
            if let Some(f) = &p.files {
                r.files.merge(f, self.files_per_task);
            }
            if let Some(c) = &p.container {
                (r.containers).add(c, p.start_ns, end, &tool, p.usage.as_ref());
            }
        }
    }
}

/// What the engine asked for, where it said, within what the kernel allows.
fn asked_within(info: &TaskInfo, a: Allocation) -> Allocation {
    let memory_limit = match (info.memory_bytes, a.memory_limit) {
        (Some(asked), Some(limit)) => Some(asked.min(limit)),
        (asked, limit) => asked.or(limit),
    };
    match info.threads {
        Some(t) if f64::from(t) <= a.cpus => Allocation {
            cpus: f64::from(t),
            source: "engine.threads",
            memory_limit,
            ..a
        },
        _ => Allocation { memory_limit, ..a },
    }
}
