//! The one sink of everything pipetrace exports: finished spans and metric requests, each
//! queued (bounded), to OTLP over one connection per endpoint and/or to their files.
use std::{
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering::Relaxed},
    },
    time::Duration,
};

use opentelemetry_proto::{
    tonic::collector::metrics::v1::ExportMetricsServiceRequest,
    transform::common::tonic::ResourceAttributesWithSchema,
};
use opentelemetry_sdk::trace::SpanData;
use pipetrace_config::SignalKind;
use tokio::sync::mpsc;

use super::{
    Destinations, ExportError, Place,
    feed::{Feed, Outputs},
    jsonl::JsonLines,
    otlp::{Batch, BySignal, Connections, SpoolAt, unsent},
    own::OwnSink,
    paths,
    stats::{SinkStats, StreamStats},
};
use crate::signals::ReadySpan;
use pipetrace_core::machine::HostInfo;

/// Metric requests waiting at most: a few intervals' worth, each request carries every series.
const METRICS_QUEUE: usize = 8;

pub struct Sink {
    /// Spans go in batches (one wake-up of the feeder each), bounded by their count.
    spans: mpsc::UnboundedSender<Vec<SpanData>>,
    spans_queued: Arc<AtomicUsize>,
    queue_spans: usize,
    metrics: mpsc::Sender<ExportMetricsServiceRequest>,
    stats: Arc<SinkStats>,
    feed: tokio::task::JoinHandle<()>,
    connections: Connections,
    /// The agent's own spans (`self_telemetry.traces`), over the traces connection.
    own: Option<OwnSink>,
    pub destinations: Destinations,
}

fn open(path: &Option<PathBuf>, what: &'static str) -> Result<Option<JsonLines>, ExportError> {
    let Some(p) = path else {
        return Ok(None);
    };
    JsonLines::create(p)
        .map(Some)
        .map_err(|source| ExportError::File {
            what,
            path: p.display().to_string(),
            source,
        })
}

/// Counts an item offered to a queue: taken, or dropped because the queue is full.
fn offer<T>(tx: &mpsc::Sender<T>, item: T, stats: &StreamStats) {
    match tx.try_send(item) {
        Ok(()) => stats.queued.fetch_add(1, Relaxed),
        Err(_) => stats.dropped_queue_full.fetch_add(1, Relaxed),
    };
}

impl Sink {
    /// Connects to the configured endpoints and opens the files. Spans go to the trace file
    /// when one is configured, or to `default_file` when no OTLP endpoint takes them;
    /// metrics (unless `metrics.enabled` is false) beside the trace file, and to their
    /// endpoint.
    pub fn start(
        cfg: &pipetrace_config::Config,
        host: &HostInfo,
        default_file: PathBuf,
    ) -> Result<Self, ExportError> {
        // Metrics off: no connection, and no file (an empty one would suggest there were some).
        let metrics_on = cfg.metrics.enabled;
        let otlp = &cfg.export.otlp;
        let endpoints = BySignal {
            traces: otlp.resolve(SignalKind::Traces),
            metrics: otlp.resolve(SignalKind::Metrics).filter(|_| metrics_on),
        };
        let stats = Arc::new(SinkStats::default());
        let spool = SpoolAt {
            dir: (cfg.export.spool).folder(cfg.diagnosis.state_dir.as_deref()),
            named: cfg.export.spool.dir.is_some(),
        };
        let connections = Connections::start(&endpoints, &cfg.export, &spool, &stats.by_signal())?;
        let trace_file =
            (cfg.export.file.clone()).or(endpoints.traces.is_none().then_some(default_file));
        let metrics_file = (trace_file.as_deref())
            .map(paths::metrics_beside)
            .filter(|_| metrics_on);
        let files = BySignal {
            traces: open(&trace_file, "trace")?,
            metrics: open(&metrics_file, "metrics")?,
        };
        let (spans, spans_rx) = mpsc::unbounded_channel();
        let spans_queued = Arc::new(AtomicUsize::new(0));
        let (metrics, metrics_rx) = mpsc::channel(METRICS_QUEUE);
        let resource = super::resource(cfg, host);
        let with_schema = ResourceAttributesWithSchema::from(&resource);
        let feed = Feed {
            spans: spans_rx,
            spans_queued: spans_queued.clone(),
            metrics: metrics_rx,
            out: Outputs {
                files,
                outbox: connections.outbox.clone(),
            },
            encoded: super::otlp::encode::Resource::encode(&with_schema),
            resource: with_schema,
            stats: stats.clone(),
            batch_max: cfg.export.batch_spans,
            batch_wait: cfg.export.batch_timeout,
            limits: cfg.export.limits.span(),
        };
        let url = |k| endpoints.get(k).as_ref().map(|e| e.url.clone());
        let own = match (cfg.self_telemetry.traces, &connections.client.traces) {
            (true, Some(client)) => Some(OwnSink::start(
                client.clone(),
                &cfg.export,
                &resource,
                stats.clone(),
            )),
            _ => None,
        };
        let destinations = Destinations {
            spans: Place {
                otlp: url(SignalKind::Traces),
                file: trace_file,
            },
            metrics: Place {
                otlp: url(SignalKind::Metrics),
                file: metrics_file,
            },
            own_spans: own.as_ref().and(url(SignalKind::Traces)),
        };
        Ok(Self {
            spans,
            spans_queued,
            queue_spans: cfg.export.queue_spans,
            metrics,
            stats,
            feed: tokio::spawn(feed.run()),
            connections,
            own,
            destinations,
        })
    }

