//! A long-lived agent's metric export stays small: the runs that ended leave it.
use std::{collections::BTreeSet, path::Path, time::Duration};

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use pipetrace_e2e::{Agent, metrics::flatten_metrics};
use pipetrace_semconv::{attr, metric};

/// Sizes of the metric export requests in an OTLP JSON lines file, in order, and the
/// agent's own resident memory at each.
fn export_sizes(path: &Path) -> Vec<(usize, f64)> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let req: ExportMetricsServiceRequest = serde_json::from_str(l).unwrap();
            let size = size_without_others(req.clone());
            let rss = flatten_metrics(req)
                .iter()
                .find(|p| p.name == metric::AGENT_MEMORY_RSS)
                .map_or(0.0, |p| p.value);
            (size, rss)
        })
        .collect()
}

/// An export's size (as JSON) without the points of pipelines other than this test's runs:
/// the agent watches the whole host, and CI runs other tests' workflows beside this one
/// (in a CI run, another test's pipeline once made the idle export 8 times one run's).
fn size_without_others(mut req: ExportMetricsServiceRequest) -> usize {
    use opentelemetry_proto::tonic::{
        common::v1::{KeyValue, any_value::Value},
        metrics::v1::metric::Data,
    };
    let other = |attrs: &[KeyValue]| {
        attrs.iter().any(|kv| {
            let v = kv.value.as_ref().and_then(|v| v.value.as_ref());
            kv.key == attr::CICD_PIPELINE_NAME
                && matches!(v, Some(Value::StringValue(s)) if !s.starts_with("bounded-run-"))
        })
    };
    let metrics = (req.resource_metrics.iter_mut())
        .flat_map(|r| r.scope_metrics.iter_mut())
        .flat_map(|s| s.metrics.iter_mut());
    for m in metrics {
        match &mut m.data {
            Some(Data::Gauge(g)) => g.data_points.retain(|p| !other(&p.attributes)),
            Some(Data::Sum(s)) => s.data_points.retain(|p| !other(&p.attributes)),
            Some(Data::Histogram(h)) => h.data_points.retain(|p| !other(&p.attributes)),
            _ => {}
        }
    }
    serde_json::to_string(&req).expect("an export").len()
}

