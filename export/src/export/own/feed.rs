//! The agent's own spans on their way out: batched, encoded with their own resource, and
//! sent over the traces connection through a small outbox of their own, so that they never
//! delay or displace a pipeline's data, and are flushed after it.
use std::{sync::Arc, time::Duration};

use opentelemetry::KeyValue;
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_sdk::{Resource, trace::SpanData};
use pipetrace_config::{Export, SignalKind};
use pipetrace_semconv::attr;
use tokio::{sync::mpsc, time::Instant};

use super::{super::SinkStats, SCOPE};
use crate::export::otlp::{Batch, BySignal, Client, Outbox, Sender};

/// Own spans waiting to be batched at most; past it they are dropped, counted.
const QUEUE: usize = 4096;
/// Encoded own spans waiting to be sent at most.
const QUEUE_BYTES: u64 = 4 << 20;

pub struct OwnSink {
    feed: tokio::task::JoinHandle<()>,
    sender: Sender,
    own: Option<super::OwnSpans>,
}

/// The pipeline's resource, as service `pipetrace.self` of this version.
fn own_resource(pipeline: &Resource) -> Resource {
    let kept = pipeline
        .iter()
        .filter(|(k, _)| k.as_str() != attr::SERVICE_NAME)
        .map(|(k, v)| KeyValue::new(k.clone(), v.clone()));
    let own = [
        KeyValue::new(attr::SERVICE_NAME, SCOPE),
        KeyValue::new("service.version", env!("CARGO_PKG_VERSION")),
    ];
    Resource::builder_empty()
        .with_attributes(kept.chain(own))
        .build()
}

impl OwnSink {
    /// Starts taking the agent's own spans, to be sent over `client`.
    pub(crate) fn start(
        client: Arc<Client>,
        cfg: &Export,
        pipeline: &Resource,
        stats: Arc<SinkStats>,
    ) -> Self {
        let counters = stats.own_spans.otlp.clone();
        let by_signal = BySignal {
            traces: counters.clone(),
            metrics: counters,
        };
        let outbox = Arc::new(Outbox::new(QUEUE_BYTES, None, by_signal).untraced());
        let sender = Sender::over(outbox.clone(), client, cfg.retry.clone());
        let (tx, rx) = mpsc::channel(QUEUE);
        let own = ResourceAttributesWithSchema::from(&own_resource(pipeline));
        let resource = crate::export::otlp::encode::Resource::encode(&own);
        let batching = (cfg.batch_spans, cfg.batch_timeout);
        let feed = tokio::spawn(feed(rx, outbox, resource, batching));
        // Where no layer takes the agent's spans (a test's subscriber), none come.
        let own = super::OwnSpans::installed();
        if let Some(own) = &own {
            own.attach(tx, stats);
        }
        Self { feed, sender, own }
    }

    /// Moves what waits in memory out (there is no spool for these: dropped, counted).
    pub(crate) fn spill(&self) -> u64 {
        self.sender.outbox.spill()
    }

    /// Takes no more spans, and sends those taken until `deadline`. True when all went.
    pub(crate) async fn shutdown(self, deadline: Instant) -> bool {
        if let Some(own) = &self.own {
            own.detach();
        }
        let fed = tokio::time::timeout_at(deadline, self.feed).await.is_ok();
        self.sender.shutdown(deadline, false).await.0 && fed
    }
}

async fn feed(
    mut rx: mpsc::Receiver<SpanData>,
    outbox: Arc<Outbox>,
    resource: crate::export::otlp::encode::Resource,
    (max, wait): (usize, Duration),
) {
    let mut batch = Vec::with_capacity(max);
    loop {
        let closed = fill(&mut rx, &mut batch, max, wait).await;
        if !batch.is_empty() {
            let spans = std::mem::take(&mut batch);
            let items = spans.len() as u64;
            let body = crate::export::otlp::encode::trace_request(&spans, &resource).into();
            outbox
                .push(Batch {
                    kind: SignalKind::Traces,
                    items,
                    body,
                })
                .await;
        }
        if closed {
            return;
        }
    }
}

/// Waits for the first span, then gathers more until the batch is full or `wait` passed.
/// Returns true when the queue is closed and empty.
async fn fill(
    rx: &mut mpsc::Receiver<SpanData>,
    batch: &mut Vec<SpanData>,
    max: usize,
    wait: Duration,
) -> bool {
    match rx.recv().await {
        Some(s) => batch.push(s),
        None => return true,
    }
    let deadline = Instant::now() + wait;
    while batch.len() < max {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(s)) => batch.push(s),
            Ok(None) => return true,
            Err(_) => break,
        }
    }
    false
}
