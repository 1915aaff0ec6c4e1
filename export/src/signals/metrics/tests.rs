use super::*;

const NONE: (&TaskCounts, &TaskCounts) = (&TaskCounts::new(), &TaskCounts::new());

/// (tool, value present, stale flag) of the CPU points in a request.
fn cpu_points(req: &ExportMetricsServiceRequest) -> Vec<(String, bool, u32)> {
    use opentelemetry_proto::tonic::metrics::v1::metric::Data;
    let found = req.resource_metrics[0].scope_metrics[0]
        .metrics
        .iter()
        .find(|m| m.name == pipetrace_semconv::metric::PROCESS_CPU_TIME);
    // Left out when it has no points.
    let Some(m) = found else { return Vec::new() };
    let Some(Data::Sum(sum)) = &m.data else {
        panic!("a sum")
    };
    sum.data_points
        .iter()
        .filter(|p| {
            p.attributes.iter().any(|a| {
                a.key == pipetrace_semconv::attr::CPU_MODE
                    && format!("{:?}", a.value).contains("user")
            })
        })
        .map(|p| {
            let tool = p
                .attributes
                .iter()
                .find(|a| a.key == pipetrace_semconv::attr::TOOL_NAME)
                .map(|a| format!("{:?}", a.value))
                .unwrap_or_default();
            (tool, p.value.is_some(), p.flags)
        })
        .collect()
}

fn metrics(temporality: pipetrace_config::Temporality) -> Metrics {
    let cfg = pipetrace_config::Metrics {
        temporality,
        ..Default::default()
    };
    let resource = opentelemetry_sdk::Resource::builder_empty().build();
    Metrics::new(
        &cfg,
        Measured::default(),
        &resource,
        std::sync::Arc::new(pipetrace_core::port::fake::FakeHost::default()),
    )
}

#[test]
fn an_ended_series_sends_its_final_point_then_a_stale_marker_then_nothing() {
    for temporality in [
        pipetrace_config::Temporality::Cumulative,
        pipetrace_config::Temporality::Delta,
    ] {
        let mut m = metrics(temporality);
        let f = AgentFigures::default();
        // A job of 1,000 runs ended: its exact figures, and nothing of it runs.
        for run in 0..1000 {
            m.table
                .get(&format!("p{run}"), "align", "bwa", SystemTime::now())
                .finished
                .cpu_user_ns += 7;
            let req = m.collect(&f, NONE).unwrap();
            let points = cpu_points(&req);
            // This run's final point, the previous run's stale marker, nothing older.
            assert!(points.len() <= 2, "run {run}: {points:?}");
            assert!(points.iter().any(|p| p.1 && p.2 == 0), "{points:?}");
            if run > 0 {
                assert!(points.iter().any(|p| !p.1 && p.2 == 1), "{points:?}");
            }
        }
        let last = cpu_points(&m.collect(&f, NONE).unwrap());
        assert_eq!(last.len(), 1, "the last one's marker: {last:?}");
        assert!(cpu_points(&m.collect(&f, NONE).unwrap()).is_empty());
        assert_eq!(m.series_count(), 0, "nothing kept");
    }
}

#[test]
fn a_series_that_gets_more_after_its_final_point_stays() {
    let mut m = metrics(pipetrace_config::Temporality::Cumulative);
    let f = AgentFigures::default();
    m.table
        .get("p", "t", "x", SystemTime::now())
        .finished
        .cpu_user_ns += 1;
    m.collect(&f, NONE);
    // Another job of the same task ended before the next export: not retired.
    m.table
        .get("p", "t", "x", SystemTime::now())
        .finished
        .cpu_user_ns += 1;
    let points = cpu_points(&m.collect(&f, NONE).unwrap());
    assert_eq!(points.len(), 1);
    assert!(points[0].1, "a value, not a marker: {points:?}");
}

#[test]
fn a_finished_tasks_label_goes_once_none_of_its_processes_can_end() {
    let mut m = metrics(pipetrace_config::Temporality::Cumulative);
    let cfg = pipetrace_config::Attribution::default();
    let host = pipetrace_core::port::fake::FakeHost::default();
    let attr = Attributor::new(
        pipetrace_core::attribution::Mode::Agent,
        &cfg,
        0,
        host.shared(),
    );
    let attr = attr.unwrap();
    let key = |pid| ProcKey {
        pid,
        start_ticks: 1,
    };
    for pid in 1..=3 {
        let task = Finished::Task {
            proc: pipetrace_core::tree::Proc::in_test(key(pid), 0),
            run: key(100),
            info: pipetrace_core::attribution::TaskInfo::named("t".into()),
            usage: Box::default(),
        };
        m.on_finished(&task, &attr);
    }
    assert_eq!(m.labelled().count(), 3);
    // None of them is in the attribution any more: their processes are all gone.
    let net = |_| Accumulator::default();
    m.sample(&host, &attr, &Tree::default(), 1, &net);
    assert_eq!(
        m.labelled().count(),
        0,
        "one label per task ever run otherwise"
    );
}

