//! A dead thread's last switch-out (called from tp_btf/sched_switch): once no thread of its
//! process lives, the process's CPU figures and context switches as they finally are. The
//! exit record's figures are read at the exit tracepoint, before the kernel unmaps the memory
//! and closes the files, and a thread's runtime is booked only when it leaves its CPU or a
//! tick comes: a process that frees a large heap spends milliseconds there, and is preempted
//! there under load.
use aya_ebpf::helpers::generated::bpf_ktime_get_boot_ns;
use pipetrace_probes_common::{ABSENT, EventHeader, FinalCpuEvent, KIND_FINAL_CPU, KernelOffsets};

use crate::{
    emit,
    task::{Access, Direct, Task, field},
};

/// `TASK_DEAD` in `task_struct.__state`, as sched_switch reports `prev_state`.
pub const TASK_DEAD: u32 = 0x80;
/// Tries at reading `signal_struct`'s sums while no release is writing them: a parent woken
/// by this exit reaps it on another CPU as it leaves, and the write is short.
const TRIES: usize = 16;

/// `signal_struct`'s sums (utime, stime, runtime, nvcsw, nivcsw) and its threads not yet
/// released, read between two equal even values of `stats_lock`'s sequence (the kernel sums
/// a released thread and counts it down in one write section); None if a release kept
/// writing.
#[inline(always)]
fn sums(sig: *const u8, o: &KernelOffsets) -> Option<(i32, [u64; 5])> {
    for _ in 0..TRIES {
        let before: u32 = Direct::at(sig, o.sig_stats_seq)?;
        if before & 1 == 1 {
            continue;
        }
        let threads: i32 = Direct::at(sig, o.sig_nr_threads)?;
        let cpu = [
            field::<Direct>(sig, o.sig_utime),
            field::<Direct>(sig, o.sig_stime),
            field::<Direct>(sig, o.sig_sum_sched_runtime),
            field::<Direct>(sig, o.sig_nvcsw),
            field::<Direct>(sig, o.sig_nivcsw),
        ];
        if Direct::at::<u32>(sig, o.sig_stats_seq)? == before {
            return Some((threads, cpu));
        }
    }
    None
}

/// `prev` leaves its CPU dead: reports its process's CPU if every thread has exited.
#[inline(always)]
pub fn left(prev: Task, o: &KernelOffsets) {
    if [o.sig_live, o.task_signal, o.sig_stats_seq, o.sig_nr_threads].contains(&ABSENT) {
        return;
    }
    let sig: *const u8 = Direct::at(prev, o.task_signal).unwrap_or(core::ptr::null());
    if sig.is_null() || Direct::at::<i32>(sig, o.sig_live).unwrap_or(1) != 0 {
        return;
    }
    let tgid: u32 = Direct::at(prev, o.task_tgid).unwrap_or(0);
    let leader: Task = Direct::at(prev, o.task_group_leader).unwrap_or(prev);
    if tgid == 0 {
        return;
    }
    // Exited threads other than the leader were summed as they were released, before
    // their last switch; the leader is summed once its parent reaps it, which can come
    // before this switch: then no thread is left unreleased and its own are in the sums.
    // Sums that a release kept writing (its CPU held by the hypervisor mid-write) give way
    // to the leader's own figures: all of a single-threaded process's CPU, and user space
    // takes them only if they exceed what the exit record read.
    let (summed, [ut, st, rt, vcs, ivcs]) = match sums(sig, o) {
        Some((unreleased, cpu)) => (leader_summed(tgid, unreleased, cpu[2]), cpu),
        None => (false, [0; 5]),
    };
    let Some(mut entry) = emit::EVENTS.reserve::<FinalCpuEvent>(0) else {
        emit::count_lost(KIND_FINAL_CPU);
        return;
    };
    let ev = entry.as_mut_ptr();
    let mine = |offset| {
        if summed {
            0
        } else {
            field::<Direct>(leader, offset)
        }
    };
    unsafe {
        (*ev).header = EventHeader {
            kind: KIND_FINAL_CPU,
            tgid,
            time_ns: bpf_ktime_get_boot_ns(),
            start_ns: Direct::at(leader, o.task_start_boottime).unwrap_or(0),
        };
        (*ev).utime_ns = ut + mine(o.task_utime);
        (*ev).stime_ns = st + mine(o.task_stime);
        (*ev).runtime_ns = rt + mine(o.task_sum_exec_runtime);
        (*ev).prev_utime_ns = field::<Direct>(sig, o.sig_prev_utime);
        (*ev).prev_stime_ns = field::<Direct>(sig, o.sig_prev_stime);
        (*ev).nvcsw = vcs + mine(o.task_nvcsw);
        (*ev).nivcsw = ivcs + mine(o.task_nivcsw);
    }
    entry.submit(emit::submit_flags());
}

/// Whether the sums hold the leader's own figures. A process none of whose other threads
/// exited sums only its leader, so a non-zero summed runtime says so by itself, whatever the
/// thread count read beside it says (a storm once showed a process's CPU as nearly twice
/// wait4's, as if counted both ways). Otherwise the count decides.
#[inline(always)]
fn leader_summed(tgid: u32, unreleased: i32, summed_runtime: u64) -> bool {
    // SAFETY: a shared read of a map value; the counter is only ever added to.
    let others = unsafe { emit::ACC.get(&tgid) }.map_or(0, |acc| acc.threads_exited);
    if others == 0 {
        summed_runtime > 0
    } else {
        unreleased == 0
    }
}
