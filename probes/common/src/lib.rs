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
/// `sched_process_free` of a thread-group leader: the process's final resource usage.
pub const KIND_USAGE: u32 = 4;
/// `mark_victim`: the OOM killer chose a process.
pub const KIND_OOM: u32 = 5;
/// `signal:signal_generate` of a fatal signal, delivered: who sent what to whom.
pub const KIND_SIGNAL: u32 = 6;
/// `syscalls:sys_exit_openat` of a successful open: a file a process opened, and how.
pub const KIND_OPEN: u32 = 7;
/// `sched_switch` of a dead thread once its process has no live thread: the process's CPU
/// figures with the exit path's own time in them.
pub const KIND_FINAL_CPU: u32 = 8;
/// Size of the per-kind loss counter array (index = kind; slot 0 counts full accumulator maps).
pub const KIND_SLOTS: u32 = 9;
/// Loss slot for per-process accumulator updates dropped because the map was full.
pub const LOST_ACCUMULATOR: u32 = 0;
/// Name of the map of threads' block-I/O wait starts, by thread id.
pub const IO_WAIT_MAP: &str = "IO_WAIT";

/// Bytes of the executed file name kept (what was passed to execve).
pub const PATH_LEN: usize = 512;
/// Bytes of an opened file's path kept (as the process named it). A power of two: the
/// probe masks with `OPEN_PATH_LEN - 1`.
pub const OPEN_PATH_LEN: usize = 256;

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
/// Name of the hash map of per-process accumulators (by tgid): what the kernel keeps per
/// thread or per socket call and not per process.
pub const ACC_MAP: &str = "ACC";
/// Capacity of [`ACC_MAP`]: processes with live network traffic or exited threads at once.
pub const ACC_ENTRIES: u32 = 65536;
/// An offset the running kernel lacks: the probes read 0 there, user space omits the value.
pub const ABSENT: u32 = u32::MAX;

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
    /// The thread that forked (its tid): which of a multi-threaded engine's threads
    /// started the process.
    pub parent_tid: u32,
    pub parent_start_ns: u64,
    pub comm: [u8; COMM_LEN],
}

/// An exec's fixed part: its record is this, then `argv_len` bytes of argv, then
/// `filename_len` bytes of the file name, and ends there. Most command lines are a few
/// dozen bytes: records of the full buffers (4.6 KB) made the ring buffer, and its
/// reader, move twenty times what they hold.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ExecHead {
    pub header: EventHeader,
    pub ppid: u32,
    pub uid: u32,
    pub cgroup_id: u64,
    pub flags: u32,
    /// Bytes of argv in the record.
    pub argv_len: u32,
    /// Bytes of the file name after argv (no NUL).
    pub filename_len: u32,
    pub _pad: u32,
}

/// An exec as the probe builds it (in a per-CPU scratch buffer); the ring buffer gets its
/// head and the bytes `data` holds, not the whole buffer.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ExecEvent {
    pub head: ExecHead,
    /// argv (NUL-separated), then the file name.
    pub data: [u8; ARGV_LEN + PATH_LEN],
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ExitEvent {
    pub header: EventHeader,
    /// The wait status as the kernel keeps it in `task_struct.exit_code`.
    pub exit_code: u32,
    pub _pad: u32,
    pub comm: [u8; COMM_LEN],
    /// High-water mark of the program image the process ends with, in pages (0: unknown).
    /// Unlike the process's maxrss it leaves out what an image before exec used, such as
    /// the memory of the parent a job was forked from.
    pub image_peak_pages: u64,
    /// The process's usage as its last thread exits: the sums of threads already reaped
    /// plus the exiting thread's and the leader's own. What stands in when the kernel skips
    /// the reap-time report (it does, for bursts under load); short of the final figures
    /// only by what the last thread spends on its way out.
    pub figures: Figures,
}

/// What the kernel keeps per thread or per call but not per process: summed per tgid by the
/// probes until the process's leader is freed. Updated with atomic adds.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Accumulator {
    pub net_tx_bytes: u64,
    pub net_rx_bytes: u64,
    /// Exited non-leader threads' run-queue delay (`sched_info.run_delay`).
    pub run_delay_ns: u64,
    /// Every thread's block-I/O waits, from going to sleep in I/O wait to being woken, as
    /// the sched_switch and sched_wakeup probes measure them (added as each wait ends).
    pub blkio_delay_ns: u64,
    /// Exited non-leader threads' delay-accounting memory waits.
    pub mem_delay_ns: u64,
    /// Exited non-leader threads' own I/O counters (`task_struct.ioac`), in
    /// [`pipetrace_io`] order.
    pub io: [u64; IO_COUNTERS],
    /// Non-leader threads that exited: with the leader, how many threads the process had,
    /// which bounds what its threads can have waited.
    pub threads_exited: u64,
}

