//! tp_btf/sched_switch and tp_btf/sched_wakeup: block-I/O waits, measured here rather than
//! read from delay accounting (and, at sched_switch, a dead thread's last leave: see
//! final_cpu.rs). On Linux 6.12+ the scheduler may finish a sleeping task's
//! dequeue later, in another task's context, and delay accounting then starts that wait on
//! the wrong task: under CPU contention a process's block-I/O wait reads as counted from
//! boot, or from an earlier wait. A thread's wait here runs from its switch out in I/O wait
//! to its wakeup, both seen on the thread itself.
use aya_ebpf::{
    bindings::BPF_ANY, helpers::generated::bpf_ktime_get_boot_ns, macros::btf_tracepoint,
    macros::map, maps::HashMap, programs::BtfTracePointContext,
};
use pipetrace_probes_common::{ABSENT, ACC_ENTRIES, KernelOffsets, LOST_ACCUMULATOR};

use crate::{
    emit, final_cpu,
    task::{self, Access, Direct},
};

/// When each thread now asleep in I/O wait went to sleep, by thread id.
#[map(name = "IO_WAIT")]
pub static IO_WAIT: HashMap<u32, u64> = HashMap::with_max_entries(ACC_ENTRIES, 0);

/// `task_struct.in_iowait`: set from `io_schedule_prepare` until the task runs again.
#[inline(always)]
fn in_iowait(t: task::Task, o: &KernelOffsets) -> bool {
    if o.task_in_iowait == ABSENT {
        return false;
    }
    let byte: u8 = Direct::at(t, o.task_in_iowait).unwrap_or(0);
    (byte >> (o.task_in_iowait_bit & 7)) & 1 == 1
}

/// `sched_switch(bool preempt, task_struct *prev, task_struct *next, unsigned int prev_state)`
#[btf_tracepoint(function = "sched_switch")]
pub fn sched_switch(ctx: BtfTracePointContext) -> u32 {
    // Preempted, or not leaving the CPU asleep: no wait starts.
    let preempt: u64 = ctx.arg(0);
    let prev_state: u64 = ctx.arg(3);
    if preempt as u8 != 0 || prev_state as u32 == 0 {
        return 0;
    }
    let Some(o) = emit::offsets() else { return 0 };
    let prev: task::Task = ctx.arg(1);
    if prev_state as u32 & final_cpu::TASK_DEAD != 0 {
        final_cpu::left(prev, o);
        return 0;
    }
    if !in_iowait(prev, o) {
        return 0;
    }
    let tid: u32 = Direct::at(prev, o.task_pid).unwrap_or(0);
    let now = unsafe { bpf_ktime_get_boot_ns() };
    if tid != 0 && IO_WAIT.insert(&tid, &now, BPF_ANY as u64).is_err() {
        emit::count_lost(LOST_ACCUMULATOR);
    }
    0
}

/// `sched_wakeup(task_struct *p)`: the thread is runnable again; its wait, if any, is over.
#[btf_tracepoint(function = "sched_wakeup")]
pub fn sched_wakeup(ctx: BtfTracePointContext) -> u32 {
    let Some(o) = emit::offsets() else { return 0 };
    let p: task::Task = ctx.arg(0);
    if !in_iowait(p, o) {
        return 0;
    }
    let tid: u32 = Direct::at(p, o.task_pid).unwrap_or(0);
    let Some(start) = (unsafe { IO_WAIT.get(&tid) }).copied() else {
        return 0;
    };
    let _ = IO_WAIT.remove(&tid);
    let now = unsafe { bpf_ktime_get_boot_ns() };
    let tgid: u32 = Direct::at(p, o.task_tgid).unwrap_or(0);
    if tgid != 0
        && let Some(acc) = emit::accumulator(tgid)
    {
        emit::add(
            unsafe { core::ptr::addr_of_mut!((*acc).blkio_delay_ns) },
            now.saturating_sub(start),
        );
    }
    0
}

/// A thread that exits forgets any start its wakeup never ended (its id may be reused).
#[inline(always)]
pub fn forget(tid: u32) {
    let _ = IO_WAIT.remove(&tid);
}
