//! What a session is set up with beyond its defaults: each `with_*` is one part of the
//! configuration, applied where the command builds the session.
use std::time::Duration;

use super::Session;
use pipetrace_core::diagnosis::History;

impl Session {
    /// Judges whether the node is idle at every metrics tick (`pipetrace.host.idle`): node
    /// agents only.
    pub fn with_host_idle(mut self, cfg: &pipetrace_config::Host) -> Self {
        self.idle = Some(pipetrace_host::IdleClock::new(cfg, self.host.ticks_per_s()));
        self
    }

    /// Watches only the processes in `cgroup` and below it (`probes.scope_cgroup`).
    pub(crate) fn with_scope(mut self, cgroup: Option<String>) -> Self {
        self.scope = crate::scope::Scope::new(cgroup);
        self
    }

    /// Which opened files are kept, and how many listed (`files.*`).
    pub(crate) fn with_files(mut self, files: pipetrace_core::files::Filter) -> Self {
        self.attr.files_per_task = files.max_per_task;
        self.files = files;
        self
    }

    /// Where task history lives, how it is judged, and when a task is stalled.
    pub fn with_diagnosis(mut self, cfg: &pipetrace_config::Diagnosis) -> Self {
        let store = pipetrace_host::store::DirStore::under(cfg.state_dir.as_deref(), "history");
        self.history = History::new(cfg, store);
        self.stalls = pipetrace_core::diagnosis::watch::StallWatch::new(cfg.stall_after);
        self
    }

    /// Events come from polling /proc: every process is marked so.
    pub(crate) fn with_procfs(mut self, procfs: bool) -> Self {
        self.procfs = procfs;
        self
    }

    /// How long an exited process waits for the kernel's usage report.
    pub(crate) fn with_usage_wait(mut self, wait: Duration) -> Self {
        self.awaiting.set_wait(wait);
        self
    }

    /// Each run's trace at most `max_bytes` of OTLP protobuf (0: no limit), spans shorter
    /// than `fold_under` folding with their repeats past half of it.
    pub fn with_trace_budget(mut self, max_bytes: u64, fold_under: Duration) -> Self {
        self.folder = pipetrace_export::signals::fold::Folder::new(max_bytes, fold_under);
        self
    }
}
