//! Export: a bounded queue of finished spans, batched to OTLP and/or an OTLP JSON lines file.
mod jsonl;
pub mod metrics;
pub mod otlp;
pub mod paths;
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
use opentelemetry_proto::{
    tonic::collector::trace::v1::ExportTraceServiceRequest,
    transform::{
        common::tonic::ResourceAttributesWithSchema,
        trace::tonic::group_spans_by_resource_and_scope,
    },
};
use opentelemetry_sdk::{Resource, trace::SpanData};
use pipetrace_config::SignalKind;
use pipetrace_semconv::attr;
use prost::Message;
use tokio::sync::mpsc;

use crate::{host::HostInfo, signals::ReadySpan};
pub use otlp::OutboxStats;

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Otlp(#[from] otlp::StartError),
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
    pub written_file: AtomicU64,
    /// Spans refused because the queue was full.
    pub dropped_queue_full: AtomicU64,
    /// Spans that could not be written to the trace file.
    pub failed_file: AtomicU64,
    /// What became of the spans sent over OTLP.
    pub otlp: Arc<OutboxStats>,
}

/// Where telemetry goes, in words, for the summary.
#[derive(Clone, Debug, Default)]
pub struct Destinations {
    pub otlp: Option<String>,
    pub file: Option<PathBuf>,
}

pub struct Exporter {
    tx: mpsc::Sender<ReadySpan>,
    stats: Arc<ExportStats>,
    task: tokio::task::JoinHandle<()>,
    sender: Option<otlp::Sender>,
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
        KeyValue::new(attr::OS_TYPE, crate::host::OS_TYPE),
    ];
    // What the machine says of itself; left out where it says nothing.
    let c = &host.cloud;
    attrs.extend(
        [
            (attr::HOST_ARCH, host.arch.clone()),
            (attr::OS_VERSION, host.os_version.clone()),
            (attr::CLOUD_PROVIDER, c.provider.map(str::to_string)),
            (attr::HOST_TYPE, c.host_type.clone()),
            (attr::CLOUD_REGION, c.region.clone()),
        ]
        .into_iter()
        .filter_map(|(k, v)| Some(KeyValue::new(k, v?))),
    );
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
        let endpoint = cfg.export.otlp.resolve(SignalKind::Traces);
        let sender = match &endpoint {
            Some(ep) => Some(otlp::Sender::start(SignalKind::Traces, ep, &cfg.export)?),
            None => None,
        };
        let outbox = sender.as_ref().map(|s| s.outbox.clone());
        let endpoint = endpoint.map(|e| e.url);
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
        let schema = ResourceAttributesWithSchema::from(&res);
        let (tx, mut rx) = mpsc::channel::<ReadySpan>(cfg.export.queue_spans);
        let stats = Arc::new(ExportStats {
            otlp: outbox.as_ref().map(|o| o.stats.clone()).unwrap_or_default(),
            ..Default::default()
        });
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
                    let (for_file, spans) = match (&file, &outbox) {
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
                    if let Some(o) = outbox.as_ref() {
                        let req = ExportTraceServiceRequest {
                            resource_spans: group_spans_by_resource_and_scope(spans, &schema),
                        };
                        let batch = otlp::Batch {
                            items: n,
                            body: req.encode_to_vec().into(),
                        };
                        o.push(batch).await;
                    }
                }
                if closed {
                    break;
                }
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
            sender,
            destinations,
        })
    }

    pub fn send(&self, s: ReadySpan) {
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

    /// Moves batches waiting in memory to the spool (or drops them, counted).
    pub fn spill(&self) -> u64 {
        self.sender.as_ref().map_or(0, |s| s.outbox.spill())
    }

    /// Sends what is queued, waiting at most `timeout`. Returns false if time ran out; what
    /// is still unsent then goes to the spool, or is counted as dropped.
    pub async fn shutdown(self, timeout: Duration) -> bool {
        drop(self.tx);
        otlp::Sender::finish(self.task, self.sender, timeout).await
    }
}

/// Waits for the first span, then gathers more until the batch is full or `wait` passed.
/// Returns true when the queue is closed and empty.
async fn fill(
    rx: &mut mpsc::Receiver<ReadySpan>,
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
