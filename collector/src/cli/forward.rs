//! Passes Ctrl-C, SIGTERM, SIGHUP and SIGQUIT on to the wrapped command.
use std::sync::{
    Arc,
    atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering},
};

use signal_hook::{
    consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM},
    iterator::{SignalsInfo, exfiltrator::WithOrigin},
    low_level::siginfo::Cause,
};

/// Installed before the command starts, so that no signal finds pipetrace without its
/// handlers (the default action would end pipetrace and orphan the command).
pub struct Forwarder {
    pid: Arc<AtomicU32>,
    /// A signal that came before the command had a pid: delivered once it has one.
    early: Arc<AtomicI32>,
    /// Any of these signals came: pipetrace was told to stop.
    stop: Arc<AtomicBool>,
}

fn send(pid: u32, sig: i32) {
    // SAFETY: kill(2) with a pid we started; a gone pid only returns ESRCH.
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

impl Forwarder {
    /// Every such signal pipetrace receives goes to the command, except the terminal's own
    /// Ctrl-C / Ctrl-\: the terminal sends those to the command too.
    pub(crate) fn install() -> std::io::Result<Self> {
        let mut signals = SignalsInfo::<WithOrigin>::new([SIGINT, SIGTERM, SIGHUP, SIGQUIT])?;
        let pid = Arc::new(AtomicU32::new(0));
        let early = Arc::new(AtomicI32::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (p, e, st) = (pid.clone(), early.clone(), stop.clone());
        std::thread::Builder::new()
            .name("signal-forward".into())
            .spawn(move || {
                for info in signals.forever() {
                    st.store(true, Ordering::SeqCst);
                    let from_tty =
                        info.cause == Cause::Kernel && matches!(info.signal, SIGINT | SIGQUIT);
                    match p.load(Ordering::SeqCst) {
                        _ if from_tty => {}
                        0 => e.store(info.signal, Ordering::SeqCst),
                        u32::MAX => {}
                        pid => send(pid, info.signal),
                    }
                }
            })?;
        Ok(Self { pid, early, stop })
    }

    /// The command was reaped: its pid may go to another process, so nothing more is sent
    /// to it (a later signal still marks the stop).
    pub(crate) fn reaped(&self) {
        self.pid.store(u32::MAX, Ordering::SeqCst);
    }

    /// Whether pipetrace was told to stop (SIGINT, SIGTERM, SIGHUP or SIGQUIT came).
    pub(crate) fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// The command started: forward to it from now on, and pass on what came before.
    pub(crate) fn started(&self, pid: u32) {
        self.pid.store(pid, Ordering::SeqCst);
        match self.early.swap(0, Ordering::SeqCst) {
            0 => {}
            sig => send(pid, sig),
        }
    }
}
