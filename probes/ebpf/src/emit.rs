//! The ring buffer, the loss counters and the offsets global.
use aya_ebpf::{
    bindings::{BPF_RB_AVAIL_DATA, BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP},
    macros::map,
    maps::{PerCpuArray, RingBuf},
};
use pipetrace_probes_common::{KIND_SLOTS, KernelOffsets};

/// User space sets the real size at load time (`probes.ring_buffer_bytes`).
#[map(name = "EVENTS")]
pub static EVENTS: RingBuf = RingBuf::with_byte_size(1 << 24, 0);

/// Records that could not be reserved, per event kind: read and reported by user space.
#[map(name = "LOST")]
pub static LOST: PerCpuArray<u64> = PerCpuArray::with_max_entries(KIND_SLOTS, 0);

#[unsafe(no_mangle)]
static PIPETRACE_OFFSETS: KernelOffsets = KernelOffsets {
    ready: 0,
    task_pid: 0,
    task_tgid: 0,
    task_start_boottime: 0,
    task_real_parent: 0,
    task_group_leader: 0,
    task_mm: 0,
    task_exit_code: 0,
    mm_arg_start: 0,
    mm_arg_end: 0,
    exit_tp_group_dead: 0,
    _pad: 0,
};

#[unsafe(no_mangle)]
static PIPETRACE_WAKE_BYTES: u64 = 0;

/// Submit flags: wake the reader only once enough is queued (0 = always).
#[inline(always)]
pub fn submit_flags() -> u64 {
    let wake = unsafe { core::ptr::read_volatile(&PIPETRACE_WAKE_BYTES) };
    if EVENTS.query(BPF_RB_AVAIL_DATA as u64) >= wake {
        BPF_RB_FORCE_WAKEUP as u64
    } else {
        BPF_RB_NO_WAKEUP as u64
    }
}

/// The offsets user space resolved; `None` until it did (then the probes stay silent).
#[inline(always)]
pub fn offsets() -> Option<KernelOffsets> {
    // Volatile: the loader rewrites this constant, so the compiler must not fold it.
    let o = unsafe { core::ptr::read_volatile(&PIPETRACE_OFFSETS) };
    if o.ready == 0 { None } else { Some(o) }
}

#[inline(always)]
pub fn count_lost(kind: u32) {
    if let Some(slot) = LOST.get_ptr_mut(kind) {
        unsafe { *slot += 1 };
    }
}
