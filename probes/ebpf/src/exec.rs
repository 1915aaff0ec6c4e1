//! tp_btf/sched_process_exec: the new program's file name and argv, copied in the kernel at
//! exec so that a process living 1 ms keeps its command line. Built in a per-CPU scratch
//! buffer; the ring buffer gets only the bytes it holds. A BTF tracepoint, not the classic
//! one: no record to format before the probe runs, and detaching it waits for nothing.
use aya_ebpf::{
    helpers::{
        bpf_get_current_uid_gid, bpf_probe_read_kernel_str_bytes,
        generated::{bpf_get_current_cgroup_id, bpf_ktime_get_boot_ns, bpf_probe_read_user},
    },
    macros::{btf_tracepoint, map},
    maps::PerCpuArray,
    programs::BtfTracePointContext,
};
use pipetrace_probes_common::{
    ARGV_LEN, EXEC_ARGV_TRUNCATED, EXEC_ARGV_UNREADABLE, EventHeader, ExecEvent, ExecHead,
    KIND_EXEC, PATH_LEN,
};

use crate::{
    emit,
    task::{self, Access, Direct},
};

/// Where an exec's record is built: too large for the BPF stack.
#[map(name = "EXEC_SCRATCH")]
static SCRATCH: PerCpuArray<ExecEvent> = PerCpuArray::with_max_entries(1, 0);

/// `sched_process_exec(struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)`.
#[btf_tracepoint(function = "sched_process_exec")]
pub fn sched_process_exec(ctx: BtfTracePointContext) -> u32 {
    let Some(o) = emit::offsets() else { return 0 };
    let Some(ev) = SCRATCH.get_ptr_mut(0) else {
        return 0;
    };
    let me: task::Task = ctx.arg(0);
    let bprm: *const u8 = ctx.arg(2);
    let tgid: i32 = Direct::at(me, o.task_tgid).unwrap_or(0);
    let parent: task::Task = Direct::at(me, o.task_real_parent).unwrap_or(core::ptr::null());
    // SAFETY: `ev` is this CPU's scratch entry; programs on one CPU do not nest here.
    let len = unsafe {
        (*ev).head = ExecHead {
            header: EventHeader {
                kind: KIND_EXEC,
                tgid: tgid as u32,
                time_ns: bpf_ktime_get_boot_ns(),
                start_ns: task::process_start::<Direct>(me, o),
            },
            ppid: Direct::at::<i32>(parent, o.task_tgid).unwrap_or(0) as u32,
            uid: bpf_get_current_uid_gid() as u32,
            cgroup_id: bpf_get_current_cgroup_id(),
            ..Default::default()
        };
        read_argv(ev, me, o);
        read_filename(ev, bprm, o);
        let used = (*ev).head.argv_len as usize + (*ev).head.filename_len as usize;
        size_of::<ExecHead>() + used
    };
    // Restated for the verifier: never more than the scratch entry holds.
    let len = len.min(size_of::<ExecEvent>());
    // SAFETY: `len` bytes of the scratch entry, which is `size_of::<ExecEvent>()` long.
    let record = unsafe { core::slice::from_raw_parts(ev as *const u8, len) };
    if emit::EVENTS
        .output::<[u8]>(record, emit::submit_flags())
        .is_err()
    {
        emit::count_lost(KIND_EXEC);
    }
    0
}

/// argv from the new image's memory, at the start of `data`.
///
/// # Safety
/// `ev` points to a scratch entry.
#[inline(always)]
unsafe fn read_argv(
    ev: *mut ExecEvent,
    me: task::Task,
    o: &pipetrace_probes_common::KernelOffsets,
) {
    let mm: *const u8 = Direct::at(me, o.task_mm).unwrap_or(core::ptr::null());
    let start: u64 = Direct::at(mm, o.mm_arg_start).unwrap_or(0);
    let end: u64 = Direct::at(mm, o.mm_arg_end).unwrap_or(0);
    if start == 0 || end <= start {
        unsafe { (*ev).head.flags |= EXEC_ARGV_UNREADABLE };
        return;
    }
    let mut len = end - start;
    if len > (ARGV_LEN - 1) as u64 {
        unsafe { (*ev).head.flags |= EXEC_ARGV_TRUNCATED };
        len = (ARGV_LEN - 1) as u64;
    }
    // The mask restates the bound for the verifier; it never changes `len`.
    let len = (len as u32) & (ARGV_LEN as u32 - 1);
    unsafe {
        let dst = (*ev).data.as_mut_ptr() as *mut core::ffi::c_void;
        if bpf_probe_read_user(dst, len, start as *const core::ffi::c_void) == 0 {
            (*ev).head.argv_len = len;
        } else {
            (*ev).head.flags |= EXEC_ARGV_UNREADABLE;
        }
    }
}

/// The file name as execve was given it (`bprm->filename`), right after argv (without
/// its NUL).
///
/// # Safety
/// `ev` points to a scratch entry whose `argv_len` is set.
#[inline(always)]
unsafe fn read_filename(
    ev: *mut ExecEvent,
    bprm: *const u8,
    o: &pipetrace_probes_common::KernelOffsets,
) {
    if o.binprm_filename == pipetrace_probes_common::ABSENT {
        return;
    }
    let name: *const u8 = Direct::at(bprm, o.binprm_filename).unwrap_or(core::ptr::null());
    if name.is_null() {
        return;
    }
    unsafe {
        // argv_len < ARGV_LEN: the name's PATH_LEN bytes always fit after it.
        let at = ((*ev).head.argv_len as usize) & (ARGV_LEN - 1);
        let dst = core::slice::from_raw_parts_mut((*ev).data.as_mut_ptr().add(at), PATH_LEN);
        if let Ok(s) = bpf_probe_read_kernel_str_bytes(name, dst) {
            (*ev).head.filename_len = (s.len() as u32) & (PATH_LEN as u32 - 1);
        }
    }
}
