//! The ring buffer, the loss counters and the offsets global.
use aya_ebpf::{
    bindings::{BPF_NOEXIST, BPF_RB_AVAIL_DATA, BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP},
    macros::map,
    maps::{HashMap, PerCpuArray, RingBuf},
};
use pipetrace_probes_common::{
    ACC_ENTRIES, Accumulator, KIND_SLOTS, KernelOffsets, LOST_ACCUMULATOR,
};

/// User space sets the real size at load time (`probes.ring_buffer_bytes`).
#[map(name = "EVENTS")]
pub static EVENTS: RingBuf = RingBuf::with_byte_size(1 << 24, 0);

/// Records that could not be reserved, per event kind: read and reported by user space.
#[map(name = "LOST")]
pub static LOST: PerCpuArray<u64> = PerCpuArray::with_max_entries(KIND_SLOTS, 0);

#[unsafe(no_mangle)]
// SAFETY: all-zero is a valid KernelOffsets (plain integers), and `ready == 0` means unset.
static PIPETRACE_OFFSETS: KernelOffsets = unsafe { core::mem::zeroed() };

/// Per-process sums of per-thread and per-call counters, by tgid; emptied at the leader's free.
#[map(name = "ACC")]
pub static ACC: HashMap<u32, Accumulator> = HashMap::with_max_entries(ACC_ENTRIES, 0);

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
pub fn offsets() -> Option<&'static KernelOffsets> {
    // The loader rewrites this constant, so the compiler must not fold its fields; reading
    // them through an opaque pointer (not a copy) also keeps the struct off the small BPF
    // stack.
    let p = core::hint::black_box(&raw const PIPETRACE_OFFSETS);
    // SAFETY: a static, valid for the program's life.
    let o = unsafe { &*p };
    if o.ready == 0 { None } else { Some(o) }
}

#[inline(always)]
pub fn count_lost(kind: u32) {
    if let Some(slot) = LOST.get_ptr_mut(kind) {
        unsafe { *slot += 1 };
    }
}

/// The accumulator of process `tgid`, created empty on first use; `None` (and counted) when
/// the map is full.
#[inline(always)]
pub fn accumulator(tgid: u32) -> Option<*mut Accumulator> {
    if let Some(a) = ACC.get_ptr_mut(&tgid) {
        return Some(a);
    }
    // NOEXIST: another thread of the process may have created it meanwhile; then use that.
    let _ = ACC.insert(&tgid, &Accumulator::default(), BPF_NOEXIST as u64);
    let a = ACC.get_ptr_mut(&tgid);
    if a.is_none() {
        count_lost(LOST_ACCUMULATOR);
    }
    a
}

/// Drops process `tgid`'s accumulator. Most processes have none (one thread, no per-call
/// counters): a lookup, lock-free, spares them the delete's bucket lock.
#[inline(always)]
pub fn forget_accumulator(tgid: u32) {
    if unsafe { ACC.get(&tgid) }.is_some() {
        let _ = ACC.remove(&tgid);
    }
}

/// Adds `v` to a counter other CPUs may be adding to at the same time.
#[inline(always)]
pub fn add(counter: *mut u64, v: u64) {
    if v != 0 {
        // The bpf target has no core atomics; the intrinsic lowers to BPF's atomic add.
        // SAFETY: `counter` points into a map value, valid and 8-byte aligned.
        unsafe {
            core::intrinsics::atomic_xadd::<u64, u64, { core::intrinsics::AtomicOrdering::Relaxed }>(
                counter, v,
            )
        };
    }
}
