//! Reads of `task_struct` / `mm_struct` fields at offsets resolved from the running kernel's BTF.
use aya_ebpf::helpers::{
    bpf_probe_read_kernel,
    generated::{bpf_get_current_task, bpf_get_current_task_btf},
};
use pipetrace_probes_common::IO_COUNTERS;

pub type Task = *const u8;

/// How a probe reads kernel memory. A BTF tracepoint's task arguments, the current task as
/// `bpf_get_current_task_btf` gives it, and the pointers read from their fields carry
/// their BTF type: the verifier checks each load against it and the JIT guards it, so a
/// plain load does (`Direct`, about 50 ns less per field than the helper on this VM: the
/// exit probe reads some forty). Anything else goes through `bpf_probe_read_kernel`
/// (`Probed`): classic tracepoints, and pointers of no BTF type.
pub trait Access: Copy {
    fn at<T: Copy>(base: *const u8, offset: u32) -> Option<T>;
}

#[derive(Clone, Copy)]
pub struct Probed;

#[derive(Clone, Copy)]
pub struct Direct;

impl Access for Probed {
    #[inline(always)]
    fn at<T: Copy>(base: *const u8, offset: u32) -> Option<T> {
        if base.is_null() {
            return None;
        }
        unsafe { bpf_probe_read_kernel(base.add(offset as usize) as *const T).ok() }
    }
}

impl Access for Direct {
    #[inline(always)]
    fn at<T: Copy>(base: *const u8, offset: u32) -> Option<T> {
        if base.is_null() {
            return None;
        }
        // SAFETY: the verifier accepts this load only where `base` has a BTF type with a
        // field of T's size at `offset`; a fault in it reads 0.
        Some(unsafe { core::ptr::read_volatile(base.add(offset as usize) as *const T) })
    }
}

#[inline(always)]
pub fn current() -> Task {
    unsafe { bpf_get_current_task() as Task }
}

/// The current task with its BTF type, for [`Direct`] reads (Linux 5.11+).
#[inline(always)]
pub fn current_btf() -> Task {
    unsafe { bpf_get_current_task_btf() as Task }
}

/// `start_boottime` of the task's thread-group leader: the process's start.
#[inline(always)]
pub fn process_start<A: Access>(task: Task, o: &pipetrace_probes_common::KernelOffsets) -> u64 {
    let leader: Task = A::at(task, o.task_group_leader).unwrap_or(task);
    A::at(leader, o.task_start_boottime).unwrap_or(0)
}

/// A field that may be missing on this kernel: 0 where its offset is ABSENT.
#[inline(always)]
pub fn field<A: Access>(base: *const u8, offset: u32) -> u64 {
    if offset == pipetrace_probes_common::ABSENT {
        return 0;
    }
    A::at::<u64>(base, offset).unwrap_or(0)
}

/// This thread's own I/O counters.
#[inline(always)]
pub fn io<A: Access>(task: Task, o: &pipetrace_probes_common::KernelOffsets) -> [u64; IO_COUNTERS] {
    let mut out = [0u64; IO_COUNTERS];
    for (i, v) in out.iter_mut().enumerate() {
        *v = field::<A>(task, o.task_io[i]);
    }
    out
}

/// This thread's own delay counters: run-queue delay and memory waits (swap-in, reclaim,
/// thrashing, compaction). Block-I/O waits are measured by the `iowait` probes instead.
#[inline(always)]
pub fn thread_delays<A: Access>(
    task: Task,
    o: &pipetrace_probes_common::KernelOffsets,
) -> (u64, u64) {
    let run = field::<A>(task, o.task_run_delay);
    if o.task_delays == pipetrace_probes_common::ABSENT {
        return (run, 0);
    }
    let d: *const u8 = A::at(task, o.task_delays).unwrap_or(core::ptr::null());
    let mem = field::<A>(d, o.delay_swapin)
        + field::<A>(d, o.delay_freepages)
        + field::<A>(d, o.delay_thrashing)
        + field::<A>(d, o.delay_compact);
    (run, mem)
}

/// `MM_FILEPAGES`, `MM_ANONPAGES`, `MM_SHMEMPAGES`: the rss counters by their index (swap
/// entries, 2, are not resident).
pub const RSS_FILE: u32 = 0;
pub const RSS_ANON: u32 = 1;
pub const RSS_SHMEM: u32 = 3;

/// An rss counter of `mm` in pages, as `get_mm_counter` reads it (the counter's approximate
/// value, negative as 0); 0 where the kernel lays the counters out otherwise.
#[inline(always)]
pub fn rss_pages<A: Access>(
    mm: *const u8,
    o: &pipetrace_probes_common::KernelOffsets,
    counter: u32,
) -> u64 {
    use pipetrace_probes_common::ABSENT;
    if o.mm_rss_stat == ABSENT || o.percpu_counter_count == ABSENT {
        return 0;
    }
    let off = o.mm_rss_stat + counter * o.percpu_counter_size + o.percpu_counter_count;
    A::at::<i64>(mm, off).unwrap_or(0).max(0) as u64
}
