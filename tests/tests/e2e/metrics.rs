//! Live OTLP metrics at a real receiver: names, units, attributes, temporality, and the
//! bound on attribute sets.
use std::{collections::BTreeMap, collections::BTreeSet, path::Path};

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use pipetrace_e2e::{
    metrics::{RecvPoint, flatten_metrics},
    pipetrace,
    receiver::Receiver,
    spans::RecvSpan,
    stderr,
};
use pipetrace_semconv::{attr, metric, registry::Registry};

mod export_size;

const WORKLOAD: &str = env!("CARGO_BIN_EXE_workload");

/// A Snakemake pipeline with one long CPU-bound task and one short memory task.
fn pipeline(dir: &Path) {
    let snakefile = format!(
        "rule all:\n    input: \"burn.done\", \"small.done\"\n\n\
         rule burn:\n    output: \"burn.done\"\n    shell: \"{w} burn 2500 && touch {{output}}\"\n\n\
         rule small:\n    output: \"small.done\"\n    shell: \"{w} alloc 32 && touch {{output}}\"\n",
        w = WORKLOAD
    );
    std::fs::write(dir.join("Snakefile"), snakefile).unwrap();
}

/// Runs the pipeline under `pipetrace run`; gives its folder and what pipetrace printed.
fn run_pipeline(rx: &Receiver, env: &[(&str, &str)]) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    pipeline(dir.path());
    let o = pipetrace()
        .env("PIPETRACE_METRICS__INTERVAL", "300ms")
        .envs(env.iter().copied())
        .args(["run", "--", "snakemake", "--cores", "2"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let _ = rx;
    (dir, stderr(&o))
}

fn series(p: &RecvPoint) -> (String, String, String, String) {
    let dim = p
        .attrs
        .iter()
        .find(|(k, _)| k.ends_with(".mode") || k.ends_with(".direction"))
        .map(|(_, v)| v.str().to_string())
        .unwrap_or_default();
    (
        p.name.clone(),
        p.str(attr::CICD_PIPELINE_TASK_NAME).to_string(),
        p.str(attr::TOOL_NAME).to_string(),
        dim,
    )
}

/// The burner's `process.cpu.time` points (both modes).
fn burner_cpu(points: &[RecvPoint]) -> Vec<&RecvPoint> {
    points
        .iter()
        .filter(|p| {
            p.name == metric::PROCESS_CPU_TIME
                && p.str(attr::CICD_PIPELINE_TASK_NAME) == "burn"
                && p.str(attr::TOOL_NAME) == "workload"
        })
        .collect()
}

fn cpu(s: &RecvSpan) -> f64 {
    s.num(attr::CPU_USER_TIME).unwrap() + s.num(attr::CPU_SYSTEM_TIME).unwrap()
}

/// Names, units, kinds and attributes are the registry's; no pid ever.
fn check_shape(points: &[RecvPoint]) {
    let reg = Registry::embedded();
    let allowed: BTreeSet<&str> = [
        attr::CICD_PIPELINE_NAME,
        attr::CICD_PIPELINE_TASK_NAME,
        attr::TOOL_NAME,
        attr::CPU_MODE,
        attr::DISK_IO_DIRECTION,
        attr::NETWORK_IO_DIRECTION,
        attr::OTEL_METRIC_OVERFLOW,
        // One of eight kinds (`pipetrace.findings`).
        attr::FINDING_KIND,
    ]
    .into();
    for p in points {
        let g = reg
            .groups
            .iter()
            .find(|g| g.metric_name.as_deref() == Some(p.name.as_str()))
            .unwrap_or_else(|| panic!("{} is not in the registry", p.name));
        assert_eq!(Some(p.unit.as_str()), g.unit.as_deref(), "{}", p.name);
        let kind = match g.instrument.as_deref() {
            Some("gauge") => "gauge",
            _ => "sum",
        };
        assert_eq!(p.kind, kind, "{}", p.name);
        if g.instrument.as_deref() == Some("counter") {
            assert!(p.monotonic, "{} is monotonic", p.name);
        }
        for k in p.attrs.keys() {
            assert!(allowed.contains(k.as_str()), "{} has attribute {k}", p.name);
        }
        assert!(!p.attrs.contains_key(attr::PROCESS_PID));
        assert!(p.resource.contains_key(attr::HOST_NAME));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_cumulative_metrics_of_a_running_task_over_grpc() {
    let rx = Receiver::start().await;
    let (_dir, err) = run_pipeline(&rx, &[("OTEL_EXPORTER_OTLP_ENDPOINT", &rx.grpc_url())]);
    let points = rx.metrics();
    let spans = rx.spans();
    check_shape(&points);
    let names: BTreeSet<&str> = points.iter().map(|p| p.name.as_str()).collect();
    for m in [
        metric::PROCESS_CPU_TIME,
        metric::PROCESS_MEMORY_USAGE,
        metric::PROCESS_DISK_IO,
        metric::PROCESS_NETWORK_IO,
        metric::MEMORY_PEAK,
        metric::RUN_QUEUE_DELAY,
        metric::DISK_WAIT_TIME,
    ] {
        assert!(names.contains(m), "{m} exported: {names:?}");
    }
    let burn = spans
        .iter()
        .find(|s| s.is_task() && s.str(attr::CICD_PIPELINE_TASK_NAME) == "burn")
        .expect("burn task span");
    let tool = spans
        .iter()
        .find(|s| s.is_tool() && s.name == "workload" && s.parent.as_ref() == Some(&burn.span_id))
        .expect("the workload under burn");
    let cpu_points = burner_cpu(&points);
    assert!(cpu_points.iter().all(|p| p.temporality == 2), "cumulative");
    // Charted while it ran: points stamped before the task ended, already above zero.
    let live = cpu_points
        .iter()
        .filter(|p| p.time < burn.end && p.value > 0.0)
        .count();
    assert!(live >= 2, "live samples of the running task: {live}");
    // The backend is told the run and the task run before either ends: `run started` and
    // `task started` under their own spans, received before them.
    let at = |s: &RecvSpan| spans.iter().position(|x| x.span_id == s.span_id).unwrap();
    let run = spans.iter().find(|s| s.is_run()).expect("the run span");
    for (whole, what) in [(burn, "task started"), (run, "run started")] {
        let started = (spans.iter())
            .find(|s| s.name == what && s.parent.as_deref() == Some(whole.span_id.as_str()))
            .unwrap_or_else(|| panic!("{what} under {}: {spans:?}", whole.name));
        assert_eq!(started.trace_id, whole.trace_id);
        assert_eq!(started.start, whole.start, "{what} at its start");
        assert!(
            at(started) < at(whole),
            "{what} arrived before {} ended",
            whole.name
        );
        let name = match what {
            "run started" => whole.str(attr::CICD_PIPELINE_NAME),
            _ => whole.str(attr::CICD_PIPELINE_TASK_NAME),
        };
        assert_eq!(started.str(attr::STARTED_NAME), name);
        assert!(!started.is_task() && !started.is_run() && !started.is_tool());
    }
    // What runs now is named before it ends: one `burn` running, none once it ended.
    let running: Vec<&RecvPoint> = (points.iter())
        .filter(|p| {
            p.name == metric::TASKS_RUNNING && p.str(attr::CICD_PIPELINE_TASK_NAME) == "burn"
        })
        .collect();
    let before = running
        .iter()
        .filter(|p| p.time < burn.end && p.value == 1.0);
    assert!(
        before.count() >= 2,
        "burn running while it ran: {running:?}"
    );
    let after = running.iter().filter(|p| p.time > burn.end + 1_000_000_000);
    assert!(after.clone().all(|p| p.value == 0.0), "{running:?}");
    // Cumulative series never go down.
    let mut by_series: BTreeMap<_, Vec<&RecvPoint>> = BTreeMap::new();
    for p in points.iter().filter(|p| p.monotonic) {
        by_series.entry(series(p)).or_default().push(p);
    }
    for (k, mut ps) in by_series {
        ps.sort_by_key(|p| p.time);
        for w in ps.windows(2) {
            assert!(
                w[1].value >= w[0].value,
                "{k:?} went down: {} -> {}",
                w[0].value,
                w[1].value
            );
        }
    }
    // The last value is the kernel's exact figure, as on the span.
    let last = |mode: &str| {
        cpu_points
            .iter()
            .filter(|p| p.str(attr::CPU_MODE) == mode)
            .max_by_key(|p| p.time)
            .unwrap()
            .value
    };
    let total = last("user") + last("system");
    assert!(
        (total - cpu(tool)).abs() < 1e-6,
        "metric {total} vs span {}",
        cpu(tool)
    );
    assert!(total >= 2.5, "2.5 s of CPU: {total}");
    // The agent's own figures ride along: nothing lost, nothing dropped, what it tracks.
    let own = |name: &str| {
        points
            .iter()
            .filter(|p| p.name == name)
            .max_by_key(|p| p.time)
            .unwrap_or_else(|| panic!("{name} exported"))
            .value
    };
    assert_eq!(own(metric::AGENT_EVENTS_LOST), 0.0);
    assert_eq!(own(metric::AGENT_ACCUMULATOR_LOST), 0.0);
    assert_eq!(own(metric::AGENT_SPANS_DROPPED), 0.0);
    assert_eq!(own(metric::AGENT_EXPORT_FAILURES), 0.0);
    assert_eq!(own(metric::AGENT_METRIC_EXPORTS_FAILED), 0.0);
    assert_eq!(own(metric::AGENT_METRIC_EXPORTS_DROPPED), 0.0);
    assert_eq!(own(metric::AGENT_METRIC_EXPORTS_SPOOLED), 0.0);
    // The summary counts the metric exports, and each one arrived (one RSS point each).
    let requests = points
        .iter()
        .filter(|p| p.name == metric::AGENT_MEMORY_RSS)
        .count();
    assert!(requests >= 3, "{requests} metric exports");
    let line = format!(
        "{requests} metric exports sent over OTLP to {} (0 failed, 0 retries)",
        rx.grpc_url()
    );
    assert!(err.contains(&line), "want {line:?} in:\n{err}");
    // While the task ran it was known (at the very end everything has settled and left).
    let most_known = points
        .iter()
        .filter(|p| p.name == metric::AGENT_PROCESSES_KNOWN)
        .map(|p| p.value)
        .fold(0.0, f64::max);
    assert!(most_known >= 1.0, "{most_known}");
    assert!(own(metric::AGENT_MEMORY_RSS) > 1_000_000.0);
    // Memory: the small task's peak reached its 32 MiB.
    let peak = points
        .iter()
        .filter(|p| {
            p.name == metric::MEMORY_PEAK && p.str(attr::CICD_PIPELINE_TASK_NAME) == "small"
        })
        .map(|p| p.value)
        .fold(0.0, f64::max);
    assert!(peak >= 32.0 * 1048576.0, "small's peak {peak}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_temporality_over_http_sums_to_the_exact_total() {
    let rx = Receiver::start().await;
    let (_dir, _) = run_pipeline(
        &rx,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &rx.http_url()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "delta"),
        ],
    );
    let points = rx.metrics();
    check_shape(&points);
    let spans = rx.spans();
    let tool = spans
        .iter()
        .find(|s| s.is_tool() && s.name == "workload" && s.num(attr::CPU_USER_TIME).unwrap() > 1.0)
        .expect("the burner");
    let cpu_points = burner_cpu(&points);
    assert!(cpu_points.len() > 2);
    assert!(cpu_points.iter().all(|p| p.temporality == 1), "delta");
    let sum: f64 = cpu_points.iter().map(|p| p.value).sum();
    assert!(
        (sum - cpu(tool)).abs() < 1e-6,
        "deltas {sum} vs span {}",
        cpu(tool)
    );
    // Up-down counters stay cumulative, as the OTel SDK keeps them.
    assert!(
        points
            .iter()
            .filter(|p| p.name == metric::PROCESS_MEMORY_USAGE)
            .all(|p| p.temporality == 2)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_processes_make_a_handful_of_series() {
    let rx = Receiver::start().await;
    let o = pipetrace()
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", rx.grpc_url())
        .env("PIPETRACE_METRICS__INTERVAL", "500ms")
        // Every process its own span, to count them (with a trace budget they fold).
        .env("PIPETRACE_EXPORT__MAX_TRACE_BYTES", "0")
        .args([
            "run",
            "--",
            "sh",
            "-c",
            "i=0; while [ $i -lt 10000 ]; do /bin/true; i=$((i+1)); done",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let points = rx.metrics();
    check_shape(&points);
    // The pipeline's series (the agent's own figures carry no attributes).
    let sets: BTreeSet<_> = points
        .iter()
        .filter(|p| !p.name.starts_with("pipetrace.agent."))
        .map(series)
        .collect();
    let attr_sets: BTreeSet<_> = sets
        .iter()
        .map(|(_, t, tool, _)| (t.clone(), tool.clone()))
        .collect();
    assert!(
        attr_sets.len() <= 2,
        "one series per (task, tool): {attr_sets:?}"
    );
    let spans = rx.spans();
    assert_eq!(
        spans
            .iter()
            .filter(|s| s.is_tool() && s.name == "true")
            .count(),
        10_000
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_series_bound_the_rest_share_the_overflow_series_and_nothing_is_lost() {
    let rx = Receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    // 12 differently named tools, 4 series allowed.
    let mut script = String::new();
    for i in 0..12 {
        let tool = dir.path().join(format!("tool{i}"));
        std::fs::copy(WORKLOAD, &tool).unwrap();
        script.push_str(&format!("{} burn 30; ", tool.display()));
    }
    script.push_str("true");
    let o = pipetrace()
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", rx.grpc_url())
        .env("PIPETRACE_METRICS__MAX_SERIES", "4")
        .args(["run", "--", "sh", "-c", &script])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let points = rx.metrics();
    check_shape(&points);
    let final_cpu: Vec<_> = {
        let t = points.iter().map(|p| p.time).max().unwrap();
        points
            .iter()
            .filter(|p| p.time == t && p.name == metric::PROCESS_CPU_TIME)
            .collect()
    };
    let sets: BTreeSet<_> = final_cpu
        .iter()
        .map(|p| {
            (
                p.str(attr::TOOL_NAME),
                p.attrs.contains_key(attr::OTEL_METRIC_OVERFLOW),
            )
        })
        .collect();
    assert!(sets.len() <= 5, "4 series and the overflow: {sets:?}");
    assert!(sets.iter().any(|(_, overflow)| *overflow), "{sets:?}");
    let metric_total: f64 = final_cpu.iter().map(|p| p.value).sum();
    let run = rx.spans().into_iter().find(|s| s.is_run()).unwrap();
    assert!(
        (metric_total - cpu(&run)).abs() < 1e-6,
        "metrics {metric_total} vs run {}",
        cpu(&run)
    );
}

/// Metric exports the backend refuses are counted: in the run summary, and in the agent's own
/// figures that reach the other destination (the metrics file).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_metric_exports_are_counted() {
    let rx = Receiver::start().await;
    // The receiver has no such path: 404, an answer for good, not retried.
    let refused = format!("{}/v1/elsewhere", rx.http_url());
    let out = tempfile::tempdir().unwrap();
    let trace_file = out.path().join("t.otlp.jsonl");
    let (_dir, err) = run_pipeline(
        &rx,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &rx.http_url()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", &refused),
            ("PIPETRACE_EXPORT__FILE", trace_file.to_str().unwrap()),
        ],
    );
    assert!(
        rx.metrics().is_empty(),
        "nothing reached the receiver's metrics"
    );
    assert!(!rx.spans().is_empty(), "spans still went to the receiver");
    let file = out.path().join("t.metrics.otlp.jsonl");
    // One OTLP metrics request per line; the agent's failed count from each, in order.
    let failed: Vec<f64> = std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("{}: {e}\n{err}", file.display()))
        .lines()
        .map(|l| {
            let req: ExportMetricsServiceRequest = serde_json::from_str(l).unwrap();
            flatten_metrics(req)
                .into_iter()
                .find(|p| p.name == metric::AGENT_METRIC_EXPORTS_FAILED)
                .unwrap_or_else(|| panic!("no {} in {l}", metric::AGENT_METRIC_EXPORTS_FAILED))
                .value
        })
        .collect();
    let n = failed.len();
    assert!(n >= 3, "{n} metric exports written");
    let line = format!("0 metric exports sent over OTLP to {refused} ({n} failed, 0 retries)");
    assert!(err.contains(&line), "want {line:?} in:\n{err}");
    let line = format!(
        "{n} metric exports written as OTLP JSON to {} (0 failed)",
        file.display()
    );
    assert!(err.contains(&line), "want {line:?} in:\n{err}");
    // Later exports carry the count of the earlier ones refused, and it only grows.
    assert!(failed.windows(2).all(|w| w[0] <= w[1]), "{failed:?}");
    let last = *failed.last().unwrap();
    assert!(last >= 1.0 && last < n as f64, "{failed:?} of {n}");
}
