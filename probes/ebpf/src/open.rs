//! tracepoint/syscalls/sys_{enter,exit}_openat: the files a process opened, and how. The
//! entry keeps the path's address and the flags by thread; the exit, when a descriptor came
//! back, copies the path in the kernel, so a tool living 1 ms keeps its files too. Failed
//! opens (a search along a path list) are no files the process touched.
use aya_ebpf::{
    helpers::{
        bpf_get_current_pid_tgid, bpf_probe_read_user_str_bytes, generated::bpf_ktime_get_boot_ns,
    },
    macros::{map, tracepoint},
    maps::LruHashMap,
    programs::TracePointContext,
};
use pipetrace_probes_common::{ABSENT, EventHeader, KIND_OPEN, OPEN_PATH_LEN, OpenEvent, Opening};

use crate::{emit, task};

/// Opens in flight, by thread id: LRU, so a thread that dies inside the call leaves nothing.
#[map(name = "OPENING")]
static OPENING: LruHashMap<u64, Opening> = LruHashMap::with_max_entries(16384, 0);

#[tracepoint(category = "syscalls", name = "sys_enter_openat")]
pub fn sys_enter_openat(ctx: TracePointContext) -> u32 {
    let Some(o) = emit::offsets() else { return 0 };
    if o.tp_openat_filename == ABSENT || o.tp_openat_flags == ABSENT {
        return 0;
    }
    let flags: u64 = unsafe { ctx.read_at(o.tp_openat_flags as usize) }.unwrap_or(0);
    // A directory listed or a path held (O_DIRECTORY, O_PATH, numbered per architecture):
    // no file's data.
    if flags as u32 & o.open_not_data != 0 {
        return 0;
    }
    let path: u64 = unsafe { ctx.read_at(o.tp_openat_filename as usize) }.unwrap_or(0);
    let opening = Opening {
        path,
        flags: flags as u32,
        _pad: 0,
    };
    let _ = OPENING.insert(&bpf_get_current_pid_tgid(), &opening, 0);
    0
}

#[tracepoint(category = "syscalls", name = "sys_exit_openat")]
pub fn sys_exit_openat(ctx: TracePointContext) -> u32 {
    let Some(o) = emit::offsets() else { return 0 };
    let id = bpf_get_current_pid_tgid();
    let Some(opening) = (unsafe { OPENING.get(&id) }).copied() else {
        return 0;
    };
    let _ = OPENING.remove(&id);
    let ret: i64 = unsafe { ctx.read_at(o.tp_openat_ret as usize) }.unwrap_or(-1);
    if ret < 0 || opening.path == 0 {
        return 0;
    }
    let Some(mut entry) = emit::EVENTS.reserve::<OpenEvent>(0) else {
        emit::count_lost(KIND_OPEN);
        return 0;
    };
    let ev = entry.as_mut_ptr();
    unsafe {
        (*ev).header = EventHeader {
            kind: KIND_OPEN,
            tgid: (id >> 32) as u32,
            time_ns: bpf_ktime_get_boot_ns(),
            start_ns: task::process_start::<task::Probed>(task::current(), o),
        };
        (*ev).flags = opening.flags;
        (*ev).path_len = 0;
        let src = opening.path as *const u8;
        if let Ok(s) = bpf_probe_read_user_str_bytes(src, &mut (*ev).path) {
            (*ev).path_len = (s.len() as u32) & (OPEN_PATH_LEN as u32 - 1);
        }
    }
    entry.submit(emit::submit_flags());
    0
}
