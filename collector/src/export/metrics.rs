//! The metrics sink: OTLP over gRPC or HTTP/protobuf (through the shared outbox, with its
//! retries and spool), and/or an OTLP JSON lines file.
use std::{
    io::Write,
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use pipetrace_config::SignalKind;
use prost::Message;
use tokio::sync::mpsc;

use super::otlp::{Batch, OutboxStats, Sender};

/// Counters of metric exports (requests, one per interval).
#[derive(Debug, Default)]
pub struct MetricStats {
    pub written_file: AtomicU64,
    pub failed_file: AtomicU64,
    /// Requests refused because the queue was full (the exporter is far behind).
    pub dropped: AtomicU64,
    /// What became of the requests sent over OTLP.
    pub otlp: Arc<OutboxStats>,
}

impl MetricStats {
    /// Requests refused for good by the endpoint, or not written to the file.
    pub fn failed(&self) -> u64 {
        self.failed_file.load(Ordering::Relaxed) + self.otlp.failed.load(Ordering::Relaxed)
    }

    /// Requests dropped: the exporter was far behind, or neither memory nor spool had room.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed) + self.otlp.dropped.load(Ordering::Relaxed)
    }
}

pub struct MetricsExporter {
    tx: mpsc::Sender<ExportMetricsServiceRequest>,
    pub stats: Arc<MetricStats>,
    task: tokio::task::JoinHandle<()>,
    sender: Option<Sender>,
    pub destinations: super::Destinations,
}

impl MetricsExporter {
    /// Sends to the OTLP metrics endpoint if one is configured, and to `file` if given; to
    /// neither when `metrics.enabled` is false.
    pub fn start(
        cfg: &pipetrace_config::Config,
        file: Option<PathBuf>,
    ) -> Result<Self, super::ExportError> {
        // Metrics off: no connection, and no file (an empty one would suggest there were some).
        let on = cfg.metrics.enabled;
        let file = file.filter(|_| on);
        let endpoint = cfg.export.otlp.resolve(SignalKind::Metrics).filter(|_| on);
        let sender = match &endpoint {
            Some(ep) => Some(Sender::start(SignalKind::Metrics, ep, &cfg.export)?),
            None => None,
        };
        let outbox = sender.as_ref().map(|s| s.outbox.clone());
        let mut out =
            match &file {
                Some(p) => Some(super::jsonl::open_append(p).map_err(|source| {
                    super::ExportError::File {
                        path: p.display().to_string(),
                        source,
                    }
                })?),
                None => None,
            };
        // A few intervals' worth: each request carries every series.
        let (tx, mut rx) = mpsc::channel::<ExportMetricsServiceRequest>(8);
        let stats = Arc::new(MetricStats {
            otlp: outbox.as_ref().map(|o| o.stats.clone()).unwrap_or_default(),
            ..Default::default()
        });
        let st = stats.clone();
        let path = file.clone();
        let task = tokio::spawn(async move {
            while let Some(req) = rx.recv().await {
                if let Some(f) = out.as_mut() {
                    let line = serde_json::to_vec(&req).map_err(std::io::Error::from);
                    let written = line.and_then(|mut l| {
                        l.push(b'\n');
                        f.write_all(&l)?;
                        f.flush()
                    });
                    match written {
                        Ok(()) => st.written_file.fetch_add(1, Ordering::Relaxed),
                        Err(e) => {
                            let p = path.as_ref().map(|p| p.display().to_string());
                            log::error!("writing metrics to {}: {e}", p.unwrap_or_default());
                            st.failed_file.fetch_add(1, Ordering::Relaxed)
                        }
                    };
                }
                if let Some(o) = outbox.as_ref() {
                    let batch = Batch {
                        items: 1,
                        body: req.encode_to_vec().into(),
                    };
                    o.push(batch).await;
                }
            }
        });
        Ok(Self {
            tx,
            stats,
            task,
            sender,
            destinations: super::Destinations {
                otlp: endpoint.map(|e| e.url),
                file,
            },
        })
    }

    pub fn send(&self, req: ExportMetricsServiceRequest) {
        if self.tx.try_send(req).is_err() {
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Moves requests waiting in memory to the spool (or drops them, counted).
    pub fn spill(&self) -> u64 {
        self.sender.as_ref().map_or(0, |s| s.outbox.spill())
    }

    /// Sends what is queued, waiting at most `timeout`. Returns false if time ran out; the
    /// rest then goes to the spool, or is counted as dropped.
    pub async fn shutdown(self, timeout: Duration) -> bool {
        drop(self.tx);
        Sender::finish(self.task, self.sender, timeout).await
    }
}
