//! The series table as an OTLP ExportMetricsServiceRequest.
use std::{
    collections::{BTreeMap, HashMap},
    time::SystemTime,
};

use opentelemetry_proto::tonic::{
    collector::metrics::v1::ExportMetricsServiceRequest,
    common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value},
    metrics::v1::{
        AggregationTemporality, Gauge, Metric, NumberDataPoint, ResourceMetrics, ScopeMetrics, Sum,
        metric::Data, number_data_point::Value,
    },
    resource::v1::Resource,
};
use pipetrace_config::Temporality;
use pipetrace_semconv::{attr, metric};

use super::series::{Counters, Series, SeriesKey, Table};
use pipetrace_core::accounting::Measured;

fn kv(key: &str, v: any_value::Value) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(v) }),
    }
}

fn s(key: &str, v: &str) -> KeyValue {
    kv(key, any_value::Value::StringValue(v.into()))
}

pub(crate) fn resource(r: &opentelemetry_sdk::Resource) -> Resource {
    Resource {
        attributes: r.iter().map(|(k, v)| s(k.as_str(), &v.as_str())).collect(),
        ..Default::default()
    }
}

fn nanos(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn series_attrs(k: &SeriesKey) -> Vec<KeyValue> {
    if k.overflow {
        return vec![kv(
            attr::OTEL_METRIC_OVERFLOW,
            any_value::Value::BoolValue(true),
        )];
    }
    vec![
        s(attr::CICD_PIPELINE_NAME, &k.pipeline),
        s(attr::CICD_PIPELINE_TASK_NAME, &k.task),
        s(attr::TOOL_NAME, &k.tool),
    ]
}

/// An attribute (key, value; empty for none) and the counter it selects.
type Dim = (&'static str, &'static str, fn(&Counters) -> u64);

/// One counter of a series: cumulative since the series started, or the change since the
/// last export.
struct Point<'a> {
    key: &'a SeriesKey,
    series: &'a Series,
    /// Retired: a staleness marker instead of a value.
    stale: bool,
}

/// OTLP `DataPointFlags.FLAG_NO_RECORDED_VALUE`: the series has ended.
const NO_RECORDED_VALUE: u32 = 1;

struct Builder {
    temporality: Temporality,
    now: u64,
}

impl Builder {
    fn counter(
        &self,
        name: &str,
        unit: &str,
        description: &str,
        points: &[Point],
        dims: &[Dim],
        seconds: bool,
    ) -> Metric {
        let delta = self.temporality == Temporality::Delta;
        let mut data_points = Vec::new();
        for p in points {
            let (total, before) = (p.series.total(), p.series.exported);
            for (dim_key, dim_value, get) in dims {
                let v = if delta {
                    get(&total).saturating_sub(get(&before))
                } else {
                    get(&total)
                };
                let mut attributes = series_attrs(p.key);
                if !dim_key.is_empty() {
                    attributes.push(s(dim_key, dim_value));
                }
                let start = if delta {
                    p.series.exported_at
                } else {
                    p.series.start
                };
                let value = if seconds {
                    Value::AsDouble(v as f64 / 1e9)
                } else {
                    Value::AsInt(v as i64)
                };
                data_points.push(NumberDataPoint {
                    attributes,
                    start_time_unix_nano: nanos(start),
                    time_unix_nano: self.now,
                    value: (!p.stale).then_some(value),
                    flags: if p.stale { NO_RECORDED_VALUE } else { 0 },
                    ..Default::default()
                });
            }
        }
        let temporality = if delta {
            AggregationTemporality::Delta
        } else {
            AggregationTemporality::Cumulative
        };
        Metric {
            name: name.into(),
            unit: unit.into(),
            description: description.into(),
            data: Some(Data::Sum(Sum {
                data_points,
                aggregation_temporality: temporality as i32,
                is_monotonic: true,
            })),
            ..Default::default()
        }
    }

    fn point(&self, attributes: Vec<KeyValue>, start: SystemTime, v: u64) -> NumberDataPoint {
        NumberDataPoint {
            attributes,
            start_time_unix_nano: nanos(start),
            time_unix_nano: self.now,
            value: Some(Value::AsInt(v as i64)),
            ..Default::default()
        }
    }

    /// A series' point: its value, or the staleness marker once retired.
    fn series_point(&self, p: &Point, start: SystemTime, v: u64) -> NumberDataPoint {
        let mut point = self.point(series_attrs(p.key), start, v);
        if p.stale {
            point.value = None;
            point.flags = NO_RECORDED_VALUE;
        }
        point
    }
}

/// Tasks by (pipeline, task name): how many run, how many of those are stalled, and how
/// many failed since `since`.
pub struct TaskCounts<'a> {
    pub running: &'a BTreeMap<(String, String), u64>,
    pub stalled: &'a BTreeMap<(String, String), u64>,
    pub failed: &'a Failed,
    /// The findings of the runs judged, by (pipeline, kind).
    pub findings: &'a Failed,
    pub since: SystemTime,
}

