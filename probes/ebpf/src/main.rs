//! pipetrace's kernel side: process lifecycle and resource usage from tracepoints into one
//! ring buffer.
//!
//! One file per kernel hook. Kernel struct offsets come from user space at load time
//! (`PIPETRACE_OFFSETS`), never from the build machine.
#![no_std]
#![no_main]
// Atomic adds on map values (the bpf target has no core::sync::atomic types).
#![allow(internal_features)]
#![feature(core_intrinsics)]

mod emit;
mod exec;
mod exit;
mod final_cpu;
mod fork;
mod free;
mod iowait;
mod oom;
mod open;
mod signal;
mod sock;
mod task;
mod usage;

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";