/// The `task_io_accounting` counters, in the order [`Accumulator::io`] and
/// [`UsageEvent::io`] keep them.
pub mod pipetrace_io {
    pub const RCHAR: usize = 0;
    pub const WCHAR: usize = 1;
    pub const SYSCR: usize = 2;
    pub const SYSCW: usize = 3;
    pub const READ_BYTES: usize = 4;
    pub const WRITE_BYTES: usize = 5;
    pub const CANCELLED_WRITE_BYTES: usize = 6;
    /// Field names in `struct task_io_accounting`, by index.
    pub const FIELDS: [&str; super::IO_COUNTERS] = [
        "rchar",
        "wchar",
        "syscr",
        "syscw",
        "read_bytes",
        "write_bytes",
        "cancelled_write_bytes",
    ];
}

pub const IO_COUNTERS: usize = 7;

/// A process's resource usage: `signal_struct`'s sums over every thread (what wait4's rusage
/// reports) and the per-thread sums of [`Accumulator`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Figures {
    pub utime_ns: u64,
    pub stime_ns: u64,
    /// Exact CPU time (`sum_sched_runtime`); utime/stime are tick samples that split it.
    pub runtime_ns: u64,
    /// The split the kernel last reported (`signal_struct.prev_cputime`): after wait4, what
    /// wait4 returned.
    pub prev_utime_ns: u64,
    pub prev_stime_ns: u64,
    /// Peak resident set over every image the process ran, in pages.
    pub maxrss_pages: u64,
    pub min_flt: u64,
    pub maj_flt: u64,
    pub nvcsw: u64,
    pub nivcsw: u64,
    /// The leader thread's own I/O counters (`task_struct.ioac`). Not `signal_struct.ioac`:
    /// that one also holds every child the process reaped.
    pub io: [u64; IO_COUNTERS],
    pub acc: Accumulator,
}

/// A process's final resource usage, when its leader is freed (after its last thread was
/// reaped): the figures wait4 reported, to the nanosecond.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct UsageEvent {
    pub header: EventHeader,
    pub figures: Figures,
}

/// A process's CPU figures and context switches as a thread of it leaves its CPU for the
/// last time, after every thread has exited: the exit record's figures lack what the exit
/// path spends after its tracepoint (unmapping memory, closing files, preemptions there
/// under load), which the kernel books only at this switch.
/// Stands in for them when the reap-time report does not come. Sent by each thread that
/// leaves after the last exit: the largest is the process's.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct FinalCpuEvent {
    pub header: EventHeader,
    pub utime_ns: u64,
    pub stime_ns: u64,
    pub runtime_ns: u64,
    /// `signal_struct.prev_cputime`: the split the kernel last reported, which wait4 keeps.
    pub prev_utime_ns: u64,
    pub prev_stime_ns: u64,
    pub nvcsw: u64,
    pub nivcsw: u64,
}

/// A file a process opened (`openat` returned a descriptor).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct OpenEvent {
    pub header: EventHeader,
    /// `open(2)` flags as passed (access mode in the low two bits).
    pub flags: u32,
    /// Valid bytes in `path` before its NUL (the path was cut when it fills the buffer).
    pub path_len: u32,
    pub path: [u8; OPEN_PATH_LEN],
}

