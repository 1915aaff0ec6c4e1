//! What runs now: the live view's snapshot of each run, each run's progress, and `run
//! started` / `task started` spans, so the terminal and the backend see work before it ends.
use std::collections::{HashMap, HashSet};

use super::Pipeline;
use pipetrace_core::attribution::EntityRef;
use pipetrace_core::event::ProcKey;
use pipetrace_core::tree::Proc;
use pipetrace_export::signals::metrics::progress::Progress;

impl Pipeline {
    /// Runs and tasks found running since the last sample, exported at once as `run
    /// started` / `task started` spans (a task by the name the sample gave it), under
    /// their trace's budget.
    pub(super) fn announce_started(&mut self) {
        let tree = self.life.tree();
        self.announced.retain(|k| tree.get(k).is_some());
        let attr = self.attr.get();
        let named: HashSet<ProcKey> = attr.named_runs().map(|(k, _)| k).collect();
        let tasks: Vec<(ProcKey, ProcKey, String)> = (self.ticks.labelled())
            .filter(|(t, run, _)| !self.announced.contains(t) && named.contains(run))
            .map(|(t, r, n)| (t, r, n.to_string()))
            .collect();
        // A run is announced with its first task: by then it is in the trace it keeps (an
        // engine's own, which it joins as its first task starts).
        let runs: Vec<(ProcKey, String)> = (attr.named_runs())
            .filter(|(k, _)| !self.announced.contains(k))
            .filter(|(k, _)| tasks.iter().any(|(_, r, _)| r == k))
            .map(|(k, n)| (k, n.to_string()))
            .collect();
        let running = |p: &&Proc| p.exit.is_none();
        let mut out = Vec::new();
        for (run, name) in runs {
            let key = attr.run_key(run).filter(|k| !k.is_empty());
            let usual = key.and_then(|k| self.judge.history().usual_run(k));
            if let Some(p) = tree.get(&run).filter(running) {
                let s = self
                    .build
                    .started(run, EntityRef::Run(run), p, &name, usual);
                self.budget.push_span(s, false, &mut out);
                self.announced.insert(run);
            }
        }
        for (task, run, name) in tasks {
            if let Some(p) = tree.get(&task).filter(running) {
                let s = self
                    .build
                    .started(run, EntityRef::Task(task), p, &name, None);
                self.budget.push_span(s, false, &mut out);
                self.announced.insert(task);
            }
        }
        self.send(out);
    }

    /// How far each run is whose engine says: done, in all, running now.
    pub(super) fn progress(&mut self) -> Vec<Progress> {
        let (running, _) = self.judge.stalls().counts();
        (self.attr.get_mut().progress().into_iter())
            .map(|(_, pipeline, p)| {
                let seen = (running.iter())
                    .filter(|((name, _), _)| *name == pipeline)
                    .map(|(_, n)| *n as u32)
                    .sum();
                Progress {
                    pipeline,
                    done: p.done,
                    total: p.total,
                    running: p.running().unwrap_or(seen),
                    waiting: p.queued,
                }
            })
            .collect()
    }

    /// What runs now, for the live view: each run's running tasks read from /proc.
    pub(crate) fn live_now(
        &mut self,
        watcher: &mut crate::live_view::Watcher,
    ) -> Vec<crate::live_view::Now> {
        let now = self.host.boottime_ns();
        self.attr.get_mut().name_running(self.life.tree(), now);
        let attr = self.attr.get();
        let mut keys: HashMap<ProcKey, String> = HashMap::new();
        for (_, m) in attr.members() {
            keys.entry(m.run)
                .or_insert_with(|| attr.run_key(m.run).unwrap_or_default().to_string());
        }
        let (stalls, history) = self.judge.parts();
        let mut judge = |run, task, name: &str| {
            let key = keys.get(&run).filter(|k| !k.is_empty());
            let usual = key.and_then(|k| history.usual(k, name));
            (stalls.task_stalled(task), usual)
        };
        let host = &*self.host;
        let read = |pid| host.live(pid);
        let ticks = &self.ticks;
        let gpu = |pid| ticks.gpu_now(pid);
        let tree = self.life.tree();
        let mut runs = watcher.look(attr, tree, now, &read, &gpu, &mut judge);
        // Where the engine says how many tasks there are, its counts stand.
        let progress = self.attr.get_mut().progress();
        for r in &mut runs {
            if let Some((_, _, p)) = progress.iter().find(|p| p.1 == r.run) {
                r.engine_says(p);
            }
        }
        // Runs are listed by name; their pipelines' history by key.
        let attr = self.attr.get();
        let named: HashMap<&str, &str> = (attr.named_runs())
            .filter_map(|(k, n)| Some((n, keys.get(&k)?.as_str())))
            .filter(|(_, k)| !k.is_empty())
            .collect();
        for r in &mut runs {
            let usual = (named.get(r.run.as_str())).and_then(|k| self.judge.history().usual_run(k));
            r.expect_end(usual);
        }
        runs
    }
}
