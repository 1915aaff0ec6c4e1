//! pipetrace's own spans (`self_telemetry.traces`): `tracing` spans of the agent's work go
//! through tracing-opentelemetry into an OpenTelemetry SDK tracer, whose exporter hands each
//! finished span to the running sink. They leave over the traces endpoint's connection as
//! service and scope `pipetrace.self`, apart from every pipeline's trace.
mod feed;

use std::sync::{
    Arc, Mutex,
    atomic::{AtomicBool, Ordering::Relaxed},
};

use opentelemetry::{InstrumentationScope, trace::TracerProvider};
use opentelemetry_sdk::{
    error::OTelSdkResult,
    trace::{SdkTracerProvider, SpanData, SpanExporter},
};
use tokio::sync::mpsc;
use tracing::{Metadata, Subscriber, level_filters::LevelFilter, subscriber::Interest};
use tracing_subscriber::{
    Layer,
    layer::{Context, Filter},
    registry::LookupSpan,
};

use super::SinkStats;
pub(super) use feed::OwnSink;

/// The scope, and the service, of the agent's own spans.
pub const SCOPE: &str = "pipetrace.self";

/// Spans kept while no sink runs yet (the probes load before the sink starts).
const PENDING_MAX: usize = 256;

/// Where the agent's own spans stand: whether they are taken, and where they go. The layer
/// owns it (installed once, in the process's subscriber); the sink finds it there.
#[derive(Clone, Default)]
pub struct OwnSpans(Arc<Shared>);

#[derive(Default)]
struct Shared {
    capture: AtomicBool,
    slot: Mutex<Slot>,
}

/// Where a finished span goes: the running sink's queue, or the pending list before it runs.
#[derive(Default)]
struct Slot {
    tx: Option<mpsc::Sender<SpanData>>,
    /// Kept once a sink has run, so that a span ending after it stopped is counted.
    stats: Option<Arc<SinkStats>>,
    pending: Vec<SpanData>,
    /// Spans with no room in the pending list, counted into the sink's drops when it starts.
    lost: u64,
}

impl OwnSpans {
    /// The one of the layer in the current subscriber; none where no layer is installed.
    pub fn installed() -> Option<Self> {
        tracing::dispatcher::get_default(|d| d.downcast_ref::<Own>().map(|o| o.0.clone()))
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Slot> {
        self.0.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts (or stops) taking the agent's own spans, from now on.
    pub fn capture(&self, on: bool) {
        if self.0.capture.swap(on, Relaxed) != on {
            // The filter's answers and level hint changed: callsites must ask it again.
            tracing::callsite::rebuild_interest_cache();
        }
    }

    fn capturing(&self) -> bool {
        self.0.capture.load(Relaxed)
    }

    /// Hands one finished span on; never blocks, and counts what finds no room.
    fn hand(&self, span: SpanData) {
        let mut s = self.slot();
        let Some(stats) = s.stats.clone() else {
            if s.pending.len() < PENDING_MAX {
                s.pending.push(span);
            } else {
                s.lost += 1;
            }
            return;
        };
        let own = &stats.own_spans;
        let taken = s.tx.as_ref().is_some_and(|tx| tx.try_send(span).is_ok());
        match taken {
            true => own.queued.fetch_add(1, Relaxed),
            false => own.dropped_queue_full.fetch_add(1, Relaxed),
        };
    }

    /// A sink starts taking the agent's own spans: first those that waited for it.
    fn attach(&self, tx: mpsc::Sender<SpanData>, stats: Arc<SinkStats>) {
        let mut s = self.slot();
        let (pending, lost) = (std::mem::take(&mut s.pending), std::mem::take(&mut s.lost));
        stats.own_spans.dropped_queue_full.fetch_add(lost, Relaxed);
        s.tx = Some(tx);
        s.stats = Some(stats);
        drop(s);
        pending.into_iter().for_each(|span| self.hand(span));
    }

    /// The sink stops: no more spans are taken, and its queue closes once drained.
    fn detach(&self) {
        self.capture(false);
        self.slot().tx = None;
    }
}

/// The SDK's exporter: each span to the sink, as it ends.
struct ToSink(OwnSpans);

impl std::fmt::Debug for ToSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ToSink")
    }
}

impl SpanExporter for ToSink {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        batch.into_iter().for_each(|span| self.0.hand(span));
        Ok(())
    }
}

/// Which of the agent's own callsites become spans (or events on them): its spans, and its
/// warnings and errors, while capture is on.
struct Own(OwnSpans);

fn wanted(meta: &Metadata<'_>) -> bool {
    let level = if meta.is_span() {
        LevelFilter::INFO
    } else {
        LevelFilter::WARN
    };
    meta.target().starts_with("pipetrace") && level >= *meta.level()
}

impl<S> Filter<S> for Own {
    fn enabled(&self, meta: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        self.0.capturing() && wanted(meta)
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        // Bridged log records share a few callsites: their target is known per record.
        match self.0.capturing() && (wanted(meta) || meta.target() == "log") {
            true => Interest::sometimes(),
            false => Interest::never(),
        }
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(match self.0.capturing() {
            true => LevelFilter::INFO,
            false => LevelFilter::OFF,
        })
    }
}

/// The layer that turns the agent's own spans into OpenTelemetry spans of scope
/// [`SCOPE`]; it takes nothing until [`OwnSpans::capture`] is on.
pub fn layer<S>(own: OwnSpans) -> impl Layer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(ToSink(own.clone()))
        .build();
    let scope = InstrumentationScope::builder(SCOPE)
        .with_version(env!("CARGO_PKG_VERSION"))
        .build();
    let tracer = provider.tracer_with_scope(scope);
    tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(Own(own))
}

#[cfg(test)]
mod tests;
