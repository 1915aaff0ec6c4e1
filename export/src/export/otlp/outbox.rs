//! Encoded batches waiting to be sent over one connection, of every signal it carries,
//! bounded in bytes per signal. Past the bound a batch goes to the spool, or is dropped and
//! counted. Each signal has its own lane and its own sender, which takes the lane's oldest
//! batch and retries it with backoff while the failure is retryable: a backend that is away
//! loses nothing that fits, and one signal's retries never hold the other's batches (metric
//! exports retried through a flush once left every span unsent).
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
use tokio::{sync::Notify, time::Instant};
use tracing::{Instrument, Span, field::Empty};

use super::{Accepted, Backoff, BySignal, Client, SendError, Spool};

/// One encoded OTLP request of one signal, and how many spans (or metric requests) it holds.
#[derive(Debug)]
pub struct Batch {
    pub kind: SignalKind,
    pub items: u64,
    pub body: bytes::Bytes,
}

/// What became of the items pushed; every one ends in exactly one of sent, failed, dropped,
/// kept (in a file for `pipetrace send`), or (for now) queued or spooled.
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
    /// Unsent when `pipetrace run` ended: kept in its file for `pipetrace send`.
    pub kept: AtomicU64,
    /// Bytes in memory now.
    pub queued_bytes: AtomicU64,
}

/// Waits between retries during the final flush are at most this share of the flush window:
/// a backend that restarts within the window still gets everything (the usual backoff grows
/// to 8 s and more, which left a 15 s window two or three tries).
const FLUSH_TRIES: u32 = 10;

struct State {
    /// Each signal's lane.
    queues: BySignal<VecDeque<Arc<Batch>>>,
    bytes: BySignal<u64>,
    spool: Option<Spool>,
    closed: bool,
    /// While flushing: the longest wait between retries, so that the window holds several.
    flush_wait: Option<Duration>,
}

pub struct Outbox {
    state: Mutex<State>,
    /// A spool is open: its file work runs on tokio's blocking threads, never on the async
    /// workers that also read the kernel's events.
    spooling: bool,
    /// Wakes each signal's sender.
    wake: BySignal<Notify>,
    /// Wakes the senders waiting out a backoff when the flush starts.
    closing: Notify,
    /// Bytes in memory at most, per signal.
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
    /// The final flush has started: waits keep within its window.
    flushing: bool,
    /// The server asked for the current wait (Retry-After): the flush does not cut it short.
    asked: bool,
    retry: Retry,
}

impl Outbox {
    pub(crate) fn new(
        max_bytes: u64,
        spool: Option<Spool>,
        stats: BySignal<Arc<OutboxStats>>,
    ) -> Self {
        Self {
            spooling: spool.is_some(),
            state: Mutex::new(State {
                queues: BySignal::default(),
                bytes: BySignal::default(),
                spool,
                closed: false,
                flush_wait: None,
            }),
            wake: BySignal::default(),
            closing: Notify::new(),
            max_bytes,
            stats,
            traced: true,
        }
    }

