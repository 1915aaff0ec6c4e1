//! A trace a backend keeps: a plain run of 20,000 processes arrives over OTLP at a receiver
//! that behaves as Grafana Tempo does (a trace past its default 5,000,000 bytes, counted as
//! Tempo counts, loses its further spans), whole, with every process still counted on the
//! run span and every task in a span; the one that failed keeps its own. With the budget
//! off, the same receiver discards spans, and pipetrace counts and says what was rejected.
use std::time::Duration;

use pipetrace_e2e::{pipetrace, receiver::Receiver, stderr, tempo::MAX_BYTES_PER_TRACE};
use pipetrace_semconv::attr;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_thousand_processes_make_traces_tempo_keeps_counting_every_one() {
    let rx = Receiver::start_as_tempo().await;
    let dir = tempfile::tempdir().unwrap();
    let n = 20_000;
    let script =
        format!("i=0; while [ $i -lt {n} ]; do /bin/true; i=$((i+1)); done; /bin/false || true");
    let o = tokio::task::spawn_blocking({
        let (url, dir) = (rx.grpc_url(), dir.path().to_path_buf());
        move || {
            pipetrace()
                .args(["--endpoint", &url, "run", "--", "sh", "-c", &script])
                .current_dir(dir)
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let spans = rx
        .wait_for(Duration::from_secs(60), |s| s.iter().any(|s| s.is_run()))
        .await;
    assert_eq!(rx.discarded(), 0, "spans Tempo discarded");
    let sizes = rx.trace_sizes();
    assert!(
        sizes.over(MAX_BYTES_PER_TRACE).is_empty(),
        "traces Tempo would refuse: {:?}",
        sizes.over(MAX_BYTES_PER_TRACE)
    );
    let run = spans.iter().find(|s| s.is_run()).unwrap();
    assert_eq!(
        run.int(attr::USAGE_PROCESSES),
        Some(n + 2),
        "the script and each of its processes"
    );
    let tasks: Vec<_> = spans.iter().filter(|s| s.is_task()).collect();
    let counted: i64 = tasks
        .iter()
        .map(|s| s.int(attr::FOLD_SPANS).unwrap_or(1))
        .sum();
    assert_eq!(counted, n + 1, "every task counted, folded or not");
    let failed: Vec<_> = tasks.iter().filter(|s| s.status == 2).collect();
    assert_eq!(failed.len(), 1, "the failed task keeps its own span");
    assert_eq!(failed[0].int(attr::FOLD_SPANS), None);
    assert!(spans.len() < 5_000, "{} spans", spans.len());
    let text = stderr(&o);
    assert!(
        text.contains("folded into"),
        "the summary says what was folded: {text}"
    );
    assert!(
        text.contains(&format!("pipetrace: {} tasks (1 failed)", n + 1)),
        "the summary counts every task through the folded spans: {text}"
    );
}

/// The budget off (`export.max_trace_bytes: 0`): one trace of 4,000 processes passes Tempo's
/// limit, the receiver discards its further spans and says so in its partial success, and
/// pipetrace counts them as failed for good and says it, never as delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_budget_tempo_discards_spans_and_pipetrace_says_so() {
    let rx = Receiver::start_as_tempo().await;
    let dir = tempfile::tempdir().unwrap();
    let script = "i=0; while [ $i -lt 4000 ]; do /bin/true; i=$((i+1)); done";
    let o = tokio::task::spawn_blocking({
        let (url, dir) = (rx.grpc_url(), dir.path().to_path_buf());
        move || {
            pipetrace()
                .env("PIPETRACE_EXPORT__MAX_TRACE_BYTES", "0")
                .args(["--endpoint", &url, "run", "--", "sh", "-c", script])
                .current_dir(dir)
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    let discarded = rx.discarded();
    assert!(discarded > 0, "one trace of 4,000 spans passes 5 MB: {err}");
    assert!(
        err.contains(&format!("rejected {discarded}")) || err.contains("TRACE_TOO_LARGE"),
        "pipetrace says the backend rejected spans: {err}"
    );
    // Each discarded span counted as failed for good, none as delivered.
    let sent = (err.lines())
        .find(|l| l.contains("spans sent over OTLP"))
        .unwrap_or_default();
    assert!(
        sent.contains(&format!("({discarded} failed")),
        "{sent}: {err}"
    );
}
