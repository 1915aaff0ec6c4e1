//! tracepoint/sched/sched_process_exec: the new program's file name and argv, copied in the
//! kernel at exec so that a process living 1 ms keeps its command line.
use aya_ebpf::{
    EbpfContext,
    helpers::{
        bpf_get_current_uid_gid, bpf_probe_read_kernel_str_bytes,
        generated::{bpf_get_current_cgroup_id, bpf_ktime_get_boot_ns, bpf_probe_read_user},
    },
    macros::tracepoint,
    programs::TracePointContext,
};
use pipetrace_probes_common::{
    ARGV_LEN, EXEC_ARGV_TRUNCATED, EXEC_ARGV_UNREADABLE, EventHeader, ExecEvent, KIND_EXEC,
};

use crate::{emit, task};

/// `__data_loc char[] filename` sits at offset 8 of the record (stable tracepoint ABI).
const FILENAME_LOC: usize = 8;

#[tracepoint(category = "sched", name = "sched_process_exec")]
pub fn sched_process_exec(ctx: TracePointContext) -> u32 {
    let Some(o) = emit::offsets() else { return 0 };
    let me = task::current();
    let tgid: i32 = task::read(me, o.task_tgid).unwrap_or(0);
    let Some(mut entry) = emit::EVENTS.reserve::<ExecEvent>(0) else {
        emit::count_lost(KIND_EXEC);
        return 0;
    };
    let ev = entry.as_mut_ptr();
    unsafe {
        (*ev).header = EventHeader {
            kind: KIND_EXEC,
            tgid: tgid as u32,
            time_ns: bpf_ktime_get_boot_ns(),
            start_ns: task::process_start(me, &o),
        };
        let parent: task::Task = task::read(me, o.task_real_parent).unwrap_or(core::ptr::null());
        (*ev).ppid = task::read::<i32>(parent, o.task_tgid).unwrap_or(0) as u32;
        (*ev).uid = bpf_get_current_uid_gid() as u32;
        (*ev).cgroup_id = bpf_get_current_cgroup_id();
        (*ev).flags = 0;
        (*ev).argv_len = 0;
        (*ev).filename[0] = 0;

        let loc: u32 = ctx.read_at(FILENAME_LOC).unwrap_or(0);
        let name = (ctx.as_ptr() as *const u8).add((loc & 0xffff) as usize);
        let _ = bpf_probe_read_kernel_str_bytes(name, &mut (*ev).filename);

        let mm: *const u8 = task::read(me, o.task_mm).unwrap_or(core::ptr::null());
        let start: u64 = task::read(mm, o.mm_arg_start).unwrap_or(0);
        let end: u64 = task::read(mm, o.mm_arg_end).unwrap_or(0);
        if start != 0 && end > start {
            let mut len = end - start;
            if len > (ARGV_LEN - 1) as u64 {
                (*ev).flags |= EXEC_ARGV_TRUNCATED;
                len = (ARGV_LEN - 1) as u64;
            }
            // The mask restates the bound for the verifier; it never changes `len`.
            let len = (len as u32) & (ARGV_LEN as u32 - 1);
            let dst = (*ev).argv.as_mut_ptr() as *mut core::ffi::c_void;
            if bpf_probe_read_user(dst, len, start as *const core::ffi::c_void) == 0 {
                (*ev).argv_len = len;
            } else {
                (*ev).flags |= EXEC_ARGV_UNREADABLE;
            }
        } else {
            (*ev).flags |= EXEC_ARGV_UNREADABLE;
        }
    }
    entry.submit(emit::submit_flags());
    0
}
