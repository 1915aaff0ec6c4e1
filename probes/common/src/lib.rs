//! Types shared by pipetrace's eBPF programs and its user space.
//!
//! Every record the probes put in the ring buffer starts with [`EventHeader`]; its `kind` says
//! which of the structs below follows. Layouts are `#[repr(C)]` and fixed: user space decodes
//! them by size, so a change here is a change on both sides.
#![no_std]

/// `sched_process_fork` for a new process (threads are filtered in the kernel).
pub const KIND_FORK: u32 = 1;
/// `sched_process_exec`: a process replaced its program image.
pub const KIND_EXEC: u32 = 2;
/// `sched_process_exit` of the last thread of a process.
pub const KIND_EXIT: u32 = 3;
/// Size of the per-kind loss counter array (index = kind).
pub const KIND_SLOTS: u32 = 4;

/// Bytes of the executed file name kept (what was passed to execve).
pub const PATH_LEN: usize = 512;
/// Bytes of argv kept, NUL-separated. A power of two: the probe masks with `ARGV_LEN - 1`.
pub const ARGV_LEN: usize = 4096;
pub const COMM_LEN: usize = 16;

/// Exec flag: argv was longer than [`ARGV_LEN`] - 1 bytes and was cut.
pub const EXEC_ARGV_TRUNCATED: u32 = 1;
/// Exec flag: the kernel refused to copy argv (the process keeps only its file name).
pub const EXEC_ARGV_UNREADABLE: u32 = 2;

/// Name of the global that user space fills with [`KernelOffsets`] at load time.
pub const OFFSETS_GLOBAL: &str = "PIPETRACE_OFFSETS";
/// Name of the global (u64) holding how many queued bytes make a record wake user space.
/// Below it the probes submit without a wake-up and user space drains on its own tick: one
/// wake-up per event would cost more than the event.
pub const WAKE_GLOBAL: &str = "PIPETRACE_WAKE_BYTES";
/// Name of the ring buffer map.
pub const EVENTS_MAP: &str = "EVENTS";
/// Name of the per-CPU loss counter array, indexed by event kind.
pub const LOST_MAP: &str = "LOST";

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct EventHeader {
    pub kind: u32,
    /// Process id (the thread group id).
    pub tgid: u32,
    /// When the event happened, CLOCK_BOOTTIME nanoseconds.
    pub time_ns: u64,
    /// The process's `start_boottime`, nanoseconds: with tgid and the boot id, its identity.
    pub start_ns: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ForkEvent {
    pub header: EventHeader,
    pub parent_tgid: u32,
    pub _pad: u32,
    pub parent_start_ns: u64,
    pub comm: [u8; COMM_LEN],
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ExecEvent {
    pub header: EventHeader,
    pub ppid: u32,
    pub uid: u32,
    pub cgroup_id: u64,
    pub flags: u32,
    /// Valid bytes in `argv`.
    pub argv_len: u32,
    pub filename: [u8; PATH_LEN],
    pub argv: [u8; ARGV_LEN],
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ExitEvent {
    pub header: EventHeader,
    /// The wait status as the kernel keeps it in `task_struct.exit_code`.
    pub exit_code: u32,
    pub _pad: u32,
    pub comm: [u8; COMM_LEN],
}

/// Byte offsets of the kernel fields the probes read, resolved from the running kernel's BTF.
/// Never compiled in: a probe that sees `ready == 0` emits nothing.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelOffsets {
    pub ready: u32,
    pub task_pid: u32,
    pub task_tgid: u32,
    pub task_start_boottime: u32,
    pub task_real_parent: u32,
    pub task_group_leader: u32,
    pub task_mm: u32,
    pub task_exit_code: u32,
    pub mm_arg_start: u32,
    pub mm_arg_end: u32,
    /// Offset of `group_dead` in the sched_process_exit tracepoint record; 0 where the kernel
    /// has no such field (then the leader's exit stands for the process's).
    pub exit_tp_group_dead: u32,
    pub _pad: u32,
}

#[cfg(feature = "user")]
mod user {
    // SAFETY: plain integers, `#[repr(C)]`, no padding the kernel could leave uninitialised.
    unsafe impl aya::Pod for super::KernelOffsets {}
}
