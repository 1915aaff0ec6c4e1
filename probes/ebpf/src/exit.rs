//! sched_process_exit: the last thread of a process ends, with its wait status; any other
//! thread leaves its per-thread delays in the process's accumulator. Where the tracepoint
//! says whether the thread group died (`group_dead`: newer kernels have it in the classic
//! record and the BTF prototype alike), the BTF tracepoint; else the classic one, where the
//! leader's exit stands for the process's.
use aya_ebpf::{
    helpers::{bpf_get_current_comm, bpf_get_current_pid_tgid, generated::bpf_ktime_get_boot_ns},
    macros::{btf_tracepoint, tracepoint},
    programs::{BtfTracePointContext, TracePointContext},
};
use pipetrace_probes_common::{EventHeader, ExitEvent, KIND_EXIT};

use crate::{
    emit, iowait,
    task::{self, Access, Direct, Probed, field},
    usage,
};

/// The image's high-water mark as the kernel computes it for maxrss: the larger of the
/// recorded mark and the resident pages now. 0 when the mm is already gone.
#[inline(always)]
fn image_peak<A: Access>(me: task::Task, o: &pipetrace_probes_common::KernelOffsets) -> u64 {
    use pipetrace_probes_common::ABSENT;
    if o.mm_hiwater_rss == ABSENT || o.mm_rss_stat == ABSENT || o.percpu_counter_count == ABSENT {
        return 0;
    }
    let mm: *const u8 = A::at(me, o.task_mm).unwrap_or(core::ptr::null());
    if mm.is_null() {
        return 0;
    }
    let rss = [task::RSS_FILE, task::RSS_ANON, task::RSS_SHMEM]
        .map(|c| task::rss_pages::<A>(mm, o, c))
        .iter()
        .sum::<u64>();
    field::<A>(mm, o.mm_hiwater_rss).max(rss)
}

#[tracepoint(category = "sched", name = "sched_process_exit")]
pub fn sched_process_exit(ctx: TracePointContext) -> u32 {
    let Some(o) = emit::offsets() else { return 0 };
    let group_dead = (o.exit_tp_group_dead != 0)
        .then(|| unsafe { ctx.read_at::<u8>(o.exit_tp_group_dead as usize) }.unwrap_or(0) != 0);
    exited::<Probed>(task::current(), o, group_dead);
    0
}

/// `sched_process_exit(struct task_struct *p, bool group_dead)`.
#[btf_tracepoint(function = "sched_process_exit")]
pub fn sched_process_exit_btf(ctx: BtfTracePointContext) -> u32 {
    let Some(o) = emit::offsets() else { return 0 };
    let group_dead: u64 = ctx.arg(1);
    exited::<Direct>(task::current_btf(), o, Some(group_dead & 0xff != 0));
    0
}

/// The current thread `me` exits; `group_dead`: whether it is the process's last, where
/// the kernel says.
#[inline(always)]
fn exited<A: Access>(
    me: task::Task,
    o: &pipetrace_probes_common::KernelOffsets,
    group_dead: Option<bool>,
) {
    let pid_tgid = bpf_get_current_pid_tgid();
    let (tid, tgid) = (pid_tgid as u32, (pid_tgid >> 32) as u32);
    let last = group_dead.unwrap_or(tid == tgid);
    iowait::forget(tid);
    if tid != tgid {
        // Per-thread counters die with the thread: keep them for the leader's free.
        let (run, mem) = task::thread_delays::<A>(me, o);
        let io = task::io::<A>(me, o);
        if let Some(acc) = emit::accumulator(tgid) {
            unsafe {
                emit::add(core::ptr::addr_of_mut!((*acc).run_delay_ns), run);
                emit::add(core::ptr::addr_of_mut!((*acc).mem_delay_ns), mem);
                emit::add(core::ptr::addr_of_mut!((*acc).threads_exited), 1);
                for (i, v) in io.iter().enumerate() {
                    emit::add(core::ptr::addr_of_mut!((*acc).io[i]), *v);
                }
            }
        }
    }
    if !last {
        return;
    }
    let Some(mut entry) = emit::EVENTS.reserve::<ExitEvent>(0) else {
        emit::count_lost(KIND_EXIT);
        return;
    };
    let ev = entry.as_mut_ptr();
    unsafe {
        (*ev).header = EventHeader {
            kind: KIND_EXIT,
            tgid,
            time_ns: bpf_ktime_get_boot_ns(),
            start_ns: task::process_start::<A>(me, o),
        };
        (*ev).exit_code = A::at::<i32>(me, o.task_exit_code).unwrap_or(0) as u32;
        (*ev)._pad = 0;
        (*ev).comm = bpf_get_current_comm().unwrap_or([0; 16]);
        (*ev).image_peak_pages = image_peak::<A>(me, o);
        // Threads not reaped yet have not summed theirs into signal_struct: this one, and
        // the leader when it ended first and waits as a zombie.
        let leader: task::Task = A::at(me, o.task_group_leader).unwrap_or(me);
        let f = core::ptr::addr_of_mut!((*ev).figures);
        usage::fill::<A>(f, tgid, leader, o);
        usage::add_thread::<A>(f, me, o);
        // Told by the ids, not by comparing the pointers: the verifier refuses the
        // arithmetic the compiler makes of a pointer comparison.
        if tid != tgid {
            usage::add_thread::<A>(f, leader, o);
        }
    }
    entry.submit(emit::submit_flags());
}
