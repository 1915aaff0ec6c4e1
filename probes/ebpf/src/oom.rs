//! tp_btf/mark_victim: the OOM killer chose a process, with its memory at that moment,
//! read as the tracepoint's own record does (`mm->total_vm` and the rss counters'
//! approximate values). A BTF tracepoint rather than the classic one: detaching a classic
//! tracepoint waits for the kernel's RCU grace periods, tens of ms at every end of
//! `pipetrace run`.
use aya_ebpf::{
    helpers::generated::bpf_ktime_get_boot_ns, macros::btf_tracepoint,
    programs::BtfTracePointContext,
};
use pipetrace_probes_common::{EventHeader, KIND_OOM, OomEvent};

use crate::{
    emit,
    task::{self, Access, Probed},
};

/// `mark_victim(struct task_struct *task, uid_t uid)`; on older kernels
/// `mark_victim(int pid)`, with no memory to read.
#[btf_tracepoint(function = "mark_victim")]
pub fn mark_victim(ctx: BtfTracePointContext) -> u32 {
    let Some(o) = emit::offsets() else { return 0 };
    let (victim, tgid): (task::Task, u32) = match o.oom_task_arg != 0 {
        true => {
            let t: task::Task = ctx.arg(0);
            (t, Probed::at(t, o.task_tgid).unwrap_or(0))
        }
        false => (core::ptr::null(), ctx.arg::<u64>(0) as u32),
    };
    let mm: *const u8 = Probed::at(victim, o.task_mm).unwrap_or(core::ptr::null());
    let Some(mut entry) = emit::EVENTS.reserve::<OomEvent>(0) else {
        emit::count_lost(KIND_OOM);
        return 0;
    };
    let ev = entry.as_mut_ptr();
    unsafe {
        (*ev).header = EventHeader {
            kind: KIND_OOM,
            tgid,
            time_ns: bpf_ktime_get_boot_ns(),
            start_ns: 0,
        };
        (*ev).total_vm = task::field::<Probed>(mm, o.mm_total_vm);
        (*ev).anon_rss = task::rss_pages::<Probed>(mm, o, task::RSS_ANON);
        (*ev).file_rss = task::rss_pages::<Probed>(mm, o, task::RSS_FILE);
        (*ev).shmem_rss = task::rss_pages::<Probed>(mm, o, task::RSS_SHMEM);
    }
    // Rare and urgent: wake the reader now.
    entry.submit(aya_ebpf::bindings::BPF_RB_FORCE_WAKEUP as u64);
    0
}
