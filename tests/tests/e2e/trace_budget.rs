//! A trace a backend keeps: a plain run of 20,000 processes arrives over OTLP as traces Grafana
//! Tempo takes (each within its default 5,000,000 bytes, counted as Tempo counts), with every
//! process still counted on the run span and every task in a span; the one that failed keeps
//! its own.
use std::time::Duration;

use pipetrace_e2e::{pipetrace, receiver::Receiver, stderr, tempo::MAX_BYTES_PER_TRACE};
use pipetrace_semconv::attr;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_thousand_processes_make_traces_tempo_keeps_counting_every_one() {
    let rx = Receiver::start().await;
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
