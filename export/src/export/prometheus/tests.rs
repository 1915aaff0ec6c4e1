use opentelemetry_proto::tonic::{
    common::v1::{AnyValue, KeyValue, any_value},
    metrics::v1::{
        AggregationTemporality, Gauge, Metric, NumberDataPoint, ResourceMetrics, ScopeMetrics, Sum,
        metric::Data, number_data_point::Value,
    },
    resource::v1::Resource,
};

use pipetrace_semconv::{attr, metric};

use super::*;

fn kv(k: &str, v: &str) -> KeyValue {
    KeyValue {
        key: k.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(v.into())),
        }),
    }
}

fn point(task: &str, v: i64, stale: bool) -> NumberDataPoint {
    NumberDataPoint {
        attributes: vec![kv(attr::CICD_PIPELINE_TASK_NAME, task)],
        value: (!stale).then_some(Value::AsInt(v)),
        flags: u32::from(stale),
        ..Default::default()
    }
}

fn sum(
    name: &str,
    unit: &str,
    monotonic: bool,
    delta: bool,
    points: Vec<NumberDataPoint>,
) -> Metric {
    let t = match delta {
        true => AggregationTemporality::Delta,
        false => AggregationTemporality::Cumulative,
    };
    Metric {
        name: name.into(),
        unit: unit.into(),
        description: format!("{name} \\ help"),
        data: Some(Data::Sum(Sum {
            data_points: points,
            aggregation_temporality: t as i32,
            is_monotonic: monotonic,
        })),
        ..Default::default()
    }
}

fn gauge(name: &str, points: Vec<NumberDataPoint>) -> Metric {
    Metric {
        name: name.into(),
        unit: "{task}".into(),
        data: Some(Data::Gauge(Gauge {
            data_points: points,
        })),
        ..Default::default()
    }
}

fn request(metrics: Vec<Metric>) -> ExportMetricsServiceRequest {
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(Resource {
                attributes: vec![
                    kv(attr::HOST_NAME, "node-7"),
                    kv(attr::SERVICE_NAME, "pipetrace"),
                ],
                ..Default::default()
            }),
            scope_metrics: vec![ScopeMetrics {
                metrics,
                ..Default::default()
            }],
            schema_url: String::new(),
        }],
    }
}

fn store_after(requests: &[ExportMetricsServiceRequest]) -> Store {
    store_keeping(requests, std::time::Duration::ZERO)
}

fn store_keeping(requests: &[ExportMetricsServiceRequest], keep: std::time::Duration) -> Store {
    let mut s = Store {
        keep_ended: keep,
        ..Store::default()
    };
    for r in requests {
        s.update(r, &[attr::HOST_NAME.to_string()]);
    }
    s
}

#[test]
fn series_are_named_and_labelled_as_prometheus_translates_otlp() {
    let s = store_after(&[request(vec![
        sum(
            metric::OOM_KILLS,
            "{kill}",
            true,
            false,
            vec![point("sort", 2, false)],
        ),
        sum(
            metric::PROCESS_MEMORY_USAGE,
            "By",
            false,
            false,
            vec![point("sort", 4096, false)],
        ),
        gauge(metric::TASKS_RUNNING, vec![point("align \"x\"", 1, false)]),
    ])]);
    let om = text::render(&s, true);
    let expected = [
        "# HELP target Target metadata\n# TYPE target info\n",
        "target_info{host_name=\"node-7\",service_name=\"pipetrace\"} 1\n",
        "# HELP pipetrace_process_oom_kills pipetrace.process.oom_kills \\\\ help\n",
        "# TYPE pipetrace_process_oom_kills counter\n",
        "pipetrace_process_oom_kills_total{cicd_pipeline_task_name=\"sort\",host_name=\"node-7\"} 2\n",
        "# TYPE process_memory_usage_bytes gauge\n",
        "process_memory_usage_bytes{cicd_pipeline_task_name=\"sort\",host_name=\"node-7\"} 4096\n",
        "# TYPE pipetrace_tasks_running gauge\n",
        "pipetrace_tasks_running{cicd_pipeline_task_name=\"align \\\"x\\\"\",host_name=\"node-7\"} 1\n",
    ];
    for e in expected {
        assert!(om.contains(e), "{e:?} not in\n{om}");
    }
    assert!(om.ends_with("# EOF\n"), "{om}");
    // The older text format names a counter's family with its `_total`.
    let text = text::render(&s, false);
    assert!(
        text.contains("# TYPE pipetrace_process_oom_kills_total counter\n"),
        "{text}"
    );
    assert!(!text.contains("# EOF"), "{text}");
}