/// The failed-task points of a request: (task, value).
fn failed_points(req: &ExportMetricsServiceRequest) -> Vec<(String, i64)> {
    counter_points(req, pipetrace_semconv::metric::TASKS_FAILED, attr_task())
}

fn attr_task() -> &'static str {
    pipetrace_semconv::attr::CICD_PIPELINE_TASK_NAME
}

/// A per-pipeline counter's points: (its second attribute, value).
fn counter_points(req: &ExportMetricsServiceRequest, name: &str, key: &str) -> Vec<(String, i64)> {
    use opentelemetry_proto::tonic::metrics::v1::{metric::Data, number_data_point::Value};
    let metrics = &req.resource_metrics[0].scope_metrics[0].metrics;
    let Some(m) = metrics.iter().find(|m| m.name == name) else {
        return Vec::new();
    };
    let Some(Data::Sum(sum)) = &m.data else {
        panic!("a sum")
    };
    assert!(sum.is_monotonic);
    (sum.data_points.iter())
        .map(|p| {
            let task = (p.attributes.iter())
                .find(|a| a.key == key)
                .map(|a| format!("{:?}", a.value))
                .unwrap_or_default();
            let Some(Value::AsInt(v)) = p.value else {
                panic!("an integer")
            };
            (task, v)
        })
        .collect()
}

fn end_task(m: &mut Metrics, attr: &Attributor, pid: u32, name: &str, code: u32) {
    let key = |pid| ProcKey {
        pid,
        start_ticks: 1,
    };
    let mut proc = pipetrace_core::tree::Proc::in_test(key(pid), 0);
    proc.exit = Some(pipetrace_core::tree::Exit {
        time_ns: 2,
        status: code << 8,
    });
    let task = Finished::Task {
        proc,
        run: key(100),
        info: pipetrace_core::attribution::TaskInfo::named(name.into()),
        usage: Box::default(),
    };
    m.on_finished(&task, attr);
}

#[test]
fn failed_tasks_are_counted_by_name_and_a_success_is_not() {
    use pipetrace_config::Temporality::{Cumulative, Delta};
    let host = pipetrace_core::port::fake::FakeHost::default();
    let cfg = pipetrace_config::Attribution::default();
    let attr = Attributor::new(
        pipetrace_core::attribution::Mode::Agent,
        &cfg,
        0,
        host.shared(),
    );
    let attr = attr.unwrap();
    let f = AgentFigures::default();
    // Per export: the value a cumulative and a delta export carry.
    for (temporality, expected) in [(Cumulative, [2, 2, 3]), (Delta, [2, 0, 1])] {
        let mut m = metrics(temporality);
        assert!(failed_points(&m.collect(&f, NONE).unwrap()).is_empty());
        end_task(&mut m, &attr, 1, "align", 1);
        end_task(&mut m, &attr, 2, "align", 0);
        end_task(&mut m, &attr, 3, "align", 2);
        let mut got = vec![failed_points(&m.collect(&f, NONE).unwrap())];
        got.push(failed_points(&m.collect(&f, NONE).unwrap()));
        end_task(&mut m, &attr, 4, "align", 1);
        got.push(failed_points(&m.collect(&f, NONE).unwrap()));
        let values: Vec<i64> = got.iter().map(|p| p[0].1).collect();
        assert_eq!(values, expected, "{temporality:?}: {got:?}");
        assert!(got[0][0].0.contains("align"), "{got:?}");
    }
}

/// Each run's findings, counted by pipeline and kind, for alerts on a kind.
#[test]
fn the_findings_of_runs_judged_are_counted_by_kind() {
    let f = AgentFigures::default();
    let mut m = metrics(pipetrace_config::Temporality::Cumulative);
    let points = |m: &mut Metrics| {
        let req = m.collect(&f, NONE).unwrap();
        counter_points(
            &req,
            pipetrace_semconv::metric::FINDINGS,
            pipetrace_semconv::attr::FINDING_KIND,
        )
    };
    assert!(points(&mut m).is_empty(), "no run judged, no series");
    m.found("wgs", ["under_ask", "over_ask", "over_ask"].into_iter());
    let got = points(&mut m);
    let kinds: Vec<(bool, i64)> = got
        .iter()
        .map(|(k, v)| (k.contains("over_ask"), *v))
        .collect();
    assert_eq!(kinds, [(true, 2), (false, 1)], "{got:?}");
    m.found("wgs", ["under_ask"].into_iter());
    let got = points(&mut m);
    assert_eq!(
        got.iter().map(|p| p.1).collect::<Vec<_>>(),
        [2, 2],
        "{got:?}"
    );
}
