//! When `pipetrace run` is told to stop: the command's whole process tree stops with it (a
//! shell's background job, a job an engine started), so that nothing keeps running with
//! parent pid 1 unseen and every process that ran is exported.
use std::time::Duration;

use pipetrace_core::event::ProcKey;

/// How long the run's processes get to end after SIGTERM before SIGKILL, unless
/// `--stop-grace` says otherwise (its help shows this value).
pub const TERM_GRACE: Duration = Duration::from_secs(5);

/// The longest `--stop-grace`: an engine cancelling its cluster jobs takes minutes; a stop
/// that waits longer than an hour is one nobody asked for.
pub const MAX_GRACE: Duration = Duration::from_secs(60 * 60);

/// The command's own process, told to stop: SIGKILL once the grace has passed since the stop
/// was first seen.
pub struct RootStop {
    pid: u32,
    grace: Duration,
    since: Option<std::time::Instant>,
    killed: bool,
}

impl RootStop {
    pub(crate) fn new(pid: u32, grace: Duration) -> Self {
        Self {
            pid,
            grace,
            since: None,
            killed: false,
        }
    }

    pub(crate) fn killed(&self) -> bool {
        self.killed
    }

    /// A check (every 100 ms): sends SIGKILL when the stop asked has waited out its grace.
    pub(crate) fn check(&mut self, stop_requested: bool) {
        if !stop_requested || self.killed {
            return;
        }
        let since = *self.since.get_or_insert_with(std::time::Instant::now);
        if since.elapsed() < self.grace {
            return;
        }
        self.killed = true;
        errln!(
            "pipetrace: the command did not end within {} of the stop; sending it SIGKILL",
            humantime::format_duration(self.grace)
        );
        // SAFETY: kill(2) on the command's pid, not yet reaped (the loop reaps it and stops
        // checking), so still the command's.
        unsafe { libc::kill(self.pid as libc::pid_t, libc::SIGKILL) };
    }
}

/// Sends `sig` to each process that is still the one the tree knows (same pid and start
/// time: a pid the kernel gave to someone else meanwhile is left alone). Returns how many
/// were signalled.
pub(crate) fn signal_all(keys: &[ProcKey], sig: i32) -> usize {
    let mut sent = 0;
    for k in keys {
        let same = pipetrace_host::snapshot(k.pid).is_some_and(|s| s.start_ticks == k.start_ticks);
        // SAFETY: kill(2) on a pid checked just above to be the process the run started.
        if same && unsafe { libc::kill(k.pid as libc::pid_t, sig) } == 0 {
            sent += 1;
        }
    }
    sent
}

/// How the run's leftover processes were dealt with, for the closing lines.
#[derive(Debug, Default)]
pub struct Outcome {
    pub terminated: usize,
    pub killed: usize,
    pub left_running: Vec<u32>,
    /// The grace the SIGTERMs had before SIGKILL.
    pub grace: Duration,
}

impl Outcome {
    pub(crate) fn describe(&self) -> Option<String> {
        if !self.left_running.is_empty() {
            let pids: Vec<String> = self.left_running.iter().map(u32::to_string).collect();
            return Some(format!(
                "pipetrace: stopped; {} processes of the run left running as asked \
                 (--keep-running; pids {}): not exported, as they have not ended",
                pids.len(),
                pids.join(" ")
            ));
        }
        (self.terminated + self.killed > 0).then(|| {
            format!(
                "pipetrace: stopped; the run's remaining processes were stopped with it and \
                 exported ({} sent SIGTERM; {} still running {} later sent SIGKILL)",
                self.terminated,
                self.killed,
                humantime::format_duration(self.grace)
            )
        })
    }
}
