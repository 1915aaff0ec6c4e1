//! tracepoint/signal/signal_generate: a fatal signal was delivered. It fires in the sender's
//! context, so the sender is the current task (for a fault, the faulting process itself).
use aya_ebpf::{
    helpers::{bpf_get_current_comm, bpf_get_current_pid_tgid, generated::bpf_ktime_get_boot_ns},
    macros::tracepoint,
    programs::TracePointContext,
};
use pipetrace_probes_common::{ABSENT, EventHeader, FATAL_SIGNALS, KIND_SIGNAL, SignalEvent};

use crate::emit;

/// `TRACE_SIGNAL_DELIVERED`: the signal was queued (not ignored, not already pending).
const DELIVERED: i32 = 0;

#[tracepoint(category = "signal", name = "signal_generate")]
pub fn signal_generate(ctx: TracePointContext) -> u32 {
    let Some(o) = emit::offsets() else { return 0 };
    if o.tp_signal_sig == ABSENT || o.tp_signal_pid == ABSENT {
        return 0;
    }
    let sig: i32 = unsafe { ctx.read_at(o.tp_signal_sig as usize) }.unwrap_or(0);
    // SIGCHLD at every exit and the like: only signals that end a process by default.
    if !(1..64).contains(&sig) || FATAL_SIGNALS & (1u64 << sig) == 0 {
        return 0;
    }
    if o.tp_signal_result != ABSENT {
        let result: i32 = unsafe { ctx.read_at(o.tp_signal_result as usize) }.unwrap_or(0);
        if result != DELIVERED {
            return 0;
        }
    }
    let target: i32 = unsafe { ctx.read_at(o.tp_signal_pid as usize) }.unwrap_or(0);
    let Some(mut entry) = emit::EVENTS.reserve::<SignalEvent>(0) else {
        emit::count_lost(KIND_SIGNAL);
        return 0;
    };
    let ev = entry.as_mut_ptr();
    unsafe {
        (*ev).header = EventHeader {
            kind: KIND_SIGNAL,
            tgid: target as u32,
            time_ns: bpf_ktime_get_boot_ns(),
            start_ns: 0,
        };
        (*ev).sig = sig as u32;
        (*ev).code = if o.tp_signal_code != ABSENT {
            ctx.read_at(o.tp_signal_code as usize).unwrap_or(0)
        } else {
            0
        };
        (*ev).sender_tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
        (*ev)._pad = 0;
        (*ev).sender_comm = bpf_get_current_comm().unwrap_or([0; 16]);
    }
    entry.submit(emit::submit_flags());
    0
}
