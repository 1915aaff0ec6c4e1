//! tracepoint/sock/sock_{send,recv}_length: bytes each sendmsg/recvmsg moved, per process.
//! Counted for IPv4 and IPv6 sockets (the network), not for local (unix, netlink) ones.
use aya_ebpf::{
    helpers::bpf_get_current_pid_tgid, macros::tracepoint, programs::TracePointContext,
};
use pipetrace_probes_common::ABSENT;

use crate::emit;

const AF_INET: u16 = 2;
const AF_INET6: u16 = 10;
const MSG_PEEK: i32 = 2;

#[tracepoint(category = "sock", name = "sock_send_length")]
pub fn sock_send_length(ctx: TracePointContext) -> u32 {
    count(&ctx, true);
    0
}

#[tracepoint(category = "sock", name = "sock_recv_length")]
pub fn sock_recv_length(ctx: TracePointContext) -> u32 {
    count(&ctx, false);
    0
}

#[inline(always)]
fn count(ctx: &TracePointContext, send: bool) {
    let Some(o) = emit::offsets() else { return };
    if o.sock_family == ABSENT {
        return;
    }
    let family: u16 = unsafe { ctx.read_at(o.sock_family as usize) }.unwrap_or(0);
    if family != AF_INET && family != AF_INET6 {
        return;
    }
    let ret: i32 = unsafe { ctx.read_at(o.sock_ret as usize) }.unwrap_or(0);
    let flags: i32 = unsafe { ctx.read_at(o.sock_flags as usize) }.unwrap_or(0);
    // A peek leaves the bytes for the next read: count them once.
    if ret <= 0 || (!send && flags & MSG_PEEK != 0) {
        return;
    }
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    let Some(acc) = emit::accumulator(tgid) else {
        return;
    };
    let counter = unsafe {
        if send {
            core::ptr::addr_of_mut!((*acc).net_tx_bytes)
        } else {
            core::ptr::addr_of_mut!((*acc).net_rx_bytes)
        }
    };
    emit::add(counter, ret as u64);
}
