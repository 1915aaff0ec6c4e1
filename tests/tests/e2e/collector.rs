//! Through an OpenTelemetry Collector, as most stacks run it: pipetrace -> the pipeline in
//! deploy/collector/pipetrace.yaml (memory_limiter, tail sampling that keeps failed runs,
//! batch) -> Jaeger v2; its span metrics and pipetrace's own metrics scraped by the real
//! Prometheus, which fires deploy/alerts/spanmetrics-rules.yaml's alert on a task's failure
//! rate through Alertmanager.
use std::{
    path::Path,
    time::{Duration, Instant},
};

use pipetrace_e2e::{
    jaeger::{Collector, Jaeger, one_trace, read_back, run_into_with, written},
    prometheus::{Webhook, alertmanager, prometheus},
};
use tokio::task::block_in_place;

use crate::alerting::{delivered, label, returns_series};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_keeps_failed_runs_and_its_span_metrics_alert_on_task_failures() {
    let jaeger = Jaeger::start();
    // Nothing of a clean run is kept, so that its absence shows the policy at work.
    let settings = [
        ("PIPETRACE_KEEP_PERCENT", "0"),
        ("PIPETRACE_DECISION_WAIT", "2s"),
    ];
    let collector = Collector::start(&jaeger, &settings);
    let hook = Webhook::start().await;
    let manager = alertmanager(&hook.url);
    let rules =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/alerts/spanmetrics-rules.yaml");
    let scrape = format!("127.0.0.1:{}", collector.prometheus);
    let prom = prometheus(&[scrape], &rules, manager.url.trim_start_matches("http://"));

    let url = collector.grpc_url();
    let metrics = [("PIPETRACE_EXPORT__OTLP__METRICS__ENDPOINT", url.as_str())];
    let (clean_dir, failed_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let clean = ["sh", "-c", "echo a | wc -c"];
    let failing = ["sh", "-c", "echo b | wc -c; ls /no/such/file; true"];
    let (clean, failed) = block_in_place(|| {
        (
            run_into_with(clean_dir.path(), &url, "grpc", &metrics, &clean),
            run_into_with(failed_dir.path(), &url, "grpc", &metrics, &failing),
        )
    });

    // Tail sampling: the failed run whole in Jaeger, the clean one not at all.
    let kept = one_trace(&failed);
    let got = block_in_place(|| jaeger.trace(&kept, failed.len()));
    assert_eq!(read_back(&got), written(&failed), "the failed run, whole");
    let dropped = one_trace(&clean);
    let left = jaeger.get(&format!("/api/traces/{dropped}"));
    assert!(left.is_err(), "the clean run was sampled out: {left:?}");

    // Span metrics of every span, sampled or not: the failed task, and the clean ones.
    let q = r#"sum(traces_span_metrics_calls_total{cicd_pipeline_task_name="wc"})"#;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let got = prom.query(q, None).await;
        let calls = got
            .first()
            .map(|s| s["value"][1].as_str().unwrap().to_string());
        if calls.as_deref() == Some("2") {
            break;
        }
        assert!(Instant::now() < deadline, "both runs' wc tasks: {calls:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let alert = delivered(&hook, "PipelineTaskFailureRate", |a| {
        label(a, "cicd_pipeline_task_name") == "ls"
    })
    .await;
    assert_eq!(label(&alert, "service_name"), "pipetrace", "{alert}");
    let quiet: Vec<_> = (hook.alerts().into_iter())
        .filter(|a| label(a, "cicd_pipeline_task_name") == "wc")
        .collect();
    assert!(quiet.is_empty(), "wc never failed: {quiet:?}");
    // pipetrace's own metrics take the same way: the failed task counted.
    let q = r#"pipetrace_tasks_failed_total{cicd_pipeline_task_name="ls"}"#;
    returns_series(&prom, q).await;
    drop(collector);
}
