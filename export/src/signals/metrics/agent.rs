//! Self-telemetry: what pipetrace itself lost, dropped or failed to send, and how much it
//! tracks, as `pipetrace.agent.*` metrics. Nothing is lost silently. These stay cumulative
//! (since the agent started) whatever the temporality of the pipeline metrics.
use std::time::SystemTime;

use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, Gauge, Metric, NumberDataPoint, Sum, metric::Data,
    number_data_point::Value,
};
use pipetrace_semconv::metric;

/// The agent's own figures at one moment.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
// A status file from an older agent lacks the newer figures: they read as 0.
#[serde(default)]
pub struct AgentFigures {
    /// Kernel records refused by a full ring buffer.
    pub lost_events: u64,
    /// Updates of the kernel's per-process sums refused by a full map.
    pub accumulator_lost: u64,
    /// Ring-buffer records that did not decode.
    pub undecodable: u64,
    /// Spans refused by a full export queue.
    pub spans_dropped: u64,
    /// Spans the OTLP endpoint or the file did not take.
    pub export_failures: u64,
    /// Metric export requests refused for good, dropped, or spooled.
    pub metric_exports_failed: u64,
    pub metric_exports_dropped: u64,
    pub metric_exports_spooled: u64,
    /// Processes that ended with no figures at all.
    pub usage_missing: u64,
    /// Processes whose figures were taken at exit (no reap-time report).
    pub usage_at_exit: u64,
    /// Kernel figures dropped as physically impossible.
    pub figures_dropped: u64,
    /// GPUs that stopped answering NVML.
    pub gpu_errors: u64,
    /// Metric attribute sets placed in the overflow series.
    pub series_overflowed: u64,
    /// Processes known (the whole host's tree) and in runs now.
    pub processes_known: u64,
    pub processes_tracked: u64,
    pub rss_bytes: u64,
    /// Failed OTLP attempts tried again.
    pub export_retries: u64,
    /// Spans written to the on-disk spool.
    pub spans_spooled: u64,
    /// Encoded telemetry waiting in memory.
    pub export_queue_bytes: u64,
    /// Attribute values cut to `export.limits`' value length.
    pub attributes_truncated: u64,
    /// Attributes, events and links left out past `export.limits`' counts.
    pub limits_dropped: u64,
    /// How long the node has been idle, seconds (0 before `host.idle_after`); none outside
    /// a node agent, or when the host's CPU figures could not be read.
    pub host_idle_s: Option<u64>,
}

