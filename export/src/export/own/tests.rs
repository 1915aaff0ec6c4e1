use super::*;
use tracing_subscriber::layer::SubscriberExt;

/// Spans before the sink wait for it; none after it stops, none of others' callsites.
#[test]
fn own_spans_wait_for_the_sink_then_reach_it_and_others_never_do() {
    let own = OwnSpans::default();
    let sub = tracing_subscriber::registry().with(layer(own.clone()));
    let (tx, mut rx) = mpsc::channel(16);
    let stats = Arc::new(SinkStats::default());
    tracing::subscriber::with_default(sub, || {
        tracing::info_span!(target: "pipetrace::probes", "off").in_scope(|| {});
        let found = OwnSpans::installed().expect("the layer's, in the subscriber");
        assert!(Arc::ptr_eq(&found.0, &own.0));
        own.capture(true);
        tracing::info_span!(target: "pipetrace::probes", "early").in_scope(|| {});
        tracing::info_span!(target: "h2::proto", "not ours").in_scope(|| {});
        tracing::debug_span!(target: "pipetrace::export", "too fine").in_scope(|| {});
        own.attach(tx, stats.clone());
        tracing::info_span!(target: "pipetrace::export", "late").in_scope(|| {
            tracing::warn!(target: "pipetrace::export", "retrying");
        });
        own.detach();
        tracing::info_span!(target: "pipetrace::export", "after").in_scope(|| {});
    });
    let mut got = Vec::new();
    while let Ok(s) = rx.try_recv() {
        assert_eq!(s.instrumentation_scope.name(), SCOPE);
        got.push((s.name.to_string(), s.events.len()));
    }
    assert_eq!(got, [("early".into(), 0), ("late".into(), 1)]);
    assert_eq!(stats.own_spans.queued.load(Relaxed), 2);
    assert_eq!(stats.own_spans.dropped(), 0);
}
