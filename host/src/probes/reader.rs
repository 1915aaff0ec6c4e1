//! Async draining of the ring buffer.
use std::{os::fd::AsRawFd, time::Duration};

use aya::maps::{MapData, RingBuf};
use tokio::io::{Interest, unix::AsyncFd};

use pipetrace_core::event::{self, Event};

pub struct EventReader {
    fd: AsyncFd<RawRing>,
}

struct RawRing(RingBuf<MapData>);

impl AsRawFd for RawRing {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.0.as_raw_fd()
    }
}

impl EventReader {
    pub(super) fn new(ring: RingBuf<MapData>) -> std::io::Result<Self> {
        // SAFETY: the ring buffer map owns its fd and keeps it open while the AsyncFd lives.
        let fd = unsafe { AsyncFd::register_with_interest(RawRing(ring), Interest::READABLE) }
            .map_err(std::io::Error::from)?;
        Ok(Self { fd })
    }

    /// Waits until the probes wake us (a quarter of the ring buffer queued) or [`TICK`]
    /// passed, then decodes everything queued into `out`. Returns how many records could
    /// not be decoded (counted, never silently dropped).
    pub(crate) async fn next_batch(&mut self, out: &mut Vec<Event>) -> std::io::Result<u64> {
        match tokio::time::timeout(TICK, self.fd.readable_mut()).await {
            Ok(guard) => {
                let mut guard = guard?;
                let bad = drain(&mut guard.get_inner_mut().0, out);
                guard.clear_ready();
                Ok(bad)
            }
            Err(_) => Ok(self.drain_now(out)),
        }
    }

    /// Decodes whatever is queued now, without waiting.
    pub(crate) fn drain_now(&mut self, out: &mut Vec<Event>) -> u64 {
        drain(&mut self.fd.get_mut().0, out)
    }
}

/// How long records may wait before user space looks, when the probes do not wake it.
/// 100 ms cut a sixth of the agent's CPU in a storm and none of its wall time; it also once
/// cost short `script:` jobs their names (their script deleted before they were seen),
/// which the host's copies taken as Snakemake writes them (host/kept.rs) now prevent.
pub const TICK: Duration = Duration::from_millis(40);

fn drain(ring: &mut RingBuf<MapData>, out: &mut Vec<Event>) -> u64 {
    let mut bad = 0;
    while let Some(item) = ring.next() {
        match event::decode(&item) {
            Ok(ev) => out.push(ev),
            Err(e) => {
                bad += 1;
                log::warn!("undecodable kernel record: {e}");
            }
        }
    }
    bad
}
