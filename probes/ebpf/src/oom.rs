//! tp_btf/mark_victim: the OOM killer chose a process, with its memory at that moment,
//! read as the tracepoint's own record does (`mm->total_vm` and the rss counters'
//! approximate values). A BTF tracepoint rather than the classic one: detaching a classic
//! tracepoint waits for the kernel's RCU grace periods, tens of ms at every end of
//! `pipetrace run`.
use aya_ebpf::{
    helpers::{bpf_get_current_comm, bpf_get_current_pid_tgid, generated::bpf_ktime_get_boot_ns},
    macros::btf_tracepoint,
    programs::BtfTracePointContext,
};
use pipetrace_probes_common::{ABSENT, EventHeader, KIND_OOM, KernelOffsets, OomEvent};

use crate::{
    emit,
    task::{self, Access, Probed},
};

/// How many memory cgroups up from the victim's own are read for a lower limit: more than
/// any job scheduler, container runtime or systemd slice nests.
const LEVELS: usize = 16;

/// The least `max` of the victim's memory cgroup's page counter and its parents', in pages
/// (0: not known). A limit above the victim's own cgroup binds it as well.
#[inline(always)]
fn memory_limit(victim: task::Task, o: &KernelOffsets) -> u64 {
    if o.task_cgroups == ABSENT {
        return 0;
    }
    let css_set: *const u8 = Probed::at(victim, o.task_cgroups).unwrap_or(core::ptr::null());
    let css: *const u8 = Probed::at(css_set, o.css_set_memory).unwrap_or(core::ptr::null());
    if css.is_null() {
        return 0;
    }
    // css is a field of the mem_cgroup; the page counter another.
    let base = (css as usize).wrapping_sub(o.memcg_css as usize);
    let mut counter = base.wrapping_add(o.memcg_memory as usize) as *const u8;
    let mut least = u64::MAX;
    for _ in 0..LEVELS {
        if counter.is_null() {
            break;
        }
        if let Some(max) = Probed::at::<u64>(counter, o.page_counter_max) {
            least = least.min(max);
        }
        counter = Probed::at(counter, o.page_counter_parent).unwrap_or(core::ptr::null());
    }
    if least == u64::MAX { 0 } else { least }
}

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
        (*ev).limit_pages = memory_limit(victim, o);
        // The OOM killer runs in the task whose allocation failed: the one that set it off.
        (*ev).trigger_tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
        (*ev).trigger_comm = bpf_get_current_comm().unwrap_or_default();
    }
    // Rare and urgent: wake the reader now.
    entry.submit(aya_ebpf::bindings::BPF_RB_FORCE_WAKEUP as u64);
    0
}