    /// Sends without a span of its own per attempt.
    pub(crate) fn untraced(mut self) -> Self {
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
    pub(crate) async fn push(self: &Arc<Self>, batch: Batch) {
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
        let (len, kind) = (batch.body.len() as u64, batch.kind);
        if st.bytes.get(kind) + len > self.max_bytes && !st.queues.get(kind).is_empty() {
            if self.spooling {
                return Some(batch);
            }
            self.overflow(&mut st, &batch);
            return None;
        }
        *st.bytes.get_mut(kind) += len;
        self.stats(kind).queued_bytes.fetch_add(len, Relaxed);
        st.queues.get_mut(kind).push_back(Arc::new(batch));
        drop(st);
        self.wake.get(kind).notify_one();
        None
    }

    /// A batch with no room in memory: to the spool, or dropped and counted.
    fn overflow(&self, st: &mut State, batch: &Batch) {
        let kept =
            (st.spool.as_mut()).is_some_and(|s| s.write(batch.kind, batch.items, &batch.body));
        let stats = self.stats(batch.kind);
        if kept {
            stats.spooled.fetch_add(batch.items, Relaxed);
            self.wake.get(batch.kind).notify_one();
        } else {
            stats.dropped.fetch_add(batch.items, Relaxed);
        }
    }

    /// A batch leaves memory.
    fn unqueue(&self, st: &mut State, b: &Batch) {
        let len = b.body.len() as u64;
        *st.bytes.get_mut(b.kind) -= len;
        self.stats(b.kind).queued_bytes.fetch_sub(len, Relaxed);
    }

    /// Moves every batch in memory to the spool (or drops them, counted): used when the
    /// agent is over its memory limit, and for what is unsent when it stops.
    pub(crate) fn spill(&self) -> u64 {
        let mut moved = 0;
        for b in self.take_queued() {
            let mut st = self.lock();
            self.overflow(&mut st, &b);
            moved += b.items;
        }
        moved
    }

    /// Takes every batch waiting in memory out of the outbox, spans first: what
    /// `pipetrace run` keeps in its file when its flush window ends.
    pub(crate) fn take_queued(&self) -> Vec<Arc<Batch>> {
        let mut st = self.lock();
        let mut taken = Vec::new();
        for kind in [SignalKind::Traces, SignalKind::Metrics] {
            while let Some(b) = st.queues.get_mut(kind).pop_front() {
                self.unqueue(&mut st, &b);
                taken.push(b);
            }
        }
        taken
    }

    /// No more pushes: each sender stops once its lane is sent. The flush ends at
    /// `deadline`: waits between retries keep within a tenth of the time left.
    pub(crate) fn close(&self, deadline: Instant) {
        let mut st = self.lock();
        st.closed = true;
        let window = deadline.saturating_duration_since(Instant::now());
        st.flush_wait = Some(window / FLUSH_TRIES);
        drop(st);
        self.wake.traces.notify_one();
        self.wake.metrics.notify_one();
        self.closing.notify_waiters();
    }

    /// The longest wait between retries now: none outside a flush.
    fn flush_wait(&self) -> Option<Duration> {
        self.lock().flush_wait
    }

    fn next(&self, kind: SignalKind) -> Result<Option<Next>, ()> {
        let mut st = self.lock();
        if let Some(b) = st.queues.get(kind).front() {
            return Ok(Some(Next::Memory(b.clone())));
        }
        if let Some(s) = st.spool.as_mut().and_then(|s| s.oldest_of(kind)) {
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
                let queue = st.queues.get_mut(b.kind);
                if queue.front().is_some_and(|f| Arc::ptr_eq(f, b)) {
                    queue.pop_front();
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
    async fn next_batch(self: &Arc<Self>, kind: SignalKind) -> Result<Option<Next>, ()> {
        if !self.spooling {
            return self.next(kind);
        }
        let me = self.clone();
        tokio::task::spawn_blocking(move || me.next(kind))
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

    /// Sends both signals' lanes until closed and empty, each with a sender of its own.
    pub(crate) async fn run_senders(self: Arc<Self>, client: Arc<Client>, retry: Retry) {
        let traces = self
            .clone()
            .run_sender(SignalKind::Traces, client.clone(), retry.clone());
        let metrics = self.run_sender(SignalKind::Metrics, client, retry);
        tokio::join!(traces, metrics);
    }

    /// Sends one signal's lane until closed and empty. Retryable failures wait and try the
    /// same batch again; while flushing, the waits keep within the flush window.
    async fn run_sender(self: Arc<Self>, kind: SignalKind, client: Arc<Client>, retry: Retry) {
        let mut trying = Trying {
            backoff: Backoff::new(&retry),
            failing: false,
            flushing: false,
            asked: false,
            retry,
        };
        loop {
            let woken = self.wake.get(kind).notified();
            // Registered before the attempt looks at the flush: a close in between still
            // wakes a wait.
            let closing = self.closing.notified();
            tokio::pin!(closing);
            closing.as_mut().enable();
            let next = match self.next_batch(kind).await {
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
            let Some(w) = wait else { continue };
            // The flush's start cuts a long backoff short.
            tokio::select! {
                _ = tokio::time::sleep(w) => {}
                _ = &mut closing, if !trying.flushing && !trying.asked => {}
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

    /// The wait before trying again. During the final flush the backoff starts afresh and
    /// keeps within a tenth of the window, so that several tries fit in it; a server's own
    /// Retry-After still stands.
    fn retry_wait(&self, t: &mut Trying, retry_after: Option<Duration>) -> Duration {
        let cap = self.flush_wait();
        if cap.is_some() && !std::mem::replace(&mut t.flushing, true) {
            t.backoff.reset();
        }
        let w = t.backoff.next(retry_after);
        t.asked = retry_after.is_some();
        match (cap, retry_after) {
            (Some(cap), None) => w.min(cap),
            _ => w,
        }
    }

    /// Counts what one attempt did, and says how long to wait before trying it again.
    async fn judge(
        self: &Arc<Self>,
        client: &Client,
        next: Next,
        result: Result<Accepted, SendError>,
        t: &mut Trying,
    ) -> Option<Duration> {
        let b = next.batch();
        let (stats, url) = (self.stats(b.kind), client.url(b.kind));
        match result {
            Ok(taken) => {
                // What the backend said it rejected is lost for good, and counted so: spans
                // one by one; a metric export (counted whole) as failed once any of its
                // points were rejected.
                let rejected = taken.rejected.min(b.items);
                if rejected > 0 {
                    let what = match b.kind {
                        SignalKind::Traces => format!("{rejected} of {} spans", b.items),
                        SignalKind::Metrics => format!("{} data points", taken.rejected),
                    };
                    log::warn!(
                        "OTLP export to {url}: the backend rejected {what} ({})",
                        taken.message
                    );
                    stats.failed.fetch_add(rejected, Relaxed);
                }
                stats.sent.fetch_add(b.items - rejected, Relaxed);
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
                Some(self.retry_wait(t, e.retry_after))
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
        // Room for one batch per signal: the second of traces is dropped (no spool), counted
        // on its own signal; metrics have room of their own.
        let o = Arc::new(Outbox::new(10, None, stats.clone()));
        o.push(batch(SignalKind::Traces, 3)).await;
        o.push(batch(SignalKind::Traces, 2)).await;
        o.push(batch(SignalKind::Metrics, 1)).await;
        assert_eq!(stats.traces.dropped.load(Relaxed), 2);
        assert_eq!(stats.metrics.dropped.load(Relaxed), 0);
        assert_eq!(stats.traces.queued_bytes.load(Relaxed), 10);
        assert_eq!(o.spill(), 4);
        assert_eq!(stats.traces.dropped.load(Relaxed), 5);
        assert_eq!(stats.metrics.dropped.load(Relaxed), 1);
        assert_eq!(stats.traces.queued_bytes.load(Relaxed), 0);
    }

    /// A flush window of 10 s: a backoff grown long starts again and keeps under 1 s, but
    /// the server's own Retry-After stands.
    #[tokio::test]
    async fn the_flush_keeps_retries_within_its_window() {
        let o = Outbox::new(10, None, BySignal::default());
        let retry = Retry::default();
        let mut t = Trying {
            backoff: Backoff::new(&retry),
            failing: true,
            flushing: false,
            asked: false,
            retry,
        };
        for _ in 0..6 {
            t.backoff.next(None);
        }
        assert!(
            o.retry_wait(&mut t, None) >= Duration::from_secs(15),
            "before the flush"
        );
        o.close(Instant::now() + Duration::from_secs(10));
        let waits: Vec<Duration> = (0..8).map(|_| o.retry_wait(&mut t, None)).collect();
        assert!(waits[0] <= Duration::from_secs(1), "{waits:?}");
        assert!(
            waits.iter().all(|w| *w <= Duration::from_secs(1)),
            "{waits:?}"
        );
        let asked = o.retry_wait(&mut t, Some(Duration::from_secs(5)));
        assert_eq!(asked, Duration::from_secs(5));
    }
}
