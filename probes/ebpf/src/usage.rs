//! A process's figures as `signal_struct` sums them, shared by the reap-time report (free)
//! and the exit-time one that stands in when the kernel skips the reap-time program.
use pipetrace_probes_common::{Figures, KernelOffsets};

use crate::{
    emit,
    task::{self, Task, field},
};

/// Fills `f` for process `tgid` led by `leader`. `own`: threads whose counters the kernel
/// has not summed into `signal_struct` yet (none once the leader is freed; at exit, the
/// exiting thread and, if another, the zombie leader). Null entries are skipped.
///
/// # Safety
/// `f` points into a reserved ring-buffer record.
#[inline(always)]
pub unsafe fn fill(f: *mut Figures, tgid: u32, leader: Task, o: &KernelOffsets, own: [Task; 2]) {
    let sig: *const u8 = task::read(leader, o.task_signal).unwrap_or(core::ptr::null());
    let (run, mem) = task::thread_delays(leader, o);
    let (mut ut, mut st, mut rt) = (
        field(sig, o.sig_utime),
        field(sig, o.sig_stime),
        field(sig, o.sig_sum_sched_runtime),
    );
    let (mut minf, mut majf, mut nv, mut niv) = (
        field(sig, o.sig_min_flt),
        field(sig, o.sig_maj_flt),
        field(sig, o.sig_nvcsw),
        field(sig, o.sig_nivcsw),
    );
    for t in own {
        if t.is_null() {
            continue;
        }
        ut += field(t, o.task_utime);
        st += field(t, o.task_stime);
        rt += field(t, o.task_sum_exec_runtime);
        minf += field(t, o.task_min_flt);
        majf += field(t, o.task_maj_flt);
        nv += field(t, o.task_nvcsw);
        niv += field(t, o.task_nivcsw);
    }
    unsafe {
        (*f).utime_ns = ut;
        (*f).stime_ns = st;
        (*f).runtime_ns = rt;
        (*f).prev_utime_ns = field(sig, o.sig_prev_utime);
        (*f).prev_stime_ns = field(sig, o.sig_prev_stime);
        (*f).maxrss_pages = field(sig, o.sig_maxrss);
        (*f).min_flt = minf;
        (*f).maj_flt = majf;
        (*f).nvcsw = nv;
        (*f).nivcsw = niv;
        for i in 0..pipetrace_probes_common::IO_COUNTERS {
            (*f).io[i] = field(leader, o.task_io[i]);
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
