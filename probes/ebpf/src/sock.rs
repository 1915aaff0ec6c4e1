//! tp_btf/sock_{send,recv}_length: bytes each sendmsg/recvmsg moved, per process. Counted for
//! IPv4 and IPv6 sockets (the network), not for local (unix, netlink) ones.
use aya_ebpf::{
    helpers::bpf_get_current_pid_tgid, macros::btf_tracepoint, programs::BtfTracePointContext,
};
use pipetrace_probes_common::ABSENT;

use crate::{
    emit,
    task::{Access, Probed},
};

const AF_INET: u16 = 2;
const AF_INET6: u16 = 10;
const MSG_PEEK: i32 = 2;

/// `sock_send_length(struct sock *sk, int ret, int flags)`.
#[btf_tracepoint(function = "sock_send_length")]
pub fn sock_send_length(ctx: BtfTracePointContext) -> u32 {
    count(&ctx, true);
    0
}

/// `sock_recv_length(struct sock *sk, int ret, int flags)`.
#[btf_tracepoint(function = "sock_recv_length")]
pub fn sock_recv_length(ctx: BtfTracePointContext) -> u32 {
    count(&ctx, false);
    0
}

#[inline(always)]
fn count(ctx: &BtfTracePointContext, send: bool) {
    let Some(o) = emit::offsets() else { return };
    if o.sk_family == ABSENT {
        return;
    }
    let sk: *const u8 = ctx.arg(0);
    let family: u16 = Probed::at(sk, o.sk_family).unwrap_or(0);
    if family != AF_INET && family != AF_INET6 {
        return;
    }
    let (ret, flags): (u64, u64) = (ctx.arg(1), ctx.arg(2));
    let (ret, flags) = (ret as i32, flags as i32);
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
