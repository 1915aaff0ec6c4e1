//! Where finished spans and metric ticks go: one list of outputs sharing one trait, fed by
//! the loop in one place. The OTLP/file sink, the Prometheus endpoint, the terminal summary
//! and the compare keeper are such outputs; a new one implements [`Output`] and is added to
//! the list where the command line builds it (`cli/outputs.rs`), and the loop does not change.
use std::any::Any;

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest as Metrics;

use crate::signals::ReadySpan;

/// One output of the loop. Every method has a default that ignores what it is given, so an
/// output implements only what it takes.
pub trait Output: AsAny + Send {
    /// Spans ready to leave, in the order they finished (after the trace budget folded
    /// them), with the `Started` announcements among them.
    fn spans(&mut self, spans: &[ReadySpan]) {
        let _ = spans;
    }

    /// The last output of the list is handed the spans themselves, so the sink sends them
    /// on without a copy. By default it looks at them as the others do.
    fn take_spans(&mut self, spans: Vec<ReadySpan>) {
        self.spans(&spans);
    }

    /// One metrics tick's request.
    fn metrics(&mut self, req: &Metrics) {
        let _ = req;
    }

    /// As [`Self::take_spans`], for the last output of the list.
    fn take_metrics(&mut self, req: Metrics) {
        self.metrics(&req);
    }

    /// The agent is over its memory limit: what the output holds in memory goes to disk or
    /// is dropped, counted. Returns how many items moved.
    fn relieve_memory(&mut self) -> u64 {
        0
    }
}

/// An output as itself, for the command that made it to read it back at the end: every
/// output has it.
pub trait AsAny: Any {
    fn as_any(&self) -> &dyn Any;
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
}

impl<T: Any> AsAny for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// The list, in the order each is fed. The last is handed the data itself.
#[derive(Default)]
pub struct Outputs(Vec<Box<dyn Output>>);

impl Outputs {
    pub fn new(list: Vec<Box<dyn Output>>) -> Self {
        Self(list)
    }

    pub fn spans(&mut self, spans: Vec<ReadySpan>) {
        if spans.is_empty() {
            return;
        }
        if let Some((last, rest)) = self.0.split_last_mut() {
            rest.iter_mut().for_each(|o| o.spans(&spans));
            last.take_spans(spans);
        }
    }

    pub fn metrics(&mut self, req: Metrics) {
        if let Some((last, rest)) = self.0.split_last_mut() {
            rest.iter_mut().for_each(|o| o.metrics(&req));
            last.take_metrics(req);
        }
    }

    pub fn relieve_memory(&mut self) -> u64 {
        self.0.iter_mut().map(|o| o.relieve_memory()).sum()
    }

    /// The output of type `T`, if the list has one.
    #[cfg(test)]
    pub(crate) fn get<T: Output>(&self) -> Option<&T> {
        self.0
            .iter()
            .find_map(|o| o.as_ref().as_any().downcast_ref::<T>())
    }

    /// Takes the output of type `T` out of the list (at the end of a run).
    pub fn take<T: Output>(&mut self) -> Option<T> {
        let at = (self.0.iter()).position(|o| o.as_ref().as_any().is::<T>())?;
        let any = self.0.remove(at).into_any();
        any.downcast::<T>().ok().map(|b| *b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts what it is given, and whether it was handed the spans themselves.
    #[derive(Default)]
    struct Counter {
        seen: usize,
        taken: usize,
        metrics: usize,
    }

    impl Output for Counter {
        fn spans(&mut self, spans: &[ReadySpan]) {
            self.seen += spans.len();
        }
        fn take_spans(&mut self, spans: Vec<ReadySpan>) {
            self.taken += spans.len();
        }
        fn metrics(&mut self, _: &Metrics) {
            self.metrics += 1;
        }
    }

    struct Other;
    impl Output for Other {}

    fn span() -> ReadySpan {
        crate::signals::tests_support::ready_span(1)
    }

    #[test]
    fn every_output_is_fed_and_the_last_is_handed_the_spans() {
        let mut outs = Outputs::new(vec![Box::new(Counter::default()), Box::new(Other)]);
        outs.spans(vec![span(), span()]);
        outs.metrics(Metrics::default());
        let c = outs.get::<Counter>().unwrap();
        assert_eq!((c.seen, c.taken, c.metrics), (2, 0, 1));
        let mut outs = Outputs::new(vec![Box::new(Other), Box::new(Counter::default())]);
        outs.spans(vec![span()]);
        outs.metrics(Metrics::default());
        let c = outs.take::<Counter>().unwrap();
        assert_eq!((c.seen, c.taken, c.metrics), (0, 1, 1));
        assert!(outs.get::<Counter>().is_none(), "taken out of the list");
        assert!(outs.get::<Other>().is_some());
    }
}
