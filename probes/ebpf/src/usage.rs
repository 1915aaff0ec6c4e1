//! A process's figures as `signal_struct` sums them, shared by the reap-time report (free)
//! and the exit-time one that stands in when the kernel skips the reap-time program.
use pipetrace_probes_common::{Figures, KernelOffsets};

use crate::{
    emit,
    task::{self, Access, Task, field},
};

/// Fills `f` for process `tgid` led by `leader`, from `signal_struct`'s sums: the threads
/// the kernel has released. A thread not released yet is added by [`add_thread`].
///
/// # Safety
/// `f` points into a reserved ring-buffer record.
#[inline(always)]
pub unsafe fn fill<A: Access>(f: *mut Figures, tgid: u32, leader: Task, o: &KernelOffsets) {
    let sig: *const u8 = A::at(leader, o.task_signal).unwrap_or(core::ptr::null());
    let (run, mem) = task::thread_delays::<A>(leader, o);
    unsafe {
        (*f).utime_ns = field::<A>(sig, o.sig_utime);
        (*f).stime_ns = field::<A>(sig, o.sig_stime);
        (*f).runtime_ns = field::<A>(sig, o.sig_sum_sched_runtime);
        (*f).prev_utime_ns = field::<A>(sig, o.sig_prev_utime);
        (*f).prev_stime_ns = field::<A>(sig, o.sig_prev_stime);
        (*f).maxrss_pages = field::<A>(sig, o.sig_maxrss);
        (*f).min_flt = field::<A>(sig, o.sig_min_flt);
        (*f).maj_flt = field::<A>(sig, o.sig_maj_flt);
        (*f).nvcsw = field::<A>(sig, o.sig_nvcsw);
        (*f).nivcsw = field::<A>(sig, o.sig_nivcsw);
        for i in 0..pipetrace_probes_common::IO_COUNTERS {
            (*f).io[i] = field::<A>(leader, o.task_io[i]);
        }
        match emit::ACC.get_ptr(&tgid) {
            // Copied from the map value straight into the record: too large for the stack.
            Some(acc) => core::ptr::copy_nonoverlapping(acc, core::ptr::addr_of_mut!((*f).acc), 1),
            None => core::ptr::write_bytes(core::ptr::addr_of_mut!((*f).acc), 0, 1),
        }
        (*f).acc.run_delay_ns += run;
        (*f).acc.mem_delay_ns += mem;
    }
}

/// Adds thread `t`'s own counters to `f`: a thread the kernel has not summed into
/// `signal_struct` yet (at exit, the exiting thread and, if another, the zombie leader).
///
/// # Safety
/// `f` points into a reserved ring-buffer record.
#[inline(always)]
pub unsafe fn add_thread<A: Access>(f: *mut Figures, t: Task, o: &KernelOffsets) {
    unsafe {
        (*f).utime_ns += field::<A>(t, o.task_utime);
        (*f).stime_ns += field::<A>(t, o.task_stime);
        (*f).runtime_ns += field::<A>(t, o.task_sum_exec_runtime);
        (*f).min_flt += field::<A>(t, o.task_min_flt);
        (*f).maj_flt += field::<A>(t, o.task_maj_flt);
        (*f).nvcsw += field::<A>(t, o.task_nvcsw);
        (*f).nivcsw += field::<A>(t, o.task_nivcsw);
    }
}