    /// Queues a finished span; a full queue drops it, counted.
    pub fn send(&self, s: ReadySpan) {
        self.send_all(vec![s]);
    }

    /// Queues finished spans together; those a full queue has no room for are dropped,
    /// counted.
    pub(crate) fn send_all(&self, spans: Vec<ReadySpan>) {
        let n = spans.len();
        if n == 0 {
            return;
        }
        let before = self.spans_queued.fetch_add(n, Relaxed);
        let room = self.queue_spans.saturating_sub(before).min(n);
        let stats = &self.stats.spans;
        if room < n {
            self.spans_queued.fetch_sub(n - room, Relaxed);
            stats
                .dropped_queue_full
                .fetch_add((n - room) as u64, Relaxed);
        }
        if room == 0 {
            return;
        }
        let batch: Vec<SpanData> = spans.into_iter().take(room).map(|s| s.span).collect();
        match self.spans.send(batch) {
            Ok(()) => stats.queued.fetch_add(room as u64, Relaxed),
            Err(_) => stats.dropped_queue_full.fetch_add(room as u64, Relaxed),
        };
    }

    /// Queues one metrics export; a full queue drops it, counted.
    pub(crate) fn send_metrics(&self, req: ExportMetricsServiceRequest) {
        offer(&self.metrics, req, &self.stats.metrics);
    }

    pub fn stats(&self) -> Arc<SinkStats> {
        self.stats.clone()
    }

    /// Moves batches waiting in memory to the spool (or drops them, counted).
    pub(crate) fn spill(&self) -> u64 {
        self.connections.spill() + self.own.as_ref().map_or(0, OwnSink::spill)
    }

    /// Sends what is queued, waiting at most `timeout`. Returns false if time ran out; what
    /// is still unsent then goes to the spool, or is counted as dropped.
    pub async fn shutdown(self, timeout: Duration) -> bool {
        self.close(timeout, None).await.0
    }

    /// As [`Self::shutdown`], but what is still unsent when time runs out is kept in
    /// `file` for `pipetrace send` (the end of `pipetrace run`: nothing of the run lost).
    pub async fn shutdown_keeping(self, timeout: Duration, file: &Path) -> (bool, Option<Kept>) {
        self.close(timeout, Some(file)).await
    }

    /// Both signals leave side by side until the deadline. The agent's own spans go last:
    /// sending the rest makes some.
    async fn close(self, timeout: Duration, keep: Option<&Path>) -> (bool, Option<Kept>) {
        let deadline = tokio::time::Instant::now() + timeout;
        drop((self.spans, self.metrics));
        let fed = tokio::time::timeout_at(deadline, self.feed).await.is_ok();
        let (sent, left) = self.connections.shutdown(deadline, keep.is_some()).await;
        let kept = keep
            .filter(|_| !left.is_empty())
            .map(|file| keep_in(file, &left, &self.stats));
        let own = match self.own {
            Some(o) => o.shutdown(deadline).await,
            None => true,
        };
        (fed && sent && own, kept)
    }
}

/// What `pipetrace run` could not deliver by its end, kept in a file for `pipetrace send`.
#[derive(Debug)]
pub struct Kept {
    pub path: PathBuf,
    pub spans: u64,
    pub metric_exports: u64,
    /// The file could not be written: those items are counted as dropped.
    pub error: Option<String>,
}

