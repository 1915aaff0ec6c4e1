//! Delivery to a real backend under strain, judged by what Jaeger v2's query API gives back: a
//! backend that restarts in the middle of a run (its store on disk), and a run of 20,000
//! processes whose trace is folded and split into linked parts.
use std::{collections::BTreeMap, process::Stdio, time::Duration};

use pipetrace_e2e::{
    jaeger::{Jaeger, one_trace, read_back, run_into, written},
    pipetrace, read_jsonl,
    spans::RecvSpan,
    stderr,
};
use pipetrace_semconv::attr;
use serde_json::Value;

use crate::reliability::spooled_count;

/// Jaeger is killed two seconds into a run and comes back, on the same ports and store,
/// three seconds later: what pipetrace could not send meanwhile waits (in memory, then on
/// disk past a one-byte outbox) and leaves once Jaeger answers. Every span of the run is
/// then in Jaeger, the tree pipetrace wrote.
#[test]
fn a_backend_restart_mid_run_loses_nothing() {
    let mut jaeger = Jaeger::start_on_disk();
    let dir = tempfile::tempdir().unwrap();
    let spool = dir.path().join("spool");
    let file = dir.path().join("t.otlp.jsonl");
    let script = "for i in 1 2 3 4 5 6 7 8 9 10 11 12; do echo $i | wc -c; sleep 0.5; done";
    let child = pipetrace()
        .env(
            "PIPETRACE_EXPORT__OTLP__TRACES__ENDPOINT",
            jaeger.grpc_url(),
        )
        .env("PIPETRACE_EXPORT__SPOOL__DIR", &spool)
        .env("PIPETRACE_EXPORT__QUEUE_BYTES", "1")
        .env("PIPETRACE_EXPORT__BATCH_TIMEOUT", "100ms")
        .env("PIPETRACE_EXPORT__RETRY__INITIAL_INTERVAL", "100ms")
        .env("PIPETRACE_EXPORT__RETRY__MAX_INTERVAL", "1s")
        .args(["run", "-o"])
        .arg(&file)
        .args(["--", "sh", "-c", script])
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    jaeger.stop();
    std::thread::sleep(Duration::from_secs(3));
    jaeger.restart();
    let o = child.wait_with_output().unwrap();
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("not delivered"), "all delivered: {err}");
    assert!(spooled_count(&err) > 0, "some waited on disk: {err}");
    let spans = read_jsonl(&file);
    let tools = spans
        .iter()
        .filter(|s| s.is_tool() && s.name == "wc")
        .count();
    assert_eq!(tools, 12, "every wc is a span in the file");
    let trace = one_trace(&spans);
    let got = jaeger.trace(&trace, spans.len());
    assert_eq!(read_back(&got), written(&spans), "every span, as written");
}

/// 20,003 processes: 6,667 tasks of three (a shell and its two children) and the script: repeats fold, and what does not fit in a trace
/// Tempo keeps (5 MB) goes into parts linked to the run span. Jaeger holds every part, each
/// the tree pipetrace wrote, and the run span still counts every process; the one task that
/// failed keeps its own span.
#[test]
fn twenty_thousand_processes_every_part_retrievable_from_jaeger() {
    let jaeger = Jaeger::start();
    let dir = tempfile::tempdir().unwrap();
    let tasks = 6_667;
    let script = format!(
        "i=0; while [ $i -lt {tasks} ]; do sh -c '/bin/true; /bin/true'; i=$((i+1)); done; \
         /bin/false || true"
    );
    let spans = run_into(
        dir.path(),
        &jaeger.grpc_url(),
        "grpc",
        &["sh", "-c", &script],
    );
    let run = spans.iter().find(|s| s.is_run()).expect("the run span");
    assert_eq!(
        run.int(attr::USAGE_PROCESSES),
        Some(3 * tasks + 2),
        "every process"
    );
    let mut traces: BTreeMap<&str, Vec<RecvSpan>> = BTreeMap::new();
    for s in &spans {
        traces.entry(&s.trace_id).or_default().push(s.clone());
    }
    assert!(
        traces.len() > 1,
        "split into parts: {} traces",
        traces.len()
    );
    for (id, written_spans) in &traces {
        let got = jaeger.trace(id, written_spans.len());
        assert_eq!(read_back(&got), written(written_spans), "trace {id}");
        if *id != run.trace_id {
            part_links_to(&got, run);
        }
    }
    let failed: Vec<_> = spans
        .iter()
        .filter(|s| s.is_task() && s.status == 2)
        .collect();
    assert_eq!(failed.len(), 1, "the failed task keeps its own span");
    assert_eq!(failed[0].int(attr::FOLD_SPANS), None);
}

/// A part's root, as Jaeger gives it, refers to the run span (an OTLP link).
fn part_links_to(got: &[Value], run: &RecvSpan) {
    let root = (got.iter())
        .find(|s| {
            s["operationName"]
                .as_str()
                .is_some_and(|n| n.contains("(part "))
        })
        .unwrap_or_else(|| panic!("a part's root in {:?}", got.first()));
    let refs = root["references"].as_array().cloned().unwrap_or_default();
    assert!(
        refs.iter()
            .any(|r| r["traceID"] == run.trace_id.as_str() && r["spanID"] == run.span_id.as_str()),
        "the part links to the run span: {root}"
    );
}