/// An `openat` in flight: what its entry said, for its exit to report.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Opening {
    /// The user-space address of the path.
    pub path: u64,
    pub flags: u32,
    pub _pad: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct OomEvent {
    /// `tgid` is the victim's pid; `start_ns` is 0 (the tracepoint does not say).
    pub header: EventHeader,
    /// The victim's memory when chosen, in pages as the kernel counts it (0 where the
    /// kernel does not say).
    pub total_vm: u64,
    pub anon_rss: u64,
    pub file_rss: u64,
    pub shmem_rss: u64,
    /// The least memory limit of the victim's memory cgroup and those above it, in pages,
    /// read as it was chosen (0 where not known; the kernel's "max" where none is set).
    /// Read here because a victim's cgroup is gone from /proc by the time user space looks.
    pub limit_pages: u64,
    /// The process whose allocation set the OOM killer off (the current task: the kernel
    /// runs it in the allocating task), which may be another job's than the victim.
    pub trigger_tgid: u32,
    pub _pad: u32,
    pub trigger_comm: [u8; COMM_LEN],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct SignalEvent {
    /// `tgid` is the target's pid as the tracepoint gives it (its thread id).
    pub header: EventHeader,
    pub sig: u32,
    /// `si_code`: > 0 the kernel raised it (a fault), 0 a kill(), 0x80 the kernel on its own.
    pub code: i32,
    pub sender_tgid: u32,
    pub _pad: u32,
    pub sender_comm: [u8; COMM_LEN],
}

/// Signals that end a process by default, as a bit mask over signal numbers: SIGHUP, SIGINT,
/// SIGQUIT, SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE, SIGKILL, SIGUSR1, SIGSEGV, SIGUSR2,
/// SIGPIPE, SIGALRM, SIGTERM, SIGXCPU, SIGXFSZ, SIGSYS.
pub const FATAL_SIGNALS: u64 = (1 << 1)
    | (1 << 2)
    | (1 << 3)
    | (1 << 4)
    | (1 << 5)
    | (1 << 6)
    | (1 << 7)
    | (1 << 8)
    | (1 << 9)
    | (1 << 10)
    | (1 << 11)
    | (1 << 12)
    | (1 << 13)
    | (1 << 14)
    | (1 << 15)
    | (1 << 24)
    | (1 << 25)
    | (1 << 31);

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
    pub mm_hiwater_rss: u32,
    /// `mm_struct.rss_stat`'s first counter, where its value sits in it and the stride: an
    /// array of `struct percpu_counter` since 6.2, of atomic_long_t (0, 8) before.
    pub mm_rss_stat: u32,
    pub percpu_counter_count: u32,
    pub percpu_counter_size: u32,
    /// Offset of `group_dead` in the sched_process_exit tracepoint record; 0 where the kernel
    /// has no such field (then the leader's exit stands for the process's).
    pub exit_tp_group_dead: u32,
    // Resource accounting; [`ABSENT`] where the kernel lacks the field.
    pub task_signal: u32,
    /// `task_struct.sched_info.run_delay`, one offset from the task.
    pub task_run_delay: u32,
    pub task_delays: u32,
    /// `signal_struct.live`: threads that have not exited yet (an `atomic_t`).
    pub sig_live: u32,
    /// `signal_struct.stats_lock`'s sequence count and `signal_struct.nr_threads`: threads
    /// not yet released, counted down in the same write section that sums each one.
    pub sig_stats_seq: u32,
    pub sig_nr_threads: u32,
    pub sig_utime: u32,
    pub sig_stime: u32,
    pub sig_sum_sched_runtime: u32,
    /// `signal_struct.prev_cputime.{utime,stime}`, each one offset from the signal struct.
    pub sig_prev_utime: u32,
    pub sig_prev_stime: u32,
    pub sig_maxrss: u32,
    pub sig_min_flt: u32,
    pub sig_maj_flt: u32,
    pub sig_nvcsw: u32,
    pub sig_nivcsw: u32,
    /// A thread's own counters, not yet summed into `signal_struct` while it lives:
    /// `task_struct.{utime,stime,se.sum_exec_runtime,min_flt,maj_flt,nvcsw,nivcsw}`.
    pub task_utime: u32,
    pub task_stime: u32,
    pub task_sum_exec_runtime: u32,
    pub task_min_flt: u32,
    pub task_maj_flt: u32,
    pub task_nvcsw: u32,
    pub task_nivcsw: u32,
    /// `task_struct.ioac.<field>`, each one offset from the task, in [`pipetrace_io`] order.
    pub task_io: [u32; IO_COUNTERS],
    /// `task_struct.in_iowait`, a one-bit field: the byte that holds it and its bit there.
    pub task_in_iowait: u32,
    pub task_in_iowait_bit: u32,
    /// `task_delay_info` fields (delay accounting).
    pub delay_swapin: u32,
    pub delay_freepages: u32,
    pub delay_thrashing: u32,
    pub delay_compact: u32,
    /// `linux_binprm.filename`: the exec's file name, as the BTF exec probe reads it.
    pub binprm_filename: u32,
    /// `kernel_siginfo.si_code`, for the BTF signal probe.
    pub siginfo_code: u32,
    /// `sock.__sk_common.skc_family`, for the BTF sock probes.
    pub sk_family: u32,
    /// sock_send_length's `family` record field (from tracefs): its presence says the
    /// kernel has the sock tracepoints.
    pub sock_family: u32,
    /// `mm_struct.total_vm`, for the BTF OOM probe (with `mm_rss_stat` for the rest).
    pub mm_total_vm: u32,
    /// 1 where mark_victim's first argument is the victim's task (its record has the
    /// victim's memory, newer kernels), 0 where it is the victim's pid.
    pub oom_task_arg: u32,
    /// A task's memory cgroup, for the BTF OOM probe: `task_struct.cgroups` (a css_set),
    /// where in the css_set the memory controller's state is (`subsys[memory_cgrp_id]`),
    /// `mem_cgroup.css`, `mem_cgroup.memory` (a page counter) and in `page_counter` its
    /// `max` and `parent`; [`ABSENT`] where the kernel lacks one (no memory controller).
    pub task_cgroups: u32,
    pub css_set_memory: u32,
    pub memcg_css: u32,
    pub memcg_memory: u32,
    pub page_counter_max: u32,
    pub page_counter_parent: u32,
    /// syscalls:sys_enter_openat / sys_exit_openat record fields (from tracefs).
    pub tp_openat_filename: u32,
    pub tp_openat_flags: u32,
    pub tp_openat_ret: u32,
    /// `O_DIRECTORY | O_PATH` as this architecture numbers them: opens of no file's data.
    pub open_not_data: u32,
}

#[cfg(feature = "user")]
mod user {
    // SAFETY: plain integers, `#[repr(C)]`, no padding the kernel could leave uninitialised.
    unsafe impl aya::Pod for super::KernelOffsets {}
    // SAFETY: plain u64 fields.
    unsafe impl aya::Pod for super::Accumulator {}
}
