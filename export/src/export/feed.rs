//! The sink's one feeder: takes spans and metric requests from their queues, batches the
//! spans, writes each file, and encodes what goes over OTLP once, into its outbox.
use std::{
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
use prost::Message;
use tokio::{sync::mpsc, time::Instant};

use super::{
    jsonl::JsonLines,
    otlp::{Batch, BySignal, Outbox},
    stats::{SinkStats, StreamStats},
};

/// Where each signal goes: a file, an outbox, both or neither.
pub(super) struct Outputs {
    pub files: BySignal<Option<JsonLines>>,
    pub outbox: BySignal<Option<Arc<Outbox>>>,
}

pub(super) struct Feed {
    pub spans: mpsc::UnboundedReceiver<Vec<SpanData>>,
    /// Spans in the queue now: the sender bounds it.
    pub spans_queued: Arc<AtomicUsize>,
    pub metrics: mpsc::Receiver<ExportMetricsServiceRequest>,
    pub out: Outputs,
    pub resource: ResourceAttributesWithSchema,
    /// The resource as protobuf, encoded once for every request.
    pub encoded: super::otlp::encode::Resource,
    pub stats: Arc<SinkStats>,
    pub batch_max: usize,
    pub batch_wait: Duration,
    /// OTel's span and attribute limits, applied before any output.
    pub limits: pipetrace_config::SpanLimits,
}

impl Feed {
    /// Runs until both queues are closed and empty, everything handed on.
    pub(crate) async fn run(mut self) {
        let mut batch: Vec<SpanData> = Vec::with_capacity(self.batch_max);
        let mut due = Instant::now();
        let (mut spans_open, mut metrics_open) = (true, true);
        while spans_open || metrics_open {
            tokio::select! {
                s = self.spans.recv(), if spans_open => match s {
                    Some(spans) => {
                        if batch.is_empty() {
                            due = Instant::now() + self.batch_wait;
                        }
                        self.take(&mut batch, spans);
                        // Whatever else is queued joins without a turn of the loop each.
                        while batch.len() < self.batch_max {
                            match self.spans.try_recv() {
                                Ok(spans) => self.take(&mut batch, spans),
                                Err(_) => break,
                            }
                        }
                        while batch.len() >= self.batch_max {
                            let rest = batch.split_off(self.batch_max);
                            self.spans_out(&mut batch).await;
                            batch = rest;
                        }
                    }
                    None => spans_open = false,
                },
                m = self.metrics.recv(), if metrics_open => match m {
                    Some(req) => self.metrics_out(req).await,
                    None => metrics_open = false,
                },
                _ = tokio::time::sleep_until(due), if !batch.is_empty() => {
                    self.spans_out(&mut batch).await;
                }
            }
        }
        self.spans_out(&mut batch).await;
    }

    /// Takes spans off the queue into the batch.
    fn take(&self, batch: &mut Vec<SpanData>, spans: Vec<SpanData>) {
        self.spans_queued.fetch_sub(spans.len(), Relaxed);
        batch.extend(spans);
    }

    async fn spans_out(&mut self, batch: &mut Vec<SpanData>) {
        if batch.is_empty() {
            return;
        }
        let mut spans = std::mem::replace(batch, Vec::with_capacity(self.batch_max));
        let n = spans.len() as u64;
        // Once, before the file and OTLP: both carry the same spans.
        for s in &mut spans {
            super::limits::apply(s, &self.limits, &self.stats.limits);
        }
        if let Some(f) = self.out.files.traces.as_mut() {
            let written = f.write_spans(&spans, &self.resource);
            count_written(&self.stats.spans, f, n, written);
        }
        if let Some(o) = &self.out.outbox.traces {
            let body = super::otlp::encode::trace_request(&spans, &self.encoded);
            o.push(Batch {
                kind: SignalKind::Traces,
                items: n,
                body: body.into(),
            })
            .await;
        }
    }

    async fn metrics_out(&mut self, req: ExportMetricsServiceRequest) {
        if let Some(f) = self.out.files.metrics.as_mut() {
            let written = f.write_metrics(&req);
            count_written(&self.stats.metrics, f, 1, written);
        }
        if let Some(o) = &self.out.outbox.metrics {
            o.push(Batch {
                kind: SignalKind::Metrics,
                items: 1,
                body: req.encode_to_vec().into(),
            })
            .await;
        }
    }
}

fn count_written(stats: &StreamStats, f: &JsonLines, n: u64, written: std::io::Result<()>) {
    match written {
        Ok(()) => stats.written_file.fetch_add(n, Relaxed),
        Err(e) => {
            log::error!("writing {}: {e}", f.path().display());
            stats.failed_file.fetch_add(n, Relaxed)
        }
    };
}
