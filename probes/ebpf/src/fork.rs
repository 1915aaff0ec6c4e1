//! tp_btf/sched_process_fork: a new process (not a thread) and who created it.
use aya_ebpf::{
    helpers::{bpf_get_current_comm, generated::bpf_ktime_get_boot_ns},
    macros::btf_tracepoint,
    programs::BtfTracePointContext,
};
use pipetrace_probes_common::{EventHeader, ForkEvent, KIND_FORK};

use crate::{
    emit,
    task::{self, Access, Direct},
};

#[btf_tracepoint(function = "sched_process_fork")]
pub fn sched_process_fork(ctx: BtfTracePointContext) -> u32 {
    let Some(o) = emit::offsets() else { return 0 };
    let parent: task::Task = ctx.arg(0);
    let child: task::Task = ctx.arg(1);
    let pid: i32 = Direct::at(child, o.task_pid).unwrap_or(0);
    let tgid: i32 = Direct::at(child, o.task_tgid).unwrap_or(0);
    // A new thread shares its creator's tgid: it is not a process.
    if pid == 0 || pid != tgid {
        return 0;
    }
    // A process whose reap-time report the kernel skipped left its accumulator behind:
    // the pid's new process must not inherit it.
    emit::forget_accumulator(tgid as u32);
    let Some(mut entry) = emit::EVENTS.reserve::<ForkEvent>(0) else {
        emit::count_lost(KIND_FORK);
        return 0;
    };
    let ev = entry.as_mut_ptr();
    unsafe {
        (*ev).header = EventHeader {
            kind: KIND_FORK,
            tgid: tgid as u32,
            time_ns: bpf_ktime_get_boot_ns(),
            start_ns: Direct::at(child, o.task_start_boottime).unwrap_or(0),
        };
        (*ev).parent_tgid = Direct::at::<i32>(parent, o.task_tgid).unwrap_or(0) as u32;
        (*ev).parent_tid = Direct::at::<i32>(parent, o.task_pid).unwrap_or(0) as u32;
        (*ev).parent_start_ns = task::process_start::<Direct>(parent, o);
        (*ev).comm = bpf_get_current_comm().unwrap_or([0; 16]);
    }
    entry.submit(emit::submit_flags());
    0
}
