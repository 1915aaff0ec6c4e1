//! Export: a bounded queue of finished spans, batched to OTLP and/or an OTLP JSON lines file.
mod jsonl;
pub mod metrics;
mod otlp;
pub mod summary;

use std::{
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use opentelemetry::KeyValue;
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_sdk::{
    Resource,
    trace::{SpanData, SpanExporter as _},
};
use pipetrace_semconv::attr;
use tokio::sync::mpsc;

use crate::{host::HostInfo, signals::Signal};
pub use otlp::OtlpError;

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Otlp(#[from] OtlpError),
    #[error("cannot open the trace file {path}: {source}; choose another with --output")]
    File {
        path: String,
        source: std::io::Error,
    },
}

/// Counters the summary and self-telemetry report. Nothing is dropped without a count.
#[derive(Debug, Default)]
pub struct ExportStats {
    pub queued: AtomicU64,
    pub exported_otlp: AtomicU64,
    pub written_file: AtomicU64,
    /// Spans refused because the queue was full.
    pub dropped_queue_full: AtomicU64,
    /// Spans whose OTLP export failed.
    pub failed_otlp: AtomicU64,
    /// Spans that could not be written to the trace file.
    pub failed_file: AtomicU64,
}

/// Where telemetry goes, in words, for the summary.
#[derive(Clone, Debug, Default)]
pub struct Destinations {
    pub otlp: Option<String>,
    pub file: Option<PathBuf>,
}

pub struct Exporter {
    tx: mpsc::Sender<Signal>,
    stats: Arc<ExportStats>,
    task: tokio::task::JoinHandle<()>,
    pub destinations: Destinations,
}

pub fn resource(cfg: &pipetrace_config::Config, host: &HostInfo) -> Resource {
    let service = cfg
        .service_name
        .clone()
        .unwrap_or_else(|| "pipetrace".into());
    let mut attrs = vec![
        KeyValue::new(attr::SERVICE_NAME, service),
        KeyValue::new(attr::HOST_NAME, host.host_name.clone()),
        KeyValue::new(attr::HOST_ID, host.host_id.clone()),
    ];
    attrs.extend(
        cfg.resource_attributes
            .iter()
            .map(|(k, v)| KeyValue::new(k.clone(), v.clone())),
    );
    Resource::builder_empty().with_attributes(attrs).build()
}

impl Exporter {
    /// `default_file` is used when the config names no file and no OTLP endpoint.
    pub fn start(
        cfg: &pipetrace_config::Config,
        host: &HostInfo,
        default_file: PathBuf,
    ) -> Result<Self, ExportError> {
        let endpoint = cfg.export.otlp.traces_endpoint();
        let mut otlp = match &endpoint {
            Some(ep) => Some(otlp::build(&cfg.export.otlp, ep)?),
            None => None,
        };
        let file_path = cfg
            .export
            .file
            .clone()
            .or(endpoint.is_none().then_some(default_file));
        let mut file = match &file_path {
            Some(p) => Some(
                jsonl::JsonLines::create(p).map_err(|source| ExportError::File {
                    path: p.display().to_string(),
                    source,
                })?,
            ),
            None => None,
        };
        let res = resource(cfg, host);
        if let Some(e) = otlp.as_mut() {
            e.set_resource(&res);
        }
        let schema = ResourceAttributesWithSchema::from(&res);
        let (tx, mut rx) = mpsc::channel::<Signal>(cfg.export.queue_spans);
        let stats = Arc::new(ExportStats::default());
        let st = stats.clone();
        let (batch_max, batch_wait) = (cfg.export.batch_spans, cfg.export.batch_timeout);
        let task = tokio::spawn(async move {
            let mut batch: Vec<SpanData> = Vec::with_capacity(batch_max);
            loop {
                let closed = fill(&mut rx, &mut batch, batch_max, batch_wait).await;
                if !batch.is_empty() {
                    let spans = std::mem::take(&mut batch);
                    let n = spans.len() as u64;
                    // Copy the batch only when two sinks each need one.
                    let (for_file, spans) = match (&file, &otlp) {
                        (Some(_), Some(_)) => (Some(spans.clone()), spans),
                        (Some(_), None) => (Some(spans), Vec::new()),
                        (None, _) => (None, spans),
                    };
                    if let (Some(f), Some(for_file)) = (file.as_mut(), for_file) {
                        match f.write(for_file, &schema) {
                            Ok(()) => st.written_file.fetch_add(n, Ordering::Relaxed),
                            Err(e) => {
                                log::error!("writing {}: {e}", f.path().display());
                                st.failed_file.fetch_add(n, Ordering::Relaxed)
                            }
                        };
                    }
                    if let Some(e) = otlp.as_ref() {
                        match e.export(spans).await {
                            Ok(()) => st.exported_otlp.fetch_add(n, Ordering::Relaxed),
                            Err(err) => {
                                log::warn!("OTLP export of {n} spans failed: {err}");
                                st.failed_otlp.fetch_add(n, Ordering::Relaxed)
                            }
                        };
                    }
                }
                if closed {
                    break;
                }
            }
            if let Some(mut e) = otlp {
                let _ = e.shutdown();
            }
        });
        let destinations = Destinations {
            otlp: endpoint,
            file: file_path,
        };
        Ok(Self {
            tx,
            stats,
            task,
            destinations,
        })
    }

    pub fn send(&self, s: Signal) {
        match self.tx.try_send(s) {
            Ok(()) => self.stats.queued.fetch_add(1, Ordering::Relaxed),
            Err(_) => self
                .stats
                .dropped_queue_full
                .fetch_add(1, Ordering::Relaxed),
        };
    }

    pub fn stats(&self) -> Arc<ExportStats> {
        self.stats.clone()
    }

    /// Sends what is queued, waiting at most `timeout`. Returns false if time ran out.
    pub async fn shutdown(self, timeout: Duration) -> bool {
        drop(self.tx);
        tokio::time::timeout(timeout, self.task).await.is_ok()
    }
}

/// Waits for the first span, then gathers more until the batch is full or `wait` passed.
/// Returns true when the queue is closed and empty.
async fn fill(
    rx: &mut mpsc::Receiver<Signal>,
    batch: &mut Vec<SpanData>,
    max: usize,
    wait: Duration,
) -> bool {
    match rx.recv().await {
        Some(s) => batch.push(s.span),
        None => return true,
    }
    let deadline = tokio::time::Instant::now() + wait;
    while batch.len() < max {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(s)) => batch.push(s.span),
            Ok(None) => return true,
            Err(_) => break,
        }
    }
    false
}
