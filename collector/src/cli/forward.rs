//! Passes Ctrl-C, SIGTERM, SIGHUP and SIGQUIT on to the wrapped command.
use signal_hook::{
    consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM},
    iterator::{SignalsInfo, exfiltrator::WithOrigin},
    low_level::siginfo::Cause,
};

/// Until the process exits, every such signal pipetrace receives goes to `pid`, except the
/// terminal's own Ctrl-C / Ctrl-\: the terminal sends those to the command too.
pub fn forward_to(pid: u32) -> std::io::Result<()> {
    let mut signals = SignalsInfo::<WithOrigin>::new([SIGINT, SIGTERM, SIGHUP, SIGQUIT])?;
    std::thread::Builder::new()
        .name("signal-forward".into())
        .spawn(move || {
            for info in signals.forever() {
                let from_tty =
                    info.cause == Cause::Kernel && matches!(info.signal, SIGINT | SIGQUIT);
                if !from_tty {
                    // SAFETY: kill(2) with a pid we started; a gone pid only returns ESRCH.
                    unsafe { libc::kill(pid as libc::pid_t, info.signal) };
                }
            }
        })?;
    Ok(())
}
