//! What became of everything handed to the sink, per stream: nothing is dropped without a
//! count, and the summary, the agent's log and its `pipetrace.agent.*` metrics read these.
use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering::Relaxed},
};

use super::otlp::{BySignal, OutboxStats};

/// One stream's counters: spans, metric export requests, or the agent's own spans.
#[derive(Debug, Default)]
pub struct StreamStats {
    /// Taken into the sink's queue.
    pub queued: AtomicU64,
    /// Refused because the queue was full (the sink is far behind), or came after it closed.
    pub dropped_queue_full: AtomicU64,
    pub written_file: AtomicU64,
    /// Could not be written to the file.
    pub failed_file: AtomicU64,
    /// What became of those sent over OTLP.
    pub otlp: Arc<OutboxStats>,
}

impl StreamStats {
    /// Refused for good by the endpoint, or not written to the file.
    pub fn failed(&self) -> u64 {
        self.failed_file.load(Relaxed) + self.otlp.failed.load(Relaxed)
    }

    /// Dropped: the queue was full, or neither memory nor spool had room.
    pub fn dropped(&self) -> u64 {
        self.dropped_queue_full.load(Relaxed) + self.otlp.dropped.load(Relaxed)
    }
}

/// Every stream of one sink.
#[derive(Debug, Default)]
pub struct SinkStats {
    pub spans: StreamStats,
    /// Counted in requests, one per metrics interval.
    pub metrics: StreamStats,
    /// The agent's own spans (`self_telemetry.traces`).
    pub own_spans: StreamStats,
    /// What `export.limits` cut from the pipeline's spans.
    pub limits: super::limits::LimitStats,
}

impl SinkStats {
    /// The OTLP counters of the pipeline's signals, as one outbox counts them.
    pub(crate) fn by_signal(&self) -> BySignal<Arc<OutboxStats>> {
        BySignal {
            traces: self.spans.otlp.clone(),
            metrics: self.metrics.otlp.clone(),
        }
    }

    /// Retries of every export.
    pub fn retries(&self) -> u64 {
        self.streams().map(|s| s.otlp.retries.load(Relaxed)).sum()
    }

    /// Bytes waiting in memory to be sent.
    pub fn queued_bytes(&self) -> u64 {
        self.streams()
            .map(|s| s.otlp.queued_bytes.load(Relaxed))
            .sum()
    }

    fn streams(&self) -> impl Iterator<Item = &StreamStats> {
        [&self.spans, &self.metrics, &self.own_spans].into_iter()
    }
}