fn nanos(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn point(start: SystemTime, now: SystemTime, v: u64) -> NumberDataPoint {
    NumberDataPoint {
        start_time_unix_nano: nanos(start),
        time_unix_nano: nanos(now),
        value: Some(Value::AsInt(i64::try_from(v).unwrap_or(i64::MAX))),
        ..Default::default()
    }
}

/// A figure of the agent's own: its name, unit, description and where it is read.
type Figure = (
    &'static str,
    &'static str,
    &'static str,
    fn(&AgentFigures) -> u64,
);

/// Counted since the agent started.
const COUNTERS: [Figure; 17] = [
    (
        metric::AGENT_EVENTS_LOST,
        "{event}",
        "Kernel events lost to a full ring buffer",
        |f| f.lost_events,
    ),
    (
        metric::AGENT_ACCUMULATOR_LOST,
        "{update}",
        "Updates of the kernel's per-process sums dropped by a full map",
        |f| f.accumulator_lost,
    ),
    (
        metric::AGENT_RECORDS_UNDECODABLE,
        "{record}",
        "Kernel records that did not decode",
        |f| f.undecodable,
    ),
    (
        metric::AGENT_SPANS_DROPPED,
        "{span}",
        "Spans dropped by a full export queue",
        |f| f.spans_dropped,
    ),
    (
        metric::AGENT_EXPORT_FAILURES,
        "{span}",
        "Spans the OTLP endpoint or file did not take",
        |f| f.export_failures,
    ),
    (
        metric::AGENT_METRIC_EXPORTS_FAILED,
        "{request}",
        "Metric export requests the OTLP endpoint or file did not take",
        |f| f.metric_exports_failed,
    ),
    (
        metric::AGENT_METRIC_EXPORTS_DROPPED,
        "{request}",
        "Metric export requests dropped",
        |f| f.metric_exports_dropped,
    ),
    (
        metric::AGENT_METRIC_EXPORTS_SPOOLED,
        "{request}",
        "Metric export requests written to the on-disk spool",
        |f| f.metric_exports_spooled,
    ),
    (
        metric::AGENT_USAGE_MISSING,
        "{process}",
        "Processes that ended with no usage figures at all",
        |f| f.usage_missing,
    ),
    (
        metric::AGENT_USAGE_AT_EXIT,
        "{process}",
        "Processes whose figures were taken at exit: no reap-time report came",
        |f| f.usage_at_exit,
    ),
    (
        metric::AGENT_GPU_ERRORS,
        "{error}",
        "GPUs that stopped answering NVML",
        |f| f.gpu_errors,
    ),
    (
        metric::AGENT_FIGURES_DROPPED,
        "{figure}",
        "Kernel figures dropped as physically impossible",
        |f| f.figures_dropped,
    ),
    (
        metric::AGENT_SERIES_OVERFLOWED,
        "{series}",
        "Metric attribute sets put in the overflow series",
        |f| f.series_overflowed,
    ),
    (
        metric::AGENT_EXPORT_RETRIES,
        "{request}",
        "OTLP export attempts tried again after a retryable failure",
        |f| f.export_retries,
    ),
    (
        metric::AGENT_SPANS_SPOOLED,
        "{span}",
        "Spans written to the on-disk spool",
        |f| f.spans_spooled,
    ),
    (
        metric::AGENT_ATTRIBUTES_TRUNCATED,
        "{attribute}",
        "Attribute values cut to export.limits' value length",
        |f| f.attributes_truncated,
    ),
    (
        metric::AGENT_LIMITS_DROPPED,
        "{item}",
        "Attributes, events and links left out past export.limits' counts",
        |f| f.limits_dropped,
    ),
];

/// What holds now.
const GAUGES: [Figure; 4] = [
    (
        metric::AGENT_EXPORT_QUEUE_USAGE,
        "By",
        "Encoded telemetry waiting in memory to be sent",
        |f| f.export_queue_bytes,
    ),
    (
        metric::AGENT_PROCESSES_KNOWN,
        "{process}",
        "Processes in the agent's tree",
        |f| f.processes_known,
    ),
    (
        metric::AGENT_PROCESSES_TRACKED,
        "{process}",
        "Processes in runs now",
        |f| f.processes_tracked,
    ),
    (
        metric::AGENT_MEMORY_RSS,
        "By",
        "The agent's resident memory",
        |f| f.rss_bytes,
    ),
];

pub(crate) fn metrics(f: &AgentFigures, start: SystemTime, now: SystemTime) -> Vec<Metric> {
    let metric = |(name, unit, description, _): &Figure, data| Metric {
        name: (*name).into(),
        unit: (*unit).into(),
        description: (*description).into(),
        data: Some(data),
        ..Default::default()
    };
    let counter = |fig: &Figure| {
        metric(
            fig,
            Data::Sum(Sum {
                data_points: vec![point(start, now, (fig.3)(f))],
                aggregation_temporality: AggregationTemporality::Cumulative as i32,
                is_monotonic: true,
            }),
        )
    };
    let gauge = |fig: &Figure, v: u64| {
        metric(
            fig,
            Data::Gauge(Gauge {
                data_points: vec![point(now, now, v)],
            }),
        )
    };
    let mut out: Vec<Metric> = COUNTERS.iter().map(counter).collect();
    out.extend(GAUGES.iter().map(|g| gauge(g, (g.3)(f))));
    if let Some(idle) = f.host_idle_s {
        const IDLE: Figure = (
            metric::HOST_IDLE,
            "s",
            "How long this node has run no pipeline work and used almost no CPU, once that \
             lasted host.idle_after (0 otherwise)",
            |_| 0,
        );
        out.push(gauge(&IDLE, idle));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idle_points(f: &AgentFigures) -> Vec<(String, Option<Value>)> {
        let now = SystemTime::now();
        let ms = metrics(f, now, now);
        let idle = ms.iter().filter(|m| m.name == metric::HOST_IDLE);
        idle.map(|m| match &m.data {
            Some(Data::Gauge(g)) => (m.unit.clone(), g.data_points[0].value),
            other => panic!("a gauge: {other:?}"),
        })
        .collect()
    }

    #[test]
    fn host_idle_is_a_gauge_in_seconds_only_where_it_is_judged() {
        assert!(idle_points(&AgentFigures::default()).is_empty());
        for v in [0, 7200] {
            let f = AgentFigures {
                host_idle_s: Some(v),
                ..Default::default()
            };
            let want = vec![("s".to_string(), Some(Value::AsInt(v as i64)))];
            assert_eq!(idle_points(&f), want);
        }
    }

    /// Each kernel-side loss is its own cumulative counter: what a full ring buffer refused
    /// and what a full accumulator map refused are told apart.
    #[test]
    fn kernel_losses_are_counters_of_their_own() {
        let f = AgentFigures {
            lost_events: 3,
            accumulator_lost: 5,
            ..Default::default()
        };
        let now = SystemTime::now();
        let ms = metrics(&f, now, now);
        let sum = |name: &str| {
            let m = ms.iter().find(|m| m.name == name).expect(name);
            match &m.data {
                Some(Data::Sum(s)) if s.is_monotonic => (m.unit.clone(), s.data_points[0].value),
                other => panic!("{name}: a monotonic sum, not {other:?}"),
            }
        };
        assert_eq!(
            sum(metric::AGENT_EVENTS_LOST),
            ("{event}".to_string(), Some(Value::AsInt(3)))
        );
        assert_eq!(
            sum(metric::AGENT_ACCUMULATOR_LOST),
            ("{update}".to_string(), Some(Value::AsInt(5)))
        );
    }
}
