//! Where finished spans and metric ticks go: one fan-out, fed by the loop in one place.
//! The sink (files and OTLP endpoints, each destination with its own queue and retry) is
//! handed the data itself; the views beside it (the Prometheus endpoint, and the command
//! crate's terminal summary and compare keeper) look at it as it leaves, and each hands back
//! what it made, typed, when the loop ends. A new view implements [`Output`] and is added
//! where the configuration builds the list (the command crate's assembly); the loop does
//! not change.
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest as Metrics;

use crate::{
    export::{Sink, SinkStats, prometheus::Endpoint},
    signals::ReadySpan,
};

/// One view of what the loop sends. Every method has a default that ignores what it is
/// given, so a view implements only what it takes; `E` is what the views of one command
/// hand back at the end (see [`Output::end`]).
pub trait Output<E>: Send {
    /// Spans ready to leave, in the order they finished (after the trace budget folded
    /// them), with the `Started` announcements among them.
    fn spans(&mut self, spans: &[ReadySpan]) {
        let _ = spans;
    }

    /// One metrics tick's request.
    fn metrics(&mut self, req: &Metrics) {
        let _ = req;
    }

    /// The agent is over its memory limit: what the view holds in memory goes to disk or
    /// is dropped, counted. Returns how many items moved.
    fn relieve_memory(&mut self) -> u64 {
        0
    }

    /// What the view made, for the command to print or write when the loop ends (`None`:
    /// nothing, its work is done as the data leaves).
    fn end(self: Box<Self>) -> Option<E> {
        None
    }
}

/// The Prometheus endpoint serves each metrics tick's figures until the next.
impl<E> Output<E> for Endpoint {
    fn metrics(&mut self, req: &Metrics) {
        self.update(req);
    }
}

/// The views, in the order each is fed, and the sink, handed the data after them.
pub struct Outputs<E> {
    views: Vec<Box<dyn Output<E>>>,
    sink: Sink,
}

impl<E> Outputs<E> {
    pub fn new(views: Vec<Box<dyn Output<E>>>, sink: Sink) -> Self {
        Self { views, sink }
    }

    /// The sink as the loop's only output, with its counts (tests and benches).
    pub fn of_sink(sink: Sink) -> (Self, std::sync::Arc<SinkStats>) {
        let stats = sink.stats();
        (Self::new(Vec::new(), sink), stats)
    }

    pub fn spans(&mut self, spans: Vec<ReadySpan>) {
        if spans.is_empty() {
            return;
        }
        self.views.iter_mut().for_each(|v| v.spans(&spans));
        self.sink.send_all(spans);
    }

    pub fn metrics(&mut self, req: Metrics) {
        self.views.iter_mut().for_each(|v| v.metrics(&req));
        self.sink.send_metrics(req);
    }

    pub fn relieve_memory(&mut self) -> u64 {
        let views: u64 = self.views.iter_mut().map(|v| v.relieve_memory()).sum();
        views + self.sink.spill()
    }

    /// The loop ended: the sink, to flush, and what each view made, in the list's order.
    pub fn end(self) -> (Sink, Vec<E>) {
        let made = self.views.into_iter().filter_map(|v| v.end()).collect();
        (self.sink, made)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts what it is given, and hands back its counts.
    #[derive(Default, Debug, PartialEq)]
    struct Counter {
        seen: usize,
        metrics: usize,
    }

    impl Output<Counter> for Counter {
        fn spans(&mut self, spans: &[ReadySpan]) {
            self.seen += spans.len();
        }
        fn metrics(&mut self, _: &Metrics) {
            self.metrics += 1;
        }
        fn end(self: Box<Self>) -> Option<Counter> {
            Some(*self)
        }
    }

    /// A view with nothing to hand back.
    struct Quiet;
    impl Output<Counter> for Quiet {}

    fn span() -> ReadySpan {
        crate::signals::tests_support::ready_span(1)
    }

    #[tokio::test]
    async fn every_view_is_fed_and_hands_back_what_it_made_and_the_sink_gets_the_data() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t.otlp.jsonl");
        let mut cfg = pipetrace_config::Config::default();
        cfg.export.file = Some(file.clone());
        let host = pipetrace_core::machine::fake_info(&Default::default());
        let sink = Sink::start(&cfg, &host, "/unused".into()).unwrap();
        let views: Vec<Box<dyn Output<Counter>>> =
            vec![Box::new(Quiet), Box::new(Counter::default())];
        let mut outs = Outputs::new(views, sink);
        outs.spans(vec![span(), span()]);
        outs.spans(Vec::new());
        outs.metrics(Metrics::default());
        let (sink, made) = outs.end();
        assert_eq!(
            made,
            [Counter {
                seen: 2,
                metrics: 1
            }]
        );
        assert!(sink.shutdown(std::time::Duration::from_secs(5)).await);
        let lines = std::fs::read_to_string(&file).unwrap();
        assert_eq!(
            lines.lines().count(),
            1,
            "one request of both spans: {lines}"
        );
    }
}