#[test]
fn counters_stay_until_their_series_ends_and_gauges_are_the_latest_export() {
    let s = store_after(&[
        request(vec![
            sum(
                "c",
                "s",
                true,
                false,
                vec![point("a", 5, false), point("b", 1, false)],
            ),
            gauge("g", vec![point("a", 1, false)]),
        ]),
        // The next export: b's series ended (stale marker), the gauge is left out.
        request(vec![sum(
            "c",
            "s",
            true,
            false,
            vec![point("a", 7, false), point("b", 0, true)],
        )]),
    ]);
    let text = text::render(&s, true);
    assert!(
        text.contains("c_seconds_total{cicd_pipeline_task_name=\"a\",host_name=\"node-7\"} 7\n"),
        "{text}"
    );
    assert!(!text.contains("task_name=\"b\""), "{text}");
    assert!(!text.contains("\ng{"), "{text}");
}

#[test]
fn an_ended_counter_stays_at_its_final_value_for_keep_ended() {
    let c = |v, stale| request(vec![sum("c", "", true, false, vec![point("a", v, stale)])]);
    let minute = std::time::Duration::from_secs(60);
    // Ended, then two more exports: a scrape still reads its final value.
    let s = store_keeping(
        &[c(1, false), c(0, true), request(vec![]), request(vec![])],
        minute,
    );
    let text = text::render(&s, true);
    assert!(
        text.contains("c_total{cicd_pipeline_task_name=\"a\",host_name=\"node-7\"} 1\n"),
        "{text}"
    );
    // Kept for no time: gone at the next export.
    let s = store_keeping(
        &[c(1, false), c(0, true), request(vec![])],
        std::time::Duration::ZERO,
    );
    assert!(!text::render(&s, true).contains("c_total{"));
}

#[test]
fn delta_exports_add_up_to_totals() {
    let d = |v| request(vec![sum("c", "", true, true, vec![point("a", v, false)])]);
    let s = store_after(&[d(2), d(3), d(0)]);
    let text = text::render(&s, true);
    assert!(
        text.contains("c_total{cicd_pipeline_task_name=\"a\",host_name=\"node-7\"} 5\n"),
        "{text}"
    );
}

#[tokio::test]
async fn a_scrape_reads_the_latest_export_and_a_taken_port_is_refused() {
    let cfg = pipetrace_config::Prometheus {
        listen: Some("127.0.0.1:0".into()),
        ..Default::default()
    };
    let endpoint = Bound::bind(&cfg).unwrap().unwrap().serve().unwrap();
    endpoint.update(&request(vec![gauge(
        metric::TASKS_STALLED,
        vec![point("a", 1, false)],
    )]));
    let url = format!("http://{}/metrics", endpoint.addr);
    let client = reqwest::Client::new();
    let r = (client.get(&url))
        .header(
            "Accept",
            "application/openmetrics-text;version=1.0.0,text/plain;q=0.5",
        )
        .send()
        .await
        .unwrap();
    let ct = r.headers()["content-type"].to_str().unwrap().to_string();
    assert!(ct.starts_with("application/openmetrics-text"), "{ct}");
    let body = r.text().await.unwrap();
    assert!(
        body.contains(
            "pipetrace_tasks_stalled{cicd_pipeline_task_name=\"a\",host_name=\"node-7\"} 1"
        ),
        "{body}"
    );
    // The same address again: refused, with what to do.
    let again = pipetrace_config::Prometheus {
        listen: Some(endpoint.addr.to_string()),
        ..Default::default()
    };
    let err = Bound::bind(&again)
        .err()
        .expect("the port is taken")
        .to_string();
    assert!(
        err.contains("metrics.prometheus.listen") && err.contains("choose a free"),
        "{err}"
    );
}
