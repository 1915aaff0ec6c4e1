//! Reads of `task_struct` / `mm_struct` fields at offsets resolved from the running kernel's BTF.
use aya_ebpf::helpers::{bpf_probe_read_kernel, generated::bpf_get_current_task};

pub type Task = *const u8;

#[inline(always)]
pub fn current() -> Task {
    unsafe { bpf_get_current_task() as Task }
}

#[inline(always)]
pub fn read<T: Copy>(base: *const u8, offset: u32) -> Option<T> {
    if base.is_null() {
        return None;
    }
    unsafe { bpf_probe_read_kernel(base.add(offset as usize) as *const T).ok() }
}

/// `start_boottime` of the task's thread-group leader: the process's start.
#[inline(always)]
pub fn process_start(task: Task, o: &pipetrace_probes_common::KernelOffsets) -> u64 {
    let leader: Task = read(task, o.task_group_leader).unwrap_or(task);
    read(leader, o.task_start_boottime).unwrap_or(0)
}