/// Counts by (pipeline, a second name: the task, a finding's kind): the total, and the
/// total at the last export.
#[derive(Default)]
pub struct Failed(BTreeMap<(String, String), (u64, u64)>);

impl Failed {
    pub(crate) fn count(&mut self, pipeline: String, task: String) {
        self.0.entry((pipeline, task)).or_default().0 += 1;
    }

    /// What was counted went out.
    pub(crate) fn exported(&mut self) {
        for (total, exported) in self.0.values_mut() {
            *exported = *total;
        }
    }
}

pub(crate) fn request(
    table: &Table,
    limits: &HashMap<(String, String), u64>,
    tasks: TaskCounts,
    resource: &Resource,
    temporality: Temporality,
    measured: Measured,
    now: SystemTime,
) -> ExportMetricsServiceRequest {
    let b = Builder {
        temporality,
        now: nanos(now),
    };
    let points = points_of(table);
    let mut metrics = counters(&b, &points, measured);
    metrics.extend(memory(&b, &points, now));
    metrics.extend(task_gauges(&b, limits, tasks, now));
    // Before any series exists a metric would have no points; the OTel SDK leaves such out.
    metrics.retain(|m| match &m.data {
        Some(Data::Sum(x)) => !x.data_points.is_empty(),
        Some(Data::Gauge(x)) => !x.data_points.is_empty(),
        _ => true,
    });
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(resource.clone()),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(InstrumentationScope {
                    name: "pipetrace".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..Default::default()
                }),
                metrics,
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
    }
}

/// Every series, the live ones in key order, then those retired since the last export
/// (their final point, flagged stale).
fn points_of(table: &Table) -> Vec<Point<'_>> {
    let mut keys: Vec<&SeriesKey> = table.series.keys().collect();
    keys.sort();
    let mut points: Vec<Point> = keys
        .into_iter()
        .map(|key| Point {
            key,
            series: &table.series[key],
            stale: false,
        })
        .collect();
    points.extend(table.retired.iter().map(|(key, series)| Point {
        key,
        series,
        stale: true,
    }));
    points
}

/// The counters: CPU, disk I/O, run-queue delay, OOM kills, and what this kernel measures
/// (network bytes, block-I/O waits).
fn counters(b: &Builder, points: &[Point], measured: Measured) -> Vec<Metric> {
    let mut metrics = vec![
        b.counter(
            metric::PROCESS_CPU_TIME,
            "s",
            "CPU seconds",
            points,
            &[
                (attr::CPU_MODE, "user", |c| c.cpu_user_ns),
                (attr::CPU_MODE, "system", |c| c.cpu_system_ns),
            ],
            true,
        ),
        b.counter(
            metric::PROCESS_DISK_IO,
            "By",
            "Bytes read from and written to storage",
            points,
            &[
                (attr::DISK_IO_DIRECTION, "read", |c| c.disk_read_bytes),
                (attr::DISK_IO_DIRECTION, "write", |c| c.disk_write_bytes),
            ],
            false,
        ),
        b.counter(
            metric::RUN_QUEUE_DELAY,
            "s",
            "Seconds runnable but waiting for a CPU",
            points,
            &[("", "", |c| c.run_delay_ns)],
            true,
        ),
    ];
    metrics.push(b.counter(
        metric::OOM_KILLS,
        "{kill}",
        "Processes the OOM killer ended",
        points,
        &[("", "", |c| c.oom_kills)],
        false,
    ));
    if measured.network {
        metrics.push(b.counter(
            metric::PROCESS_NETWORK_IO,
            "By",
            "Bytes sent and received on IPv4/IPv6 sockets",
            points,
            &[
                (attr::NETWORK_IO_DIRECTION, "transmit", |c| c.net_tx_bytes),
                (attr::NETWORK_IO_DIRECTION, "receive", |c| c.net_rx_bytes),
            ],
            false,
        ));
    }
    if measured.io_wait {
        metrics.push(b.counter(
            metric::DISK_WAIT_TIME,
            "s",
            "Seconds waiting for block I/O",
            points,
            &[("", "", |c| c.disk_wait_ns)],
            true,
        ));
    }
    metrics
}

/// Resident memory now (an up-down counter) and the interval's peak.
fn memory(b: &Builder, points: &[Point], now: SystemTime) -> Vec<Metric> {
    let mut metrics = Vec::with_capacity(2);
    // Up-down counters stay cumulative under a delta preference (as the OTel SDK does).
    let usage: Vec<NumberDataPoint> = points
        .iter()
        .map(|p| b.series_point(p, p.series.start, p.series.rss_now))
        .collect();
    metrics.push(Metric {
        name: metric::PROCESS_MEMORY_USAGE.into(),
        unit: "By".into(),
        description: "Resident memory of running processes".into(),
        data: Some(Data::Sum(Sum {
            data_points: usage,
            aggregation_temporality: AggregationTemporality::Cumulative as i32,
            is_monotonic: false,
        })),
        ..Default::default()
    });
    let peaks: Vec<NumberDataPoint> = points
        .iter()
        .map(|p| b.series_point(p, now, p.series.peak))
        .collect();
    metrics.push(gauge(
        metric::MEMORY_PEAK,
        "Highest resident-memory high-water mark in the interval",
        peaks,
    ));
    metrics
}

