//! tp_btf/signal_generate: a fatal signal was delivered. It fires in the sender's context,
//! so the sender is the current task (for a fault, the faulting process itself).
use aya_ebpf::{
    helpers::{bpf_get_current_comm, bpf_get_current_pid_tgid, generated::bpf_ktime_get_boot_ns},
    macros::btf_tracepoint,
    programs::BtfTracePointContext,
};
use pipetrace_probes_common::{ABSENT, EventHeader, FATAL_SIGNALS, KIND_SIGNAL, SignalEvent};

use crate::{
    emit,
    task::{self, Access, Probed},
};

/// `TRACE_SIGNAL_DELIVERED`: the signal was queued (not ignored, not already pending).
const DELIVERED: i32 = 0;
/// `SEND_SIG_NOINFO` and `SEND_SIG_PRIV`: no siginfo, a signal from user space (`SI_USER`)
/// or from the kernel (`SI_KERNEL`), as the classic record says them.
const NOINFO: u64 = 0;
const PRIV: u64 = 1;
const SI_USER: i32 = 0;
const SI_KERNEL: i32 = 0x80;

/// `signal_generate(int sig, struct kernel_siginfo *info, struct task_struct *task,
/// int group, int result)`.
#[btf_tracepoint(function = "signal_generate")]
pub fn signal_generate(ctx: BtfTracePointContext) -> u32 {
    let Some(o) = emit::offsets() else { return 0 };
    let sig: u64 = ctx.arg(0);
    let sig = sig as i32;
    // SIGCHLD at every exit and the like: only signals that end a process by default.
    if !(1..64).contains(&sig) || FATAL_SIGNALS & (1u64 << sig) == 0 {
        return 0;
    }
    let result: u64 = ctx.arg(4);
    if result as i32 != DELIVERED {
        return 0;
    }
    let info: u64 = ctx.arg(1);
    let code = match info {
        NOINFO => SI_USER,
        PRIV => SI_KERNEL,
        _ if o.siginfo_code == ABSENT => SI_USER,
        _ => Probed::at::<i32>(info as *const u8, o.siginfo_code).unwrap_or(SI_USER),
    };
    let target: task::Task = ctx.arg(2);
    let Some(mut entry) = emit::EVENTS.reserve::<SignalEvent>(0) else {
        emit::count_lost(KIND_SIGNAL);
        return 0;
    };
    let ev = entry.as_mut_ptr();
    unsafe {
        (*ev).header = EventHeader {
            kind: KIND_SIGNAL,
            tgid: Probed::at::<i32>(target, o.task_pid).unwrap_or(0) as u32,
            time_ns: bpf_ktime_get_boot_ns(),
            start_ns: 0,
        };
        (*ev).sig = sig as u32;
        (*ev).code = code;
        (*ev).sender_tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
        (*ev)._pad = 0;
        (*ev).sender_comm = bpf_get_current_comm().unwrap_or([0; 16]);
    }
    entry.submit(emit::submit_flags());
    0
}
