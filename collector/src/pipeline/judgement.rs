//! The loop's third stage: each finished record judged as it leaves the attribution
//! (its stalls and quiet time, a task against its usual, a finished run into its
//! pipeline's history), and each run's findings put on its run span as its spans leave the
//! trace budget ([`crate::judging`]). Span building is handed the record with its
//! [`Judgement`].
use pipetrace_core::attribution::{Attributor, Finished};
use pipetrace_core::diagnosis::{History, Job, Judgement, watch::StallWatch};
use pipetrace_core::port::SharedHost;
use pipetrace_export::signals::ReadySpan;

pub(crate) struct Judge {
    host: SharedHost,
    history: History,
    /// Running tasks and tools that stopped making progress.
    stalls: StallWatch,
    /// Each run's findings, judged when its run span leaves.
    runs: crate::judging::Judging,
}

impl Judge {
    /// `cfg`: where task history lives, how it is judged, and when a task is stalled.
    pub(crate) fn new(host: SharedHost, cfg: &pipetrace_config::Diagnosis) -> Self {
        let store = pipetrace_host::store::DirStore::under(cfg.state_dir.as_deref(), "history");
        Self {
            host,
            history: History::new(cfg, store),
            stalls: StallWatch::new(cfg.stall_after),
            runs: Default::default(),
        }
    }

    pub(super) fn stalls(&self) -> &StallWatch {
        &self.stalls
    }

    pub(super) fn stalls_mut(&mut self) -> &mut StallWatch {
        &mut self.stalls
    }

    pub(super) fn history(&mut self) -> &mut History {
        &mut self.history
    }

    /// The stalls seen and the history, both at once (the live view asks each per task).
    pub(super) fn parts(&mut self) -> (&StallWatch, &mut History) {
        (&self.stalls, &mut self.history)
    }

    /// `f` judged; `trace_id`: its run's trace id, as the history keeps runs by it. A run
    /// whose engine's records said no version is given the one installed beside it.
    pub(super) fn of(&mut self, f: &mut Finished, attr: &Attributor, trace_id: &str) -> Judgement {
        let mut judged = Judgement::default();
        match f {
            Finished::Task {
                proc,
                usage,
                info,
                run,
            } => {
                let end = proc.end_ns();
                (judged.stalls, judged.quiet_ns) = self.stalls.take_task(proc.key, end);
                let pipeline = attr.run_key(*run).unwrap_or_default();
                let r = &usage.rollup;
                let job = Job {
                    pipeline,
                    task: &info.name,
                    run: trace_id,
                    wall_s: end.saturating_sub(proc.start_ns) as f64 / 1e9,
                    cpu_s: r.totals.cpu_ns() as f64 / 1e9,
                    peak_bytes: r.peak_memory(),
                    // An unknown status (polling /proc) counts as success, as elsewhere.
                    succeeded: (proc.exit.as_ref()).is_some_and(|e| info.succeeded(e)),
                };
                // A pipeline with no key of its own (a Slurm job) has no history.
                if !pipeline.is_empty() {
                    judged.usual = self.history.judge(&job);
                }
            }
            Finished::Run { proc, info, usage } => {
                if info.engine_version.is_none() {
                    info.engine_version = self.engine_version(proc, info);
                }
                let exited_0 = (proc.exit.as_ref()).is_none_or(|e| !e.known() || e.code() == 0);
                let r = &usage.rollup;
                self.history.record_run(&Job {
                    pipeline: &info.key,
                    task: "",
                    run: trace_id,
                    wall_s: proc.end_ns().saturating_sub(proc.start_ns) as f64 / 1e9,
                    cpu_s: r.totals.cpu_ns() as f64 / 1e9,
                    peak_bytes: r.peak_memory(),
                    succeeded: exited_0 && info.failed == 0,
                });
                // The expected end of later runs, on disk at once.
                self.history.save();
            }
            Finished::Engine { .. } => {}
            Finished::Tool { proc, .. } => {
                judged.stalls = self.stalls.take_tool(proc.key, proc.end_ns());
            }
        }
        judged
    }

    /// The version of a run's engine written in Python, from its installed distribution
    /// beside the run's program or interpreter.
    fn engine_version(
        &self,
        p: &pipetrace_core::tree::Proc,
        info: &pipetrace_core::attribution::RunInfo,
    ) -> Option<String> {
        let package = pipetrace_core::attribution::engines::python_package(info.engine)?;
        let image = p.image.as_ref()?;
        self.host.engine_version(&image.path, &image.argv, package)
    }

    /// Spans on their way out: each run span among them leaves with its run's findings.
    /// Returns each run judged: its pipeline and the kinds of its findings.
    pub(super) fn runs(&mut self, spans: &mut [ReadySpan]) -> Vec<(String, Vec<&'static str>)> {
        self.runs.pass(spans)
    }

    /// Past the memory limit: what waits here for its run span, dropped (counted).
    pub(super) fn relieve_memory(&mut self) -> u64 {
        self.runs.relieve_memory()
    }

    /// History to disk, at the end.
    pub(super) fn save(&mut self) {
        self.history.save();
    }
}
