//! What runs now: the live view's snapshot of each run, and `run started` / `task started`
//! spans, so the terminal and the backend see work before it ends.
use std::collections::HashMap;

use super::Session;
use pipetrace_core::attribution::EntityRef;
use pipetrace_core::event::ProcKey;
use pipetrace_core::tree::Proc;

impl Session {
    /// Runs and tasks found running since the last sample, exported at once as `run
    /// started` / `task started` spans (a task by the name the sample gave it).
    pub(super) fn announce_started(&mut self) {
        let tree = &self.tree;
        self.announced.retain(|k| tree.get(k).is_some());
        let tasks: Vec<(ProcKey, ProcKey, String)> = (self.metrics.labelled())
            .filter(|(t, run, _)| !self.announced.contains(t) && !self.announced_later(*run))
            .map(|(t, r, n)| (t, r, n.to_string()))
            .collect();
        // A run is announced with its first task: by then it is in the trace it keeps (an
        // engine's own, which it joins as its first task starts).
        let runs: Vec<(ProcKey, String)> = (self.attr.named_runs())
            .filter(|(k, _)| !self.announced.contains(k))
            .filter(|(k, _)| tasks.iter().any(|(_, r, _)| r == k))
            .map(|(k, n)| (k, n.to_string()))
            .collect();
        let running = |p: &&Proc| p.exit.is_none();
        for (run, name) in runs {
            let key = self.attr.run_key(run).filter(|k| !k.is_empty());
            let usual = key.and_then(|k| self.history.usual_run(k));
            if let Some(p) = self.tree.get(&run).filter(running) {
                let s = self
                    .builder
                    .started(run, EntityRef::Run(run), p, &name, usual);
                self.outputs.spans(vec![s]);
                self.announced.insert(run);
            }
        }
        for (task, run, name) in tasks {
            if let Some(p) = self.tree.get(&task).filter(running) {
                let s = self
                    .builder
                    .started(run, EntityRef::Task(task), p, &name, None);
                self.outputs.spans(vec![s]);
                self.announced.insert(task);
            }
        }
    }

    /// Whether run `run` is not to be announced yet (its identity is still to come).
    fn announced_later(&self, run: ProcKey) -> bool {
        !self.attr.named_runs().any(|(k, _)| k == run)
    }

    /// A finished run into its pipeline's history (the expected end of later runs), then
    /// the history to disk.
    pub(super) fn record_run(
        &mut self,
        proc: &Proc,
        info: &pipetrace_core::attribution::RunInfo,
        usage: &pipetrace_core::attribution::Totals,
    ) {
        let run_id = self.builder.trace_id(proc.key).to_string();
        let exited_0 = (proc.exit.as_ref()).is_none_or(|e| !e.known() || e.code() == 0);
        let r = &usage.rollup;
        self.history.record_run(&pipetrace_core::diagnosis::Job {
            pipeline: &info.key,
            task: "",
            run: &run_id,
            wall_s: proc.end_ns().saturating_sub(proc.start_ns) as f64 / 1e9,
            cpu_s: r.totals.cpu_ns() as f64 / 1e9,
            peak_bytes: r.peak_memory(),
            succeeded: exited_0 && info.failed == 0,
        });
        self.history.save();
    }

    /// What runs now, for the live view: each run's running tasks read from /proc.
    pub(crate) fn live_now(
        &mut self,
        watcher: &mut crate::live_view::Watcher,
    ) -> Vec<crate::live_view::Now> {
        let mut keys: HashMap<ProcKey, String> = HashMap::new();
        for (_, m) in self.attr.members() {
            let attr = &self.attr;
            keys.entry(m.run)
                .or_insert_with(|| attr.run_key(m.run).unwrap_or_default().to_string());
        }
        let (stalls, history) = (&self.stalls, &mut self.history);
        let mut judge = |run, task, name: &str| {
            let key = keys.get(&run).filter(|k| !k.is_empty());
            let usual = key.and_then(|k| history.usual(k, name));
            (stalls.task_stalled(task), usual)
        };
        let now = self.host.boottime_ns();
        self.attr.name_running(&self.tree, now);
        let host = &*self.host;
        let read = |pid| host.live(pid);
        let gpus = self.gpu.as_ref();
        let gpu = |pid| gpus.and_then(|g| g.now(pid));
        let mut runs = watcher.look(&self.attr, &self.tree, now, &read, &gpu, &mut judge);
        // Where the engine says how many tasks there are, its counts stand.
        let progress = self.attr.progress();
        for r in &mut runs {
            if let Some((_, _, p)) = progress.iter().find(|p| p.1 == r.run) {
                r.engine_says(p);
            }
        }
        // Runs are listed by name; their pipelines' history by key.
        let named: HashMap<&str, &str> = (self.attr.named_runs())
            .filter_map(|(k, n)| Some((n, keys.get(&k)?.as_str())))
            .filter(|(_, k)| !k.is_empty())
            .collect();
        for r in &mut runs {
            let usual = named
                .get(r.run.as_str())
                .and_then(|k| self.history.usual_run(k));
            r.expect_end(usual);
        }
        runs
    }
}

/// The version of a run's engine written in Python, from its installed distribution beside
/// the run's program or interpreter (its records said none).
pub(super) fn engine_version(
    p: &Proc,
    info: &pipetrace_core::attribution::RunInfo,
) -> Option<String> {
    let package = pipetrace_core::attribution::engines::python_package(info.engine)?;
    let image = p.image.as_ref()?;
    pipetrace_host::python_dist::engine_version(&image.path, &image.argv, package)
}
