//! tp_btf/sched_process_free: a process's leader is freed after its last thread was reaped.
//! Only then has `signal_struct` summed every thread's CPU, faults, switches and I/O: the
//! same totals wait4 reports, however short the process lived.
use aya_ebpf::{
    helpers::generated::bpf_ktime_get_boot_ns, macros::btf_tracepoint,
    programs::BtfTracePointContext,
};
use pipetrace_probes_common::{EventHeader, KIND_USAGE, UsageEvent};

use crate::{
    emit,
    task::{self, Access, Direct},
    usage,
};

#[btf_tracepoint(function = "sched_process_free")]
pub fn sched_process_free(ctx: BtfTracePointContext) -> u32 {
    let Some(o) = emit::offsets() else { return 0 };
    let t: task::Task = ctx.arg(0);
    let pid: i32 = Direct::at(t, o.task_pid).unwrap_or(0);
    let tgid: i32 = Direct::at(t, o.task_tgid).unwrap_or(0);
    // Other threads summed theirs into ACC when they exited.
    if pid == 0 || pid != tgid {
        return 0;
    }
    let tgid = tgid as u32;
    let Some(mut entry) = emit::EVENTS.reserve::<UsageEvent>(0) else {
        emit::count_lost(KIND_USAGE);
        emit::forget_accumulator(tgid);
        return 0;
    };
    let ev = entry.as_mut_ptr();
    unsafe {
        (*ev).header = EventHeader {
            kind: KIND_USAGE,
            tgid,
            time_ns: bpf_ktime_get_boot_ns(),
            start_ns: Direct::at(t, o.task_start_boottime).unwrap_or(0),
        };
        // Every thread is reaped: signal_struct holds them all.
        usage::fill::<Direct>(core::ptr::addr_of_mut!((*ev).figures), tgid, t, o);
    }
    emit::forget_accumulator(tgid);
    entry.submit(emit::submit_flags());
    0
}
