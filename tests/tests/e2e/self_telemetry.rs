//! `self_telemetry.traces`: pipetrace's own spans (probe attach, each export attempt) reach
//! the backend over the same endpoint as the pipeline's trace, as service and scope
//! `pipetrace.self`, never inside that trace nor in the trace file; off, none leave.
use std::{collections::BTreeSet, path::Path, process::Output};

use pipetrace_e2e::{
    pipetrace, read_jsonl,
    receiver::Receiver,
    spans::{RecvSpan, Val},
    stderr,
};

const SCOPE: &str = "pipetrace.self";

/// `pipetrace run -o FILE --endpoint URL -- sh -c "true; true"` with `env`.
fn run(dir: &Path, url: &str, env: &[(&str, &str)]) -> (Vec<RecvSpan>, Output) {
    let file = dir.join("t.otlp.jsonl");
    let o = pipetrace()
        .envs(env.iter().copied())
        .args(["run", "-o"])
        .arg(&file)
        .args(["--endpoint", url, "--", "sh", "-c", "true; true"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    (read_jsonl(&file), o)
}

fn own(spans: &[RecvSpan]) -> Vec<&RecvSpan> {
    spans.iter().filter(|s| s.scope == SCOPE).collect()
}

/// Own spans on, over `url` (`env` picks the protocol): they arrive with the pipeline's.
async fn own_spans_arrive(rx: &Receiver, url: &str, env: &[(&str, &str)]) {
    let dir = tempfile::tempdir().unwrap();
    let mut env = env.to_vec();
    env.push(("PIPETRACE_SELF_TELEMETRY__TRACES", "true"));
    let (file, o) = run(dir.path(), url, &env);
    let got = rx.spans();
    let own = own(&got);
    let names: BTreeSet<&str> = own.iter().map(|s| s.name.as_str()).collect();
    assert!(
        names.contains("pipetrace.export") && names.contains("pipetrace.probes.attach"),
        "{names:?}"
    );
    let exports: Vec<_> = own
        .iter()
        .filter(|s| s.name == "pipetrace.export")
        .collect();
    assert!(
        exports.iter().any(|s| s.str("signal") == "traces"),
        "an export of the pipeline's spans: {exports:?}"
    );
    // Over the same endpoint as the pipeline's spans (HTTP: its traces path).
    assert!(exports.iter().all(|s| s.str("url").starts_with(url)));
    for s in &own {
        assert_eq!(s.resource.get("service.name").map(Val::str), Some(SCOPE));
    }
    // Never inside a pipeline's trace, never in the trace file.
    let pipeline: BTreeSet<&str> = (got.iter())
        .filter(|s| s.scope != SCOPE)
        .map(|s| s.trace_id.as_str())
        .collect();
    assert!(own.iter().all(|s| !pipeline.contains(s.trace_id.as_str())));
    assert!(file.iter().all(|s| s.scope != SCOPE));
    // The pipeline's spans all arrived beside them.
    let sent: BTreeSet<&str> = got.iter().map(|s| s.span_id.as_str()).collect();
    assert!(file.iter().all(|s| sent.contains(s.span_id.as_str())));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("of pipetrace's own spans sent over OTLP to {url}")),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn own_spans_travel_over_the_grpc_connection_of_the_pipelines_trace() {
    let rx = Receiver::start().await;
    own_spans_arrive(&rx, &rx.grpc_url(), &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn own_spans_travel_over_http_to_the_traces_path() {
    let rx = Receiver::start().await;
    let http = [("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")];
    own_spans_arrive(&rx, &rx.http_url(), &http).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn off_by_default_no_own_span_leaves() {
    let rx = Receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (file, o) = run(dir.path(), &rx.grpc_url(), &[]);
    let got = rx.spans();
    assert!(!file.is_empty() && got.len() >= file.len());
    assert!(own(&got).is_empty(), "{:?}", own(&got));
    assert!(!stderr(&o).contains("own spans"), "{}", stderr(&o));
}