/// Waits until the newest export in `path` names nothing that contains `needle`; panics
/// after `limit` (the series never ended).
/// Returns that export's place among the file's exports.
fn wait_for_an_export_without(path: &Path, needle: &str, limit: Duration) -> usize {
    let start = std::time::Instant::now();
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let exports: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let last = exports.last();
        let whole =
            last.is_some_and(|l| serde_json::from_str::<ExportMetricsServiceRequest>(l).is_ok());
        if whole && !last.unwrap().contains(needle) {
            return exports.len() - 1;
        }
        assert!(
            start.elapsed() < limit,
            "after {limit:?} the newest export still names a series of `{needle}`"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// A long-lived agent serving 1,000 runs, each a pipeline of its own: the export follows the
/// work running now, not all the work ever seen, and the agent's memory stays flat.
#[test]
fn a_thousand_runs_in_a_long_lived_agent_keep_the_metric_export_small() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("agent.yaml");
    std::fs::write(
        &cfg,
        // Runs by its rules alone (engines: []): other tests run Snakemake, Nextflow and
        // Prefect on this host meanwhile, whose tasks' series are no runs of this test
        // (in a run beside them the last export carried 1.5 MB of theirs).
        "metrics:\n  interval: 250ms\nattribution:\n  engines: []\n  run_rules:\n    \
         - match: { argv: 'bounded-run-' }\n      name: '{argv3}'\n",
    )
    .unwrap();
    let out = dir.path().join("a.otlp.jsonl");
    let agent = Agent::start(&["-c", cfg.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    for i in 0..1000 {
        let st = std::process::Command::new("bash")
            .args(["-c", "/bin/true; /bin/true", &format!("bounded-run-{i}")])
            .status()
            .unwrap();
        assert!(st.success());
    }
    // Let the last runs' final points and markers go out: on a loaded machine the agent may
    // still be working through the runs' records for a while after the last one ended.
    let metrics = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains("metrics"))
        .expect("a metrics file");
    // Every run ended as the agent sees it (a loaded agent works through the runs' records
    // after the last one ended: an export between two of them names none), then idle.
    let ended = || {
        let spans = pipetrace_e2e::spans_so_far(&out);
        let runs = spans.iter().filter(|s| s.is_run());
        let n = runs.filter(|s| s.str(attr::CICD_PIPELINE_NAME).starts_with("bounded-run-"));
        (n.count() >= 1000).then_some(())
    };
    pipetrace_e2e::wait_until(Duration::from_secs(120), "the 1,000 runs' spans", ended);
    let idle_at = wait_for_an_export_without(&metrics, "bounded-run-", Duration::from_secs(60));
    agent.stop();
    let sizes = export_sizes(&metrics);
    assert!(sizes.len() >= 10, "{} exports", sizes.len());
    let spans = pipetrace_e2e::read_jsonl(&out);
    let runs: BTreeSet<String> = spans
        .iter()
        .filter(|s| s.is_run())
        .map(|s| s.str(attr::CICD_PIPELINE_NAME).to_string())
        .filter(|n| n.starts_with("bounded-run-"))
        .collect();
    assert_eq!(runs.len(), 1000, "every run seen");
    // Each ended series said so: staleness markers went out.
    let text = std::fs::read_to_string(&metrics).unwrap();
    let markers = text.matches("\"flags\":1").count();
    assert!(markers >= 1000, "{markers} staleness markers");
    // The idle export (the first after every run ended, which the wait saw; the one the
    // agent's stop flushes is not idle) against the smallest export that carried a run:
    // within 2x, however many runs came before.
    let idle = sizes[idle_at].0;
    let stop_flush = text.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("");
    eprintln!(
        "the stop's export: {} B, {} series of this test's runs",
        stop_flush.len(),
        stop_flush.matches("bounded-run-").count()
    );
    let quiet_start = sizes.first().unwrap().0;
    let one_run = sizes
        .iter()
        .map(|s| s.0)
        .filter(|&n| n > quiet_start)
        .min()
        .unwrap();
    eprintln!(
        "{} exports: first {quiet_start} B, smallest with a run {one_run} B, largest {} B, \
         last {idle} B",
        sizes.len(),
        sizes.iter().map(|s| s.0).max().unwrap()
    );
    assert!(
        idle <= 2 * one_run,
        "idle export {idle} B vs one run's {one_run} B"
    );
    // No growth with the runs seen: an ended run's series leave the export once their
    // staleness markers went out. How many runs share one export depends on how the agent
    // keeps up with the host, so the check is per run, not per export's bytes.
    let mut seen: std::collections::BTreeMap<String, usize> = Default::default();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let named: BTreeSet<&str> = line
            .match_indices("bounded-run-")
            .map(|(i, _)| {
                let tail = &line[i..];
                &tail[..tail.find('"').unwrap_or(tail.len())]
            })
            .collect();
        for n in named {
            *seen.entry(n.to_string()).or_default() += 1;
        }
    }
    let most = seen.iter().max_by_key(|e| e.1).unwrap();
    eprintln!("a run's series in at most {} exports ({})", most.1, most.0);
    assert!(
        *most.1 <= 6,
        "{} is in {} exports: ended series stay in the export",
        most.0,
        most.1
    );
    // Memory: flat (within 16 MiB of early on).
    let tenth = sizes.len() / 10;
    let rss = |w: &[(usize, f64)]| w.iter().map(|s| s.1).fold(0.0, f64::max);
    let (rss_early, rss_late) = (
        rss(&sizes[..tenth.max(1) * 3]),
        rss(&sizes[sizes.len() - tenth.max(1)..]),
    );
    eprintln!("agent RSS early {rss_early} B, late {rss_late} B");
    assert!(
        rss_late <= rss_early + 16.0 * 1048576.0,
        "RSS {rss_early} -> {rss_late}"
    );
}
