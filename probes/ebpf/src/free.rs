//! tp_btf/sched_process_free: a process's leader is freed after its last thread was reaped.
//! Only then has `signal_struct` summed every thread's CPU, faults, switches and I/O: the
//! same totals wait4 reports, however short the process lived.
use aya_ebpf::{
    helpers::generated::bpf_ktime_get_boot_ns, macros::btf_tracepoint,
    programs::BtfTracePointContext,
};
use pipetrace_probes_common::{EventHeader, KIND_USAGE, UsageEvent};

use crate::{
    emit,
    task::{self, field},
};

#[btf_tracepoint(function = "sched_process_free")]
pub fn sched_process_free(ctx: BtfTracePointContext) -> u32 {
    let Some(o) = emit::offsets() else { return 0 };
    let t: task::Task = ctx.arg(0);
    let pid: i32 = task::read(t, o.task_pid).unwrap_or(0);
    let tgid: i32 = task::read(t, o.task_tgid).unwrap_or(0);
    // Other threads summed theirs into ACC when they exited.
    if pid == 0 || pid != tgid {
        return 0;
    }
    let tgid = tgid as u32;
    // SAFETY: the value is copied out at once; every thread of the process is gone.
    let acc = unsafe { emit::ACC.get(&tgid) }.copied().unwrap_or_default();
    let _ = emit::ACC.remove(&tgid);
    let Some(mut entry) = emit::EVENTS.reserve::<UsageEvent>(0) else {
        emit::count_lost(KIND_USAGE);
        return 0;
    };
    let ev = entry.as_mut_ptr();
    let sig: *const u8 = task::read(t, o.task_signal).unwrap_or(core::ptr::null());
    let (run, blkio, mem) = task::thread_delays(t, &o);
    unsafe {
        (*ev).header = EventHeader {
            kind: KIND_USAGE,
            tgid,
            time_ns: bpf_ktime_get_boot_ns(),
            start_ns: task::read(t, o.task_start_boottime).unwrap_or(0),
        };
        (*ev).utime_ns = field(sig, o.sig_utime);
        (*ev).stime_ns = field(sig, o.sig_stime);
        (*ev).runtime_ns = field(sig, o.sig_sum_sched_runtime);
        (*ev).prev_utime_ns = field(sig, o.sig_prev_utime);
        (*ev).prev_stime_ns = field(sig, o.sig_prev_stime);
        (*ev).maxrss_pages = field(sig, o.sig_maxrss);
        (*ev).min_flt = field(sig, o.sig_min_flt);
        (*ev).maj_flt = field(sig, o.sig_maj_flt);
        (*ev).nvcsw = field(sig, o.sig_nvcsw);
        (*ev).nivcsw = field(sig, o.sig_nivcsw);
        (*ev).io = task::io(t, &o);
        (*ev).acc = acc;
        (*ev).acc.run_delay_ns += run;
        (*ev).acc.blkio_delay_ns += blkio;
        (*ev).acc.mem_delay_ns += mem;
    }
    entry.submit(emit::submit_flags());
    0
}