/// Writes the unsent batches to `file`, counting them kept (or dropped when it fails).
fn keep_in(file: &Path, left: &[Arc<Batch>], stats: &SinkStats) -> Kept {
    let written = unsent::write(file, left.iter().map(|b| &**b));
    let of = |k: SignalKind| (left.iter().filter(|b| b.kind == k)).map(|b| b.items).sum();
    let (spans, metric_exports): (u64, u64) = (of(SignalKind::Traces), of(SignalKind::Metrics));
    for (n, s) in [(spans, &stats.spans), (metric_exports, &stats.metrics)] {
        match &written {
            Ok(()) => s.otlp.kept.fetch_add(n, Relaxed),
            Err(_) => s.otlp.dropped.fetch_add(n, Relaxed),
        };
    }
    Kept {
        path: file.to_path_buf(),
        spans,
        metric_exports,
        error: written.err().map(|e| e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipetrace_config::Config;

    fn span(n: u64) -> ReadySpan {
        crate::signals::tests_support::ready_span(n)
    }

    fn lines(p: &std::path::Path) -> Vec<serde_json::Value> {
        let text = std::fs::read_to_string(p).unwrap();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The spans in each line of a trace file.
    fn spans_per_line(p: &std::path::Path) -> Vec<usize> {
        let spans = |l: &serde_json::Value| {
            l["resourceSpans"][0]["scopeSpans"][0]["spans"]
                .as_array()
                .unwrap()
                .len()
        };
        lines(p).iter().map(spans).collect()
    }

    /// A sink writing spans to `t.otlp.jsonl` in `dir`, with a queue of `queue` spans.
    fn file_sink(dir: &std::path::Path, queue: usize, tune: impl FnOnce(&mut Config)) -> Sink {
        let mut cfg = Config::default();
        cfg.export.file = Some(dir.join("t.otlp.jsonl"));
        cfg.export.queue_spans = queue;
        tune(&mut cfg);
        let host = pipetrace_core::machine::fake_info(&Default::default());
        Sink::start(&cfg, &host, "/unused".into()).unwrap()
    }

    /// One sink takes spans and metric requests, writes each to its own file, and counts
    /// what its full queues dropped, per signal.
    #[tokio::test]
    async fn one_sink_carries_both_signals_and_counts_every_drop() {
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("t.otlp.jsonl");
        let sink = file_sink(dir.path(), 2, |_| {});
        let metrics = dir.path().join("t.metrics.otlp.jsonl");
        assert_eq!(sink.destinations.metrics.file.as_deref(), Some(&*metrics));
        // The feeder has not run yet (this runtime has one thread): the queues fill.
        for n in 1..=5 {
            sink.send(span(n));
        }
        for _ in 0..METRICS_QUEUE + 3 {
            sink.send_metrics(ExportMetricsServiceRequest::default());
        }
        let stats = sink.stats();
        assert!(sink.shutdown(Duration::from_secs(5)).await);
        let counts = |s: &StreamStats| {
            let q = s.queued.load(Relaxed);
            (q, s.dropped(), s.written_file.load(Relaxed), s.failed())
        };
        assert_eq!(counts(&stats.spans), (2, 3, 2, 0));
        let m = METRICS_QUEUE as u64;
        assert_eq!(counts(&stats.metrics), (m, 3, m, 0));
        assert_eq!(spans_per_line(&trace).iter().sum::<usize>(), 2);
        assert_eq!(lines(&metrics).len(), METRICS_QUEUE);
    }

    /// Spans queued together are bounded by their count, and leave in batches of at most
    /// `export.batch_spans`.
    #[tokio::test]
    async fn spans_sent_together_fill_the_queue_and_leave_in_bounded_batches() {
        let dir = tempfile::tempdir().unwrap();
        let sink = file_sink(dir.path(), 5, |cfg| {
            cfg.export.batch_spans = 2;
            cfg.metrics.enabled = false;
        });
        sink.send_all((1..=3).map(span).collect());
        sink.send_all((4..=6).map(span).collect());
        sink.send_all(Vec::new());
        let stats = sink.stats();
        assert!(sink.shutdown(Duration::from_secs(5)).await);
        let s = &stats.spans;
        let counts = (
            s.queued.load(Relaxed),
            s.dropped(),
            s.written_file.load(Relaxed),
        );
        assert_eq!(counts, (5, 1, 5));
        let trace = dir.path().join("t.otlp.jsonl");
        assert_eq!(spans_per_line(&trace), [2, 2, 1]);
    }
}
