//! Encoded batches waiting to be sent over one connection, of every signal it carries,
//! bounded in bytes. Past the bound a batch goes to the spool, or is dropped and counted. One
//! sender takes the oldest batch and retries it with backoff while the failure is retryable,
//! so a backend that is away loses nothing that fits.
use std::{
    collections::VecDeque,
    path::PathBuf,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering::Relaxed},
    },
    time::Duration,
};

use pipetrace_config::{Retry, SignalKind};
use tokio::sync::Notify;
use tracing::{Instrument, Span, field::Empty};

use super::{Backoff, BySignal, Client, SendError, Spool};

/// One encoded OTLP request of one signal, and how many spans (or metric requests) it holds.
pub struct Batch {
    pub kind: SignalKind,
    pub items: u64,
    pub body: bytes::Bytes,
}

/// What became of the items pushed; every one ends in exactly one of sent, failed, dropped,
/// or (for now) queued or spooled.
#[derive(Debug, Default)]
pub struct OutboxStats {
    pub sent: AtomicU64,
    /// Attempts that failed and were tried again.
    pub retries: AtomicU64,
    /// Refused by the backend for good (not retryable).
    pub failed: AtomicU64,
    /// No room in memory or in the spool, or unsent when the agent stopped without a spool.
    pub dropped: AtomicU64,
    /// Written to the spool (to be sent by this agent or the next).
    pub spooled: AtomicU64,
    /// Bytes in memory now.
    pub queued_bytes: AtomicU64,
}

struct State {
    queue: VecDeque<Arc<Batch>>,
    bytes: u64,
    spool: Option<Spool>,
    closed: bool,
}

pub struct Outbox {
    state: Mutex<State>,
    /// A spool is open: its file work runs on tokio's blocking threads, never on the async
    /// workers that also read the kernel's events.
    spooling: bool,
    wake: Notify,
    max_bytes: u64,
    /// Each signal's counters (one set when the outbox carries one stream).
    stats: BySignal<Arc<OutboxStats>>,
    /// Each attempt is a span of the agent's own (off for the outbox of those spans: its
    /// exports would make more of them forever).
    traced: bool,
}

enum Next {
    Memory(Arc<Batch>),
    Disk {
        path: PathBuf,
        len: u64,
        batch: Batch,
    },
}

impl Next {
    fn batch(&self) -> &Batch {
        match self {
            Next::Memory(b) => b,
            Next::Disk { batch, .. } => batch,
        }
    }
}

/// The sender's memory of failures: the backoff, and whether the last attempt failed.
struct Trying {
    backoff: Backoff,
    failing: bool,
    retry: Retry,
}

impl Outbox {
    pub fn new(max_bytes: u64, spool: Option<Spool>, stats: BySignal<Arc<OutboxStats>>) -> Self {
        Self {
            spooling: spool.is_some(),
            state: Mutex::new(State {
                queue: VecDeque::new(),
                bytes: 0,
                spool,
                closed: false,
            }),
            wake: Notify::new(),
            max_bytes,
            stats,
            traced: true,
        }
    }

    /// Sends without a span of its own per attempt.
    pub fn untraced(mut self) -> Self {
        self.traced = false;
        self
    }

