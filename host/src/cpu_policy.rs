//! pipetrace's own CPU policy (`cpu_policy`). Under SCHED_BATCH its threads keep their fair
//! share, but their wake-ups (the ring buffer's, a batch timer's) never preempt the process
//! running on that CPU: an observer's work can wait a few milliseconds, the pipeline's
//! should not. The command `pipetrace run` starts gets the policy pipetrace started with.
use std::sync::OnceLock;

use pipetrace_config::CpuPolicy;

/// The policy pipetrace started with, when it changed its own: what its command gets back.
static STARTED_WITH: OnceLock<libc::c_int> = OnceLock::new();

/// Applies `policy` to the calling thread, and so to every thread it starts afterwards:
/// called before the async runtime starts. A policy chosen from outside (`chrt`, a
/// systemd `CPUSchedulingPolicy=`) is kept.
pub fn apply(policy: CpuPolicy) -> std::io::Result<()> {
    let current = current()?;
    if policy == CpuPolicy::Normal || current != libc::SCHED_OTHER {
        return Ok(());
    }
    set(libc::SCHED_BATCH)?;
    let _ = STARTED_WITH.set(current);
    Ok(())
}

/// Puts the calling thread back to the policy pipetrace started with. Only a syscall:
/// safe between fork and exec.
pub fn restore() -> std::io::Result<()> {
    match STARTED_WITH.get() {
        Some(&policy) => set(policy),
        None => Ok(()),
    }
}

fn set(policy: libc::c_int) -> std::io::Result<()> {
    // Priority 0 is the only one SCHED_OTHER and SCHED_BATCH take.
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: valid pointer to a sched_param that outlives the call.
    match unsafe { libc::sched_setscheduler(0, policy, &param) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// The calling thread's policy.
fn current() -> std::io::Result<libc::c_int> {
    // SAFETY: a syscall on the calling thread.
    match unsafe { libc::sched_getscheduler(0) } {
        p if p < 0 => Err(std::io::Error::last_os_error()),
        p => Ok(p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // One test: the policy is the thread's, and STARTED_WITH is the process's.
    #[test]
    fn batch_applies_to_threads_started_after_and_restores_to_the_start() {
        let normal = std::thread::spawn(|| {
            apply(CpuPolicy::Normal).unwrap();
            current().unwrap()
        });
        assert_eq!(normal.join().unwrap(), libc::SCHED_OTHER);
        let seen = std::thread::spawn(|| {
            apply(CpuPolicy::Batch).unwrap();
            let child = std::thread::spawn(current).join().unwrap().unwrap();
            let before = current().unwrap();
            restore().unwrap();
            (before, child, current().unwrap())
        });
        let (before, child, after) = seen.join().unwrap();
        assert_eq!(before, libc::SCHED_BATCH);
        assert_eq!(child, libc::SCHED_BATCH, "threads started after inherit it");
        assert_eq!(after, libc::SCHED_OTHER);
    }
}