/// Per (pipeline, task): the cgroup's memory limit, and the tasks running and stalled now.
fn task_gauges(
    b: &Builder,
    limits: &HashMap<(String, String), u64>,
    tasks: TaskCounts,
    now: SystemTime,
) -> Vec<Metric> {
    let mut metrics = Vec::new();
    if !limits.is_empty() {
        let mut limits: Vec<_> = limits.iter().collect();
        limits.sort();
        let points = limits
            .into_iter()
            .map(|((pipeline, task), bytes)| {
                let a = vec![
                    s(attr::CICD_PIPELINE_NAME, pipeline),
                    s(attr::CICD_PIPELINE_TASK_NAME, task),
                ];
                b.point(a, now, *bytes)
            })
            .collect();
        metrics.push(gauge(
            metric::TASK_MEMORY_LIMIT,
            "Memory limit of the task's cgroup",
            points,
        ));
    }
    let counts = [
        (metric::TASKS_RUNNING, "Tasks running now", tasks.running),
        (
            metric::TASKS_STALLED,
            "Running tasks with no progress for diagnosis.stall_after",
            tasks.stalled,
        ),
    ];
    for (name, description, by_task) in counts.into_iter().filter(|c| !c.2.is_empty()) {
        let points = by_task
            .iter()
            .map(|((pipeline, task), n)| {
                let a = vec![
                    s(attr::CICD_PIPELINE_NAME, pipeline),
                    s(attr::CICD_PIPELINE_TASK_NAME, task),
                ];
                b.point(a, now, *n)
            })
            .collect();
        let mut g = gauge(name, description, points);
        g.unit = "{task}".into();
        metrics.push(g);
    }
    let failed = (metric::TASKS_FAILED, "{task}", "Tasks that failed");
    let by_task = (attr::CICD_PIPELINE_TASK_NAME, tasks.since);
    metrics.extend(counted(b, tasks.failed, failed, by_task));
    let found = (metric::FINDINGS, "{finding}", "Findings of the runs judged");
    let by_kind = (attr::FINDING_KIND, tasks.since);
    metrics.extend(counted(b, tasks.findings, found, by_kind));
    metrics
}

/// A counter per (pipeline, `key`) from the agent's start (or the change since the last
/// export): failed tasks, findings.
fn counted(
    b: &Builder,
    counts: &Failed,
    (name, unit, description): (&str, &str, &str),
    (key, since): (&str, SystemTime),
) -> Option<Metric> {
    if counts.0.is_empty() {
        return None;
    }
    let delta = b.temporality == Temporality::Delta;
    let data_points = (counts.0.iter())
        .map(|((pipeline, second), (total, exported))| {
            let a = vec![s(attr::CICD_PIPELINE_NAME, pipeline), s(key, second)];
            let v = if delta { total - exported } else { *total };
            b.point(a, since, v)
        })
        .collect();
    let temporality = if delta {
        AggregationTemporality::Delta
    } else {
        AggregationTemporality::Cumulative
    };
    Some(Metric {
        name: name.into(),
        unit: unit.into(),
        description: description.into(),
        data: Some(Data::Sum(Sum {
            data_points,
            aggregation_temporality: temporality as i32,
            is_monotonic: true,
        })),
        ..Default::default()
    })
}

fn gauge(name: &str, description: &str, data_points: Vec<NumberDataPoint>) -> Metric {
    Metric {
        name: name.into(),
        unit: "By".into(),
        description: description.into(),
        data: Some(Data::Gauge(Gauge { data_points })),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(t: &Table) -> Vec<String> {
        let req = request(
            t,
            &HashMap::new(),
            TaskCounts {
                running: &BTreeMap::new(),
                stalled: &BTreeMap::new(),
                failed: &Failed::default(),
                findings: &Failed::default(),
                since: SystemTime::now(),
            },
            &Resource::default(),
            Temporality::Cumulative,
            Measured::default(),
            SystemTime::now(),
        );
        let m = &req.resource_metrics[0].scope_metrics[0].metrics;
        m.iter().map(|m| m.name.clone()).collect()
    }

    #[test]
    fn metrics_without_points_are_left_out() {
        let mut t = Table::new(10);
        assert!(names(&t).is_empty(), "{:?}", names(&t));
        t.get("p", "align", "bwa", SystemTime::now());
        let n = names(&t);
        for want in [
            metric::PROCESS_CPU_TIME,
            metric::PROCESS_MEMORY_USAGE,
            metric::MEMORY_PEAK,
        ] {
            assert!(n.iter().any(|x| x == want), "{want} in {n:?}");
        }
    }
}
