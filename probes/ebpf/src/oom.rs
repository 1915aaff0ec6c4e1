//! tracepoint/oom/mark_victim: the OOM killer chose a process, with its memory at that moment.
use aya_ebpf::{
    helpers::generated::bpf_ktime_get_boot_ns, macros::tracepoint, programs::TracePointContext,
};
use pipetrace_probes_common::{ABSENT, EventHeader, KIND_OOM, OomEvent};

use crate::emit;

#[inline(always)]
fn at(ctx: &TracePointContext, off: u32) -> u64 {
    if off == ABSENT {
        return 0;
    }
    unsafe { ctx.read_at::<u64>(off as usize) }.unwrap_or(0)
}

#[tracepoint(category = "oom", name = "mark_victim")]
pub fn mark_victim(ctx: TracePointContext) -> u32 {
    let Some(o) = emit::offsets() else { return 0 };
    if o.tp_oom_pid == ABSENT {
        return 0;
    }
    let pid: i32 = unsafe { ctx.read_at(o.tp_oom_pid as usize) }.unwrap_or(0);
    let Some(mut entry) = emit::EVENTS.reserve::<OomEvent>(0) else {
        emit::count_lost(KIND_OOM);
        return 0;
    };
    let ev = entry.as_mut_ptr();
    unsafe {
        (*ev).header = EventHeader {
            kind: KIND_OOM,
            tgid: pid as u32,
            time_ns: bpf_ktime_get_boot_ns(),
            start_ns: 0,
        };
        (*ev).total_vm = at(&ctx, o.tp_oom_total_vm);
        (*ev).anon_rss = at(&ctx, o.tp_oom_anon_rss);
        (*ev).file_rss = at(&ctx, o.tp_oom_file_rss);
        (*ev).shmem_rss = at(&ctx, o.tp_oom_shmem_rss);
    }
    // Rare and urgent: wake the reader now.
    entry.submit(aya_ebpf::bindings::BPF_RB_FORCE_WAKEUP as u64);
    0
}