    fn stats(&self, kind: SignalKind) -> &OutboxStats {
        self.stats.get(kind)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues a batch; past the bound it goes to the spool (written on a blocking thread)
    /// or is dropped and counted.
    pub async fn push(self: &Arc<Self>, batch: Batch) {
        let Some(batch) = self.queue_or_return(batch) else {
            return;
        };
        // No room in memory, and a spool: written there on a blocking thread.
        let me = self.clone();
        let spooled = tokio::task::spawn_blocking(move || {
            let mut st = me.lock();
            me.overflow(&mut st, &batch);
        });
        if spooled.await.is_err() {
            log::error!("the spool's writer failed; that batch is lost");
        }
    }

    /// Queues the batch if it fits, or counts it dropped when there is no spool; else hands
    /// it back for the spool.
    fn queue_or_return(&self, batch: Batch) -> Option<Batch> {
        let mut st = self.lock();
        let len = batch.body.len() as u64;
        if st.bytes + len > self.max_bytes && !st.queue.is_empty() {
            if self.spooling {
                return Some(batch);
            }
            self.overflow(&mut st, &batch);
            return None;
        }
        st.bytes += len;
        self.stats(batch.kind).queued_bytes.fetch_add(len, Relaxed);
        st.queue.push_back(Arc::new(batch));
        drop(st);
        self.wake.notify_one();
        None
    }

    /// A batch with no room in memory: to the spool, or dropped and counted.
    fn overflow(&self, st: &mut State, batch: &Batch) {
        let kept =
            (st.spool.as_mut()).is_some_and(|s| s.write(batch.kind, batch.items, &batch.body));
        let stats = self.stats(batch.kind);
        if kept {
            stats.spooled.fetch_add(batch.items, Relaxed);
            self.wake.notify_one();
        } else {
            stats.dropped.fetch_add(batch.items, Relaxed);
        }
    }

    /// A batch leaves memory.
    fn unqueue(&self, st: &mut State, b: &Batch) {
        let len = b.body.len() as u64;
        st.bytes -= len;
        self.stats(b.kind).queued_bytes.fetch_sub(len, Relaxed);
    }

    /// Moves every batch in memory to the spool (or drops them, counted): used when the
    /// agent is over its memory limit, and for what is unsent when it stops.
    pub fn spill(&self) -> u64 {
        let mut st = self.lock();
        let mut moved = 0;
        while let Some(b) = st.queue.pop_front() {
            self.unqueue(&mut st, &b);
            self.overflow(&mut st, &b);
            moved += b.items;
        }
        moved
    }

    /// No more pushes: the sender stops once all is sent.
    pub fn close(&self) {
        self.lock().closed = true;
        self.wake.notify_one();
    }

    fn next(&self) -> Result<Option<Next>, ()> {
        let mut st = self.lock();
        if let Some(b) = st.queue.front() {
            return Ok(Some(Next::Memory(b.clone())));
        }
        if let Some(s) = st.spool.as_mut().and_then(|s| s.oldest()) {
            return Ok(Some(Next::Disk {
                path: s.path,
                len: (8 + s.body.len()) as u64,
                batch: Batch {
                    kind: s.kind,
                    items: s.items,
                    body: s.body.into(),
                },
            }));
        }
        if st.closed { Err(()) } else { Ok(None) }
    }

    fn done(&self, n: &Next) {
        let mut st = self.lock();
        match n {
            Next::Memory(b) => {
                // A spill may have taken it meanwhile.
                if st.queue.front().is_some_and(|f| Arc::ptr_eq(f, b)) {
                    st.queue.pop_front();
                    self.unqueue(&mut st, b);
                }
            }
            Next::Disk { path, len, batch } => {
                if let Some(s) = st.spool.as_mut() {
                    s.remove(batch.kind, path, *len);
                }
            }
        }
    }

    /// What to send next, read from the spool on a blocking thread when there is one.
    async fn next_batch(self: &Arc<Self>) -> Result<Option<Next>, ()> {
        if !self.spooling {
            return self.next();
        }
        let me = self.clone();
        tokio::task::spawn_blocking(move || me.next())
            .await
            .unwrap_or(Err(()))
    }

    /// A batch went (or failed for good): forgotten, its spool file removed on a blocking
    /// thread.
    async fn sent(self: &Arc<Self>, next: Next) {
        if !self.spooling {
            return self.done(&next);
        }
        let me = self.clone();
        let _ = tokio::task::spawn_blocking(move || me.done(&next)).await;
    }

    /// Sends until closed and empty. Retryable failures wait and try the same batch again.
    pub async fn run_sender(self: Arc<Self>, client: Arc<Client>, retry: Retry) {
        let mut trying = Trying {
            backoff: Backoff::new(&retry),
            failing: false,
            retry,
        };
        loop {
            let woken = self.wake.notified();
            let next = match self.next_batch().await {
                Err(()) => return,
                Ok(None) => {
                    woken.await;
                    continue;
                }
                Ok(Some(n)) => n,
            };
            let b = next.batch();
            let span = self.attempt_span(&next, &client, trying.backoff.attempt());
            let result = client.send(b.kind, &b.body).instrument(span.clone()).await;
            if let Err(e) = &result {
                span.record("otel.status_code", "error");
                span.record("error", e.message.as_str());
            }
            let wait = self.judge(&client, next, result, &mut trying).await;
            if let Some(w) = wait {
                span.record("retry_in_ms", w.as_millis() as u64);
            }
            drop(span);
            if let Some(w) = wait {
                tokio::time::sleep(w).await;
            }
        }
    }

    /// One attempt to send a batch, as a span: an export, or the replay of a batch from the
    /// spool; `attempt` counts the retries before it.
    fn attempt_span(&self, next: &Next, client: &Client, attempt: u32) -> Span {
        if !self.traced {
            return Span::none();
        }
        let b = next.batch();
        let (signal, url, bytes) = (b.kind.name(), client.url(b.kind), b.body.len());
        let items = b.items;
        match next {
            Next::Memory(_) => tracing::info_span!(
                "pipetrace.export",
                signal,
                items,
                bytes,
                attempt,
                url,
                retry_in_ms = Empty,
                error = Empty,
                otel.status_code = Empty,
            ),
            Next::Disk { .. } => tracing::info_span!(
                "pipetrace.spool.replay",
                signal,
                items,
                bytes,
                attempt,
                url,
                retry_in_ms = Empty,
                error = Empty,
                otel.status_code = Empty,
            ),
        }
    }

    /// Counts what one attempt did, and says how long to wait before trying it again.
    async fn judge(
        self: &Arc<Self>,
        client: &Client,
        next: Next,
        result: Result<(), SendError>,
        t: &mut Trying,
    ) -> Option<Duration> {
        let b = next.batch();
        let (stats, url) = (self.stats(b.kind), client.url(b.kind));
        match result {
            Ok(()) => {
                stats.sent.fetch_add(b.items, Relaxed);
                if std::mem::take(&mut t.failing) {
                    log::warn!("OTLP export to {url} works again");
                }
                t.backoff.reset();
                self.sent(next).await;
                None
            }
            Err(e) if e.retryable && t.retry.enabled => {
                stats.retries.fetch_add(1, Relaxed);
                if !std::mem::replace(&mut t.failing, true) {
                    log::warn!(
                        "OTLP export to {url} failed ({}); retrying, queued batches are kept",
                        e.message
                    );
                }
                Some(t.backoff.next(e.retry_after))
            }
            Err(e) => {
                log::warn!(
                    "OTLP export of {} items to {url} failed for good: {}",
                    b.items,
                    e.message
                );
                stats.failed.fetch_add(b.items, Relaxed);
                self.sent(next).await;
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(kind: SignalKind, items: u64) -> Batch {
        Batch {
            kind,
            items,
            body: bytes::Bytes::from(vec![0u8; 10]),
        }
    }

    #[tokio::test]
    async fn each_signal_is_counted_apart_in_one_outbox() {
        let stats = BySignal::<Arc<OutboxStats>>::default();
        // Room for one batch: the second is dropped (no spool), counted on its own signal.
        let o = Arc::new(Outbox::new(10, None, stats.clone()));
        o.push(batch(SignalKind::Traces, 3)).await;
        o.push(batch(SignalKind::Metrics, 1)).await;
        assert_eq!(stats.metrics.dropped.load(Relaxed), 1);
        assert_eq!(stats.traces.dropped.load(Relaxed), 0);
        assert_eq!(stats.traces.queued_bytes.load(Relaxed), 10);
        assert_eq!(o.spill(), 3);
        assert_eq!(stats.traces.dropped.load(Relaxed), 3);
        assert_eq!(stats.traces.queued_bytes.load(Relaxed), 0);
    }
}
